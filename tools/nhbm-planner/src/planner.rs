//! The planners: constants and persistent tensors are bump-allocated per
//! memory; scratch tensors are packed by first fit over their lifetimes in an
//! order each strategy chooses, spilling an unpinned tensor to the next
//! writable memory when the current one would exceed its budget. hill_climb
//! (`search.rs`) and exact then repack each memory's scratch tensors
//! without moving any to another memory, each keeping the best-fit and
//! first-fit placements of `portfolio.rs` where they are lower.
//!
//! Budgets count what the kernel allocates ([`crate::target`]): the arena it
//! packs constants, persistent tensors and graph I/O into at its minimum
//! allocation, and the scratchpad rounded up to it, in one region.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use crate::bestfit::Limit;
use crate::desc::{Io, Model, Tensor};
use crate::exact::{self, Budget, Buffer, Stop};
use crate::improve;
use crate::model::*;
use crate::portfolio;
use crate::search;
use crate::window;

/// Placed buffers the greedy placements and the iterated greedy of one
/// memory may look at together ([`Limit::looks`]), per buffer of it: their
/// work, and so their time, linear in the buffers (about 0.05 s per 1,000
/// buffers on this project's host), and their plan the same on a busy
/// machine as on an idle one.
pub const LOOKS_PER_BUFFER: u64 = 25_000;

/// hill_climb over a whole memory before exact's search makes at most
/// this over the memory's buffers moves (the options' moves up to 316
/// buffers): a move decodes every buffer, and its four rounds take half
/// the moves each, so it decodes at most twice this many buffers (3.7 s
/// on this project's loaded host). Over that, the default moves took the
/// whole 10 s limit on 1,000 buffers and left the search 64 nodes.
pub const CLIMB_WORK: u64 = 1_000_000;

/// hill_climb as the planner asked for makes at most this over the
/// memory's buffers moves: the options' moves up to 450 buffers, the
/// largest of its held-out instances, which it packs within 5% of their
/// optimum only with them (capped at [`CLIMB_WORK`], hard400_s1 stopped at
/// 1.085). Its work stays bounded, its plan the same on a busy host.
pub const HILL_CLIMB_WORK: u64 = 2_025_000;

/// Buffers per node of the searches of exact's windows together: a node
/// costs time in proportion to its window's buffers, so this keeps their
/// work linear in the buffers (0.2 s at 10,000 buffers on this project's
/// host, where the default node budget took 3 s).
pub const WINDOW_BUFFERS_PER_NODE: u64 = 5;

/// A plan that cannot be made within the constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannerError(pub String);

impl fmt::Display for PlannerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlannerError {}

/// Plans `model` with its own planner type and options.
pub fn plan_model(model: &Model) -> Result<MemoryPlan, PlannerError> {
    plan(model, model.desc.planner, &model.desc.planner_options)
}

/// How the exact planner ended in one memory that holds scratch tensors.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ExactOutcome {
    /// The memory whose scratch arena this is.
    pub memory: MemoryType,
    /// The scratch arena's size.
    pub high_water: u64,
    /// Bytes of scratch live at once in this memory, at most.
    pub lower_bound: u64,
    /// No smaller arena exists for the tensors placed in this memory.
    pub optimal: bool,
    /// Search nodes visited (as [`crate::exact::Solution::nodes`]).
    pub nodes: u64,
    /// What stopped the search before a proof: the node budget (the same
    /// result on every machine) or the time limit (a result that depends on
    /// the machine's speed and load); none when it ended by itself.
    pub stopped: Option<Stop>,
}

/// The deadline of `opts`'s time limit, from now.
fn deadline(opts: &PlannerOptions) -> Instant {
    Budget::new(0, Duration::from_millis(opts.time_budget_ms)).deadline
}

/// Plans `model` with the given strategy.
pub fn plan(
    model: &Model,
    kind: MemoryPlannerType,
    opts: &PlannerOptions,
) -> Result<MemoryPlan, PlannerError> {
    plan_with_outcome(model, kind, opts).map(|(mp, _)| mp)
}

/// Plans `model` with the given strategy; with [`MemoryPlannerType::Exact`]
/// also says, per memory, whether the scratch arena is proven smallest.
pub fn plan_with_outcome(
    model: &Model,
    kind: MemoryPlannerType,
    opts: &PlannerOptions,
) -> Result<(MemoryPlan, Vec<ExactOutcome>), PlannerError> {
    plan_with_progress(model, kind, opts, None)
}

/// [`plan_with_outcome`], counting the exact planner's search nodes into
/// `progress` as it goes (for a progress display; the count is rounded).
pub fn plan_with_progress(
    model: &Model,
    kind: MemoryPlannerType,
    opts: &PlannerOptions,
    progress: Option<&AtomicU64>,
) -> Result<(MemoryPlan, Vec<ExactOutcome>), PlannerError> {
    let mut mp = MemoryPlan {
        tensor_lifetimes: model.lifetimes(),
        ..Default::default()
    };
    place_constants(model, &mut mp)?;
    place_persistent(model, &mut mp);
    let budgets = scratch_budgets(model, &mp)?;
    let items: Vec<&Tensor> = model
        .tensors
        .iter()
        .filter(|t| t.is_packed_scratch())
        .collect();
    let packer = Packer {
        model,
        items: &items,
        budgets: &budgets,
    };
    let mut outcomes = Vec::new();
    let placement = match kind {
        MemoryPlannerType::Greedy => packer.place(&packer.order_by_start())?,
        MemoryPlannerType::GreedyBySize => packer.place(&packer.order_by_size())?,
        MemoryPlannerType::HillClimb => packer.hill_climb(opts, deadline(opts))?,
        MemoryPlannerType::Exact => packer.exact(opts, progress, &mut outcomes)?,
    };
    place_scratch(model, &mut mp, &items, &placement);
    check_kernel_bytes(model, &mp)?;
    place_aliases(model, &mut mp);
    Ok((mp, outcomes))
}

