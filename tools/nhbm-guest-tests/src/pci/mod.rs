//! `nhbm-pci-test` (suite `nhbm_pci_<arch>`): neuron_hbm's PCI driver
//! against the emulated Neuron functions (V2, V3, V4) of tools/nhbm-devmodel:
//! the binding and its BARs, the write-combining BAR4 mapping, the BAR4
//! remap checked by device address on the model's side, the probe's wait
//! for a booting firmware, and the reset handshake against the model's
//! firmware as the reference driver expects it to behave (slow to take a
//! request, missing one, reading 0xdeadbeef, never finishing), against
//! traffic, and against surprise removal.
//!
//!   nhbm-pci-test [-d N] [--list] [NAME_SUBSTRING...]
//!
//! `/dev/neuron_hbmN` is the N-th function in bus-address order. The cases
//! are the `pub fn`s below (see the crate's documentation).

mod dma;
mod function;
mod reset;
mod reset_batches;

use std::io;
use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::Device;

use crate::fixtures::{
    dev, device_index, dmem_region, info, one_buffer, open_device, pattern, set_device_index, GIB,
    KIB, MIB,
};
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, skip, Case, Ctx, Fail, TestResult};
use crate::suite::{Suite, Unready};
use function::*;

pub(super) fn function() -> Result<Function, Fail> {
    let all = Function::all().ctx("list PCI functions")?;
    match all.get(device_index() as usize) {
        Some(f) => Ok(f.clone()),
        None => fail(format!(
            "{} Neuron function(s), none for /dev/neuron_hbm{}",
            all.len(),
            device_index()
        )),
    }
}

fn control() -> Result<Control, Fail> {
    function()?.control().ctx("map the control port")
}

/// Every emulated Neuron function is bound to neuron_hbm, and its device
/// node (numbered in bus-address order) reports a real device
/// (`simulated` 0) with the function's device id.
pub fn functions_are_bound_to_neuron_hbm() -> TestResult {
    let all = Function::all().ctx("list PCI functions")?;
    ensure(!all.is_empty(), || "no Neuron PCI function".into())?;
    for (i, f) in all.iter().enumerate() {
        ensure_eq(
            &format!("driver of {}", f.dir.display()),
            f.driver().as_deref(),
            Some("neuron_hbm"),
        )?;
        let d = open_device(i as u32)?;
        let info = d.device_info().ctx("DEVICE_INFO")?;
        ensure_eq("simulated", info.simulated, 0)?;
        ensure_eq("pci_device", Some(info.pci_device), f.device_id())?;
    }
    Ok(())
}

/// The guest's memory reaches the function's DMA engines: QEMU's
/// vfio-user client shares it (a memfd, `share=on`) and the model maps
/// every region, as a device's DMA reaches host memory.
pub fn guest_memory_is_shared_for_dma() -> TestResult {
    let mib = u64::from(control()?.read(DMA_MAPPED_MIB));
    let ram = mem_total_mib().ctx("/proc/meminfo")?;
    ensure(mib >= ram, || {
        format!("{mib} MiB shared with the engines, the guest has {ram} MiB")
    })
}

/// MiB of memory the guest's kernel manages (`MemTotal`), a little less
/// than the RAM QEMU gives it.
fn mem_total_mib() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb >> 10)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no MemTotal"))
}

