// SPDX-License-Identifier: GPL-2.0-only

//! User memory read front to back, as the kernel's `UserSliceReader` reads
//! it, with one more way to copy: with non-temporal stores, for bytes that
//! no CPU reads back soon (a simulated device's memory). The kernel crate
//! has no such read; every ordinary copy still goes through its reader.

use core::mem::MaybeUninit;

use crate::abstractions::helpers::nhbm_copy_from_user_nontemporal;
use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// The unread rest of a range of user memory.
pub(crate) struct UserSource {
    ptr: UserPtr,
    len: usize,
}

impl UserSource {
    /// The `len` bytes at user address `ptr`. Nothing is checked until a
    /// read: each read faults (`EFAULT`) where the memory does.
    pub(crate) fn new(ptr: UserPtr, len: usize) -> Self {
        Self { ptr, len }
    }

    /// Takes the next `n` bytes: `EFAULT` past the end, as the kernel's
    /// reader answers it.
    fn take(&mut self, n: usize) -> Result<UserPtr> {
        if n > self.len {
            return Err(EFAULT);
        }
        let at = self.ptr;
        self.ptr = self.ptr.wrapping_byte_add(n);
        self.len -= n;
        Ok(at)
    }

    /// Copies the next `out.len()` bytes into `out`.
    pub(crate) fn read_slice(&mut self, out: &mut [u8]) -> Result {
        let at = self.take(out.len())?;
        UserSlice::new(at, out.len()).reader().read_slice(out)
    }

    /// Copies the next `out.len()` bytes into `out` with non-temporal stores
    /// where the architecture has them (x86), fenced before this returns.
    /// `EFAULT` if any byte faulted: `out` then holds an unknown prefix.
    pub(crate) fn read_raw_nontemporal(&mut self, out: &mut [MaybeUninit<u8>]) -> Result {
        let n = out.len();
        let at = self.take(n)?;
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