/// Constants: one arena per runtime memory, a single source per arena.
fn place_constants(model: &Model, mp: &mut MemoryPlan) -> Result<(), PlannerError> {
    let first = model.memories[0].name;
    for t in model
        .tensors
        .iter()
        .filter(|t| t.desc.role == ArenaRole::Constant)
    {
        let dest = t.desc.destination.or(t.desc.memory).unwrap_or(first);
        let source = t.desc.memory.unwrap_or(dest);
        let arena = mp.constant_arenas.entry(dest).or_insert_with(|| {
            ArenaUsage::new(
                dest,
                ArenaRole::Constant,
                source,
                model.arena_alignment(dest),
            )
        });
        if arena.source_memory != Some(source) {
            return Err(PlannerError(format!(
                "constant {:?}: source {source} differs from {} of the other constants in {dest}'s arena",
                t.id(),
                arena.source_memory.map_or("none".into(), |m| m.to_string())
            )));
        }
        let align = model.slot_alignment(t, dest);
        let offset = arena.allocate_aligned(t.size, align);
        insert(mp, t, dest, offset, align, ArenaRole::Constant, source);
    }
    Ok(())
}

/// Persistent tensors and graph inputs/outputs: whole-program live, one
/// arena per memory.
fn place_persistent(model: &Model, mp: &mut MemoryPlan) {
    let first = model.memories[0].name;
    for t in model
        .tensors
        .iter()
        .filter(|t| t.desc.role == ArenaRole::Persistent || t.desc.io.is_some())
    {
        let m = t.desc.memory.unwrap_or(first);
        let arena = mp.persistent_arenas.entry(m).or_insert_with(|| {
            ArenaUsage::new(m, ArenaRole::Persistent, m, model.arena_alignment(m))
        });
        let align = model.slot_alignment(t, m);
        let offset = arena.allocate_aligned(t.size, align);
        insert(mp, t, m, offset, align, ArenaRole::Persistent, m);
    }
}

/// What each memory's budget leaves for scratch: the kernel's arena is
/// fixed by now; the scratchpad must also fit in one region.
fn scratch_budgets(model: &Model, mp: &MemoryPlan) -> Result<Vec<Option<u64>>, PlannerError> {
    let mut budgets = Vec::with_capacity(model.memories.len());
    for c in &model.memories {
        let ch = c.name.channel().unwrap_or(u32::MAX) as usize;
        let fixed = model
            .target
            .allocation_bytes(ch, &device_records(model, mp, c.name), 0)
            .ok_or_else(|| {
                PlannerError(format!(
                    "{}: constants and persistent tensors fit in no region of {}",
                    c.name, model.target.name
                ))
            })?;
        let region = model.target.largest_region(ch);
        budgets.push(match c.max_size {
            Some(max) if fixed > max => {
                return Err(PlannerError(format!(
                "{}: constants and persistent tensors need {fixed} bytes, over its max_size {max}",
                c.name
            )))
            }
            Some(max) => Some((max - fixed).min(region)),
            None => Some(region),
        });
    }
    Ok(budgets)
}

/// The scratch tensors `items` at their places in `placement`, and each
/// memory's scratch arena.
fn place_scratch(model: &Model, mp: &mut MemoryPlan, items: &[&Tensor], placement: &Placement) {
    for (k, t) in items.iter().enumerate() {
        let (mi, offset) = placement.slots[k];
        let m = model.memories[mi].name;
        let align = model.slot_alignment(t, m);
        insert(mp, t, m, offset, align, ArenaRole::Scratch, m);
    }
    for (mi, &hwm) in placement.high_water.iter().enumerate() {
        let m = model.memories[mi].name;
        if hwm > 0 || items.iter().any(|t| t.desc.memory == Some(m)) {
            let mut a = ArenaUsage::new(m, ArenaRole::Scratch, m, model.arena_alignment(m));
            a.total_size = hwm;
            a.used = hwm;
            mp.arena_usages.insert(m, a);
        }
    }
}

/// What the kernel will allocate must fit each memory's budget.
fn check_kernel_bytes(model: &Model, mp: &MemoryPlan) -> Result<(), PlannerError> {
    for c in &model.memories {
        if !mp.tensor_allocs.values().any(|a| a.memory == c.name) {
            continue;
        }
        match kernel_bytes(model, mp, c.name) {
            Some(b) if c.max_size.is_none_or(|max| b <= max) => {}
            Some(b) => {
                return Err(PlannerError(format!(
                    "{}: the kernel would allocate {b} bytes, over its max_size {}",
                    c.name,
                    c.max_size.unwrap_or(0)
                )))
            }
            None => {
                return Err(PlannerError(format!(
                    "{}: the plan fits in no region of {}",
                    c.name, model.target.name
                )))
            }
        }
    }
    Ok(())
}

