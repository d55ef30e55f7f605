//! What one look at the host found: the devices, the processes holding
//! them, and what the caller could not see.

use std::path::PathBuf;

use serde::Serialize;

/// Everything one look at the host found.
#[derive(Clone, Debug, Serialize)]
pub struct Census {
    /// Seconds since the Unix epoch when the look was taken.
    pub timestamp: f64,
    /// Every device node, by number.
    pub devices: Vec<DeviceCensus>,
    /// What the caller could and could not see.
    pub seen: Seen,
}

/// What the caller could see.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Seen {
    /// MEM_STATS filled in device-wide usage (the caller has CAP_SYS_ADMIN).
    pub device_usage: bool,
    /// debugfs's `plans` files could be read (root, debugfs mounted).
    pub plans: bool,
    /// Processes whose open files could not be read (another user's,
    /// without root): whether they hold a device is unknown.
    pub hidden_processes: u32,
}

/// One device node.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceCensus {
    /// N of `/dev/neuron_hbmN`.
    pub index: u32,
    /// The node's path.
    pub node: PathBuf,
    /// The arch generation (2, 3 or 4), from sysfs.
    pub arch: u32,
    /// A simulated device.
    pub simulated: bool,
    /// The PCI function's address (`0000:00:04.0`); `None` when simulated.
    pub pci_address: Option<String>,
    /// What opening the node and asking DEVICE_INFO found.
    pub state: DeviceState,
    /// Each HBM channel's size and use.
    pub channels: Vec<Channel>,
    /// The processes holding an open file of the node, most HBM first.
    pub processes: Vec<Holder>,
}

/// What the node answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceState {
    /// DEVICE_INFO answered.
    Ready,
    /// A reset runs (root's debugfs `state` says so).
    Resetting,
    /// The last device reset failed: no plan's HBM can be trusted until a
    /// device reset succeeds (root's debugfs `state` says so).
    ResetStateUnknown,
    /// The device was removed (ENODEV); its node stays until every file of
    /// it is closed.
    Removed,
    /// The caller may not open the node (not in its group).
    NoAccess,
    /// The node opened, but DEVICE_INFO or MEM_STATS failed otherwise.
    Unanswered,
}

impl DeviceState {
    /// The state debugfs's `state` file names, for a device whose node
    /// answered; `None` for a word it does not know.
    pub fn from_debugfs(word: &str) -> Option<DeviceState> {
        Some(match word.trim() {
            "ready" => DeviceState::Ready,
            "resetting" => DeviceState::Resetting,
            "unknown" => DeviceState::ResetStateUnknown,
            "removed" => DeviceState::Removed,
            _ => return None,
        })
    }

    /// The state as JSON, Prometheus's labels and the screen name it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceState::Ready => "ready",
            DeviceState::Resetting => "resetting",
            DeviceState::ResetStateUnknown => "reset_state_unknown",
            DeviceState::Removed => "removed",
            DeviceState::NoAccess => "no_access",
            DeviceState::Unanswered => "unanswered",
        }
    }
}

/// One HBM channel of a device.
#[derive(Clone, Debug, Serialize)]
pub struct Channel {
    /// The channel's number (`hbmN`).
    pub channel: usize,
    /// Its size in bytes, `None` when the node could not be asked.
    pub total_bytes: Option<u64>,
    /// Bytes in use by every tenant, `None` when the caller may not see
    /// device-wide usage (see [`Seen::device_usage`]).
    pub used_bytes: Option<u64>,
}

/// One process holding a device.
#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    /// Its pid (as this pid namespace numbers it).
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// Its real user id.
    pub uid: u32,
    /// That user's name, where the system has one.
    pub user: Option<String>,
    /// Its pid namespace's inode, when not the caller's own: a container.
    pub pid_namespace: Option<u64>,
    /// Open files of the device it holds (duplicated descriptors count once).
    pub files: u32,
    /// HBM bytes its files' plans hold, per channel (drm-total-hbmN).
    pub hbm_bytes: Vec<u64>,
    /// The plans it loaded that are live, `None` where debugfs cannot be read.
    pub plans: Option<u32>,
    /// Bytes of the device it has mapped (`/proc/PID/maps`).
    pub mapped_bytes: u64,
}

impl Holder {
    /// HBM bytes over every channel.
    pub fn hbm_total(&self) -> u64 {
        self.hbm_bytes.iter().sum()
    }
}

impl DeviceCensus {
    /// The node's name, `neuron_hbmN`.
    pub fn name(&self) -> String {
        format!("neuron_hbm{}", self.index)
    }

    /// The PCI address, or `sim:N` for a simulated device.
    pub fn address(&self) -> String {
        match &self.pci_address {
            Some(a) => a.clone(),
            None => format!("sim:{}", self.index),
        }
    }

    /// HBM bytes of every channel, `None` when a size is unknown.
    pub fn total_bytes(&self) -> Option<u64> {
        self.channels.iter().map(|c| c.total_bytes).sum()
    }

    /// HBM bytes in use on channel `c`: the device's own figure where it
    /// may be seen, else what the visible processes hold (a lower bound),
    /// and whether it is the device's own.
    pub fn used_on(&self, c: usize) -> (u64, bool) {
        match self.channels.get(c).and_then(|ch| ch.used_bytes) {
            Some(u) => (u, true),
            None => (
                self.processes
                    .iter()
                    .map(|p| p.hbm_bytes.get(c).copied().unwrap_or(0))
                    .sum(),
                false,
            ),
        }
    }

    /// HBM bytes in use over every channel, as [`DeviceCensus::used_on`].
    pub fn used_bytes(&self) -> (u64, bool) {
        (0..self.channels.len())
            .map(|c| self.used_on(c))
            .fold((0, true), |(s, e), (u, x)| (s + u, e && x))
    }
}

impl Census {
    /// What the caller could not see, one sentence each, for the screen.
    pub fn unseen(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.seen.hidden_processes > 0 {
            out.push(format!(
                "{} processes of other users could not be looked at: run as root to see them",
                self.seen.hidden_processes
            ));
        }
        if !self.seen.device_usage {
            out.push("device-wide usage is root's: \"used\" adds up the processes shown".into());
        }
        if !self.seen.plans {
            out.push("plans per process come from debugfs, which only root reads".into());
        }
        if self
            .devices
            .iter()
            .any(|d| d.state == DeviceState::NoAccess)
        {
            out.push("a device marked no_access cannot be opened: join its group (neuron)".into());
        }
        out
    }

    /// Keeps only device `index`, when one is named.
    pub fn only(mut self, index: Option<u32>) -> Census {
        if let Some(i) = index {
            self.devices.retain(|d| d.index == i);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceState;

    #[test]
    fn debugfs_states_name_the_reset_states() {
        assert_eq!(
            DeviceState::from_debugfs("ready\n"),
            Some(DeviceState::Ready)
        );
        assert_eq!(
            DeviceState::from_debugfs("resetting\n"),
            Some(DeviceState::Resetting)
        );
        let unknown = DeviceState::from_debugfs("unknown\n");
        assert_eq!(unknown, Some(DeviceState::ResetStateUnknown));
        assert_eq!(
            unknown.map(DeviceState::as_str),
            Some("reset_state_unknown")
        );
        assert_eq!(
            DeviceState::from_debugfs("removed"),
            Some(DeviceState::Removed)
        );
        assert_eq!(DeviceState::from_debugfs("sleeping"), None);
    }
}
