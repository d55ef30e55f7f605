// SPDX-License-Identifier: GPL-2.0-only

//! The device-access interface: the MISC RAM registers of BAR0, as a view
//! the kernel crate's [`Io`](kernel::io::Io) reads and writes, and bulk
//! bytes in BAR4, to and from kernel memory, or user memory a backend
//! pinned outside the gate (never copied from user space under a
//! backend's lock). The PCI
//! backend ([`crate::pci::io::PciIo`]) and the simulated one
//! ([`crate::sim`]) implement it; nothing above this file knows which one
//! runs.

use crate::abstractions::user_source::{UserSink, UserSource};
use crate::abstractions::vma::Backing;
use crate::hw::regs::MiscRam;
use kernel::{prelude::*, uaccess::UserPtr};

/// Runs the device-side step it is given inside the reset gate
/// ([`crate::device::Device`]): waits out a device reset, refuses data of an
/// older reset epoch.
pub(crate) type Gate<'a> = &'a dyn Fn(&mut dyn FnMut() -> Result) -> Result;

/// Largest piece a bulk transfer moves at once (bounds time under any lock
/// and the size of the bounce buffer that user transfers go through), but
/// for a backend that moves user memory in place (its pages pinned, by
/// its engine or its CPU), and zeros, in longer ones
/// ([`DeviceIo::bulk_piece`]).
pub(crate) const XFER_CHUNK: usize = 64 * 1024;

/// The bounce buffer of one user transfer: allocated on first use, as long
/// as the transfer's largest piece.
pub(crate) struct Bounce {
    buf: KVVec<u8>,
    len: usize,
}

impl Bounce {
    /// Room for the pieces of a transfer of `total` bytes, not allocated yet.
    pub(crate) fn new(total: u64) -> Result<Self> {
        Ok(Self {
            buf: KVVec::new(),
            len: usize::try_from(total.min(XFER_CHUNK as u64))?,
        })
    }

    /// The first `n` bytes of the buffer (`EINVAL` past a piece).
    pub(crate) fn get(&mut self, n: usize) -> Result<&mut [u8]> {
        if self.buf.len() < self.len {
            self.buf = KVVec::zeroed(self.len, GFP_KERNEL_ACCOUNT)?;
        }
        self.buf.get_mut(..n).ok_or(EINVAL)
    }
}

