//! The validation PLAN_LOAD performs before anything is allocated or copied,
//! mirrored here so a user gets the same answer (and errno) before the ioctl.
//!
//! Rules (errno in brackets):
//! - blob at least the 24-byte header, header `rsvd` zero [EINVAL]
//! - 1 <= nmem [EINVAL], nmem <= NHBM_MAX_PLAN_RECORDS [E2BIG]
//! - the nmem records inside the blob [EINVAL]
//! - per record: mr_type 1..=11, flags zero [EINVAL]; name_off 0 or a name
//!   inside the blob whose NUL comes within NAME_MAX bytes [EINVAL]; dtype at
//!   most 15 characters plus NUL [EINVAL]; ndim <= 8 and shape entries past
//!   ndim zero [EINVAL]; alignment 0 or a power of two [EINVAL], at most
//!   NHBM_MAX_ALIGNMENT [E2BIG]; data_len <= size, (data_off, data_len) inside
//!   the blob, data_off 0 when data_len is 0, payloads only on the kinds with
//!   their own HBM allocation other than lists [EINVAL]; union fields the kind
//!   does not use, and every `rsvd`, zero [EINVAL]; var_id unique [EINVAL]
//! - per kind: INPUT/OUTPUT/BUFFER/BUFFER_STAGED/TMP_BUF size > 0 [EINVAL];
//!   VIRTUAL_TMP_BUF backing 0..=3, nc_id zero but for SHARDED, size > 0,
//!   offset + size inside the scratchpad (LOCAL, SHARED), inside core
//!   nc_id's shard of the shared one when the device is known (SHARDED,
//!   nc_id below the core count), offset 0 (MAIN) [EINVAL]; LIST/PTR_TABLE count <= NHBM_MAX_LIST_COUNT [E2BIG], count > 0,
//!   ids inside the blob, size >= 8 x count [EINVAL]; all lists together at
//!   most 4 x NHBM_MAX_LIST_COUNT ids [E2BIG]; SB size > 0 [EINVAL], and when
//!   the device is known offset + size inside the SBUF and nc_id below the
//!   core count [EINVAL]
//! - references: PTR targets and list entries exist in the plan [ENOENT]; a
//!   record does not reference itself, PTR chains end at a non-PTR, PTR_TABLE
//!   entries are MR_LIST records [EINVAL]. MR_REMOTE's plan is only known to
//!   the kernel [ENOENT].
//!
//! Every sum is computed without overflow.

use std::collections::HashMap;

use crate::error::PlanError;
use crate::uapi::*;

/// Device properties some rules depend on; `None` skips the rule (the kernel
/// will still apply it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// NeuronCores on the device (MR_SB's `nc_id` must be below).
    pub nr_cores: Option<u32>,
    /// Bytes of each core's State Buffer (MR_SB must fit).
    pub sbuf_size: Option<u64>,
}

/// Bytes of each NeuronCore's State Buffer on every arch (`SBUF_SIZE` in
/// rust/arch.rs).
pub const SBUF_SIZE: u64 = 32 << 20;

impl Limits {
    /// The limits of a device of arch `name` ("v2", "v3" or "v4", any case):
    /// 2 NeuronCores on V2, 8 on V3 and V4, each with a [`SBUF_SIZE`] State
    /// Buffer (rust/arch.rs). `None` for another name.
    pub fn for_arch_name(name: &str) -> Option<Self> {
        let cores = match name.to_ascii_lowercase().as_str() {
            "v2" => 2,
            "v3" | "v4" => 8,
            _ => return None,
        };
        Some(Limits {
            nr_cores: Some(cores),
            sbuf_size: Some(SBUF_SIZE),
        })
    }

    /// The limits DEVICE_INFO reports.
    pub fn from_device_info(info: &DeviceInfo) -> Self {
        Limits {
            nr_cores: Some(info.nr_cores),
            sbuf_size: Some(info.sbuf_size),
        }
    }
}

/// Longest record name the kernel reads, NUL included.
pub const NAME_MAX: usize = 256;

