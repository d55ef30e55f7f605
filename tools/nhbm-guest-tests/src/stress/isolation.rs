//! Isolation and exposure: node permissions, plans private to their open
//! file, no kernel pointers or stale kernel bytes in anything returned, and
//! no older plan's bytes in memory handed to a new plan.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use nhbm::uapi::*;
use nhbm::{Backing, Device, LoadedPlan, Plan, Record};

use crate::debugfs::{kernel_pointers_in, looks_like_kernel_pointer, DevDebugFs};
use crate::fixtures::{device_index, every_local_kind, open_device, pattern, var_refused, KIB};
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Ctx, Fail, Notes, TestResult};
use crate::loaded::check_loaded;
use crate::stress::child::fork_child;
use zerocopy::FromBytes;

pub fn device_nodes_are_mode_0660(notes: &mut Notes) -> TestResult {
    let mut seen = 0;
    for i in [device_index(), device_index() + 1] {
        let path = nhbm::device_path(i);
        let Ok(m) = std::fs::metadata(&path) else {
            continue;
        };
        ensure(m.file_type().is_char_device(), || {
            format!("{} is not a character device", path.display())
        })?;
        ensure_eq(
            &format!("mode of {}", path.display()),
            m.permissions().mode() & 0o777,
            0o660,
        )?;
        seen += 1;
    }
    ensure(seen > 0, || "no device node".into())?;
    notes.add(format!("{seen} nodes checked"));
    Ok(())
}

/// Every way another open file (same process, another process, another
/// device) could reach a plan gets ENOENT, and the plan is intact after.
pub fn other_files_cannot_reach_a_plan(notes: &mut Notes) -> TestResult {
    let owner = open_device(device_index())?;
    let data = pattern(8 * KIB, 11);
    let plan = Plan::new(0, 0)
        .with(Record::buffer(1, 8 * KIB).data(data.clone()))
        .with(Record::buffer(2, 4 * KIB));
    let blob = plan.to_blob().ctx("build")?;
    let p = owner.plan_load(&blob, CHANNEL_ANY).ctx("PLAN_LOAD")?;
    let id = p.plan_id;

    probe_foreign_file(&open_device(device_index())?, id, "second file")?;
    // Same plan id on the second device: a different namespace.
    if let Ok(other_dev) = Device::open(device_index() + 1) {
        probe_foreign_file(&other_dev, id, "file of the other device")?;
    }
    // Another process: its own file, and the inherited one is the owner's.
    let r = fork_child(|| {
        let d = Device::open(device_index()).map_err(|e| format!("open: {e}"))?;
        probe_foreign_file(&d, id, "file of another process").map_err(Fail::into_message)
    })?;
    if let Err(m) = r {
        return fail(m);
    }

    // The owner's plan is untouched.
    let mut back = vec![0u8; data.len()];
    owner.mem_read(id, 1, 0, &mut back).ctx("owner MEM_READ")?;
    ensure(back == data, || "the owner's bytes changed".into())?;
    ensure_eq(
        "owner RESOLVE",
        owner.resolve(id, 1, 0, 0).ctx("RESOLVE")?,
        p.addrs[0],
    )?;
    owner.plan_unload(id).ctx("owner PLAN_UNLOAD")?;
    notes.add("second file, other device, other process: ENOENT for all 7 ways in");
    Ok(())
}

/// Every way file `d` (described by `who`) could reach plan `id` of
/// another file gets ENOENT: its vars, PLAN_UNLOAD, a REMOTE into it; and
/// `d` owns nothing.
fn probe_foreign_file(d: &Device, id: u32, who: &str) -> TestResult {
    var_refused(d, id, libc::ENOENT, who)?;
    ensure_errno(
        &format!("{who}: PLAN_UNLOAD"),
        d.plan_unload(id),
        libc::ENOENT,
    )?;
    // A REMOTE into the other file's plan.
    let remote = Plan::new(0, 0).with(Record::remote(1, 0, id, 1));
    let b = remote.to_blob().ctx("build")?;
    ensure_errno(
        &format!("{who}: PLAN_LOAD of a REMOTE into it"),
        d.plan_load(&b, CHANNEL_ANY),
        libc::ENOENT,
    )?;
    let s = d.mem_stats().ctx("MEM_STATS")?;
    ensure_eq(
        &format!("{who}: own_plans"),
        (s.own_plans, s.own_bytes, s.own_chunks),
        (0, 0, 0),
    )
}

fn check_no_pointer(what: &str, v: u64) -> TestResult {
    ensure(!looks_like_kernel_pointer(v), || {
        format!("{what} = {v:#x} looks like a kernel pointer")
    })
}

