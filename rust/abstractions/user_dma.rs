// SPDX-License-Identifier: GPL-2.0-only

//! User memory a device's DMA engine reads or writes in place (zero copy),
//! over `user_dma.c`: the pages of a range pinned ([`UserPages`]), then
//! each page's span mapped for the device with the DMA API ([`Mapped`]).
//! The kernel crate maps only memory the kernel allocated (its
//! scatter-gather tables take vmalloc buffers), not pinned user pages.

use crate::abstractions::helpers::{
    self, nhbm_dma_map_pages, nhbm_dma_unmap_pages, nhbm_pin_user, nhbm_unpin_user,
};
use core::ptr;
use kernel::{
    device::{Bound, Device},
    page::PAGE_SIZE,
    prelude::*,
    sync::aref::ARef,
    uaccess::UserPtr,
};

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
/// arrays may fall back to vmalloc: a piece of 16 MiB has 4097 pages, and
/// no transfer should wait for an order-3 allocation.
pub(crate) struct UserPages {
    pages: KVVec<*mut helpers::page>,
    /// Where in its page each page's part of the range starts, and its
    /// length.
    offs: KVVec<u32>,
    lens: KVVec<u32>,
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
        let (mut offs, mut lens) = (
            KVVec::with_capacity(nr, GFP_KERNEL_ACCOUNT)?,
            KVVec::with_capacity(nr, GFP_KERNEL_ACCOUNT)?,
        );
        let mut at = start;
        while at < end {
            // The next page boundary; the last page of the address space
            // has none (a user range never reaches it: pinning refuses it).
            let next = (at | (PAGE_SIZE - 1)).saturating_add(1);
            offs.push((at % PAGE_SIZE) as u32, GFP_KERNEL_ACCOUNT)?;
            lens.push((next.min(end) - at) as u32, GFP_KERNEL_ACCOUNT)?;
            at = next;
        }
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
            offs,
            lens,
            device_writes,
        })
    }

    /// Maps every page's span for `dev`: `ENOMEM` (nothing mapped) when
    /// the DMA API cannot.
    pub(crate) fn map(&self, dev: &DmaDevice) -> Result<Mapped<'_>> {
        let nr = self.pages.len();
        let mut addrs = KVVec::from_elem(0u64, nr, GFP_KERNEL_ACCOUNT)?;
        // SAFETY: the `nr` pages are pinned while `self` lives; `offs` and
        // `lens` describe spans inside them; `addrs` has `nr` slots; the
        // device is bound (`DmaDevice`'s rule). The helper maps all or
        // none.
        let r = unsafe {
            nhbm_dma_map_pages(
                dev.raw(),
                self.pages.as_ptr(),
                self.offs.as_ptr(),
                self.lens.as_ptr(),
                nr,
                self.device_writes,
                addrs.as_mut_ptr(),
            )
        };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        Ok(Mapped {
            pages: self,
            dev: dev.clone(),
            addrs,
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

/// The spans of pinned user pages, mapped for a device until this is
/// dropped.
pub(crate) struct Mapped<'a> {
    pages: &'a UserPages,
    dev: DmaDevice,
    addrs: KVVec<u64>,
}

impl Mapped<'_> {
    /// The DMA address and length of each page's span, in the range's
    /// order.
    pub(crate) fn spans(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        let lens = self.pages.lens.iter().map(|&n| n as usize);
        self.addrs.iter().copied().zip(lens)
    }
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        // SAFETY: `addrs` and `lens` are the mappings `map` made for this
        // device with this direction, each unmapped once, here, while the
        // pages are still pinned (`self` borrows them).
        unsafe {
            nhbm_dma_unmap_pages(
                self.dev.raw(),
                self.addrs.as_ptr(),
                self.pages.lens.as_ptr(),
                self.addrs.len(),
                self.pages.device_writes,
            )
        };
    }
}
