// SPDX-License-Identifier: GPL-2.0-only

//! A PCI BAR mapped write-combining.
//!
//! The kernel crate's [`kernel::pci::Bar`] maps with `pci_iomap` (uncached)
//! and has no write-combining variant; its constructor is private to the
//! crate. Seed 001 §1 maps the HBM window (BAR4) write-combining, as
//! `pci_iomap_wc` does for the reference driver. [`WcBar`] is that mapping
//! built from the kernel crate's public MMIO types: the region request and
//! unmapping are the same as `Bar`'s, only the map call differs, and accesses
//! go through the same [`Io`](kernel::io::Io) accessors, or through
//! [`Words`], a range checked once for bulk copies. It is meant to go away
//! once the PCI abstraction grows an `iomap_region_wc` and `Io` a bulk copy.

use crate::abstractions::{helpers::nhbm_user_to_io, user_dma::UserPages};
use core::marker::PhantomData;
use kernel::{
    bindings,
    devres::Devres,
    io::{IoBase, Mmio, MmioBackend, MmioRaw, Region},
    pci,
    prelude::*,
    sync::aref::ARef,
    uaccess::UserPtr,
};

/// A requested PCI BAR, mapped write-combining. Only ever held inside a
/// [`Devres`], which unmaps and releases it when the device is unbound.
///
/// # Invariants
///
/// `io` is the `pci_iomap_wc` mapping of BAR `num` of `pdev`, whose region is
/// requested for this driver, for as long as the `WcBar` lives.
pub(crate) struct WcBar {
    pdev: ARef<pci::Device>,
    io: MmioRaw<Region>,
    num: i32,
}

/// The C `struct pci_dev` of `pdev`.
fn raw(pdev: &pci::Device) -> *mut bindings::pci_dev {
    // `pci::Device` is `repr(transparent)` over `Opaque<bindings::pci_dev>`.
    core::ptr::from_ref(pdev)
        .cast::<bindings::pci_dev>()
        .cast_mut()
}

impl WcBar {
    /// Requests BAR `bar` of `pdev` under `name` and maps it write-combining.
    pub(crate) fn map(
        pdev: &pci::Device<kernel::device::Bound>,
        bar: u32,
        name: &'static CStr,
    ) -> Result<Devres<Self>> {
        let len = usize::try_from(pdev.resource_len(bar)?)?;
        if len == 0 {
            return Err(ENODEV);
        }
        let num = i32::try_from(bar)?;
        let dev: ARef<pci::Device> = pdev.into();
        let p = raw(&dev);
        // SAFETY: `p` is a bound PCI device (we hold a reference); `num` was
        // checked by `resource_len`; `name` is a static NUL-terminated string.
        if unsafe { bindings::pci_request_region(p, num, name.as_char_ptr()) } != 0 {
            return Err(EBUSY);
        }
        // SAFETY: as above; the region was just requested for us.
        let addr = unsafe { bindings::pci_iomap_wc(p, num, 0) } as usize;
        if addr == 0 {
            // SAFETY: we requested the region above and map nothing from it.
            unsafe { bindings::pci_release_region(p, num) };
            return Err(ENOMEM);
        }
        let io = match MmioRaw::new_region(addr, len) {
            Ok(io) => io,
            Err(e) => {
                // SAFETY: `addr` is the mapping made above of the region we
                // requested; neither is used after this.
                unsafe {
                    bindings::pci_iounmap(p, addr as *mut c_void);
                    bindings::pci_release_region(p, num);
                }
                return Err(e);
            }
        };
        // INVARIANT: `io` maps BAR `num` of `dev`, requested above.
        Devres::new(pdev.as_ref(), WcBar { pdev: dev, io, num })
    }
}

/// Bytes of one access of [`Words`].
pub(crate) const WORD: usize = size_of::<u64>();

impl WcBar {
    /// The address of `[off, off + len)` of the mapping: `ERANGE` past the
    /// BAR.
    fn span(&self, off: usize, len: usize) -> Result<usize> {
        match off.checked_add(len) {
            Some(end) if end <= self.io.size() => Ok(self.io.addr() + off),
            _ => Err(ERANGE),
        }
    }

    /// Copies the `n` bytes of user memory at `src` to `[off, off + n)`
    /// of the mapping with the CPU, one 64-bit store an aligned word, with
    /// page faults off (it never sleeps): stops at the first byte whose page
    /// is not present or not readable. The bytes not copied; `ERANGE` past
    /// the BAR.
    pub(crate) fn store_user(&self, off: usize, src: UserPtr, n: usize) -> Result<usize> {
        let at = self.span(off, n)?;
        // SAFETY: `[at, at + n)` lies inside the mapping (checked above),
        // which stays mapped while `self` is borrowed; the helper writes
        // only there and reads user memory only through the kernel's
        // fault-handling user accessors.
        Ok(unsafe {
            nhbm_user_to_io(
                core::ptr::with_exposed_provenance_mut(at),
                src.as_const_ptr(),
                n,
            )
        })
    }

    /// Copies `[off, off + n)` of the mapping into the bytes
    /// `[from, from + n)` of `pages` with the CPU, one 64-bit load an
    /// aligned word ([`UserPages::copy_from_io`]); `ERANGE` past the BAR,
    /// `EINVAL` past the pages.
    pub(crate) fn load_pages(
        &self,
        off: usize,
        pages: &UserPages,
        from: usize,
        n: usize,
    ) -> Result {
        let at = self.span(off, n)?;
        // SAFETY: `[at, at + n)` lies inside the mapping (checked above),
        // which stays mapped while `self` is borrowed.
        unsafe { pages.copy_from_io(from, n, core::ptr::with_exposed_provenance(at)) }
    }

