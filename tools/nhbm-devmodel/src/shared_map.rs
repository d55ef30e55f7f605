//! A shared mapping of a file into the model: guest memory the client
//! shares for DMA, and the function's HBM (BAR4's memfd), which the engines
//! copy with plain memory copies rather than a system call a descriptor.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// `len` bytes of a file from an offset, mapped shared, unmapped on drop.
pub struct SharedMap {
    base: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: `base` is a shared file mapping owned by this value and unmapped
// only in `drop`; it is never turned into a Rust reference (the guest and
// the client write it concurrently), only handed out as a raw pointer for
// `ptr::copy`, which any thread may do.
unsafe impl Send for SharedMap {}
// SAFETY: as for `Send`: a shared `&SharedMap` gives out only raw pointers.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps `len` bytes of `file` from `offset`, read-only unless
    /// `writable`. The mapping reserves no memory: pages are the file's.
    pub fn new(file: &File, offset: u64, len: usize, writable: bool) -> io::Result<Self> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        if len == 0 {
            return Err(einval());
        }
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        let offset = libc::off_t::try_from(offset).map_err(|_| einval())?;
        // SAFETY: a new shared mapping of a file the caller owns; the kernel
        // picks the address, so nothing of this process is replaced.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                file.as_raw_fd(),
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast()).ok_or_else(einval)?;
        Ok(SharedMap {
            base,
            len,
            writable,
        })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping maps nothing (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The model's address of bytes `[off, off + len)` of the mapping, for
    /// a write only if it is writable; `None` outside it.
    pub fn span(&self, off: usize, len: usize, write: bool) -> Option<NonNull<u8>> {
        if off.checked_add(len)? > self.len || (write && !self.writable) {
            return None;
        }
        // In bounds of the mapping, checked just above.
        NonNull::new(self.base.as_ptr().wrapping_add(off))
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are the mapping `new` made, unmapped
        // once, here.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