/// The function under test has its arch's BARs: 1 GiB BAR0 and 32 GiB BAR4
/// on V2, 4 GiB and 256 GiB (four stacks 64 GiB apart) on V3 and V4, and
/// no BAR2.
pub fn bars_are_bar0_and_bar4_only() -> TestResult {
    let f = function()?;
    let (bar0, bar4) = match f.arch() {
        Some("v2") => (GIB, 32 * GIB),
        _ => (4 * GIB, 256 * GIB),
    };
    ensure_eq("BAR0 size", f.bar_size(0).ctx("resource")?, bar0)?;
    ensure_eq("BAR2 size", f.bar_size(2).ctx("resource")?, 0)?;
    ensure_eq("BAR4 size", f.bar_size(4).ctx("resource")?, bar4)
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
/// reverse, on every HBM stack of the arch.
pub fn mem_write_lands_at_the_device_address() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let inf = info(&d)?;
    let len = 64 * KIB;
    for ch in 0..inf.nr_channels {
        let p = d
            .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, ch)
            .ctx("PLAN_LOAD")?;
        let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
        let (base, size) = (inf.channel_base[ch as usize], inf.channel_size[ch as usize]);
        ensure(pa >= base && pa + len <= base + size, || {
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

/// MEM_WRITE and MEM_READ move exactly the bytes asked for, of any length
/// at any offset of the variable, from and to user buffers of any
/// alignment: the model finds each range's first and last word at its
/// device address, MEM_READ gives each back, and the bytes around every
/// range keep what was there. On the CPU path (`dma=0`) that covers the
/// single bytes before and after the aligned words, the words past the
/// copy loop's blocks of four and pieces that end mid-page.
pub fn transfers_of_any_length_and_offset_arrive_whole() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let len = 512 * KIB;
    let p = d
        .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
    let mut expect = pattern(len, 91);
    d.mem_write(p.plan_id, 1, 0, &expect)
        .ctx("MEM_WRITE of the whole variable")?;
    // (offset in the variable, length, misalignment of the user buffer)
    let ranges = [
        (0usize, 1usize, 0usize),
        (3, 7, 1),
        (8, 8, 0),
        (5, 31, 3),
        (16, 33, 7),
        (64, 40, 2),
        (4093, 64 * 1024 + 13, 5),
        (65_530, 12, 4),
        (100_001, 200 * 1024 + 5, 6),
    ];
    for (i, &(off, n, shift)) in ranges.iter().enumerate() {
        let what = format!("{n} bytes at {off} (user buffer + {shift})");
        let buf = pattern((n + 8) as u64, 200 + i as u32);
        let src = &buf[shift..shift + n];
        d.mem_write(p.plan_id, 1, off as u64, src)
            .ctx(&format!("MEM_WRITE of {what}"))?;
        expect[off..off + n].copy_from_slice(src);
        let mut back = vec![0u8; n + 8];
        d.mem_read(p.plan_id, 1, off as u64, &mut back[shift..shift + n])
            .ctx(&format!("MEM_READ of {what}"))?;
        ensure(&back[shift..shift + n] == src, || {
            format!("MEM_READ of {what} differs from what was written")
        })?;
        for at in [off & !3, (off + n - 1) & !3] {
            ensure_eq(
                &format!("{what}: HBM word at PA 0x{:x}", pa + at as u64),
                c.hbm_read(pa + at as u64),
                word(&expect, at),
            )?;
        }
    }
    let mut all = vec![0u8; len as usize];
    d.mem_read(p.plan_id, 1, 0, &mut all)
        .ctx("MEM_READ of the whole variable")?;
    if let Some(at) = all.iter().zip(&expect).position(|(a, b)| a != b) {
        return fail(format!(
            "byte {at} of the variable is not what was written there"
        ));
    }
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A variable mapped into the process (MAP_OFFSET, `mmap`) is the device's
/// memory at the variable's address, through the BAR4 remap of each arch:
/// what the process stores there, the model reads at that device address,
/// and what the model writes there, the process loads, on every channel.
pub fn mapped_variable_is_the_device_address() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let inf = info(&d)?;
    let len = 64 * KIB;
    for ch in 0..inf.nr_channels {
        let p = d
            .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, ch)
            .ctx("PLAN_LOAD")?;
        let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
        let mut m = d.map(p.plan_id, 1).ctx("map")?;
        let w = pattern(len, 70 + ch);
        m.write(0, &w).ctx("write through the mapping")?;
        for off in [0usize, 4, 4096, 40000, len as usize - 4] {
            ensure_eq(
                &format!("channel {ch}: HBM at PA 0x{:x}", pa + off as u64),
                c.hbm_read(pa + off as u64),
                word(&w, off),
            )?;
        }
        c.hbm_write(pa + 4096 + 8, 0x8765_4321);
        let mut r = [0u8; 4];
        m.read(4096 + 8, &mut r).ctx("read through the mapping")?;
        ensure_eq(
            &format!("channel {ch}: a word the model wrote, read through the mapping"),
            u32::from_le_bytes(r),
            0x8765_4321,
        )?;
        drop(m);
        d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    }
    Ok(())
}

/// Runs `f` with the firmware scripted by `script`, then restores it and
/// resets the device once more, so that no case leaves "reset state
/// unknown" behind.
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
    let again = d.reset(RESET_DEVICE, 0);
    let r = r?;
    ensure_eq("RESET after restoring the firmware", again.ctx("RESET")?, 0)?;
    Ok(r)
}