/// Aliases take their base's slot.
fn place_aliases(model: &Model, mp: &mut MemoryPlan) {
    for t in model.tensors.iter().filter(|t| t.is_alias()) {
        let base = mp.tensor_allocs[t.desc.alias_of.as_deref().unwrap()].clone();
        let b = base.binding.unwrap();
        insert(
            mp,
            t,
            base.memory,
            base.offset,
            base.alignment,
            ArenaRole::Scratch,
            b.source_memory,
        );
    }
}

/// The records with their own HBM in memory `m` (constants, persistent
/// tensors, graph I/O), as (size, alignment) in the order lowering emits them
/// (description order), which is the order the kernel packs them in.
fn device_records(model: &Model, mp: &MemoryPlan, m: MemoryType) -> Vec<(u64, u64)> {
    model
        .tensors
        .iter()
        .filter_map(|t| mp.tensor_allocs.get(t.id()))
        .filter(|a| a.memory == m)
        .filter(|a| a.binding.is_some_and(|b| b.role != ArenaRole::Scratch))
        .map(|a| (a.size, a.alignment))
        .collect()
}

/// The bytes PLAN_LOAD allocates for the plan of memory `m` (its
/// `bytes_allocated` on an empty channel), `None` if it does not fit.
pub fn kernel_bytes(model: &Model, mp: &MemoryPlan, m: MemoryType) -> Option<u64> {
    let t = &model.target;
    let scratch = mp.arena_usages.get(&m).map_or(0, |a| t.round(a.total_size));
    let ch = m.channel()? as usize;
    Some(scratch + t.allocation_bytes(ch, &device_records(model, mp, m), scratch)?)
}

fn insert(
    mp: &mut MemoryPlan,
    t: &Tensor,
    m: MemoryType,
    offset: u64,
    alignment: u64,
    role: ArenaRole,
    source: MemoryType,
) {
    mp.tensor_allocs.insert(
        t.desc.id.clone(),
        TensorAllocation {
            tensor_id: t.desc.id.clone(),
            memory: m,
            offset,
            size: t.size,
            alignment,
            binding: Some(TensorBinding {
                role,
                memory: m,
                source_memory: source,
                offset,
            }),
        },
    );
}

/// Where each scratch item landed: (memory index, offset), and each
/// memory's high-water mark.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placement {
    slots: Vec<(usize, u64)>,
    high_water: Vec<u64>,
}

impl Placement {
    /// Memory `mi`'s items `ks` at `offsets`, its arena `high_water` high.
    fn set(&mut self, mi: usize, ks: &[usize], offsets: Vec<u64>, high_water: u64) {
        for (&k, o) in ks.iter().zip(offsets) {
            self.slots[k].1 = o;
        }
        self.high_water[mi] = high_water;
    }

    /// [`Self::set`] where `high_water` is below memory `mi`'s arena now.
    fn set_if_lower(&mut self, mi: usize, ks: &[usize], offsets: Vec<u64>, high_water: u64) {
        if high_water < self.high_water[mi] {
            self.set(mi, ks, offsets, high_water);
        }
    }
}

struct Packer<'a> {
    model: &'a Model,
    items: &'a [&'a Tensor],
    budgets: &'a [Option<u64>],
}

