// SPDX-License-Identifier: GPL-2.0-only
/*
 * copy_from_user_inatomic_nontemporal() is a static inline, out of reach of
 * Rust: this wrapper makes it callable.
 */
#include <linux/kernel.h>
#include <linux/uaccess.h>

#include "helpers.h"

unsigned long nhbm_copy_from_user_nontemporal(void *to, const void __user *from,
					      unsigned long n)
{
	unsigned long left;

	/* x86-64 takes the length as an unsigned int. */
	if (n > UINT_MAX)
		return n;
	/*
	 * "inatomic" only means that the copy does not check for sleeping
	 * itself: from process context a fault is handled as in
	 * copy_from_user() (the kernel's own iov_iter calls it the same way).
	 */
	might_fault();
	left = copy_from_user_inatomic_nontemporal(to, from, n);
	/*
	 * Non-temporal stores are weakly ordered, and the release of the lock
	 * that publishes the memory does not order them: fence them here.
	 */
	wmb();
	return left;
}
