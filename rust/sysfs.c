// SPDX-License-Identifier: GPL-2.0
/*
 * Read-only sysfs attributes of /sys/class/misc/neuron_hbmN: arch, simulated,
 * channels, regions. The attribute tables are C (the Rust miscdevice binding
 * has no attribute groups); the values come from Rust.
 */
#include <linux/device.h>
#include <linux/miscdevice.h>
#include <linux/sysfs.h>

#include "helpers.h"

static u64 nhbm_value(struct device *dev, enum nhbm_attr which)
{
	return nhbm_sysfs_value(dev_get_drvdata(dev), which);
}

static ssize_t arch_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "v%llu\n", nhbm_value(dev, NHBM_ATTR_ARCH));
}
static DEVICE_ATTR_RO(arch);

static ssize_t simulated_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", nhbm_value(dev, NHBM_ATTR_SIMULATED));
}
static DEVICE_ATTR_RO(simulated);

static ssize_t channels_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", nhbm_value(dev, NHBM_ATTR_CHANNELS));
}
static DEVICE_ATTR_RO(channels);

static ssize_t regions_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", nhbm_value(dev, NHBM_ATTR_REGIONS));
}
static DEVICE_ATTR_RO(regions);

static struct attribute *nhbm_attrs[] = {
	&dev_attr_arch.attr,
	&dev_attr_simulated.attr,
	&dev_attr_channels.attr,
	&dev_attr_regions.attr,
	NULL,
};

static const struct attribute_group nhbm_group = {
	.attrs = nhbm_attrs,
};

const struct attribute_group *nhbm_attr_groups[] = {
	&nhbm_group,
	NULL,
};