/// Kinds that take HBM from the pool for their own storage.
pub fn allocates_from_pool(mr_type: u32) -> bool {
    matches!(
        mr_type,
        MR_INPUT | MR_OUTPUT | MR_BUFFER | MR_BUFFER_STAGED | MR_TMP_BUF
    )
}

/// Kinds that may carry a payload uploaded at load (lists are written by the
/// kernel, so they take none).
pub fn takes_payload(mr_type: u32) -> bool {
    allocates_from_pool(mr_type)
}

/// Whether a name starts at `off` with its NUL within NAME_MAX bytes.
fn name_ok(blob: &[u8], off: u64) -> bool {
    let Some(start) = usize::try_from(off).ok().filter(|&s| s < blob.len()) else {
        return false;
    };
    let end = blob.len().min(start + NAME_MAX);
    blob[start..end].contains(&0)
}

/// Whether `[off, off + len)` lies inside a blob of `blob_len` bytes.
fn in_blob(off: u64, len: u64, blob_len: usize) -> bool {
    off.checked_add(len)
        .is_some_and(|end| end <= blob_len as u64)
}

/// The `count` var ids of a list record. The caller has checked the bounds.
pub(crate) fn list_ids(blob: &[u8], r: &MemRef) -> Vec<u32> {
    let l = r.u.list();
    let start = l.ids_off as usize;
    (0..l.count as usize)
        .map(|i| u32::from_le_bytes(blob[start + 4 * i..start + 4 * i + 4].try_into().unwrap()))
        .collect()
}

/// A NUL-terminated string at `off`, or None when it runs past the end.
pub(crate) fn cstr_at(blob: &[u8], off: u64) -> Option<&[u8]> {
    let start = usize::try_from(off).ok().filter(|&s| s < blob.len())?;
    let len = blob[start..].iter().position(|&c| c == 0)?;
    Some(&blob[start..start + len])
}

/// The dtype bytes before the NUL, or None when the field has no NUL.
pub(crate) fn dtype_str(r: &MemRef) -> Option<&[u8]> {
    let len = r.dtype.iter().position(|&c| c == 0)?;
    Some(&r.dtype[..len])
}

/// Checks a plan blob against every rule PLAN_LOAD applies before allocating.
/// On success returns the blob taken apart.
pub fn validate(blob: &[u8], limits: &Limits) -> Result<RawPlan, PlanError> {
    let header = PlanHeader::decode(blob)
        .ok_or_else(|| PlanError::einval("blob shorter than the 24-byte plan header"))?;
    if header.rsvd != 0 {
        return Err(PlanError::einval("plan header rsvd is not zero"));
    }
    if header.nmem == 0 {
        return Err(PlanError::einval(
            "nmem is 0: a plan has at least one record",
        ));
    }
    if header.nmem > MAX_PLAN_RECORDS {
        return Err(PlanError::new(
            libc::E2BIG,
            format!(
                "nmem {} exceeds NHBM_MAX_PLAN_RECORDS ({MAX_PLAN_RECORDS})",
                header.nmem
            ),
        ));
    }
    let raw = RawPlan::from_bytes(blob)?;

    let mut by_id: HashMap<u32, usize> = HashMap::with_capacity(raw.records.len());
    for (i, r) in raw.records.iter().enumerate() {
        check_record(blob, &header, limits, i, r)?;
        if let Some(first) = by_id.insert(r.var_id, i) {
            return Err(PlanError::at(
                libc::EINVAL,
                i,
                r.var_id,
                format!("duplicate var_id (also record {first})"),
            ));
        }
    }
    let listed: u64 = raw
        .records
        .iter()
        .filter(|r| matches!(r.mr_type, MR_LIST | MR_PTR_TABLE))
        .map(|r| u64::from(r.u.list().count))
        .sum();
    if listed > 4 * u64::from(MAX_LIST_COUNT) {
        return Err(PlanError::new(
            libc::E2BIG,
            format!("the lists hold {listed} ids, over 4 x NHBM_MAX_LIST_COUNT"),
        ));
    }
    for (i, r) in raw.records.iter().enumerate() {
        check_references(blob, &raw.records, &by_id, i, r)?;
    }
    Ok(raw)
}

