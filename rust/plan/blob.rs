// SPDX-License-Identifier: GPL-2.0-only

//! Where a plan blob's bytes come from: user memory (the ioctl) or a kernel
//! buffer (tests). Payloads move straight from the source to the device.

use crate::{abstractions::user_source::UserSource, device::fault::FaultInjector, device::Device};
use kernel::{
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// A payload to upload: `len` bytes at blob offset `off` to device PA `pa`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Part {
    /// Device physical address.
    pub(crate) pa: u64,
    /// Offset in the blob.
    pub(crate) off: u64,
    /// Bytes.
    pub(crate) len: u64,
}

/// A plan blob of `len()` bytes that can be read at any offset.
pub(crate) trait BlobSource {
    /// Length in bytes.
    fn len(&self) -> u64;

    /// Copies `buf.len()` bytes at `off`; `EINVAL` outside the blob, `EFAULT`
    /// when the memory behind it faults.
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result;

    /// Uploads `len` bytes at `off` to device PA `pa` of `dev`, for a plan
    /// staged at reset epoch `staged_at`.
    fn upload(&self, dev: &Device, staged_at: u64, pa: u64, off: u64, len: u64) -> Result;

    /// Uploads every part (device PA, blob offset, length) to `dev`, for a
    /// plan staged at reset epoch `staged_at`: by default one after the
    /// other.
    fn upload_gathered(&self, dev: &Device, staged_at: u64, parts: &[Part]) -> Result {
        parts
            .iter()
            .try_for_each(|p| self.upload(dev, staged_at, p.pa, p.off, p.len))
    }

    /// Checks that `[off, off + len)` lies inside the blob.
    fn check(&self, off: u64, len: u64) -> Result {
        match off.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(EINVAL),
        }
    }
}

/// A blob in the calling process's memory; every copy is a fault-injection
/// point of the device it is loaded on.
pub(crate) struct UserBlob<'a> {
    addr: usize,
    len: u64,
    fault: &'a FaultInjector,
}

impl<'a> UserBlob<'a> {
    /// The blob at user address `addr`, `len` bytes long.
    pub(crate) fn new(addr: u64, len: u64, fault: &'a FaultInjector) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        addr.checked_add(usize::try_from(len).map_err(|_| EINVAL)?)
            .ok_or(EFAULT)?;
        Ok(Self { addr, len, fault })
    }

    /// The user address and length of `[off, off + len)` of the blob.
    fn range(&self, off: u64, len: u64) -> Result<(UserPtr, usize)> {
        self.check(off, len)?;
        let len = usize::try_from(len)?;
        Ok((UserPtr::from_addr(self.addr + off as usize), len))
    }
}

impl BlobSource for UserBlob<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result {
        self.fault.point(EFAULT)?;
        let (at, len) = self.range(off, buf.len() as u64)?;
        UserSlice::new(at, len).reader().read_slice(buf)
    }

    fn upload(&self, dev: &Device, staged_at: u64, pa: u64, off: u64, len: u64) -> Result {
        self.fault.point(EFAULT)?;
        let (at, n) = self.range(off, len)?;
        dev.write_from_user(staged_at, pa, &mut UserSource::new(at, n), len)
    }

    fn upload_gathered(&self, dev: &Device, staged_at: u64, parts: &[Part]) -> Result {
        self.fault.point(EFAULT)?;
        let mut ranges = KVec::with_capacity(parts.len(), GFP_KERNEL_ACCOUNT)?;
        for p in parts {
            let (at, n) = self.range(p.off, p.len)?;
            ranges.push((p.pa, at, n), GFP_KERNEL_ACCOUNT)?;
        }
        dev.write_gathered_from_user(staged_at, &ranges)
    }
}

impl BlobSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result {
        self.check(off, buf.len() as u64)?;
        let off = off as usize;
        buf.copy_from_slice(&self[off..off + buf.len()]);
        Ok(())
    }

    fn upload(&self, dev: &Device, staged_at: u64, pa: u64, off: u64, len: u64) -> Result {
        self.check(off, len)?;
        dev.write(staged_at, pa, &self[off as usize..(off + len) as usize])
    }
}
