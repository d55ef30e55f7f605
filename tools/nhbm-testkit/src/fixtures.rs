//! The device under test, sizes, small plans and usage snapshots.

use std::io;
use std::sync::OnceLock;

use nhbm::{Device, Plan, Record};

use crate::ktap::{Ctx, Fail};

/// One KiB.
pub const KIB: u64 = 1 << 10;
/// One MiB.
pub const MIB: u64 = 1 << 20;
/// One GiB.
pub const GIB: u64 = 1 << 30;

static DEVICE_INDEX: OnceLock<u32> = OnceLock::new();

/// Chooses the device under test (`/dev/neuron_hbm<i>`); only the first call
/// counts.
pub fn set_device_index(i: u32) {
    let _ = DEVICE_INDEX.set(i);
}

/// The device under test (0 unless [`set_device_index`] said otherwise).
pub fn device_index() -> u32 {
    *DEVICE_INDEX.get().unwrap_or(&0)
}

/// A new open file of device `i`.
pub fn open_device(i: u32) -> Result<Device, Fail> {
    let path = nhbm::device_path(i);
    Device::open_path(&path).ctx(&format!("open {}", path.display()))
}

/// A plan of one buffer.
pub fn one_buffer(var_id: u32, size: u64) -> Plan {
    Plan::new(0, 0).with(Record::buffer(var_id, size))
}

/// Pool usage as MEM_STATS reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Bytes in use on the whole device.
    pub used: u64,
    /// Chunks in use on the whole device.
    pub chunks: u64,
    /// Bytes held by the plans of this file.
    pub own_bytes: u64,
    /// Chunks held by the plans of this file.
    pub own_chunks: u32,
    /// Plans loaded through this file.
    pub own_plans: u32,
}

impl Usage {
    /// The device-wide part (what other files see too).
    pub fn device(&self) -> (u64, u64) {
        (self.used, self.chunks)
    }
}

/// MEM_STATS of `d` as a [`Usage`].
pub fn usage(d: &Device) -> io::Result<Usage> {
    let s = d.mem_stats()?;
    Ok(Usage {
        used: s.total_used(),
        chunks: s.total_chunks(),
        own_bytes: s.own_bytes,
        own_chunks: s.own_chunks,
        own_plans: s.own_plans,
    })
}
