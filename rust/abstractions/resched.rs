// SPDX-License-Identifier: GPL-2.0-only

//! Preemption points for loops whose length a user chooses: each gives the
//! CPU away if needed and stops the loop once the caller was killed.

use crate::abstractions::helpers::{nhbm_cond_resched, nhbm_fatal_signal_pending};
use kernel::prelude::*;

/// Iterations of a cheap loop between two [`checkpoint`]s.
pub(crate) const EVERY: usize = 1024;

/// Reschedules if needed; `EINTR` once a fatal signal is pending, so that a
/// killed task stops at once (its caller then undoes what it did).
#[inline]
pub(crate) fn checkpoint() -> Result {
    // SAFETY: Both wrappers only need process context that may sleep, which
    // every caller (an ioctl, a KUnit test, module init) is.
    unsafe { nhbm_cond_resched() };
    // SAFETY: As above.
    if unsafe { nhbm_fatal_signal_pending() } {
        Err(EINTR)
    } else {
        Ok(())
    }
}

/// Reschedules if needed, for loops that must run to the end (teardown).
#[inline]
pub(crate) fn yield_now() {
    // SAFETY: See `checkpoint`.
    unsafe { nhbm_cond_resched() };
}

#[kunit_tests(neuron_hbm_resched)]
mod tests {
    use super::*;

    #[test]
    fn a_task_without_a_fatal_signal_goes_on() {
        for _ in 0..4 * EVERY {
            assert_eq!(checkpoint(), Ok(()));
            yield_now();
        }
    }
}
