//! The four scratchpad backings of a VIRTUAL_TMP_BUF beyond the basics of
//! `cases`: SHARDED windows, each in its core's shard of the shared
//! scratchpad, and MAIN buffers, HBM of the plan's own.

use nhbm::{Backing, Limits, Plan, Record};

use crate::fixtures::*;
use crate::ktap::*;

/// A plan with a SHARDED window on every core of the device and a MAIN
/// buffer loads; each window resolves into its own core's shard and keeps
/// its own bytes; the MAIN buffer lies outside the scratchpad, in what the
/// plan allocated, and keeps its bytes too; the unload gives all back.
pub fn sharded_and_main_scratch_load_resolve_and_move_bytes() -> TestResult {
    const SHARD: u64 = 64 * KIB;
    const AT: u64 = 8 * KIB;
    const MAIN: u32 = 2;
    let d = dev()?;
    let i = info(&d)?;
    let cores = i.nr_cores;
    let shared = SHARD * u64::from(cores);
    let mut plan = Plan::new(0, shared).with(Record::buffer(1, 4 * KIB));
    for nc in 0..cores {
        let window = Record::virtual_tmp_buf(10 + nc, 4 * KIB, Backing::Sharded(nc), AT);
        plan = plan.with(window);
    }
    plan = plan.with(Record::virtual_tmp_buf(MAIN, 64 * KIB, Backing::Main, 0));
    let blob = plan
        .to_blob_for(&Limits::from_device_info(&i))
        .ctx("build")?;
    let base = usage(&d)?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    ensure_eq("bytes_allocated", p.bytes_allocated, shared + 68 * KIB)?;
    let scratch = p.shared_scratchpad_pa..p.shared_scratchpad_pa + shared;
    for nc in 0..cores {
        let pa = d.resolve(p.plan_id, 10 + nc, 0, 0).ctx("RESOLVE")?;
        let want = scratch.start + u64::from(nc) * SHARD + AT;
        ensure_eq(&format!("core {nc}'s window"), pa, want)?;
        let data = pattern(4 * KIB, nc);
        d.mem_write(p.plan_id, 10 + nc, 0, &data).ctx("MEM_WRITE")?;
    }
    for nc in 0..cores {
        let mut back = vec![0; 4 * KIB as usize];
        d.mem_read(p.plan_id, 10 + nc, 0, &mut back)
            .ctx("MEM_READ")?;
        ensure(back == pattern(4 * KIB, nc), || {
            format!("core {nc}'s window read back another core's bytes")
        })?;
    }
    let main = d.resolve(p.plan_id, MAIN, 0, 0).ctx("RESOLVE of MAIN")?;
    ensure(!scratch.contains(&main), || {
        format!("the MAIN buffer at {main:#x} is in the scratchpad {scratch:x?}")
    })?;
    let data = pattern(64 * KIB, 99);
    d.mem_write(p.plan_id, MAIN, 0, &data)
        .ctx("MEM_WRITE of MAIN")?;
    let mut back = vec![0; data.len()];
    d.mem_read(p.plan_id, MAIN, 0, &mut back)
        .ctx("MEM_READ of MAIN")?;
    ensure(back == data, || {
        "the MAIN buffer read back other bytes".into()
    })?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    ensure_eq("MEM_STATS once unloaded", usage(&d)?, base)
}
