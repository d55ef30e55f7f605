// SPDX-License-Identifier: GPL-2.0-only

//! The calling task's process id as the initial pid namespace numbers it
//! (`task_tgid_nr(current)`, a static inline made callable by `sched.c`):
//! what debugfs, read from that namespace, names a plan's loader by. The
//! kernel crate's `Task::pid` reads a field of its own `task_struct`
//! binding, which does not give the task's pid on the 7.3 test kernel.
//! And [`Process`], a counted reference to the calling process's
//! `struct pid`, numbered later as whoever asks sees it.

use crate::abstractions::helpers::nhbm_current_tgid;
use core::ptr::NonNull;
use kernel::{bindings, prelude::*, task::Task};

/// The calling task's process (thread group) id in the initial pid
/// namespace.
pub(crate) fn tgid() -> i32 {
    // SAFETY: `task_tgid_nr` only reads the current task's tgid, which
    // never changes; every caller runs in process context.
    unsafe { nhbm_current_tgid() }
}

/// The calling process (its thread group's `struct pid`), held counted: it
/// outlives the thread that took it and is numbered in the pid namespace
/// of whoever asks later, 0 where it is not visible or has exited.
pub(crate) struct Process(NonNull<bindings::pid>);

// SAFETY: a `struct pid` is reference-counted atomically; `pid_vnr` reads
// it under RCU and `put_pid` may drop the last count from any task.
unsafe impl Send for Process {}
// SAFETY: `&Process` only reads the pid's numbers (`pid_vnr`), which any
// task may do concurrently.
unsafe impl Sync for Process {}

impl Process {
    /// The calling process; `ESRCH` if it has none any more (never seen
    /// from a system call).
    pub(crate) fn current() -> Result<Self> {
        // SAFETY: `current` is a live task in process context;
        // `get_task_pid` takes a count on its thread group's pid, which a
        // running task always has.
        let pid =
            unsafe { bindings::get_task_pid(Task::current_raw(), bindings::pid_type_PIDTYPE_TGID) };
        NonNull::new(pid).map(Process).ok_or(ESRCH)
    }

    /// Its number in the calling task's pid namespace: 0 when it is not
    /// visible there or no task uses it any more.
    pub(crate) fn number_seen_by_caller(&self) -> u32 {
        // SAFETY: `self.0` holds a count (taken in `current`), so the pid
        // is valid; `pid_vnr` reads the caller's active namespace, which
        // is stable in process context.
        let nr = unsafe { bindings::pid_vnr(self.0.as_ptr()) };
        u32::try_from(nr).unwrap_or(0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the count taken in `current` is given back once.
        unsafe { bindings::put_pid(self.0.as_ptr()) };
    }
}

#[kunit_tests(neuron_hbm_current)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_sees_its_own_process_by_its_tgid() -> Result {
        let p = Process::current()?;
        // KUnit runs in the insmod task, in the initial pid namespace.
        assert_eq!(p.number_seen_by_caller(), tgid() as u32);
        Ok(())
    }

    #[test]
    fn the_tgid_is_the_one_the_kernel_crate_finds_through_c() {
        // KUnit runs in the insmod task, in the initial pid namespace, where
        // `task_tgid_nr_ns(current, NULL)` numbers it the same way.
        let t = tgid();
        assert!(t > 0);
        assert_eq!(t, kernel::current!().tgid_nr_ns(None));
    }
}