impl Packer<'_> {
    fn lifetime(&self, k: usize) -> &TensorLifetime {
        self.items[k]
            .lifetime
            .as_ref()
            .expect("scratch tensors have lifetimes")
    }

    /// Lifetime-start order (ties: description order).
    fn order_by_start(&self) -> Vec<usize> {
        let mut o: Vec<usize> = (0..self.items.len()).collect();
        o.sort_by_key(|&k| (self.lifetime(k).start_op, k));
        o
    }

    /// Largest first (ties: earlier start, then description order).
    fn order_by_size(&self) -> Vec<usize> {
        let mut o: Vec<usize> = (0..self.items.len()).collect();
        o.sort_by_key(|&k| {
            (
                std::cmp::Reverse(self.items[k].size),
                self.lifetime(k).start_op,
                k,
            )
        });
        o
    }

    /// First fit of every item in `order`.
    fn place(&self, order: &[usize]) -> Result<Placement, PlannerError> {
        let nm = self.model.memories.len();
        let mut slots = vec![(usize::MAX, 0u64); self.items.len()];
        let mut placed: Vec<Vec<usize>> = vec![Vec::new(); nm];
        let mut high_water = vec![0u64; nm];
        for &k in order {
            let t = self.items[k];
            let candidates: Vec<usize> = match t.desc.memory {
                Some(pin) => vec![self
                    .model
                    .memories
                    .iter()
                    .position(|c| c.name == pin)
                    .unwrap()],
                None => (0..nm).collect(),
            };
            let mut done = false;
            for &mi in &candidates {
                let align = self.model.slot_alignment(t, self.model.memories[mi].name);
                let offset = self.first_fit(k, &placed[mi], &slots, align);
                let end = offset + t.size;
                if self.budgets[mi].is_some_and(|b| self.model.target.round(end) > b) {
                    continue;
                }
                slots[k] = (mi, offset);
                placed[mi].push(k);
                high_water[mi] = high_water[mi].max(end);
                done = true;
                break;
            }
            if !done {
                let names: Vec<String> = candidates
                    .iter()
                    .map(|&mi| {
                        format!(
                            "{} ({} bytes left)",
                            self.model.memories[mi].name,
                            self.budgets[mi].unwrap_or(u64::MAX)
                        )
                    })
                    .collect();
                return Err(PlannerError(format!(
                    "scratch tensor {:?} ({} bytes) fits in no memory: {}",
                    t.id(),
                    t.size,
                    names.join(", ")
                )));
            }
        }
        Ok(Placement { slots, high_water })
    }

    /// The lowest `align`ed offset where item `k` overlaps no item of
    /// `others` that is live at the same time.
    fn first_fit(&self, k: usize, others: &[usize], slots: &[(usize, u64)], align: u64) -> u64 {
        let lt = self.lifetime(k);
        let mut busy: Vec<(u64, u64)> = others
            .iter()
            .filter(|&&o| self.lifetime(o).overlaps(lt))
            .map(|&o| (slots[o].1, slots[o].1 + self.items[o].size))
            .collect();
        busy.sort_unstable();
        let size = self.items[k].size;
        let mut at = 0u64;
        for (start, end) in busy {
            if at + size <= start {
                break;
            }
            at = at.max(align_up(end, align));
        }
        at
    }

    /// The items `p` puts in memory `mi` (named `name`), and the buffer each
    /// one is to the packers: lifetime, size and alignment.
    fn buffers_in(&self, p: &Placement, mi: usize, name: MemoryType) -> (Vec<usize>, Vec<Buffer>) {
        let ks: Vec<usize> = (0..self.items.len())
            .filter(|&k| p.slots[k].0 == mi)
            .collect();
        let bufs = ks
            .iter()
            .map(|&k| {
                let lt = self.lifetime(k);
                Buffer {
                    first: lt.start_op,
                    last: lt.end_op,
                    size: self.items[k].size,
                    align: self.model.slot_alignment(self.items[k], name),
                }
            })
            .collect();
        (ks, bufs)
    }

    /// greedy_by_size decides which memory every item goes to (its spill
    /// choices fit the budgets); then each memory's items are placed anew
    /// by [`exact::minimize`], starting from the better of greedy_by_size's
    /// and hill_climb's packings, so no memory's arena grows; the greedy
    /// placements of [`portfolio::best`] are kept where the search ends
    /// above them (and end it, at the lower bound). One node budget, and
    /// one time limit, cover every memory.
    fn exact(
        &self,
        opts: &PlannerOptions,
        progress: Option<&AtomicU64>,
        outcomes: &mut Vec<ExactOutcome>,
    ) -> Result<Placement, PlannerError> {
        let mut budget = Budget::new(opts.node_budget, Duration::from_millis(opts.time_budget_ms));
        budget.progress = progress;
        if self.items.len() > window::DIRECT_MAX {
            return self.exact_in_windows(opts, &mut budget, outcomes);
        }
        let times = self.model.operator_times();
        let mut p = self.place(&self.order_by_size())?;
        // The greedy placements are a packing to keep where the search
        // ends above them; the search starts from its own (their order
        // would lead it elsewhere), unless they are at the lower bound.
        let mut seeded = p.clone();
        if self.seed(&mut seeded, &times, budget.deadline) {
            p = seeded.clone();
        } else {
            // Local search is cheap next to the budget and often closes
            // most of the gap: it can only start the search lower.
            self.climb_each(&mut p, opts, (budget.deadline, CLIMB_WORK));
        }
        for (mi, c) in self.model.memories.iter().enumerate() {
            let (ks, bufs) = self.buffers_in(&p, mi, c.name);
            if ks.is_empty() {
                continue;
            }
            let known: Vec<u64> = ks.iter().map(|&k| p.slots[k].1).collect();
            let inst = exact::Instance::new(&bufs).timed(&times);
            let lower_bound = inst.lower_bound();
            let mut s = exact::minimize_in(inst, Some(&known), &budget);
            budget.nodes = budget.nodes.saturating_sub(s.nodes);
            if seeded.high_water[mi] < s.high_water {
                s.high_water = seeded.high_water[mi];
                s.offsets = ks.iter().map(|&k| seeded.slots[k].1).collect();
            }
            p.set(mi, &ks, s.offsets, s.high_water);
            outcomes.push(ExactOutcome {
                memory: c.name,
                high_water: s.high_water,
                lower_bound,
                optimal: s.optimal,
                nodes: s.nodes,
                stopped: s.stopped,
            });
        }
        Ok(p)
    }

    /// greedy_by_size decides which memory every item goes to (its spill
    /// choices fit the budgets); then each memory's items are packed anew
    /// by [`search::pack`] with `iterations` moves per 100 items (at least
    /// `iterations`), half of them in each of its rounds
    /// (`max_stall_iterations` per 100, halved, without gain end a round),
    /// and the new packing is kept where its arena is smaller, so
    /// hill_climb is never worse than greedy_by_size, nor than the greedy
    /// placements of [`portfolio::best`] tried first.
    ///
    /// Over [`window::DIRECT_MAX`] items, every memory is planned in
    /// windows ([`window::plan`]) within a third of the time, each
    /// window's items by greedy_by_size then hill_climb, then, where that
    /// is above the lower bound, by the greedy placements and the
    /// iterated greedy ([`Self::greedy_after_windows`]); the lowest is
    /// kept. Every stage stops at `deadline`.
    fn hill_climb(
        &self,
        opts: &PlannerOptions,
        deadline: Instant,
    ) -> Result<Placement, PlannerError> {
        let times = self.model.operator_times();
        if self.items.len() > window::DIRECT_MAX {
            let (mut p, deadline) = self.assign_before(deadline)?;
            let first = slice(deadline, (1, 3));
            for (mi, c) in self.model.memories.iter().enumerate() {
                let (ks, bufs) = self.buffers_in(&p, mi, c.name);
                let enough = window::lower_bound(&bufs);
                let offsets = window::plan(&bufs, &mut |wb, base, share| {
                    climb_window((wb, base, share), opts, first, enough).0
                });
                let hwm = top(&bufs, offsets.iter().copied());
                p.set_if_lower(mi, &ks, offsets, hwm);
            }
            self.greedy_after_windows(&mut p, &times, opts, deadline);
            return Ok(p);
        }
        let mut p = self.place(&self.order_by_size())?;
        // Seeded at the lower bound, no move can lower a memory.
        if !self.seed(&mut p, &times, deadline) {
            self.climb_each(&mut p, opts, (deadline, HILL_CLIMB_WORK));
        }
        Ok(p)
    }

    /// Each memory of `p` repacked by [`search::pack`] by `deadline`,
    /// where that is lower, within `work` over its buffers moves.
    fn climb_each(&self, p: &mut Placement, opts: &PlannerOptions, limits: (Instant, u64)) {
        let (deadline, work) = limits;
        for (mi, c) in self.model.memories.iter().enumerate() {
            let (ks, bufs) = self.buffers_in(p, mi, c.name);
            if ks.len() < 2 || opts.iterations == 0 {
                continue;
            }
            let cap = work / ks.len() as u64;
            let (m, stall) = moves(opts, ks.len());
            let moves = (m.min(cap), stall.min(cap));
            let (hwm, offsets) = search::pack(&bufs, moves, opts.seed, (deadline, 0), None);
            p.set_if_lower(mi, &ks, offsets, hwm);
        }
    }
    /// Each memory of `p` repacked by [`portfolio::best`] by `deadline`
    /// (`times`: the operators' times), where that is lower; whether
    /// every memory is at its lower bound then.
    fn seed(&self, p: &mut Placement, times: &[u64], deadline: Instant) -> bool {
        self.seed_and_improve(p, times, (deadline, deadline), None)
    }

    /// [`Self::seed`] by `deadlines.0`, each seed then improved by
    /// [`improve::improve`] until `deadlines.1` with `opts`'s moves (per
    /// 100 items), moves without gain (`max_stall_iterations`, not per 100
    /// items) and seed, where `opts` is given. Per memory, the greedy
    /// placements may look at half of [`LOOKS_PER_BUFFER`] per item, the
    /// iterated greedy at what they leave of it.
    fn seed_and_improve(
        &self,
        p: &mut Placement,
        times: &[u64],
        deadlines: (Instant, Instant),
        opts: Option<&PlannerOptions>,
    ) -> bool {
        let mut all_at_bound = true;
        for (mi, c) in self.model.memories.iter().enumerate() {
            let (ks, bufs) = self.buffers_in(p, mi, c.name);
            if ks.is_empty() {
                continue;
            }
            let enough = window::lower_bound(&bufs);
            if p.high_water[mi] <= enough {
                continue;
            }
            // Half the looks for the greedy placements, the rest (at least
            // half) for the iterated greedy.
            let looks = LOOKS_PER_BUFFER * ks.len() as u64;
            let mut first = Limit {
                deadline: deadlines.0,
                looks: looks / 2,
            };
            if let Some(mut s) = portfolio::best(&bufs, Some(times), enough, &mut first) {
                if let Some(o) = opts {
                    let moves = (moves(o, ks.len()).0, o.max_stall_iterations.into(), o.seed);
                    let mut rest = Limit {
                        deadline: deadlines.1,
                        looks: looks / 2 + first.looks,
                    };
                    s = improve::improve(&bufs, s, moves, (enough, &mut rest));
                }
                p.set_if_lower(mi, &ks, s.offsets, s.high_water);
            }
            all_at_bound &= p.high_water[mi] <= enough;
        }
        all_at_bound
    }

    /// Which memory every item goes to, for more than
    /// [`window::DIRECT_MAX`] items, where greedy_by_size's first fit
    /// (quadratic in the items) is too slow: every item in the memory it
    /// is pinned to, else the first, at [`window::sweep`]'s offsets, when
    /// that fits every budget; else greedy_by_size's choices.
    fn assign(&self) -> Result<Placement, PlannerError> {
        let nm = self.model.memories.len();
        let mut p = Placement {
            slots: vec![(0, 0); self.items.len()],
            high_water: vec![0; nm],
        };
        for (k, t) in self.items.iter().enumerate() {
            if let Some(pin) = t.desc.memory {
                p.slots[k].0 = self
                    .model
                    .memories
                    .iter()
                    .position(|c| c.name == pin)
                    .expect("pinned memories are listed");
            }
        }
        for (mi, c) in self.model.memories.iter().enumerate() {
            let (ks, bufs) = self.buffers_in(&p, mi, c.name);
            let offsets = window::sweep(&bufs);
            for (&k, o) in ks.iter().zip(offsets) {
                p.slots[k].1 = o;
            }
            p.high_water[mi] = top(&bufs, ks.iter().map(|&k| p.slots[k].1));
            if self.budgets[mi].is_some_and(|b| self.model.target.round(p.high_water[mi]) > b) {
                return self.place(&self.order_by_size());
            }
        }
        Ok(p)
    }

    /// [`Self::assign`], and `deadline` brought forward by twice the time
    /// that took: what lowering the plan takes after the stages, over
    /// every item as that is, so that the plan is made by `deadline`.
    fn assign_before(&self, deadline: Instant) -> Result<(Placement, Instant), PlannerError> {
        let t0 = Instant::now();
        let p = self.assign()?;
        let reserve = t0.elapsed() * 2;
        let now = Instant::now();
        Ok((p, deadline.checked_sub(reserve).unwrap_or(now).max(now)))
    }

    /// [`Self::exact`] over more than [`window::DIRECT_MAX`] items: every
    /// memory in windows ([`Self::windows_exact`]) within a third of the
    /// time, then, where that is above the lower bound, the greedy
    /// placements and the iterated greedy ([`Self::greedy_after_windows`]);
    /// the lowest is kept. Windows first: they reach the bound of decoder
    /// stacks in milliseconds, where a greedy placement of 100,000 items
    /// (quadratic) would take seconds.
    fn exact_in_windows(
        &self,
        opts: &PlannerOptions,
        budget: &mut Budget,
        outcomes: &mut Vec<ExactOutcome>,
    ) -> Result<Placement, PlannerError> {
        let (mut p, deadline) = self.assign_before(budget.deadline)?;
        budget.deadline = deadline;
        let spent = self.windows_exact(&mut p, opts, budget);
        let times = self.model.operator_times();
        self.greedy_after_windows(&mut p, &times, opts, deadline);
        for (mi, c) in self.model.memories.iter().enumerate() {
            let Some((nodes, stopped)) = spent[mi] else {
                continue;
            };
            let (_, bufs) = self.buffers_in(&p, mi, c.name);
            let enough = window::lower_bound(&bufs);
            let high_water = p.high_water[mi];
            let optimal = high_water <= enough;
            outcomes.push(ExactOutcome {
                memory: c.name,
                high_water,
                lower_bound: enough,
                optimal,
                nodes,
                stopped: stopped.filter(|_| !optimal),
            });
        }
        Ok(p)
    }

    /// Every memory of `p` planned in windows ([`window::plan`]) by the
    /// first third of the time left to `budget`'s deadline, each window's
    /// items by greedy_by_size then [`exact::minimize`], with a share of
    /// the node budget (at most a node per [`WINDOW_BUFFERS_PER_NODE`]
    /// items) and of that time as large as its share of the items left,
    /// kept where lower; per memory with items, the
    /// nodes spent (taken from `budget`) and what stopped a search first.
    fn windows_exact(
        &self,
        p: &mut Placement,
        opts: &PlannerOptions,
        budget: &mut Budget,
    ) -> Vec<Option<(u64, Option<Stop>)>> {
        let mut first = *budget;
        first.deadline = slice(budget.deadline, (1, 3));
        first.nodes = first
            .nodes
            .min(self.items.len() as u64 / WINDOW_BUFFERS_PER_NODE);
        let mut spent_in = vec![None; self.model.memories.len()];
        for (mi, c) in self.model.memories.iter().enumerate() {
            let (ks, bufs) = self.buffers_in(p, mi, c.name);
            if ks.is_empty() {
                continue;
            }
            let mut spent = (0u64, None);
            // No window needs to go below the memory's lower bound.
            let enough = window::lower_bound(&bufs);
            let offsets = window::plan(&bufs, &mut |wb, base, share| {
                exact_window((wb, base, share), opts, &first, enough, &mut spent)
            });
            let high_water = top(&bufs, offsets.iter().copied());
            p.set_if_lower(mi, &ks, offsets, high_water);
            first.nodes = first.nodes.saturating_sub(spent.0);
            budget.nodes = budget.nodes.saturating_sub(spent.0);
            spent_in[mi] = Some(spent);
        }
        spent_in
    }

    /// Where the windows left memories of `p` above their lower bound:
    /// [`Self::seed_and_improve`], the greedy placements by half of the
    /// time left to `deadline`, the iterated greedy by it.
    fn greedy_after_windows(
        &self,
        p: &mut Placement,
        times: &[u64],
        opts: &PlannerOptions,
        deadline: Instant,
    ) {
        let d = slice(deadline, (1, 2));
        self.seed_and_improve(p, times, (d, deadline), Some(opts));
    }
}

