// SPDX-License-Identifier: GPL-2.0-only

//! User memory read front to back ([`UserSource`]), as the kernel's
//! `UserSliceReader` reads it, or written front to back ([`UserSink`]), with
//! two more ways to move it: with non-temporal stores, for bytes that no
//! CPU reads back soon (a simulated device's memory), in place by a
//! device's DMA engine, its pages pinned ([`UserPages`]), and by a copy that
//! may not fault pages in (inside an RCU read-side section), pages it
//! stops at faulted in between its steps. The kernel crate has none of
//! these; every ordinary copy still goes through its reader or writer.

use core::mem::MaybeUninit;

use crate::abstractions::helpers::{nhbm_copy_from_user_nontemporal, nhbm_fault_in_readable};
use crate::abstractions::{resched, user_dma::UserPages};
use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// The rest of a range of user memory, taken front to back.
struct Cursor {
    ptr: UserPtr,
    len: usize,
}

impl Cursor {
    /// Takes the next `n` bytes: `EFAULT` past the end, as the kernel's
    /// reader and writer answer it.
    fn take(&mut self, n: usize) -> Result<UserPtr> {
        if n > self.len {
            return Err(EFAULT);
        }
        let at = self.ptr;
        self.ptr = self.ptr.wrapping_byte_add(n);
        self.len -= n;
        Ok(at)
    }

    /// Pins the next `n` bytes (`n` > 0), taking them only if they are
    /// pinned: the caller copies them otherwise.
    fn pin_next(&mut self, n: usize, device_writes: bool) -> Result<UserPages> {
        if n > self.len {
            return Err(EFAULT);
        }
        let pages = UserPages::pin(self.ptr, n, device_writes)?;
        self.take(n)?;
        Ok(pages)
    }
}

/// The unread rest of a range of user memory.
pub(crate) struct UserSource(Cursor);

impl UserSource {
    /// The `len` bytes at user address `ptr`. Nothing is checked until a
    /// read: each read faults (`EFAULT`) where the memory does.
    pub(crate) fn new(ptr: UserPtr, len: usize) -> Self {
        Self(Cursor { ptr, len })
    }

    /// Pins the next `n` bytes for a device to read in place; `EFAULT`
    /// (nothing taken) where they cannot be pinned.
    pub(crate) fn pin_next(&mut self, n: usize) -> Result<UserPages> {
        self.0.pin_next(n, false)
    }

    /// Copies the next `n` bytes with `copy(at, from, left)`: it copies
    /// what it can of the `left` bytes at user address `at` (byte `from` of
    /// the `n`) without faulting a page in, and returns how many it did not
    /// copy. The page it stopped at is faulted in for reading (which may
    /// sleep) outside it, and the copy goes on from there, killable between
    /// steps (`EINTR`). `EFAULT` where a page cannot be faulted in: what
    /// was copied is taken, the rest is not.
    pub(crate) fn copy_next_unfaulted(
        &mut self,
        n: usize,
        mut copy: impl FnMut(UserPtr, usize, usize) -> Result<usize>,
    ) -> Result {
        if n > self.0.len {
            return Err(EFAULT);
        }
        let mut from = 0;
        while from < n {
            let left = n - from;
            let missed = copy(self.0.ptr, from, left)?;
            let copied = left.checked_sub(missed).ok_or(EINVAL)?;
            self.0.take(copied)?;
            from += copied;
            if missed > 0 {
                resched::checkpoint()?;
                // SAFETY: the helper only faults user pages in (or fails
                // to); any address is safe to pass.
                let unread = unsafe { nhbm_fault_in_readable(self.0.ptr.as_const_ptr(), missed) };
                if unread == missed {
                    return Err(EFAULT);
                }
            }
        }
        Ok(())
    }

    /// Copies the next `out.len()` bytes into `out`.
    pub(crate) fn read_slice(&mut self, out: &mut [u8]) -> Result {
        let at = self.0.take(out.len())?;
        UserSlice::new(at, out.len()).reader().read_slice(out)
    }

    /// Copies the next `out.len()` bytes into `out` with non-temporal stores
    /// where the architecture has them (x86), fenced before this returns.
    /// `EFAULT` if any byte faulted: `out` then holds an unknown prefix.
    pub(crate) fn read_raw_nontemporal(&mut self, out: &mut [MaybeUninit<u8>]) -> Result {
        let n = out.len();
        let at = self.0.take(n)?;
        // SAFETY: `out` is valid for writes of `n` bytes, and any byte value
        // is a valid `MaybeUninit<u8>`; the helper reads user memory only
        // through the kernel's fault-handling user copy.
        let left = unsafe {
            nhbm_copy_from_user_nontemporal(out.as_mut_ptr().cast(), at.as_const_ptr(), n)
        };
        if left == 0 {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }
}

/// The unwritten rest of a range of user memory.
pub(crate) struct UserSink(Cursor);

impl UserSink {
    /// The `len` bytes at user address `ptr`, checked at each write.
    pub(crate) fn new(ptr: UserPtr, len: usize) -> Self {
        Self(Cursor { ptr, len })
    }

    /// Pins the next `n` bytes for a device to write in place; `EFAULT`
    /// (nothing taken) where they cannot be pinned.
    pub(crate) fn pin_next(&mut self, n: usize) -> Result<UserPages> {
        self.0.pin_next(n, true)
    }

    /// Copies `data` to the next `data.len()` bytes.
    pub(crate) fn write_slice(&mut self, data: &[u8]) -> Result {
        let at = self.0.take(data.len())?;
        UserSlice::new(at, data.len()).writer().write_slice(data)
    }
}
