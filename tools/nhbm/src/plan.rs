//! A plan as values: what a user builds, what the JSON form holds, and what a
//! blob parses into. `Plan::to_blob` lays it out as PLAN_LOAD expects;
//! `Plan::from_blob` validates a blob and reads it back.

use serde::{Deserialize, Serialize};

use crate::blob::RawPlan;
use crate::error::PlanError;
use crate::uapi::*;
use crate::validate::{cstr_at, dtype_str, list_ids, validate, Limits};

/// `enum nhbm_backing`: the scratchpad behind a MR_VIRTUAL_TMP_BUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backing {
    /// `BACKING_LOCAL`: the plan's local scratchpad.
    Local,
    /// `BACKING_SHARED`: the plan's shared scratchpad.
    Shared,
    /// `BACKING_SHARDED`: the shard of this NeuronCore (`vtmp.nc_id`), one
    /// of the device's cores' equal parts of the shared scratchpad.
    Sharded(u32),
    /// `BACKING_MAIN`: a buffer of its own, placed at load (offset 0).
    Main,
}

impl Backing {
    /// The UAPI value.
    pub fn to_raw(self) -> u32 {
        match self {
            Backing::Local => BACKING_LOCAL,
            Backing::Shared => BACKING_SHARED,
            Backing::Sharded(_) => BACKING_SHARDED,
            Backing::Main => BACKING_MAIN,
        }
    }
    /// The `vtmp.nc_id` it names: the core of a SHARDED backing, else 0.
    pub fn nc_id(self) -> u32 {
        match self {
            Backing::Sharded(nc) => nc,
            _ => 0,
        }
    }
    /// The backing the UAPI values `b` and `nc_id` name, if any.
    pub fn from_raw(b: u32, nc_id: u32) -> Option<Self> {
        Some(match (b, nc_id) {
            (BACKING_LOCAL, 0) => Backing::Local,
            (BACKING_SHARED, 0) => Backing::Shared,
            (BACKING_SHARDED, nc) => Backing::Sharded(nc),
            (BACKING_MAIN, 0) => Backing::Main,
            _ => return None,
        })
    }
}

/// The kind of a record (`mr_type`) with the union fields that kind uses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    /// `MR_INPUT`.
    Input,
    /// `MR_OUTPUT`.
    Output,
    /// `MR_BUFFER`.
    Buffer,
    /// `MR_BUFFER_STAGED`.
    BufferStaged,
    /// `MR_TMP_BUF`.
    TmpBuf,
    /// Scratchpad(backing).base + offset, or (MAIN) HBM of its own.
    VirtualTmpBuf {
        /// Offset into the scratchpad (or shard).
        offset: u64,
        /// Which scratchpad.
        backing: Backing,
    },
    /// Aliases another variable of the same plan.
    Ptr {
        /// var_id of the variable aliased.
        target: u32,
    },
    /// A table of the listed variables' PAs.
    List {
        /// var_ids of the listed variables.
        ids: Vec<u32>,
    },
    /// A table of MR_LIST tables' PAs.
    PtrTable {
        /// var_ids of the MR_LIST tables.
        ids: Vec<u32>,
    },
    /// The State Buffer of core `nc_id` plus `offset`.
    Sb {
        /// The NeuronCore.
        nc_id: u32,
        /// Offset into its State Buffer.
        offset: u64,
    },
    /// A variable of another plan of the same open file.
    Remote {
        /// var_id in the other plan.
        remote_var_id: u32,
        /// plan_id of the other plan.
        remote_plan_id: u32,
    },
}

impl Kind {
    /// The `mr_type` of this kind.
    pub fn mr_type(&self) -> u32 {
        match self {
            Kind::Input => MR_INPUT,
            Kind::Output => MR_OUTPUT,
            Kind::Buffer => MR_BUFFER,
            Kind::BufferStaged => MR_BUFFER_STAGED,
            Kind::TmpBuf => MR_TMP_BUF,
            Kind::VirtualTmpBuf { .. } => MR_VIRTUAL_TMP_BUF,
            Kind::Ptr { .. } => MR_PTR,
            Kind::List { .. } => MR_LIST,
            Kind::PtrTable { .. } => MR_PTR_TABLE,
            Kind::Sb { .. } => MR_SB,
            Kind::Remote { .. } => MR_REMOTE,
        }
    }
}