/// Checks record `i` alone: its common fields, its payload, then the rules
/// of its kind.
fn check_record(
    blob: &[u8],
    header: &PlanHeader,
    limits: &Limits,
    i: usize,
    r: &MemRef,
) -> Result<(), PlanError> {
    check_fields(blob, r)
        .and_then(|()| check_payload(blob, r))
        .and_then(|()| check_kind(blob, header, limits, r))
        .map_err(|e| PlanError::at(e.errno, i, r.var_id, e.rule))
}

/// A broken rule of the record being checked, which the caller names.
fn broken(errno: i32, rule: String) -> Result<(), PlanError> {
    Err(PlanError::new(errno, rule))
}

/// An EINVAL rule of the record being checked, which the caller names.
fn einval(rule: String) -> Result<(), PlanError> {
    broken(libc::EINVAL, rule)
}

/// The fields every kind shares: mr_type, flags, name, dtype, shape and
/// alignment.
fn check_fields(blob: &[u8], r: &MemRef) -> Result<(), PlanError> {
    if r.mr_type == MR_INVALID || r.mr_type > MR_REMOTE {
        return einval(format!("mr_type {} is not 1..=11", r.mr_type));
    }
    if r.flags != 0 {
        return einval(format!("flags {:#x} is not zero", r.flags));
    }
    if r.name_off != 0 && !name_ok(blob, r.name_off) {
        return einval(format!(
            "name at {:#x} is not NUL-terminated within {NAME_MAX} bytes inside the blob",
            r.name_off
        ));
    }
    if dtype_str(r).is_none() {
        return einval("dtype has 16 or more characters (at most 15 + NUL)".into());
    }
    if r.ndim as usize > MAX_NDIM {
        return einval(format!("ndim {} exceeds 8", r.ndim));
    }
    if r.shape[r.ndim as usize..].iter().any(|&s| s != 0) {
        return einval("shape entries past ndim are not zero".into());
    }
    if r.alignment != 0 && !r.alignment.is_power_of_two() {
        return einval(format!(
            "alignment {:#x} is not a power of two",
            r.alignment
        ));
    }
    if r.alignment > MAX_ALIGNMENT {
        return broken(
            libc::E2BIG,
            format!(
                "alignment {:#x} exceeds NHBM_MAX_ALIGNMENT (1 GiB)",
                r.alignment
            ),
        );
    }
    Ok(())
}

/// The payload: data_off 0 without one; otherwise on a kind that takes
/// one, within `size`, inside the blob.
fn check_payload(blob: &[u8], r: &MemRef) -> Result<(), PlanError> {
    if r.data_len == 0 && r.data_off != 0 {
        return einval(format!(
            "data_off {:#x} without a payload (data_len 0)",
            r.data_off
        ));
    }
    if r.data_len > 0 {
        if !takes_payload(r.mr_type) {
            return einval(format!(
                "a payload on {} (which allocates no HBM)",
                mr_type_name(r.mr_type)
            ));
        }
        if r.data_len > r.size {
            return einval(format!("data_len {} exceeds size {}", r.data_len, r.size));
        }
        if !in_blob(r.data_off, r.data_len, blob.len()) {
            return einval(format!(
                "payload [{:#x}, +{:#x}) is outside the {}-byte blob",
                r.data_off,
                r.data_len,
                blob.len()
            ));
        }
    }
    Ok(())
}

