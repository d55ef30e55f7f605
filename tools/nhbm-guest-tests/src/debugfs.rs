//! The module's per-device debugfs files: fault injection (`fail_nth`,
//! `fail_points`), simulated removal (`unplug`) and telemetry (`pools`,
//! `plans`, `chunks`, `kmem`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where debugfs is mounted in the guest.
pub const DEBUGFS: &str = "/sys/kernel/debug";

/// The debugfs directory of device `index`, wherever the module put it.
#[derive(Clone, Debug)]
pub struct DevDebugFs {
    dir: Option<PathBuf>,
}

impl DevDebugFs {
    /// Device `index`'s directory under the guest's debugfs mount, [`DEBUGFS`].
    pub fn new(index: u32) -> Self {
        Self::under(Path::new(DEBUGFS), index)
    }

    /// Looks for `neuron_hbm/neuron_hbm<N>/`, then `neuron_hbm<N>/`.
    pub fn under(root: &Path, index: u32) -> Self {
        let name = format!("neuron_hbm{index}");
        let dir = [root.join("neuron_hbm").join(&name), root.join(&name)]
            .into_iter()
            .find(|d| d.is_dir());
        DevDebugFs { dir }
    }

    /// The directory, or `None` when the module made none for this device
    /// (no debugfs, or no such device).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The path of file `name`, when it exists.
    pub fn file(&self, name: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(name))
            .filter(|p| p.exists())
    }

    /// Whether file `name` exists (the tests that need it skip otherwise).
    pub fn has(&self, name: &str) -> bool {
        self.file(name).is_some()
    }

    fn need(&self, name: &str) -> io::Result<PathBuf> {
        self.file(name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("debugfs file {name} missing"),
            )
        })
    }

    /// The contents of file `name`; `NotFound` when it does not exist.
    pub fn read_text(&self, name: &str) -> io::Result<String> {
        fs::read_to_string(self.need(name)?)
    }

    /// File `name` read as one decimal number (surrounding white space
    /// ignored); `InvalidData` when it holds anything else.
    pub fn read_u64(&self, name: &str) -> io::Result<u64> {
        let t = self.read_text(name)?;
        t.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("debugfs {name}: {:?} is not a number", t.trim()),
            )
        })
    }

    /// Writes `value` to file `name` (the module parses it; include the
    /// newline it expects); `NotFound` when the file does not exist.
    pub fn write(&self, name: &str, value: &str) -> io::Result<()> {
        fs::write(self.need(name)?, value)
    }

    /// Arms `fail_nth` with `n` (0 disarms).
    pub fn arm(&self, n: u64) -> io::Result<()> {
        self.write("fail_nth", &format!("{n}\n"))
    }

    /// `fail_nth`'s remaining countdown.
    pub fn remaining(&self) -> io::Result<u64> {
        self.read_u64("fail_nth")
    }

    /// `fail_points`: injection points passed since load.
    pub fn points(&self) -> io::Result<u64> {
        self.read_u64("fail_points")
    }
}

/// Every 16-hex-digit number in `text` that looks like a kernel virtual
/// address (starts with `ffff`, not all ones).
pub fn kernel_pointers_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_hexdigit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_hexdigit() {
                j += 1;
            }
            let word = &text[i..j];
            // A 16-digit hex number, or one with a 0x prefix handled below.
            if word.len() == 16 && looks_like_kernel_pointer_hex(word) {
                out.push(word.to_string());
            }
            i = j;
        } else if b[i] == b'x' && i > 0 && b[i - 1] == b'0' {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_hexdigit() {
                j += 1;
            }
            let word = &text[i + 1..j];
            if word.len() == 16 && looks_like_kernel_pointer_hex(word) {
                out.push(format!("0x{word}"));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

fn looks_like_kernel_pointer_hex(word: &str) -> bool {
    let w = word.to_ascii_lowercase();
    w.starts_with("ffff") && w != "ffffffffffffffff"
}

/// Whether a value handed to userspace looks like a kernel virtual address.
pub fn looks_like_kernel_pointer(v: u64) -> bool {
    v >> 48 == 0xffff && v != u64::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kernel_pointers_in_text() {
        let t = "0 0 0x1000000 0x3ffffffff 10 0\nobj ffff888003a1c000 x 0xffffffff81000000\n\
                 all ffffffffffffffff tagged 0x8000000001000000";
        assert_eq!(
            kernel_pointers_in(t),
            vec![
                "ffff888003a1c000".to_string(),
                "0xffffffff81000000".to_string()
            ]
        );
        assert!(looks_like_kernel_pointer(0xffff_8880_0000_1000));
        assert!(!looks_like_kernel_pointer(u64::MAX));
        assert!(!looks_like_kernel_pointer(0x8000_0000_0100_0000));
    }

    #[test]
    fn missing_directory_has_no_files() {
        let d = DevDebugFs::under(Path::new("/nonexistent-dir"), 0);
        assert!(d.dir().is_none());
        assert!(!d.has("fail_nth"));
        assert!(d.read_u64("fail_nth").is_err());
    }
}