    /// The range `[off, off + len)` of the mapping as 64-bit words, checked
    /// once: `ERANGE` past the BAR, `EINVAL` unless both are multiples of
    /// the word.
    pub(crate) fn words(&self, off: usize, len: usize) -> Result<Words<'_>> {
        let end = off.checked_add(len).ok_or(ERANGE)?;
        if end > self.io.size() {
            return Err(ERANGE);
        }
        if off % WORD != 0 || len % WORD != 0 || self.io.addr() % WORD != 0 {
            return Err(EINVAL);
        }
        // INVARIANT: checked just above; `self` is borrowed for `'_`.
        Ok(Words {
            base: self.io.addr() + off,
            count: len / WORD,
            _bar: PhantomData,
        })
    }
}

/// A word-aligned range of a [`WcBar`], accessed one 64-bit load or store
/// per word with no check and no call between them: what
/// `__iowrite64_copy` does, [`BLOCK`] words a loop iteration. The kernel
/// crate's accessors check and call out per access, which under an
/// emulator costs several times the access.
///
/// # Invariants
///
/// `[base, base + count * WORD)` is word-aligned and inside the mapping of
/// a `WcBar` that outlives `'a`.
pub(crate) struct Words<'a> {
    base: usize,
    count: usize,
    _bar: PhantomData<&'a WcBar>,
}

/// Words a loop iteration of [`Words`] moves: a loop that checks its end
/// after every access runs twice the instructions of the accesses.
const BLOCK: usize = 4;

/// The little-endian 64-bit value of `w` (one [`WORD`]).
#[inline(always)]
fn word(w: &[u8]) -> u64 {
    let mut b = [0u8; WORD];
    b.copy_from_slice(w);
    u64::from_le_bytes(b)
}

impl Words<'_> {
    /// The first word, for volatile accesses.
    fn first(&self) -> *mut u64 {
        core::ptr::with_exposed_provenance_mut::<u64>(self.base)
    }

    /// Stores the words of `src` (little-endian) in order, as many as both
    /// have.
    pub(crate) fn store_from(&self, src: &[u8]) {
        let dst = self.first();
        let n = self.count.min(src.len() / WORD);
        let mut blocks = src[..n * WORD].chunks_exact(BLOCK * WORD);
        let mut at = 0;
        for block in &mut blocks {
            for (j, w) in block.chunks_exact(WORD).enumerate() {
                // SAFETY: word `at + j < n <= count` lies inside the
                // mapping, which is live, and is aligned (invariant). A
                // volatile 64-bit store is `__raw_writeq`.
                unsafe { dst.add(at + j).write_volatile(word(w)) };
            }
            at += BLOCK;
        }
        for (j, w) in blocks.remainder().chunks_exact(WORD).enumerate() {
            // SAFETY: as above.
            unsafe { dst.add(at + j).write_volatile(word(w)) };
        }
    }

    /// Loads the words in order into `dst` (little-endian), as many as
    /// both have.
    pub(crate) fn load_into(&self, dst: &mut [u8]) {
        let src = self.first().cast_const();
        let n = self.count.min(dst.len() / WORD);
        let mut blocks = dst[..n * WORD].chunks_exact_mut(BLOCK * WORD);
        let mut at = 0;
        for block in &mut blocks {
            for (j, w) in block.chunks_exact_mut(WORD).enumerate() {
                // SAFETY: as in `store_from`; a volatile 64-bit load is
                // `__raw_readq`.
                w.copy_from_slice(&unsafe { src.add(at + j).read_volatile() }.to_le_bytes());
            }
            at += BLOCK;
        }
        for (j, w) in blocks.into_remainder().chunks_exact_mut(WORD).enumerate() {
            // SAFETY: as above.
            w.copy_from_slice(&unsafe { src.add(at + j).read_volatile() }.to_le_bytes());
        }
    }

    /// Stores zero in every word.
    pub(crate) fn zero(&self) {
        let dst = self.first();
        let blocks = self.count / BLOCK;
        for b in 0..blocks {
            for j in 0..BLOCK {
                // SAFETY: word `b * BLOCK + j < count`, as in `store_from`.
                unsafe { dst.add(b * BLOCK + j).write_volatile(0) };
            }
        }
        for i in blocks * BLOCK..self.count {
            // SAFETY: word `i < count`, as in `store_from`.
            unsafe { dst.add(i).write_volatile(0) };
        }
    }
}

impl Drop for WcBar {
    fn drop(&mut self) {
        let p = raw(&self.pdev);
        // SAFETY: by the type invariant `io` is our mapping of the region
        // `num`, which we requested; nothing uses either after the drop.
        unsafe {
            bindings::pci_iounmap(p, self.io.addr() as *mut c_void);
            bindings::pci_release_region(p, self.num);
        }
    }
}

impl<'a> IoBase<'a> for &'a WcBar {
    type Backend = MmioBackend;
    type Target = Region;

    fn as_view(self) -> Mmio<'a, Region> {
        // SAFETY: by the type invariant the MMIO range in `self.io` is mapped
        // while `self` lives, which covers `'a`.
        unsafe { Mmio::from_raw(self.io) }
    }
}
