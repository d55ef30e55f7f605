//! The live plans of each device by the process that loaded them, from
//! debugfs's `plans` (`pid plan_id vars bytes kmem` a line), and its reset
//! state, from `state`: files only root may read.

use std::collections::HashMap;
use std::fs;

use super::facts::DeviceCensus;

/// Where each device's debugfs directory is.
const DEBUGFS: &str = "/sys/kernel/debug";

/// Live plans per (device index, loading process).
pub struct Plans(HashMap<(u32, u32), u32>);

impl Plans {
    /// The plans process `pid` loaded on device `index`.
    pub fn count(&self, index: u32, pid: u32) -> u32 {
        self.0.get(&(index, pid)).copied().unwrap_or(0)
    }
}

/// Every device's plans by process, `None` when a `plans` file of a device
/// that is there cannot be read.
pub fn plans_by_pid(devices: &[DeviceCensus]) -> Option<Plans> {
    let mut out = HashMap::new();
    for d in devices {
        let text = fs::read_to_string(format!("{DEBUGFS}/{}/plans", d.name())).ok()?;
        for pid in text.lines().filter_map(|l| l.split_whitespace().next()) {
            let Ok(pid) = pid.parse::<u32>() else {
                continue;
            };
            *out.entry((d.index, tgid(pid))).or_insert(0) += 1;
        }
    }
    Some(Plans(out))
}

/// Device `name`'s state as debugfs's `state` says, `None` where it cannot
/// be read (not root, no debugfs).
pub fn state(name: &str) -> Option<super::facts::DeviceState> {
    let text = fs::read_to_string(format!("{DEBUGFS}/{name}/state")).ok()?;
    super::facts::DeviceState::from_debugfs(&text)
}

/// The process of task `pid` (the loader may have been any of its
/// threads); `pid` itself once the task is gone.
fn tgid(pid: u32) -> u32 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(pid)
}