/// The rules of the record's kind (mr_type already checked to be 1..=11).
fn check_kind(
    blob: &[u8],
    header: &PlanHeader,
    limits: &Limits,
    r: &MemRef,
) -> Result<(), PlanError> {
    match r.mr_type {
        MR_INPUT | MR_OUTPUT | MR_BUFFER | MR_BUFFER_STAGED | MR_TMP_BUF => {
            if r.size == 0 {
                return einval("size is 0 on a record that allocates HBM".into());
            }
            if r.u.raw() != [0, 0] {
                return einval("union is not zero for this kind".into());
            }
            Ok(())
        }
        MR_VIRTUAL_TMP_BUF => check_vtmp(header, limits, r),
        MR_PTR => {
            let p = r.u.ptr();
            if p.rsvd != 0 || p.rsvd2 != 0 {
                return einval("ptr.rsvd/rsvd2 is not zero".into());
            }
            if p.target_var_id == r.var_id {
                return einval("MR_PTR targets itself".into());
            }
            Ok(())
        }
        MR_LIST | MR_PTR_TABLE => check_list(blob, r),
        MR_SB => check_sb(limits, r),
        MR_REMOTE => {
            if r.u.remote().rsvd != 0 {
                return einval("remote.rsvd is not zero".into());
            }
            Ok(())
        }
        _ => unreachable!(),
    }
}

/// MR_VIRTUAL_TMP_BUF: a backing of 0..=3, size > 0; a window inside its
/// scratchpad, or inside its core's shard of the shared one (when the
/// device is known: else inside the shared scratchpad), or MAIN at offset 0.
fn check_vtmp(header: &PlanHeader, limits: &Limits, r: &MemRef) -> Result<(), PlanError> {
    let v = r.u.vtmp();
    if v.backing > BACKING_MAIN {
        return einval(format!("backing {} is not 0..=3", v.backing));
    }
    if v.nc_id != 0 && v.backing != BACKING_SHARDED {
        return einval("vtmp.nc_id is not zero outside SHARDED".into());
    }
    if r.size == 0 {
        return einval("size is 0 on a MR_VIRTUAL_TMP_BUF".into());
    }
    let shared = header.shared_scratchpad_size;
    let (base, scratch) = match v.backing {
        BACKING_LOCAL => (0, header.local_scratchpad_size),
        BACKING_SHARED => (0, shared),
        BACKING_MAIN if v.offset != 0 => {
            return einval(format!("offset {:#x} on a MAIN buffer", v.offset))
        }
        BACKING_MAIN => return Ok(()),
        _ => match limits.nr_cores {
            Some(n) if v.nc_id >= n => {
                return einval(format!("nc_id {} but the device has {n} cores", v.nc_id))
            }
            Some(n) => {
                let shard = shared / u64::from(n);
                (u64::from(v.nc_id) * shard, shard)
            }
            None => (0, shared),
        },
    };
    if v.offset.checked_add(r.size).is_none_or(|end| end > scratch) {
        return einval(format!(
            "[{:#x}, +{:#x}) does not fit the {} scratchpad of {:#x} bytes at {:#x}",
            v.offset,
            r.size,
            backing_name(v.backing),
            scratch,
            base
        ));
    }
    Ok(())
}

/// MR_LIST and MR_PTR_TABLE: 1..=NHBM_MAX_LIST_COUNT ids, inside the blob,
/// size at least 8 x count.
fn check_list(blob: &[u8], r: &MemRef) -> Result<(), PlanError> {
    let l = r.u.list();
    if l.rsvd != 0 {
        return einval("list.rsvd is not zero".into());
    }
    if l.count > MAX_LIST_COUNT {
        return broken(
            libc::E2BIG,
            format!(
                "count {} exceeds NHBM_MAX_LIST_COUNT ({MAX_LIST_COUNT})",
                l.count
            ),
        );
    }
    if l.count == 0 {
        return einval(format!("{} lists no variable", mr_type_name(r.mr_type)));
    }
    if r.size < 8 * u64::from(l.count) {
        return einval(format!(
            "size {} is below 8 x count ({})",
            r.size,
            8 * u64::from(l.count)
        ));
    }
    if !in_blob(l.ids_off, 4 * u64::from(l.count), blob.len()) {
        return einval(format!(
            "{} ids at {:#x} are outside the {}-byte blob",
            l.count,
            l.ids_off,
            blob.len()
        ));
    }
    Ok(())
}

