//! A census of two devices for the tests of what shows it: a simulated V2
//! device held by two tenants, and a PCI device the caller may not open.

use std::path::PathBuf;

use super::facts::{Census, Channel, DeviceCensus, DeviceState, Holder, Seen};

/// A tenant of the first device, with one open file, in this pid namespace.
fn tenant(
    pid: u32,
    command: &str,
    uid: u32,
    user: Option<&str>,
    hbm: [u64; 2],
    plans: u32,
    mapped: u64,
) -> Holder {
    Holder {
        pid,
        command: command.to_string(),
        uid,
        user: user.map(str::to_string),
        pid_namespace: None,
        files: 1,
        hbm_bytes: hbm.to_vec(),
        plans: Some(plans),
        mapped_bytes: mapped,
    }
}

/// Two devices, two tenants on the first, three hidden processes.
pub fn census() -> Census {
    let channels = |total: Option<u64>, used: [Option<u64>; 2]| -> Vec<Channel> {
        (0..2)
            .map(|channel| Channel {
                channel,
                total_bytes: total,
                used_bytes: used[channel],
            })
            .collect()
    };
    Census {
        timestamp: 1_800_000_000.5,
        devices: vec![
            DeviceCensus {
                index: 0,
                node: PathBuf::from("/dev/neuron_hbm0"),
                arch: 2,
                simulated: true,
                pci_address: None,
                state: DeviceState::Ready,
                channels: channels(Some(16 << 30), [Some(48 << 20), Some(4 << 20)]),
                processes: vec![
                    tenant(
                        4242,
                        "tenant \"a\"",
                        1000,
                        Some("alice"),
                        [32 << 20, 4 << 20],
                        2,
                        0,
                    ),
                    tenant(4343, "tenant-b", 1001, None, [16 << 20, 0], 1, 8192),
                ],
            },
            DeviceCensus {
                index: 1,
                node: PathBuf::from("/dev/neuron_hbm1"),
                arch: 3,
                simulated: false,
                pci_address: Some("0000:00:1e.0".to_string()),
                state: DeviceState::NoAccess,
                channels: channels(None, [None, None]),
                processes: Vec::new(),
            },
        ],
        seen: Seen {
            device_usage: true,
            plans: true,
            hidden_processes: 3,
        },
    }
}
