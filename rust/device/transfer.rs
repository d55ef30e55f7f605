// SPDX-License-Identifier: GPL-2.0-only

//! Moving bytes between the host and a device's HBM through BAR4: the
//! piece loop, which cuts a transfer at piece boundaries ([`XFER_CHUNK`],
//! or the backend's bulk piece for user transfers and scrubs) and
//! remaps each piece on its own, and every transfer built on it.

use super::Device;
use crate::{
    abstractions::resched,
    abstractions::user_source::{UserSink, UserSource},
    arch::addr,
    hw::io::{Bounce, XFER_CHUNK},
};
use core::num::NonZeroU64;
use kernel::{page::PAGE_SIZE, prelude::*, uaccess::UserPtr};

/// [`XFER_CHUNK`], for [`piece_len`].
const XFER_PIECE: NonZeroU64 = NonZeroU64::new(XFER_CHUNK as u64).unwrap();

/// Bytes of the piece at device PA `at` with `left` bytes still to go: up
/// to the next `chunk` boundary, at most `left`.
fn piece_len(at: u64, left: u64, chunk: NonZeroU64) -> u64 {
    left.min(chunk.get() - at % chunk)
}

impl Device {
    /// Runs `op(bar4_offset, len)` over `[pa, pa + len)` in pieces that end
    /// on `chunk` boundaries (a power of two) of the device address (so a backend sees
    /// whole, aligned pieces but at the ends), each remapped to BAR4 on its
    /// own and preceded by a preemption point (`EINTR` once the caller is
    /// killed); `op` takes
    /// the reset gate for its BAR4 access ([`Device::transfer_piece`]).
    /// Ends by confirming that the device still answers (`ENODEV` when it
    /// was removed by surprise: its reads were all ones, its writes lost).
    /// With `sparse`, skips what the backend holds nothing for
    /// ([`Device::untouched`]): a scrub costs what is there, not the range.
    fn for_each_piece(
        &self,
        pa: u64,
        len: u64,
        chunk: usize,
        sparse: bool,
        mut op: impl FnMut(u64, usize) -> Result,
    ) -> Result {
        self.check_present()?;
        self.check_transfer_range(pa, len)?;
        let chunk = NonZeroU64::new(chunk as u64).ok_or(EINVAL)?;
        let mut done = 0u64;
        while done < len {
            resched::checkpoint()?;
            self.fault.point(EIO)?;
            let skip = if sparse {
                self.untouched(pa + done, len - done)
            } else {
                0
            };
            if skip > 0 {
                done += skip;
                continue;
            }
            let n = piece_len(pa + done, len - done, chunk);
            let off = addr::bar4_offset(self.info, pa + done, n)?;
            op(off, n as usize)?;
            done += n;
        }
        self.io().confirm_present()
    }

