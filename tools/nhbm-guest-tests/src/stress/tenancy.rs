//! What one tenant of a device can do to another: State Buffer windows that
//! must never open onto HBM, and a reset that must not be anyone's to pull.

use nhbm::uapi::*;
use nhbm::{Device, Plan, Record};

use crate::fixtures::pattern;
use crate::fixtures::{device_index, open_device, var_refused, KIB, MIB};
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Ctx, Notes, TestResult};
use crate::stress::child::{fork_child, spawn_child};
use crate::sys::{kprobe_events, tracefs_write, TRACEFS};

/// Bytes of each victim buffer.
const VICTIM: u64 = 64 * KIB;

/// Loads one buffer holding known bytes on every channel, in the owner's file.
fn load_victims(
    owner: &Device,
    info: &DeviceInfo,
) -> Result<Vec<(u32, Vec<u8>)>, crate::ktap::Fail> {
    let mut v = Vec::new();
    for ch in 0..info.nr_channels {
        let data = pattern(VICTIM, 70 + ch);
        let plan = Plan::new(0, 0).with(Record::buffer(1, VICTIM).data(data.clone()));
        let p = owner
            .plan_load(&plan.to_blob().ctx("build")?, ch)
            .ctx("victim PLAN_LOAD")?;
        v.push((p.plan_id, data));
    }
    Ok(v)
}

/// Every victim still holds its bytes.
fn victims_intact(owner: &Device, victims: &[(u32, Vec<u8>)]) -> TestResult {
    for (id, data) in victims {
        let mut back = vec![0u8; data.len()];
        owner
            .mem_read(*id, 1, 0, &mut back)
            .ctx("victim MEM_READ")?;
        ensure(&back == data, || format!("victim plan {id} changed"))?;
    }
    Ok(())
}

/// Opens the device, then gives up root: what an unprivileged tenant holds.
/// Only for a forked child: the privilege does not come back.
fn open_unprivileged() -> Result<Device, String> {
    let d = Device::open(device_index()).map_err(|e| format!("open: {e}"))?;
    // SAFETY: plain setuid call; from now on this child has no capability.
    if unsafe { libc::setuid(65534) } != 0 {
        return Err(format!("setuid: {}", std::io::Error::last_os_error()));
    }
    Ok(d)
}

/// From a second open file, every core's State Buffer is tried at every
/// MiB and at its last bytes, as an SB variable and through a pointer: no
/// window lies in HBM, every transfer is EINVAL, and the buffers of the
/// first file keep their bytes.
pub fn sbuf_windows_never_reach_hbm(notes: &mut Notes) -> TestResult {
    let owner = open_device(device_index())?;
    let info = owner.device_info().ctx("DEVICE_INFO")?;
    let victims = load_victims(&owner, &info)?;
    let other = open_device(device_index())?;
    let sbuf = info.sbuf_size;
    let mut tries = 0;
    for nc in 0..info.nr_cores {
        let mut offsets: Vec<u64> = (0..sbuf).step_by(MIB as usize).collect();
        offsets.push(sbuf - 4 * KIB);
        for off in offsets {
            let size = (sbuf - off).min(VICTIM);
            let plan = Plan::new(0, 0)
                .with(Record::sb(1, size, nc, off))
                .with(Record::ptr(2, 1, 0));
            let p = other
                .plan_load(&plan.to_blob().ctx("build")?, CHANNEL_ANY)
                .ctx(&format!("PLAN_LOAD SB core {nc} offset {off:#x}"))?;
            let pa = p.addrs[0];
            for c in 0..(info.nr_channels as usize).min(MAX_CHANNELS) {
                let (b, e) = (
                    info.channel_base[c],
                    info.channel_base[c] + info.channel_size[c],
                );
                ensure(pa + size <= b || e <= pa, || {
                    format!("SB core {nc} offset {off:#x} at {pa:#x} lies in HBM channel {c}")
                })?;
            }
            for var in [1, 2] {
                let mut buf = vec![0u8; size as usize];
                let what = format!("core {nc} offset {off:#x} var {var}");
                ensure_errno(
                    &format!("MEM_READ {what}"),
                    other.mem_read(p.plan_id, var, 0, &mut buf),
                    libc::EINVAL,
                )?;
                ensure(buf.iter().all(|&b| b == 0), || {
                    format!("MEM_READ {what} refused but filled the buffer")
                })?;
                ensure_errno(
                    &format!("MEM_WRITE {what}"),
                    other.mem_write(p.plan_id, var, 0, &vec![0xEE; size as usize]),
                    libc::EINVAL,
                )?;
                tries += 2;
            }
            other.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
        }
    }
    victims_intact(&owner, &victims)?;
    notes.add(format!(
        "{tries} transfers over {} cores refused",
        info.nr_cores
    ));
    Ok(())
}

