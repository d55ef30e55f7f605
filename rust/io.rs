// SPDX-License-Identifier: GPL-2.0

//! The device-access interface: 32-bit registers in BAR0 and bulk bytes in
//! BAR4, to and from kernel memory only (user memory is bounced by
//! [`crate::device::Device`], never copied under a backend's lock). The PCI backend ([`crate::pci`]) and the simulated one
//! ([`crate::sim`]) implement it; nothing above this file knows which one runs.

use kernel::{prelude::*, uaccess::UserSliceReader};

/// Largest piece a bulk transfer moves at once (bounds time under any lock
/// and the size of the bounce buffer that user transfers go through).
pub(crate) const XFER_CHUNK: usize = 64 * 1024;

/// Access to one Neuron device's BAR0 registers and BAR4 HBM window.
pub(crate) trait DeviceIo: Send + Sync {
    /// Reads the 32-bit register at BAR0 offset `off`.
    fn read32(&self, off: u64) -> Result<u32>;

    /// Writes the 32-bit register at BAR0 offset `off`.
    fn write32(&self, off: u64, value: u32) -> Result;

    /// Writes `src` to BAR4 offset `off`.
    fn bar4_write(&self, off: u64, src: &[u8]) -> Result;

    /// Writes `len` bytes read from `src` to BAR4 offset `off`, never with a
    /// lock held across the user copy. By default the bytes go through
    /// `bounce` (room for at least `len`, its contents replaced); a backend
    /// that can fill its memory without a lock does without.
    fn bar4_write_from_user(
        &self,
        off: u64,
        src: &mut UserSliceReader,
        len: usize,
        bounce: &mut KVVec<u8>,
    ) -> Result {
        bounce.clear();
        let spare = bounce.spare_capacity_mut().get_mut(..len).ok_or(EINVAL)?;
        src.read_raw(spare)?;
        // SAFETY: `read_raw` succeeded, so the first `len` bytes of the spare
        // capacity are initialized.
        unsafe { bounce.inc_len(len) };
        self.bar4_write(off, bounce)
    }

    /// Reads BAR4 offset `off` into `dst`.
    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result;

    /// Makes `[off, off + len)` of BAR4 read as zeros.
    fn bar4_zero(&self, off: u64, len: u64) -> Result;

    /// Whether the device is still there (false after surprise removal).
    fn is_present(&self) -> bool;
}

/// Checks that `[off, off + len)` lies inside a BAR of `size` bytes.
pub(crate) fn check_range(off: u64, len: u64, size: u64) -> Result {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(ERANGE),
    }
}

/// Checks that a 32-bit register at `off` lies inside a BAR0 of `size` bytes
/// (`ERANGE`) at a multiple of 4 (`EINVAL`); the offset as the MMIO API takes it.
pub(crate) fn reg_offset(off: u64, size: u64) -> Result<usize> {
    check_range(off, 4, size)?;
    if off % 4 != 0 {
        return Err(EINVAL);
    }
    Ok(off as usize)
}
