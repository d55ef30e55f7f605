// SPDX-License-Identifier: GPL-2.0-only

//! Fault injection for tests: arm `fail_nth` (debugfs) with N and the N-th
//! injection point a device passes from then on fails once, with the errno
//! that point fails with for real (ENOMEM for allocations, EFAULT for user
//! copies, EIO for device transfers). Simulated devices have it; a real
//! device only with the `fault_injection=1` module parameter.

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// One device's injection state.
pub(crate) struct FaultInjector {
    /// Whether it may be armed: on simulated devices, and on real ones only
    /// with the `fault_injection` module parameter.
    enabled: bool,
    /// Points still to pass before one fails; 0 = disarmed.
    countdown: Atomic<u32>,
    /// Points passed since load.
    passed: Atomic<u64>,
}

impl FaultInjector {
    /// Disarmed; armable only if `enabled`.
    pub(crate) const fn new(enabled: bool) -> Self {
        Self {
            enabled,
            countdown: Atomic::new(0),
            passed: Atomic::new(0),
        }
    }

    /// Makes the `n`-th point from now fail (0 disarms); `EPERM` where
    /// injection was not asked for.
    pub(crate) fn arm(&self, n: u32) -> Result {
        if !self.enabled {
            return Err(EPERM);
        }
        self.countdown.store(n, Relaxed);
        Ok(())
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
        let f = FaultInjector::new(true);
        assert_eq!(f.point(ENOMEM), Ok(()));
        assert_eq!(f.arm(3), Ok(()));
        assert_eq!(f.point(ENOMEM), Ok(()));
        assert_eq!(f.point(EFAULT), Ok(()));
        assert_eq!(f.point(EFAULT), Err(EFAULT));
        assert_eq!(f.remaining(), 0);
        assert_eq!(f.point(EIO), Ok(()));
        assert_eq!(f.passed(), 5);
    }

    #[test]
    fn only_an_enabled_injector_arms() {
        let f = FaultInjector::new(false);
        assert_eq!(f.arm(1), Err(EPERM));
        assert_eq!(f.point(EIO), Ok(()));
        assert_eq!(f.remaining(), 0);
    }
}