/// RESET is for an administrator or the device's only open file; a device
/// reset takes no core map; afterwards every plan loaded before it answers
/// EIO until unloaded, and new plans work.
pub fn reset_is_not_every_tenants(notes: &mut Notes) -> TestResult {
    let owner = open_device(device_index())?;
    let info = owner.device_info().ctx("DEVICE_INFO")?;
    let victims = load_victims(&owner, &info)?;

    // An unprivileged process with its own file beside the owner's: EPERM,
    // and nothing happens to the owner's plans.
    let r = fork_child(|| {
        let d = open_unprivileged()?;
        for (t, map) in [(RESET_DEVICE, 0), (RESET_TPB, 1)] {
            match d.reset(t, map) {
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                other => return Err(format!("RESET type {t} beside another file: {other:?}")),
            }
        }
        Ok(())
    })?;
    if let Err(m) = r {
        return fail(m);
    }
    victims_intact(&owner, &victims)?;

    ensure_errno(
        "device RESET with a core map",
        owner.reset(RESET_DEVICE, 1),
        libc::EINVAL,
    )?;
    // A TPB reset leaves HBM alone.
    ensure_eq("TPB RESET", owner.reset(RESET_TPB, 1).ctx("RESET")?, 0)?;
    victims_intact(&owner, &victims)?;

    // The administrator resets the device under the owner's plans.
    ensure_eq(
        "device RESET",
        owner.reset(RESET_DEVICE, 0).ctx("RESET")?,
        0,
    )?;
    for (id, _) in &victims {
        var_refused(&owner, *id, libc::EIO, "after reset")?;
        owner.plan_unload(*id).ctx("PLAN_UNLOAD after reset")?;
    }
    let fresh = load_victims(&owner, &info)?;
    victims_intact(&owner, &fresh)?;
    drop(owner);

    // The device's only open file may reset it without privilege.
    let r = fork_child(|| {
        let d = open_unprivileged()?;
        match d.reset(RESET_DEVICE, 0) {
            Ok(0) => Ok(()),
            other => Err(format!("RESET by the only open file: {other:?}")),
        }
    })?;
    if let Err(m) = r {
        return fail(m);
    }
    notes.add("EPERM beside another file, EIO after reset, owner may reset");
    Ok(())
}

/// `Ok(())` when `r` is the errno `want`, else what it was, for a child.
fn refused(what: &str, r: std::io::Result<i32>, want: i32) -> Result<(), String> {
    match r {
        Err(e) if e.raw_os_error() == Some(want) => Ok(()),
        other => Err(format!("{what}: {other:?}, want errno {want}")),
    }
}