/// One variable of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The variable's id, unique in the plan.
    pub var_id: u32,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its kind, with the union fields the kind uses.
    #[serde(flatten)]
    pub kind: Kind,
    /// Its size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Its alignment in bytes, a power of two (0: none asked for).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub alignment: u64,
    /// Its element type (informational, under 16 bytes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dtype: String,
    /// Its shape (informational, at most 8 dimensions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<u64>,
    /// Bytes uploaded at load, written as hex in JSON.
    #[serde(
        default,
        rename = "data_hex",
        skip_serializing_if = "Vec::is_empty",
        with = "hex"
    )]
    pub data: Vec<u8>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Record {
    /// A record of `kind`, unnamed, without a payload.
    pub fn new(var_id: u32, kind: Kind, size: u64) -> Self {
        Record {
            var_id,
            name: None,
            kind,
            size,
            alignment: 0,
            dtype: String::new(),
            shape: Vec::new(),
            data: Vec::new(),
        }
    }
    /// An MR_INPUT record.
    pub fn input(var_id: u32, size: u64) -> Self {
        Self::new(var_id, Kind::Input, size)
    }
    /// An MR_OUTPUT record.
    pub fn output(var_id: u32, size: u64) -> Self {
        Self::new(var_id, Kind::Output, size)
    }
    /// An MR_BUFFER record.
    pub fn buffer(var_id: u32, size: u64) -> Self {
        Self::new(var_id, Kind::Buffer, size)
    }
    /// An MR_BUFFER_STAGED record.
    pub fn buffer_staged(var_id: u32, size: u64) -> Self {
        Self::new(var_id, Kind::BufferStaged, size)
    }
    /// An MR_TMP_BUF record.
    pub fn tmp_buf(var_id: u32, size: u64) -> Self {
        Self::new(var_id, Kind::TmpBuf, size)
    }
    /// An MR_VIRTUAL_TMP_BUF record at `offset` into `backing`.
    pub fn virtual_tmp_buf(var_id: u32, size: u64, backing: Backing, offset: u64) -> Self {
        Self::new(var_id, Kind::VirtualTmpBuf { offset, backing }, size)
    }
    /// An MR_PTR record aliasing `target`.
    pub fn ptr(var_id: u32, target: u32, size: u64) -> Self {
        Self::new(var_id, Kind::Ptr { target }, size)
    }
    /// A list sized for its entries (8 bytes each).
    pub fn list(var_id: u32, ids: Vec<u32>) -> Self {
        let size = 8 * ids.len() as u64;
        Self::new(var_id, Kind::List { ids }, size)
    }
    /// A pointer table sized for its entries (8 bytes each).
    pub fn ptr_table(var_id: u32, ids: Vec<u32>) -> Self {
        let size = 8 * ids.len() as u64;
        Self::new(var_id, Kind::PtrTable { ids }, size)
    }
    /// An MR_SB record at `offset` into core `nc_id`'s State Buffer.
    pub fn sb(var_id: u32, size: u64, nc_id: u32, offset: u64) -> Self {
        Self::new(var_id, Kind::Sb { nc_id, offset }, size)
    }
    /// An MR_REMOTE record naming var `remote_var_id` of plan `remote_plan_id`.
    pub fn remote(var_id: u32, size: u64, remote_plan_id: u32, remote_var_id: u32) -> Self {
        Self::new(
            var_id,
            Kind::Remote {
                remote_var_id,
                remote_plan_id,
            },
            size,
        )
    }
    /// With a name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// With an alignment.
    pub fn alignment(mut self, alignment: u64) -> Self {
        self.alignment = alignment;
        self
    }
    /// With an element type and shape.
    pub fn dtype(mut self, dtype: impl Into<String>, shape: &[u64]) -> Self {
        self.dtype = dtype.into();
        self.shape = shape.to_vec();
        self
    }
    /// With a payload, uploaded at load.
    pub fn data(mut self, data: Vec<u8>) -> Self {
        self.data = data;
        self
    }
    /// The record's `mr_type`.
    pub fn mr_type(&self) -> u32 {
        self.kind.mr_type()
    }
}

/// A whole plan: the two scratchpad sizes and the records in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Bytes of the local scratchpad.
    #[serde(default)]
    pub local_scratchpad_size: u64,
    /// Bytes of the shared scratchpad.
    #[serde(default)]
    pub shared_scratchpad_size: u64,
    /// The variables, in blob order.
    pub records: Vec<Record>,
}

/// Appends `bytes` to `data` at an offset aligned to `align`, returning the
/// blob-absolute offset where they start.
fn place(data: &mut Vec<u8>, data_start: usize, bytes: &[u8], align: usize) -> u64 {
    while (data_start + data.len()) % align != 0 {
        data.push(0);
    }
    let off = data_start + data.len();
    data.extend_from_slice(bytes);
    off as u64
}

