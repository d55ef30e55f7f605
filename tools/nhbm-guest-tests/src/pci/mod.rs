//! `nhbm-pci-test` (suite `nhbm_pci`): neuron_hbm's PCI driver against the
//! emulated Neuron functions of tools/nhbm-devmodel: the binding and its
//! BARs, the write-combining BAR4 mapping, the BAR4 remap checked by device
//! address on the model's side, and the firmware reset wait under the
//! model's fault injection (slow, never completing, 0xdeadbeef reads,
//! requests not taken).
//!
//!   nhbm-pci-test [-d N] [--list] [NAME_SUBSTRING...]
//!
//! `/dev/neuron_hbmN` is the N-th function in bus-address order. The cases
//! are the `pub fn`s below (see the crate's documentation).

mod function;

use std::io;
use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::Device;

use crate::fixtures::{
    dev, device_index, one_buffer, open_device, pattern, AMAZON_VENDOR, DEVICE_V2, GIB, KIB,
    V2_CHANNEL_BASE, V2_CHANNEL_SIZE,
};
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Case, Ctx, Fail, TestResult};
use crate::suite::{Suite, Unready};
use function::*;

fn function() -> Result<Function, Fail> {
    let all = Function::all(AMAZON_VENDOR, DEVICE_V2).ctx("list PCI functions")?;
    match all.get(device_index() as usize) {
        Some(f) => Ok(f.clone()),
        None => fail(format!(
            "{} function(s) 1d0f:7164, none for /dev/neuron_hbm{}",
            all.len(),
            device_index()
        )),
    }
}

fn control() -> Result<Control, Fail> {
    function()?.control().ctx("map the control port")
}

/// Every emulated function 1d0f:7164 is bound to neuron_hbm, and its device
/// node (numbered in bus-address order) reports a real V2 device
/// (`simulated` 0, `pci_device` 0x7164).
pub fn functions_are_bound_to_neuron_hbm() -> TestResult {
    let all = Function::all(AMAZON_VENDOR, DEVICE_V2).ctx("list PCI functions")?;
    ensure(!all.is_empty(), || "no PCI function 1d0f:7164".into())?;
    for (i, f) in all.iter().enumerate() {
        ensure_eq(
            &format!("driver of {}", f.dir.display()),
            f.driver().as_deref(),
            Some("neuron_hbm"),
        )?;
        let d = open_device(i as u32)?;
        let info = d.device_info().ctx("DEVICE_INFO")?;
        ensure_eq("simulated", info.simulated, 0)?;
        ensure_eq("pci_device", info.pci_device, DEVICE_V2)?;
    }
    Ok(())
}

/// The function under test has a 1 GiB BAR0, a 32 GiB BAR4 and no BAR2.
pub fn bars_are_bar0_and_bar4_only() -> TestResult {
    let f = function()?;
    ensure_eq("BAR0 size", f.bar_size(0).ctx("resource")?, GIB)?;
    ensure_eq("BAR2 size", f.bar_size(2).ctx("resource")?, 0)?;
    ensure_eq("BAR4 size", f.bar_size(4).ctx("resource")?, 32 * GIB)
}

/// The kernel's PAT memtype list names the cache mode of every mapping.
fn bar_mapping_mode(start: u64) -> Result<String, Fail> {
    let list = std::fs::read_to_string("/sys/kernel/debug/x86/pat_memtype_list")
        .ctx("read debugfs x86/pat_memtype_list")?;
    let key = format!("[mem 0x{start:016x}-");
    list.lines()
        .filter(|l| l.contains(&key))
        .map(|l| l.rsplit(']').next().unwrap_or("").trim().to_string())
        .find(|m| m != "write-back")
        .map_or_else(
            || fail(format!("no mapping of 0x{start:x} in pat_memtype_list")),
            Ok,
        )
}

/// The driver maps BAR4 (the HBM window) write-combining and BAR0 (the
/// registers) uncached-minus, as the kernel's PAT memtype list shows.
pub fn bar4_is_mapped_write_combining() -> TestResult {
    let f = function()?;
    let r = f.resources().ctx("resource")?;
    ensure_eq(
        "BAR4 mapping",
        bar_mapping_mode(r[4].0)?.as_str(),
        "write-combining",
    )?;
    ensure_eq(
        "BAR0 mapping",
        bar_mapping_mode(r[0].0)?.as_str(),
        "uncached-minus",
    )
}

fn word(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

/// Bytes written through MEM_WRITE are found by the model at the device
/// address RESOLVE reports (through the model's own remap of BAR4), and the
/// reverse, on both HBM stacks.
pub fn mem_write_lands_at_the_device_address() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let len = 64 * KIB;
    for ch in 0..2u32 {
        let p = d
            .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, ch)
            .ctx("PLAN_LOAD")?;
        let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
        let base = V2_CHANNEL_BASE[ch as usize];
        ensure(pa >= base && pa + len <= base + V2_CHANNEL_SIZE, || {
            format!("channel {ch}: PA 0x{pa:x} outside the stack")
        })?;
        let w = pattern(len, 7 + ch);
        d.mem_write(p.plan_id, 1, 0, &w).ctx("MEM_WRITE")?;
        for off in [0usize, 4, 4096, 40000, len as usize - 4] {
            ensure_eq(
                &format!("channel {ch}: HBM at PA 0x{:x}", pa + off as u64),
                c.hbm_read(pa + off as u64),
                word(&w, off),
            )?;
        }
        c.hbm_write(pa + 8, 0x1234_5678);
        let mut r = [0u8; 4];
        d.mem_read(p.plan_id, 1, 8, &mut r).ctx("MEM_READ")?;
        ensure_eq(
            &format!("channel {ch}: MEM_READ of a word the model wrote"),
            u32::from_le_bytes(r),
            0x1234_5678,
        )?;
        d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    }
    Ok(())
}

