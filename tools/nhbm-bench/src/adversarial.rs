//! Crafted input against benign input of the same size: a plan whose
//! pointers form one long chain against one whose pointers all name the
//! same buffer, variable ids that share their low bits (one bucket for
//! any hash of the low bits) against random ids, and one plan of many
//! small buffers aligned beyond their size (a chunk each, a gap after
//! each) against the same buffers in eight plans. PLAN_LOAD must cost
//! about the same: no input may make the module's work superlinear.

use std::io;

use nhbm::uapi::*;
use nhbm::Device;

use crate::device::note;
use crate::measure::{interleave, time_ns, Pairs};
use crate::report::{Figure, Op, Raw};

/// Records of every plan compared (`NHBM_MAX_PLAN_RECORDS`).
pub const RECORDS: u32 = 1 << 20;
/// Repetitions (one load per side each); the blobs are built one at a time
/// (152 MiB each).
const ROUNDS: usize = 5;
/// Target of both figures.
const TARGET: f64 = 3.0;
/// Local scratchpad the id plans' windows lie in.
const SCRATCH: u64 = 1 << 20;
/// Buffers of the aligned-gaps plan: a quarter of what one region's small
/// pool holds of them.
const GAPPED: u32 = 32_768;
/// Plans the same buffers are split into on the benign side.
const GAPPED_SPLIT: u32 = 8;

