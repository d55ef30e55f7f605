// SPDX-License-Identifier: GPL-2.0-only

//! Whether a PCI function is still there, asked of its configuration space
//! as the kernel's `pci_device_is_present()` does (a function that is gone
//! reads vendor id `0xffff`); the 7.3 kernel crate has no binding for it.

use kernel::{bindings, pci};

/// Whether `pdev` still answers in configuration space.
pub(crate) fn is_present(pdev: &pci::Device) -> bool {
    let raw = core::ptr::from_ref(pdev)
        .cast_mut()
        .cast::<bindings::pci_dev>();
    // SAFETY: `pci::Device` is `#[repr(transparent)]` over
    // `Opaque<bindings::pci_dev>` (rust/kernel/pci.rs), so `raw` points to
    // the `struct pci_dev` that `pdev`, a reference the caller holds, keeps
    // alive. `pci_device_is_present` only reads its vendor id through the
    // config accessors, which take their own locks.
    unsafe { bindings::pci_device_is_present(raw) }
}
