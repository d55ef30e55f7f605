//! Fault injection through debugfs `fail_nth`: every injection point that
//! one operation passes is made to fail in turn, and each failure must be
//! clean: an errno of the injected kind, nothing left allocated, no plan id
//! handed out, no REMOTE pin left behind; then the operation works unarmed.

use std::collections::BTreeMap;
use std::io;

use nhbm::uapi::*;
use nhbm::{errno_name, Device, Plan, Record};

use crate::debugfs::DevDebugFs;
use crate::fixtures::{
    device_index, every_local_kind, one_buffer, open_device, pattern, usage, Usage, KIB,
};
use crate::ktap::{ensure, ensure_eq, skip, Ctx, Fail, Notes, TestResult};
use crate::loaded::check_loaded;
use crate::sys::errno_of;

/// What an injected failure may surface as: allocations ENOMEM, user copies
/// EFAULT, device transfers EIO.
pub const INJECTED: [i32; 3] = [libc::ENOMEM, libc::EFAULT, libc::EIO];

/// Upper bound on points tried per operation (a runaway count is a bug of
/// its own, reported rather than looped over).
const MAX_POINTS: u64 = 20_000;

fn debugfs() -> Result<DevDebugFs, Fail> {
    let d = DevDebugFs::new(device_index());
    for f in ["fail_nth", "fail_points"] {
        if !d.has(f) {
            return skip("debugfs file missing");
        }
    }
    Ok(d)
}

/// Tally of one sweep.
#[derive(Default)]
struct Sweep {
    points: u64,
    failed: BTreeMap<i32, u64>,
    absorbed: u64,
    absorbed_at: Vec<u64>,
    not_reached: u64,
}

impl Sweep {
    fn summary(&self, what: &str) -> String {
        let by: Vec<String> = self
            .failed
            .iter()
            .map(|(&e, n)| format!("{}={n}", errno_name(e)))
            .collect();
        let at: Vec<String> = self.absorbed_at.iter().map(|n| n.to_string()).collect();
        let at = if at.is_empty() {
            String::new()
        } else {
            format!(" at point {}", at.join(","))
        };
        format!(
            "{what}: {} injection points; failed cleanly: {} ({}); absorbed (succeeded anyway): {}{at}; not reached: {}",
            self.points,
            self.failed.values().sum::<u64>(),
            if by.is_empty() {
                "-".into()
            } else {
                by.join(" ")
            },
            self.absorbed,
            self.not_reached
        )
    }
}

/// Points `op` passes when unarmed (the most of `tries` runs; 0 when it
/// passes none).
fn count_points(
    dbg: &DevDebugFs,
    tries: usize,
    mut op: impl FnMut() -> io::Result<()>,
) -> Result<u64, Fail> {
    dbg.arm(0).ctx("disarm fail_nth")?;
    let mut most = 0;
    for _ in 0..tries {
        let before = dbg.points().ctx("fail_points")?;
        op().ctx("the operation, unarmed")?;
        let after = dbg.points().ctx("fail_points")?;
        most = most.max(after.saturating_sub(before));
    }
    ensure(most <= MAX_POINTS, || {
        format!("the operation passes {most} injection points")
    })?;
    Ok(most)
}

/// Arms point `n`, runs `op`; returns its result and whether the fault fired.
fn armed<T>(
    dbg: &DevDebugFs,
    n: u64,
    op: impl FnOnce() -> io::Result<T>,
) -> Result<(io::Result<T>, bool), Fail> {
    dbg.arm(n).ctx("arm fail_nth")?;
    let r = op();
    let left = dbg.remaining().ctx("read fail_nth")?;
    if left != 0 {
        dbg.arm(0).ctx("disarm fail_nth")?;
    }
    Ok((r, left == 0))
}

fn check_usage(d: &Device, want: &Usage, what: &str) -> TestResult {
    let u = usage(d)?;
    ensure(u == *want, || {
        format!(
            "{what}: usage used {:#x} chunks {} own {} plans {:#x} bytes, want used {:#x} chunks {} own {} plans {:#x} bytes",
            u.used, u.chunks, u.own_plans, u.own_bytes, want.used, want.chunks, want.own_plans, want.own_bytes
        )
    })
}

