// SPDX-License-Identifier: GPL-2.0-only

//! Plan blob -> validated records, with no side effect: nothing is allocated
//! on the device and nothing is written until every rule below holds.
//!
//! Errnos: `EINVAL` malformed, `E2BIG` over a limit, `ENOENT` a reference to a
//! variable the plan does not have, `EFAULT` unreadable user memory.

use super::{blob::BlobSource, index::VarIndex, mr_type::MrType};
use crate::{
    abstractions::resched,
    arch::{ArchInfo, SBUF_SIZE},
    uapi::{
        MemRef, PlanHeader, BACKING_LOCAL, BACKING_MAIN, BACKING_SHARDED, BACKING_SHARED,
        MAX_ALIGNMENT, MAX_LIST_COUNT, MAX_PLAN_RECORDS,
    },
};
use core::mem::size_of;
use kernel::{
    prelude::*,
    transmute::{AsBytes, FromBytes},
};

/// Longest record name, NUL included.
pub(crate) const NAME_MAX: usize = 256;
/// Records read from the blob per user copy.
const RECORD_BATCH: usize = 64;
/// List table ids read from the blob per user copy.
const LIST_ID_BATCH: usize = 256;

/// Which scratchpad backs a virtual tmp buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// The plan's local scratchpad.
    Local,
    /// The plan's shared scratchpad.
    Shared,
}

/// What a record needs besides its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// An HBM allocation (payload, if any, in the record).
    Alloc,
    /// `offset` into a scratchpad.
    Scratch { backing: Backing, offset: u64 },
    /// Alias of the record at position `target` (pointer chains followed).
    Ptr { target: u32 },
    /// Table of `count` addresses; the listed record positions start at
    /// `first` in [`ParsedPlan::list_targets`].
    List { first: u32, count: u32 },
    /// State Buffer of core `nc` at `offset`.
    Sb { nc: u32, offset: u64 },
    /// Variable `var_id` of plan `plan_id` of the same file.
    Remote { var_id: u32, plan_id: u32 },
}

/// One validated record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Kind.
    pub(crate) mr_type: MrType,
    /// Variable id, unique in the plan.
    pub(crate) var_id: u32,
    /// Bytes the variable spans (0 for an alias means "as its target").
    pub(crate) size: u64,
    /// Alignment, 0 for the pool minimum.
    pub(crate) alignment: u64,
    /// Payload offset in the blob.
    pub(crate) data_off: u64,
    /// Payload length, 0 for none.
    pub(crate) data_len: u64,
    /// How it is placed.
    pub(crate) placement: Placement,
}

impl Record {
    /// Whether the record has HBM of its own (in its plan's arena or a
    /// chunk of its own): every kind that allocates, and a VIRTUAL_TMP_BUF
    /// backed by MAIN.
    pub(crate) fn allocates(&self) -> bool {
        matches!(self.placement, Placement::Alloc | Placement::List { .. })
    }
}

/// A validated plan.
pub(crate) struct ParsedPlan {
    /// Bytes of local scratchpad to reserve.
    pub(crate) local_scratch: u64,
    /// Bytes of shared scratchpad to reserve.
    pub(crate) shared_scratch: u64,
    /// Records in blob order.
    pub(crate) records: KVVec<Record>,
    /// Record positions listed by every LIST / PTR_TABLE, concatenated.
    pub(crate) list_targets: KVVec<u32>,
    /// `var_id -> position`.
    pub(crate) index: VarIndex,
}

fn read_struct<T: FromBytes + AsBytes + Default>(
    src: &(impl BlobSource + ?Sized),
    off: u64,
) -> Result<T> {
    let mut v = T::default();
    src.read_at(off, v.as_bytes_mut())?;
    Ok(v)
}

