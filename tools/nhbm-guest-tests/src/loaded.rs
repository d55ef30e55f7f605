//! The checks every plan the kernel loaded must pass, whatever loaded it.

use std::collections::HashMap;

use nhbm::uapi::*;
use nhbm::{Device, LoadedPlan, RawPlan};

use crate::debugfs::looks_like_kernel_pointer;
use crate::fixtures::{in_hbm, meets_hbm};

/// Checks what PLAN_LOAD returned for `raw` (a blob the kernel accepted):
/// a small plan id, one address per record, each inside the HBM channels
/// (State Buffer windows, and what points at them, entirely outside) and
/// none like a kernel pointer, every record resolving to its address, and
/// the scratchpads present exactly when asked for. `max_id` bounds the plan
/// id (loads attempted on the file so far). Returns what is wrong.
pub fn check_loaded(
    d: &Device,
    info: &DeviceInfo,
    raw: &RawPlan,
    p: &LoadedPlan,
    max_id: u64,
) -> Result<(), String> {
    check_plan_fields(info, raw, p, max_id)?;
    let by_id: HashMap<u32, usize> = raw
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| (r.var_id, i))
        .collect();
    // Large plans: every record's address, a sample of the resolves.
    let stride = raw.records.len().div_ceil(512).max(1);
    for (i, (r, &pa)) in raw.records.iter().zip(&p.addrs).enumerate() {
        check_placed(info, raw, &by_id, i, pa)?;
        if i % stride != 0 {
            continue;
        }
        check_resolves(d, p, &by_id, r, pa)?;
    }
    Ok(())
}

/// Checks the plan-wide answers of PLAN_LOAD: the plan id within
/// 1..=`max_id`, one address per record, the scratchpads present exactly
/// when asked for and inside HBM, and `bytes_allocated` no kernel pointer.
fn check_plan_fields(
    info: &DeviceInfo,
    raw: &RawPlan,
    p: &LoadedPlan,
    max_id: u64,
) -> Result<(), String> {
    if p.plan_id == 0 || u64::from(p.plan_id) > max_id {
        return Err(format!(
            "plan id {:#x} is not in 1..={max_id} (the loads so far)",
            p.plan_id
        ));
    }
    if p.addrs.len() != raw.records.len() {
        return Err(format!(
            "{} addresses for {} records",
            p.addrs.len(),
            raw.records.len()
        ));
    }
    for (what, pa, size) in [
        (
            "local scratchpad",
            p.local_scratchpad_pa,
            raw.header.local_scratchpad_size,
        ),
        (
            "shared scratchpad",
            p.shared_scratchpad_pa,
            raw.header.shared_scratchpad_size,
        ),
    ] {
        if size == 0 && pa != PA_UNSTAGED {
            return Err(format!("{what} of size 0 placed at {pa:#x}"));
        }
        if size != 0 && !in_hbm(info, pa, size) {
            return Err(format!("{what} at {pa:#x} +{size:#x} is outside HBM"));
        }
    }
    if looks_like_kernel_pointer(p.bytes_allocated) {
        return Err(format!("bytes_allocated {:#x}", p.bytes_allocated));
    }
    Ok(())
}

/// Whether record `i` of `raw` is a State Buffer window, itself or through
/// pointers (`by_id` maps var ids to records; `None`: a REMOTE, whose
/// target the blob does not show).
fn in_sbuf(raw: &RawPlan, by_id: &HashMap<u32, usize>, mut i: usize) -> Option<bool> {
    for _ in 0..=raw.records.len() {
        match raw.records[i].mr_type {
            MR_SB => return Some(true),
            MR_REMOTE => return None,
            MR_PTR => i = *by_id.get(&raw.records[i].u.ptr().target_var_id)?,
            _ => return Some(false),
        }
    }
    Some(false)
}

/// Checks that record `i`, placed at `pa`, is no kernel pointer and lies on
/// its side of HBM: State Buffer windows entirely outside, the rest inside.
fn check_placed(
    info: &DeviceInfo,
    raw: &RawPlan,
    by_id: &HashMap<u32, usize>,
    i: usize,
    pa: u64,
) -> Result<(), String> {
    let r = &raw.records[i];
    let placed_ok = match in_sbuf(raw, by_id, i) {
        Some(true) => !meets_hbm(info, pa, r.size),
        Some(false) => in_hbm(info, pa, 1),
        None => in_hbm(info, pa, 1) || !meets_hbm(info, pa, r.size),
    };
    if looks_like_kernel_pointer(pa) || !placed_ok {
        return Err(format!(
            "record {i} (var {}, type {}) placed at {pa:#x}, on the wrong side of HBM",
            r.var_id, r.mr_type
        ));
    }
    Ok(())
}

/// Checks that record `r` of plan `p` resolves to `pa`, the address
/// PLAN_LOAD gave it, and that a pointer sits at its target's address.
fn check_resolves(
    d: &Device,
    p: &LoadedPlan,
    by_id: &HashMap<u32, usize>,
    r: &MemRef,
    pa: u64,
) -> Result<(), String> {
    let got = d.resolve(p.plan_id, r.var_id, 0, 0);
    match got {
        Ok(a) if a == pa => {}
        Ok(a) => {
            return Err(format!(
                "RESOLVE var {} gives {a:#x}, PLAN_LOAD said {pa:#x}",
                r.var_id
            ))
        }
        Err(e) => {
            return Err(format!(
                "RESOLVE var {} of a loaded plan: {}",
                r.var_id,
                nhbm::io_errno_name(&e)
            ))
        }
    }
    if r.mr_type == MR_PTR {
        let t = r.u.ptr().target_var_id;
        if let Some(&j) = by_id.get(&t) {
            if p.addrs[j] != pa {
                return Err(format!(
                    "pointer var {} at {pa:#x}, its target var {t} at {:#x}",
                    r.var_id, p.addrs[j]
                ));
            }
        }
    }
    Ok(())
}
