//! The model description (JSON): tensors and the operators that use and
//! define them. Lifetimes are derived from the operators.
//!
//! ```json
//! {
//!   "name": "tiny",
//!   "memories": [{"name": "hbm0", "max_size": 1048576, "arena_alignment": 64}],
//!   "platform": {"min_alignment": 64},
//!   "planner": "greedy",
//!   "planner_options": {"iterations": 1000, "seed": 1, "max_stall_iterations": 200},
//!   "tensors": [
//!     {"id": "x", "dtype": "float32", "shape": [1, 256], "io": "input"},
//!     {"id": "w", "dtype": "bfloat16", "shape": [256, 256], "role": "constant",
//!      "memory": "host", "destination": "hbm0", "data_file": "w.bin"},
//!     {"id": "h", "size": 1024, "alignment": 256},
//!     {"id": "h_view", "size": 512, "alias_of": "h"},
//!     {"id": "y", "dtype": "float32", "shape": [1, 256], "io": "output"}
//!   ],
//!   "operators": [
//!     {"name": "matmul", "uses": ["x", "w"], "defines": ["h"]},
//!     {"name": "relu", "uses": ["h_view"], "defines": ["y"]}
//!   ]
//! }
//! ```
//!
//! `memories` lists the writable memories in spill order with their budgets
//! (default: every HBM channel of the [`Target`], each with the bytes its
//! pools manage; a listed budget is capped at that). A tensor's `memory`
//! pins a scratch or persistent tensor, and is the source memory of a
//! constant; `destination` is a constant's runtime memory when it differs
//! (a staged constant). Constants take their bytes from `data_file` (relative
//! to the model file, exactly `size` bytes), or `"fill": "zeros"`, or else a
//! deterministic pattern derived from the tensor id ([`synthetic_bytes`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::target::Target;

/// Default platform alignment: a 64-byte DMA line.
pub const DEFAULT_MIN_ALIGNMENT: u64 = 64;

/// A graph input or output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Io {
    /// Fed in by the caller.
    Input,
    /// Read back by the caller.
    Output,
}

/// How a constant without a data file is filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fill {
    /// Deterministic bytes derived from the tensor id.
    #[default]
    Pattern,
    /// All zero bytes.
    Zeros,
}

/// One tensor as the description states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorDesc {
    /// Its id, unique in the model.
    pub id: TensorId,
    /// Its size in bytes; may be left out when `dtype` and `shape` give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Its element type (at most 15 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Its shape (at most 8 dimensions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// Scratch (the default), persistent or constant.
    #[serde(default)]
    pub role: ArenaRole,
    /// Whether it is a graph input or output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<Io>,
    /// Per-tensor alignment hint (a power of two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment: Option<u64>,
    /// Pin (scratch, persistent) or source memory (constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryType>,
    /// Runtime memory of a constant, when it differs from `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<MemoryType>,
    /// A constant's bytes, from this file (relative to the description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_file: Option<String>,
    /// How a constant without a data file is filled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Fill>,
    /// Shares the storage of another scratch tensor (its lifetime is merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<TensorId>,
}

impl TensorDesc {
    /// A scratch tensor of `size` bytes with every optional field unset.
    pub fn scratch(id: TensorId, size: u64) -> Self {
        TensorDesc {
            id,
            size: Some(size),
            dtype: None,
            shape: None,
            role: ArenaRole::Scratch,
            io: None,
            alignment: None,
            memory: None,
            destination: None,
            data_file: None,
            fill: None,
            alias_of: None,
        }
    }
}

/// One operator, in execution order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorDesc {
    /// Its name.
    pub name: String,
    /// The tensors it reads.
    #[serde(default)]
    pub uses: Vec<TensorId>,
    /// The tensors it writes.
    #[serde(default)]
    pub defines: Vec<TensorId>,
    /// How long it runs, in any unit the model's operators share (none:
    /// 1). Only the exact planner reads it: its search ranks buffers by
    /// how long they live, in this time rather than in operators
    /// (MiniMalloc's instances come with times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
}

impl OperatorDesc {
    /// An operator named `name` that reads `uses` and writes `defines`,
    /// without a duration.
    pub fn new(name: impl Into<String>, uses: Vec<TensorId>, defines: Vec<TensorId>) -> Self {
        OperatorDesc {
            name: name.into(),
            uses,
            defines,
            duration: None,
        }
    }
}