fn timed_reset(d: &Device, type_: u32, nc_map: u32) -> (io::Result<i32>, Duration) {
    let t = Instant::now();
    let r = d.reset(type_, nc_map);
    (r, t.elapsed())
}

/// The firmware probe waited for: the function's firmware booted for
/// BOOT_MS after its first BAR0 access, answering 0xdeadbeef, and the
/// driver read the device-id register again until it answered
/// (`neuron_pci_get_device_id`) before binding.
pub fn probe_waited_for_the_firmware() -> TestResult {
    let f = function()?;
    let c = f.control().ctx("map the control port")?;
    if c.read(BOOT_MS) == 0 {
        return skip("this function's firmware does not boot slowly");
    }
    ensure(c.read(BOOT_READS) >= 2, || {
        format!(
            "{} mailbox reads during a {} ms boot, want the probe to re-read",
            c.read(BOOT_READS),
            c.read(BOOT_MS)
        )
    })?;
    ensure_eq("driver", f.driver().as_deref(), Some("neuron_hbm"))
}

/// RESET waits out a firmware reset that takes 250 ms: it returns 0 no
/// sooner, after polling FW_STATUS more than once, and the model took
/// exactly one reset and is no longer resetting.
pub fn reset_waits_for_the_firmware() -> TestResult {
    with_firmware(
        |c| c.write(RESET_DELAY_MS, 250),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            let (r, took) = timed_reset(d, RESET_DEVICE, 0);
            ensure_eq("RESET status", r.ctx("RESET")?, 0)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            ensure_eq("model still resetting", c.read(RESETTING), 0)?;
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

/// A reset that never completes ends in ETIMEDOUT after the reference's
/// five looks at FW_STATUS, at +0, 0, 100, 300 and 600 ms, and a last
/// sleep of 400 ms.
pub fn reset_that_never_completes_times_out() -> TestResult {
    with_firmware(
        |c| c.write(RESET_DELAY_MS, NEVER),
        |d, c| {
            let (r, took) = timed_reset(d, RESET_DEVICE, 0);
            ensure_errno("RESET", r, libc::ETIMEDOUT)?;
            ensure_eq("FW_STATUS reads", c.read(STATUS_READS), 5)?;
            ensure(took >= Duration::from_millis(1000), || {
                format!("ETIMEDOUT after {took:?}, want 5 looks over 1 s")
            })
        },
    )
}

/// A firmware that takes the request 2 s after the doorbell: RESET looks at
/// the mailbox every 100 ms (about 20 looks, as the model counts them) until
/// it is taken (the reference allows 120 s
/// on V2, 480 s on V3 and V4) and returns 0, after one request.
pub fn reset_survives_slow_firmware() -> TestResult {
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 2000),
        |d, c| {
            let (taken, rung) = (c.read(RESETS_TAKEN), c.read(DOORBELLS));
            let (r, took) = timed_reset(d, RESET_DEVICE, 0);
            ensure_eq("RESET status", r.ctx("RESET")?, 0)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            ensure_eq("requests sent", c.read(DOORBELLS), rung + 1)?;
            ensure(took >= Duration::from_secs(2), || {
                format!("RESET returned after {took:?}, the take comes at 2 s")
            })?;
            // 100 ms looks over 2 s: about 20 (sleeps only ever run long).
            let looks = c.read(REQUEST_READS);
            ensure((5..=25).contains(&looks), || {
                format!("{looks} looks at the mailbox in 2 s, want one per 100 ms")
            })
        },
    )
}

