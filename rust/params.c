// SPDX-License-Identifier: GPL-2.0
/*
 * The one string module parameter (Rust module parameters are integers and
 * booleans only).
 */
#include <linux/moduleparam.h>
#include <linux/module.h>

#include "helpers.h"

static char sim_arch[8] = "v2";
module_param_string(sim_arch, sim_arch, sizeof(sim_arch), 0444);
MODULE_PARM_DESC(sim_arch, "Arch of the simulated devices: v2 (default), v3 or v4");

const char *nhbm_sim_arch(void)
{
	return sim_arch;
}
