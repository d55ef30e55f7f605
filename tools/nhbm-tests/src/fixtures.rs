//! What the cases share: the device under test, plans, and usage snapshots.

use nhbm::uapi::*;
use nhbm::{Device, Plan};

use nhbm_testkit::fixtures::open_device;
pub use nhbm_testkit::fixtures::{
    device_index, expected_simulated, one_buffer, pattern, set_device_index, Usage, GIB, KIB, MIB,
};
use nhbm_testkit::ktap::{ensure_eq, ensure_errno, fail, Ctx, Fail, TestResult};

/// A new open file of the device under test.
pub fn dev() -> Result<Device, Fail> {
    open_device(device_index())
}

pub fn info(d: &Device) -> Result<DeviceInfo, Fail> {
    d.device_info().ctx("DEVICE_INFO")
}

/// The HBM channel holding `pa`, if any.
pub fn channel_of(info: &DeviceInfo, pa: u64) -> Option<usize> {
    (0..(info.nr_channels as usize).min(MAX_CHANNELS))
        .find(|&c| pa >= info.channel_base[c] && pa - info.channel_base[c] < info.channel_size[c])
}

/// Whether `[pa, pa + size)` lies in one channel.
pub fn in_one_channel(info: &DeviceInfo, pa: u64, size: u64) -> bool {
    channel_of(info, pa).is_some_and(|c| {
        let end = info.channel_base[c] + info.channel_size[c];
        pa.checked_add(size).is_some_and(|e| e <= end)
    })
}

/// The shared plan of every local kind, with 8 KiB of weights.
pub fn every_local_kind() -> Plan {
    nhbm_testkit::fixtures::every_local_kind(8 * KIB)
}

/// Pool usage as MEM_STATS reports it.
pub fn usage(d: &Device) -> Result<Usage, Fail> {
    nhbm_testkit::fixtures::usage(d).ctx("MEM_STATS")
}

/// PLAN_LOAD of `blob` must fail with `errno` and leave MEM_STATS as it was.
pub fn load_rejected(d: &Device, blob: &[u8], channel: u32, errno: i32) -> TestResult {
    let before = usage(d)?;
    ensure_errno("PLAN_LOAD", d.plan_load(blob, channel), errno)?;
    ensure_eq("MEM_STATS after the rejected load", usage(d)?, before)
}

/// Like [`load_rejected`] with a caller-made argument.
///
/// # Safety
/// As [`Device::plan_load_raw`].
pub unsafe fn load_raw_rejected(d: &Device, arg: &mut PlanLoad, errno: i32) -> TestResult {
    let before = usage(d)?;
    // SAFETY: forwarded to the caller.
    let r = unsafe { d.plan_load_raw(arg) };
    ensure_errno("PLAN_LOAD", r, errno)?;
    ensure_eq("MEM_STATS after the rejected load", usage(d)?, before)
}

/// Reads `len` bytes of a variable.
pub fn read(d: &Device, plan: u32, var: u32, offset: u64, len: u64) -> Result<Vec<u8>, Fail> {
    let mut buf = vec![0u8; len as usize];
    d.mem_read(plan, var, offset, &mut buf)
        .ctx(&format!("MEM_READ var {var} [{offset:#x}, +{len:#x})"))?;
    Ok(buf)
}

/// The first byte where `got` and `want` differ, as a failure message.
pub fn ensure_bytes(what: &str, got: &[u8], want: &[u8]) -> TestResult {
    if got.len() != want.len() {
        return fail(format!("{what}: {} bytes, want {}", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => fail(format!(
            "{what}: byte {i:#x} is {:#04x}, want {:#04x}",
            got[i], want[i]
        )),
    }
}

/// `buf` as little-endian u64 words.
pub fn words(buf: &[u8]) -> Vec<u64> {
    buf.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Why multi-GiB staging is left to the simulated device: an emulated PCI
/// function's BAR4 is host memory, and scrubbing gigabytes through it would
/// commit that much memory on the host.
pub const HOST_BACKED_BAR4: &str =
    "multi-GiB scrub through the emulated BAR4 would commit host memory";