    /// `EINVAL` unless `[pa, pa + len)` may be transferred: no overflow,
    /// and nothing of SBUF, which is on-core SRAM, never HBM.
    fn check_transfer_range(&self, pa: u64, len: u64) -> Result {
        pa.checked_add(len).ok_or(EINVAL)?;
        if addr::range_touches_sbuf(self.info, pa, len) {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// How many bytes from device PA `pa` on, at most `len`, the backend
    /// holds nothing for (they read as zero), within one run of BAR4.
    fn untouched(&self, pa: u64, len: u64) -> u64 {
        match addr::bar4_run(self.info, pa) {
            Ok((off, run)) => self.io().bar4_untouched(off, len.min(run)),
            Err(_) => 0,
        }
    }

    /// Copies `len` bytes from user memory to device PA `pa` through BAR4,
    /// for data staged at reset epoch `staged_at`.
    pub(crate) fn write_from_user(
        &self,
        staged_at: u64,
        pa: u64,
        src: &mut UserSource,
        len: u64,
    ) -> Result {
        // User memory is copied with no lock held, through a bounce buffer
        // (allocated only if the backend needs one) or by the backend into
        // memory of its own, and outside the gate: a buffer that faults
        // slowly (userfaultfd) must not hold off a device reset and, behind
        // it, every other tenant.
        let piece = self.io().bulk_piece();
        let mut bounce = Bounce::new(len)?;
        let gate = |op: &mut dyn FnMut() -> Result| self.transfer_piece(staged_at, op);
        self.for_each_piece(pa, len, piece, false, |off, n| {
            self.io()
                .bar4_write_from_user(off, src, n, &mut bounce, &gate)
        })
    }

    /// Copies each of `parts` (device PA, user address, length) from user
    /// memory to the device, for data staged at reset epoch `staged_at`:
    /// the many small payloads of a plan, which a backend with an engine
    /// moves together ([`crate::hw::io::DeviceIo::bar4_write_gathered`]).
    /// Each part is cut at the backend's piece boundaries; the caller keeps
    /// the total within a few pieces.
    pub(crate) fn write_gathered_from_user(
        &self,
        staged_at: u64,
        parts: &[(u64, UserPtr, usize)],
    ) -> Result {
        let mut segments = KVec::with_capacity(parts.len(), GFP_KERNEL_ACCOUNT)?;
        self.split_gathered(
            parts.iter().map(|p| (p.0, p.2 as u64)),
            |i, off, done, n| {
                let seg = (off, parts[i].1.wrapping_byte_add(done as usize), n as usize);
                segments.push(seg, GFP_KERNEL_ACCOUNT)?;
                Ok(())
            },
        )?;
        let gate = |op: &mut dyn FnMut() -> Result| self.transfer_piece(staged_at, op);
        self.io().bar4_write_gathered(&segments, &gate)?;
        self.io().confirm_present()
    }

    /// Zeroes each of `ranges` (device PA, length), for memory staged at
    /// reset epoch `staged_at`: the many small gaps of a plan's arena,
    /// which a backend with an engine clears together
    /// ([`crate::hw::io::DeviceIo::bar4_zero_gathered`]). Each range is cut
    /// at the backend's piece boundaries; the caller keeps the total within
    /// a few pieces.
    pub(crate) fn zero_gathered(&self, staged_at: u64, ranges: &[(u64, u64)]) -> Result {
        let mut segments = KVec::with_capacity(ranges.len(), GFP_KERNEL_ACCOUNT)?;
        self.split_gathered(ranges.iter().copied(), |_, off, _, n| {
            segments.push((off, n), GFP_KERNEL_ACCOUNT)?;
            Ok(())
        })?;
        self.transfer_piece(staged_at, || self.io().bar4_zero_gathered(&segments))?;
        self.io().confirm_present()
    }

    /// Checks the device and the caller (a preemption point, `EINTR` once it
    /// is killed) before a gathered transfer, and cuts each of `ranges`
    /// (device PA, length) at the backend's piece boundaries, calling
    /// `segment(range index, BAR4 offset, offset in the range, length)`
    /// for each piece: `EINVAL` for a range that may not be transferred.
    fn split_gathered(
        &self,
        ranges: impl Iterator<Item = (u64, u64)>,
        mut segment: impl FnMut(usize, u64, u64, u64) -> Result,
    ) -> Result {
        self.check_present()?;
        resched::checkpoint()?;
        self.fault.point(EIO)?;
        let piece = NonZeroU64::new(self.io().bulk_piece() as u64).ok_or(EINVAL)?;
        for (i, (pa, len)) in ranges.enumerate() {
            self.check_transfer_range(pa, len)?;
            let mut done = 0u64;
            while done < len {
                let n = piece_len(pa + done, len - done, piece);
                segment(i, addr::bar4_offset(self.info, pa + done, n)?, done, n)?;
                done += n;
            }
        }
        Ok(())
    }

    /// Copies `len` bytes at device PA `pa` to user memory through BAR4,
    /// for data staged at reset epoch `staged_at`.
    pub(crate) fn read_to_user(
        &self,
        staged_at: u64,
        pa: u64,
        dst: &mut UserSink,
        len: u64,
    ) -> Result {
        let piece = self.io().bulk_piece();
        let mut bounce = Bounce::new(len)?;
        let gate = |op: &mut dyn FnMut() -> Result| self.transfer_piece(staged_at, op);
        self.for_each_piece(pa, len, piece, false, |off, n| {
            self.io().bar4_read_to_user(off, dst, n, &mut bounce, &gate)
        })
    }

    /// Writes `src` at device PA `pa` through BAR4, for data staged at reset
    /// epoch `staged_at`.
    pub(crate) fn write(&self, staged_at: u64, pa: u64, src: &[u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, src.len() as u64, XFER_CHUNK, false, |off, n| {
            self.transfer_piece(staged_at, || {
                self.io().bar4_write(off, &src[done..done + n])
            })?;
            done += n;
            Ok(())
        })
    }

    /// Reads device PA `pa` into `dst` through BAR4.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn read(&self, staged_at: u64, pa: u64, dst: &mut [u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, dst.len() as u64, XFER_CHUNK, false, |off, n| {
            self.transfer_piece(staged_at, || {
                self.io().bar4_read(off, &mut dst[done..done + n])
            })?;
            done += n;
            Ok(())
        })
    }

    /// Calls `insert` with the page frame backing the page at device PA
    /// `pa` (a page boundary) of memory staged at reset epoch `staged_at`,
    /// for a process to map; inside the reset gate, as a transfer piece:
    /// `EIO` once a device reset began since, `ENODEV` once the device is
    /// gone.
    pub(crate) fn map_page(
        &self,
        staged_at: u64,
        pa: u64,
        insert: &mut dyn FnMut(usize) -> Result,
    ) -> Result {
        self.check_present()?;
        let off = addr::bar4_offset(self.info, pa, PAGE_SIZE as u64)?;
        self.transfer_piece(staged_at, || self.io().bar4_map_page(off, insert))
    }

    /// Gives back what backs `[pa, pa + len)`, a chunk being freed (the
    /// simulated device drops its pages, and with them their memory
    /// charge), skipping what holds nothing. Runs to the end whatever
    /// signal is pending, offering to reschedule between pieces.
    pub(crate) fn release(&self, pa: u64, len: u64) {
        let mut done = 0u64;
        while done < len {
            let skip = self.untouched(pa + done, len - done);
            if skip > 0 {
                done += skip;
                continue;
            }
            let n = piece_len(pa + done, len - done, XFER_PIECE);
            // A chunk of the grid lies inside the BAR4 window, whole.
            if let Ok(off) = addr::bar4_offset(self.info, pa + done, n) {
                self.io().bar4_release(off, n);
            }
            done += n;
            resched::yield_now();
        }
    }

    /// Zeroes `[pa, pa + len)` (the simulated device discards its pages,
    /// and costs what it holds there), for memory staged at reset epoch
    /// `staged_at`.
    pub(crate) fn zero(&self, staged_at: u64, pa: u64, len: u64) -> Result {
        self.for_each_piece(pa, len, self.io().bulk_piece(), true, |off, n| {
            self.transfer_piece(staged_at, || self.io().bar4_zero(off, n as u64))
        })
    }
}

