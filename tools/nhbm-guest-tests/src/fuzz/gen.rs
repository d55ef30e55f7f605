//! Random valid plans: every kind, payloads, names, aliases, lists, state
//! buffer windows and references to other plans of the same file.

use std::collections::HashSet;

use nhbm::{Backing, Kind, Plan, Record};

use crate::fixtures::KIB;
use crate::rng::Rng;

/// A variable of a live plan that MR_REMOTE records may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteTarget {
    pub plan_id: u32,
    pub var_id: u32,
    pub size: u64,
}

/// What a generated plan may use of the device and the file.
#[derive(Clone, Debug)]
pub struct GenCtx {
    pub nr_cores: u32,
    pub sbuf_size: u64,
    pub remotes: Vec<RemoteTarget>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    Alloc,
    Vtmp,
    Ptr,
    List,
    PtrTable,
    Sb,
    Remote,
}

fn alloc_kind(rng: &mut Rng) -> Kind {
    match rng.below(5) {
        0 => Kind::Input,
        1 => Kind::Output,
        2 => Kind::Buffer,
        3 => Kind::BufferStaged,
        _ => Kind::TmpBuf,
    }
}

fn alloc_size(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0..=4 => rng.range(1, 4 * KIB),
        5..=8 => rng.range(4 * KIB, 64 * KIB),
        _ => rng.range(64 * KIB, 512 * KIB),
    }
}

/// Final size of what `i` stands for, following pointers (0 if unknown).
fn alias_target_size(recs: &[Record], i: usize) -> u64 {
    let mut cur = i;
    for _ in 0..=recs.len() {
        match recs[cur].kind {
            Kind::Ptr { target } => match recs.iter().position(|r| r.var_id == target) {
                Some(j) if recs[cur].size == 0 => cur = j,
                Some(_) => return recs[cur].size,
                None => return 0,
            },
            _ => return recs[cur].size,
        }
    }
    0
}

/// Up to `max` records of a plan that PLAN_LOAD accepts (for this file's
/// remote targets), sometimes with payloads, names and shapes.
pub fn valid_plan(rng: &mut Rng, ctx: &GenCtx, max: usize) -> Plan {
    let n = rng.range(1, max.max(1) as u64) as usize;
    let local = if rng.chance(1, 2) {
        rng.range(1, 16) * 4 * KIB
    } else {
        0
    };
    let shared = if rng.chance(1, 3) {
        rng.range(1, 8) * 4 * KIB
    } else {
        0
    };
    let mut plan = Plan::new(local, shared);
    let ids = distinct_ids(rng, n);
    // Kinds first, references once every id is known.
    let mut picks = pick_kinds(rng, ctx, n, local, shared);
    for (&id, &p) in ids.iter().zip(&picks) {
        let r = match p {
            Pick::Alloc => alloc_record(rng, id),
            Pick::Vtmp => vtmp_record(rng, ctx, id, local, shared),
            Pick::Sb => sb_record(rng, ctx, id),
            Pick::Remote => remote_record(rng, ctx, id),
            // Placeholders, filled in below.
            Pick::Ptr => Record::ptr(id, id, 0),
            Pick::List => Record::list(id, vec![]),
            Pick::PtrTable => Record::ptr_table(id, vec![]),
        };
        plan.push(name_and_shape(rng, r));
    }
    aim_pointers(rng, &mut plan, &mut picks, &ids);
    fill_lists(rng, &mut plan, &picks, &ids);
    plan
}

/// `n` distinct ids: sequential, small random, anywhere in u32, or crafted
/// to share their low 17 bits (one bucket for a simple hash of the id).
fn distinct_ids(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mode = rng.below(4);
    let mut used = HashSet::new();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let mut id = match mode {
            0 => i as u32 + 1,
            1 => rng.below(4 * n as u64 + 4) as u32,
            2 => rng.next_u32(),
            _ => (i as u32) << 17 | 0x1_5a5a,
        };
        while !used.insert(id) {
            id = id.wrapping_add(1);
        }
        ids.push(id);
    }
    ids
}

