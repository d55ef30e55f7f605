//! The emulated Neuron PCI functions as the guest sees them: their sysfs
//! directories, BAR resources, and the device model's control port in the
//! last page of BAR0 (see tools/nhbm-devmodel), reached by mapping sysfs
//! `resource0`.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Control-port registers (offsets in the last page of BAR0; see
/// tools/nhbm-devmodel's `bar0::ctrl`).
pub const MAGIC: usize = 0x00;
/// "NHDM".
pub const MAGIC_VALUE: u32 = 0x4e48_444d;
/// Reset duration from its take in ms, [`NEVER`] = never completes.
pub const RESET_DELAY_MS: usize = 0x04;
/// Milliseconds from a take during which FW_STATUS reads 0xdeadbeef.
pub const BAD_MS: usize = 0x08;
/// Doorbells with a request pending still to miss, [`NEVER`] = all.
pub const IGNORE_REQUESTS: usize = 0x0c;
/// Resets taken.
pub const RESETS_TAKEN: usize = 0x10;
/// FW_STATUS reads since the last take.
pub const STATUS_READS: usize = 0x14;
/// 1 while a reset is in progress.
pub const RESETTING: usize = 0x18;
/// Milliseconds from a heeded doorbell to the take.
pub const TAKE_DELAY_MS: usize = 0x1c;
/// Device address of the HBM word below, low half.
pub const HBM_PA_LO: usize = 0x20;
/// High half.
pub const HBM_PA_HI: usize = 0x24;
/// The HBM word at that device address, through the model's remap.
pub const HBM_DATA: usize = 0x28;
/// Doorbells rung with a request pending, missed or heeded.
pub const DOORBELLS: usize = 0x2c;
/// 1 = the function is removed by surprise (BAR0 reads all ones).
pub const REMOVED: usize = 0x30;
/// Milliseconds the firmware boots after the first BAR0 access.
pub const BOOT_MS: usize = 0x34;
/// Mailbox reads answered 0xdeadbeef while the firmware booted.
pub const BOOT_READS: usize = 0x38;
/// FW_STATUS reads answered 0xdeadbeef since the last take.
pub const BAD_READS_SEEN: usize = 0x3c;
/// RESET_REQUEST reads since the last heeded doorbell.
pub const REQUEST_READS: usize = 0x40;
/// Milliseconds from each take during which the mailbox reads all ones
/// while configuration space still answers.
pub const ALL_ONES_MS: usize = 0x44;
/// RESET_TPB_MAP of the last TPB reset the firmware took (read-only).
pub const TPB_MAP_TAKEN: usize = 0x48;
/// TPB resets taken with a map that is not the reference's (read-only).
pub const TPB_MAP_ERRORS: usize = 0x4c;
/// Mailbox reads answered all ones by that window since the last take.
pub const ONES_READS: usize = 0x50;
/// 1 = every DMA engine stalls: doorbells are taken, nothing moves.
pub const DMA_STALL: usize = 0x54;
/// Descriptor pairs the engines completed.
pub const DMA_PAIRS: usize = 0x58;
/// Queues the engines stopped on a fault.
pub const DMA_FAULTS: usize = 0x5c;
/// Writing `n` makes the pair after the next `n` fault.
pub const DMA_FAIL_AFTER: usize = 0x64;
/// MiB of guest memory the client shared with the function for DMA.
pub const DMA_MAPPED_MIB: usize = 0x68;
/// The most descriptors one queue held posted and not done, at a
/// doorbell; writing clears it.
pub const DMA_MOST_PENDING: usize = 0x6c;
/// Doorbells the engines took.
pub const DMA_DOORBELLS: usize = 0x70;
/// "Never" / "forever".
pub const NEVER: u32 = u32::MAX;

/// Device ids of the Neuron functions neuron_hbm binds, with their arch
/// (reference neuron_device.h and neuron_pci.c).
pub const NEURON_IDS: [(u32, &str); 5] = [
    (0x7164, "v2"),
    (0x7264, "v2"),
    (0x7364, "v3"),
    (0x7564, "v4"),
    (0x7565, "v4"),
];

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
    /// Every Neuron function (vendor 0x1d0f, a device id of
    /// [`NEURON_IDS`]), in bus-address order (the order in which the driver
    /// binds them and numbers their device nodes).
    pub fn all() -> io::Result<Vec<Function>> {
        let mut v: Vec<Function> = fs::read_dir("/sys/bus/pci/devices")?
            .filter_map(|e| e.ok())
            .map(|e| Function { dir: e.path() })
            .filter(|f| read_hex(&f.dir.join("vendor")).ok() == Some(0x1d0f) && f.arch().is_some())
            .collect();
        v.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(v)
    }

    /// The PCI device id.
    pub fn device_id(&self) -> Option<u32> {
        read_hex(&self.dir.join("device")).ok().map(|d| d as u32)
    }

    /// The arch of the function ("v2", "v3" or "v4").
    pub fn arch(&self) -> Option<&'static str> {
        let id = self.device_id()?;
        NEURON_IDS.iter().find(|n| n.0 == id).map(|n| n.1)
    }

    /// The bus address (the directory's name).
    pub fn address(&self) -> String {
        self.dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
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

    /// Maps the model's control port (the last page of BAR0).
    pub fn control(&self) -> io::Result<Control> {
        let ctrl = self.bar_size(0)?.checked_sub(4096).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "BAR0 smaller than a page")
        })?;
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
                ctrl as libc::off_t,
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
        self.write(BAD_MS, 0);
        self.write(IGNORE_REQUESTS, 0);
        self.write(TAKE_DELAY_MS, 0);
        self.write(ALL_ONES_MS, 0);
        self.write(REMOVED, 0);
        self.write(DMA_STALL, 0);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        // SAFETY: `base` is our own 4096-byte mapping.
        unsafe { libc::munmap(self.base.cast(), 4096) };
    }
}
