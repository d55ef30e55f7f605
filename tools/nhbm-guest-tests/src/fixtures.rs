//! What the cases share: the device under test, sizes, byte patterns, shared
//! plans, usage snapshots, where HBM lies, and checks of rejected loads and
//! read bytes.

use std::io;
use std::sync::OnceLock;

use nhbm::uapi::*;
use nhbm::{Backing, Device, LoadedPlan, Plan, Record};

use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Ctx, Fail, TestResult};

/// One KiB.
pub const KIB: u64 = 1 << 10;
/// One MiB.
pub const MIB: u64 = 1 << 20;
/// One GiB.
pub const GIB: u64 = 1 << 30;

/// Amazon's PCI vendor id, which every Neuron function carries.
pub const AMAZON_VENDOR: u32 = 0x1d0f;
/// Where the two HBM channels of a V2 device start.
pub const V2_CHANNEL_BASE: [u64; 2] = [0, 0x10_0000_0000];
/// The size of each HBM channel of a V2 device.
pub const V2_CHANNEL_SIZE: u64 = 16 * GIB;

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

/// The dmem cgroup region of HBM channel `channel` of `/dev/neuron_hbm<index>`:
/// named by the PCI function the node sits under in sysfs, `sim<index>` for a
/// simulated device.
pub fn dmem_region(index: u32, channel: u32) -> String {
    let place = std::fs::read_link(format!("/sys/class/misc/neuron_hbm{index}/device"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("sim{index}"));
    format!("neuron_hbm/{place}/hbm{channel}")
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

/// A new open file of the device under test.
pub fn dev() -> Result<Device, Fail> {
    open_device(device_index())
}

/// DEVICE_INFO of `d`.
pub fn info(d: &Device) -> Result<DeviceInfo, Fail> {
    d.device_info().ctx("DEVICE_INFO")
}

/// The HBM channel holding `pa`, if any.
pub fn channel_of(info: &DeviceInfo, pa: u64) -> Option<usize> {
    (0..(info.nr_channels as usize).min(MAX_CHANNELS))
        .find(|&c| pa >= info.channel_base[c] && pa - info.channel_base[c] < info.channel_size[c])
}

/// Whether `[pa, pa + size)` lies inside one HBM channel of the device.
pub fn in_hbm(info: &DeviceInfo, pa: u64, size: u64) -> bool {
    (0..(info.nr_channels as usize).min(MAX_CHANNELS)).any(|c| {
        let (base, len) = (info.channel_base[c], info.channel_size[c]);
        pa >= base
            && pa
                .checked_add(size)
                .is_some_and(|end| end <= base.saturating_add(len))
    })
}

/// Whether any byte of `[pa, pa + size)` lies in an HBM channel.
pub fn meets_hbm(info: &DeviceInfo, pa: u64, size: u64) -> bool {
    let end = pa.saturating_add(size.max(1));
    (0..(info.nr_channels as usize).min(MAX_CHANNELS)).any(|c| {
        let (base, len) = (info.channel_base[c], info.channel_size[c]);
        pa < base.saturating_add(len) && base < end
    })
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

/// Loads [`every_local_kind`] with 8 KiB of weights on any channel of `d`.
pub fn load_every_local_kind(d: &Device) -> Result<LoadedPlan, Fail> {
    d.plan_load(
        &every_local_kind(8 * KIB).to_blob().ctx("build")?,
        CHANNEL_ANY,
    )
    .ctx("PLAN_LOAD")
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

    /// MEM_STATS of `d`.
    pub fn of(d: &Device) -> io::Result<Usage> {
        let s = d.mem_stats()?;
        Ok(Usage {
            used: s.total_used(),
            chunks: s.total_chunks(),
            own_bytes: s.own_bytes,
            own_chunks: s.own_chunks,
            own_plans: s.own_plans,
        })
    }
}

/// MEM_STATS of `d`, failing the case when it fails.
pub fn usage(d: &Device) -> Result<Usage, Fail> {
    Usage::of(d).ctx("MEM_STATS")
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

/// RESOLVE, RESOLVE_BATCH, MEM_READ and MEM_WRITE of variable 1 of plan
/// `id` through `d` each fail with `errno`, and the refused MEM_READ leaves
/// its buffer as it was; `who` starts every failure message.
pub fn var_refused(d: &Device, id: u32, errno: i32, who: &str) -> TestResult {
    ensure_errno(&format!("{who}: RESOLVE"), d.resolve(id, 1, 0, 0), errno)?;
    let mut q = [ResolveQuery {
        var_id: 1,
        ..Default::default()
    }];
    ensure_errno(
        &format!("{who}: RESOLVE_BATCH"),
        d.resolve_batch(id, &mut q),
        errno,
    )?;
    let mut buf = [0u8; 64];
    ensure_errno(
        &format!("{who}: MEM_READ"),
        d.mem_read(id, 1, 0, &mut buf),
        errno,
    )?;
    ensure(buf.iter().all(|&b| b == 0), || {
        format!("{who}: MEM_READ refused but filled the buffer")
    })?;
    ensure_errno(
        &format!("{who}: MEM_WRITE"),
        d.mem_write(id, 1, 0, &[0xEE; 64]),
        errno,
    )
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