/// Access to one Neuron device's BAR0 registers and BAR4 HBM window.
pub(crate) trait DeviceIo: Send + Sync {
    /// Calls `f` with the device's MISC RAM registers (`ENODEV` once the
    /// backend is gone; a device removed by surprise reads all ones). `f`
    /// must not sleep: the view may be held under a lock or RCU.
    fn with_misc_ram(&self, f: &mut dyn FnMut(MiscRam<'_>)) -> Result;

    /// Writes `src` to BAR4 offset `off`.
    fn bar4_write(&self, off: u64, src: &[u8]) -> Result;

    /// Longest piece of a user transfer or a scrub: what
    /// [`DeviceIo::bar4_write_from_user`], [`DeviceIo::bar4_read_to_user`]
    /// and [`DeviceIo::bar4_zero`] are given at most (a multiple of
    /// [`XFER_CHUNK`]).
    fn bulk_piece(&self) -> usize {
        XFER_CHUNK
    }

    /// Writes `len` bytes read from `src` to BAR4 offset `off`. The user
    /// copy runs outside `gate` and outside any lock; each step that touches
    /// the device runs inside `gate` (the reset gate, which a device reset
    /// waits on, so a user buffer that faults slowly must never be read
    /// there). By default the bytes go through `bounce`
    /// ([`write_through_bounce`]); a backend that can move them without a
    /// copy of its own does without (and never allocates it).
    fn bar4_write_from_user(
        &self,
        off: u64,
        src: &mut UserSource,
        len: usize,
        bounce: &mut Bounce,
        gate: Gate<'_>,
    ) -> Result {
        write_through_bounce(self, off, src, len, bounce, gate)
    }

    /// Writes each of `parts` (BAR4 offset, user address, length: each
    /// inside one [`DeviceIo::bulk_piece`] of the device address, all
    /// together at most a few of them) from user memory, with the rules of
    /// [`DeviceIo::bar4_write_from_user`]: many small payloads at once. By
    /// default one part after the other ([`write_each`]); a backend with an
    /// engine posts them together.
    fn bar4_write_gathered(&self, parts: &[(u64, UserPtr, usize)], gate: Gate<'_>) -> Result {
        write_each(self, parts, gate)
    }

    /// Reads `len` bytes at BAR4 offset `off` into `dst`, with the rules of
    /// [`DeviceIo::bar4_write_from_user`]; by default through `bounce`
    /// ([`read_through_bounce`]).
    fn bar4_read_to_user(
        &self,
        off: u64,
        dst: &mut UserSink,
        len: usize,
        bounce: &mut Bounce,
        gate: Gate<'_>,
    ) -> Result {
        read_through_bounce(self, off, dst, len, bounce, gate)
    }

    /// Reads BAR4 offset `off` into `dst`.
    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result;

    /// Makes `[off, off + len)` of BAR4 read as zeros.
    fn bar4_zero(&self, off: u64, len: u64) -> Result;

    /// Makes each of `parts` (BAR4 offset, length: each inside one
    /// [`DeviceIo::bulk_piece`] of the device address, all together at
    /// most a few of them) read as zeros: the many small gaps of a plan's
    /// arena. By default one after the other; a backend with an engine
    /// posts them together.
    fn bar4_zero_gathered(&self, parts: &[(u64, u64)]) -> Result {
        zero_each(self, parts)
    }

    /// Gives back what backs `[off, off + len)` of BAR4, memory that was
    /// just freed: the simulated device drops its pages there. HBM itself
    /// has nothing to give back, and freed memory is scrubbed when it is
    /// next allocated either way.
    fn bar4_release(&self, _off: u64, _len: u64) {}

    /// How many bytes from BAR4 offset `off` on, at most `len`, hold
    /// nothing to clear or give back (they read as zero): a scrub or a
    /// release skips them. The simulated device's pages not resident; on
    /// hardware every byte counts.
    fn bar4_untouched(&self, _off: u64, _len: u64) -> u64 {
        0
    }

    /// A device reset returned the device's DMA engines to their reset
    /// state: the backend sets its queues up again before it next uses
    /// them. No transfer runs meanwhile (the reset gate holds them off).
    fn engines_reset(&self) {}

    /// What backs the pages [`DeviceIo::bar4_map_page`] gives.
    fn bar4_backing(&self) -> Backing;

    /// Calls `insert` with the page frame of the page at BAR4 offset `off`
    /// (a page boundary), for a process to map; the frame stays what backs
    /// that page while `insert` runs. `ENODEV` once the device is gone.
    fn bar4_map_page(&self, off: u64, insert: &mut dyn FnMut(usize) -> Result) -> Result;

    /// Whether the device is still there (false after surprise removal).
    fn is_present(&self) -> bool;

    /// Whether the function still answers in configuration space: a
    /// register that reads all ones means "gone" only when this is false.
    fn config_present(&self) -> bool;

    /// `ENODEV` unless the device still answers: unlike
    /// [`DeviceIo::is_present`], this may read a register, so that a device
    /// removed by surprise (reads all ones, and so does its configuration
    /// space) is noticed after a transfer.
    fn confirm_present(&self) -> Result {
        if self.is_present() {
            Ok(())
        } else {
            Err(ENODEV)
        }
    }
}

/// Writes `len` bytes of `src` to BAR4 offset `off` through `bounce`,
/// [`XFER_CHUNK`] bytes at a time: each user copy outside `gate`, each
/// device write inside it.
pub(crate) fn write_through_bounce<D: DeviceIo + ?Sized>(
    io: &D,
    off: u64,
    src: &mut UserSource,
    len: usize,
    bounce: &mut Bounce,
    gate: Gate<'_>,
) -> Result {
    let mut done = 0;
    while done < len {
        let bytes = bounce.get((len - done).min(XFER_CHUNK))?;
        src.read_slice(bytes)?;
        gate(&mut || io.bar4_write(off + done as u64, bytes))?;
        done += bytes.len();
    }
    Ok(())
}

/// Writes each of `parts` (BAR4 offset, user address, length) with
/// [`DeviceIo::bar4_write_from_user`], one after the other.
pub(crate) fn write_each<D: DeviceIo + ?Sized>(
    io: &D,
    parts: &[(u64, UserPtr, usize)],
    gate: Gate<'_>,
) -> Result {
    let mut bounce = Bounce::new(XFER_CHUNK as u64)?;
    parts.iter().try_for_each(|&(off, at, len)| {
        io.bar4_write_from_user(off, &mut UserSource::new(at, len), len, &mut bounce, gate)
    })
}

/// Zeroes each of `parts` (BAR4 offset, length) with
/// [`DeviceIo::bar4_zero`], one after the other.
pub(crate) fn zero_each<D: DeviceIo + ?Sized>(io: &D, parts: &[(u64, u64)]) -> Result {
    parts
        .iter()
        .try_for_each(|&(off, len)| io.bar4_zero(off, len))
}

/// Reads `len` bytes at BAR4 offset `off` into `dst` through `bounce`,
/// [`XFER_CHUNK`] bytes at a time: each device read inside `gate`, each
/// user copy outside it.
pub(crate) fn read_through_bounce<D: DeviceIo + ?Sized>(
    io: &D,
    off: u64,
    dst: &mut UserSink,
    len: usize,
    bounce: &mut Bounce,
    gate: Gate<'_>,
) -> Result {
    let mut done = 0;
    while done < len {
        let bytes = bounce.get((len - done).min(XFER_CHUNK))?;
        gate(&mut || io.bar4_read(off + done as u64, bytes))?;
        dst.write_slice(bytes)?;
        done += bytes.len();
    }
    Ok(())
}

impl dyn DeviceIo + '_ {
    /// Runs `f` on the device's MISC RAM registers and returns what it returns.
    pub(crate) fn misc_ram<T>(&self, f: impl FnOnce(MiscRam<'_>) -> T) -> Result<T> {
        let mut f = Some(f);
        let mut out = None;
        self.with_misc_ram(&mut |mb| out = f.take().map(|f| f(mb)))?;
        out.ok_or(ENODEV)
    }
}

/// Checks that `[off, off + len)` lies inside a BAR of `size` bytes.
pub(crate) fn check_range(off: u64, len: u64, size: u64) -> Result {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(ERANGE),
    }
}
