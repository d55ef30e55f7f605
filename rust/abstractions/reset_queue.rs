// SPDX-License-Identifier: GPL-2.0-only

//! The workqueue the module's resets run on. The kernel crate has no owned
//! workqueue: this one is allocated at load and destroyed at unload, after
//! every device is gone, and `destroy_workqueue()` first waits for every
//! reset still running, so no work item outlives the module's code.

use crate::abstractions::helpers::{nhbm_reset_wq_alloc, nhbm_reset_wq_destroy, workqueue_struct};
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
    bindings,
    prelude::*,
    workqueue::{Queue, RawWorkItem},
};

/// The queue while the module is loaded, null otherwise.
static QUEUE: AtomicPtr<workqueue_struct> = AtomicPtr::new(core::ptr::null_mut());

/// Owns the module's reset workqueue; dropping it drains and destroys it.
pub(crate) struct ResetQueue(());

impl ResetQueue {
    /// Allocates the queue and makes it the one [`enqueue`] uses.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: Called from module init, in process context.
        let wq = unsafe { nhbm_reset_wq_alloc() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        QUEUE.store(wq, Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for ResetQueue {
    fn drop(&mut self) {
        let wq = QUEUE.swap(core::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: `wq` came from `nhbm_reset_wq_alloc` in `new` and, taken
        // out of `QUEUE`, can be reached by no later `enqueue`. Module exit
        // drops this last, after the PCI driver and the simulated devices,
        // so no device is left to queue more work.
        unsafe { nhbm_reset_wq_destroy(wq) };
    }
}

/// Queues `w` on the module's reset workqueue; `ENODEV` while there is none
/// (before load ends or after unload began).
pub(crate) fn enqueue<W: RawWorkItem<0> + Send + 'static>(w: W) -> Result<W::EnqueueOutput> {
    let wq = QUEUE.load(Ordering::Acquire);
    if wq.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: `wq` is the live queue: it is destroyed only after `QUEUE` is
    // cleared, at module exit, when no device (the only callers) is left.
    // The helper's `workqueue_struct` is the kernel's, declared opaque.
    let queue = unsafe { Queue::from_raw(wq.cast::<bindings::workqueue_struct>()) };
    Ok(queue.enqueue(w))
}
