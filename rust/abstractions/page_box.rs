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
use core::{mem::ManuallyDrop, ptr::NonNull};
use kernel::{
    alloc::{
        flags::{__GFP_HIGHMEM, __GFP_ZERO, GFP_KERNEL_ACCOUNT},
        Flags,
    },
    page::{Page, PAGE_SIZE},
    prelude::*,
};

/// Pages [`PageBox::new_uninit_batch`] allocates at once: an order-2 block
/// (the simulated device's uploads measured faster with it than with
/// order-3 blocks or single pages).
pub(crate) const BATCH: usize = 4;
/// The order of a [`BATCH`].
const BATCH_ORDER: u32 = 2;

/// A page of `PAGE_SIZE` bytes.
///
/// # Invariants
///
/// `page` is a page without `__GFP_HIGHMEM`, not part of a larger
/// allocation, of which the box holds one reference (mappings into
/// processes and [`PageRef`]s hold their own); `addr` is its direct-map
/// address. Unless the box is [`Uninit`](PageBox::new_uninit), every byte
/// is initialized.
pub(crate) struct PageBox {
    page: NonNull<helpers::page>,
    addr: NonNull<u8>,
}

// SAFETY: the page is memory like a `KBox`'s, with no tie to a thread.
unsafe impl Send for PageBox {}
// SAFETY: `&PageBox` only copies bytes out or reads the page's state.
unsafe impl Sync for PageBox {}

/// A [`PageBox`] whose bytes are not initialized yet.
pub(crate) struct Uninit(PageBox);

impl PageBox {
    /// Owns `page`, or gives its reference back (`ENOMEM`) if it has no
    /// direct-map address.
    ///
    /// # Safety
    ///
    /// `page` is a valid page allocated without `__GFP_HIGHMEM`, not part
    /// of a larger allocation, on which the caller holds a reference it
    /// hands to the box.
    unsafe fn from_raw(page: NonNull<helpers::page>) -> Result<Self> {
        // SAFETY: `page` is a valid page (the caller's guarantee).
        let addr = unsafe { helpers::nhbm_page_address(page.as_ptr()) };
        match NonNull::new(addr.cast()) {
            // INVARIANT: allocated without `__GFP_HIGHMEM` (the caller's
            // guarantee), so `addr` is its direct-map address; the
            // reference is the box's from here on.
            Some(addr) => Ok(Self { page, addr }),
            None => {
                // SAFETY: the caller's reference, given back once.
                unsafe { helpers::nhbm_page_put(page.as_ptr()) };
                Err(ENOMEM)
            }
        }
    }

    fn alloc(flags: Flags) -> Result<Self> {
        // Never `__GFP_HIGHMEM`, whatever the caller asks: the page must be
        // in the direct map. The box frees it by its reference, so the
        // `Page` must not free it too.
        let page = ManuallyDrop::new(Page::alloc_page(flags & !__GFP_HIGHMEM)?);
        let raw = NonNull::new(page.as_ptr().cast::<helpers::page>()).ok_or(ENOMEM)?;
        // SAFETY: an order-0 page just allocated without `__GFP_HIGHMEM`,
        // whose one reference the `Page`, never dropped, no longer gives
        // back.
        unsafe { Self::from_raw(raw) }
    }

    /// Up to [`BATCH`] pages whose bytes are to be written before they are
    /// used, charged to the caller's memory cgroup: one allocation of
    /// [`BATCH`] pages split into pages of their own where the allocator
    /// has such a block at hand, else a single page (the other slots
    /// `None`). Each page is freed on its own.
    pub(crate) fn new_uninit_batch() -> Result<[Option<Uninit>; BATCH]> {
        let mut out = [const { None }; BATCH];
        // SAFETY: no precondition; the result is NULL or the first of
        // `BATCH` split pages (`GFP_KERNEL_ACCOUNT`, no `__GFP_HIGHMEM`),
        // each with one reference, which are ours.
        let first = unsafe { helpers::nhbm_alloc_split_pages(BATCH_ORDER) };
        let Some(first) = NonNull::new(first) else {
            out[0] = Some(Self::new_uninit(GFP_KERNEL_ACCOUNT)?);
            return Ok(out);
        };
        let mut failed = None;
        for (n, slot) in out.iter_mut().enumerate() {
            // SAFETY: `first` is the first page of a block of `BATCH` pages,
            // and `n < BATCH`.
            let page = unsafe { helpers::nhbm_page_at(first.as_ptr(), n) };
            let Some(page) = NonNull::new(page) else {
                continue;
            };
            // SAFETY: page `n` of the block: a valid page of its own (the
            // block was split), allocated without `__GFP_HIGHMEM`, whose one
            // reference is handed over once.
            match unsafe { Self::from_raw(page) } {
                Ok(b) => *slot = Some(Uninit(b)),
                Err(e) => failed = Some(e),
            }
        }
        // A page that failed gave its reference back; the rest go with `out`.
        failed.map_or(Ok(out), Err)
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
        unsafe { helpers::nhbm_page_shared(self.page.as_ptr()) }
    }

    /// A reference of its own on the page, which keeps it allocated (and
    /// [shared](PageBox::is_shared)) after the box is gone.
    pub(crate) fn new_ref(&self) -> Result<PageRef> {
        let page = self.page;
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

impl Drop for PageBox {
    fn drop(&mut self) {
        // SAFETY: the box's reference (invariant), given back once; the
        // page is freed with the last reference.
        unsafe { helpers::nhbm_page_put(self.page.as_ptr()) };
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
