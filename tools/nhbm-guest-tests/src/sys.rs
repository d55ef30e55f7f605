//! Process memory for faulting user pointers, errno sets, and small libc
//! wrappers.

use std::io;
use std::os::fd::RawFd;

use crate::ktap::{Ctx, Fail};
use crate::mem::{page_size, Mapping};

/// The errnos the UAPI documents for a rejected request (uapi.rst), besides
/// ENODEV for a device that is gone and ETIMEDOUT for RESET.
pub const DOCUMENTED: [i32; 8] = [
    libc::EINVAL,
    libc::E2BIG,
    libc::ENOENT,
    libc::ENOMEM,
    libc::EFAULT,
    libc::EOPNOTSUPP,
    libc::EBUSY,
    libc::ENOTTY,
];

/// Whether `errno` is one of [`DOCUMENTED`].
pub fn documented(errno: i32) -> bool {
    DOCUMENTED.contains(&errno)
}

/// The errno of an I/O error (-1 when it has none).
pub fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

/// User addresses that never map: the kernel's direct map and text, a
/// non-canonical address, the top of the address space.
pub const KERNEL_ADDRS: [u64; 5] = [
    0xffff_8880_0000_0000,
    0xffff_ffff_8100_0000,
    0xffff_c900_0000_1000,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_f000,
];

/// One page that is not mapped at all, between two inaccessible pages (so
/// no later mapping of more than a page can land on it).
#[derive(Debug)]
pub struct Hole {
    map: Mapping,
}

impl Hole {
    /// Maps three inaccessible pages and unmaps the middle one.
    pub fn new() -> io::Result<Hole> {
        let map = Mapping::new(3)?;
        map.protect(0, 3, libc::PROT_NONE)?;
        let page = page_size();
        // SAFETY: the middle page of our own mapping.
        let rc = unsafe { libc::munmap((map.addr() as usize + page) as *mut _, page) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Hole { map })
    }

    /// An address inside the unmapped page. A later one-page mmap of this
    /// process may have landed in the hole: check [`Hole::still_unmapped`]
    /// right before use.
    pub fn addr(&self) -> u64 {
        self.map.addr() + page_size() as u64
    }

    /// Whether the hole is still unmapped (msync answers ENOMEM there).
    pub fn still_unmapped(&self) -> bool {
        // SAFETY: msync only inspects the mapping state of the range.
        let rc = unsafe { libc::msync(self.addr() as *mut _, page_size(), libc::MS_ASYNC) };
        rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM)
    }

    /// Gives the reservation up without unmapping it: something else now
    /// lives in the hole.
    pub fn leak(self) {
        self.map.leak();
    }

    /// An address inside the inaccessible page before the hole.
    pub fn prot_none_addr(&self) -> u64 {
        self.map.addr()
    }
}

/// A read-only page holding chosen bytes, for copies back to the user that
/// must fault after the kernel has read the request.
#[derive(Debug)]
pub struct ReadOnly {
    map: Mapping,
}

impl ReadOnly {
    /// Maps one zeroed, read-only page.
    pub fn new() -> io::Result<ReadOnly> {
        let map = Mapping::new(1)?;
        map.protect(0, 1, libc::PROT_READ)?;
        Ok(ReadOnly { map })
    }

    /// Puts `bytes` at the start of the page (briefly writable) and returns
    /// their address.
    pub fn set(&mut self, bytes: &[u8]) -> io::Result<u64> {
        self.map.protect(0, 1, libc::PROT_READ | libc::PROT_WRITE)?;
        self.map.write(0, bytes);
        self.map.protect(0, 1, libc::PROT_READ)?;
        Ok(self.map.addr())
    }

    /// The address of the page.
    pub fn addr(&self) -> u64 {
        self.map.addr()
    }

    /// The first `len` bytes of the page (`len` past the page panics).
    pub fn read(&self, len: usize) -> Vec<u8> {
        self.map.read(0, len)
    }
}

