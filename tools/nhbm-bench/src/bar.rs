//! A PCI function's BAR4 mapped into this process through sysfs: the
//! physical peer of the module's transfers. `resource4_wc` maps the BAR
//! write-combining, as the module maps it; the kernel offers that file only
//! for a prefetchable BAR, and `resource4` (uncached) stands in where it is
//! missing, which the figures then name.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::copies;

/// Where the kernel lists PCI functions.
const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The BAR4 resource file of the one PCI function bound to neuron_hbm:
/// `resource4_wc`, else `resource4`.
pub fn find_bar4() -> io::Result<PathBuf> {
    let mut found = Vec::new();
    for e in fs::read_dir(PCI_DEVICES)? {
        let dir = e?.path();
        let bound = fs::read_link(dir.join("driver"))
            .ok()
            .and_then(|d| d.file_name().map(|n| n == "neuron_hbm"))
            .unwrap_or(false);
        if bound {
            found.push(dir);
        }
    }
    match found.as_slice() {
        [dir] => Ok(resource_file(dir)),
        [] => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no PCI function bound to neuron_hbm",
        )),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "more than one PCI function bound to neuron_hbm: name one with --bar4",
        )),
    }
}

/// `resource4_wc` of the function directory `dir` where it exists,
/// `resource4` otherwise.
pub fn resource_file(dir: &Path) -> PathBuf {
    let wc = dir.join("resource4_wc");
    if wc.exists() {
        wc
    } else {
        dir.join("resource4")
    }
}

/// `len` bytes of a BAR at offset `off`, mapped shared from its resource file.
pub struct BarMap {
    ptr: *mut u8,
    len: usize,
    _file: File,
}

impl BarMap {
    /// Maps `[off, off + len)` of the BAR behind `path` (root only; `off`
    /// a multiple of the page size).
    pub fn open(path: &Path, off: u64, len: usize) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let off = libc::off_t::try_from(off)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset"))?;
        // SAFETY: a fresh shared mapping of an open file; the kernel checks
        // the range against the BAR and the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
            _file: file,
        })
    }

    /// A plain `memcpy` of `src` to the start of the mapping.
    pub fn copy_from(&self, src: &[u8]) {
        let n = src.len().min(self.len);
        // SAFETY: the mapping is `self.len` bytes long and writable, `src`
        // is another object of at least `n` bytes.
        unsafe { libc::memcpy(self.ptr.cast(), src.as_ptr().cast(), n) };
    }

    /// A plain `memcpy` from the start of the mapping into `dst`.
    pub fn copy_to(&self, dst: &mut [u8]) {
        let n = dst.len().min(self.len);
        // SAFETY: as in `copy_from`, the other way.
        unsafe { libc::memcpy(dst.as_mut_ptr().cast(), self.ptr.cast(), n) };
        std::hint::black_box(dst);
    }

    /// A plain `memset` of the whole mapping to zero.
    pub fn zero(&self) {
        // SAFETY: the mapping is `self.len` bytes long and writable.
        unsafe { libc::memset(self.ptr.cast(), 0, self.len) };
    }

    /// Copies `src` (whole 64-bit words) to the start of the mapping as the
    /// module's MEM_WRITE does without its engine: one 64-bit store a word,
    /// straight from the buffer.
    pub fn store_words_from(&self, src: &[u8]) {
        let n = src.len().min(self.len);
        // SAFETY: the first `n` bytes lie in the mapping, which is writable
        // and page-aligned.
        unsafe { copies::store_words(self.ptr, &src[..n]) };
    }

    /// Copies `dst.len()` bytes (whole 64-bit words) from the start of the
    /// mapping as the module's MEM_READ does without its engine: one 64-bit
    /// load a word, straight into the buffer.
    pub fn load_words_to(&self, dst: &mut [u8]) {
        let n = dst.len().min(self.len);
        // SAFETY: the first `n` bytes lie in the mapping, which is readable
        // and page-aligned.
        unsafe { copies::load_words(&mut dst[..n], self.ptr) };
        std::hint::black_box(dst);
    }

    /// Zeroes the whole mapping as the module's scrub does: one 64-bit
    /// store a word, from no buffer.
    pub fn zero_words(&self) {
        // SAFETY: the mapping is `self.len` bytes long, writable and
        // page-aligned.
        unsafe { copies::zero_words(self.ptr, self.len) };
    }
}

impl Drop for BarMap {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are the mapping made in `open`, unused
        // from here on.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_the_write_combining_file() {
        let dir = std::env::temp_dir().join(format!("nhbm-bench-bar-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("resource4"), b"").unwrap();
        assert_eq!(resource_file(&dir), dir.join("resource4"));
        fs::write(dir.join("resource4_wc"), b"").unwrap();
        assert_eq!(resource_file(&dir), dir.join("resource4_wc"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_mapping_copies_both_ways() {
        // Any shared file mapping behaves the same; a BAR needs root and a
        // device.
        let path = std::env::temp_dir().join(format!("nhbm-bench-map-{}", std::process::id()));
        fs::write(&path, vec![0xffu8; 8192]).unwrap();
        let m = BarMap::open(&path, 4096, 4096).unwrap();
        let src: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        m.copy_from(&src);
        let mut back = vec![0u8; 4096];
        m.copy_to(&mut back);
        assert_eq!(back, src);
        m.zero();
        m.copy_to(&mut back);
        assert!(back.iter().all(|&b| b == 0));
        drop(m);
        let file = fs::read(&path).unwrap();
        assert!(file[..4096].iter().all(|&b| b == 0xff));
        fs::remove_file(&path).unwrap();
    }
}
