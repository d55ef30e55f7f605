//! The emulated Neuron PCI functions as the guest sees them: their sysfs
//! directories, BAR resources, and the device model's control port in the
//! last page of BAR0 (see tools/nhbm-devmodel), reached by mapping sysfs
//! `resource0`.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// BAR0 offset of the model's control port.
pub const CTRL: u64 = 0x3fff_f000;
/// Control-port registers (offsets in the page).
pub const MAGIC: usize = 0x00;
/// "NHDM".
pub const MAGIC_VALUE: u32 = 0x4e48_444d;
/// Reset duration in ms, [`NEVER`] = never completes.
pub const RESET_DELAY_MS: usize = 0x04;
/// FW_STATUS reads still to answer 0xdeadbeef, [`NEVER`] = forever.
pub const BAD_READS: usize = 0x08;
/// Whether the firmware takes mailbox requests.
pub const TAKES_REQUESTS: usize = 0x0c;
/// Resets taken.
pub const RESETS_TAKEN: usize = 0x10;
/// FW_STATUS reads since the last reset was taken.
pub const STATUS_READS: usize = 0x14;
/// 1 while a reset is in progress.
pub const RESETTING: usize = 0x18;
/// Device address of the HBM word below, low half.
pub const HBM_PA_LO: usize = 0x20;
/// High half.
pub const HBM_PA_HI: usize = 0x24;
/// The HBM word at that device address, through the model's remap.
pub const HBM_DATA: usize = 0x28;
/// "Never" / "forever".
pub const NEVER: u32 = u32::MAX;

/// One PCI function in sysfs.
#[derive(Clone, Debug)]
pub struct Function {
    /// `/sys/bus/pci/devices/<address>`.
    pub dir: PathBuf,
}

fn read_hex(p: &Path) -> io::Result<u64> {
    let s = fs::read_to_string(p)?;
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl Function {
    /// Every function `vendor:device`, in bus-address order (the order in
    /// which the driver binds them and numbers their device nodes).
    pub fn all(vendor: u32, device: u32) -> io::Result<Vec<Function>> {
        let mut v: Vec<Function> = fs::read_dir("/sys/bus/pci/devices")?
            .filter_map(|e| e.ok())
            .map(|e| Function { dir: e.path() })
            .filter(|f| {
                read_hex(&f.dir.join("vendor")).ok() == Some(u64::from(vendor))
                    && read_hex(&f.dir.join("device")).ok() == Some(u64::from(device))
            })
            .collect();
        v.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(v)
    }

    /// The name of the bound driver, if any.
    pub fn driver(&self) -> Option<String> {
        fs::read_link(self.dir.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    }

    /// `(start, end, flags)` of each resource (sysfs `resource`).
    pub fn resources(&self) -> io::Result<Vec<(u64, u64, u64)>> {
        let text = fs::read_to_string(self.dir.join("resource"))?;
        text.lines()
            .map(|l| {
                let f: Vec<u64> = l
                    .split_whitespace()
                    .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).unwrap_or(0))
                    .collect();
                if f.len() == 3 {
                    Ok((f[0], f[1], f[2]))
                } else {
                    Err(io::Error::new(io::ErrorKind::InvalidData, l.to_string()))
                }
            })
            .collect()
    }

    /// Size of BAR `n` (0 when absent).
    pub fn bar_size(&self, n: usize) -> io::Result<u64> {
        let r = self.resources()?;
        Ok(r.get(n)
            .map_or(0, |&(s, e, _)| if e > s { e - s + 1 } else { 0 }))
    }

    /// Maps the model's control port.
    pub fn control(&self) -> io::Result<Control> {
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir.join("resource0"))?;
        // SAFETY: a fresh shared mapping of one page of the BAR0 file; the
        // kernel checks the range against the BAR.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                CTRL as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let c = Control { base: p.cast() };
        if c.read(MAGIC) != MAGIC_VALUE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("no device-model control port in {}", self.dir.display()),
            ));
        }
        Ok(c)
    }
}

/// The mapped control port of one function.
pub struct Control {
    base: *mut u32,
}

impl Control {
    /// Reads register `off`.
    pub fn read(&self, off: usize) -> u32 {
        // SAFETY: `base` maps 4096 bytes; `off` is one of the register
        // offsets above, aligned and inside the page.
        unsafe { self.base.add(off / 4).read_volatile() }
    }

    /// Writes register `off`.
    pub fn write(&self, off: usize, v: u32) {
        // SAFETY: as in `read`.
        unsafe { self.base.add(off / 4).write_volatile(v) }
    }

    /// The HBM word at device address `pa`, read by the model.
    pub fn hbm_read(&self, pa: u64) -> u32 {
        self.write(HBM_PA_HI, (pa >> 32) as u32);
        self.write(HBM_PA_LO, pa as u32);
        self.read(HBM_DATA)
    }

    /// Writes the HBM word at device address `pa` through the model.
    pub fn hbm_write(&self, pa: u64, v: u32) {
        self.write(HBM_PA_HI, (pa >> 32) as u32);
        self.write(HBM_PA_LO, pa as u32);
        self.write(HBM_DATA, v);
    }

    /// Puts the firmware back to its defaults (resets take `delay_ms`).
    pub fn restore(&self, delay_ms: u32) {
        self.write(RESET_DELAY_MS, delay_ms);
        self.write(BAD_READS, 0);
        self.write(TAKES_REQUESTS, 1);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // SAFETY: `base` is our own 4096-byte mapping.
        unsafe { libc::munmap(self.base.cast(), 4096) };
    }
}
