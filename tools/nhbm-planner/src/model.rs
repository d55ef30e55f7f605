//! The memory-planning data model: what a planner consumes and produces.
//!
//! Memory types are the device's memories (HBM channels `hbm0`..`hbm3`) plus
//! `host`, which only ever appears as the source memory of staged constants.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Identifier of a tensor (its name in the model description).
pub type TensorId = String;

/// The 16-byte implementation floor of every arena base.
pub const IMPLEMENTATION_ALIGNMENT: u64 = 16;

/// A memory of the target: an HBM channel, or the host (a source only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemoryType {
    /// An HBM channel of the device.
    Hbm(u32),
    /// Host memory: a constant's source only.
    Host,
}

impl MemoryType {
    /// Whether kernels can address this memory (and so write to it).
    pub fn is_device(self) -> bool {
        matches!(self, MemoryType::Hbm(_))
    }
    /// The HBM channel, for device memories.
    pub fn channel(self) -> Option<u32> {
        match self {
            MemoryType::Hbm(c) => Some(c),
            MemoryType::Host => None,
        }
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryType::Hbm(c) => write!(f, "hbm{c}"),
            MemoryType::Host => write!(f, "host"),
        }
    }
}

/// A name that names none of the choices.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?} ({choices})")]
pub struct UnknownName {
    /// What was named ("memory", "planner").
    pub what: &'static str,
    /// The name given.
    pub name: String,
    /// The names there are.
    pub choices: &'static str,
}

impl FromStr for MemoryType {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        let lower = s.to_ascii_lowercase();
        if lower == "host" {
            return Ok(MemoryType::Host);
        }
        lower
            .strip_prefix("hbm")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&n| (n as usize) < nhbm::uapi::MAX_CHANNELS)
            .map(MemoryType::Hbm)
            .ok_or_else(|| UnknownName {
                what: "memory",
                name: s.to_string(),
                choices: "hbm0..hbm3 or host",
            })
    }
}

impl Serialize for MemoryType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MemoryType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Logical role of a memory arena.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum ArenaRole {
    /// Writable activations; slots reused through liveness analysis.
    #[default]
    Scratch,
    /// Whole-program-live writable storage.
    Persistent,
    /// Read-only weights, cold (read in place) or staged (hydrated copy).
    Constant,
}

/// The planner's emit intent for one tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorBinding {
    /// The role of the arena the slot is in.
    pub role: ArenaRole,
    /// Runtime (kernel-visible) memory of the slot.
    pub memory: MemoryType,
    /// Cold-storage memory the slot is sourced from; differs from `memory`
    /// only for staged constants.
    pub source_memory: MemoryType,
    /// Byte offset within the arena.
    pub offset: u64,
}

impl TensorBinding {
    /// A constant whose bytes are copied in from another memory.
    pub fn is_staged(&self) -> bool {
        self.source_memory != self.memory
    }
}

/// The operators during which a tensor is live (inclusive).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorLifetime {
    /// The tensor.
    pub tensor_id: TensorId,
    /// The first operator it is live at.
    pub start_op: usize,
    /// The last operator it is live at.
    pub end_op: usize,
}

impl TensorLifetime {
    /// Live at operator `op_idx` only.
    pub fn new(tensor_id: impl Into<TensorId>, op_idx: usize) -> Self {
        TensorLifetime {
            tensor_id: tensor_id.into(),
            start_op: op_idx,
            end_op: op_idx,
        }
    }
    /// Extends the lifetime to cover operator `op_idx`.
    pub fn add_op(&mut self, op_idx: usize) {
        self.start_op = self.start_op.min(op_idx);
        self.end_op = self.end_op.max(op_idx);
    }
    /// Extends the lifetime to cover `other` (for aliases).
    pub fn merge(&mut self, other: &TensorLifetime) {
        self.add_op(other.start_op);
        self.add_op(other.end_op);
    }
    /// Whether both are live at some common operator.
    pub fn overlaps(&self, other: &TensorLifetime) -> bool {
        self.start_op <= other.end_op && other.start_op <= self.end_op
    }
    /// Whether it is live at operator `op_idx`.
    pub fn contains(&self, op_idx: usize) -> bool {
        self.start_op <= op_idx && op_idx <= self.end_op
    }
}

/// Where a tensor was placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorAllocation {
    /// The tensor.
    pub tensor_id: TensorId,
    /// Runtime memory of the arena slot.
    pub memory: MemoryType,
    /// Offset within the arena.
    pub offset: u64,
    /// Bytes of the slot.
    pub size: u64,
    /// Alignment the slot was placed with.
    pub alignment: u64,
    /// The arena slot it is emitted as.
    pub binding: Option<TensorBinding>,
}

