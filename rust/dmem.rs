// SPDX-License-Identifier: GPL-2.0-only

//! Per-cgroup HBM limits through the kernel's device-memory controller
//! (`linux/cgroup_dmem.h`, kernel/cgroup/dmem.c): each HBM channel of a device
//! is a region `neuron_hbm<N>/hbm<channel>`, and every plan's chunks are
//! charged to the cgroup of the task that loads it. Over `dmem.max` a charge
//! fails with the controller's errno (`EAGAIN`). Without `CONFIG_CGROUP_DMEM`
//! the header's stubs make every region absent and every charge succeed.

use crate::helpers::{
    dmem_cgroup_pool_state, dmem_cgroup_region, nhbm_dmem_register, nhbm_dmem_try_charge,
    nhbm_dmem_uncharge, nhbm_dmem_unregister,
};
use kernel::{error::to_result, prelude::*};

/// One channel's HBM as a dmem cgroup region, unregistered on drop.
///
/// # Invariants
///
/// `raw` is NULL (the controller is off) or a region registered by
/// `nhbm_dmem_register` and not yet unregistered.
pub(crate) struct Region {
    raw: *mut dmem_cgroup_region,
}

// SAFETY: The controller's functions may be called on a region from any
// thread; the pointer is only passed to them.
unsafe impl Send for Region {}
// SAFETY: See `Send`; `&Region` only charges, which the controller serializes.
unsafe impl Sync for Region {}

impl Region {
    /// Registers channel `channel` of device `dev` with `size` bytes.
    pub(crate) fn register(dev: u32, channel: u32, size: u64) -> Result<Self> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `raw` is valid for writes; the name is formatted from integers.
        to_result(unsafe { nhbm_dmem_register(size, dev, channel, &mut raw) })?;
        Ok(Self { raw })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: Registered (invariant) and unregistered only here.
            unsafe { nhbm_dmem_unregister(self.raw) };
        }
    }
}

/// Bytes of one region charged to one cgroup, uncharged on drop. Each HBM
/// chunk holds one, so that it is charged exactly as long as it is allocated.
///
/// # Invariants
///
/// When `bytes > 0`, `pool` is what `nhbm_dmem_try_charge` gave for the
/// first charge (NULL with the controller off) and holds one reference,
/// and `bytes` are charged to it.
pub(crate) struct Charge {
    pool: *mut dmem_cgroup_pool_state,
    bytes: u64,
}

// SAFETY: Uncharging may happen on any thread.
unsafe impl Send for Charge {}
// SAFETY: `&Charge` gives no access to the pool.
unsafe impl Sync for Charge {}

impl Charge {
    /// Nothing charged.
    pub(crate) const fn new() -> Self {
        Self {
            pool: core::ptr::null_mut(),
            bytes: 0,
        }
    }

    /// Charges `size` more bytes of `region` to the current task's cgroup:
    /// `EAGAIN` over its `dmem.max` (or an ancestor's), and nothing changes.
    pub(crate) fn add(&mut self, region: &Region, size: u64) -> Result {
        let mut pool = core::ptr::null_mut();
        // SAFETY: `region.raw` is NULL or registered (its invariant); `pool`
        // is valid for writes.
        to_result(unsafe { nhbm_dmem_try_charge(region.raw, size, &mut pool) })?;
        if self.bytes == 0 {
            self.pool = pool;
            self.bytes = size;
            return Ok(());
        }
        // The same cgroup keeps one reference for the whole charge: the one
        // just taken goes (uncharging 0 bytes only drops it). A task that
        // moved to another cgroup while loading gets the charge undone.
        let same = pool == self.pool;
        let undo = if same { 0 } else { size };
        // SAFETY: `pool` holds the reference and the `size` bytes this call
        // just charged; `undo` is at most those bytes.
        unsafe { nhbm_dmem_uncharge(pool, undo) };
        if !same {
            return Err(EAGAIN);
        }
        self.bytes += size;
        Ok(())
    }
}

impl core::fmt::Debug for Charge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Charge({} bytes)", self.bytes)
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            // SAFETY: `pool` holds `bytes` and one reference (invariant).
            unsafe { nhbm_dmem_uncharge(self.pool, self.bytes) };
        }
    }
}

#[kunit_tests(neuron_hbm_dmem)]
mod tests {
    use super::*;
    use crate::node_index::MAX_NODES;

    /// A device number no device has, for a region of the tests' own.
    const DEV: u32 = MAX_NODES as u32 + 1;

    #[test]
    fn charges_of_one_cgroup_add_up_and_go_on_drop() -> Result {
        let region = Region::register(DEV, 0, 1 << 30)?;
        let mut charge = Charge::new();
        charge.add(&region, 4096)?;
        let pool = charge.pool;
        charge.add(&region, 8192)?;
        // One cgroup (the test's), one pool reference, the bytes summed.
        assert_eq!((charge.pool, charge.bytes), (pool, 12288));
        drop(charge);
        // Nothing charged: dropping uncharges nothing.
        drop(Charge::new());
        drop(region);
        // Unregistered with its last user: the name can be taken again.
        drop(Region::register(DEV, 0, 1 << 30)?);
        Ok(())
    }
}
