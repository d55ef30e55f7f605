// SPDX-License-Identifier: GPL-2.0-only

//! Per-cgroup HBM limits through the kernel's device-memory controller
//! (`linux/cgroup_dmem.h`, kernel/cgroup/dmem.c): each HBM channel of a device
//! is a region `neuron_hbm/<place>/hbm<channel>`, the place being the PCI
//! slot (or `sim<N>`), and every plan's chunks are charged to the cgroup of
//! the task that loads it. Over `dmem.max` a charge fails with the
//! controller's errno (`EAGAIN`). A region is kept for the module's lifetime,
//! so that a device bound again at its slot finds its limits: the
//! controller keeps a limit with the region it was set on. Without
//! `CONFIG_CGROUP_DMEM` the header's stubs make every region absent and every
//! charge succeed.

use crate::abstractions::helpers::{
    dmem_cgroup_pool_state, dmem_cgroup_region, nhbm_dmem_register, nhbm_dmem_try_charge,
    nhbm_dmem_uncharge, nhbm_dmem_unregister,
};
use kernel::{error::to_result, prelude::*, str::CString, sync::Arc};

/// One channel's HBM as a dmem cgroup region, unregistered on drop.
///
/// # Invariants
///
/// `raw` is NULL (the controller is off) or a region registered by
/// `nhbm_dmem_register` and not yet unregistered.
pub(crate) struct Region {
    raw: *mut dmem_cgroup_region,
    name: CString,
    size: u64,
}

// SAFETY: The controller's functions may be called on a region from any
// thread; the pointer is only passed to them.
unsafe impl Send for Region {}
// SAFETY: See `Send`; `&Region` only charges, which the controller serializes.
unsafe impl Sync for Region {}

impl Region {
    /// Registers a region `name` of `size` bytes.
    fn register(name: CString, size: u64) -> Result<Self> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `raw` is valid for writes; `name` is NUL-terminated, and
        // the controller copies it.
        to_result(unsafe { nhbm_dmem_register(size, name.as_char_ptr(), &mut raw) })?;
        Ok(Self { raw, name, size })
    }

    /// The region of HBM channel `channel` of the device at `place`, of
    /// `size` bytes: the one kept from an earlier device there (with the
    /// limits set on it), else a new one, kept until the module goes.
    pub(crate) fn at(place: &CStr, channel: u32, size: u64) -> Result<Arc<Self>> {
        let name = CString::try_from_fmt(fmt!("neuron_hbm/{}/hbm{}", place.to_str()?, channel))?;
        let mut kept = KEPT.lock();
        if let Some(r) = kept.iter().find(|r| r.name.to_bytes() == name.to_bytes()) {
            if r.size == size {
                return Ok(r.clone());
            }
        }
        kept.reserve(1, GFP_KERNEL)?;
        // Another size at the place is another device: the old region
        // leaves the set, and goes once its last user does.
        kept.retain(|r| r.name.to_bytes() != name.to_bytes());
        let region = Arc::new(Self::register(name, size)?, GFP_KERNEL)?;
        // Cannot fail: room was reserved.
        kept.push_within_capacity(region.clone())
            .map_err(|_| ENOMEM)?;
        Ok(region)
    }
}

kernel::sync::global_lock! {
    // SAFETY: `Kept::new` initializes it in the module initializer, before
    // any device (or test) exists.
    unsafe(uninit) static KEPT: Mutex<KVec<Arc<Region>>> = KVec::new();
}

/// The module's kept regions: they are unregistered when it is dropped,
/// after every device.
pub(crate) struct Kept(());

impl Kept {
    /// Starts the module's set of kept regions.
    pub(crate) fn new() -> Self {
        // SAFETY: Called once, from the module initializer, before `KEPT`
        // is used.
        unsafe { KEPT.init() };
        Self(())
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        // The set's buffer goes with its regions: `KEPT` is a static, never
        // dropped, and `clear` would keep the buffer past the module's
        // removal. A region still held by a charge lives on until that
        // goes; the others are unregistered here, out of the lock.
        let kept = core::mem::replace(&mut *KEPT.lock(), KVec::new());
        drop(kept);
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

    /// A device number no device has (they are 0..16), for a region of the
    /// tests' own.
    const DEV: u32 = 17;

    #[test]
    fn charges_of_one_cgroup_add_up_and_go_on_drop() -> Result {
        let region = Region::register(
            CString::try_from_fmt(fmt!("neuron_hbm/test{}/hbm0", DEV))?,
            1 << 30,
        )?;
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
        Ok(())
    }

    #[test]
    fn a_place_keeps_its_region() -> Result {
        let place = CString::try_from_fmt(fmt!("test{}", DEV))?;
        let a = Region::at(&place, 1, 1 << 30)?;
        drop(a);
        // Gone from its device, kept for the next device at the place.
        let b = Region::at(&place, 1, 1 << 30)?;
        let c = Region::at(&place, 1, 1 << 30)?;
        assert!(core::ptr::eq(b.raw, c.raw));
        assert_eq!(b.name.to_bytes(), b"neuron_hbm/test17/hbm1");
        // Another channel, another region.
        let d = Region::at(&place, 2, 1 << 30)?;
        assert!(!core::ptr::eq(b.raw, d.raw) || b.raw.is_null());
        Ok(())
    }
}