/// Classifies one armed run: a failure must be of the injected kinds and
/// fired; a success after a fired fault was absorbed.
fn tally<T>(s: &mut Sweep, n: u64, r: &io::Result<T>, fired: bool) -> TestResult {
    match r {
        Err(e) => {
            let e = errno_of(e);
            ensure(fired, || {
                format!(
                    "point {n}: failed with {} though the armed fault never fired",
                    errno_name(e)
                )
            })?;
            ensure(INJECTED.contains(&e), || {
                format!(
                    "point {n}: the injected fault surfaced as {}",
                    errno_name(e)
                )
            })?;
            *s.failed.entry(e).or_default() += 1;
        }
        Ok(_) if fired => {
            s.absorbed += 1;
            s.absorbed_at.push(n);
        }
        Ok(_) => s.not_reached += 1,
    }
    Ok(())
}

/// The representative plan: every kind (REMOTE into `anchor`), payloads
/// spanning several 64 KiB transfer pieces, lists and a pointer table.
fn representative(anchor: u32) -> Plan {
    every_local_kind(200 * KIB).with(Record::remote(16, 0, anchor, 1).name("remote"))
}

/// Every injection point of one PLAN_LOAD fails it cleanly.
pub fn fault_injection_plan_load_every_point(notes: &mut Notes) -> TestResult {
    let dbg = debugfs()?;
    let d = open_device(device_index())?;
    let info = d.device_info().ctx("DEVICE_INFO")?;
    dbg.arm(0).ctx("disarm fail_nth")?;
    let anchor = d
        .plan_load(&one_buffer(1, 8 * KIB).to_blob().ctx("build")?, CHANNEL_ANY)
        .ctx("PLAN_LOAD anchor")?;
    let plan = representative(anchor.plan_id);
    let blob = plan.to_blob().ctx("build")?;
    let raw = plan.to_raw().ctx("build")?;
    let base = usage(&d)?;
    let mut loads = 1u64;

    let k = count_points(&dbg, 2, || {
        loads += 1;
        let p = d.plan_load(&blob, CHANNEL_ANY)?;
        d.plan_unload(p.plan_id)
    })?;
    check_usage(&d, &base, "after the unarmed loads")?;
    ensure(k > 0, || "PLAN_LOAD passes no injection point".into())?;

    let mut s = Sweep {
        points: k,
        ..Default::default()
    };
    for n in 1..=k + 2 {
        loads += 1;
        let (r, fired) = armed(&dbg, n, || d.plan_load(&blob, CHANNEL_ANY))?;
        tally(&mut s, n, &r, fired)?;
        if let Ok(p) = &r {
            // Absorbed or not reached: the plan must be whole.
            check_loaded(&d, &info, &raw, p, loads + 1)
                .map_err(|e| Fail::Fail(format!("point {n}: loaded plan: {e}")))?;
            // Its payloads, tables and zeros are all there.
            crate::stress::isolation::check_fresh(&d, &plan, p, &format!("point {n}"))?;
            d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
        }
        check_usage(&d, &base, &format!("after injected point {n} of {k}"))?;
    }
    ensure(!s.failed.is_empty(), || {
        format!("none of {k} armed points failed a load")
    })?;

    // Unarmed, it works; no pin on the anchor was left by a failed load.
    dbg.arm(0).ctx("disarm")?;
    let p = d.plan_load(&blob, CHANNEL_ANY).ctx("unarmed PLAN_LOAD")?;
    check_loaded(&d, &info, &raw, &p, loads + 2).map_err(Fail::Fail)?;
    let w = pattern(200 * KIB, 3);
    let mut back = vec![0u8; w.len()];
    d.mem_read(p.plan_id, 3, 0, &mut back).ctx("MEM_READ")?;
    ensure(back == w, || "the unarmed load's payload differs".into())?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(anchor.plan_id)
        .ctx("PLAN_UNLOAD of the anchor (a REMOTE pin left by a failed load?)")?;
    notes.add(s.summary("PLAN_LOAD"));
    Ok(())
}

/// Every injection point of MEM_WRITE, MEM_READ and RESOLVE_BATCH fails
/// the call cleanly, and unarmed they work.
pub fn fault_injection_transfers_every_point(notes: &mut Notes) -> TestResult {
    let dbg = debugfs()?;
    let d = open_device(device_index())?;
    dbg.arm(0).ctx("disarm fail_nth")?;
    let size = 200 * KIB;
    let p = d
        .plan_load(
            &Plan::new(0, 0)
                .with(Record::buffer(1, size))
                .with(Record::buffer(2, 4 * KIB))
                .to_blob()
                .ctx("build")?,
            CHANNEL_ANY,
        )
        .ctx("PLAN_LOAD")?;
    let base = usage(&d)?;
    let data = pattern(size, 9);
    sweep_mem_write(&dbg, &d, p.plan_id, &data, &base, notes)?;
    sweep_mem_read(&dbg, &d, p.plan_id, &data, notes)?;
    sweep_resolve_batch(&dbg, &d, p.plan_id, notes)?;
    check_usage(&d, &base, "after the transfer sweeps")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    Ok(())
}