/// Record `i`'s fields other than the union and the payload, its name
/// appended to `data`. Fails on a dtype of 16 or more bytes, a NUL in the
/// dtype or name, or more than 8 dimensions.
fn raw_fields(
    i: usize,
    r: &Record,
    data: &mut Vec<u8>,
    data_start: usize,
) -> Result<MemRef, PlanError> {
    let err = |rule: String| PlanError::at(libc::EINVAL, i, r.var_id, rule);
    let mut m = MemRef {
        mr_type: r.mr_type(),
        size: r.size,
        alignment: r.alignment,
        var_id: r.var_id,
        ..Default::default()
    };
    if r.dtype.len() >= DTYPE_LEN {
        return Err(err(format!(
            "dtype {:?} has {} characters (at most 15)",
            r.dtype,
            r.dtype.len()
        )));
    }
    if r.dtype.contains('\0') {
        return Err(err("dtype contains a NUL".into()));
    }
    m.dtype[..r.dtype.len()].copy_from_slice(r.dtype.as_bytes());
    if r.shape.len() > MAX_NDIM {
        return Err(err(format!(
            "shape has {} dimensions (at most 8)",
            r.shape.len()
        )));
    }
    m.ndim = r.shape.len() as u32;
    m.shape[..r.shape.len()].copy_from_slice(&r.shape);
    if let Some(name) = &r.name {
        if name.contains('\0') {
            return Err(err("name contains a NUL".into()));
        }
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        m.name_off = place(data, data_start, &bytes, 1);
    }
    Ok(m)
}

/// The union of record `i`, `r`, a list's ids appended to `data`
/// (4-aligned). Fails on a list of more than 2^32 - 1 ids.
fn raw_union(
    i: usize,
    r: &Record,
    data: &mut Vec<u8>,
    data_start: usize,
) -> Result<MemRefUnion, PlanError> {
    Ok(match &r.kind {
        Kind::List { ids } | Kind::PtrTable { ids } => {
            let count = u32::try_from(ids.len())
                .map_err(|_| PlanError::at(libc::E2BIG, i, r.var_id, "more than 2^32 - 1 ids"))?;
            let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
            let ids_off = if count == 0 {
                0
            } else {
                place(data, data_start, &bytes, 4)
            };
            MemRefUnion::from(MrList {
                count,
                rsvd: 0,
                ids_off,
            })
        }
        Kind::Ptr { target } => MemRefUnion::from(MrPtr {
            target_var_id: *target,
            rsvd: 0,
            rsvd2: 0,
        }),
        Kind::Remote {
            remote_var_id,
            remote_plan_id,
        } => MemRefUnion::from(MrRemote {
            remote_var_id: *remote_var_id,
            remote_plan_id: *remote_plan_id,
            rsvd: 0,
        }),
        Kind::VirtualTmpBuf { offset, backing } => MemRefUnion::from(MrVtmp {
            offset: *offset,
            backing: backing.to_raw(),
            nc_id: backing.nc_id(),
        }),
        Kind::Sb { nc_id, offset } => MemRefUnion::from(MrSb {
            nc_id: *nc_id,
            rsvd: 0,
            offset: *offset,
        }),
        _ => MemRefUnion::default(),
    })
}

/// The kind, with its union fields, of a record `validate()` accepted.
fn kind_from_raw(blob: &[u8], m: &MemRef) -> Kind {
    match m.mr_type {
        MR_INPUT => Kind::Input,
        MR_OUTPUT => Kind::Output,
        MR_BUFFER => Kind::Buffer,
        MR_BUFFER_STAGED => Kind::BufferStaged,
        MR_TMP_BUF => Kind::TmpBuf,
        MR_VIRTUAL_TMP_BUF => {
            let v = m.u.vtmp();
            // validate() accepted it, so the backing is 0..=3 and names a
            // core only when SHARDED.
            Kind::VirtualTmpBuf {
                offset: v.offset,
                backing: Backing::from_raw(v.backing, v.nc_id).unwrap(),
            }
        }
        MR_PTR => Kind::Ptr {
            target: m.u.ptr().target_var_id,
        },
        MR_LIST => Kind::List {
            ids: list_ids(blob, m),
        },
        MR_PTR_TABLE => Kind::PtrTable {
            ids: list_ids(blob, m),
        },
        MR_SB => Kind::Sb {
            nc_id: m.u.sb().nc_id,
            offset: m.u.sb().offset,
        },
        MR_REMOTE => Kind::Remote {
            remote_var_id: m.u.remote().remote_var_id,
            remote_plan_id: m.u.remote().remote_plan_id,
        },
        _ => unreachable!("validate() accepts only 1..=11"),
    }
}

/// A record `validate()` accepted, read back with its name and payload.
fn record_from_raw(blob: &[u8], m: &MemRef) -> Record {
    let kind = kind_from_raw(blob, m);
    let name = (m.name_off != 0)
        .then(|| String::from_utf8_lossy(cstr_at(blob, m.name_off).unwrap()).into_owned());
    let dtype = String::from_utf8_lossy(dtype_str(m).unwrap()).into_owned();
    let data = if m.data_len == 0 {
        Vec::new()
    } else {
        blob[m.data_off as usize..(m.data_off + m.data_len) as usize].to_vec()
    };
    Record {
        var_id: m.var_id,
        name,
        kind,
        size: m.size,
        alignment: m.alignment,
        dtype,
        shape: m.shape[..m.ndim as usize].to_vec(),
        data,
    }
}