/// The firmware misses the first request: the reset completes only
/// through the re-send, at the reference's interval (30 s for a device
/// reset, on V2; 10 s for a TPB reset, on V3 and V4, to keep the run short).
pub fn reset_resends_a_dropped_request() -> TestResult {
    let v2 = function()?.arch() == Some("v2");
    let (type_, map, interval) = if v2 {
        (RESET_DEVICE, 0, 30)
    } else {
        (RESET_TPB, 0b1, 10)
    };
    with_firmware(
        |c| c.write(IGNORE_REQUESTS, 1),
        |d, c| {
            let (taken, rung) = (c.read(RESETS_TAKEN), c.read(DOORBELLS));
            let (r, took) = timed_reset(d, type_, map);
            ensure_eq("RESET status", r.ctx("RESET")?, 0)?;
            ensure_eq("requests sent", c.read(DOORBELLS), rung + 2)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            let lo = Duration::from_secs(interval);
            ensure(took >= lo && took < 2 * lo, || {
                format!("RESET returned after {took:?}, the re-send is due at {lo:?}")
            })
        },
    )
}

/// FW_STATUS reads 0xdeadbeef for 500 ms after the take: each bad read is
/// read again every millisecond (many bad reads: a look every 100 ms would
/// see at most 6) and RESET returns 0; a window of 1.5 s, longer than all
/// five looks, is waited out too (the reference's 1 s windows, 15 of them).
/// 500 ms, not less: through the emulated function a read and its 1 ms
/// sleep have taken up to 33 ms.
pub fn deadbeef_window_is_waited_out() -> TestResult {
    with_firmware(
        |c| c.write(BAD_MS, 500),
        |d, c| {
            ensure_eq("RESET status", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)?;
            ensure(c.read(BAD_READS_SEEN) >= 15, || {
                format!(
                    "{} reads of 0xdeadbeef in 500 ms, want re-reads every ms",
                    c.read(BAD_READS_SEEN)
                )
            })?;
            c.write(BAD_MS, 1500);
            ensure_eq("RESET status", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)
        },
    )
}

/// A device reset that fails (the firmware never finishes it) leaves
/// "reset state unknown": plans staged before answer EIO to RESOLVE and
/// MEM_READ, another file's import of one as well, and new loads answer
/// EIO, until a device reset succeeds.
pub fn failed_reset_poisons_every_plan() -> TestResult {
    let blob = one_buffer(1, 4 * KIB).to_blob().ctx("build")?;
    with_firmware(
        |c| c.write(RESET_DELAY_MS, NEVER),
        |d, c| {
            let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
            let importer = dev()?;
            let shared = d.plan_export(p.plan_id).ctx("PLAN_EXPORT")?;
            let imported = importer
                .plan_import(std::os::fd::AsFd::as_fd(&shared))
                .ctx("PLAN_IMPORT")?
                .plan_id;
            ensure_errno("RESET", d.reset(RESET_DEVICE, 0), libc::ETIMEDOUT)?;
            ensure_errno("RESOLVE", d.resolve(p.plan_id, 1, 0, 8), libc::EIO)?;
            let r = importer.resolve(imported, 1, 0, 8);
            ensure_errno("RESOLVE of the import", r, libc::EIO)?;
            let mut b = [0u8; 8];
            ensure_errno("MEM_READ", d.mem_read(p.plan_id, 1, 0, &mut b), libc::EIO)?;
            ensure_errno("PLAN_LOAD", d.plan_load(&blob, 0), libc::EIO)?;
            c.write(RESET_DELAY_MS, 0);
            ensure_eq("RESET", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)?;
            let q = d.plan_load(&blob, 0).ctx("PLAN_LOAD after a good reset")?;
            ensure_errno(
                "RESOLVE of the old plan",
                d.resolve(p.plan_id, 1, 0, 8),
                libc::EIO,
            )?;
            d.resolve(q.plan_id, 1, 0, 8)
                .ctx("RESOLVE of the new plan")
                .map(|_| ())
        },
    )
}

