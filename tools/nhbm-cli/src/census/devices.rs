//! The device nodes: `/sys/class/misc/neuron_hbmN` (arch, simulated,
//! channels, the PCI function its `device` link names), then the node's
//! DEVICE_INFO and MEM_STATS, asked through a file opened for the two
//! ioctls and closed at once.

use std::fs;
use std::path::Path;

use nhbm::uapi::MemStats;
use nhbm::Device;

use super::facts::{Channel, DeviceCensus, DeviceState, Seen};

/// Where the misc class lists the nodes.
const CLASS: &str = "/sys/class/misc";

/// CAP_SYS_ADMIN's bit in `/proc/self/status`'s CapEff.
const CAP_SYS_ADMIN: u32 = 21;

/// Every `neuron_hbmN` node, by number; sets `seen.device_usage`.
pub fn list(seen: &mut Seen) -> Vec<DeviceCensus> {
    seen.device_usage = has_sys_admin();
    let Ok(entries) = fs::read_dir(CLASS) else {
        return Vec::new();
    };
    let mut out: Vec<DeviceCensus> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let index = name.to_str()?.strip_prefix("neuron_hbm")?.parse().ok()?;
            Some(device(&e.path(), index, seen.device_usage))
        })
        .collect();
    out.sort_by_key(|d| d.index);
    out
}

/// One node: sysfs's figures, then what the node answers.
fn device(class: &Path, index: u32, device_usage: bool) -> DeviceCensus {
    let attr = |name: &str| -> Option<u64> {
        let s = fs::read_to_string(class.join(name)).ok()?;
        s.trim().trim_start_matches('v').parse().ok()
    };
    let simulated = attr("simulated") == Some(1);
    let pci_address = if simulated {
        None
    } else {
        fs::read_link(class.join("device"))
            .ok()
            .and_then(|l| Some(l.file_name()?.to_str()?.to_string()))
    };
    let nr = attr("channels").unwrap_or(0) as usize;
    let mut d = DeviceCensus {
        index,
        node: nhbm::device_path(index),
        arch: attr("arch").unwrap_or(0) as u32,
        simulated,
        pci_address,
        state: DeviceState::NoAccess,
        channels: (0..nr)
            .map(|channel| Channel {
                channel,
                total_bytes: None,
                used_bytes: None,
            })
            .collect(),
        processes: Vec::new(),
    };
    ask(&mut d, device_usage);
    d
}

/// Fills `d`'s state and channel figures from its node.
fn ask(d: &mut DeviceCensus, device_usage: bool) {
    let dev = match Device::open_path_unchecked(&d.node) {
        Ok(dev) => dev,
        Err(e) => {
            if gone(e.raw_os_error()) {
                d.state = DeviceState::Removed;
            }
            return;
        }
    };
    let stats = match dev.device_info().and_then(|_| dev.mem_stats()) {
        Ok(s) => s,
        Err(e) => {
            d.state = if gone(e.raw_os_error()) {
                DeviceState::Removed
            } else {
                DeviceState::Unanswered
            };
            return;
        }
    };
    d.state = super::debugfs::state(&d.name()).unwrap_or(DeviceState::Ready);
    for c in &mut d.channels {
        c.total_bytes = Some(channel_sum(&stats, c.channel, |p| p.total));
        c.used_bytes = device_usage.then(|| channel_sum(&stats, c.channel, |p| p.used));
    }
}

/// Whether `errno` says the device is gone: a removed device's node
/// refuses new opens (ENODEV, or ENOENT and ENXIO once it is unregistered)
/// and its files' ioctls answer ENODEV.
fn gone(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::ENODEV | libc::ENOENT | libc::ENXIO))
}

/// `f` of every present pool of channel `c`, added up.
fn channel_sum(s: &MemStats, c: usize, f: impl Fn(&nhbm::uapi::PoolStats) -> u64) -> u64 {
    s.present_pools()
        .filter(|&(ch, _, _)| ch == c)
        .map(|(_, _, p)| f(p))
        .sum()
}

/// Whether this process has CAP_SYS_ADMIN, for which MEM_STATS fills in
/// device-wide usage.
fn has_sys_admin() -> bool {
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_errnos_of_a_removed_device_say_it_is_gone() {
        for e in [libc::ENODEV, libc::ENOENT, libc::ENXIO] {
            assert!(gone(Some(e)), "{e}");
        }
        for e in [libc::EACCES, libc::EPERM, libc::EIO, libc::EINVAL] {
            assert!(!gone(Some(e)), "{e}");
        }
        assert!(!gone(None));
    }
}