/// The kinds of `n` records, each one the plan can have: no scratchpad
/// window without a scratchpad, no REMOTE without a target, no State
/// Buffer window without one, no reference in a plan of one record.
fn pick_kinds(rng: &mut Rng, ctx: &GenCtx, n: usize, local: u64, shared: u64) -> Vec<Pick> {
    let mut picks = Vec::with_capacity(n);
    for _ in 0..n {
        let p = match rng.below(20) {
            0..=7 => Pick::Alloc,
            8..=9 => Pick::Vtmp,
            10..=11 => Pick::Ptr,
            12..=13 => Pick::List,
            14 => Pick::PtrTable,
            15..=16 => Pick::Sb,
            _ => Pick::Remote,
        };
        let p = match p {
            Pick::Vtmp if local == 0 && shared == 0 => Pick::Alloc,
            Pick::Remote if ctx.remotes.is_empty() => Pick::Alloc,
            Pick::Sb if ctx.nr_cores == 0 || ctx.sbuf_size == 0 => Pick::Alloc,
            Pick::Ptr | Pick::List | Pick::PtrTable if n == 1 => Pick::Alloc,
            p => p,
        };
        picks.push(p);
    }
    // A pointer table needs a list to point at.
    if !picks.contains(&Pick::List) {
        for p in picks.iter_mut() {
            if *p == Pick::PtrTable {
                *p = Pick::List;
            }
        }
    }
    picks
}

/// An allocated variable, sometimes with a payload or an alignment.
fn alloc_record(rng: &mut Rng, id: u32) -> Record {
    let size = alloc_size(rng);
    let mut r = Record::new(id, alloc_kind(rng), size);
    if rng.chance(1, 3) {
        let len = rng.range(1, size.min(4 * KIB));
        r = r.data(rng.bytes(len as usize));
    }
    if rng.chance(2, 5) {
        r = r.alignment(1 << rng.below(17));
    }
    r
}

/// A window into the local or the shared scratchpad (at least one of
/// `local` and `shared` is not 0), now and then into one core's shard of
/// the shared one, or a MAIN buffer of its own.
fn vtmp_record(rng: &mut Rng, ctx: &GenCtx, id: u32, local: u64, shared: u64) -> Record {
    if rng.chance(1, 8) {
        return Record::virtual_tmp_buf(id, rng.range(1, 16 * KIB), Backing::Main, 0);
    }
    let shard = shared / u64::from(ctx.nr_cores);
    if shard > 0 && rng.chance(1, 4) {
        let nc = rng.below(u64::from(ctx.nr_cores)) as u32;
        let size = rng.range(1, shard.min(16 * KIB));
        let offset = rng.range(0, shard - size);
        return Record::virtual_tmp_buf(id, size, Backing::Sharded(nc), offset);
    }
    let (backing, scratch) = if shared > 0 && (local == 0 || rng.chance(1, 2)) {
        (Backing::Shared, shared)
    } else {
        (Backing::Local, local)
    };
    let size = rng.range(1, scratch.min(16 * KIB));
    let offset = rng.range(0, scratch - size);
    Record::virtual_tmp_buf(id, size, backing, offset)
}

/// A window into the State Buffer of a random core.
fn sb_record(rng: &mut Rng, ctx: &GenCtx, id: u32) -> Record {
    let nc = rng.below(u64::from(ctx.nr_cores)) as u32;
    let size = rng.range(1, 64 * KIB.min(ctx.sbuf_size));
    let offset = rng.range(0, ctx.sbuf_size - size) & !7;
    Record::sb(id, size, nc, offset)
}

/// A REMOTE to one of the file's targets: its whole size, part of it, or
/// size 0.
fn remote_record(rng: &mut Rng, ctx: &GenCtx, id: u32) -> Record {
    let t = *rng.pick(&ctx.remotes);
    let size = match rng.below(3) {
        0 => 0,
        1 => t.size,
        _ => rng.range(1, t.size.max(1)),
    };
    Record::remote(id, size, t.plan_id, t.var_id)
}

