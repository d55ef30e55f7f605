//! Process memory for user pointers that fault: anonymous mappings with
//! chosen protections, and a buffer followed by an inaccessible page.

use std::io;

/// The size of a page of this process.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// An anonymous private mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access goes
// through &self/&mut self.
unsafe impl Send for Mapping {}
// SAFETY: see Send; shared access only reads addresses.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `pages` pages readable and writable, private to this process.
    pub fn new(pages: usize) -> io::Result<Mapping> {
        Self::map(pages, libc::MAP_PRIVATE)
    }

    /// `pages` pages readable and writable, shared with the children this
    /// process forks from now on.
    pub fn shared(pages: usize) -> io::Result<Mapping> {
        Self::map(pages, libc::MAP_SHARED)
    }

    fn map(pages: usize, sharing: i32) -> io::Result<Mapping> {
        let len = pages.max(1) * page_size();
        // SAFETY: a fresh anonymous mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                sharing | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr as *mut u8,
            len,
        })
    }

    /// The first byte, for raw access by its owner (the mapping stays valid
    /// for `len()` bytes while `self` lives).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The address of the first byte.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping has no bytes (never, it is at least a page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Changes the protection of pages `first..first + n`.
    pub fn protect(&self, first: usize, n: usize, prot: i32) -> io::Result<()> {
        let page = page_size();
        assert!((first + n) * page <= self.len);
        // SAFETY: the range lies inside this mapping.
        let rc = unsafe { libc::mprotect(self.ptr.add(first * page) as *mut _, n * page, prot) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Copies `bytes` to `off`. The pages must be writable.
    pub fn write(&mut self, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.len);
        // SAFETY: the range lies inside this mapping, which we own.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(off), bytes.len()) };
    }

    /// Reads `len` bytes at `off`. The pages must be readable.
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        let mut v = vec![0u8; len];
        // SAFETY: the range lies inside this mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), v.as_mut_ptr(), len) };
        v
    }
}

impl Mapping {
    /// Gives the mapping up without unmapping it (part of it may belong to
    /// someone else by now).
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in new().
        unsafe { libc::munmap(self.ptr as *mut _, self.len) };
    }
}

/// Readable and writable memory followed by one inaccessible page, so a
/// user copy that runs past the end faults at a known byte.
#[derive(Debug)]
pub struct Guarded {
    map: Mapping,
    usable: usize,
}

impl Guarded {
    /// At least `usable` accessible bytes, then the guard page.
    pub fn new(usable: usize) -> io::Result<Guarded> {
        let page = page_size();
        let pages = usable.div_ceil(page).max(1);
        let map = Mapping::new(pages + 1)?;
        map.protect(pages, 1, libc::PROT_NONE)?;
        Ok(Guarded {
            map,
            usable: pages * page,
        })
    }

    /// Accessible bytes before the guard page.
    pub fn usable(&self) -> usize {
        self.usable
    }

    /// Copies `bytes` so that they end `gap` bytes before the guard page and
    /// returns the address of the first byte.
    pub fn place_before_guard(&mut self, bytes: &[u8], gap: usize) -> u64 {
        assert!(bytes.len() + gap <= self.usable);
        let off = self.usable - gap - bytes.len();
        self.map.write(off, bytes);
        self.map.addr() + off as u64
    }

    /// The address `n` bytes before the guard page.
    pub fn addr_before_guard(&self, n: usize) -> u64 {
        assert!(n <= self.usable);
        self.map.addr() + (self.usable - n) as u64
    }

    /// The `n` bytes before the guard page.
    pub fn read_before_guard(&self, n: usize) -> Vec<u8> {
        self.map.read(self.usable - n, n)
    }

    /// The guard page's address.
    pub fn guard_addr(&self) -> u64 {
        self.map.addr() + self.usable as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_places_bytes_before_the_guard() {
        let mut g = Guarded::new(100).unwrap();
        let a = g.place_before_guard(b"abc", 1);
        assert_eq!(a + 4, g.guard_addr());
        assert_eq!(g.read_before_guard(4), b"abc\0");
    }
}
