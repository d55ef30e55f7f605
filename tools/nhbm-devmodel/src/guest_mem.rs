//! Guest memory as the vfio-user client shares it for DMA: every region the
//! client announces (`VFIO_USER_DMA_MAP`: a range of guest physical
//! addresses, or IOVAs under an IOMMU, backed by a file at an offset) is
//! mapped into the model, so that its engines read and write the guest's
//! memory as a device's DMA does; `VFIO_USER_DMA_UNMAP` unmaps it. An
//! address no region covers is a DMA fault, as an address outside every
//! IOMMU mapping is on hardware.

use crate::shared_map::SharedMap;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ptr::NonNull;

/// Which way the engine touches guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The device reads (an M2S source).
    Read,
    /// The device writes (an S2M destination).
    Write,
}

/// The guest memory the client shares, by guest address.
#[derive(Default)]
pub struct GuestMemory {
    regions: BTreeMap<u64, SharedMap>,
}

impl GuestMemory {
    /// Maps `size` bytes of `file` from `offset` as guest addresses
    /// `[addr, addr + size)`; writable to the device when `writable`.
    pub fn map(
        &mut self,
        addr: u64,
        size: u64,
        file: &File,
        offset: u64,
        writable: bool,
    ) -> io::Result<()> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let len = usize::try_from(size).map_err(|_| einval())?;
        let end = addr.checked_add(size).ok_or_else(einval)?;
        if len == 0 || self.overlaps(addr, end) {
            return Err(einval());
        }
        let region = SharedMap::new(file, offset, len, writable)?;
        self.regions.insert(addr, region);
        Ok(())
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.regions
            .range(..end)
            .next_back()
            .is_some_and(|(&a, r)| a + r.len() as u64 > start)
    }

    /// Unmaps every region inside `[addr, addr + size)` (all of them with
    /// `all`); a region that straddles the range is refused, as the
    /// protocol asks unmaps to name whole regions.
    pub fn unmap(&mut self, addr: u64, size: u64, all: bool) -> io::Result<()> {
        if all {
            self.regions.clear();
            return Ok(());
        }
        let end = addr.saturating_add(size);
        let inside: Vec<u64> = self
            .regions
            .range(addr..end)
            .filter(|(&a, r)| a + r.len() as u64 <= end)
            .map(|(&a, _)| a)
            .collect();
        if inside.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        for a in inside {
            self.regions.remove(&a);
        }
        Ok(())
    }

    /// The model's address of guest bytes `[addr, addr + len)`, which must
    /// lie inside one region that allows `access`; `None` is a DMA fault.
    pub fn span(&self, addr: u64, len: usize, access: Access) -> Option<NonNull<u8>> {
        let (&start, r) = self.regions.range(..=addr).next_back()?;
        let off = usize::try_from(addr - start).ok()?;
        r.span(off, len, access == Access::Write)
    }

    /// Guest bytes mapped, over every region.
    pub fn mapped_bytes(&self) -> u64 {
        self.regions.values().map(|r| r.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::FileExt;

    fn memfd(len: u64) -> File {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: just created, owned by nothing else.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn a_span_is_inside_one_region_of_the_right_access() {
        let ram = memfd(0x4000);
        ram.write_all_at(b"dma", 0x1000).unwrap();
        let mut g = GuestMemory::default();
        g.map(0x10_0000, 0x2000, &ram, 0x1000, true).unwrap();
        g.map(0x20_0000, 0x1000, &ram, 0, false).unwrap();
        let p = g.span(0x10_0000, 3, Access::Read).unwrap();
        // SAFETY: three bytes inside a live mapping.
        let b = unsafe { std::slice::from_raw_parts(p.as_ptr(), 3) };
        assert_eq!(b, b"dma");
        assert!(g.span(0x10_1fff, 1, Access::Write).is_some());
        assert!(g.span(0x10_1fff, 2, Access::Read).is_none(), "past the end");
        assert!(g.span(0x0f_ffff, 1, Access::Read).is_none(), "before");
        assert!(g.span(0x20_0000, 1, Access::Read).is_some());
        assert!(g.span(0x20_0000, 1, Access::Write).is_none(), "read-only");
        assert!(g.map(0x10_1000, 0x1000, &ram, 0, true).is_err(), "overlap");
        assert_eq!(g.mapped_bytes(), 0x3000);
        g.unmap(0x10_0000, 0x2000, false).unwrap();
        assert!(g.span(0x10_0000, 1, Access::Read).is_none());
        assert!(g.unmap(0x10_0000, 0x2000, false).is_err(), "gone already");
        g.unmap(0, 0, true).unwrap();
        assert_eq!(g.mapped_bytes(), 0);
    }
}
