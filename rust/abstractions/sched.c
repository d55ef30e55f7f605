// SPDX-License-Identifier: GPL-2.0-only
/*
 * cond_resched(), fatal_signal_pending() and task_tgid_nr() are macros or
 * static inlines, and alloc_workqueue() a variadic macro, out of reach of
 * Rust: these wrappers make them callable.
 */
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/workqueue.h>

#include "helpers.h"

void nhbm_cond_resched(void)
{
	cond_resched();
}

bool nhbm_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

/* The calling task's process, as the initial pid namespace numbers it. */
pid_t nhbm_current_tgid(void)
{
	return task_tgid_nr(current);
}

struct workqueue_struct *nhbm_reset_wq_alloc(void)
{
	/* Unbound: a reset sleeps for up to minutes and ties no CPU down. */
	return alloc_workqueue("neuron_hbm_reset", WQ_UNBOUND, 0);
}

void nhbm_reset_wq_destroy(struct workqueue_struct *wq)
{
	destroy_workqueue(wq);
}