/// MR_SB: size > 0, and where the device is known a core it has and a
/// window inside its State Buffer.
fn check_sb(limits: &Limits, r: &MemRef) -> Result<(), PlanError> {
    let s = r.u.sb();
    if s.rsvd != 0 {
        return einval("sb.rsvd is not zero".into());
    }
    if r.size == 0 {
        return einval("size is 0 on a MR_SB".into());
    }
    if let Some(n) = limits.nr_cores {
        if s.nc_id >= n {
            return einval(format!("nc_id {} but the device has {n} cores", s.nc_id));
        }
    }
    if let Some(sbuf) = limits.sbuf_size {
        if s.offset.checked_add(r.size).is_none_or(|end| end > sbuf) {
            return einval(format!(
                "[{:#x}, +{:#x}) does not fit the {:#x}-byte state buffer",
                s.offset, r.size, sbuf
            ));
        }
    }
    Ok(())
}

fn check_references(
    blob: &[u8],
    records: &[MemRef],
    by_id: &HashMap<u32, usize>,
    i: usize,
    r: &MemRef,
) -> Result<(), PlanError> {
    let einval = |rule: String| Err(PlanError::at(libc::EINVAL, i, r.var_id, rule));
    let enoent = |rule: String| Err(PlanError::at(libc::ENOENT, i, r.var_id, rule));
    match r.mr_type {
        MR_PTR => {
            // Follow the chain; it must end at a non-PTR within nmem steps.
            let mut cur = r;
            for _ in 0..records.len() {
                let t = cur.u.ptr().target_var_id;
                match by_id.get(&t) {
                    None => return enoent(format!("MR_PTR target var_id {t} is not in the plan")),
                    Some(&j) if records[j].mr_type == MR_PTR => cur = &records[j],
                    Some(_) => return Ok(()),
                }
            }
            einval("MR_PTR chain loops without reaching a variable".into())
        }
        MR_LIST | MR_PTR_TABLE => {
            for id in list_ids(blob, r) {
                if id == r.var_id {
                    return einval(format!("{} lists itself", mr_type_name(r.mr_type)));
                }
                let Some(&j) = by_id.get(&id) else {
                    return enoent(format!("listed var_id {id} is not in the plan"));
                };
                if r.mr_type == MR_PTR_TABLE && records[j].mr_type != MR_LIST {
                    return einval(format!(
                        "MR_PTR_TABLE lists var_id {id}, a {} (only MR_LIST allowed)",
                        mr_type_name(records[j].mr_type)
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

use crate::blob::RawPlan;

/// "MR_BUFFER" for 3, "mr_type 42" when out of range.
pub fn mr_type_name(t: u32) -> String {
    let n = match t {
        MR_INVALID => "MR_INVALID",
        MR_INPUT => "MR_INPUT",
        MR_OUTPUT => "MR_OUTPUT",
        MR_BUFFER => "MR_BUFFER",
        MR_BUFFER_STAGED => "MR_BUFFER_STAGED",
        MR_TMP_BUF => "MR_TMP_BUF",
        MR_VIRTUAL_TMP_BUF => "MR_VIRTUAL_TMP_BUF",
        MR_PTR => "MR_PTR",
        MR_LIST => "MR_LIST",
        MR_PTR_TABLE => "MR_PTR_TABLE",
        MR_SB => "MR_SB",
        MR_REMOTE => "MR_REMOTE",
        _ => return format!("mr_type {t}"),
    };
    n.to_string()
}

/// "LOCAL" for 0, "backing 9" when out of range.
pub fn backing_name(b: u32) -> String {
    let n = match b {
        BACKING_LOCAL => "LOCAL",
        BACKING_SHARED => "SHARED",
        BACKING_SHARDED => "SHARDED",
        BACKING_MAIN => "MAIN",
        _ => return format!("backing {b}"),
    };
    n.to_string()
}