fn blob(records: impl Iterator<Item = MemRef>, n: u32, local: u64) -> Vec<u8> {
    let header = PlanHeader {
        local_scratchpad_size: local,
        nmem: n,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(PLAN_HEADER_SIZE + n as usize * MEM_REF_SIZE);
    out.extend_from_slice(&header.encode());
    for r in records {
        out.extend_from_slice(&r.encode());
    }
    out
}

/// Var ids 1..n-1 are pointers, var n a 4 KiB buffer. `chain`: pointer k
/// names k + 1, so the first is n - 1 steps from the buffer; otherwise every
/// pointer names the buffer.
pub fn pointer_blob(n: u32, chain: bool) -> Vec<u8> {
    let recs = (1..=n).map(move |id| {
        if id == n {
            MemRef {
                mr_type: MR_BUFFER,
                var_id: id,
                size: 4096,
                ..Default::default()
            }
        } else {
            MemRef {
                mr_type: MR_PTR,
                var_id: id,
                u: MemRefUnion::from(MrPtr {
                    target_var_id: if chain { id + 1 } else { n },
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
    });
    blob(recs, n, 0)
}

/// `n` 64-byte windows of the local scratchpad with var ids `id(i)`.
pub fn window_blob(n: u32, id: impl Fn(u32) -> u32) -> Vec<u8> {
    let recs = (0..n).map(move |i| MemRef {
        mr_type: MR_VIRTUAL_TMP_BUF,
        var_id: id(i),
        size: 64,
        u: MemRefUnion::from(MrVtmp {
            offset: (u64::from(i) * 64) % SCRATCH,
            backing: 0,
            nc_id: 0,
        }),
        ..Default::default()
    });
    blob(recs, n, SCRATCH)
}

/// `n` 4 KiB buffers at 8 KiB alignment: each is a chunk of its own in the
/// small pool, placed first fit, with a 4 KiB gap after it.
pub fn gapped_blob(n: u32) -> Vec<u8> {
    let recs = (1..=n).map(|id| MemRef {
        mr_type: MR_BUFFER,
        var_id: id,
        size: 4096,
        alignment: 8192,
        ..Default::default()
    });
    blob(recs, n, 0)
}

/// Ids that differ only above bit 12.
pub fn crafted_id(i: u32) -> u32 {
    i << 12 | 0xa5c
}

/// Distinct pseudo-random ids (an odd multiplier is a bijection of u32).
pub fn benign_id(i: u32) -> u32 {
    i.wrapping_mul(0x9e37_79b1) ^ 0x5bd1_e995
}

/// PLAN_LOAD ns of each blob maker, alternating A B B A; each blob is
/// built just before its load, untimed.
fn compare(dev: &Device, a: &dyn Fn() -> Vec<u8>, b: &dyn Fn() -> Vec<u8>) -> io::Result<Pairs> {
    let load = |make: &dyn Fn() -> Vec<u8>| -> io::Result<f64> {
        let bytes = make();
        let (p, ns) = time_ns(|| dev.plan_load(&bytes, CHANNEL_ANY));
        dev.plan_unload(p?.plan_id)?;
        Ok(ns)
    };
    interleave(ROUNDS, || load(a), || load(b))
}

/// PLAN_LOAD ns of [`GAPPED`] gapped buffers in one plan, and of the same
/// buffers in [`GAPPED_SPLIT`] plans, each unloaded before the next loads
/// (so that every load meets the same empty pool), alternating A B B A.
fn compare_gapped(dev: &Device) -> io::Result<Pairs> {
    let load = |n: u32, times: u32| -> io::Result<f64> {
        let bytes = gapped_blob(n);
        let mut total = 0.0;
        for _ in 0..times {
            let (p, ns) = time_ns(|| dev.plan_load(&bytes, CHANNEL_ANY));
            dev.plan_unload(p?.plan_id)?;
            total += ns;
        }
        Ok(total)
    };
    let part = GAPPED / GAPPED_SPLIT;
    interleave(ROUNDS, || load(GAPPED, 1), || load(part, GAPPED_SPLIT))
}

fn figure(name: &str, what_a: &str, what_b: &str, p: &Pairs) -> Figure {
    Figure::of_ratios(
        name,
        &p.ratios(),
        Raw::new(
            format!("PLAN_LOAD {what_a} median ns"),
            format!("{:.0}", p.a_median()),
        ),
        Raw::new(
            format!("PLAN_LOAD {what_b} median ns"),
            format!("{:.0}", p.b_median()),
        ),
        Op::AtMost,
        TARGET,
    )
}

/// `pointer_chain`, `crafted_ids` and `aligned_gaps`.
pub fn adversarial_figures(dev: &Device) -> io::Result<[Figure; 3]> {
    let chain = compare(dev, &|| pointer_blob(RECORDS, true), &|| {
        pointer_blob(RECORDS, false)
    })?;
    note(&format!(
        "pointer_chain: {RECORDS} records, {ROUNDS} rounds per side"
    ));
    let ids = compare(dev, &|| window_blob(RECORDS, crafted_id), &|| {
        window_blob(RECORDS, benign_id)
    })?;
    let gapped = compare_gapped(dev)?;
    Ok([
        figure(
            "pointer_chain",
            "2^20-record pointer chain",
            "2^20 pointers to one buffer",
            &chain,
        ),
        figure(
            "crafted_ids",
            "2^20 ids sharing their low 12 bits",
            "2^20 random ids",
            &ids,
        ),
        figure(
            "aligned_gaps",
            &format!("{GAPPED} gapped buffers in one plan"),
            &format!("the same in {GAPPED_SPLIT} plans, total"),
            &gapped,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::{validate, Limits};

    #[test]
    fn blobs_are_valid_plans() {
        for b in [
            pointer_blob(64, true),
            pointer_blob(64, false),
            window_blob(64, crafted_id),
            window_blob(64, benign_id),
            gapped_blob(64),
        ] {
            validate(&b, &Limits::default()).unwrap();
        }
    }

    // Both figures are medians of enough repetitions.
    const _: () = assert!(ROUNDS >= crate::measure::MIN_REPS);

    #[test]
    fn id_sets_are_distinct() {
        let mut c: Vec<u32> = (0..RECORDS).map(crafted_id).collect();
        let mut b: Vec<u32> = (0..RECORDS).map(benign_id).collect();
        c.sort_unstable();
        c.dedup();
        b.sort_unstable();
        b.dedup();
        assert_eq!((c.len(), b.len()), (RECORDS as usize, RECORDS as usize));
    }
}