/// Nothing handed to userspace looks like a kernel pointer or holds bytes
/// the kernel did not mean to write.
pub fn no_kernel_pointers_reach_userspace(notes: &mut Notes) -> TestResult {
    let d = open_device(device_index())?;
    let info = poisoned_device_info(&d)?;
    check_poisoned_mem_stats(&d)?;
    let plan = every_local_kind(16 * KIB);
    let (plan_id, addrs) = poisoned_plan_load(&d, &info, &plan)?;
    check_resolve_batch_answers_only(&d, &plan, plan_id, &addrs)?;
    // RESET's status word.
    let st = d.reset(RESET_DEVICE, 0).ctx("RESET")?;
    ensure_eq("RESET status", st, 0)?;
    let scanned = debugfs_without_pointers()?;
    d.plan_unload(plan_id).ctx("PLAN_UNLOAD")?;
    notes.add(format!(
        "DEVICE_INFO, MEM_STATS, PLAN_LOAD, RESOLVE_BATCH, RESET checked; debugfs scanned: {}",
        if scanned.is_empty() {
            "none (files missing)".to_string()
        } else {
            scanned.join(" ")
        }
    ));
    Ok(())
}

/// DEVICE_INFO over a poisoned buffer: every field written, none a pointer.
fn poisoned_device_info(d: &Device) -> Result<DeviceInfo, Fail> {
    let mut raw = [0xAAu8; size_of::<DeviceInfo>()];
    // SAFETY: writable bytes of the size DEVICE_INFO writes.
    unsafe { d.ioctl_raw(IOC_DEVICE_INFO, raw.as_mut_ptr() as *mut libc::c_void) }
        .ctx("DEVICE_INFO")?;
    let info = DeviceInfo::read_from_bytes(&raw).expect("a DeviceInfo");
    for c in info.nr_channels as usize..MAX_CHANNELS {
        ensure_eq(
            &format!("channel_base/size[{c}] of an absent channel"),
            (info.channel_base[c], info.channel_size[c]),
            (0, 0),
        )?;
    }
    for (what, v) in [
        ("sbuf_size", info.sbuf_size),
        ("min_alloc_size", info.min_alloc_size),
        ("bar0_size", info.bar0_size),
        ("bar4_size", info.bar4_size),
    ] {
        check_no_pointer(what, v)?;
    }
    ensure(info.abi_version == ABI_VERSION, || {
        format!("abi_version {:#x}", info.abi_version)
    })?;
    Ok(info)
}

/// MEM_STATS over a poisoned buffer: absent pools all zero, present ones
/// no pointers.
fn check_poisoned_mem_stats(d: &Device) -> TestResult {
    let mut raw = [0xAAu8; size_of::<MemStats>()];
    // SAFETY: writable bytes of the size MEM_STATS writes.
    unsafe { d.ioctl_raw(IOC_MEM_STATS, raw.as_mut_ptr() as *mut libc::c_void) }
        .ctx("MEM_STATS")?;
    let s = MemStats::read_from_bytes(&raw).expect("a MemStats");
    for (c, regions) in s.pools.iter().enumerate() {
        for (r, p) in regions.iter().enumerate() {
            if p.present == 0 {
                ensure_eq(&format!("absent pool [{c}][{r}]"), *p, PoolStats::default())?;
            } else {
                for v in [p.total, p.used, p.peak] {
                    check_no_pointer(&format!("pool [{c}][{r}]"), v)?;
                }
            }
        }
    }
    Ok(())
}

/// PLAN_LOAD of `plan` over poisoned outputs: a small plan id, addresses in
/// HBM, rsvd written as zero. Returns the plan id and the addresses.
fn poisoned_plan_load(d: &Device, info: &DeviceInfo, plan: &Plan) -> Result<(u32, Vec<u64>), Fail> {
    let blob = plan.to_blob().ctx("build")?;
    let mut addrs = vec![0xAAAA_AAAA_AAAA_AAAAu64; plan.records.len()];
    let mut arg = PlanLoad {
        blob: blob.as_ptr() as u64,
        blob_len: blob.len() as u64,
        addrs: addrs.as_mut_ptr() as u64,
        channel: CHANNEL_ANY,
        plan_id: 0xAAAA_AAAA,
        local_scratchpad_pa: 0xAAAA_AAAA_AAAA_AAAA,
        shared_scratchpad_pa: 0xAAAA_AAAA_AAAA_AAAA,
        bytes_allocated: 0xAAAA_AAAA_AAAA_AAAA,
        ..Default::default()
    };
    // SAFETY: blob readable for blob_len, addrs writable for nmem u64.
    unsafe { d.plan_load_raw(&mut arg) }.ctx("PLAN_LOAD")?;
    ensure(arg.plan_id >= 1 && arg.plan_id <= 16, || {
        format!("first plan id of a fresh file is {:#x}", arg.plan_id)
    })?;
    ensure_eq("PLAN_LOAD rsvd after", (arg.flags, arg.rsvd), (0, 0))?;
    let loaded = LoadedPlan {
        plan_id: arg.plan_id,
        local_scratchpad_pa: arg.local_scratchpad_pa,
        shared_scratchpad_pa: arg.shared_scratchpad_pa,
        bytes_allocated: arg.bytes_allocated,
        addrs: addrs.clone(),
    };
    let rawp = plan.to_raw().ctx("build")?;
    check_loaded(d, info, &rawp, &loaded, 16).map_err(Fail::Fail)?;
    ensure(
        arg.bytes_allocated > 0 && arg.bytes_allocated < info.channel_size[0],
        || format!("bytes_allocated {:#x}", arg.bytes_allocated),
    )?;
    Ok((arg.plan_id, addrs))
}