impl Plan {
    /// An empty plan with these scratchpad sizes.
    pub fn new(local_scratchpad_size: u64, shared_scratchpad_size: u64) -> Self {
        Plan {
            local_scratchpad_size,
            shared_scratchpad_size,
            records: Vec::new(),
        }
    }

    /// Appends a record (builder style).
    pub fn with(mut self, r: Record) -> Self {
        self.records.push(r);
        self
    }

    /// Appends a record.
    pub fn push(&mut self, r: Record) -> &mut Self {
        self.records.push(r);
        self
    }

    /// The record of `var_id`, if the plan has one.
    pub fn record(&self, var_id: u32) -> Option<&Record> {
        self.records.iter().find(|r| r.var_id == var_id)
    }

    /// Lays the plan out as a blob without validating it: the data area holds
    /// every name, then every id list (4-aligned), then every payload
    /// (8-aligned), in record order. Fails only for what the record cannot
    /// express: a dtype of 16 or more bytes, a NUL in a name or dtype, more than
    /// 8 dimensions, or more than 2^32 - 1 records or ids.
    pub fn to_raw(&self) -> Result<RawPlan, PlanError> {
        let nmem = u32::try_from(self.records.len())
            .map_err(|_| PlanError::new(libc::E2BIG, "more than 2^32 - 1 records"))?;
        let data_start = RawPlan::data_start(self.records.len());
        let mut data = Vec::new();
        let mut recs: Vec<MemRef> = Vec::with_capacity(self.records.len());
        for (i, r) in self.records.iter().enumerate() {
            recs.push(raw_fields(i, r, &mut data, data_start)?);
        }
        for (i, (r, m)) in self.records.iter().zip(recs.iter_mut()).enumerate() {
            m.u = raw_union(i, r, &mut data, data_start)?;
        }
        for (r, m) in self.records.iter().zip(recs.iter_mut()) {
            if !r.data.is_empty() {
                m.data_off = place(&mut data, data_start, &r.data, 8);
                m.data_len = r.data.len() as u64;
            }
        }
        Ok(RawPlan {
            header: PlanHeader {
                local_scratchpad_size: self.local_scratchpad_size,
                shared_scratchpad_size: self.shared_scratchpad_size,
                nmem,
                rsvd: 0,
            },
            records: recs,
            data,
        })
    }

    /// The blob PLAN_LOAD takes, after checking every rule the kernel checks
    /// that does not depend on the device.
    pub fn to_blob(&self) -> Result<Vec<u8>, PlanError> {
        self.to_blob_for(&Limits::default())
    }

    /// Like [`Plan::to_blob`], also checking the device-dependent rules.
    pub fn to_blob_for(&self, limits: &Limits) -> Result<Vec<u8>, PlanError> {
        let blob = self.to_raw()?.to_bytes();
        validate(&blob, limits)?;
        Ok(blob)
    }

    /// Validates a blob and reads it back as a plan.
    pub fn from_blob(blob: &[u8]) -> Result<Plan, PlanError> {
        Self::from_blob_for(blob, &Limits::default())
    }

    /// Like [`Plan::from_blob`], also checking the device-dependent rules.
    pub fn from_blob_for(blob: &[u8], limits: &Limits) -> Result<Plan, PlanError> {
        let raw = validate(blob, limits)?;
        let mut plan = Plan::new(
            raw.header.local_scratchpad_size,
            raw.header.shared_scratchpad_size,
        );
        for m in &raw.records {
            plan.records.push(record_from_raw(blob, m));
        }
        Ok(plan)
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serializes")
    }

    /// Reads the JSON form (no validation: use `to_blob` for that).
    pub fn from_json(s: &str) -> Result<Plan, serde_json::Error> {
        serde_json::from_str(s)
    }
}

/// Bytes as a lowercase hex string in JSON.
mod hex {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(bytes.len() * 2);
        for &b in bytes {
            out.push(DIGITS[(b >> 4) as usize] as char);
            out.push(DIGITS[(b & 15) as usize] as char);
        }
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 {
            return Err(D::Error::custom("hex data has an odd number of digits"));
        }
        let nib = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(D::Error::custom(format!(
                "{:?} is not a hex digit",
                c as char
            ))),
        };
        s.as_bytes()
            .chunks(2)
            .map(|p| Ok((nib(p[0])? << 4) | nib(p[1])?))
            .collect()
    }
}
