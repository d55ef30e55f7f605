//! Mutations of a valid plan: bit flips, field values from the edges,
//! truncation, out-of-blob and overlapping offset ranges, huge counts.

use nhbm::uapi::*;
use nhbm::RawPlan;

use crate::rng::Rng;

/// Size of the blob `raw.to_bytes()` makes.
pub fn blob_len(raw: &RawPlan) -> u64 {
    (RawPlan::data_start(raw.records.len()) + raw.data.len()) as u64
}

/// An offset into (or just past, or far past) a blob of `len` bytes:
/// the header, a record's start, the data area, the last byte, the end,
/// beyond it, the top of the u64 range.
pub fn edgy_offset(rng: &mut Rng, len: u64, nmem: usize) -> u64 {
    match rng.below(12) {
        0 => 0,
        1 => rng.below(PLAN_HEADER_SIZE as u64),
        2 => (PLAN_HEADER_SIZE + rng.index(nmem.max(1)) * MEM_REF_SIZE) as u64,
        3 => rng.below(len.max(1)),
        4 => len.saturating_sub(1),
        5 => len,
        6 => len + 1,
        7 => len + rng.range(2, 1 << 20),
        8 => u64::MAX - rng.below(16),
        9 => 1 << 63,
        10 => rng.range(len / 2, len),
        _ => rng.edgy_u64(),
    }
}

/// A length for a range starting at `off` in a blob of `len` bytes: to the
/// end, one past it, zero, huge, wrapping.
pub fn edgy_len(rng: &mut Rng, off: u64, len: u64) -> u64 {
    let to_end = len.saturating_sub(off);
    match rng.below(9) {
        0 => 0,
        1 => 1,
        2 => to_end,
        3 => to_end + 1,
        4 => u64::MAX - off.min(u64::MAX - 1),
        5 => u64::MAX,
        6 => rng.range(1, len.max(1)),
        7 => 1 << 32,
        _ => rng.edgy_u64(),
    }
}

/// Flips 1..=8 bits, mostly in the header and records.
pub fn flip_bits(rng: &mut Rng, blob: &mut [u8]) -> String {
    if blob.is_empty() {
        return "empty blob".into();
    }
    let n = rng.range(1, 8);
    let structured = blob.len().min(PLAN_HEADER_SIZE + 16 * MEM_REF_SIZE);
    let mut at = Vec::new();
    for _ in 0..n {
        let pos = if rng.chance(4, 5) {
            rng.index(structured)
        } else {
            rng.index(blob.len())
        };
        let bit = rng.below(8);
        blob[pos] ^= 1 << bit;
        at.push(format!("{pos:#x}.{bit}"));
    }
    format!("flip {}", at.join(","))
}

/// Overwrites 1..=4 random bytes (or an aligned word) with edge values.
pub fn smash_bytes(rng: &mut Rng, blob: &mut [u8]) -> String {
    if blob.len() < 8 {
        return "blob under 8 bytes".into();
    }
    let pos = rng.index(blob.len() - 7) & !3;
    let v = rng.edgy_u64();
    let w = if rng.chance(1, 2) { 8 } else { 4 };
    blob[pos..pos + w].copy_from_slice(&v.to_le_bytes()[..w]);
    format!("word {pos:#x}={v:#x}/{w}")
}

/// Sets one header or record field to an edge value; returns what it did.
pub fn mutate_field(rng: &mut Rng, raw: &mut RawPlan) -> String {
    let len = blob_len(raw);
    let nmem = raw.records.len();
    if nmem == 0 || rng.chance(1, 8) {
        return mutate_header(rng, raw);
    }
    let i = rng.index(nmem);
    let other_id = raw.records[rng.index(nmem)].var_id;
    let r = &mut raw.records[i];
    let (what, v) = match rng.below(17) {
        k @ (0 | 1 | 5 | 16) => mutate_identity(rng, r, k, other_id),
        k @ (3 | 4) => mutate_extent(rng, r, k),
        k @ 6..=8 => mutate_dtype_shape(rng, r, k),
        k @ (2 | 9..=11) => mutate_offsets(rng, r, k, len, nmem),
        k => mutate_union(rng, r, k, len, nmem),
    };
    format!("rec {i} {what}={v:#x}")
}

