//! What an engine touches: guest memory (DMA addresses in the arch's host
//! window, reached through the regions the client shared) and HBM (device
//! physical addresses, reached through a mapping of BAR4's memfd by the
//! arch's remap). Bytes move with memory copies, as an engine moves them
//! beside the CPU: no system call a descriptor.

use super::copy;
use super::desc::{Desc, SIZE};
use super::queue::Fault;
use crate::arch::Arch;
use crate::guest_mem::{Access, GuestMemory};
use crate::shared_map::SharedMap;
use std::fs::File;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, RwLock};

/// One end of a transfer.
enum End {
    /// Guest memory at this guest address.
    Host(u64),
    /// BAR4 at this offset.
    Hbm(u64),
}

/// Moves bytes for the engines.
pub struct Mover {
    arch: &'static Arch,
    hbm: SharedMap,
    guest: Arc<RwLock<GuestMemory>>,
}

impl Mover {
    /// A mover over `bar4` (the function's HBM memfd, mapped whole) and
    /// `guest`.
    pub fn new(
        arch: &'static Arch,
        bar4: &File,
        guest: Arc<RwLock<GuestMemory>>,
    ) -> io::Result<Self> {
        let len = usize::try_from(arch.bar4_size)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let hbm = SharedMap::new(bar4, 0, len, true)?;
        Ok(Mover { arch, hbm, guest })
    }

    fn end(&self, addr: u64, len: u64) -> Result<End, Fault> {
        match self.arch.host_window.host_address(addr) {
            Some(host) => Ok(End::Host(host)),
            None => self
                .arch
                .bar4_offset(addr, len)
                .map(End::Hbm)
                .ok_or(Fault::Address),
        }
    }

    /// Reads the descriptor at DMA address `addr`.
    pub fn read_desc(&self, addr: u64) -> Result<Desc, Fault> {
        let mut b = [0u8; SIZE];
        self.read(addr, &mut b)?;
        Ok(Desc::parse(&b))
    }

    /// Reads `dst.len()` bytes at DMA address `addr` into the model's memory.
    fn read(&self, addr: u64, dst: &mut [u8]) -> Result<(), Fault> {
        match self.end(addr, dst.len() as u64)? {
            End::Host(a) => {
                let g = self.guest.read().map_err(|_| Fault::Address)?;
                let p = g.span(a, dst.len(), Access::Read).ok_or(Fault::Address)?;
                Self::copy_bytes(p, NonNull::from(&mut *dst).cast(), dst.len());
                Ok(())
            }
            End::Hbm(off) => {
                let p = self.hbm(off, dst.len())?;
                Self::copy_bytes(p, NonNull::from(&mut *dst).cast(), dst.len());
                Ok(())
            }
        }
    }

    /// The model's address of HBM bytes `[off, off + len)` (BAR4 offsets).
    fn hbm(&self, off: u64, len: usize) -> Result<NonNull<u8>, Fault> {
        let off = usize::try_from(off).map_err(|_| Fault::Address)?;
        self.hbm.span(off, len, true).ok_or(Fault::Address)
    }

    /// Copies `len` bytes from `from` to `to` (either may be HBM or guest
    /// memory, and they may overlap).
    fn copy_bytes(from: NonNull<u8>, to: NonNull<u8>, len: usize) {
        // SAFETY: the callers take both spans, `len` bytes each, from
        // mappings that stay while they hold them (HBM for the model's
        // life, guest memory under its lock); `copy` allows overlap and no
        // Rust reference to either exists.
        unsafe { copy::copy(from.as_ptr(), to.as_ptr(), len) };
    }

    /// Copies `len` bytes from DMA address `src` to `dst`, every byte
    /// visible to the guest before the call returns (the reference orders
    /// its completion marker after the data, udma.h:60 DMB).
    pub fn copy(&self, src: u64, dst: u64, len: u32) -> Result<(), Fault> {
        let n = len as usize;
        let guest = || self.guest.read().map_err(|_| Fault::Address);
        let span = |g: &GuestMemory, a, access| g.span(a, n, access).ok_or(Fault::Address);
        let g = guest()?;
        let from = match self.end(src, len.into())? {
            End::Hbm(s) => self.hbm(s, n)?,
            End::Host(s) => span(&g, s, Access::Read)?,
        };
        let to = match self.end(dst, len.into())? {
            End::Hbm(d) => self.hbm(d, n)?,
            End::Host(d) => span(&g, d, Access::Write)?,
        };
        Self::copy_bytes(from, to, n);
        fence(Ordering::SeqCst);
        Ok(())
    }
}