#[kunit_tests(neuron_hbm_transfer)]
mod tests {
    use super::*;
    use crate::arch::GIB;

    #[test]
    fn bar4_write_read_through_remap() -> Result {
        let dev = Device::new_test_sim(1)?;
        // Device PA 64 GiB + 8 KiB is BAR4 offset 16 GiB + 8 KiB on V2.
        let pa = 64 * GIB + 8192;
        dev.write(0, pa, b"neuron")?;
        let mut back = [0u8; 6];
        dev.read(0, pa, &mut back)?;
        assert_eq!(&back, b"neuron");
        let mut raw = [0u8; 6];
        dev.io().bar4_read(16 * GIB + 8192, &mut raw)?;
        assert_eq!(&raw, b"neuron");
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(1));
        Ok(())
    }

    #[test]
    fn transfers_outside_hbm_are_refused() -> Result {
        let dev = Device::new_test_sim(1)?;
        assert_eq!(dev.write(0, 20 * GIB, b"x"), Err(EINVAL));
        assert_eq!(dev.write(0, u64::MAX, b"xy"), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn zero_of_gigabytes_stays_sparse() -> Result {
        let dev = Device::new_test_sim(1)?;
        dev.write(0, GIB, &[0xaa; 16])?;
        dev.zero(0, 0, 12 * GIB)?;
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        let mut b = [1u8; 16];
        dev.read(0, GIB, &mut b)?;
        assert_eq!(b, [0u8; 16]);
        Ok(())
    }

    #[test]
    fn scrubs_cost_what_is_resident() -> Result {
        let dev = Device::new_test_sim(1)?;
        dev.write(0, GIB, &[0xaa; 16])?;
        dev.write(0, 11 * GIB + 4096, &[0xbb; 16])?;
        let before = dev.fault.passed();
        dev.zero(0, 0, 12 * GIB)?;
        // Two resident pieces and the runs between them: not the 196,608
        // pieces the range spans.
        assert!(dev.fault.passed() - before < 16);
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        dev.write(0, 2 * GIB + 8, &[0xcc; 16])?;
        dev.release(0, 12 * GIB);
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        Ok(())
    }

    #[test]
    fn sbuf_is_never_behind_bar4() -> Result {
        for info in [&crate::arch::V2, &crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 1)?;
            for nc in 0..info.nr_cores {
                let (base, size) = addr::sbuf_window(info, nc).ok_or(EINVAL)?;
                let mut b = [0u8; 8];
                assert_eq!(dev.read(0, base, &mut b), Err(EINVAL));
                assert_eq!(dev.write(0, base + size - 8, &b), Err(EINVAL));
            }
        }
        Ok(())
    }
}