/// Where tracefs is mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// `TRACEFS/<file>`, with tracefs mounted there first if need be; `None`
/// when the kernel has no such file.
pub fn tracefs_file(file: &str) -> Option<String> {
    let path = format!("{TRACEFS}/{file}");
    if !std::path::Path::new(&path).exists() {
        let (src, dir, fs) = (c"tracefs", c"/sys/kernel/tracing", c"tracefs");
        // SAFETY: plain mount(2) with NUL-terminated strings and no data.
        unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    }
    std::path::Path::new(&path).exists().then_some(path)
}

/// Kernel command-line flag of a guest whose kernel's text is not to be
/// patched by a test: set by `make check-distro`, whose kernels place a
/// kprobe at a function's entry through ftrace, and under QEMU's TCG that
/// patching once crashed the guest (an int3 no handler claimed).
const NO_KPROBES: &str = "nhbm_no_kprobes=1";

/// tracefs with kprobe events, mounted if need be; `None` if the kernel has
/// none or the guest is not to use them ([`NO_KPROBES`]).
pub fn kprobe_events() -> Option<String> {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if cmdline.split_whitespace().any(|w| w == NO_KPROBES) {
        return None;
    }
    tracefs_file("kprobe_events")
}

/// A kprobe at the entry of a kernel function that counts its calls (its
/// hits in `kprobe_profile`); removed when dropped.
pub struct CallCounter {
    events: String,
    name: String,
}

impl CallCounter {
    /// Counts the calls of `function` from now on, as probe `nhbm_count/NAME`.
    pub fn new(events: &str, name: &str, function: &str) -> Result<Self, Fail> {
        let enable = format!("{TRACEFS}/events/nhbm_count/{name}/enable");
        // Any probe a failed run left behind goes first.
        let _ = std::fs::write(&enable, "0");
        let _ = std::fs::write(events, format!("-:nhbm_count/{name}\n"));
        tracefs_write(events, &format!("p:nhbm_count/{name} {function}\n"))?;
        let counter = Self {
            events: events.to_string(),
            name: name.to_string(),
        };
        tracefs_write(&enable, "1")?;
        Ok(counter)
    }

    /// Calls counted so far.
    pub fn calls(&self) -> Result<u64, Fail> {
        let profile = format!("{TRACEFS}/kprobe_profile");
        let text = std::fs::read_to_string(&profile).ctx(&profile)?;
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == self.name).then(|| w.next()?.parse().ok())?
            })
            .next()
            .ok_or_else(|| Fail::Fail(format!("no line for {} in {profile}", self.name)))
    }
}

impl Drop for CallCounter {
    fn drop(&mut self) {
        let enable = format!("{TRACEFS}/events/nhbm_count/{}/enable", self.name);
        let _ = std::fs::write(enable, "0");
        let _ = std::fs::write(&self.events, format!("-:nhbm_count/{}\n", self.name));
    }
}

/// Writes `v` to the tracefs control file `path`; a failure names the file.
pub fn tracefs_write(path: &str, v: &str) -> Result<(), Fail> {
    std::fs::write(path, v).ctx(path)
}

/// `mmap(2)` of `len` bytes of `fd` at `offset`, read-write with `flags`,
/// unmapped again at once if it succeeded (`MAP_POPULATE` makes the kernel
/// fault every page in first, where a failure signals nothing).
pub fn map_and_unmap(fd: RawFd, offset: u64, len: u64, flags: i32) -> io::Result<()> {
    // SAFETY: a new mapping at an address of the kernel's choosing, which
    // nothing touches before it is unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            offset as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the mapping just made, `len` bytes.
    unsafe { libc::munmap(addr, len as usize) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_page_holds_bytes() {
        let mut r = ReadOnly::new().unwrap();
        r.set(b"xyz").unwrap();
        assert_eq!(r.read(3), b"xyz");
        let _h = Hole::new().unwrap();
    }
}
