// SPDX-License-Identifier: GPL-2.0-only

//! The DMA mask of a bound PCI function, set once at probe: the kernel
//! crate's `dma_set_mask_and_coherent` is `unsafe` because it must not race
//! the function's DMA allocations; here it runs before the driver makes any.

use kernel::{device::Core, dma::Device as _, dma::DmaMask, pci, prelude::*};

/// Lets `pdev`'s DMA (streaming and coherent) reach host addresses of
/// `bits` bits (`EINVAL` past 64, `EIO` when the platform cannot).
pub(crate) fn set_at_probe(pdev: &pci::Device<Core<'_>>, bits: u32) -> Result {
    let mask = DmaMask::try_new(bits)?;
    // SAFETY: called from `probe` (a `Core` reference exists only there),
    // before this driver allocates or maps any DMA memory of the function;
    // nothing else of this driver reaches the function before probe ends.
    unsafe { pdev.dma_set_mask_and_coherent(mask) }
}
