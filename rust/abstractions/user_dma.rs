// SPDX-License-Identifier: GPL-2.0-only

//! User memory a device reads or writes in place, over `user_dma.c` and
//! `user_mmio.c`: the pages of a range pinned ([`UserPages`]), then mapped
//! for the device's DMA engine with the DMA API as a scatter-gather table
//! ([`Mapped`]), whose segments `user_dma.c` reads a run at a time
//! ([`Spans`]), or copied to and from a BAR by the CPU in one copy. The
//! crate builds and maps tables only of memory the kernel allocated
//! (vmalloc buffers), not of pinned user pages, and its `SGTable` iterator
//! makes three out-of-line calls a segment: 0.4 ms of guest CPU for a
//! scattered 16 MiB piece (4097 segments) in the emulated PCI guest.

use crate::abstractions::helpers::{
    self, nhbm_dma_map_user, nhbm_dma_spans, nhbm_dma_spans_start, nhbm_dma_unmap_user,
    nhbm_io_to_pages, nhbm_pin_user, nhbm_unpin_user,
};
use core::{marker::PhantomData, ptr};
use kernel::{
    device::{Bound, Device},
    page::PAGE_SIZE,
    prelude::*,
    sync::aref::ARef,
    uaccess::UserPtr,
};

/// Segments [`Spans`] reads from the table at a time.
const SPAN_RUN: usize = 32;

/// The device that mappings are made for, taken while it is bound. Its
/// owner drops it, every clone of it and every [`Mapped`] made for it
/// before the device unbinds: the rule the kernel crate's `Coherent` rests
/// on as well.
#[derive(Clone)]
pub(crate) struct DmaDevice(ARef<Device>);

impl DmaDevice {
    /// `dev`, for the mappings of its bound lifetime.
    pub(crate) fn new(dev: &Device<Bound>) -> Self {
        Self(dev.into())
    }

    fn raw(&self) -> *mut helpers::device {
        let dev: &Device = &self.0;
        // `Device` is `#[repr(transparent)]` over `Opaque<bindings::device>`
        // (rust/kernel/device.rs): this points to the `struct device`.
        ptr::from_ref(dev).cast_mut().cast()
    }
}

/// The pages of a range of user memory, pinned until this is dropped. Its
/// array may fall back to vmalloc: a piece of 16 MiB has 4097 pages, and
/// no transfer should wait for an order-3 allocation.
pub(crate) struct UserPages {
    pages: KVVec<*mut helpers::page>,
    /// Where in the first page the range starts, and its length.
    offset: u32,
    len: usize,
    device_writes: bool,
}

impl UserPages {
    /// Pins the `len` bytes at `at` (`len` > 0) for the device to read or,
    /// with `device_writes`, to write. `EFAULT` when part of the range is
    /// not ordinary user memory (an I/O mapping, a hole): the caller copies
    /// it instead, and the copy answers for it.
    pub(crate) fn pin(at: UserPtr, len: usize, device_writes: bool) -> Result<Self> {
        let start = at.as_const_ptr() as usize;
        let end = start.checked_add(len).filter(|_| len > 0).ok_or(EFAULT)?;
        let nr = (end - 1) / PAGE_SIZE - start / PAGE_SIZE + 1;
        let mut pages = KVVec::from_elem(ptr::null_mut(), nr, GFP_KERNEL_ACCOUNT)?;
        // SAFETY: `pages` holds `nr` slots for the helper to write; it pins
        // `nr` pages or none (returning an error), and holds no reference
        // to `pages` after it returns.
        let got = unsafe { nhbm_pin_user(start, nr, device_writes, pages.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::from_errno(got as i32));
        }
        Ok(Self {
            pages,
            offset: (start % PAGE_SIZE) as u32,
            len,
            device_writes,
        })
    }

    /// Where `[from, from + n)` of the range starts in the pages' bytes:
    /// `EINVAL` past the range.
    fn part(&self, from: usize, n: usize) -> Result<u32> {
        match from.checked_add(n) {
            Some(end) if end <= self.len => {
                u32::try_from(self.offset as usize + from).map_err(|_| EINVAL)
            }
            _ => Err(EINVAL),
        }
    }

