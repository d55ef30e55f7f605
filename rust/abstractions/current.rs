// SPDX-License-Identifier: GPL-2.0-only

//! The calling task's process id as the initial pid namespace numbers it
//! (`task_tgid_nr(current)`, a static inline made callable by `sched.c`):
//! what debugfs, read from that namespace, names a plan's loader by. The
//! kernel crate's `Task::pid` reads a field of its own `task_struct`
//! binding, which does not give the task's pid on the 7.3 test kernel.

use crate::abstractions::helpers::nhbm_current_tgid;
use kernel::prelude::*;

/// The calling task's process (thread group) id in the initial pid
/// namespace.
pub(crate) fn tgid() -> i32 {
    // SAFETY: `task_tgid_nr` only reads the current task's tgid, which
    // never changes; every caller runs in process context.
    unsafe { nhbm_current_tgid() }
}

#[kunit_tests(neuron_hbm_current)]
mod tests {
    use super::*;

    #[test]
    fn the_tgid_is_the_one_the_kernel_crate_finds_through_c() {
        // KUnit runs in the insmod task, in the initial pid namespace, where
        // `task_tgid_nr_ns(current, NULL)` numbers it the same way.
        let t = tgid();
        assert!(t > 0);
        assert_eq!(t, kernel::current!().tgid_nr_ns(None));
    }
}
