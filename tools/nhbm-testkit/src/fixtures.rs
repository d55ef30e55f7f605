//! The device under test, sizes, byte patterns, shared plans and usage snapshots.

use std::io;
use std::sync::OnceLock;

use nhbm::{Backing, Device, Plan, Record};

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

/// The `simulated` value DEVICE_INFO must report: 0 when the guest runs on
/// the emulated PCI functions (`NHBM_BACKEND=pci`), 1 otherwise.
pub fn expected_simulated() -> u32 {
    u32::from(std::env::var("NHBM_BACKEND").as_deref() != Ok("pci"))
}

/// A new open file of device `i`.
pub fn open_device(i: u32) -> Result<Device, Fail> {
    let path = nhbm::device_path(i);
    Device::open_path(&path).ctx(&format!("open {}", path.display()))
}

/// Bytes `n` long, different for every `seed`, never zero.
pub fn pattern(n: u64, seed: u32) -> Vec<u8> {
    let mut x = u64::from(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x as u8) | 1
        })
        .collect()
}

/// One record of every kind that lives inside one plan (no MR_REMOTE), with
/// payloads: var 1 input, 2 output, 3 buffer with a payload of `weights`
/// bytes (4 KiB aligned), 4 staged buffer with a short payload, 5 tmp
/// buffer, 6/7 virtual tmp buffers in the local/shared scratchpad, 8 pointer
/// to 3, 9 list of 1, 2, 3, 12 (12 is a forward reference), 10 list of 5,
/// 11 pointer table of 9 and 10, 12 buffer, 13/14 state buffer of core 0 at
/// 0 and 0x1000, 15 state buffer of core 1.
pub fn every_local_kind(weights: u64) -> Plan {
    Plan::new(64 * KIB, 16 * KIB)
        .with(
            Record::input(1, 4 * KIB)
                .name("input")
                .dtype("float32", &[32, 32]),
        )
        .with(
            Record::output(2, 4 * KIB)
                .name("output")
                .dtype("float32", &[1024]),
        )
        .with(
            Record::buffer(3, weights)
                .name("weights")
                .alignment(4096)
                .data(pattern(weights, 3)),
        )
        .with(
            Record::buffer_staged(4, 4 * KIB)
                .name("bias")
                .data(pattern(1000, 4)),
        )
        .with(Record::tmp_buf(5, 4 * KIB).name("tmp"))
        .with(Record::virtual_tmp_buf(6, KIB, Backing::Local, 2 * KIB).name("act_local"))
        .with(Record::virtual_tmp_buf(7, 512, Backing::Shared, 512).name("act_shared"))
        .with(Record::ptr(8, 3, weights).name("weights_alias"))
        .with(Record::list(9, vec![1, 2, 3, 12]).name("io_list"))
        .with(Record::list(10, vec![5]))
        .with(Record::ptr_table(11, vec![9, 10]).name("tables"))
        .with(Record::buffer(12, 256))
        .with(Record::sb(13, 4 * KIB, 0, 0).name("sb0"))
        .with(Record::sb(14, 4 * KIB, 0, 0x1000))
        .with(Record::sb(15, 4 * KIB, 1, 0))
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