    /// Copies `n` bytes with the CPU from the MMIO range at `src` into
    /// the range's bytes `[from, from + n)`: `EINVAL` past the range, or
    /// unless the pages were pinned for writing (a page pinned for reading
    /// may be shared copy-on-write).
    ///
    /// # Safety
    ///
    /// `src` is the start of `n` bytes of an MMIO mapping that stays
    /// mapped until this returns.
    pub(crate) unsafe fn copy_from_io(&self, from: usize, n: usize, src: *const c_void) -> Result {
        if !self.device_writes {
            return Err(EINVAL);
        }
        let at = self.part(from, n)?;
        // SAFETY: the pages are pinned while `self` lives and the part
        // lies inside the range, which lies inside them (checked above);
        // the helper only reads the array and `n` bytes at `src`, which the
        // caller vouches for, and writes the part's bytes. The pages were
        // pinned with `FOLL_WRITE` (checked above), so writing them writes
        // the process's own copy, and they are unpinned dirty.
        unsafe { nhbm_io_to_pages(self.pages.as_ptr().cast_mut(), at, n, src) };
        Ok(())
    }

    /// Maps the range for `dev` as a scatter-gather table of segments of
    /// at most `max_segment` bytes, physically contiguous pages joined;
    /// the DMA API's errno (`ENOMEM`, `EIO`, nothing mapped) when it
    /// cannot.
    pub(crate) fn map(&self, dev: &DmaDevice, max_segment: u32) -> Result<Mapped<'_>> {
        let mut sgt = ptr::null_mut();
        // SAFETY: the pages are pinned while `self` lives and the range
        // (`offset`, `len`) lies inside them; the helper only reads the
        // array (`sg_alloc_table_from_pages_segment` takes it as mutable
        // but does not write it). The device is bound (`DmaDevice`'s
        // rule). The helper maps all or nothing and, on success, hands
        // over a table that `Mapped` frees once.
        let r = unsafe {
            nhbm_dma_map_user(
                dev.raw(),
                self.pages.as_ptr().cast_mut(),
                self.pages.len(),
                self.offset,
                self.len,
                max_segment,
                self.device_writes,
                &mut sgt,
            )
        };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        Ok(Mapped {
            pages: self,
            dev: dev.clone(),
            sgt,
        })
    }
}

impl Drop for UserPages {
    fn drop(&mut self) {
        // SAFETY: every entry of `pages` was pinned by `pin` and is unpinned
        // once, here; a page the device wrote is marked dirty.
        unsafe {
            nhbm_unpin_user(
                self.pages.as_mut_ptr(),
                self.pages.len(),
                self.device_writes,
            )
        };
    }
}

/// Pinned user pages mapped for a device, as a scatter-gather table, until
/// this is dropped.
pub(crate) struct Mapped<'a> {
    pages: &'a UserPages,
    dev: DmaDevice,
    sgt: *mut helpers::sg_table,
}

impl Mapped<'_> {
    /// The DMA address and length of each mapped segment, in the range's
    /// order.
    pub(crate) fn spans(&self) -> Spans<'_> {
        let (mut sg, mut left) = (ptr::null_mut(), 0);
        // SAFETY: `sgt` is the table `map` made and mapped; it lives, and
        // nothing changes it, until `self` is dropped. The helper only
        // reads it and writes the two out arguments.
        unsafe { nhbm_dma_spans_start(self.sgt, &mut sg, &mut left) };
        Spans {
            sg,
            left,
            addr: [0; SPAN_RUN],
            len: [0; SPAN_RUN],
            at: 0,
            read: 0,
            _table: PhantomData,
        }
    }
}

/// The mapped segments of a [`Mapped`], as (DMA address, length), read
/// from its table [`SPAN_RUN`] at a time.
pub(crate) struct Spans<'a> {
    /// The next segment to read and how many are left.
    sg: *mut helpers::scatterlist,
    left: u32,
    /// The run read last, `read` of them, `at` handed out.
    addr: [u64; SPAN_RUN],
    len: [u32; SPAN_RUN],
    at: usize,
    read: usize,
    _table: PhantomData<&'a Mapped<'a>>,
}

impl Iterator for Spans<'_> {
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        if self.at == self.read {
            // SAFETY: `sg` and `left` are where the last read of the table
            // left them (or its start), and the table lives, mapped and
            // unchanged, while `self` borrows its `Mapped`; the helper
            // writes at most `SPAN_RUN` entries of each array.
            let read = unsafe {
                nhbm_dma_spans(
                    &mut self.sg,
                    &mut self.left,
                    self.addr.as_mut_ptr(),
                    self.len.as_mut_ptr(),
                    SPAN_RUN as u32,
                )
            };
            (self.at, self.read) = (0, read as usize);
        }
        let i = self.at;
        if i == self.read {
            return None;
        }
        self.at += 1;
        Some((self.addr[i], self.len[i] as usize))
    }
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        // SAFETY: `sgt` is the table `map` mapped for this device with this
        // direction, unmapped and freed once, here, while the pages are
        // still pinned (`self` borrows them).
        unsafe { nhbm_dma_unmap_user(self.dev.raw(), self.sgt, self.pages.device_writes) };
    }
}