/// One window of hill_climb's plan in windows: `wb` above the floor
/// `base`, with its `share` of the time left before `deadline`, by
/// greedy_by_size then hill_climb (by first fit alone once its share is
/// spent); `enough` is the memory's lower bound. Its offsets, and its
/// own deadline.
fn climb_window(
    (wb, base, share): (&[Buffer], &[u64], (usize, usize)),
    opts: &PlannerOptions,
    deadline: Instant,
    enough: u64,
) -> (Vec<u64>, Instant) {
    let d = slice(deadline, share);
    if Instant::now() >= d {
        return (window::sweep_on(wb, base), d);
    }
    let g = by_size(wb, base);
    (climb(wb, g, opts, (d, enough), base), d)
}

/// One window of exact's plan in windows: [`climb_window`] without
/// hill_climb's moves (greedy_by_size), then [`exact::minimize`] on a
/// flat floor, within the window's share of
/// `budget`'s nodes (`spent` counts the nodes used on, and keeps what
/// stopped a search first).
fn exact_window(
    window: (&[Buffer], &[u64], (usize, usize)),
    opts: &PlannerOptions,
    budget: &Budget,
    enough: u64,
    spent: &mut (u64, Option<Stop>),
) -> Vec<u64> {
    let (wb, base, share) = window;
    // Straight from greedy_by_size to the search: hill_climb in every
    // window took longer than the search and lowered no window of the
    // traces, pipeline schedules or hard instances.
    let greedy = PlannerOptions {
        iterations: 0,
        ..*opts
    };
    let (start, d) = climb_window(window, &greedy, budget.deadline, enough);
    let height = top(wb, start.iter().copied());
    // exact packs the window on a flat floor, the highest: worth it only
    // where that can still come out lower.
    let flat = window::flat_floor(wb, base);
    let lower = window::lower_bound(wb);
    if flat + lower >= height || height <= enough || Instant::now() >= d {
        return start;
    }
    let left = budget.nodes.saturating_sub(spent.0);
    let mut b = *budget;
    b.nodes = (u128::from(left) * share.0 as u128 / share.1.max(1) as u128) as u64;
    b.deadline = d;
    let known: Vec<u64> = if flat == 0 {
        start.clone()
    } else {
        by_size(wb, &[])
    };
    let s = exact::minimize(wb, Some(&known), &b);
    spent.0 += s.nodes;
    spent.1 = spent.1.or(s.stopped);
    if flat + s.high_water < height {
        s.offsets.into_iter().map(|o| o + flat).collect()
    } else {
        start
    }
}