/// Waits (up to 10 s) until the cores other files own, seen from `d`, are
/// `taken`.
fn await_taken(d: &Device, taken: u32) -> TestResult {
    for _ in 0..1000 {
        if d.cores(0, 0).ctx("CORES")?.taken == taken {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    fail(format!("the cores other files own never became {taken:#b}"))
}

/// The second tenant, beside the first (`first_pid`, owning core 0): its
/// own core 1 is its to claim and reset, core 0 and the device are not.
fn second_tenant(first_pid: u32) -> Result<(), String> {
    let d = open_unprivileged()?;
    refused(
        "claim of the other's core",
        d.cores(0b01, 0).map(|_| 0),
        libc::EBUSY,
    )?;
    let v = d
        .cores(0b10, 0)
        .map_err(|e| format!("CORES claim 1: {e}"))?;
    if (v.owned, v.taken, v.owner_pid[0]) != (0b10, 0b01, first_pid) {
        return Err(format!(
            "after claiming core 1: {v:?}, the other is {first_pid}"
        ));
    }
    match d.reset(RESET_TPB, 0b10) {
        Ok(0) => {}
        other => return Err(format!("TPB RESET of its own core: {other:?}")),
    }
    refused(
        "TPB RESET of the other's core",
        d.reset(RESET_TPB, 0b01),
        libc::EPERM,
    )?;
    refused("TPB RESET of both", d.reset(RESET_TPB, 0b11), libc::EPERM)?;
    refused("device RESET", d.reset(RESET_DEVICE, 0), libc::EPERM)
}

/// Two unprivileged tenants, each owning one core (CORES), reset their own
/// core while both files and a third are open; the other's core is EPERM
/// to each and to root (a TPB reset of it changes nothing), a device reset
/// is EPERM to a tenant owning only one core, and each sees who owns the
/// other core. A SIGKILLed owner's core is free again.
pub fn owners_reset_their_own_cores(notes: &mut Notes) -> TestResult {
    let keeper = open_device(device_index())?;
    let info = keeper.device_info().ctx("DEVICE_INFO")?;
    let victims = load_victims(&keeper, &info)?;
    let first = spawn_child(|| {
        let d = open_unprivileged()?;
        let v = d
            .cores(0b01, 0)
            .map_err(|e| format!("CORES claim 0: {e}"))?;
        if v.owned != 0b01 {
            return Err(format!("owns {:#b} after claiming core 0", v.owned));
        }
        match d.reset(RESET_TPB, 0b01) {
            Ok(0) => {}
            other => return Err(format!("TPB RESET of its own core: {other:?}")),
        }
        // Holds its core until killed.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    })?;
    let checked = (|| -> TestResult {
        await_taken(&keeper, 0b01)?;
        let first_pid = first.pid as u32;
        let r = fork_child(move || second_tenant(first_pid))?;
        if let Err(m) = r {
            return fail(m);
        }
        ensure_errno(
            "root's TPB RESET of a tenant's core",
            keeper.reset(RESET_TPB, 0b01),
            libc::EPERM,
        )?;
        cli_shows_the_owner(first_pid)
    })();
    // SAFETY: plain kill of our own child.
    unsafe { libc::kill(first.pid, libc::SIGKILL) };
    let _ = first.wait();
    checked?;
    await_taken(&keeper, 0)?;
    victims_intact(&keeper, &victims)?;
    notes.add("own cores reset beside two other files; the other's EPERM, even to root");
    Ok(())
}

/// `nhbm cores` names `pid` as core 0's owner and no owner of core 1;
/// `nhbm reset --tpb 0x1`, which claims the core first, fails.
fn cli_shows_the_owner(pid: u32) -> TestResult {
    let dev = device_index().to_string();
    let run = |args: &[&str]| {
        std::process::Command::new("/tests/nhbm")
            .args(["-d", &dev, "--json"])
            .args(args)
            .output()
            .ctx("/tests/nhbm")
    };
    let out = run(&["cores"])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return fail(format!("nhbm cores: {e}: {text:?}")),
    };
    let owner = |c: usize| v["cores"][c]["pid"].as_u64();
    ensure(
        owner(0) == Some(u64::from(pid)) && owner(1).is_none(),
        || format!("nhbm cores: {text}, want core 0 owned by {pid}, core 1 free"),
    )?;
    let out = run(&["reset", "--tpb", "0x1"])?;
    ensure(!out.status.success(), || {
        "nhbm reset --tpb 0x1 of a core another process owns succeeded".to_string()
    })
}

/// Device-wide usage is for the administrator: an unprivileged tenant's
/// MEM_STATS shows every pool's size but none of what other tenants hold
/// (used, peak, live chunks all 0) and its own figures; root sees the
/// owner's bytes in the pools.
pub fn usage_of_others_is_for_the_administrator(notes: &mut Notes) -> TestResult {
    let owner = open_device(device_index())?;
    let p = owner
        .plan_load(
            &Plan::new(0, 0)
                .with(Record::buffer(1, MIB))
                .to_blob()
                .ctx("build")?,
            0,
        )
        .ctx("PLAN_LOAD")?;
    let root = owner.mem_stats().ctx("MEM_STATS as root")?;
    ensure(root.pools[0][0].used >= MIB, || {
        format!(
            "root sees {} bytes used, want the owner's",
            root.pools[0][0].used
        )
    })?;
    let r = fork_child(|| {
        let d = open_unprivileged()?;
        let s = d.mem_stats().map_err(|e| format!("MEM_STATS: {e}"))?;
        let pool = s.pools[0][0];
        if (pool.used, pool.peak, pool.live_chunks) != (0, 0, 0) {
            return Err(format!(
                "an unprivileged tenant sees used {} peak {} chunks {}",
                pool.used, pool.peak, pool.live_chunks
            ));
        }
        if pool.total == 0 || pool.present != 1 || s.own_plans != 0 {
            return Err(format!(
                "pool size {} present {} own plans {}",
                pool.total, pool.present, s.own_plans
            ));
        }
        Ok(())
    })?;
    if let Err(m) = r {
        return fail(m);
    }
    owner.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    notes.add("pool sizes for all, usage for root only");
    Ok(())
}

/// `CAP_SYS_ADMIN`, and the `opts` bit of a capability check that writes no
/// audit record (`CAP_OPT_NOAUDIT`, include/linux/security.h).
const CAP_SYS_ADMIN: i32 = 21;
const CAP_OPT_NOAUDIT: u32 = 1 << 1;

/// A RESET refused by the sole-opener rule leaves no audit record: a tenant
/// could make a flood of them. A kprobe on `cap_capable` records the `cap`
/// and `opts` of every `CAP_SYS_ADMIN` check while an unprivileged tenant
/// tries 1,000 RESETs beside another open file: every check it caused is
/// made with `CAP_OPT_NOAUDIT`, and there is one at least per RESET (the
/// probe saw them).
pub fn refused_resets_leave_no_audit_record(notes: &mut Notes) -> TestResult {
    const TRIES: u32 = 1000;
    let Some(events) = kprobe_events() else {
        return crate::ktap::skip("no kprobe events on this kernel or guest");
    };
    let owner = open_device(device_index())?;
    let probe = format!("{TRACEFS}/events/nhbm_audit/cap");
    // Any probe a failed run left behind goes first.
    let _ = std::fs::write(format!("{probe}/enable"), "0");
    let _ = std::fs::write(&events, "-:nhbm_audit/cap\n");
    tracefs_write(
        &events,
        "p:nhbm_audit/cap cap_capable cap=$arg3:s32 opts=$arg4:u32\n",
    )?;
    let traced = (|| -> Result<(i32, String), crate::ktap::Fail> {
        tracefs_write(
            &format!("{probe}/filter"),
            &format!("cap == {CAP_SYS_ADMIN}"),
        )?;
        tracefs_write(&format!("{TRACEFS}/trace"), "")?;
        tracefs_write(&format!("{probe}/enable"), "1")?;
        let tenant = spawn_child(|| {
            let d = open_unprivileged()?;
            for _ in 0..TRIES {
                match d.reset(RESET_DEVICE, 0) {
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
                    other => return Err(format!("RESET beside another file: {other:?}")),
                }
            }
            Ok(String::new())
        })?;
        let pid = tenant.pid;
        let r = tenant.wait();
        tracefs_write(&format!("{probe}/enable"), "0")?;
        if let Err(m) = r {
            return fail(m);
        }
        let trace = std::fs::read_to_string(format!("{TRACEFS}/trace")).ctx("trace")?;
        Ok((pid, trace))
    })();
    let _ = std::fs::write(&events, "-:nhbm_audit/cap\n");
    drop(owner);
    let (pid, traced) = traced?;
    let quiet = no_audited_checks(&traced, pid, TRIES)?;
    notes.add(format!("{quiet} quiet checks, none audited"));
    Ok(())
}

/// The number of `CAP_SYS_ADMIN` checks the tenant `pid` made in `traced`
/// (the probe's trace), when there are `tries` at least and none of them
/// is audited; the first audited ones otherwise. Other tasks' checks (the
/// test's own, as root, which some kernels audit around a fork) are not
/// the tenant's.
fn no_audited_checks(traced: &str, pid: i32, tries: u32) -> Result<usize, crate::ktap::Fail> {
    let task = format!("-{pid}");
    let checks: Vec<(&str, u32)> = traced
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|t| t.ends_with(&task))
        })
        .filter_map(|l| Some((l, l.split_once(" opts=")?.1.trim().parse().ok()?)))
        .collect();
    let audited: Vec<&str> = checks
        .iter()
        .filter(|&&(_, o)| o & CAP_OPT_NOAUDIT == 0)
        .map(|&(l, _)| l.trim())
        .collect();
    ensure(checks.len() >= tries as usize, || {
        format!(
            "the probe saw {} CAP_SYS_ADMIN checks by the tenant for {tries} RESETs",
            checks.len()
        )
    })?;
    ensure(audited.is_empty(), || {
        format!(
            "{} audited CAP_SYS_ADMIN checks by the tenant, the first: {:?}",
            audited.len(),
            &audited[..audited.len().min(3)]
        )
    })?;
    Ok(checks.len())
}