/// MEM_WRITE of `data` to var 1 of plan `id`: every injection point fails
/// it cleanly with usage left at `base`, and unarmed it writes `data`.
fn sweep_mem_write(
    dbg: &DevDebugFs,
    d: &Device,
    id: u32,
    data: &[u8],
    base: &Usage,
    notes: &mut Notes,
) -> TestResult {
    let size = data.len() as u64;
    let k = count_points(dbg, 2, || d.mem_write(id, 1, 0, data))?;
    ensure(k > 0, || "MEM_WRITE passes no injection point".into())?;
    let mut s = Sweep {
        points: k,
        ..Default::default()
    };
    for n in 1..=k + 1 {
        let (r, fired) = armed(dbg, n, || d.mem_write(id, 1, 0, &pattern(size, n as u32)))?;
        tally(&mut s, n, &r, fired)?;
        check_usage(d, base, &format!("MEM_WRITE point {n}"))?;
    }
    notes.add(s.summary("MEM_WRITE"));
    dbg.arm(0).ctx("disarm")?;
    d.mem_write(id, 1, 0, data).ctx("unarmed MEM_WRITE")?;
    Ok(())
}

/// MEM_READ of var 1 of plan `id`, which holds `data`: every injection
/// point fails it cleanly (a read that succeeds has the right bytes; the
/// device's bytes are not changed by a failed read), and unarmed it reads
/// `data`.
fn sweep_mem_read(
    dbg: &DevDebugFs,
    d: &Device,
    id: u32,
    data: &[u8],
    notes: &mut Notes,
) -> TestResult {
    let size = data.len();
    let mut back = vec![0u8; size];
    let k = count_points(dbg, 2, || d.mem_read(id, 1, 0, &mut back))?;
    let mut s = Sweep {
        points: k,
        ..Default::default()
    };
    for n in 1..=k + 1 {
        let mut buf = vec![0u8; size];
        let (r, fired) = armed(dbg, n, || d.mem_read(id, 1, 0, &mut buf))?;
        tally(&mut s, n, &r, fired)?;
        if r.is_ok() {
            ensure(buf == data, || format!("MEM_READ point {n}: wrong bytes"))?;
        }
    }
    notes.add(s.summary("MEM_READ"));
    dbg.arm(0).ctx("disarm")?;
    let mut back = vec![0u8; size];
    d.mem_read(id, 1, 0, &mut back).ctx("unarmed MEM_READ")?;
    ensure(back == data, || {
        "unarmed MEM_READ: the bytes written do not read back".into()
    })
}

/// 200 queries of vars 1 and 2, 16 bytes apart: a RESOLVE_BATCH of several
/// user-copy pieces.
fn batch_queries() -> Vec<ResolveQuery> {
    (0..200)
        .map(|i| ResolveQuery {
            var_id: 1 + (i % 2),
            offset: (i as u64) * 16,
            size: 8,
            ..Default::default()
        })
        .collect()
}

/// RESOLVE_BATCH of [`batch_queries`] on plan `id`: every injection point
/// fails it cleanly; leaves fail_nth disarmed.
fn sweep_resolve_batch(dbg: &DevDebugFs, d: &Device, id: u32, notes: &mut Notes) -> TestResult {
    let mut qs = batch_queries();
    let k = count_points(dbg, 1, || d.resolve_batch(id, &mut qs))?;
    let mut s = Sweep {
        points: k,
        ..Default::default()
    };
    for n in 1..=k + 1 {
        let mut q = batch_queries();
        let (r, fired) = armed(dbg, n, || d.resolve_batch(id, &mut q))?;
        tally(&mut s, n, &r, fired)?;
    }
    notes.add(s.summary("RESOLVE_BATCH"));
    dbg.arm(0).ctx("disarm")?;
    Ok(())
}