/// hill_climb's moves and moves without gain for `n` buffers: `iterations`
/// and `max_stall_iterations` per 100 (at least as many).
fn moves(opts: &PlannerOptions, n: usize) -> (u64, u64) {
    let per = |x: u32| u64::from(x) * n.max(100) as u64 / 100;
    (per(opts.iterations), per(opts.max_stall_iterations))
}

/// The top of `bufs` at `offsets`.
fn top(bufs: &[Buffer], offsets: impl Iterator<Item = u64>) -> u64 {
    bufs.iter()
        .zip(offsets)
        .map(|(b, o)| o + b.size)
        .max()
        .unwrap_or(0)
}

/// The deadline of a part of the work that is `share` of what is left
/// ([`window::plan`]'s), so that what follows it keeps its share too.
fn slice(deadline: Instant, (part, left): (usize, usize)) -> Instant {
    let now = Instant::now();
    match deadline.checked_duration_since(now) {
        Some(d) => now + d.mul_f64(part as f64 / left.max(1) as f64),
        None => now,
    }
}

/// greedy_by_size on one memory's buffers: largest first (ties: earlier
/// first operator, then index), each at the lowest aligned offset free of
/// the ones placed that it overlaps in time, and at or above `base` (per
/// operator; empty: 0). Quadratic: for windows.
fn by_size(bufs: &[Buffer], base: &[u64]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_by_key(|&k| (std::cmp::Reverse(bufs[k].size), bufs[k].first, k));
    let mut offsets = vec![0u64; bufs.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(bufs.len());
    let mut busy: Vec<(u64, u64)> = Vec::new();
    for &k in &order {
        let b = bufs[k];
        busy.clear();
        busy.extend(
            placed
                .iter()
                .filter(|&&o| bufs[o].first <= b.last && b.first <= bufs[o].last)
                .map(|&o| (offsets[o], offsets[o] + bufs[o].size)),
        );
        busy.sort_unstable();
        let floor = base
            .get(b.first..=b.last)
            .map_or(0, |f| f.iter().copied().max().unwrap_or(0));
        let mut at = align_up(floor, b.align.max(1));
        for &(start, end) in &busy {
            if at + b.size <= start {
                break;
            }
            at = at.max(align_up(end, b.align.max(1)));
        }
        offsets[k] = at;
        placed.push(k);
    }
    offsets
}

/// hill_climb on `bufs` above `base` (per operator) from the packing
/// `start`, until `deadline` or a packing no higher than `enough`:
/// [`search::pack`]'s packing where it is lower, else `start`.
fn climb(
    bufs: &[Buffer],
    start: Vec<u64>,
    opts: &PlannerOptions,
    (deadline, enough): (Instant, u64),
    base: &[u64],
) -> Vec<u64> {
    let height = top(bufs, start.iter().copied());
    if bufs.len() < 2 || opts.iterations == 0 || height <= enough || Instant::now() >= deadline {
        return start;
    }
    let moves = moves(opts, bufs.len());
    let (hwm, offsets) = search::pack(bufs, moves, opts.seed, (deadline, enough), Some(base));
    if hwm < height {
        offsets
    } else {
        start
    }
}

/// A summary of a plan against the model's liveness lower bound.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PlanReport {
    /// The planner that made the plan.
    pub planner: String,
    /// Bytes of the scratch arenas together.
    pub scratch_high_water_mark: u64,
    /// The most bytes of scratch live at any one operator.
    pub liveness_lower_bound: u64,
    /// How far above the lower bound, in percent of it.
    pub overhead_percent: f64,
    /// Every arena.
    pub arenas: Vec<ArenaUsage>,
    /// Bytes PLAN_LOAD allocates for each memory's plan (its
    /// `bytes_allocated`): scratchpad and arena as the kernel places them.
    pub device_bytes: BTreeMap<MemoryType, u64>,
    /// The device the figures are for.
    pub target: String,
}

