// SPDX-License-Identifier: GPL-2.0-only

//! A page of kernel memory owned like a box of bytes, which processes may
//! also map: the simulated device's memory.
//!
//! The kernel crate's [`Page`] reaches its bytes only through copies that
//! map the page for each call. The simulated device copies user memory
//! straight into its pages and maps them into processes, so [`PageBox`]
//! keeps the page's address in the kernel's direct map, which a page
//! allocated without `__GFP_HIGHMEM` always has. A mapped page may change
//! under the kernel at any time (a process's stores), so its bytes are only
//! ever copied, never borrowed as a Rust slice.

use crate::abstractions::helpers;
use core::ptr::NonNull;
use kernel::{
    alloc::{
        flags::{__GFP_HIGHMEM, __GFP_ZERO},
        Flags,
    },
    page::{Page, PAGE_SIZE},
    prelude::*,
};

/// A page of `PAGE_SIZE` bytes.
///
/// # Invariants
///
/// `addr` is the direct-map address of `page`, a page without
/// `__GFP_HIGHMEM`; the box owns the page's allocation (mappings into
/// processes hold references of their own). Unless the box is
/// [`Uninit`](PageBox::new_uninit), every byte is initialized.
pub(crate) struct PageBox {
    page: Page,
    addr: NonNull<u8>,
}

// SAFETY: the page is memory like a `KBox`'s, with no tie to a thread.
unsafe impl Send for PageBox {}
// SAFETY: `&PageBox` only copies bytes out or reads the page's state.
unsafe impl Sync for PageBox {}

/// A [`PageBox`] whose bytes are not initialized yet.
pub(crate) struct Uninit(PageBox);

impl PageBox {
    fn alloc(flags: Flags) -> Result<Self> {
        // Never `__GFP_HIGHMEM`, whatever the caller asks: the page must be
        // in the direct map.
        let page = Page::alloc_page(flags & !__GFP_HIGHMEM)?;
        // SAFETY: `page` is a valid page allocated without `__GFP_HIGHMEM`
        // (above), so it has a direct-map address, valid for as long as the
        // page is allocated.
        let addr = unsafe { helpers::nhbm_page_address(page.as_ptr().cast()) };
        // INVARIANT: `addr` is the direct-map address of `page`, ours alone.
        Ok(Self {
            page,
            addr: NonNull::new(addr.cast()).ok_or(ENOMEM)?,
        })
    }

    /// A page of zeros, allocated with `flags` (`GFP_KERNEL_ACCOUNT` to
    /// charge it to the caller's memory cgroup).
    pub(crate) fn zeroed(flags: Flags) -> Result<Self> {
        Self::alloc(flags | __GFP_ZERO)
    }

    /// A page whose bytes are to be written before it is used.
    pub(crate) fn new_uninit(flags: Flags) -> Result<Uninit> {
        Ok(Uninit(Self::alloc(flags)?))
    }

    /// Checks that `[at, at + len)` lies inside the page.
    fn check(at: usize, len: usize) -> Result {
        match at.checked_add(len) {
            Some(end) if end <= PAGE_SIZE => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `dst.len()` bytes at `at` into `dst` (`EINVAL` past the page).
    pub(crate) fn read(&self, at: usize, dst: &mut [u8]) -> Result {
        Self::check(at, dst.len())?;
        // SAFETY: `[at, at + len)` lies in the page (checked), whose bytes
        // are initialized (invariant); `dst` is another object. A process
        // may store to a mapped page meanwhile: the copy sees some bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(self.addr.as_ptr().add(at), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` to `at` (`EINVAL` past the page).
    pub(crate) fn write(&mut self, at: usize, src: &[u8]) -> Result {
        Self::check(at, src.len())?;
        // SAFETY: `[at, at + len)` lies in the page (checked), which the
        // kernel writes only through this box; `src` is another object.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.addr.as_ptr().add(at), src.len())
        };
        Ok(())
    }

    /// Zeroes `len` bytes at `at` (`EINVAL` past the page).
    pub(crate) fn zero(&mut self, at: usize, len: usize) -> Result {
        Self::check(at, len)?;
        // SAFETY: `[at, at + len)` lies in the page (checked).
        unsafe { core::ptr::write_bytes(self.addr.as_ptr().add(at), 0, len) };
        Ok(())
    }

    /// Copies every byte of `other` into this page.
    pub(crate) fn copy_from(&mut self, other: &PageBox) {
        // SAFETY: two distinct pages (`&mut self` and `&other`), `PAGE_SIZE`
        // bytes each, `other`'s initialized (invariant).
        unsafe {
            core::ptr::copy_nonoverlapping(other.addr.as_ptr(), self.addr.as_ptr(), PAGE_SIZE)
        };
    }

    /// Whether anything but this box holds the page: a process's mapping,
    /// a pin taken through one, or a [`PageRef`].
    pub(crate) fn is_shared(&self) -> bool {
        // SAFETY: `page` is a valid page (invariant).
        unsafe { helpers::nhbm_page_shared(self.page.as_ptr().cast()) }
    }

    /// A reference of its own on the page, which keeps it allocated (and
    /// [shared](PageBox::is_shared)) after the box is gone.
    pub(crate) fn new_ref(&self) -> Result<PageRef> {
        let page = NonNull::new(self.page.as_ptr().cast::<helpers::page>()).ok_or(EINVAL)?;
        // SAFETY: `page` is a valid page (invariant); the reference taken
        // is the `PageRef`'s, given back by its drop.
        unsafe { helpers::nhbm_page_get(page.as_ptr()) };
        // INVARIANT: the reference was just taken.
        Ok(PageRef { page })
    }

    /// The page, its bytes to be written again: `Err` gives it back when
    /// anything else holds it (a process could see the bytes change, or
    /// read the ones not written yet).
    pub(crate) fn into_uninit(self) -> core::result::Result<Uninit, PageBox> {
        if self.is_shared() {
            Err(self)
        } else {
            Ok(Uninit(self))
        }
    }
}

/// A reference on a page of a [`PageBox`], for a process to map it with no
/// lock held: the page stays allocated until the reference is dropped.
///
/// # Invariants
///
/// `page` is a valid page this holds one reference on.
pub(crate) struct PageRef {
    page: NonNull<helpers::page>,
}

// SAFETY: a page reference is usable and droppable from any thread.
unsafe impl Send for PageRef {}

impl PageRef {
    /// The page frame number, for a process to map the page.
    pub(crate) fn pfn(&self) -> usize {
        // SAFETY: `page` is valid while the reference is held (invariant).
        unsafe { helpers::nhbm_page_pfn(self.page.as_ptr()) as usize }
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: the reference `new_ref` took (invariant), given back once.
        unsafe { helpers::nhbm_page_put(self.page.as_ptr()) };
    }
}

impl Uninit {
    /// The page's first byte: `PAGE_SIZE` bytes to be written, which nothing
    /// else reads or writes (a page no mapping, pin or [`PageRef`] held
    /// when it became an `Uninit`, and which gives out no page frame).
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.addr.as_ptr()
    }

    /// The page, its bytes declared initialized.
    ///
    /// # Safety
    ///
    /// Every byte of the page was written through [`Uninit::as_mut_ptr`].
    pub(crate) unsafe fn assume_init(self) -> PageBox {
        // INVARIANT: the caller wrote every byte.
        self.0
    }
}
