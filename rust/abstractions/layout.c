// SPDX-License-Identifier: GPL-2.0-only
/*
 * The layout of the C structs Rust mirrors, as the C compiler sees it, for
 * the mirrors' build-time checks (miscdev.rs): compiled to assembly only,
 * the kernel's asm-offsets way, and turned into Rust constants (Kbuild).
 */
#include <linux/kbuild.h>

#include "helpers.h"

void nhbm_layout(void);

void nhbm_layout(void)
{
	DEFINE(NHBM_MISC_NODE_SIZE, sizeof(struct nhbm_misc_node));
	DEFINE(NHBM_MISC_NODE_ALIGN, __alignof__(struct nhbm_misc_node));
	OFFSET(NHBM_MISC_NODE_MISC, nhbm_misc_node, misc);
	OFFSET(NHBM_MISC_NODE_ATTR_VALUES, nhbm_misc_node, attr_values);
}