/// Makes tensor `id` live over operators `first..=last` of `operators`:
/// defined at the first, used at the last.
pub fn live_over(operators: &mut [OperatorDesc], id: &str, first: usize, last: usize) {
    operators[first].defines.push(id.to_string());
    if last > first {
        operators[last].uses.push(id.to_string());
    }
}

/// Properties of the platform every tensor obeys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Platform {
    /// Alignment floor of every tensor (default `DEFAULT_MIN_ALIGNMENT`).
    pub min_alignment: u64,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            min_alignment: DEFAULT_MIN_ALIGNMENT,
        }
    }
}

/// A model description, as its JSON file states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelDesc {
    /// The model's name (the default prefix of the plans written).
    pub name: String,
    /// A line about the model, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Limits on memories (default: the target's channels).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memories: Vec<MemoryConstraint>,
    /// Properties every tensor obeys.
    #[serde(default)]
    pub platform: Platform,
    /// The planner the model asks for.
    #[serde(default)]
    pub planner: MemoryPlannerType,
    /// Its tuning.
    #[serde(default)]
    pub planner_options: PlannerOptions,
    /// Every tensor.
    pub tensors: Vec<TensorDesc>,
    /// Every operator, in execution order.
    pub operators: Vec<OperatorDesc>,
}

impl ModelDesc {
    /// The description of scratch tensors `tensors` over `operators` in
    /// one memory without a budget (`hbm0`), every tensor aligned to
    /// `min_alignment`: the generated and benchmark instances.
    pub fn scratch_only(
        name: impl Into<String>,
        min_alignment: u64,
        tensors: Vec<TensorDesc>,
        operators: Vec<OperatorDesc>,
    ) -> ModelDesc {
        ModelDesc {
            name: name.into(),
            description: None,
            memories: vec![MemoryConstraint::unlimited(MemoryType::Hbm(0))],
            platform: Platform { min_alignment },
            planner: MemoryPlannerType::Exact,
            planner_options: PlannerOptions::default(),
            tensors,
            operators,
        }
    }
}

/// A model description that does not make sense, with the tensor or
/// operator at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelError(pub String);

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModelError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ModelError> {
    Err(ModelError(msg.into()))
}

/// The memories of `desc` on `target` (one per channel where it lists
/// none), each budget capped at its channel's bytes, checked.
fn memories_for(desc: &ModelDesc, target: &Target) -> Result<Vec<MemoryConstraint>, ModelError> {
    let channel_bytes = |m: MemoryType| m.channel().map_or(0, |c| target.channel_bytes(c as usize));
    let memories: Vec<MemoryConstraint> = if desc.memories.is_empty() {
        (0..target.channels() as u32)
            .map(|c| MemoryConstraint {
                name: MemoryType::Hbm(c),
                max_size: Some(channel_bytes(MemoryType::Hbm(c))),
                arena_alignment: None,
            })
            .collect()
    } else {
        desc.memories
            .iter()
            .map(|m| MemoryConstraint {
                max_size: Some(
                    m.max_size
                        .map_or(channel_bytes(m.name), |s| s.min(channel_bytes(m.name))),
                ),
                ..m.clone()
            })
            .collect()
    };
    for (k, m) in memories.iter().enumerate() {
        if !m.name.is_device() {
            return err(format!(
                "memories[{k}]: {} is not writable by the device",
                m.name
            ));
        }
        if channel_bytes(m.name) == 0 {
            return err(format!(
                "memories[{k}]: {} is not a channel of {} ({} channels)",
                m.name,
                target.name,
                target.channels()
            ));
        }
        if memories[..k].iter().any(|o| o.name == m.name) {
            return err(format!("memories[{k}]: {} is listed twice", m.name));
        }
        if let Some(a) = m.arena_alignment {
            if !a.is_power_of_two() {
                return err(format!(
                    "memory {}: arena_alignment {a} is not a power of two",
                    m.name
                ));
            }
        }
    }
    Ok(memories)
}

