// SPDX-License-Identifier: GPL-2.0-only

//! Mappings of a device node's file into processes, over vma_helpers.c: what
//! the kernel crate's `VmaNew` lacks (a fault handler, write-combining, the
//! file offset a mapping starts at), an address space of its own for each
//! open file, and the revocation of a file range from every process that
//! maps it.
//!
//! A mapping is filled only by its fault handler, one page (or a few) at a
//! time: a range taken away with [`Space::unmap`] faults again, and the
//! handler can refuse it (`SIGBUS`).

use crate::abstractions::helpers;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    ffi::{c_int, c_ulong, c_void},
    fs::File,
    mm::virt::{flags, VmaNew},
    page::PAGE_SHIFT,
    prelude::*,
};

/// What backs a mapping's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// Device memory (a BAR): raw page frames, mapped write-combining.
    Io,
    /// Pages of system memory, each mapped with a reference on it.
    Pages,
}

/// The fault handler a mapping is set up with: fills file page `pgoff` of
/// the faulting mapping of the file whose `private_data` is `file_data`;
/// 0, `-ENOMEM`, or another errno (the access gets `SIGBUS`).
pub(crate) type FaultFn =
    unsafe extern "C" fn(*mut c_void, c_ulong, *mut helpers::vm_fault) -> c_int;

/// A mapping being created by `mmap(2)`.
pub(crate) struct NewMapping<'a> {
    vma: &'a VmaNew,
}

impl<'a> NewMapping<'a> {
    /// The mapping `vma`, being set up.
    pub(crate) fn new(vma: &'a VmaNew) -> Self {
        Self { vma }
    }

    /// The first page of the file it maps.
    pub(crate) fn pgoff(&self) -> u64 {
        // SAFETY: `vma` is a valid vma under initial setup, which nothing
        // else writes meanwhile.
        unsafe { (*self.vma.as_ptr()).vm_pgoff as u64 }
    }

    /// Pages it spans.
    pub(crate) fn pages(&self) -> u64 {
        ((self.vma.end() - self.vma.start()) >> PAGE_SHIFT) as u64
    }

    /// Whether it is `MAP_SHARED` (`MAP_PRIVATE` ones are copy-on-write).
    pub(crate) fn shared(&self) -> bool {
        self.vma.flags() & flags::MAYSHARE != 0
    }

    /// Makes it read-only for good: `EACCES` if it asks for write access;
    /// otherwise `mprotect(2)` can never add it.
    pub(crate) fn forbid_writes(&self) -> Result {
        if self.vma.writable() {
            return Err(EACCES);
        }
        self.vma.try_clear_maywrite()
    }

    /// Sets the mapping up to be filled by `fault`, with pages of `backing`,
    /// and counts it against its file's limit (`ENOMEM` past it).
    ///
    /// # Safety
    ///
    /// The file mapped was given a [`Space`] of its own when it was opened
    /// ([`Space::for_file`]), which lives while the file does.
    pub(crate) unsafe fn set_up(&self, backing: Backing, fault: FaultFn) -> Result {
        // SAFETY: `vma` is under initial setup, with the mmap lock held for
        // writing (the `mmap` file operation); its file has a space of its
        // own (the caller's contract), which the C side counts the mapping
        // in; `fault` is a function that lives as long as the module, which
        // outlives the mapping (it holds the file, and the file the module).
        kernel::error::to_result(unsafe {
            helpers::nhbm_vma_setup(
                self.vma.as_ptr().cast(),
                backing == Backing::Io,
                Some(fault),
            )
        })
    }
}

/// A page fault in a mapping, being handled.
pub(crate) struct Fault<'a> {
    vmf: NonNull<helpers::vm_fault>,
    _handling: PhantomData<&'a helpers::vm_fault>,
}

impl Fault<'_> {
    /// The fault `vmf`, for the time its handler runs.
    ///
    /// # Safety
    ///
    /// `vmf` is the fault being handled by the caller, a fault handler set
    /// up with [`NewMapping::set_up`], valid for `'a`.
    pub(crate) unsafe fn from_raw(vmf: *mut helpers::vm_fault) -> Option<Self> {
        Some(Self {
            vmf: NonNull::new(vmf)?,
            _handling: PhantomData,
        })
    }

    /// Maps page frame `pfn` at file page `pgoff` of the faulting mapping:
    /// `ERANGE` if the mapping does not span that page, `ENOMEM`, `EFAULT`.
    /// A page frame of system memory must be a page the caller keeps alive
    /// until this returns (the mapping takes its own reference).
    pub(crate) fn insert(&self, pgoff: u64, pfn: usize) -> Result {
        let pgoff = c_ulong::try_from(pgoff).map_err(|_| ERANGE)?;
        // SAFETY: `vmf` is the fault being handled (type invariant), whose
        // mapping was set up for inserts by `nhbm_vma_setup`.
        kernel::error::to_result(unsafe {
            helpers::nhbm_vmf_insert(self.vmf.as_ptr(), pgoff, pfn as c_ulong)
        })
    }
}

/// The address space of one open file: the mappings made of that file and
/// of no other, at most `NHBM_MAPS_PER_FILE` of them (`mmap` and splits
/// past it get `ENOMEM`).
///
/// # Invariants
///
/// `space` is the `nhbm_space` made by `nhbm_space_new`, owned by this.
pub(crate) struct Space {
    space: NonNull<helpers::nhbm_space>,
}

// SAFETY: an address space is a kernel object usable from any thread.
unsafe impl Send for Space {}
// SAFETY: `unmap` takes the address space's own locks.
unsafe impl Sync for Space {}

impl Space {
    /// A new address space for `file`, which is being opened (no mapping
    /// of it exists yet): its mappings are linked there from now on.
    pub(crate) fn for_file(file: &File) -> Result<Self> {
        let mut space = core::ptr::null_mut();
        // SAFETY: `file` is a valid file being opened, not yet handed to
        // userspace, so nothing maps it or reads its `f_mapping` meanwhile.
        kernel::error::to_result(unsafe {
            helpers::nhbm_space_new(file.as_ptr().cast(), &mut space)
        })?;
        // INVARIANT: `nhbm_space_new` succeeded and handed `space` over.
        Ok(Self {
            space: NonNull::new(space).ok_or(EINVAL)?,
        })
    }

    /// Takes bytes `[off, off + len)` of the file (to its end if `len` is 0)
    /// away from every process that maps them: their next access faults.
    /// Costs the file's own mappings of that range.
    pub(crate) fn unmap(&self, off: u64, len: u64) {
        // SAFETY: `space` is valid (invariant); sleeps, as callers may.
        unsafe { helpers::nhbm_space_unmap(self.space.as_ptr(), off, len) };
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        // SAFETY: owned (invariant), given back once. No mapping of its
        // file is left: each mapping holds the file, whose open file holds
        // the `Space`, so the last holder goes once the file is released
        // (or its open failed, before anything could map it).
        unsafe { helpers::nhbm_space_put(self.space.as_ptr()) };
    }
}
