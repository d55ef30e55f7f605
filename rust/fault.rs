// SPDX-License-Identifier: GPL-2.0

//! Fault injection for tests: arm `fail_nth` (debugfs) with N and the N-th
//! injection point a device passes from then on fails once, with the errno
//! that point fails with for real (ENOMEM for allocations, EFAULT for user
//! copies, EIO for device transfers).

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// One device's injection state.
pub(crate) struct FaultInjector {
    /// Points still to pass before one fails; 0 = disarmed.
    countdown: Atomic<u32>,
    /// Points passed since load.
    passed: Atomic<u64>,
}

impl FaultInjector {
    /// Disarmed.
    pub(crate) const fn new() -> Self {
        Self {
            countdown: Atomic::new(0),
            passed: Atomic::new(0),
        }
    }

    /// Makes the `n`-th point from now fail (0 disarms).
    pub(crate) fn arm(&self, n: u32) {
        self.countdown.store(n, Relaxed);
    }

    /// Points still to pass before the armed failure (0 = none armed).
    pub(crate) fn remaining(&self) -> u32 {
        self.countdown.load(Relaxed)
    }

    /// Points passed since load.
    pub(crate) fn passed(&self) -> u64 {
        self.passed.load(Relaxed)
    }

    /// An injection point: `Err(err)` if this is the armed one.
    pub(crate) fn point(&self, err: Error) -> Result {
        self.passed.fetch_add(1, Relaxed);
        let mut cur = self.countdown.load(Relaxed);
        while cur != 0 {
            match self.countdown.cmpxchg(cur, cur - 1, Relaxed) {
                Ok(_) if cur == 1 => return Err(err),
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
        Ok(())
    }
}

#[kunit_tests(neuron_hbm_fault)]
mod tests {
    use super::*;

    #[test]
    fn nth_point_fails_once() {
        let f = FaultInjector::new();
        assert_eq!(f.point(ENOMEM), Ok(()));
        f.arm(3);
        assert_eq!(f.point(ENOMEM), Ok(()));
        assert_eq!(f.point(EFAULT), Ok(()));
        assert_eq!(f.point(EFAULT), Err(EFAULT));
        assert_eq!(f.remaining(), 0);
        assert_eq!(f.point(EIO), Ok(()));
        assert_eq!(f.passed(), 5);
    }
}