/// A file holding three plans: a buffer (`blob2`), a REMOTE into it, and
/// `blob`; returns the file and the id of the last.
fn open_with_plans(blob: &[u8], blob2: &[u8]) -> Result<(Device, u32), Fail> {
    let d = open_device(device_index())?;
    let a = d.plan_load(blob2, CHANNEL_ANY).ctx("PLAN_LOAD")?;
    let r = Plan::new(0, 0).with(Record::remote(1, 0, a.plan_id, 1));
    d.plan_load(&r.to_blob().ctx("build")?, CHANNEL_ANY)
        .ctx("PLAN_LOAD remote")?;
    let p = d.plan_load(blob, CHANNEL_ANY).ctx("PLAN_LOAD")?;
    Ok((d, p.plan_id))
}

/// Closes a file of [`open_with_plans`] with each injection point armed in
/// turn: the device's usage seen by `watch` is back at `before` every time.
/// Returns the points a close passes and how many armed faults fired.
fn sweep_close(
    dbg: &DevDebugFs,
    watch: &Device,
    before: &Usage,
    blob: &[u8],
    blob2: &[u8],
) -> Result<(u64, u64), Fail> {
    let k_close = {
        let (d, _) = open_with_plans(blob, blob2)?;
        let b = dbg.points().ctx("fail_points")?;
        drop(d);
        dbg.points().ctx("fail_points")? - b
    };
    let mut fired_close = 0;
    for n in 1..=k_close.max(1) + 1 {
        let (d, _) = open_with_plans(blob, blob2)?;
        let (_, fired) = armed(dbg, n, || -> io::Result<()> {
            drop(d);
            Ok(())
        })?;
        fired_close += u64::from(fired);
        let u = usage(watch)?;
        ensure_eq(
            &format!("device usage after close with point {n} armed"),
            u.device(),
            before.device(),
        )?;
    }
    Ok((k_close, fired_close))
}

/// Unloads `blob` from a file of [`open_with_plans`] with each injection
/// point armed in turn: a refused unload leaves the plan whole, and it
/// unloads unarmed. Closes the file; returns the tally.
fn sweep_unload(dbg: &DevDebugFs, blob: &[u8], blob2: &[u8]) -> Result<Sweep, Fail> {
    let (d, id) = open_with_plans(blob, blob2)?;
    let with = usage(&d)?;
    let k_unload = {
        let b = dbg.points().ctx("fail_points")?;
        d.plan_unload(id).ctx("PLAN_UNLOAD")?;
        dbg.points().ctx("fail_points")? - b
    };
    let mut s = Sweep {
        points: k_unload,
        ..Default::default()
    };
    for n in 1..=k_unload.max(1) + 1 {
        let p = d.plan_load(blob, CHANNEL_ANY).ctx("PLAN_LOAD")?;
        let after_load = usage(&d)?;
        ensure_eq(
            "usage of the reloaded plan",
            after_load.device(),
            with.device(),
        )?;
        let (r, fired) = armed(dbg, n, || d.plan_unload(p.plan_id))?;
        tally(&mut s, n, &r, fired)?;
        if r.is_err() {
            // Refused: the plan is still whole, and unloads unarmed.
            check_usage(&d, &after_load, &format!("unload refused at point {n}"))?;
            d.resolve(p.plan_id, 1, 0, 0)
                .ctx("RESOLVE after a refused unload")?;
            d.plan_unload(p.plan_id).ctx("unarmed PLAN_UNLOAD")?;
        }
    }
    drop(d);
    Ok(s)
}

/// Faults while a file with plans is closed (or a plan unloaded) never
/// keep memory: the release path frees everything whatever fails.
pub fn fault_injection_unload_and_close_every_point(notes: &mut Notes) -> TestResult {
    let dbg = debugfs()?;
    let watch = open_device(device_index())?;
    dbg.arm(0).ctx("disarm fail_nth")?;
    let before = usage(&watch)?;
    let blob = every_local_kind(16 * KIB).to_blob().ctx("build")?;
    let blob2 = one_buffer(1, 4 * KIB).to_blob().ctx("build")?;

    let (k_close, fired_close) = sweep_close(&dbg, &watch, &before, &blob, &blob2)?;
    let s = sweep_unload(&dbg, &blob, &blob2)?;
    let k_unload = s.points;
    let u = usage(&watch)?;
    ensure_eq("device usage at the end", u.device(), before.device())?;
    notes.add(format!(
        "close: {k_close} injection points, {fired_close} fired, memory returned every time"
    ));
    notes.add(s.summary("PLAN_UNLOAD"));
    if k_close == 0 && k_unload == 0 {
        notes.add("unload and close pass no injection point");
    }
    Ok(())
}