/// Mutation `k` of `mutate_field` (0, 1, 5 or 16): the record's kind,
/// flags or id.
fn mutate_identity(rng: &mut Rng, r: &mut MemRef, k: u64, other_id: u32) -> (&'static str, u64) {
    match k {
        0 => {
            r.mr_type = match rng.below(4) {
                0 => MR_INVALID,
                1 => rng.range(u64::from(MR_REMOTE) + 1, 255) as u32,
                2 => rng.edgy_u32(),
                _ => rng.range(u64::from(MR_SB), u64::from(MR_REMOTE)) as u32,
            };
            ("mr_type", u64::from(r.mr_type))
        }
        1 => {
            r.flags = 1 << rng.below(32);
            ("flags", u64::from(r.flags))
        }
        5 => {
            r.var_id = if rng.chance(2, 3) {
                other_id
            } else {
                rng.edgy_u32()
            };
            ("var_id", u64::from(r.var_id))
        }
        _ => {
            // Make it another kind, keeping its union words.
            r.mr_type = rng.range(u64::from(MR_SB), u64::from(MR_REMOTE)) as u32;
            ("kind swap", u64::from(r.mr_type))
        }
    }
}

/// Mutation `k` of `mutate_field` (3 or 4): the record's size or alignment.
fn mutate_extent(rng: &mut Rng, r: &mut MemRef, k: u64) -> (&'static str, u64) {
    if k == 3 {
        r.size = match rng.below(6) {
            0 => 0,
            1 => u64::MAX,
            2 => 1 << rng.range(30, 40),
            3 => (1 << 34) + rng.below(4096),
            4 => r.size.wrapping_add(1),
            _ => rng.edgy_u64(),
        };
        ("size", r.size)
    } else {
        r.alignment = match rng.below(5) {
            0 => rng.range(3, 4095) | 1,
            1 => MAX_ALIGNMENT << rng.range(1, 33),
            2 => 1 << 63,
            3 => MAX_ALIGNMENT,
            _ => rng.edgy_u64(),
        };
        ("alignment", r.alignment)
    }
}

/// Mutation `k` of `mutate_field` (6, 7 or 8): the record's dtype, ndim or
/// a dimension of its shape.
fn mutate_dtype_shape(rng: &mut Rng, r: &mut MemRef, k: u64) -> (&'static str, u64) {
    match k {
        6 => {
            let byte = rng.index(16);
            if rng.chance(1, 2) {
                r.dtype = [b'x'; 16];
                ("dtype (no NUL)", 16)
            } else {
                r.dtype[byte] = rng.next_u32() as u8;
                ("dtype byte", byte as u64)
            }
        }
        7 => {
            r.ndim = match rng.below(3) {
                0 => 9,
                1 => rng.edgy_u32(),
                _ => r.ndim.saturating_sub(1),
            };
            ("ndim", u64::from(r.ndim))
        }
        _ => {
            let dim = rng.index(MAX_NDIM);
            r.shape[dim] = rng.edgy_u64() | 1;
            ("shape", dim as u64)
        }
    }
}

/// Mutation `k` of `mutate_field` (2, 9, 10 or 11): the name or payload
/// range of a record in a blob of `len` bytes and `nmem` records.
fn mutate_offsets(
    rng: &mut Rng,
    r: &mut MemRef,
    k: u64,
    len: u64,
    nmem: usize,
) -> (&'static str, u64) {
    match k {
        2 => {
            r.name_off = edgy_offset(rng, len, nmem);
            ("name_off", r.name_off)
        }
        9 => {
            r.data_off = edgy_offset(rng, len, nmem);
            if r.data_len == 0 && rng.chance(1, 2) {
                r.data_len = edgy_len(rng, r.data_off, len);
            }
            ("data_off", r.data_off)
        }
        10 => {
            r.data_len = edgy_len(rng, r.data_off, len);
            ("data_len", r.data_len)
        }
        _ => {
            // A payload that overlaps the header and records.
            r.data_off = rng.below(RawPlan::data_start(nmem) as u64);
            r.data_len = rng.range(1, r.size.clamp(1, 4096));
            ("data overlapping records at", r.data_off)
        }
    }
}