/// RESOLVE_BATCH on plan `plan_id` (`plan` loaded at `addrs`) answers only
/// addr and status; the rest stays as sent.
fn check_resolve_batch_answers_only(
    d: &Device,
    plan: &Plan,
    plan_id: u32,
    addrs: &[u64],
) -> TestResult {
    let mut qs: Vec<ResolveQuery> = plan
        .records
        .iter()
        .map(|r| ResolveQuery {
            var_id: r.var_id,
            status: 0x5555_5555,
            offset: 0,
            size: 1,
            addr: 0xAAAA_AAAA_AAAA_AAAA,
        })
        .collect();
    qs.push(ResolveQuery {
        var_id: 999,
        status: 0,
        offset: 0,
        size: 1,
        addr: 0,
    });
    d.resolve_batch(plan_id, &mut qs).ctx("RESOLVE_BATCH")?;
    for (k, q) in qs.iter().enumerate() {
        if k < plan.records.len() {
            ensure_eq(&format!("query {k} status"), q.status, 0)?;
            ensure_eq(&format!("query {k} addr"), q.addr, addrs[k])?;
            ensure_eq(
                &format!("query {k} var/offset/size"),
                (q.var_id, q.offset, q.size),
                (plan.records[k].var_id, 0, 1),
            )?;
        } else {
            ensure_eq("unknown var status", q.status, -libc::ENOENT)?;
            ensure(q.addr == PA_UNSTAGED || q.addr == 0, || {
                format!("unknown var addr {:#x}", q.addr)
            })?;
        }
    }
    Ok(())
}

/// debugfs telemetry: readable by root only; still no raw pointers.
/// Returns the files there were to scan.
fn debugfs_without_pointers() -> Result<Vec<&'static str>, Fail> {
    let dbg = DevDebugFs::new(device_index());
    let mut scanned = Vec::new();
    for f in ["pools", "plans", "chunks", "kmem"] {
        if let Ok(text) = dbg.read_text(f) {
            let ptrs = kernel_pointers_in(&text);
            ensure(ptrs.is_empty(), || {
                format!("debugfs {f} shows kernel pointers: {}", ptrs.join(" "))
            })?;
            scanned.push(f);
        }
    }
    Ok(scanned)
}

/// The plan whose memory the zero check writes over: every allocating kind,
/// lists, and windows covering both scratchpads whole.
fn scrub_plan() -> Plan {
    every_local_kind(64 * KIB)
        .with(Record::virtual_tmp_buf(20, 64 * KIB, Backing::Local, 0))
        .with(Record::virtual_tmp_buf(21, 16 * KIB, Backing::Shared, 0))
}

/// Vars of [`scrub_plan`] backed by HBM of the plan's own (not SB, not
/// aliases).
fn owned_vars(plan: &Plan) -> Vec<(u32, u64)> {
    plan.records
        .iter()
        .filter(|r| {
            !matches!(
                r.kind,
                nhbm::Kind::Sb { .. } | nhbm::Kind::Ptr { .. } | nhbm::Kind::Remote { .. }
            )
        })
        .map(|r| (r.var_id, r.size))
        .collect()
}

/// Writes 0xA5.. over every var of `p` (whole scratchpads included).
fn dirty(d: &Device, plan: &Plan, p: &LoadedPlan) -> TestResult {
    for (v, size) in owned_vars(plan) {
        d.mem_write(p.plan_id, v, 0, &pattern(size, 0xA5 ^ v))
            .ctx(&format!("MEM_WRITE var {v}"))?;
    }
    Ok(())
}

