// SPDX-License-Identifier: GPL-2.0-only
/*
 * The device-memory cgroup controller (linux/cgroup_dmem.h) for Rust: real
 * symbols over its API, which is a set of inline stubs when
 * CONFIG_CGROUP_DMEM is off (registration then yields no region and every
 * charge succeeds without a pool).
 */
#include <linux/cgroup_dmem.h>
#include <linux/err.h>

#include "helpers.h"

int nhbm_dmem_register(u64 size, const char *name, struct dmem_cgroup_region **out)
{
	struct dmem_cgroup_init init = { .size = size };
	struct dmem_cgroup_region *region;

	region = dmem_cgroup_register_region(&init, "%s", name);
	if (IS_ERR(region))
		return PTR_ERR(region);
	*out = region;
	return 0;
}

void nhbm_dmem_unregister(struct dmem_cgroup_region *region)
{
	dmem_cgroup_unregister_region(region);
}

int nhbm_dmem_try_charge(struct dmem_cgroup_region *region, u64 size,
			 struct dmem_cgroup_pool_state **pool)
{
	return dmem_cgroup_try_charge(region, size, pool, NULL);
}

void nhbm_dmem_uncharge(struct dmem_cgroup_pool_state *pool, u64 size)
{
	dmem_cgroup_uncharge(pool, size);
}