/// Aliases: the base is a packed scratch tensor at least as large.
fn check_aliases(tensors: &[Tensor], index: &HashMap<&str, usize>) -> Result<(), ModelError> {
    for t in tensors {
        if let Some(base) = &t.desc.alias_of {
            let Some(&b) = index.get(base.as_str()) else {
                return err(format!(
                    "tensor {:?}: alias_of {base:?} is not a tensor",
                    t.id()
                ));
            };
            let bt = &tensors[b];
            if !bt.is_packed_scratch() {
                return err(format!(
                    "tensor {:?}: alias_of {base:?}, which is not a plain scratch tensor",
                    t.id()
                ));
            }
            if t.size > bt.size {
                return err(format!(
                    "tensor {:?}: {} bytes alias {base:?} of {} bytes",
                    t.id(),
                    t.size,
                    bt.size
                ));
            }
        }
    }
    Ok(())
}

/// Every tensor's lifetime from the operators that use or define it; an
/// alias and its base live over the union of theirs
/// ([`merge_alias_lifetimes`]).
fn assign_lifetimes(
    operators: &[OperatorDesc],
    tensors: &mut [Tensor],
    index: &HashMap<&str, usize>,
) -> Result<(), ModelError> {
    for (i, op) in operators.iter().enumerate() {
        for (list, id) in op
            .uses
            .iter()
            .map(|id| ("uses", id))
            .chain(op.defines.iter().map(|id| ("defines", id)))
        {
            let Some(&k) = index.get(id.as_str()) else {
                return err(format!(
                    "operator {i} ({}): {list} unknown tensor {id:?}",
                    op.name
                ));
            };
            if list == "defines" && tensors[k].desc.role == ArenaRole::Constant {
                return err(format!(
                    "operator {i} ({}): defines constant {id:?}",
                    op.name
                ));
            }
            match &mut tensors[k].lifetime {
                Some(l) => l.add_op(i),
                l @ None => *l = Some(TensorLifetime::new(id.clone(), i)),
            }
        }
    }
    merge_alias_lifetimes(tensors, index);
    Ok(())
}

/// An alias and its base share storage: both live over the union of
/// their lifetimes.
fn merge_alias_lifetimes(tensors: &mut [Tensor], index: &HashMap<&str, usize>) {
    for k in 0..tensors.len() {
        let Some(base) = tensors[k].desc.alias_of.clone() else {
            continue;
        };
        let b = index[base.as_str()];
        match (tensors[k].lifetime.clone(), tensors[b].lifetime.clone()) {
            (Some(la), Some(mut lb)) => {
                lb.merge(&la);
                tensors[b].lifetime = Some(lb);
            }
            (Some(la), None) => {
                tensors[b].lifetime = Some(TensorLifetime {
                    tensor_id: base.clone(),
                    ..la
                });
            }
            _ => {}
        }
    }
    for k in 0..tensors.len() {
        if let Some(base) = tensors[k].desc.alias_of.clone() {
            let lb = tensors[index[base.as_str()]].lifetime.clone();
            tensors[k].lifetime = lb.map(|l| TensorLifetime {
                tensor_id: tensors[k].desc.id.clone(),
                ..l
            });
        }
    }
}

impl Tensor {
    /// `t` checked on its own (size, alignment, role; not its id), its
    /// alignment at least `platform`'s, without a lifetime yet; the
    /// memories it names must be ones `is_writable` admits.
    fn checked(
        t: &TensorDesc,
        platform: &Platform,
        is_writable: &impl Fn(MemoryType) -> bool,
    ) -> Result<Tensor, ModelError> {
        let (size, elem) = checked_size(t)?;
        if let Some(a) = t.alignment {
            if !a.is_power_of_two() || a > nhbm::uapi::MAX_ALIGNMENT {
                return Err(tensor_error(
                    t,
                    format!("alignment {a} is not a power of two up to 1 GiB"),
                ));
            }
        }
        check_role(t, is_writable)?;
        let alignment = platform
            .min_alignment
            .max(elem.unwrap_or(1))
            .max(t.alignment.unwrap_or(1));
        Ok(Tensor {
            desc: t.clone(),
            size,
            alignment,
            lifetime: None,
        })
    }
}

/// The error `msg` about tensor `t`.
fn tensor_error(t: &TensorDesc, msg: String) -> ModelError {
    ModelError(format!("tensor {:?}: {msg}", t.id))
}

