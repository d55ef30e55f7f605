// SPDX-License-Identifier: GPL-2.0-only
/*
 * cond_resched() and fatal_signal_pending() are macros or static inlines,
 * out of reach of Rust: these two wrappers make them callable.
 */
#include <linux/sched.h>
#include <linux/sched/signal.h>

#include "helpers.h"

void nhbm_cond_resched(void)
{
	cond_resched();
}

bool nhbm_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}