/// `r`, sometimes with a name and sometimes with a dtype and shape.
fn name_and_shape(rng: &mut Rng, mut r: Record) -> Record {
    if rng.chance(1, 4) {
        let len = rng.range(0, 40) as usize;
        let name: String = (0..len)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        r = r.name(name);
    }
    if rng.chance(1, 4) {
        let dims = rng.range(0, 8) as usize;
        let shape: Vec<u64> = (0..dims).map(|_| rng.range(1, 64)).collect();
        let dtype = *rng.pick(&["float32", "bfloat16", "int8", "", "fp8_e4m3"]);
        r = r.dtype(dtype, &shape);
    }
    r
}

/// Sets each pointer's target and size. Pointers target an earlier pointer
/// or any non-pointer: no cycles. In a chained plan each pointer targets
/// the previous one, so the last one is as many steps from its end as
/// there are pointers. A pointer with nothing to target becomes a buffer.
fn aim_pointers(rng: &mut Rng, plan: &mut Plan, picks: &mut [Pick], ids: &[u32]) {
    let n = picks.len();
    let chained = rng.chance(1, 4);
    let mut prev_ptr: Option<usize> = None;
    for i in 0..n {
        if picks[i] != Pick::Ptr {
            continue;
        }
        let cands: Vec<usize> = match prev_ptr {
            Some(j) if chained => vec![j],
            _ => (0..n)
                .filter(|&j| j != i && (picks[j] != Pick::Ptr || j < i))
                .collect(),
        };
        if cands.is_empty() {
            let size = alloc_size(rng);
            plan.records[i].kind = Kind::Buffer;
            plan.records[i].size = size;
            picks[i] = Pick::Alloc;
            continue;
        }
        let j = *rng.pick(&cands);
        prev_ptr = Some(i);
        plan.records[i].kind = Kind::Ptr { target: ids[j] };
        let tsize = alias_target_size(&plan.records, j);
        plan.records[i].size = match rng.below(3) {
            0 if tsize > 0 => tsize,
            1 if tsize > 0 => rng.range(1, tsize),
            _ => 0,
        };
    }
}

/// Sets the ids of each list (any other variables) and pointer table (the
/// plan's lists), and their sizes and alignments.
fn fill_lists(rng: &mut Rng, plan: &mut Plan, picks: &[Pick], ids: &[u32]) {
    let n = picks.len();
    let lists: Vec<usize> = (0..n).filter(|&j| picks[j] == Pick::List).collect();
    for (i, &pick) in picks.iter().enumerate() {
        let ids_for = match pick {
            Pick::List => {
                let k = rng.range(1, 6) as usize;
                (0..k)
                    .map(|_| {
                        let mut j = rng.index(n);
                        if j == i {
                            j = (j + 1) % n;
                        }
                        ids[j]
                    })
                    .collect::<Vec<u32>>()
            }
            Pick::PtrTable => {
                let k = rng.range(1, 4) as usize;
                (0..k).map(|_| ids[*rng.pick(&lists)]).collect()
            }
            _ => continue,
        };
        let size = 8 * ids_for.len() as u64 + if rng.chance(1, 4) { rng.below(64) } else { 0 };
        let kind = if pick == Pick::List {
            Kind::List { ids: ids_for }
        } else {
            Kind::PtrTable { ids: ids_for }
        };
        plan.records[i].kind = kind;
        plan.records[i].size = size;
        if rng.chance(1, 4) {
            plan.records[i].alignment = 1 << rng.below(13);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::Limits;

    fn ctx() -> GenCtx {
        GenCtx {
            nr_cores: 2,
            sbuf_size: 32 << 20,
            remotes: vec![RemoteTarget {
                plan_id: 1,
                var_id: 1,
                size: 4096,
            }],
        }
    }

    #[test]
    fn generated_plans_pass_the_library_validator() {
        let limits = Limits {
            nr_cores: Some(2),
            sbuf_size: Some(32 << 20),
        };
        for case in 0..3000 {
            let mut rng = Rng::for_case(99, case);
            let plan = valid_plan(&mut rng, &ctx(), 12);
            if let Err(e) = plan.to_blob_for(&limits) {
                panic!("case {case}: {e}\n{}", plan.to_json());
            }
        }
    }

    #[test]
    fn generation_is_deterministic() {
        let a = valid_plan(&mut Rng::for_case(5, 17), &ctx(), 12);
        let b = valid_plan(&mut Rng::for_case(5, 17), &ctx(), 12);
        assert_eq!(a, b);
    }
}