/// `t`'s size (given, or dtype x shape, which must agree), and the bytes
/// of its dtype where the planner knows them.
fn checked_size(t: &TensorDesc) -> Result<(u64, Option<u64>), ModelError> {
    let e = |msg: String| tensor_error(t, msg);
    if let Some(d) = &t.dtype {
        if d.len() > 15 {
            return Err(e(format!(
                "dtype {d:?} has {} characters (at most 15)",
                d.len()
            )));
        }
    }
    if let Some(s) = &t.shape {
        if s.len() > 8 {
            return Err(e(format!("shape has {} dimensions (at most 8)", s.len())));
        }
    }
    let elem = t.dtype.as_deref().and_then(dtype_size);
    let computed = match (&t.shape, elem) {
        (Some(shape), Some(es)) => shape
            .iter()
            .try_fold(es, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| e("shape overflows".into()))
            .map(Some)?,
        _ => None,
    };
    let size = match (t.size, computed) {
        (Some(s), Some(c)) if s != c => {
            return Err(e(format!("size {s} but dtype x shape is {c} bytes")))
        }
        (Some(s), _) => s,
        (None, Some(c)) => c,
        (None, None) => return Err(e("needs a size, or a known dtype and a shape".into())),
    };
    if size == 0 {
        return Err(e("size is 0".into()));
    }
    Ok((size, elem))
}

/// What `t`'s role allows: constants carry data and live in a device
/// memory of the model (`is_writable`); only scratch tensors alias.
fn check_role(t: &TensorDesc, is_writable: &impl Fn(MemoryType) -> bool) -> Result<(), ModelError> {
    let e = |msg: String| Err(tensor_error(t, msg));
    match t.role {
        ArenaRole::Constant => {
            if t.io.is_some() {
                return e("a constant cannot be a graph input or output".into());
            }
            if t.alias_of.is_some() {
                return e("a constant cannot alias".into());
            }
            let dest = t.destination.or(t.memory);
            if let Some(d) = dest {
                if !is_writable(d) {
                    return e(format!(
                        "runtime memory {d} is not a device memory of this model{}",
                        if d == MemoryType::Host {
                            " (set \"destination\")"
                        } else {
                            ""
                        }
                    ));
                }
            }
            if t.data_file.is_some() && t.fill.is_some() {
                return e("both data_file and fill".into());
            }
        }
        ArenaRole::Scratch | ArenaRole::Persistent => {
            if t.destination.is_some() {
                return e("destination applies to constants only".into());
            }
            if t.data_file.is_some() || t.fill.is_some() {
                return e("only constants carry data".into());
            }
            if let Some(m) = t.memory {
                if !is_writable(m) {
                    return e(format!(
                        "pinned to {m}, which is not a writable memory of this model"
                    ));
                }
            }
            if t.alias_of.is_some() && (t.role != ArenaRole::Scratch || t.io.is_some()) {
                return e("only scratch tensors can alias".into());
            }
        }
    }
    Ok(())
}

/// Bytes per element of the dtypes the planner knows.
pub fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "bool" | "int8" | "uint8" | "float8_e4m3" | "float8_e5m2" | "fp8_e4m3" | "fp8_e5m2" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" | "fp16" | "bf16" => 2,
        "int32" | "uint32" | "float32" | "fp32" => 4,
        "int64" | "uint64" | "float64" | "fp64" => 8,
        _ => return None,
    })
}

/// A tensor after checking: its size, alignment floor and lifetime known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// The tensor as described.
    pub desc: TensorDesc,
    /// Its size in bytes (given, or dtype x shape).
    pub size: u64,
    /// max(platform minimum, dtype natural alignment, hint).
    pub alignment: u64,
    /// None for tensors no operator touches (constants, persistent, io).
    pub lifetime: Option<TensorLifetime>,
}

impl Tensor {
    /// The tensor's id.
    pub fn id(&self) -> &str {
        &self.desc.id
    }
    /// Whether it shares another tensor's storage (`alias_of`).
    pub fn is_alias(&self) -> bool {
        self.desc.alias_of.is_some()
    }
    /// Scratch tensors that need their own slot.
    pub fn is_packed_scratch(&self) -> bool {
        self.desc.role == ArenaRole::Scratch && self.desc.io.is_none() && !self.is_alias()
    }
}