/// What a fresh load of [`scrub_plan`] must read: payloads, list tables,
/// zeros everywhere else.
pub(crate) fn check_fresh(d: &Device, plan: &Plan, p: &LoadedPlan, who: &str) -> Result<u64, Fail> {
    let pa: std::collections::HashMap<u32, u64> = plan
        .records
        .iter()
        .zip(&p.addrs)
        .map(|(r, &a)| (r.var_id, a))
        .collect();
    let mut checked = 0;
    for r in &plan.records {
        let mut want = match &r.kind {
            nhbm::Kind::List { ids } | nhbm::Kind::PtrTable { ids } => {
                ids.iter().flat_map(|i| pa[i].to_le_bytes()).collect()
            }
            nhbm::Kind::Sb { .. } | nhbm::Kind::Ptr { .. } | nhbm::Kind::Remote { .. } => continue,
            _ => r.data.clone(),
        };
        want.resize(r.size as usize, 0);
        let mut got = vec![0xEEu8; r.size as usize];
        d.mem_read(p.plan_id, r.var_id, 0, &mut got)
            .ctx(&format!("{who}: MEM_READ var {}", r.var_id))?;
        if let Some(k) = got.iter().zip(&want).position(|(a, b)| a != b) {
            return fail(format!(
                "{who}: var {} byte {k:#x} reads {:#04x}, want {:#04x}: an older plan's bytes",
                r.var_id, got[k], want[k]
            ));
        }
        checked += r.size;
    }
    Ok(checked)
}

/// The HBM spans (address, size) of the owned vars of `plan` as loaded in
/// `p`.
fn owned_spans(plan: &Plan, p: &LoadedPlan) -> Vec<(u64, u64)> {
    owned_vars(plan)
        .iter()
        .map(|&(v, s)| {
            let i = plan.records.iter().position(|r| r.var_id == v).unwrap();
            (p.addrs[i], s)
        })
        .collect()
}

/// Bytes where the spans of `a` and those of `b` overlap.
fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let mut n = 0;
    for &(x, xs) in a {
        for &(y, ys) in b {
            let lo = x.max(y);
            let hi = (x + xs).min(y + ys);
            n += hi.saturating_sub(lo);
        }
    }
    n
}

/// Memory handed to a new plan never shows an older plan's bytes: after an
/// unload, after a close, and after another process wrote there and exited.
pub fn new_plans_never_see_old_bytes(notes: &mut Notes) -> TestResult {
    let plan = scrub_plan();
    let blob = plan.to_blob().ctx("build")?;
    let mut overlap_total = 0u64;
    let mut bytes = 0;

    // 1. Unload, then load again in the same file.
    {
        let d = open_device(device_index())?;
        let a = d.plan_load(&blob, 0).ctx("PLAN_LOAD a")?;
        dirty(&d, &plan, &a)?;
        d.plan_unload(a.plan_id).ctx("PLAN_UNLOAD a")?;
        let b = d.plan_load(&blob, 0).ctx("PLAN_LOAD b")?;
        bytes += check_fresh(&d, &plan, &b, "after unload")?;
        overlap_total += overlap(&owned_spans(&plan, &a), &owned_spans(&plan, &b));
    }
    // 2. Close a file with its plan loaded, load from another file.
    let first = {
        let d = open_device(device_index())?;
        let a = d.plan_load(&blob, 0).ctx("PLAN_LOAD a")?;
        dirty(&d, &plan, &a)?;
        a
    };
    {
        let d = open_device(device_index())?;
        let b = d.plan_load(&blob, 0).ctx("PLAN_LOAD b")?;
        bytes += check_fresh(&d, &plan, &b, "after close")?;
        overlap_total += overlap(&owned_spans(&plan, &first), &owned_spans(&plan, &b));
    }
    // 3. Another process writes and exits without unloading.
    let blob2 = blob.clone();
    let plan2 = plan.clone();
    let r = fork_child(move || {
        let d = Device::open(device_index()).map_err(|e| format!("open: {e}"))?;
        let a = d
            .plan_load(&blob2, 0)
            .map_err(|e| format!("PLAN_LOAD: {e}"))?;
        dirty(&d, &plan2, &a).map_err(Fail::into_message)
    })?;
    if let Err(m) = r {
        return fail(format!("child: {m}"));
    }
    {
        let d = open_device(device_index())?;
        let b = d.plan_load(&blob, 0).ctx("PLAN_LOAD b")?;
        bytes += check_fresh(&d, &plan, &b, "after another process")?;
    }
    ensure(overlap_total > 0, || {
        "the new plans never reused the old plans' memory: nothing was tested".into()
    })?;
    notes.add(format!(
        "{bytes} bytes read back as payload, table or zero; {overlap_total} of them reused from a dirtied plan"
    ));
    Ok(())
}