/// Mutation `k` of `mutate_field` (12 to 15): a word of the record's kind
/// union, or a list count from the edges with the ids where they were.
fn mutate_union(
    rng: &mut Rng,
    r: &mut MemRef,
    k: u64,
    len: u64,
    nmem: usize,
) -> (&'static str, u64) {
    let mut u = r.u.raw();
    let done = match k {
        12 => {
            u[0] = (u[0] & 0xffff_ffff_0000_0000) | u64::from(rng.edgy_u32());
            ("union u32 #0", u[0] & 0xffff_ffff)
        }
        13 => {
            u[0] = (u[0] & 0xffff_ffff) | (u64::from(rng.edgy_u32()) << 32);
            ("union u32 #1", u[0] >> 32)
        }
        14 => {
            u[1] = if rng.chance(1, 2) {
                edgy_offset(rng, len, nmem)
            } else {
                rng.edgy_u64()
            };
            ("union u64 #1", u[1])
        }
        _ => {
            let c = match rng.below(4) {
                0 => MAX_LIST_COUNT,
                1 => MAX_LIST_COUNT + 1,
                2 => u32::MAX,
                _ => ((u[0] as u32) + 1).max(2),
            };
            u[0] = (u[0] & 0xffff_ffff_0000_0000) | u64::from(c);
            ("list count", u64::from(c))
        }
    };
    r.u = MemRefUnion { raw: u };
    done
}

/// Sets one header field to an edge value.
pub fn mutate_header(rng: &mut Rng, raw: &mut RawPlan) -> String {
    let h = &mut raw.header;
    let (what, v) = match rng.below(5) {
        0 => {
            h.nmem = match rng.below(7) {
                0 => 0,
                1 => h.nmem + 1,
                2 => h.nmem.saturating_sub(1),
                3 => MAX_PLAN_RECORDS,
                4 => MAX_PLAN_RECORDS + 1,
                5 => u32::MAX,
                _ => rng.edgy_u32(),
            };
            ("nmem", u64::from(h.nmem))
        }
        1 => {
            h.rsvd = rng.edgy_u32() | 1;
            ("rsvd", u64::from(h.rsvd))
        }
        2 => {
            h.local_scratchpad_size = match rng.below(3) {
                0 => 0,
                1 => 1 << rng.range(34, 63),
                _ => rng.edgy_u64(),
            };
            ("local_scratchpad_size", h.local_scratchpad_size)
        }
        3 => {
            h.shared_scratchpad_size = match rng.below(3) {
                0 => 0,
                1 => 1 << rng.range(34, 63),
                _ => rng.edgy_u64(),
            };
            ("shared_scratchpad_size", h.shared_scratchpad_size)
        }
        _ => {
            h.local_scratchpad_size = u64::MAX - rng.below(4096);
            h.shared_scratchpad_size = u64::MAX - rng.below(4096);
            ("both scratchpads", h.local_scratchpad_size)
        }
    };
    format!("header {what}={v:#x}")
}

/// A length to cut the blob to: inside the header, at or inside a record,
/// in the data area.
pub fn cut_point(rng: &mut Rng, len: usize, nmem: usize) -> usize {
    let data_start = RawPlan::data_start(nmem);
    let p = match rng.below(6) {
        0 => 0,
        1 => rng.index(PLAN_HEADER_SIZE + 1),
        2 => PLAN_HEADER_SIZE + rng.index(nmem.max(1)) * MEM_REF_SIZE,
        3 => (PLAN_HEADER_SIZE + rng.index(nmem.max(1)) * MEM_REF_SIZE + rng.index(MEM_REF_SIZE))
            .saturating_sub(1),
        4 => data_start + rng.index(len.saturating_sub(data_start).max(1)),
        _ => len.saturating_sub(1),
    };
    p.min(len.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::gen::{valid_plan, GenCtx};

    #[test]
    fn mutations_stay_in_the_blob_and_describe_themselves() {
        let ctx = GenCtx {
            nr_cores: 2,
            sbuf_size: 32 << 20,
            remotes: vec![],
        };
        for case in 0..2000 {
            let mut rng = Rng::for_case(3, case);
            let raw = valid_plan(&mut rng, &ctx, 8).to_raw().unwrap();
            let mut m = raw.clone();
            let d = mutate_field(&mut rng, &mut m);
            assert!(!d.is_empty());
            let mut b = m.to_bytes();
            let len = b.len();
            flip_bits(&mut rng, &mut b);
            smash_bytes(&mut rng, &mut b);
            assert_eq!(b.len(), len);
            let cut = cut_point(&mut rng, len, raw.records.len());
            assert!(cut < len);
        }
    }
}