/// A checked model: tensors in description order, lifetimes derived.
#[derive(Clone, Debug)]
pub struct Model {
    /// The description as read.
    pub desc: ModelDesc,
    /// The checked tensors, in description order.
    pub tensors: Vec<Tensor>,
    /// Writable memories in spill order, with their constraints.
    pub memories: Vec<MemoryConstraint>,
    /// Directory data files are relative to.
    pub base_dir: PathBuf,
    /// Bytes of constants that come with the model (imported weights),
    /// ahead of data files and fills.
    pub payloads: HashMap<TensorId, Vec<u8>>,
    /// The device the model is planned for.
    pub target: Target,
}

impl Model {
    /// Reads and checks a model description file, for the default
    /// [`Target`].
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        Model::load_for(path, Target::default())
    }

    /// Reads a model description file and checks it for the device
    /// `target` (its memories must be channels of that device).
    pub fn load_for(path: &Path, target: Target) -> Result<Model, ModelError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError(format!("{}: {e}", path.display())))?;
        let desc: ModelDesc = serde_json::from_str(&text)
            .map_err(|e| ModelError(format!("{}: {e}", path.display())))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Model::new_for(desc, base, target)
            .map_err(|e| ModelError(format!("{}: {e}", path.display())))
    }

    /// Parses and checks a model description.
    pub fn from_json(text: &str) -> Result<Model, ModelError> {
        let desc: ModelDesc = serde_json::from_str(text).map_err(|e| ModelError(e.to_string()))?;
        Model::new(desc, PathBuf::from("."))
    }

    /// The same model (with its payloads) planned for the device `target`.
    pub fn for_target(&self, target: Target) -> Result<Model, ModelError> {
        Model::new_for(self.desc.clone(), self.base_dir.clone(), target)?
            .with_payloads(self.payloads.clone())
    }

    /// Checks a description and derives sizes, alignments and lifetimes, for
    /// the default [`Target`].
    pub fn new(desc: ModelDesc, base_dir: PathBuf) -> Result<Model, ModelError> {
        Model::new_for(desc, base_dir, Target::default())
    }

    /// Checks a description for the device `target` and derives sizes,
    /// alignments and lifetimes.
    pub fn new_for(
        desc: ModelDesc,
        base_dir: PathBuf,
        target: Target,
    ) -> Result<Model, ModelError> {
        let memories = memories_for(&desc, &target)?;
        if !desc.platform.min_alignment.is_power_of_two() {
            return err(format!(
                "platform.min_alignment {} is not a power of two",
                desc.platform.min_alignment
            ));
        }
        let is_writable = |m: MemoryType| memories.iter().any(|c| c.name == m);
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut tensors = Vec::with_capacity(desc.tensors.len());
        for (k, t) in desc.tensors.iter().enumerate() {
            if t.id.is_empty() {
                return err(format!("tensors[{k}]: empty id"));
            }
            if index.insert(&t.id, k).is_some() {
                return err(format!("tensor {:?}: id used twice", t.id));
            }
            tensors.push(Tensor::checked(t, &desc.platform, &is_writable)?);
        }
        check_aliases(&tensors, &index)?;
        assign_lifetimes(&desc.operators, &mut tensors, &index)?;
        for t in &tensors {
            if t.is_packed_scratch() && t.lifetime.is_none() {
                return err(format!(
                    "tensor {:?}: scratch tensor that no operator uses or defines",
                    t.id()
                ));
            }
        }
        Ok(Model {
            desc,
            tensors,
            memories,
            base_dir,
            payloads: HashMap::new(),
            target,
        })
    }

    /// Attaches the bytes of constants; each must name a constant without
    /// a data file or fill and have exactly its size.
    pub fn with_payloads(
        mut self,
        payloads: HashMap<TensorId, Vec<u8>>,
    ) -> Result<Model, ModelError> {
        for (id, bytes) in &payloads {
            let Some(t) = self.tensor(id) else {
                return err(format!("payload for unknown tensor {id:?}"));
            };
            if t.desc.role != ArenaRole::Constant
                || t.desc.data_file.is_some()
                || t.desc.fill.is_some()
            {
                return err(format!(
                    "tensor {id:?}: a payload needs a constant without data_file or fill"
                ));
            }
            if bytes.len() as u64 != t.size {
                return err(format!(
                    "tensor {id:?}: payload of {} bytes, the tensor {}",
                    bytes.len(),
                    t.size
                ));
            }
        }
        self.payloads = payloads;
        Ok(self)
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.desc.name
    }

    /// The tensor `id`, if the model has one.
    pub fn tensor(&self, id: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.id() == id)
    }

    /// The constraint of a writable memory.
    pub fn constraint(&self, m: MemoryType) -> Option<&MemoryConstraint> {
        self.memories.iter().find(|c| c.name == m)
    }

    /// Alignment of a tensor's slot in memory `m`: its own floor, raised to
    /// the memory's arena_alignment when one is set.
    pub fn slot_alignment(&self, t: &Tensor, m: MemoryType) -> u64 {
        let arena = self
            .constraint(m)
            .and_then(|c| c.arena_alignment)
            .unwrap_or(1);
        t.alignment.max(arena)
    }

    /// Alignment of an arena base in memory `m`.
    pub fn arena_alignment(&self, m: MemoryType) -> u64 {
        let arena = self
            .constraint(m)
            .and_then(|c| c.arena_alignment)
            .unwrap_or(1);
        IMPLEMENTATION_ALIGNMENT
            .max(self.desc.platform.min_alignment)
            .max(arena)
    }

    /// Lifetimes of every tensor an operator touches.
    pub fn lifetimes(&self) -> BTreeMap<TensorId, TensorLifetime> {
        self.tensors
            .iter()
            .filter_map(|t| t.lifetime.clone().map(|l| (t.desc.id.clone(), l)))
            .collect()
    }

    /// The liveness lower bound of the scratch memory: the most bytes of
    /// scratch tensors live at any one operator. No placement can go below it.
    pub fn liveness_lower_bound(&self) -> u64 {
        let n = self.desc.operators.len();
        let mut delta = vec![0i128; n + 1];
        for t in self.tensors.iter().filter(|t| t.is_packed_scratch()) {
            let l = t.lifetime.as_ref().expect("checked in new()");
            delta[l.start_op] += i128::from(t.size);
            delta[l.end_op + 1] -= i128::from(t.size);
        }
        let mut cur = 0i128;
        let mut best = 0i128;
        for d in &delta[..n] {
            cur += d;
            best = best.max(cur);
        }
        best as u64
    }

    /// When each operator starts, in the time of the operators'
    /// durations (1 each where none is given), and when the last one
    /// ends: one entry more than the operators.
    pub fn operator_times(&self) -> Vec<u64> {
        let mut at = 0u64;
        std::iter::once(0)
            .chain(self.desc.operators.iter().map(|o| {
                at = at.saturating_add(o.duration.unwrap_or(1));
                at
            }))
            .collect()
    }

    /// The bytes a constant is uploaded with.
    pub fn constant_bytes(&self, t: &Tensor) -> Result<Vec<u8>, ModelError> {
        if let Some(bytes) = self.payloads.get(t.id()) {
            return Ok(bytes.clone());
        }
        if let Some(f) = &t.desc.data_file {
            let path = self.base_dir.join(f);
            let bytes = std::fs::read(&path).map_err(|e| {
                ModelError(format!(
                    "tensor {:?}: data_file {}: {e}",
                    t.id(),
                    path.display()
                ))
            })?;
            if bytes.len() as u64 != t.size {
                return err(format!(
                    "tensor {:?}: data_file {} has {} bytes, the tensor {}",
                    t.id(),
                    path.display(),
                    bytes.len(),
                    t.size
                ));
            }
            return Ok(bytes);
        }
        Ok(match t.desc.fill.unwrap_or_default() {
            Fill::Zeros => vec![0; t.size as usize],
            Fill::Pattern => synthetic_bytes(t.id(), t.size),
        })
    }
}

/// Deterministic, id-dependent bytes for constants without a data file
/// (xorshift64* seeded by an FNV-1a hash of the id).
pub fn synthetic_bytes(id: &str, size: u64) -> Vec<u8> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut x = h | 1;
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let w = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let take = ((size - out.len() as u64) as usize).min(8);
        out.extend_from_slice(&w.to_le_bytes()[..take]);
    }
    out
}