/// One arena: its memory, size, role, source and alignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaUsage {
    /// The memory the arena is in.
    pub memory: MemoryType,
    /// Total bytes in this arena.
    pub total_size: u64,
    /// Bytes actually used (equals total_size for bump-allocated arenas).
    pub used: u64,
    /// What the arena holds.
    pub role: ArenaRole,
    /// Source of the arena's contents; differs from `memory` only for staged
    /// constant arenas.
    pub source_memory: Option<MemoryType>,
    /// Alignment of the arena base (and floor of its slot offsets).
    pub alignment: u64,
}

impl ArenaUsage {
    /// An empty arena.
    pub fn new(
        memory: MemoryType,
        role: ArenaRole,
        source_memory: MemoryType,
        alignment: u64,
    ) -> Self {
        ArenaUsage {
            memory,
            total_size: 0,
            used: 0,
            role,
            source_memory: Some(source_memory),
            alignment,
        }
    }

    /// True iff this arena has a distinct cold source memory.
    pub fn is_staged(&self) -> bool {
        self.source_memory.is_some_and(|s| s != self.memory)
    }

    /// Bump-allocates `size` bytes at the arena's alignment; returns the offset.
    pub fn allocate(&mut self, size: u64) -> u64 {
        self.allocate_aligned(size, 1)
    }

    /// Bump-allocates `size` bytes at max(arena alignment, `alignment`).
    pub fn allocate_aligned(&mut self, size: u64, alignment: u64) -> u64 {
        let offset = align_up(self.used, self.alignment.max(alignment));
        self.used = offset + size;
        self.total_size = self.total_size.max(self.used);
        offset
    }
}

/// A user's limit on one memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryConstraint {
    /// The memory limited.
    pub name: MemoryType,
    /// Maximum bytes of this memory the plan may use, None for no limit.
    #[serde(default)]
    pub max_size: Option<u64>,
    /// Alignment floor of the arena base and of every slot in it.
    #[serde(default)]
    pub arena_alignment: Option<u64>,
}

impl MemoryConstraint {
    /// No limit on memory `name`.
    pub fn unlimited(name: MemoryType) -> Self {
        MemoryConstraint {
            name,
            max_size: None,
            arena_alignment: None,
        }
    }
}

/// Which placement strategy plans the scratch arenas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryPlannerType {
    /// First fit in lifetime-start order (the default).
    #[default]
    Greedy,
    /// First fit, largest tensors first.
    GreedyBySize,
    /// Local search over greedy-by-size orders; never worse than it.
    HillClimb,
    /// Branch and bound over canonical placements within a time budget;
    /// never worse than greedy_by_size, and says whether it proved the
    /// result optimal.
    Exact,
}

impl FromStr for MemoryPlannerType {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s.replace('-', "_").as_str() {
            "greedy" => Ok(MemoryPlannerType::Greedy),
            "greedy_by_size" => Ok(MemoryPlannerType::GreedyBySize),
            "hill_climb" => Ok(MemoryPlannerType::HillClimb),
            "exact" => Ok(MemoryPlannerType::Exact),
            _ => Err(UnknownName {
                what: "planner",
                name: s.to_string(),
                choices: "greedy, greedy_by_size, hill_climb, exact",
            }),
        }
    }
}

impl fmt::Display for MemoryPlannerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryPlannerType::Greedy => "greedy",
            MemoryPlannerType::GreedyBySize => "greedy_by_size",
            MemoryPlannerType::HillClimb => "hill_climb",
            MemoryPlannerType::Exact => "exact",
        })
    }
}

/// Tuning of the hill_climb and exact planners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlannerOptions {
    /// hill_climb's moves per 100 tensors it repacks (at least this many).
    pub iterations: u32,
    /// Seed of hill_climb's moves.
    pub seed: u64,
    /// Stop after this many iterations without improvement.
    pub max_stall_iterations: u32,
    /// Search nodes the exact planner may visit, over every memory, in
    /// each of its two search threads: what bounds its work, the same on
    /// every machine, so the same model, options and budget give the same
    /// plan however loaded the machine.
    pub node_budget: u64,
    /// Wall-clock cap on hill_climb and on the exact planner (its
    /// hill_climb included), in milliseconds: a safety net only; a search
    /// it cuts short ends wherever the machine's speed got it, so its plan
    /// depends on the machine.
    pub time_budget_ms: u64,
}

/// The exact planner's default node budget: a few hundred milliseconds of
/// search on the example models.
pub const DEFAULT_NODE_BUDGET: u64 = 20_000;

impl Default for PlannerOptions {
    fn default() -> Self {
        PlannerOptions {
            iterations: 1000,
            seed: 1,
            max_stall_iterations: 200,
            node_budget: DEFAULT_NODE_BUDGET,
            time_budget_ms: 10_000,
        }
    }
}

/// Error of get_allocation: the tensor has no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError(pub String);

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no allocation for tensor {:?}", self.0)
    }
}

impl std::error::Error for KeyError {}

