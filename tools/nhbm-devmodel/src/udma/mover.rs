//! What an engine touches: guest memory (DMA addresses in the arch's host
//! window, reached through the regions the client shared) and HBM (device
//! physical addresses, reached through BAR4's memfd by the arch's remap).

use super::desc::{Desc, SIZE};
use super::queue::Fault;
use crate::arch::Arch;
use crate::guest_mem::{Access, GuestMemory};
use std::fs::File;
use std::os::fd::AsRawFd;
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
    bar4: File,
    guest: Arc<RwLock<GuestMemory>>,
}

impl Mover {
    /// A mover over `bar4` (the function's HBM memfd) and `guest`.
    pub fn new(arch: &'static Arch, bar4: File, guest: Arc<RwLock<GuestMemory>>) -> Self {
        Mover { arch, bar4, guest }
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
                // SAFETY: `p` spans `dst.len()` bytes of a mapping that
                // stays while `g` is held; `dst` is the model's own buffer.
                unsafe { std::ptr::copy(p.as_ptr(), dst.as_mut_ptr(), dst.len()) };
                Ok(())
            }
            End::Hbm(off) => self.pio(off, dst.as_mut_ptr(), dst.len(), false),
        }
    }

    /// `pread` (`write` false: BAR4 into `p`) or `pwrite` (`write` true)
    /// of `len` bytes at BAR4 offset `off`, to the end.
    fn pio(&self, off: u64, p: *mut u8, len: usize, write: bool) -> Result<(), Fault> {
        let mut done = 0usize;
        while done < len {
            let at = libc::off_t::try_from(off + done as u64).map_err(|_| Fault::Address)?;
            let q = p.wrapping_add(done).cast();
            let fd = self.bar4.as_raw_fd();
            // SAFETY: `p` points to `len` bytes the caller holds valid (the
            // model's buffer, or a guest span under the guest memory lock).
            let n = unsafe {
                if write {
                    libc::pwrite(fd, q, len - done, at)
                } else {
                    libc::pread(fd, q, len - done, at)
                }
            };
            if n <= 0 {
                return Err(Fault::Address);
            }
            done += n as usize;
        }
        Ok(())
    }

    /// Copies `len` bytes from DMA address `src` to `dst`, every byte
    /// visible to the guest before the call returns (the reference orders
    /// its completion marker after the data, udma.h:60 DMB).
    pub fn copy(&self, src: u64, dst: u64, len: u32) -> Result<(), Fault> {
        let n = len as usize;
        let guest = || self.guest.read().map_err(|_| Fault::Address);
        let span = |g: &GuestMemory, a, access| g.span(a, n, access).ok_or(Fault::Address);
        let r = match (self.end(src, len.into())?, self.end(dst, len.into())?) {
            (End::Hbm(s), End::Hbm(d)) => {
                let mut buf = vec![0u8; n];
                self.pio(s, buf.as_mut_ptr(), n, false)?;
                self.pio(d, buf.as_mut_ptr(), n, true)
            }
            (End::Host(s), End::Hbm(d)) => {
                let g = guest()?;
                self.pio(d, span(&g, s, Access::Read)?.as_ptr(), n, true)
            }
            (End::Hbm(s), End::Host(d)) => {
                let g = guest()?;
                self.pio(s, span(&g, d, Access::Write)?.as_ptr(), n, false)
            }
            (End::Host(s), End::Host(d)) => {
                let g = guest()?;
                let (s, d) = (span(&g, s, Access::Read)?, span(&g, d, Access::Write)?);
                // SAFETY: both spans are `n` bytes of mappings that stay
                // while `g` is held; `copy` allows them to overlap.
                unsafe { std::ptr::copy(s.as_ptr(), d.as_ptr(), n) };
                Ok(())
            }
        };
        fence(Ordering::SeqCst);
        r
    }
}
