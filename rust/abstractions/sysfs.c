// SPDX-License-Identifier: GPL-2.0-only
/*
 * Read-only sysfs attributes of /sys/class/misc/neuron_hbmN: arch, simulated,
 * channels, regions. The attribute table is C (the Rust miscdevice binding
 * has no attribute groups); the values are those the node was registered
 * with (struct nhbm_misc_node, miscdev.rs).
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
	/* misc_register() makes the miscdevice the device's drvdata. */
	const struct miscdevice *misc = dev_get_drvdata(dev);
	const struct nhbm_misc_node *node = container_of(misc, struct nhbm_misc_node, misc);

	return sysfs_emit(buf, "%s%llu\n", d->prefix, node->attr_values[d->which]);
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

static_assert(ARRAY_SIZE(nhbm_descs) == NHBM_ATTR_COUNT);

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

const size_t nhbm_misc_node_size = sizeof(struct nhbm_misc_node);
const size_t nhbm_misc_node_attrs_offset = offsetof(struct nhbm_misc_node, attr_values);

const struct attribute_group *nhbm_attr_groups[] = {
	&nhbm_group,
	NULL,
};