/// The planner's output: every tensor's slot and every arena.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Every tensor's slot, by tensor id.
    pub tensor_allocs: BTreeMap<TensorId, TensorAllocation>,
    /// Scratch arenas, one per writable memory that received scratch tensors.
    pub arena_usages: BTreeMap<MemoryType, ArenaUsage>,
    /// Constant arenas keyed by runtime (destination) memory.
    pub constant_arenas: BTreeMap<MemoryType, ArenaUsage>,
    /// Persistent arenas keyed by writable memory.
    pub persistent_arenas: BTreeMap<MemoryType, ArenaUsage>,
    /// The lifetimes of the tensors operators touch.
    pub tensor_lifetimes: BTreeMap<TensorId, TensorLifetime>,
}

impl MemoryPlan {
    /// The slot of tensor `tensor_id`.
    pub fn get_allocation(&self, tensor_id: &str) -> Result<&TensorAllocation, KeyError> {
        self.tensor_allocs
            .get(tensor_id)
            .ok_or_else(|| KeyError(tensor_id.to_string()))
    }

    /// Sum of the scratch arenas' sizes: the scratch high-water mark.
    pub fn scratch_high_water_mark(&self) -> u64 {
        self.arena_usages.values().map(|a| a.total_size).sum()
    }
}

/// `v` rounded up to a multiple of `align` (a power of two, or 0/1 for none).
pub fn align_up(v: u64, align: u64) -> u64 {
    if align <= 1 {
        v
    } else {
        v.div_ceil(align) * align
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetime_add_op_and_merge() {
        let mut a = TensorLifetime::new("a", 5);
        a.add_op(3);
        a.add_op(9);
        a.add_op(4);
        assert_eq!((a.start_op, a.end_op), (3, 9));
        let mut b = TensorLifetime::new("b", 12);
        assert!(!a.overlaps(&b));
        b.merge(&a);
        assert_eq!((b.start_op, b.end_op), (3, 12));
        assert!(a.overlaps(&b) && b.contains(3) && !b.contains(13));
    }

    #[test]
    fn arena_allocate_bumps_at_alignment() {
        let mut a = ArenaUsage::new(
            MemoryType::Hbm(0),
            ArenaRole::Persistent,
            MemoryType::Hbm(0),
            64,
        );
        assert_eq!(a.allocate(10), 0);
        assert_eq!(a.allocate(1), 64);
        assert_eq!(a.allocate_aligned(8, 256), 256);
        assert_eq!((a.used, a.total_size), (264, 264));
        assert!(!a.is_staged());
        let s = ArenaUsage::new(
            MemoryType::Hbm(1),
            ArenaRole::Constant,
            MemoryType::Host,
            16,
        );
        assert!(s.is_staged());
        let legacy = ArenaUsage {
            source_memory: None,
            ..s
        };
        assert!(!legacy.is_staged());
    }

    #[test]
    fn memory_types_parse_and_print() {
        assert_eq!("hbm1".parse::<MemoryType>(), Ok(MemoryType::Hbm(1)));
        assert_eq!("HOST".parse::<MemoryType>(), Ok(MemoryType::Host));
        assert!("hbm4".parse::<MemoryType>().is_err());
        assert!("dtcm".parse::<MemoryType>().is_err());
        assert_eq!(MemoryType::Hbm(3).to_string(), "hbm3");
        assert_eq!(
            serde_json::to_string(&MemoryType::Host).unwrap(),
            "\"host\""
        );
        assert!(MemoryType::Hbm(3) < MemoryType::Host);
    }

    #[test]
    fn get_allocation_is_a_key_error_when_missing() {
        let p = MemoryPlan::default();
        assert_eq!(p.get_allocation("x"), Err(KeyError("x".into())));
    }

    /// Descriptions written before the node budget existed get the
    /// default one.
    #[test]
    fn planner_options_default_what_they_leave_out() {
        let o: PlannerOptions =
            serde_json::from_str(r#"{"seed": 3, "time_budget_ms": 5}"#).unwrap();
        assert_eq!((o.seed, o.time_budget_ms), (3, 5));
        assert_eq!(o.node_budget, DEFAULT_NODE_BUDGET);
        let o: PlannerOptions = serde_json::from_str(r#"{"node_budget": 7}"#).unwrap();
        assert_eq!(o.node_budget, 7);
    }

    #[test]
    fn planner_types_parse() {
        assert_eq!("hill-climb".parse(), Ok(MemoryPlannerType::HillClimb));
        assert_eq!(
            "greedy_by_size".parse(),
            Ok(MemoryPlannerType::GreedyBySize)
        );
        assert_eq!("exact".parse(), Ok(MemoryPlannerType::Exact));
        assert_eq!(MemoryPlannerType::Exact.to_string(), "exact");
        assert!("best".parse::<MemoryPlannerType>().is_err());
    }
}