/// Runs `f` with the firmware scripted by `script`, then restores it.
fn with_firmware<T>(
    script: impl FnOnce(&Control),
    f: impl FnOnce(&Device, &Control) -> Result<T, Fail>,
) -> Result<T, Fail> {
    let d = dev()?;
    let c = control()?;
    let delay = c.read(RESET_DELAY_MS);
    script(&c);
    let r = f(&d, &c);
    c.restore(delay);
    // Whatever the case left behind, the device resets cleanly again.
    let again = d.reset(RESET_DEVICE, 0);
    let r = r?;
    ensure_eq("RESET after restoring the firmware", again.ctx("RESET")?, 0)?;
    Ok(r)
}

fn timed_reset(d: &Device) -> (io::Result<i32>, Duration) {
    let t = Instant::now();
    let r = d.reset(RESET_DEVICE, 0);
    (r, t.elapsed())
}

/// RESET waits out a firmware reset that takes 250 ms: it returns 0 no
/// sooner, after polling FW_STATUS more than once, and the model took
/// exactly one reset and is no longer resetting.
pub fn reset_waits_for_the_firmware() -> TestResult {
    with_firmware(
        |c| c.write(RESET_DELAY_MS, 250),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            let (r, took) = timed_reset(d);
            ensure_eq("RESET status", r.ctx("RESET")?, 0)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            ensure_eq("model still resetting", c.read(RESETTING), 0)?;
            // Polls at 0, 100 and 300 ms: the third sees the device ready.
            ensure(c.read(STATUS_READS) >= 2, || {
                format!(
                    "{} FW_STATUS reads, want polls until ready",
                    c.read(STATUS_READS)
                )
            })?;
            ensure(took >= Duration::from_millis(250), || {
                format!("RESET returned after {took:?}, the reset takes 250 ms")
            })
        },
    )
}

/// A reset that never completes ends in ETIMEDOUT after the five looks at
/// FW_STATUS, one second in all.
pub fn reset_that_never_completes_times_out() -> TestResult {
    with_firmware(
        |c| c.write(RESET_DELAY_MS, NEVER),
        |d, c| {
            let (r, took) = timed_reset(d);
            ensure_errno("RESET", r, libc::ETIMEDOUT)?;
            // The seed's 5 tries, 100 ms * i apart: 1 s in all.
            ensure_eq("FW_STATUS reads", c.read(STATUS_READS), 5)?;
            ensure(took >= Duration::from_millis(1000), || {
                format!("ETIMEDOUT after {took:?}, want 5 tries over 1 s")
            })
        },
    )
}

/// FW_STATUS reads of 0xdeadbeef are read again at once: two bad reads then
/// the ready status, three reads in all, and RESET returns 0.
pub fn deadbeef_status_is_reread() -> TestResult {
    with_firmware(
        |c| {
            c.write(RESET_DELAY_MS, 0);
            c.write(BAD_READS, 2);
        },
        |d, c| {
            ensure_eq("RESET status", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)?;
            // Two 0xdeadbeef reads, re-read at once, then the status.
            ensure_eq("FW_STATUS reads", c.read(STATUS_READS), 3)
        },
    )
}

/// A status that always reads 0xdeadbeef ends in ETIMEDOUT: five looks of
/// one read and three re-reads each, twenty reads in all.
pub fn device_that_reads_deadbeef_times_out() -> TestResult {
    with_firmware(
        |c| {
            c.write(RESET_DELAY_MS, 0);
            c.write(BAD_READS, NEVER);
        },
        |d, c| {
            ensure_errno("RESET", d.reset(RESET_DEVICE, 0), libc::ETIMEDOUT)?;
            // 5 tries of one read and 3 re-reads each.
            ensure_eq("FW_STATUS reads", c.read(STATUS_READS), 20)
        },
    )
}

/// A firmware that never takes the mailbox request makes RESET fail with
/// ETIMEDOUT, and no reset is counted as taken.
pub fn untaken_request_times_out() -> TestResult {
    with_firmware(
        |c| c.write(TAKES_REQUESTS, 0),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            ensure_errno("RESET", d.reset(RESET_DEVICE, 0), libc::ETIMEDOUT)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken)
        },
    )
}

/// The suite `nhbm_pci`; its cases skip outside a guest with emulated
/// functions.
pub const SUITE: Suite = Suite {
    name: "nhbm_pci",
    unit: "tests",
    cases: include!(concat!(env!("OUT_DIR"), "/pci_cases.rs")),
    ready: on_emulated_functions,
};

/// [`Suite::ready`]: the guest runs on emulated PCI functions
/// (`NHBM_BACKEND=pci`).
fn on_emulated_functions() -> Result<(), Unready> {
    if std::env::var("NHBM_BACKEND").as_deref() == Ok("pci") {
        Ok(())
    } else {
        Err(Unready::Skip(
            "no emulated PCI functions in this guest (NHBM_BACKEND=pci)".into(),
        ))
    }
}