impl PlanReport {
    /// The report on `mp`, which planner `kind` made for `model`.
    pub fn new(model: &Model, kind: MemoryPlannerType, mp: &MemoryPlan) -> Self {
        let hwm = mp.scratch_high_water_mark();
        let lb = model.liveness_lower_bound();
        let overhead = if lb == 0 {
            0.0
        } else {
            (hwm as f64 - lb as f64) * 100.0 / lb as f64
        };
        let arenas = mp
            .arena_usages
            .values()
            .chain(mp.persistent_arenas.values())
            .chain(mp.constant_arenas.values())
            .cloned()
            .collect();
        let memories: std::collections::BTreeSet<MemoryType> =
            mp.tensor_allocs.values().map(|a| a.memory).collect();
        let device_bytes = memories
            .into_iter()
            .filter_map(|m| Some((m, kernel_bytes(model, mp, m)?)))
            .collect();
        PlanReport {
            planner: kind.to_string(),
            scratch_high_water_mark: hwm,
            liveness_lower_bound: lb,
            overhead_percent: overhead,
            arenas,
            device_bytes,
            target: model.target.name.clone(),
        }
    }
}

/// Per memory holding scratch tensors in `mp`: the most bytes of them live
/// at any one operator, which no placement of those tensors can go below.
pub fn memory_lower_bounds(model: &Model, mp: &MemoryPlan) -> BTreeMap<MemoryType, u64> {
    let n = model.desc.operators.len();
    let mut delta: BTreeMap<MemoryType, Vec<i128>> = BTreeMap::new();
    for t in model.tensors.iter().filter(|t| t.is_packed_scratch()) {
        let (Some(l), Ok(a)) = (t.lifetime.as_ref(), mp.get_allocation(t.id())) else {
            continue;
        };
        let d = delta.entry(a.memory).or_insert_with(|| vec![0; n + 1]);
        d[l.start_op] += i128::from(t.size);
        d[l.end_op + 1] -= i128::from(t.size);
    }
    delta
        .into_iter()
        .map(|(m, d)| {
            let mut cur = 0i128;
            let best = d[..n].iter().fold(0i128, |best, x| {
                cur += x;
                best.max(cur)
            });
            (m, best as u64)
        })
        .collect()
}

