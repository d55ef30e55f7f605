// SPDX-License-Identifier: GPL-2.0-only

//! Whether an administrator handed a PCI function to a driver through its
//! `driver_override` (`/sys/bus/pci/devices/*/driver_override`); the 7.3
//! kernel crate has no binding for it.

use crate::abstractions::helpers;
use kernel::pci;

/// Whether `pdev`'s `driver_override` is set. The PCI core binds a
/// function whose override is set only to the driver it names, so during
/// that driver's probe a set override names that driver.
pub(crate) fn is_set(pdev: &pci::Device) -> bool {
    let raw = core::ptr::from_ref(pdev).cast_mut();
    // SAFETY: `pci::Device` is `#[repr(transparent)]` over
    // `Opaque<bindings::pci_dev>` (rust/kernel/pci.rs), so `raw` points to
    // the `struct pci_dev` that `pdev`, a reference the caller holds, keeps
    // alive. The helper only reads the override's name under its lock.
    unsafe { helpers::nhbm_pci_driver_override_set(raw.cast()) }
}
