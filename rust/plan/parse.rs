// SPDX-License-Identifier: GPL-2.0

//! Plan blob -> validated records, with no side effect: nothing is allocated
//! on the device and nothing is written until every rule below holds.
//!
//! Errnos: `EINVAL` malformed, `E2BIG` over a limit, `ENOENT` a reference to a
//! variable the plan does not have, `EOPNOTSUPP` an unsupported backing,
//! `EFAULT` unreadable user memory.

use super::{blob::BlobSource, index::VarIndex};
use crate::{
    arch::{ArchInfo, SBUF_SIZE},
    uapi::{MemRef, PlanHeader, MAX_ALIGNMENT, MAX_LIST_COUNT, MAX_PLAN_RECORDS},
};
use core::mem::size_of;
use kernel::{prelude::*, transmute::FromBytes};

/// Longest record name, NUL included.
pub(crate) const NAME_MAX: usize = 256;
/// Records read from the blob per user copy.
const RECORD_BATCH: usize = 64;

/// `kbin_mr_type_t` (seed 000 §3; 0, 7 and 11 fixed by the format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum MrType {
    /// Graph input.
    Input = 1,
    /// Graph output.
    Output = 2,
    /// Weights or persistent data.
    Buffer = 3,
    /// Staged constant.
    BufferStaged = 4,
    /// Temporary buffer.
    TmpBuf = 5,
    /// Window of a scratchpad.
    VirtualTmpBuf = 6,
    /// Alias of another variable.
    Ptr = 7,
    /// Table of variable addresses.
    List = 8,
    /// Table of list-table addresses.
    PtrTable = 9,
    /// Window of a NeuronCore's State Buffer.
    Sb = 10,
    /// Variable of another plan.
    Remote = 11,
}

impl MrType {
    fn from_u32(v: u32) -> Result<Self> {
        Ok(match v {
            1 => Self::Input,
            2 => Self::Output,
            3 => Self::Buffer,
            4 => Self::BufferStaged,
            5 => Self::TmpBuf,
            6 => Self::VirtualTmpBuf,
            7 => Self::Ptr,
            8 => Self::List,
            9 => Self::PtrTable,
            10 => Self::Sb,
            11 => Self::Remote,
            _ => return Err(EINVAL),
        })
    }

    /// Kinds that get their own HBM allocation.
    pub(crate) fn allocates(self) -> bool {
        matches!(
            self,
            Self::Input
                | Self::Output
                | Self::Buffer
                | Self::BufferStaged
                | Self::TmpBuf
                | Self::List
                | Self::PtrTable
        )
    }
}

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

fn read_struct<T: FromBytes + Default + Copy>(
    src: &(impl BlobSource + ?Sized),
    off: u64,
) -> Result<T> {
    let mut v = T::default();
    // SAFETY: `T: FromBytes` means every byte pattern is a valid `T`, and the
    // slice covers exactly the bytes of `v`, which lives for this scope.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(core::ptr::from_mut(&mut v).cast::<u8>(), size_of::<T>())
    };
    src.read_at(off, bytes)?;
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

/// Checks one raw record on its own and returns its kind.
fn check_record(
    m: &MemRef,
    src: &(impl BlobSource + ?Sized),
    hdr: &PlanHeader,
    info: &ArchInfo,
) -> Result<MrType> {
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
    if m.data_len != 0 {
        if !ty.allocates() || matches!(ty, MrType::List | MrType::PtrTable) || m.data_len > m.size {
            return Err(EINVAL);
        }
        src.check(m.data_off, m.data_len)?;
    } else if m.data_off != 0 {
        return Err(EINVAL);
    }
    check_name(src, m.name_off)?;
    let [w0, w1] = m.u;
    let (lo, hi) = (w0 as u32, (w0 >> 32) as u32);
    match ty {
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
        }
        MrType::Ptr => {
            if hi != 0 || w1 != 0 {
                return Err(EINVAL);
            }
        }
        MrType::Remote => {
            if w1 != 0 {
                return Err(EINVAL);
            }
        }
        MrType::VirtualTmpBuf => {
            let (backing, rsvd) = (w1 as u32, (w1 >> 32) as u32);
            if rsvd != 0 {
                return Err(EINVAL);
            }
            let limit = match backing {
                0 => hdr.local_scratchpad_size,
                1 => hdr.shared_scratchpad_size,
                2 | 3 => return Err(EOPNOTSUPP),
                _ => return Err(EINVAL),
            };
            match w0.checked_add(m.size) {
                Some(end) if end <= limit && m.size > 0 => {}
                _ => return Err(EINVAL),
            }
        }
        MrType::Sb => {
            if hi != 0 || lo as usize >= info.nr_cores {
                return Err(EINVAL);
            }
            match w1.checked_add(m.size) {
                Some(end) if end <= SBUF_SIZE && m.size > 0 => {}
                _ => return Err(EINVAL),
            }
        }
        _ => {
            if w0 != 0 || w1 != 0 {
                return Err(EINVAL);
            }
        }
    }
    Ok(ty)
}