/// A load started while a device reset is in flight waits for the reset
/// to end and then succeeds: started while the model is still resetting,
/// it returns only once the model is done, never during the reset. A
/// transfer of a plan staged before the reset answers EIO.
pub fn transfers_wait_out_a_device_reset() -> TestResult {
    let blob = one_buffer(1, 256 * KIB).to_blob().ctx("build")?;
    with_firmware(
        // Inside the reference's completion looks (the last at +600 ms).
        |c| c.write(RESET_DELAY_MS, 500),
        |d, c| {
            let old = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
            let other = dev()?;
            let started = c.read(RESETS_TAKEN);
            let (reset, during, after, load) = std::thread::scope(|s| {
                let resetter = s.spawn(|| d.reset(RESET_DEVICE, 0));
                // Load once the firmware has taken the reset.
                let t0 = Instant::now();
                while c.read(RESETS_TAKEN) == started && t0.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let during = c.read(RESETTING);
                let load = other.plan_load(&blob, 0);
                let after = c.read(RESETTING);
                (resetter.join().unwrap(), during, after, load)
            });
            ensure_eq("RESET", reset.ctx("RESET")?, 0)?;
            ensure_eq("model resetting when the load started", during, 1)?;
            let p = load.ctx("PLAN_LOAD during the reset")?;
            ensure_eq("model resetting when the load returned", after, 0)?;
            other
                .mem_write(p.plan_id, 1, 0, b"after")
                .ctx("MEM_WRITE")?;
            ensure_errno(
                "MEM_WRITE of the old plan",
                d.mem_write(old.plan_id, 1, 0, b"x"),
                libc::EIO,
            )
        },
    )
}