/// Every pair of scratch tensors that overlap in both time and memory, which
/// a correct plan never has. Aliases are checked against their base's users.
pub fn overlapping_pairs(model: &Model, mp: &MemoryPlan) -> Vec<(String, String)> {
    let scratch: Vec<&Tensor> = model
        .tensors
        .iter()
        .filter(|t| t.is_packed_scratch())
        .collect();
    let mut out = Vec::new();
    for (i, a) in scratch.iter().enumerate() {
        for b in &scratch[i + 1..] {
            let (aa, ba) = (&mp.tensor_allocs[a.id()], &mp.tensor_allocs[b.id()]);
            let time = a
                .lifetime
                .as_ref()
                .unwrap()
                .overlaps(b.lifetime.as_ref().unwrap());
            let space = aa.memory == ba.memory
                && aa.offset < ba.offset + ba.size
                && ba.offset < aa.offset + aa.size;
            if time && space {
                out.push((a.id().to_string(), b.id().to_string()));
            }
        }
    }
    out
}

/// The packed scratch tensors `mp` places in `memory`, as buffers (at
/// the alignment of their slots), and their offsets: a memory's packing,
/// for [`window::is_packing`] or [`exact::Instance`].
pub fn scratch_packing(
    model: &Model,
    mp: &MemoryPlan,
    memory: MemoryType,
) -> (Vec<Buffer>, Vec<u64>) {
    model
        .tensors
        .iter()
        .filter(|t| t.is_packed_scratch())
        .filter_map(|t| {
            let a = mp.tensor_allocs.get(t.id())?;
            let l = t.lifetime.as_ref()?;
            let b = Buffer {
                first: l.start_op,
                last: l.end_op,
                size: t.size,
                align: a.alignment.max(1),
            };
            (a.memory == memory).then_some((b, a.offset))
        })
        .unzip()
}

/// Bytes of graph inputs and outputs.
pub fn io_bytes(model: &Model) -> BTreeMap<&'static str, u64> {
    let mut m = BTreeMap::new();
    for t in &model.tensors {
        match t.desc.io {
            Some(Io::Input) => *m.entry("input").or_insert(0) += t.size,
            Some(Io::Output) => *m.entry("output").or_insert(0) += t.size,
            None => {}
        }
    }
    m
}
