//! What every case of `nhbm_monitor` works with: the `nhbm` program, the
//! two tenants, and the fdinfo they show.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::ktap::{fail, Fail, Notes, TestResult};
use crate::tenant::Tenant;

/// The device the tenants hold.
pub const DEVICE: u32 = 0;

/// What every case sees: the `nhbm` program and the two tenants.
pub struct World {
    /// This program, which runs tenants and other users' commands.
    pub exe: PathBuf,
    /// The `nhbm` program, next to this one.
    pub nhbm: PathBuf,
    /// The tenant on channel 0, its input mapped.
    pub a: Tenant,
    /// The tenant on channel 1; the last case ends it.
    pub b: Tenant,
}

/// One case of the suite.
pub type Case = (&'static str, fn(&mut World, &mut Notes) -> TestResult);

impl World {
    /// `nhbm ARGS` run as user and group `uid` (root when `None`): its stdout, or a failure
    /// with its stderr when it exits non-zero.
    pub fn nhbm(&self, args: &[&str], uid: Option<u32>) -> Result<String, Fail> {
        let mut c = match uid {
            Some(u) => crate::as_user::command(&self.exe, u, &self.nhbm),
            None => Command::new(&self.nhbm),
        };
        c.args(args);
        let o = c
            .output()
            .map_err(|e| Fail::Fail(format!("running nhbm: {e}")))?;
        if !o.status.success() {
            return fail(format!(
                "nhbm {args:?} exited with {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// `nhbm ARGS` as root, its stdout parsed as one JSON value.
    pub fn json(&self, args: &[&str]) -> Result<Value, Fail> {
        let out = self.nhbm(args, None)?;
        serde_json::from_str(&out).map_err(|e| Fail::Fail(format!("nhbm {args:?}: {e}: {out}")))
    }
}

/// A tenant's `drm-total-hbm<channel>` in bytes, read from its fdinfo here,
/// not by `nhbm`.
pub fn fdinfo_hbm(pid: u32, channel: usize) -> Result<u64, Fail> {
    let dir = format!("/proc/{pid}/fdinfo");
    let key = format!("drm-total-hbm{channel}:");
    let entries = std::fs::read_dir(&dir).map_err(|e| Fail::Fail(format!("{dir}: {e}")))?;
    for e in entries.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        if let Some(v) = text.lines().find_map(|l| l.strip_prefix(&key)) {
            let mut f = v.split_whitespace();
            let n: u64 = f.next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX);
            let unit = match f.next() {
                Some("KiB") => 1 << 10,
                Some("MiB") => 1 << 20,
                _ => 1,
            };
            return Ok(n * unit);
        }
    }
    fail(format!("no neuron_hbm fdinfo of pid {pid}"))
}