/// Reads and validates the whole plan in `src` for a device of arch `info`.
pub(crate) fn parse(src: &(impl BlobSource + ?Sized), info: &ArchInfo) -> Result<ParsedPlan> {
    let hdr: PlanHeader = read_struct(src, 0)?;
    if hdr.rsvd != 0 || hdr.nmem == 0 {
        return Err(EINVAL);
    }
    if hdr.nmem > MAX_PLAN_RECORDS {
        return Err(E2BIG);
    }
    let nmem = hdr.nmem as usize;
    let rec_size = size_of::<MemRef>() as u64;
    src.check(
        size_of::<PlanHeader>() as u64,
        u64::from(hdr.nmem) * rec_size,
    )?;

    let mut records = KVVec::with_capacity(nmem, GFP_KERNEL)?;
    let mut raw_lists = KVVec::new(); // (position, ids_off, count)
                                      // Buffers on the heap: kernel stacks are small.
    let mut batch = KVec::from_elem(MemRef::default(), RECORD_BATCH, GFP_KERNEL)?;
    let mut pos = 0usize;
    while pos < nmem {
        let n = (nmem - pos).min(RECORD_BATCH);
        let off = size_of::<PlanHeader>() as u64 + pos as u64 * rec_size;
        // SAFETY: `MemRef: FromBytes`, and the slice covers exactly `batch[..n]`.
        let bytes = unsafe {
            core::slice::from_raw_parts_mut(
                batch.as_mut_ptr().cast::<u8>(),
                n * size_of::<MemRef>(),
            )
        };
        src.read_at(off, bytes)?;
        for m in &batch[..n] {
            let ty = check_record(m, src, &hdr, info)?;
            let [w0, w1] = m.u;
            let placement = match ty {
                MrType::VirtualTmpBuf => Placement::Scratch {
                    backing: if w1 as u32 == 0 {
                        Backing::Local
                    } else {
                        Backing::Shared
                    },
                    offset: w0,
                },
                // Targets are record positions; fixed up below once all ids are known.
                MrType::Ptr => Placement::Ptr { target: w0 as u32 },
                MrType::List | MrType::PtrTable => {
                    raw_lists.push((records.len(), w1, w0 as u32), GFP_KERNEL)?;
                    Placement::List {
                        first: 0,
                        count: w0 as u32,
                    }
                }
                MrType::Sb => Placement::Sb {
                    nc: w0 as u32,
                    offset: w1,
                },
                MrType::Remote => Placement::Remote {
                    var_id: w0 as u32,
                    plan_id: (w0 >> 32) as u32,
                },
                _ => Placement::Alloc,
            };
            records.push(
                Record {
                    mr_type: ty,
                    var_id: m.var_id,
                    size: m.size,
                    alignment: m.alignment,
                    data_off: m.data_off,
                    data_len: m.data_len,
                    placement,
                },
                GFP_KERNEL,
            )?;
        }
        pos += n;
    }

    let index = VarIndex::new(records.iter().map(|r| r.var_id), nmem)?;

    // Pointers: resolve ids to positions and follow chains to a non-pointer.
    for i in 0..nmem {
        if let Placement::Ptr { target } = records[i].placement {
            let t = index.get(target).ok_or(ENOENT)?;
            if t == i {
                return Err(EINVAL);
            }
            records[i].placement = Placement::Ptr { target: t as u32 };
        }
    }
    for i in 0..nmem {
        let mut cur = i;
        let mut steps = 0;
        while let Placement::Ptr { target } = records[cur].placement {
            cur = target as usize;
            steps += 1;
            if steps > nmem {
                return Err(EINVAL); // a cycle of pointers
            }
        }
        if cur != i {
            records[i].placement = Placement::Ptr { target: cur as u32 };
        }
    }

    // Lists: read their ids, resolve to positions, check kinds.
    let total: u64 = raw_lists.iter().map(|&(_, _, c)| u64::from(c)).sum();
    if total > u64::from(MAX_LIST_COUNT) * 4 {
        return Err(E2BIG);
    }
    let mut list_targets = KVVec::with_capacity(total as usize, GFP_KERNEL)?;
    let mut ids = KVec::from_elem(0u32, 256, GFP_KERNEL)?;
    for &(i, ids_off, count) in raw_lists.iter() {
        let first = list_targets.len() as u32;
        let table = records[i].mr_type == MrType::PtrTable;
        let mut done = 0u32;
        while done < count {
            let n = (count - done).min(256) as usize;
            // SAFETY: `u32: FromBytes`; the slice covers exactly `ids[..n]`.
            let bytes =
                unsafe { core::slice::from_raw_parts_mut(ids.as_mut_ptr().cast::<u8>(), n * 4) };
            src.read_at(ids_off + u64::from(done) * 4, bytes)?;
            for &id in &ids[..n] {
                let t = index.get(u32::from_le(id)).ok_or(ENOENT)?;
                if t == i || (table && records[t].mr_type != MrType::List) {
                    return Err(EINVAL);
                }
                list_targets.push(t as u32, GFP_KERNEL)?;
            }
            done += n as u32;
        }
        records[i].placement = Placement::List { first, count };
    }

    Ok(ParsedPlan {
        local_scratch: hdr.local_scratchpad_size,
        shared_scratch: hdr.shared_scratchpad_size,
        records,
        list_targets,
        index,
    })
}
