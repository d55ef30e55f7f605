// SPDX-License-Identifier: GPL-2.0
/*
 * Read-only sysfs attributes of /sys/class/misc/neuron_hbmN: arch, simulated,
 * channels, regions. The attribute table is C (the Rust miscdevice binding
 * has no attribute groups); the values come from Rust (nhbm_sysfs_value).
 */
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/sysfs.h>

#include "helpers.h"

/* One attribute: which value it shows, after which prefix. */
struct nhbm_attr_desc {
	struct device_attribute attr;
	enum nhbm_attr which;
	const char *prefix;
};

static ssize_t nhbm_attr_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	const struct nhbm_attr_desc *d = container_of(attr, struct nhbm_attr_desc, attr);

	return sysfs_emit(buf, "%s%llu\n", d->prefix,
			  nhbm_sysfs_value(dev_get_drvdata(dev), d->which));
}

#define NHBM_ATTR(_name, _which, _prefix) {				\
	.attr = __ATTR(_name, 0444, nhbm_attr_show, NULL),		\
	.which = _which,						\
	.prefix = _prefix,						\
}

static struct nhbm_attr_desc nhbm_descs[] = {
	NHBM_ATTR(arch, NHBM_ATTR_ARCH, "v"),
	NHBM_ATTR(simulated, NHBM_ATTR_SIMULATED, ""),
	NHBM_ATTR(channels, NHBM_ATTR_CHANNELS, ""),
	NHBM_ATTR(regions, NHBM_ATTR_REGIONS, ""),
};

static struct attribute *nhbm_attrs[ARRAY_SIZE(nhbm_descs) + 1] = {
	&nhbm_descs[0].attr.attr,
	&nhbm_descs[1].attr.attr,
	&nhbm_descs[2].attr.attr,
	&nhbm_descs[3].attr.attr,
	NULL,
};

static const struct attribute_group nhbm_group = {
	.attrs = nhbm_attrs,
};

const struct attribute_group *nhbm_attr_groups[] = {
	&nhbm_group,
	NULL,
};