fn check_name(src: &(impl BlobSource + ?Sized), off: u64) -> Result {
    if off == 0 {
        return Ok(());
    }
    if off >= src.len() {
        return Err(EINVAL);
    }
    let n = (src.len() - off).min(NAME_MAX as u64) as usize;
    let mut buf = [0u8; NAME_MAX];
    src.read_at(off, &mut buf[..n])?;
    if buf[..n].contains(&0) {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// The table of a LIST or PTR_TABLE record as the blob gives it: `count`
/// little-endian variable ids at `ids_off`.
#[derive(Clone, Copy)]
struct RawList {
    /// Position of the listing record.
    pos: usize,
    ids_off: u64,
    count: u32,
}

/// One record, checked on its own, with its union decoded.
struct Checked {
    record: Record,
    /// Where its table is, for a LIST or PTR_TABLE.
    list: Option<(u64, u32)>,
}

/// Checks the kind-independent fields of `m` and returns its kind.
fn check_shape(m: &MemRef) -> Result<MrType> {
    if m.flags != 0 {
        return Err(EINVAL);
    }
    let ty = MrType::from_u32(m.mr_type)?;
    // dtype: at most 15 characters and a NUL (never truncated).
    if !m.dtype.contains(&0) {
        return Err(EINVAL);
    }
    if m.ndim > 8 || m.shape[m.ndim as usize..].iter().any(|&d| d != 0) {
        return Err(EINVAL);
    }
    if m.alignment != 0 && !m.alignment.is_power_of_two() {
        return Err(EINVAL);
    }
    if m.alignment > MAX_ALIGNMENT {
        return Err(E2BIG);
    }
    if ty.allocates() && m.size == 0 {
        return Err(EINVAL);
    }
    Ok(ty)
}

/// Checks the payload and the name of `m`, a record of kind `ty`.
fn check_payload(m: &MemRef, ty: MrType, src: &(impl BlobSource + ?Sized)) -> Result {
    if m.data_len != 0 {
        if !ty.allocates() || matches!(ty, MrType::List | MrType::PtrTable) || m.data_len > m.size {
            return Err(EINVAL);
        }
        src.check(m.data_off, m.data_len)?;
    } else if m.data_off != 0 {
        return Err(EINVAL);
    }
    check_name(src, m.name_off)
}

/// Decodes and checks the union of `m`, a record of kind `ty`: the only
/// place that reads it. A LIST's or PTR_TABLE's placement gets its targets
/// later; where its table is comes back beside it. A pointer's target is
/// still a variable id.
fn decode_union(
    m: &MemRef,
    ty: MrType,
    src: &(impl BlobSource + ?Sized),
    hdr: &PlanHeader,
    info: &ArchInfo,
) -> Result<(Placement, Option<(u64, u32)>)> {
    let [w0, w1] = m.u;
    let (lo, hi) = (w0 as u32, (w0 >> 32) as u32);
    let placement = match ty {
        MrType::List | MrType::PtrTable => {
            if hi != 0 {
                return Err(EINVAL);
            }
            if lo > MAX_LIST_COUNT {
                return Err(E2BIG);
            }
            if lo == 0 || m.size / 8 < u64::from(lo) {
                return Err(EINVAL);
            }
            src.check(w1, u64::from(lo) * 4)?;
            let first = 0;
            return Ok((Placement::List { first, count: lo }, Some((w1, lo))));
        }
        MrType::Ptr if hi != 0 || w1 != 0 => return Err(EINVAL),
        MrType::Ptr => Placement::Ptr { target: lo },
        MrType::Remote if w1 != 0 => return Err(EINVAL),
        MrType::Remote => Placement::Remote {
            var_id: lo,
            plan_id: hi,
        },
        MrType::VirtualTmpBuf => decode_scratch(m, w0, w1, hdr, info)?,
        MrType::Sb => {
            if hi != 0 || lo as usize >= info.nr_cores {
                return Err(EINVAL);
            }
            match w1.checked_add(m.size) {
                Some(end) if end <= SBUF_SIZE && m.size > 0 => {}
                _ => return Err(EINVAL),
            }
            Placement::Sb { nc: lo, offset: w1 }
        }
        _ if w0 != 0 || w1 != 0 => return Err(EINVAL),
        _ => Placement::Alloc,
    };
    Ok((placement, None))
}

/// Where a VIRTUAL_TMP_BUF record of a plan for a device of arch `info`
/// lies: the window `[offset, offset + size)` of the scratchpad `backing`
/// names, checked against the header's sizes; for SHARDED, of core
/// `nc_id`'s shard, one of `nr_cores` equal parts of the shared scratchpad
/// (a remainder belongs to no shard); for MAIN, a buffer of its own
/// (`offset` 0).
fn decode_scratch(
    m: &MemRef,
    offset: u64,
    w1: u64,
    hdr: &PlanHeader,
    info: &ArchInfo,
) -> Result<Placement> {
    let (backing, nc) = (w1 as u32, (w1 >> 32) as u32);
    let (backing, base, limit) = match backing {
        BACKING_LOCAL if nc == 0 => (Backing::Local, 0, hdr.local_scratchpad_size),
        BACKING_SHARED if nc == 0 => (Backing::Shared, 0, hdr.shared_scratchpad_size),
        BACKING_SHARDED if (nc as usize) < info.nr_cores => {
            let shard = hdr.shared_scratchpad_size / info.nr_cores as u64;
            (Backing::Shared, u64::from(nc) * shard, shard)
        }
        BACKING_MAIN if nc == 0 && offset == 0 && m.size > 0 => return Ok(Placement::Alloc),
        _ => return Err(EINVAL),
    };
    match offset.checked_add(m.size) {
        Some(end) if end <= limit && m.size > 0 => Ok(Placement::Scratch {
            backing,
            offset: base + offset,
        }),
        _ => Err(EINVAL),
    }
}

/// Checks one raw record on its own and decodes it.
fn check_record(
    m: &MemRef,
    src: &(impl BlobSource + ?Sized),
    hdr: &PlanHeader,
    info: &ArchInfo,
) -> Result<Checked> {
    let ty = check_shape(m)?;
    check_payload(m, ty, src)?;
    let (placement, list) = decode_union(m, ty, src, hdr, info)?;
    let record = Record {
        mr_type: ty,
        var_id: m.var_id,
        size: m.size,
        alignment: m.alignment,
        data_off: m.data_off,
        data_len: m.data_len,
        placement,
    };
    Ok(Checked { record, list })
}

/// Reads and checks the header of the plan in `src`.
fn read_header(src: &(impl BlobSource + ?Sized)) -> Result<PlanHeader> {
    let hdr: PlanHeader = read_struct(src, 0)?;
    if hdr.rsvd != 0 || hdr.nmem == 0 {
        return Err(EINVAL);
    }
    if hdr.nmem > MAX_PLAN_RECORDS {
        return Err(E2BIG);
    }
    src.check(
        size_of::<PlanHeader>() as u64,
        u64::from(hdr.nmem) * size_of::<MemRef>() as u64,
    )?;
    Ok(hdr)
}

/// Reads and checks every record, in batches, and notes where the LIST and
/// PTR_TABLE records keep their tables.
fn read_records(
    src: &(impl BlobSource + ?Sized),
    hdr: &PlanHeader,
    info: &ArchInfo,
) -> Result<(KVVec<Record>, KVVec<RawList>)> {
    let nmem = hdr.nmem as usize;
    let mut records = KVVec::with_capacity(nmem, GFP_KERNEL_ACCOUNT)?;
    let mut lists = KVVec::new();
    // Buffers on the heap: kernel stacks are small.
    let mut batch = KVec::from_elem(MemRef::default(), RECORD_BATCH, GFP_KERNEL_ACCOUNT)?;
    let mut pos = 0usize;
    while pos < nmem {
        resched::checkpoint()?;
        let n = (nmem - pos).min(RECORD_BATCH);
        let off = (size_of::<PlanHeader>() + pos * size_of::<MemRef>()) as u64;
        src.read_at(off, batch[..n].as_bytes_mut())?;
        for m in &batch[..n] {
            let c = check_record(m, src, hdr, info)?;
            if let Some((ids_off, count)) = c.list {
                let pos = records.len();
                lists.push(
                    RawList {
                        pos,
                        ids_off,
                        count,
                    },
                    GFP_KERNEL_ACCOUNT,
                )?;
            }
            records.push(c.record, GFP_KERNEL_ACCOUNT)?;
        }
        pos += n;
    }
    Ok((records, lists))
}

/// Points every pointer at the position of the non-pointer record its chain
/// ends at: `ENOENT` for an unknown target, `EINVAL` for a cycle.
fn resolve_pointers(records: &mut [Record], index: &VarIndex) -> Result {
    let nmem = records.len();
    for (i, rec) in records.iter_mut().enumerate() {
        if let Placement::Ptr { target } = rec.placement {
            let t = index.get(target).ok_or(ENOENT)?;
            if t == i {
                return Err(EINVAL);
            }
            rec.placement = Placement::Ptr { target: t as u32 };
        }
    }
    // Each chain is walked to its end once, then every pointer on it is
    // pointed straight at that end: later walks through it take one step, so
    // all chains together cost O(n). A walk longer than the plan is a cycle.
    for i in 0..nmem {
        if i % resched::EVERY == 0 {
            resched::checkpoint()?;
        }
        let mut end = i;
        let mut steps = 0;
        while let Placement::Ptr { target } = records[end].placement {
            end = target as usize;
            steps += 1;
            if steps > nmem {
                return Err(EINVAL);
            }
        }
        let mut cur = i;
        while let Placement::Ptr { target } = records[cur].placement {
            records[cur].placement = Placement::Ptr { target: end as u32 };
            cur = target as usize;
        }
    }
    Ok(())
}

/// Reads the tables of `lists`, resolves their ids to record positions and
/// checks their kinds; returns every table's positions, concatenated.
fn read_lists(
    src: &(impl BlobSource + ?Sized),
    records: &mut [Record],
    lists: &[RawList],
    index: &VarIndex,
) -> Result<KVVec<u32>> {
    let total: u64 = lists.iter().map(|l| u64::from(l.count)).sum();
    if total > u64::from(MAX_LIST_COUNT) * 4 {
        return Err(E2BIG);
    }
    let mut targets = KVVec::with_capacity(total as usize, GFP_KERNEL_ACCOUNT)?;
    let mut ids = KVec::from_elem(0u32, LIST_ID_BATCH, GFP_KERNEL_ACCOUNT)?;
    for l in lists {
        let first = targets.len() as u32;
        let table = records[l.pos].mr_type == MrType::PtrTable;
        let mut done = 0u32;
        while done < l.count {
            resched::checkpoint()?;
            let n = (l.count - done).min(LIST_ID_BATCH as u32) as usize;
            let off = l.ids_off + u64::from(done) * 4;
            src.read_at(off, AsBytes::as_bytes_mut(&mut ids[..n]))?;
            for &id in &ids[..n] {
                let t = index.get(u32::from_le(id)).ok_or(ENOENT)?;
                if t == l.pos || (table && records[t].mr_type != MrType::List) {
                    return Err(EINVAL);
                }
                targets.push(t as u32, GFP_KERNEL_ACCOUNT)?;
            }
            done += n as u32;
        }
        let count = l.count;
        records[l.pos].placement = Placement::List { first, count };
    }
    Ok(targets)
}

/// Reads and validates the whole plan in `src` for a device of arch `info`.
pub(crate) fn parse(src: &(impl BlobSource + ?Sized), info: &ArchInfo) -> Result<ParsedPlan> {
    let hdr = read_header(src)?;
    let (mut records, lists) = read_records(src, &hdr, info)?;
    let index = VarIndex::new(records.iter().map(|r| r.var_id), records.len())?;
    resolve_pointers(&mut records, &index)?;
    let list_targets = read_lists(src, &mut records, &lists, &index)?;
    Ok(ParsedPlan {
        local_scratch: hdr.local_scratchpad_size,
        shared_scratch: hdr.shared_scratchpad_size,
        records,
        list_targets,
        index,
    })
}

#[kunit_tests(neuron_hbm_plan_parse)]
mod tests {
    use super::*;
    use crate::{
        arch::V2,
        plan::test_blob::TestBlob,
        uapi::{MR_INVALID, MR_REMOTE},
    };

    const BUF: MrType = MrType::Buffer;

    fn parse_blob(b: &TestBlob) -> Result<ParsedPlan> {
        let bytes = b.build()?;
        parse(&bytes[..], &V2)
    }

    fn errno(b: &TestBlob) -> Option<Error> {
        parse_blob(b).err()
    }

    /// A valid two-record plan to break one field at a time.
    fn base() -> Result<TestBlob> {
        let mut b = TestBlob::new(1 << 20, 0);
        b.rec(BUF, 1, 4096)?;
        b.rec(BUF, 2, 8192)?;
        Ok(b)
    }

    #[test]
    fn every_kind_parses() -> Result {
        let mut b = TestBlob::new(1 << 20, 1 << 20);
        let allocating = [
            MrType::Input,
            MrType::Output,
            MrType::Buffer,
            MrType::BufferStaged,
            MrType::TmpBuf,
        ];
        for (i, ty) in allocating.into_iter().enumerate() {
            b.rec(ty, i as u32 + 1, 4096)?;
        }
        let v = b.rec(MrType::VirtualTmpBuf, 10, 4096)?;
        b.recs[v].u = [8192, 1];
        let p = b.rec(MrType::Ptr, 11, 0)?;
        b.recs[p].u = [3, 0];
        let l = b.rec(MrType::List, 12, 64)?;
        b.list(l, &[1, 2, 11])?;
        let t = b.rec(MrType::PtrTable, 13, 8)?;
        b.list(t, &[12])?;
        let s = b.rec(MrType::Sb, 14, 4096)?;
        b.recs[s].u = [1, 1 << 20];
        let r = b.rec(MrType::Remote, 15, 0)?;
        b.recs[r].u = [7 | (3 << 32), 0];
        b.name(0, b"input0")?;
        b.payload(2, &[1, 2, 3])?;
        let plan = parse_blob(&b)?;
        assert_eq!(plan.records.len(), 11);
        assert_eq!(plan.local_scratch, 1 << 20);
        assert_eq!(
            plan.records[5].placement,
            Placement::Scratch {
                backing: Backing::Shared,
                offset: 8192
            }
        );
        assert_eq!(plan.records[6].placement, Placement::Ptr { target: 2 });
        assert_eq!(
            plan.records[7].placement,
            Placement::List { first: 0, count: 3 }
        );
        assert_eq!(&plan.list_targets[..], &[0, 1, 6, 7]);
        assert_eq!(
            plan.records[9].placement,
            Placement::Sb {
                nc: 1,
                offset: 1 << 20
            }
        );
        assert_eq!(
            plan.records[10].placement,
            Placement::Remote {
                var_id: 7,
                plan_id: 3
            }
        );
        assert_eq!(plan.records[2].data_len, 3);
        assert_eq!(plan.index.get(14), Some(9));
        Ok(())
    }

    #[test]
    fn header_rules() -> Result {
        let mut b = base()?;
        b.hdr.rsvd = 1;
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = TestBlob::new(0, 0);
        b.hdr.nmem = 0;
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = base()?;
        b.hdr.nmem = MAX_PLAN_RECORDS + 1;
        assert_eq!(errno(&b), Some(E2BIG));
        // More records announced than the blob holds.
        let mut b = base()?;
        b.hdr.nmem = 3;
        assert_eq!(errno(&b), Some(EINVAL));
        // Shorter than a header.
        assert_eq!(parse(&[0u8; 23][..], &V2).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn record_field_rules() -> Result {
        type Break = fn(&mut MemRef);
        let cases: [(Break, Error); 12] = [
            (|m| m.flags = 1, EINVAL),
            (|m| m.mr_type = MR_INVALID, EINVAL),
            (|m| m.mr_type = MR_REMOTE + 1, EINVAL),
            (|m| m.dtype = [b'a'; 16], EINVAL),
            (|m| m.ndim = 9, EINVAL),
            (|m| m.shape[0] = 4, EINVAL), // past ndim 0
            (|m| m.alignment = 3, EINVAL),
            (|m| m.alignment = 2 << 30, E2BIG),
            (|m| m.size = 0, EINVAL),
            (|m| m.u[0] = 1, EINVAL),      // union must be zero for a buffer
            (|m| m.data_off = 24, EINVAL), // offset without length
            (|m| m.name_off = 1 << 40, EINVAL),
        ];
        for (break_it, want) in cases {
            let mut b = base()?;
            break_it(&mut b.recs[1]);
            assert_eq!(errno(&b), Some(want));
        }
        // The boundaries on the accepted side.
        let mut b = base()?;
        b.recs[1].dtype[..15].copy_from_slice(b"bfloat16_x4_abc");
        b.recs[1].dtype[15] = 0;
        b.recs[1].ndim = 8;
        b.recs[1].shape = [1; 8];
        b.recs[1].alignment = 1 << 30;
        assert!(parse_blob(&b).is_ok());
        Ok(())
    }

    #[test]
    fn payload_and_name_rules() -> Result {
        let mut b = base()?;
        b.payload(0, &[0u8; 64])?;
        assert!(parse_blob(&b).is_ok());
        b.recs[0].data_len = 4097; // more than the variable
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = base()?;
        b.payload(0, &[0u8; 64])?;
        b.recs[0].data_len = 65; // past the end of the blob
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = base()?;
        let s = b.rec(MrType::Sb, 3, 64)?;
        b.payload(s, &[1])?; // no payload on a State Buffer window
        assert_eq!(errno(&b), Some(EINVAL));
        // A name must end inside the blob.
        let mut b = base()?;
        b.name(0, b"ok")?;
        assert!(parse_blob(&b).is_ok());
        let mut bytes = b.build()?;
        let last = bytes.len() - 1;
        bytes[last] = b'x';
        assert_eq!(parse(&bytes[..], &V2).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn duplicate_var_id() -> Result {
        let mut b = base()?;
        b.recs[1].var_id = 1;
        assert_eq!(errno(&b), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn pointer_rules() -> Result {
        let mut b = base()?;
        let p = b.rec(MrType::Ptr, 3, 0)?;
        b.recs[p].u = [99, 0];
        assert_eq!(errno(&b), Some(ENOENT));
        b.recs[p].u = [3, 0];
        assert_eq!(errno(&b), Some(EINVAL)); // itself
                                             // A chain 4 -> 3 -> 1 resolves to record 0; a cycle 3 <-> 4 is refused.
        b.recs[p].u = [1, 0];
        let q = b.rec(MrType::Ptr, 4, 0)?;
        b.recs[q].u = [3, 0];
        let plan = parse_blob(&b)?;
        assert_eq!(plan.records[q].placement, Placement::Ptr { target: 0 });
        b.recs[p].u = [4, 0];
        assert_eq!(errno(&b), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn list_rules() -> Result {
        let mut b = base()?;
        let l = b.rec(MrType::List, 3, 16)?;
        b.list(l, &[1, 2])?;
        assert!(parse_blob(&b).is_ok());
        b.recs[l].size = 15; // smaller than its entries
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[l].size = 16;
        b.recs[l].u[0] = 0;
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[l].u[0] = u64::from(MAX_LIST_COUNT) + 1;
        assert_eq!(errno(&b), Some(E2BIG));
        b.recs[l].u[0] = 3; // ids run past the blob
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = base()?;
        let l = b.rec(MrType::List, 3, 16)?;
        b.list(l, &[1, 9])?;
        assert_eq!(errno(&b), Some(ENOENT));
        let mut b = base()?;
        let l = b.rec(MrType::List, 3, 16)?;
        b.list(l, &[1, 3])?;
        assert_eq!(errno(&b), Some(EINVAL)); // lists itself
                                             // A pointer table lists lists only.
        let mut b = base()?;
        let l = b.rec(MrType::List, 3, 16)?;
        b.list(l, &[1, 2])?;
        let t = b.rec(MrType::PtrTable, 4, 16)?;
        b.list(t, &[3, 1])?;
        assert_eq!(errno(&b), Some(EINVAL));
        b.list(t, &[3])?;
        assert!(parse_blob(&b).is_ok());
        Ok(())
    }

    #[test]
    fn scratch_and_sbuf_windows() -> Result {
        let mut b = base()?;
        let v = b.rec(MrType::VirtualTmpBuf, 3, 4096)?;
        b.recs[v].u = [(1 << 20) - 4096, 0];
        assert!(parse_blob(&b).is_ok());
        b.recs[v].u = [(1 << 20) - 4095, 0]; // past the local scratchpad
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 1]; // the shared scratchpad is empty
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 1 << 32]; // a core named outside SHARDED
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 4];
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [u64::MAX, 0];
        assert_eq!(errno(&b), Some(EINVAL));
        let mut b = base()?;
        let s = b.rec(MrType::Sb, 3, 4096)?;
        b.recs[s].u = [1, SBUF_SIZE - 4096];
        assert!(parse_blob(&b).is_ok());
        b.recs[s].u = [1, SBUF_SIZE - 4095];
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[s].u = [2, 0]; // V2 has cores 0 and 1
        assert_eq!(errno(&b), Some(EINVAL));
        Ok(())
    }

    /// SHARDED: a window of core `nc_id`'s shard, one of V2's two halves of
    /// the shared scratchpad, never past it; MAIN: a buffer of its own.
    #[test]
    fn sharded_and_main_backings() -> Result {
        let mut b = TestBlob::new(0, 3 * 8192 + 1);
        let v = b.rec(MrType::VirtualTmpBuf, 1, 4096)?;
        let window = |b: &TestBlob| match parse_blob(b)?.records[0].placement {
            Placement::Scratch {
                backing: Backing::Shared,
                offset,
            } => Ok(offset),
            _ => Err(EINVAL),
        };
        // Shards of 12 KiB; the last byte belongs to none.
        b.recs[v].u = [8192, 2];
        assert_eq!(window(&b), Ok(8192));
        b.recs[v].u = [8192, 2 | (1 << 32)];
        assert_eq!(window(&b), Ok(12288 + 8192));
        b.recs[v].u = [8193, 2 | (1 << 32)]; // past core 1's shard
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [8193, 2]; // into core 1's shard
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 2 | (2 << 32)]; // V2 has cores 0 and 1
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 3];
        let p = parse_blob(&b)?;
        assert_eq!(p.records[0].placement, Placement::Alloc);
        assert!(p.records[0].allocates());
        b.recs[v].u = [4096, 3]; // MAIN takes no offset
        assert_eq!(errno(&b), Some(EINVAL));
        b.recs[v].u = [0, 3 | (1 << 32)]; // nor a core
        assert_eq!(errno(&b), Some(EINVAL));
        Ok(())
    }
}
