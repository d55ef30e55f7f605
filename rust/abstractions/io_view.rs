// SPDX-License-Identifier: GPL-2.0-only

//! Byte views as the kernel crate's I/O types: a fixed-size window of an MMIO
//! mapping, and a block of kernel memory as system-memory I/O, so that the
//! same register accessors (`register!`, [`Io`](kernel::io::Io)) read and
//! write a PCI function's MISC RAM and the simulated device's.
//!
//! The kernel crate projects views onto fields and slice ranges
//! (`io_project!`) but not onto a sub-range of an untyped [`Region`], and it
//! builds a [`SysMem`] only from a raw pointer. Both are done here, checked,
//! with lifetimes that tie the view to what it borrows. They go away once
//! `Region` takes a range projection and `SysMem` a constructor from a
//! borrowed buffer.

use kernel::io::{IoBase, Mmio, MmioBackend, MmioRaw, Region, SysMem};
use kernel::{io::IoBackend, prelude::*};

/// Where a window of `len` bytes at `offset` lies in a view of `size` bytes
/// based at `base`: `ERANGE` past its end, `EINVAL` when the window's start
/// is not 4-byte aligned (a [`Region`]'s invariant).
fn window(base: usize, size: usize, offset: usize, len: usize) -> Result<usize> {
    match offset.checked_add(len) {
        Some(end) if end <= size => {}
        _ => return Err(ERANGE),
    }
    let addr = base.checked_add(offset).ok_or(ERANGE)?;
    if addr % 4 != 0 || len % 4 != 0 {
        return Err(EINVAL);
    }
    Ok(addr)
}

/// The `N` bytes at `offset` of the MMIO view `io`, borrowed from it for as
/// long as `io` is.
pub(crate) fn mmio_window<'a, const N: usize>(
    io: Mmio<'a, Region>,
    offset: usize,
) -> Result<Mmio<'a, Region<N>>> {
    let base = MmioBackend::as_ptr(io.as_view());
    let size = kernel::ptr::KnownSize::size(base);
    let addr = window(base.addr(), size, offset, N)?;
    let raw = MmioRaw::<Region<N>>::new_region(addr, N)?;
    // SAFETY: `io` is a valid, aligned MMIO mapping for `'a` (its invariant)
    // and `window` checked that `[addr, addr + N)` lies inside it, 4-byte
    // aligned; the result lives no longer than `'a`.
    Ok(unsafe { Mmio::from_raw(raw) })
}

/// `words` as `N` bytes of system-memory I/O, borrowed exclusively for as
/// long as the view lives: `EINVAL` unless `words` holds exactly `N` bytes.
pub(crate) fn sys_mem_words<const N: usize>(words: &mut [u32]) -> Result<SysMem<'_, Region<N>>> {
    if core::mem::size_of_val(words) != N {
        return Err(EINVAL);
    }
    let ptr = Region::<N>::ptr_try_from_raw_parts_mut(words.as_mut_ptr().cast(), N)?;
    // SAFETY: `ptr` covers the `N` bytes of `words`, kernel memory that is
    // 4-byte aligned (a `u32` slice, checked again by the constructor above)
    // and borrowed mutably, so no one else reaches it while the view lives.
    Ok(unsafe { SysMem::new(ptr) })
}

#[kunit_tests(neuron_hbm_io_view)]
mod tests {
    use super::*;
    use kernel::io::Io;

    #[test]
    fn windows_stay_inside_their_view() {
        assert_eq!(window(0x1000, 0x100, 0, 0x100), Ok(0x1000));
        assert_eq!(window(0x1000, 0x100, 0x80, 0x80), Ok(0x1080));
        // One byte past the end, and an end that wraps.
        assert_eq!(window(0x1000, 0x100, 0x84, 0x80), Err(ERANGE));
        assert_eq!(window(0x1000, 0x100, usize::MAX, 8), Err(ERANGE));
        assert_eq!(window(usize::MAX - 3, 0x100, 8, 8), Err(ERANGE));
        // A start or a length that breaks a Region's alignment.
        assert_eq!(window(0x1000, 0x100, 2, 8), Err(EINVAL));
        assert_eq!(window(0x1002, 0x100, 0, 8), Err(EINVAL));
        assert_eq!(window(0x1000, 0x100, 0, 6), Err(EINVAL));
    }

    #[test]
    fn sys_mem_reads_and_writes_the_words() -> Result {
        let mut words = [0u32; 4];
        {
            let view = sys_mem_words::<16>(&mut words)?;
            view.write32(0xdead_beef, 4);
            view.write32(0x1234_5678, 12);
            assert_eq!(view.read32(4), 0xdead_beef);
        }
        assert_eq!(words, [0, 0xdead_beef, 0, 0x1234_5678]);
        // The size must match exactly: a view never reaches past its words.
        assert_eq!(sys_mem_words::<32>(&mut words).err(), Some(EINVAL));
        assert_eq!(sys_mem_words::<8>(&mut words).err(), Some(EINVAL));
        Ok(())
    }
}