/// A function removed by surprise reads all ones: the module notices it at
/// the end of a transfer and answers ENODEV from then on, RESET included,
/// without hanging. Rebinding the function (once the model answers again)
/// gives a working device node with nothing of the old one left.
pub fn surprise_removal_reads_all_ones() -> TestResult {
    let f = function()?;
    let c = f.control().ctx("map the control port")?;
    {
        let d = dev()?;
        let p = d
            .plan_load(&one_buffer(1, 4 * KIB).to_blob().ctx("build")?, 0)
            .ctx("PLAN_LOAD")?;
        c.write(REMOVED, 1);
        let r = d.mem_write(p.plan_id, 1, 0, b"lost");
        let t = Instant::now();
        let reset = d.reset(RESET_DEVICE, 0);
        let info = d.device_info();
        c.write(REMOVED, 0);
        ensure_errno("MEM_WRITE", r, libc::ENODEV)?;
        ensure_errno("RESET", reset, libc::ENODEV)?;
        ensure(t.elapsed() < Duration::from_secs(5), || {
            format!("RESET on a removed function took {:?}", t.elapsed())
        })?;
        ensure_errno("DEVICE_INFO", info, libc::ENODEV)?;
    }
    rebind(&f)?;
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, 4 * KIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD after rebinding")?;
    let stats = d.mem_stats().ctx("MEM_STATS")?;
    ensure_eq("own plans of the new file", stats.own_plans, 1)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// The device node under function `f` in sysfs.
/// Waits up to `limit` for `cond`, polling every 5 ms.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !cond() {
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// SIGKILLs our child `pid` and reaps it: its wait status, and how long it
/// took to die.
fn kill_and_reap(pid: libc::pid_t) -> (i32, Duration) {
    // SAFETY: `pid` is our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let killed_at = Instant::now();
    let mut status = 0;
    // SAFETY: as above; `status` is a valid out pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    (status, killed_at.elapsed())
}

pub(super) fn node_of(f: &Function) -> Result<u32, Fail> {
    for i in 0..16u32 {
        let link = std::fs::read_link(format!("/sys/class/misc/neuron_hbm{i}/device"));
        if link.is_ok_and(|p| p.file_name().is_some_and(|n| *n == *f.address())) {
            return Ok(i);
        }
    }
    fail(format!("no /dev/neuron_hbm* under {}", f.address()))
}

/// A cgroup `dmem.max` set on a function's region holds across a rebind,
/// while a file of the old binding is still open: the region is named by
/// the PCI slot and kept, so the device bound again there (under another
/// node, the old one still being held) charges the same region, under the
/// same limit.
pub fn dmem_limit_survives_a_rebind() -> TestResult {
    const LIMIT: u64 = MIB;
    const PLAN: u64 = 256 * KIB;
    let f = function()?;
    let region = dmem_region(device_index(), 0);
    ensure(region.contains(&f.address()), || {
        format!("region {region} is not named by the slot {}", f.address())
    })?;
    let root = "/sys/fs/cgroup";
    let controllers =
        std::fs::read_to_string(format!("{root}/cgroup.controllers")).ctx("cgroup2")?;
    if !controllers.split_whitespace().any(|c| c == "dmem") {
        return skip("the kernel has no dmem cgroup controller");
    }
    std::fs::write(format!("{root}/cgroup.subtree_control"), "+dmem").ctx("subtree_control")?;
    let cg = format!("{root}/nhbm-rebind");
    let _ = std::fs::remove_dir(&cg);
    std::fs::create_dir(&cg).ctx("mkdir cgroup")?;
    let me = std::process::id().to_string();
    let run = || -> TestResult {
        std::fs::write(format!("{cg}/dmem.max"), format!("{region} {LIMIT}")).ctx("dmem.max")?;
        std::fs::write(format!("{cg}/cgroup.procs"), &me).ctx("join")?;
        let old = dev()?;
        rebind(&f)?;
        let new = open_device(node_of(&f)?)?;
        let blob = one_buffer(1, PLAN).to_blob().ctx("build")?;
        let mut held = Vec::new();
        for _ in 0..LIMIT / PLAN {
            held.push(new.plan_load(&blob, 0).ctx("PLAN_LOAD within dmem.max")?);
        }
        ensure_errno(
            "PLAN_LOAD over dmem.max",
            new.plan_load(&blob, 0),
            libc::EAGAIN,
        )?;
        drop(new);
        drop(old);
        Ok(())
    };
    let r = run();
    let _ = std::fs::write(format!("{root}/cgroup.procs"), &me);
    let _ = std::fs::remove_dir(&cg);
    // Back under its own node for the cases after this one.
    rebind(&f)?;
    r?;
    ensure_eq("node after rebinding", node_of(&f)?, device_index())
}

/// Unbinds `f` from neuron_hbm and binds it again.
fn rebind(f: &Function) -> TestResult {
    let drv = "/sys/bus/pci/drivers/neuron_hbm";
    std::fs::write(format!("{drv}/unbind"), f.address()).ctx("unbind")?;
    std::fs::write(format!("{drv}/bind"), f.address()).ctx("bind")?;
    ensure_eq(
        "driver after rebinding",
        f.driver().as_deref(),
        Some("neuron_hbm"),
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

/// Whether the guest loaded the module with `dma=0` (it says so with
/// `NHBM_DMA=0`: the module's parameters are not in sysfs), so that bytes
/// move with the CPU, not the engine.
pub(super) fn on_cpu_path() -> bool {
    std::env::var("NHBM_DMA").as_deref() == Ok("0")
}

/// A plan exported from one open file and imported into another reads the
/// same bytes at the same addresses and takes no write, on this function's
/// arch (the uapi suite's case).
pub fn imports_read_the_exporters_bytes_and_write_none() -> TestResult {
    crate::uapi::imports_read_the_exporters_bytes_and_write_none()
}

/// The suite for device `index`, named after its function's arch
/// (`nhbm_pci_v2`, `nhbm_pci_v3`, `nhbm_pci_v4`, with `_cpu` after it on
/// the CPU path, [`on_cpu_path`]) so that the runs on
/// several functions and both paths stay apart; `nhbm_pci` where there is
/// SHARDED windows in every core's shard and a MAIN buffer load, resolve,
/// move bytes and unload on this function's arch (the uapi suite's case).
pub fn sharded_and_main_scratch_load_resolve_and_move_bytes() -> TestResult {
    crate::uapi::sharded_and_main_scratch_load_resolve_and_move_bytes()
}

/// Small buffers aligned beyond their pages take just their pages, placed
/// aligned in the small pool, on this function's arch (the uapi suite's
/// case).
pub fn small_aligned_buffers_take_their_own_pages() -> TestResult {
    crate::uapi::small_aligned_buffers_take_their_own_pages()
}

/// no such function.
pub fn suite_for(index: u32) -> Suite {
    set_device_index(index);
    let arch = Function::all()
        .ok()
        .and_then(|all| all.get(index as usize).and_then(Function::arch));
    let name = match (arch, on_cpu_path()) {
        (Some("v2"), false) => "nhbm_pci_v2",
        (Some("v3"), false) => "nhbm_pci_v3",
        (Some("v4"), false) => "nhbm_pci_v4",
        (Some("v2"), true) => "nhbm_pci_v2_cpu",
        (Some("v3"), true) => "nhbm_pci_v3_cpu",
        (Some("v4"), true) => "nhbm_pci_v4_cpu",
        _ => SUITE.name,
    };
    Suite { name, ..SUITE }
}
