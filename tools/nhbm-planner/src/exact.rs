//! Exact placement of buffers with fixed lifetimes in one memory: the
//! smallest arena in which every buffer gets an aligned offset and no two
//! buffers live at the same time share a byte.
//!
//! The decision problem ("does everything fit in `cap` bytes?") is searched
//! depth first over canonical solutions only:
//! - every buffer sits at its lowest admissible offset: the aligned top of
//!   the highest already placed buffer it overlaps in time (or 0);
//! - buffers are placed in non-decreasing offset order, ties broken by a
//!   rank (the order's, below), so each packing is reached through one
//!   order only;
//! - a buffer is not placed at or above the top another unplaced buffer
//!   would reach at its own lowest offset (that one could always drop into
//!   the gap below, so the branch is dominated);
//! - the timeline is cut into sections (maximal time ranges where the set of
//!   live buffers is constant); a branch is pruned when some section's floor
//!   (the lowest offset any of its unplaced buffers can take) plus the sizes
//!   of its unplaced buffers exceeds `cap`;
//! - once no unplaced buffer spans a section boundary, the two sides are
//!   independent and are solved one after the other;
//! - where a section has no slack left (floor + unplaced bytes = `cap`), its
//!   lowest free byte must be the start of one of its buffers: the search
//!   branches on those only, picking the section with the fewest (as in
//!   exact cover);
//! - in a run of such sections with the same lowest free byte, the
//!   buffers that can still start there must partition the run in time
//!   (checked by a reachability pass over the run);
//! - where no section has slack at all (every section's floor plus its
//!   unplaced bytes is the capacity, as at the lower bound of an instance
//!   whose every section is full), every section's floor must be the
//!   start of a buffer: a section where none can start refutes the node,
//!   and the search branches on the section with the fewest candidates
//!   wherever it is, not only at the lowest offset;
//! - there, every refutation names the range of sections whose state
//!   (floors, unplaced buffers living there, their lowest offsets) alone
//!   refutes the node, and a node whose placement did not touch that
//!   range (the buffer lives outside it and raised no lowest offset of
//!   one living in it) is refuted by the same range without trying its
//!   other branches (conflict-directed backjumping); a node refuted
//!   through all its branches is refuted by the branching section and
//!   the ranges of its branches, each widened by a section where the
//!   placed buffer raised a buffer living in it;
//! - a state (unplaced buffers, their lowest offsets, the section floors)
//!   once refuted is remembered, so the same state reached by stacking
//!   buffers in another order is not searched again.
//!
//! Several orders are raced with a node limit that doubles each round
//! and share the refuted states, so one that happens to walk straight
//! into a packing finds it quickly; a search that ends without a packing
//! and without hitting its limit proves that none exists. Four are
//! static preorders: MiniMalloc's three (by lifetime, then area, then
//! the bytes of the busiest section the buffer lives in; by those bytes,
//! area, lifetime; by those bytes, lifetime, area) and one by size. A
//! lifetime is weighed by the time its operators take where the instance
//! has times ([`Instance::timed`]; MiniMalloc's instances come with
//! them, and its orders rank by them), else counted in operators. Each
//! part the search splits off is ranked anew, by the bytes still
//! unplaced in its sections then, as MiniMalloc does. Each order is
//! searched with exact cover branching (above), and, where some section
//! has slack at `cap`, with plain canonical branching too, with as many
//! nodes: with slack, exact cover applies at the lowest open offset only
//! (until a part is left without slack), and plain branching
//! (MiniMalloc's) finds packings it misses.
//!
//! The runs of each round are dealt out to two workers on two threads,
//! each with its own refuted states and the whole node budget; the answer
//! found first by its worker's own count of nodes is taken, so the
//! threads' speeds do not change it. [`minimize`] wraps the decision
//! problem in a search over `cap` between the liveness lower bound and a
//! known packing. It guides the search by the best packing found so far
//! (a heuristic's at first): one more order, placing that packing's
//! lowest buffers first. A near-perfect packing is mostly right at the
//! bottom, so the search retraces it and spends its nodes where the
//! packing wasted bytes. Where every section is full at `cap` (the lower
//! bound of a perfect tiling), the guide's runs get the first worker to
//! themselves and the static orders share the second; elsewhere the
//! orders are dealt to the workers in turn, the guide's first.
//!
//! A [`Budget`] bounds the search by a count of search nodes, so the same
//! instance and budget give the same answer on any machine, however loaded.
//! Its wall-clock deadline is only an outer safety cap: a search it stops
//! ends wherever the machine's speed got it, and says so ([`Stop`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One buffer: live over operators `first..=last`, `size` bytes at a
/// multiple of `align` (a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// The first operator it is live at.
    pub first: usize,
    /// The last operator it is live at.
    pub last: usize,
    /// Its bytes.
    pub size: u64,
    /// Its offset is a multiple of this (a power of two).
    pub align: u64,
}

/// `n` random buffers, for tests: starting before operator `ops`, living
/// up to `span` more operators, of 1 to `size` bytes, aligned to
/// `1 << (0..align)`.
#[cfg(test)]
pub(crate) fn random_buffers(
    rng: &mut crate::rng::SplitMix64,
    n: usize,
    (ops, span): (usize, usize),
    size: u64,
    align: usize,
) -> Vec<Buffer> {
    (0..n)
        .map(|_| {
            let first = rng.below(ops);
            Buffer {
                first,
                last: first + rng.below(span),
                size: 1 + rng.next_u64() % size,
                align: 1 << rng.below(align),
            }
        })
        .collect()
}

/// What bounds a search: search nodes, and a wall-clock safety cap.
#[derive(Clone, Copy, Debug)]
pub struct Budget<'a> {
    /// Search nodes each of [`Instance::fit`]'s two workers may visit: the
    /// bound that makes the result the same on every machine.
    pub nodes: u64,
    /// When it must stop whatever the node count: a safety cap only, as
    /// where it cuts a search depends on the machine's speed and load.
    pub deadline: Instant,
    /// Where the nodes visited are counted as the search goes (roughly, in
    /// steps of [`PROGRESS_STEP`]; both workers' together), for a progress
    /// display.
    pub progress: Option<&'a AtomicU64>,
}

impl<'a> Budget<'a> {
    /// `nodes` search nodes, and at most `time_limit` of wall-clock time
    /// from now.
    pub fn new(nodes: u64, time_limit: Duration) -> Self {
        let now = Instant::now();
        Budget {
            nodes,
            deadline: now + time_limit.min(LONG_TIME),
            progress: None,
        }
    }

    /// The same budget, counting the nodes visited into `progress`.
    pub fn with_progress(self, progress: &'a AtomicU64) -> Self {
        Budget {
            progress: Some(progress),
            ..self
        }
    }
}

/// A deadline far enough to be none (a year).
const LONG_TIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// Nodes between two updates of [`Budget::progress`] and two looks at the
/// clock.
pub const PROGRESS_STEP: u64 = 64;

/// What stopped a search before it proved its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The node budget ran out: the same on every machine.
    NodeBudget,
    /// The wall-clock cap passed: the result depends on the machine.
    TimeLimit,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::NodeBudget => "node budget",
            Stop::TimeLimit => "time limit",
        })
    }
}

/// The answer to "does everything fit in `cap` bytes?".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// A packing: one offset per buffer.
    Packing(Vec<u64>),
    /// Proven: no packing within the capacity exists.
    Impossible,
    /// The budget ran out before either was found.
    Stopped(Stop),
}

/// The best packing [`minimize`] found and whether it is proven smallest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    /// One offset per buffer.
    pub offsets: Vec<u64>,
    /// max(offset + size), 0 without buffers.
    pub high_water: u64,
    /// No packing below `high_water` exists.
    pub optimal: bool,
    /// Search nodes visited, over every capacity tried (of the two workers
    /// of each capacity, the count of the one that answered, else the
    /// larger).
    pub nodes: u64,
    /// What cut the search short, if anything did.
    pub stopped: Option<Stop>,
}

/// A problem prepared for search: sections and time overlaps.
pub struct Instance {
    bufs: Vec<Buffer>,
    /// Sections `lo..hi` each buffer covers.
    span: Vec<(usize, usize)>,
    /// For every buffer, the buffers it overlaps in time.
    overlaps: Vec<Vec<u32>>,
    /// For every section, the buffers live in it.
    section_bufs: Vec<Vec<u32>>,
    /// For every section, the bytes of the buffers live in it.
    section_bytes: Vec<u64>,
    /// For every buffer, how long it lives: its operators, or the time
    /// they take ([`Self::timed`]). The static preorders weigh it.
    length: Vec<u64>,
    /// [`lanes`] of every buffer's and of every section's term in
    /// [`Search::hash`].
    buffer_lanes: Vec<[u64; 2]>,
    section_lanes: Vec<[u64; 2]>,
    /// A good packing ([`minimize`]'s best so far), whose order (lowest
    /// offset first) is raced first, on a worker of its own.
    guide: Option<Vec<u64>>,
}

impl Instance {
    /// Prepares `bufs` for search.
    pub fn new(bufs: &[Buffer]) -> Instance {
        let mut points: Vec<usize> = bufs.iter().flat_map(|b| [b.first, b.last + 1]).collect();
        points.sort_unstable();
        points.dedup();
        let sections = points.len().saturating_sub(1);
        let at = |t: usize| points.binary_search(&t).expect("an event point");
        let span: Vec<(usize, usize)> =
            bufs.iter().map(|b| (at(b.first), at(b.last + 1))).collect();
        let mut section_bufs = vec![Vec::new(); sections];
        for (i, &(lo, hi)) in span.iter().enumerate() {
            for s in &mut section_bufs[lo..hi] {
                s.push(i as u32);
            }
        }
        // Two buffers overlap iff they share a section.
        let mut overlaps = vec![Vec::new(); bufs.len()];
        let mut seen = vec![usize::MAX; bufs.len()];
        for (i, &(lo, hi)) in span.iter().enumerate() {
            for s in &section_bufs[lo..hi] {
                for &j in s {
                    if j as usize != i && seen[j as usize] != i {
                        seen[j as usize] = i;
                        overlaps[i].push(j);
                    }
                }
            }
        }
        let section_bytes = section_bufs
            .iter()
            .map(|s| s.iter().map(|&b| bufs[b as usize].size).sum())
            .collect();
        let length = bufs.iter().map(|b| (b.last - b.first + 1) as u64).collect();
        let buffer_lanes = (0..bufs.len() as u64)
            .map(|b| lanes(BUFFER_TERM | b))
            .collect();
        let section_lanes = (0..sections as u64).map(lanes).collect();
        Instance {
            bufs: bufs.to_vec(),
            span,
            overlaps,
            section_bufs,
            section_bytes,
            length,
            buffer_lanes,
            section_lanes,
            guide: None,
        }
    }

    /// The same instance with every lifetime weighed by the time its
    /// operators take: operator `t` runs from `times[t]` up to
    /// `times[t + 1]` (`times` is non-decreasing, one entry more than
    /// the operators). Only the order of the search changes: its static
    /// preorders rank buffers by lifetime and area, and a lifetime
    /// counted in operators is another instance to them than one counted
    /// in time (MiniMalloc's benchmark instances come with times).
    pub fn timed(mut self, times: &[u64]) -> Instance {
        for (l, b) in self.length.iter_mut().zip(&self.bufs) {
            *l = times[b.last + 1].saturating_sub(times[b.first]);
        }
        self
    }

    /// The most bytes live in any one section: no packing is smaller.
    pub fn lower_bound(&self) -> u64 {
        self.section_bytes.iter().copied().max().unwrap_or(0)
    }

    /// Whether `offsets` is a packing: aligned, and buffers live at the same
    /// time do not share a byte.
    pub fn is_packing(&self, offsets: &[u64]) -> bool {
        offsets.len() == self.bufs.len()
            && self.bufs.iter().enumerate().all(|(i, b)| {
                offsets[i] % b.align.max(1) == 0
                    && self.overlaps[i].iter().all(|&j| {
                        let (oj, sj) = (offsets[j as usize], self.bufs[j as usize].size);
                        offsets[i] + b.size <= oj || oj + sj <= offsets[i]
                    })
            })
    }

    /// Decides whether every buffer fits in `cap` bytes, while `nodes`
    /// (the nodes visited so far, counted on) stays within the budget.
    ///
    /// Two workers search at once, on two threads, each with the budget
    /// left and its own half of the runs (see the module comment); `nodes`
    /// counts on by the larger of their counts. The answer is the first
    /// one found, first by each worker's own count of nodes (then the
    /// first worker): a worker stops once its count passes that of an
    /// answer already found, so which thread runs faster changes nothing.
    pub fn fit(&self, cap: u64, budget: &Budget, nodes: &mut u64) -> Fit {
        if self.bufs.is_empty() {
            return Fit::Packing(Vec::new());
        }
        if self.lower_bound() > cap || self.bufs.iter().any(|b| b.size > cap) {
            return Fit::Impossible;
        }
        let left = budget.nodes.saturating_sub(*nodes);
        if left == 0 {
            return Fit::Stopped(Stop::NodeBudget);
        }
        let orders = self.orders();
        let answered = AtomicU64::new(u64::MAX);
        let ends: Vec<(Fit, u64)> = std::thread::scope(|s| {
            let other = s.spawn(|| self.worker(cap, budget, left, &orders, 1, &answered));
            let first = self.worker(cap, budget, left, &orders, 0, &answered);
            vec![first, other.join().expect("a worker does not panic")]
        });
        decide(&ends, nodes)
    }

    /// The runs of every round of worker `w` at `cap`: every order of
    /// `orders` (the guide's first, if any) with each branching.
    ///
    /// Where every section is full at `cap` (the lower bound of an
    /// instance whose every column holds as many bytes), only exact
    /// cover, which there branches anywhere, where refutations are local
    /// and backjumping pays; the guide's runs alone on the first worker,
    /// the static orders on the second. Elsewhere plain canonical
    /// branching too, with as many nodes (MiniMalloc's instances are
    /// packed by it), and the orders dealt to the workers in turn, the
    /// guide's first.
    fn runs(&self, cap: u64, orders: &[Order], w: usize) -> Vec<Run> {
        let full = self.section_bytes.iter().all(|&t| t == cap);
        let branchings: &[Branching] = if full {
            &[Branching::Cover]
        } else {
            &[Branching::Cover, Branching::Plain]
        };
        let guided = orders[0].keys.is_none();
        (0..orders.len())
            .filter(|&order| match (guided && full, order) {
                (true, 0) => w == 0,
                (true, _) => w == 1,
                (false, _) => order % 2 == w,
            })
            .flat_map(|order| {
                branchings
                    .iter()
                    .map(move |&branching| Run { order, branching })
            })
            .collect()
    }

    /// Worker `w` of [`Self::fit`]: its runs ([`Self::runs`]) round after
    /// round, the node limit doubling each round, with at most `left`
    /// nodes. Its answer, and the nodes it visited up to it (or to where
    /// it stopped). It publishes an answer's count in `answered`, and
    /// stops once its own count passes it.
    fn worker(
        &self,
        cap: u64,
        budget: &Budget,
        left: u64,
        orders: &[Order],
        w: usize,
        answered: &AtomicU64,
    ) -> (Fit, u64) {
        let runs = self.runs(cap, orders, w);
        let mut limit = 2 * self.bufs.len() as u64;
        // States proven to have no completion, shared by this worker's
        // runs: a refutation holds whatever order found it.
        let mut refuted = HashMap::new();
        let mut nodes = 0u64;
        while !runs.is_empty() {
            for run in &runs {
                let rest = left.saturating_sub(nodes);
                if rest == 0 || nodes >= answered.load(Ordering::Relaxed) {
                    break;
                }
                let mut s = Search::new(self, cap, orders, run, budget);
                s.limit = limit.min(rest);
                s.answered = Some((answered, nodes));
                s.refuted = std::mem::take(&mut refuted);
                let st = s.solve();
                nodes += s.nodes;
                refuted = std::mem::take(&mut s.refuted);
                let fit = match st {
                    St::Found => Fit::Packing(s.solution),
                    St::NotFound(_) => Fit::Impossible,
                    St::Timeout => return (Fit::Stopped(Stop::TimeLimit), nodes),
                    St::Limit => continue,
                };
                answered.fetch_min(nodes, Ordering::Relaxed);
                return (fit, nodes);
            }
            if nodes >= left || nodes >= answered.load(Ordering::Relaxed) {
                break;
            }
            limit = limit.saturating_mul(2);
        }
        (Fit::Stopped(Stop::NodeBudget), nodes)
    }

    /// The orders to race: the guide's (lowest offset in the best packing
    /// first, then earliest), if there is one, then [`PREORDERS`].
    fn orders(&self) -> Vec<Order> {
        let n = self.bufs.len();
        let all: Vec<u32> = (0..n as u32).collect();
        let guided = self.guide.as_ref().map(|g| {
            let mut order = all.clone();
            order.sort_by_key(|&i| (g[i as usize], self.bufs[i as usize].first, i));
            Order::new(order, None)
        });
        let preorders = PREORDERS.iter().map(|keys| {
            let order = self.preorder(keys, &all, |b| {
                let (lo, hi) = self.span[b];
                self.section_bytes[lo..hi]
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
            });
            Order::new(order, Some(*keys))
        });
        guided.into_iter().chain(preorders).collect()
    }

    /// `bufs` ordered by `keys` (largest first, ties by index), where the
    /// bytes of buffer `b`'s busiest section are `total(b)`.
    fn preorder(&self, keys: &[Key; 3], bufs: &[u32], total: impl Fn(usize) -> u64) -> Vec<u32> {
        let mut keyed: Vec<([u64; 3], u32)> = bufs
            .iter()
            .map(|&b| {
                let bi = b as usize;
                let value = |k: &Key| match k {
                    Key::Length => self.length[bi],
                    Key::Area => self.length[bi].saturating_mul(self.bufs[bi].size),
                    Key::Total => total(bi),
                    Key::Size => self.bufs[bi].size,
                };
                (keys.each_ref().map(value), b)
            })
            .collect();
        keyed.sort_unstable_by(|(ka, a), (kb, b)| kb.cmp(ka).then(a.cmp(b)));
        keyed.into_iter().map(|(_, b)| b).collect()
    }
}

/// The answer of [`Instance::fit`] from its workers' `ends` (answer,
/// nodes visited); `nodes` counts on by the answering worker's count, or
/// by the larger where neither answered.
fn decide(ends: &[(Fit, u64)], nodes: &mut u64) -> Fit {
    let decided = ends
        .iter()
        .filter(|(f, _)| matches!(f, Fit::Packing(_) | Fit::Impossible))
        .min_by_key(|(_, c)| *c);
    if let Some((fit, c)) = decided {
        *nodes += c;
        return fit.clone();
    }
    *nodes += ends.iter().map(|(_, c)| *c).max().unwrap_or(0);
    if ends
        .iter()
        .any(|(f, _)| *f == Fit::Stopped(Stop::TimeLimit))
    {
        Fit::Stopped(Stop::TimeLimit)
    } else {
        Fit::Stopped(Stop::NodeBudget)
    }
}

/// What a static preorder ranks buffers by, larger first (MiniMalloc's
/// letter for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// How long it lives ([`Instance::timed`]): W.
    Length,
    /// Its length times its size: A.
    Area,
    /// The bytes still unplaced in its busiest section: T. Recomputed for
    /// every independent part the search splits off.
    Total,
    /// Its size: Z.
    Size,
}

/// The static preorders raced: MiniMalloc's three (WAT, TAW, TWA) and one
/// by size.
const PREORDERS: [[Key; 3]; 4] = [
    [Key::Length, Key::Area, Key::Total],
    [Key::Total, Key::Area, Key::Length],
    [Key::Total, Key::Length, Key::Area],
    [Key::Size, Key::Length, Key::Total],
];

/// An order to search in: a rank per buffer (lower first among buffers
/// at the same offset), and the keys it comes from, if it is a preorder
/// (which is then recomputed for every part split off).
struct Order {
    rank: Vec<u32>,
    keys: Option<[Key; 3]>,
}

impl Order {
    /// The order that puts `order[0]` first, then `order[1]`, ...
    fn new(order: Vec<u32>, keys: Option<[Key; 3]>) -> Order {
        let mut rank = vec![0u32; order.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        Order { rank, keys }
    }
}

/// How a search branches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Branching {
    /// Canonical placements only, in non-decreasing offset order.
    Plain,
    /// Where a section has no slack, on the buffers that can fill its
    /// lowest free byte; where no section has any, on the section with
    /// the fewest buffers that can start at its floor, wherever it is
    /// ([`Search::branch_tight`]).
    Cover,
}

/// One search of a round: an order (an index into [`Instance::orders`])
/// and a branching.
struct Run {
    order: usize,
    branching: Branching,
}

/// The smallest packing of `bufs` found within `budget`. `known` is a
/// packing to start from (e.g. a heuristic's); the result is never higher.
pub fn minimize(bufs: &[Buffer], known: Option<&[u64]>, budget: &Budget) -> Solution {
    minimize_in(Instance::new(bufs), known, budget)
}

/// The top of `bufs` at `offsets`: the highest end of a buffer, 0 for none.
pub fn high_water(bufs: &[Buffer], offsets: &[u64]) -> u64 {
    bufs.iter()
        .zip(offsets)
        .map(|(b, o)| o + b.size)
        .max()
        .unwrap_or(0)
}

/// [`minimize`] of the buffers of `inst` (made with [`Instance::new`],
/// maybe [`Instance::timed`]).
pub fn minimize_in(mut inst: Instance, known: Option<&[u64]>, budget: &Budget) -> Solution {
    let bufs = inst.bufs.clone();
    let height = |o: &[u64]| high_water(&bufs, o);
    let mut nodes = 0;
    let mut stopped = None;
    let mut best = match known {
        Some(k) if inst.is_packing(k) => k.to_vec(),
        _ => match inst.fit(u64::MAX, budget, &mut nodes) {
            Fit::Packing(p) => p,
            Fit::Stopped(why) => {
                stopped = Some(why);
                stacked(&bufs)
            }
            Fit::Impossible => stacked(&bufs),
        },
    };
    inst.guide = Some(best.clone());
    let mut hi = height(&best);
    let mut lo = inst.lower_bound();
    // The lower bound first: where a perfect packing exists it is the
    // answer, and the search is most constrained there.
    let mut cap = lo;
    while lo < hi && stopped.is_none() {
        match inst.fit(cap, budget, &mut nodes) {
            Fit::Packing(p) => {
                hi = height(&p);
                inst.guide = Some(p.clone());
                best = p;
            }
            Fit::Impossible => lo = cap + 1,
            Fit::Stopped(why) => stopped = Some(why),
        }
        cap = lo + (hi - lo) / 2;
        if lo < hi && cap >= hi {
            cap = hi - 1;
        }
    }
    Solution {
        high_water: hi,
        optimal: lo >= hi,
        offsets: best,
        nodes,
        stopped: stopped.filter(|_| lo < hi),
    }
}

/// Every buffer above the previous one: a packing of any instance.
fn stacked(bufs: &[Buffer]) -> Vec<u64> {
    let mut at = 0u64;
    bufs.iter()
        .map(|b| {
            let o = at.div_ceil(b.align.max(1)) * b.align.max(1);
            at = o + b.size;
            o
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Found,
    /// No completion; the state of the region's sections alone refutes
    /// it.
    NotFound(Region),
    /// The node limit of this round was hit.
    Limit,
    Timeout,
}

const UNPLACED: u64 = u64::MAX;

/// Refuted states remembered at most (16 bytes each).
const MAX_REFUTED: usize = 1 << 22;

/// Sections `lo..hi` whose state alone (their floors, the unplaced
/// buffers living in them and those buffers' lowest offsets) refutes a
/// node: even with every other section dropped and the buffers crossing
/// the boundary cut at it, nothing packs. A refutation that does not
/// depend on a decision holds without it, so the search backjumps over
/// the decisions that did not touch the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Region {
    lo: usize,
    hi: usize,
}

impl Region {
    fn new(lo: usize, hi: usize) -> Region {
        Region { lo, hi }
    }
    /// The smallest region holding both.
    fn join(self, o: Region) -> Region {
        Region::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }
    fn meets(self, (lo, hi): (usize, usize)) -> bool {
        lo < self.hi && self.lo < hi
    }
}

/// Sections `lo..hi` and the buffers that are solved together.
struct Part {
    lo: usize,
    hi: usize,
    /// Its buffers, unplaced when it was split off, in rank order.
    bufs: Vec<u32>,
    /// A hash of `bufs`: with a preorder, the ranks of its buffers are a
    /// function of them, so it stands for the order in a state key.
    id: u64,
}

impl Part {
    /// All of its sections.
    fn region(&self) -> Region {
        Region::new(self.lo, self.hi)
    }
}

/// One depth-first search of the decision problem with one rank order.
struct Search<'a> {
    inst: &'a Instance,
    cap: u64,
    /// Per buffer, its rank in the order searched in (only compared
    /// among the buffers of one part).
    rank: Vec<u32>,
    /// The preorder `rank` comes from, if it is one: then the ranks of
    /// every part split off are recomputed with the bytes left unplaced
    /// then ([`Key::Total`]).
    keys: Option<[Key; 3]>,
    /// Which of [`Instance::orders`] `rank` is.
    rank_id: usize,
    deadline: Instant,
    /// Where the nodes visited are counted for a progress display.
    progress: Option<&'a AtomicU64>,
    limit: u64,
    nodes: u64,
    /// Where [`Instance::worker`] publishes the node count of an answer,
    /// and the nodes its worker visited before this search: the search
    /// stops once it passes that count.
    answered: Option<(&'a AtomicU64, u64)>,
    offset: Vec<u64>,
    solution: Vec<u64>,
    /// Lowest admissible (aligned) offset of every unplaced buffer.
    min_off: Vec<u64>,
    /// Per section: lowest offset any unplaced buffer in it can take.
    floor: Vec<u64>,
    /// Per section: bytes of its unplaced buffers.
    total: Vec<u64>,
    /// Per boundary between sections s and s + 1: unplaced buffers across.
    cuts: Vec<u32>,
    /// Per section, a buffer of it last found unplaced with its lowest
    /// offset at the section's floor: a hint only, checked before use.
    witness: Vec<u32>,
    /// Sections already visited in the current placement (== `stamp`).
    seen: Vec<u64>,
    stamp: u64,
    /// Branch on the buffers that can fill a section without slack, and
    /// where no section has slack, on the section with the fewest
    /// buffers that can start at its floor, wherever it is
    /// ([`Self::branch_tight`]) ([`Branching::Cover`]).
    cover: bool,
    /// Keys ([`Self::state_key`]) of states without a completion, and the
    /// regions that refute them.
    refuted: HashMap<u128, Region>,
    /// Per section, two lanes of a hash of its floor and of the unplaced
    /// buffers that start in it with their lowest offsets: sums of
    /// pseudo-random terms ([`mix`]), kept up to date by every change.
    hash: Vec<[u64; 2]>,
}

impl<'a> Search<'a> {
    /// A search at `cap` of `run`, in its order among `orders`, without a
    /// node limit yet.
    fn new(inst: &'a Instance, cap: u64, orders: &[Order], run: &Run, budget: &Budget<'a>) -> Self {
        let n = inst.bufs.len();
        let sections = inst.section_bufs.len();
        let total = inst.section_bytes.clone();
        let mut cuts = vec![0u32; sections.saturating_sub(1)];
        for &(lo, hi) in &inst.span {
            for c in &mut cuts[lo..hi - 1] {
                *c += 1;
            }
        }
        let mut hash: Vec<[u64; 2]> = (0..sections)
            .map(|s| [mix(0, s as u64, 0), mix(1, s as u64, 0)])
            .collect();
        for (b, &(lo, _)) in inst.span.iter().enumerate() {
            for (l, h) in hash[lo].iter_mut().enumerate() {
                *h = h.wrapping_add(mix(l, BUFFER_TERM | b as u64, 0));
            }
        }
        Search {
            inst,
            cap,
            rank: orders[run.order].rank.clone(),
            keys: orders[run.order].keys,
            rank_id: run.order,
            deadline: budget.deadline,
            progress: budget.progress,
            limit: 0,
            nodes: 0,
            answered: None,
            offset: vec![UNPLACED; n],
            solution: vec![0; n],
            min_off: vec![0; n],
            floor: vec![0; sections],
            total,
            cuts,
            witness: inst
                .section_bufs
                .iter()
                .map(|b| b.first().copied().unwrap_or(0))
                .collect(),
            seen: vec![0; sections],
            stamp: 0,
            cover: run.branching == Branching::Cover,
            refuted: HashMap::new(),
            hash,
        }
    }

    fn solve(&mut self) -> St {
        let all = Part {
            lo: 0,
            hi: self.inst.section_bufs.len(),
            bufs: (0..self.inst.bufs.len() as u32).collect(),
            id: 0,
        };
        let cuts: Vec<usize> = (0..self.cuts.len())
            .filter(|&c| self.cuts[c] == 0)
            .map(|c| c + 1)
            .collect();
        self.solve_parts(&all, cuts)
    }

    /// Solves the unplaced buffers of `part` split at the section
    /// boundaries `cuts` (no unplaced buffer crosses them), one side after
    /// the other.
    fn solve_parts(&mut self, part: &Part, cuts: Vec<usize>) -> St {
        let mut bounds = vec![part.lo];
        bounds.extend(cuts);
        bounds.push(part.hi);
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let mut bufs: Vec<u32> = part
                .bufs
                .iter()
                .copied()
                .filter(|&b| {
                    let (blo, bhi) = self.inst.span[b as usize];
                    self.offset[b as usize] == UNPLACED && blo < hi && lo < bhi
                })
                .collect();
            if bufs.is_empty() {
                continue;
            }
            let ranks = self.rerank(&mut bufs);
            let id = bufs.iter().fold(0u64, |h, &b| {
                h.wrapping_add(mix(0, BUFFER_TERM | u64::from(b), 0))
            });
            let sub = Part { lo, hi, bufs, id };
            let st = self.search(&sub, 0, 0);
            for (&b, r) in sub.bufs.iter().zip(ranks) {
                self.rank[b as usize] = r;
            }
            if st != St::Found {
                return st;
            }
        }
        St::Found
    }

    /// Sorts the buffers of a part being split off by rank; with a
    /// preorder, ranks them anew first, by the bytes left unplaced now
    /// (as MiniMalloc does for every part it splits off). Returns their
    /// ranks before, in the new order, for the caller to restore.
    fn rerank(&mut self, bufs: &mut Vec<u32>) -> Vec<u32> {
        let Some(keys) = &self.keys else {
            bufs.sort_unstable_by_key(|&b| self.rank[b as usize]);
            return bufs.iter().map(|&b| self.rank[b as usize]).collect();
        };
        *bufs = self.inst.preorder(keys, bufs, |b| {
            let (lo, hi) = self.inst.span[b];
            self.total[lo..hi].iter().copied().max().unwrap_or(0)
        });
        bufs.iter()
            .enumerate()
            .map(|(r, &b)| std::mem::replace(&mut self.rank[b as usize], r as u32))
            .collect()
    }

    /// Places the next buffer of `part`: at an offset of at least `last`
    /// (and, at `last`, of rank above `last_rank`).
    fn search(&mut self, part: &Part, last: u64, last_rank: u32) -> St {
        self.nodes += 1;
        if self.nodes > self.limit
            || self
                .answered
                .is_some_and(|(a, before)| before + self.nodes > a.load(Ordering::Relaxed))
        {
            return St::Limit;
        }
        if self.nodes % PROGRESS_STEP == 0 {
            if let Some(p) = self.progress {
                p.fetch_add(PROGRESS_STEP, Ordering::Relaxed);
            }
            if Instant::now() >= self.deadline {
                return St::Timeout;
            }
        }
        let key = self.state_key(part, last, last_rank);
        if let Some(&r) = self.refuted.get(&key) {
            return St::NotFound(r);
        }
        let tight = self.cover && last == 0 && self.all_tight(part);
        let st = self.branch(part, last, last_rank, tight);
        if let St::NotFound(r) = st {
            if self.refuted.len() < MAX_REFUTED {
                self.refuted.insert(key, r);
            }
        }
        st
    }

    /// What the search below a node of `part` depends on: which of its
    /// buffers are unplaced and their lowest offsets, its sections'
    /// floors, and where the canonical order stands. Different placements
    /// below (e.g. two buffers of the same lifetime stacked either way)
    /// leave the same state, which is refuted once only. Which buffers
    /// may still go at `last` depends on the rank order unless
    /// `last_rank` is 0, so then the order is part of the state.
    ///
    /// Every unplaced buffer of `part` starts in one of its sections, so
    /// the sum of their [`Self::hash`]es covers the state.
    fn state_key(&self, part: &Part, last: u64, last_rank: u32) -> u128 {
        let order = match (last_rank, self.keys) {
            (0, _) => u64::MAX,
            (_, None) => self.rank_id as u64,
            (_, Some(_)) => mix(0, self.rank_id as u64, part.id),
        };
        let bounds = ((part.lo as u64) << 32) | part.hi as u64;
        let lane = |l: usize| {
            let head = mix(l, mix(l, mix(l, bounds, last), last_rank.into()), order);
            let sum = self.hash[part.lo..part.hi]
                .iter()
                .fold(0u64, |a, h| a.wrapping_add(h[l]));
            mix(l, head, sum)
        };
        (u128::from(lane(0)) << 64) | u128::from(lane(1))
    }

    /// [`Self::search`]'s branching, at a state not yet refuted.
    fn branch(&mut self, part: &Part, last: u64, last_rank: u32, tight: bool) -> St {
        let mut order: Vec<(u64, u32, u32)> = part
            .bufs
            .iter()
            .filter(|&&b| self.offset[b as usize] == UNPLACED)
            .map(|&b| (self.min_off[b as usize], self.rank[b as usize], b))
            .collect();
        if order.is_empty() {
            return St::Found;
        }
        if tight {
            return self.branch_tight(part);
        }
        order.sort_unstable();
        let min_top = order
            .iter()
            .map(|&(o, _, b)| o + self.inst.bufs[b as usize].size)
            .min()
            .expect("not empty");
        if let Some(cells) = self
            .cover
            .then(|| self.tight_section(part, last, &order))
            .flatten()
        {
            return self.branch_cover(part, last, &order, min_top, cells);
        }
        self.branch_canonical(part, (last, last_rank), &order, min_top)
    }

    /// Exact cover: the lowest free byte of a section without slack must
    /// be the start of one of `cells`; any order of buffers at one offset
    /// is then fine, so ranks are not needed. `order` is the unplaced
    /// buffers of `part` (lowest offset, rank, buffer) in order, and
    /// `min_top` the lowest top any of them reaches.
    fn branch_cover(
        &mut self,
        part: &Part,
        last: u64,
        order: &[(u64, u32, u32)],
        min_top: u64,
        cells: Vec<u32>,
    ) -> St {
        let off = order
            .iter()
            .map(|&(o, _, _)| o)
            .find(|&o| o >= last)
            .expect("a tight section has candidates");
        if off >= min_top {
            return St::NotFound(part.region());
        }
        for b in cells {
            match self.try_place(part, b as usize, off, (off, 0)) {
                Placed::Searched(St::NotFound(_), true) => break,
                Placed::Searched(St::NotFound(_), false) | Placed::Independent(_) => {}
                Placed::Searched(st, _) => return st,
            }
        }
        St::NotFound(part.region())
    }

    /// Plain canonical branching over `order` (as for
    /// [`Self::branch_cover`]), from `last` and, at `last`, above rank
    /// `last_rank`.
    fn branch_canonical(
        &mut self,
        part: &Part,
        (last, last_rank): (u64, u32),
        order: &[(u64, u32, u32)],
        min_top: u64,
    ) -> St {
        for &(off, rank, b) in order {
            // Canonical order: non-decreasing offsets, ties by rank.
            if off < last || (off == last && rank < last_rank) {
                continue;
            }
            // Dominance: some unplaced buffer would fit below this one.
            if off >= min_top {
                break;
            }
            let bi = b as usize;
            if off + self.inst.bufs[bi].size > self.cap {
                continue;
            }
            match self.try_place(part, bi, off, (off, rank)) {
                Placed::Searched(St::NotFound(_), true) => break,
                Placed::Searched(St::NotFound(_), false) | Placed::Independent(_) => {}
                Placed::Searched(st, _) => return st,
            }
        }
        St::NotFound(part.region())
    }

    /// Whether no section of `part` has slack: its floor plus its unplaced
    /// bytes is the capacity (or it is finished). Then no completion leaves
    /// a gap, and stays so below.
    fn all_tight(&self, part: &Part) -> bool {
        (part.lo..part.hi).all(|s| self.total[s] == 0 || self.floor[s] + self.total[s] == self.cap)
    }

    /// Branching without slack: every section's floor `f` is the start of
    /// one of its unplaced buffers in any completion, one whose lowest
    /// offset is `f`; a section without any refutes the node. Where all of
    /// a section's such buffers can go at `f` now (every section they live
    /// in is at `f`), branching on them is complete (exact cover): the
    /// section with the fewest is taken, wherever it is (the lowest
    /// section always qualifies). Offsets no longer rise monotonically, so
    /// the recursion keeps `last` at 0.
    fn branch_tight(&mut self, part: &Part) -> St {
        // Per section: its run of consecutive sections at the same floor.
        let width = part.hi - part.lo;
        let (mut run_start, mut run_end) = (vec![0usize; width], vec![0usize; width]);
        let mut a = part.lo;
        while a < part.hi {
            let mut c = a + 1;
            while c < part.hi && self.floor[c] == self.floor[a] {
                c += 1;
            }
            run_start[a - part.lo..c - part.lo].fill(a);
            run_end[a - part.lo..c - part.lo].fill(c);
            a = c;
        }
        let mut best: Option<(usize, u64, Vec<u32>)> = None;
        let mut cells = Vec::new();
        for s in part.lo..part.hi {
            if self.total[s] == 0 {
                continue;
            }
            let f = self.floor[s];
            let (ra, rc) = (run_start[s - part.lo], run_end[s - part.lo]);
            cells.clear();
            let mut ready = true;
            for &b in &self.inst.section_bufs[s] {
                let bi = b as usize;
                if self.offset[bi] != UNPLACED
                    || self.min_off[bi] != f
                    || f % self.inst.bufs[bi].align.max(1) != 0
                {
                    continue;
                }
                let (lo, hi) = self.inst.span[bi];
                ready &= ra <= lo && hi <= rc;
                cells.push(b);
            }
            if cells.is_empty() {
                return St::NotFound(Region::new(s, s + 1));
            }
            if ready && best.as_ref().is_none_or(|(_, _, c)| cells.len() < c.len()) {
                best = Some((s, f, cells.clone()));
            }
        }
        let Some((s, f, mut cells)) = best else {
            return St::Found;
        };
        cells.sort_unstable_by_key(|&b| self.rank[b as usize]);
        // Section s must start with one of the cells: the refutation is
        // s and what refutes every cell there.
        let mut why = Region::new(s, s + 1);
        for b in cells {
            match self.try_place(part, b as usize, f, (0, 0)) {
                Placed::Independent(r) => return St::NotFound(r),
                Placed::Searched(St::NotFound(r), _) => why = why.join(r),
                Placed::Searched(st, _) => return st,
            }
        }
        St::NotFound(why)
    }

    /// Places `b` at `off` and searches on; also says whether nothing
    /// unplaced lives above `b` (then where it goes cannot hurt the others,
    /// so if this branch fails, every sibling fails too).
    ///
    /// A refutation whose region the placement did not touch (`b` does
    /// not live there and raised no lowest offset of a buffer that does)
    /// holds without it: then [`Placed::Independent`]. Otherwise the
    /// region returned also holds, for every buffer `b` raised, a section
    /// where the two live together, which is what raised it.
    fn try_place(&mut self, part: &Part, b: usize, off: u64, next: (u64, u32)) -> Placed {
        let undo = self.place(b, off);
        let hatless = undo.offsets.is_empty();
        let st = match self.infeasible(part, next.0) {
            Some(r) => St::NotFound(r),
            None => self.split_or_continue(part, b, next),
        };
        let placed = match st {
            St::NotFound(r) if r.meets(self.inst.span[b]) => Placed::Searched(st, hatless),
            St::NotFound(r) => {
                // b lives outside r: a raise of a buffer living in r
                // happened where both live, outside r.
                let (blo, bhi) = self.inst.span[b];
                let mut why = r;
                for &(o, _) in &undo.offsets {
                    let (olo, ohi) = self.inst.span[o as usize];
                    if r.meets((olo, ohi)) {
                        let (lo, hi) = (blo.max(olo), bhi.min(ohi));
                        let t = if hi <= r.lo { hi - 1 } else { lo };
                        why = why.join(Region::new(t, t + 1));
                    }
                }
                if why == r {
                    Placed::Independent(r)
                } else {
                    Placed::Searched(St::NotFound(why), hatless)
                }
            }
            St::Found => {
                self.solution[b] = off;
                Placed::Searched(st, hatless)
            }
            _ => Placed::Searched(st, hatless),
        };
        self.unplace(b, undo);
        placed
    }

    /// The buffers that can fill the lowest free byte of the section of
    /// `part` without slack (floor + unplaced bytes = capacity) at the
    /// lowest offset still open, choosing the section with the fewest; an
    /// empty list when such a section's floor is below every open offset.
    /// None when no section is tight there.
    fn tight_section(&self, part: &Part, last: u64, order: &[(u64, u32, u32)]) -> Option<Vec<u32>> {
        let off = order.iter().map(|&(o, _, _)| o).find(|&o| o >= last)?;
        let mut best: Option<Vec<u32>> = None;
        for s in part.lo..part.hi {
            let total = self.total[s];
            let floor = self.floor[s].max(last);
            if total == 0 || floor + total != self.cap || floor > off {
                continue;
            }
            if floor < off {
                return Some(Vec::new());
            }
            let mut cells: Vec<u32> = self.inst.section_bufs[s]
                .iter()
                .copied()
                .filter(|&b| self.offset[b as usize] == UNPLACED && self.min_off[b as usize] == off)
                .collect();
            if best.as_ref().is_none_or(|c| cells.len() < c.len()) {
                cells.sort_unstable_by_key(|&b| self.rank[b as usize]);
                if cells.is_empty() {
                    return Some(cells);
                }
                best = Some(cells);
            }
        }
        best
    }

    /// After placing `b`: if some boundary it crossed has no unplaced
    /// buffer across any more, solve the sides apart; else go on.
    fn split_or_continue(&mut self, part: &Part, b: usize, (last, rank): (u64, u32)) -> St {
        let (lo, hi) = self.inst.span[b];
        let mut cuts = Vec::new();
        for c in lo..hi - 1 {
            self.cuts[c] -= 1;
            if self.cuts[c] == 0 && part.lo <= c && c + 1 < part.hi {
                cuts.push(c + 1);
            }
        }
        let st = if cuts.is_empty() {
            self.search(part, last, rank)
        } else {
            self.solve_parts(part, cuts)
        };
        for c in lo..hi - 1 {
            self.cuts[c] += 1;
        }
        st
    }

    /// Section inference: in every section of `part`, the unplaced buffers
    /// stack above the section's floor (and above `last`, the offset every
    /// later placement reaches at least). The region of a section or run
    /// where they cannot.
    fn infeasible(&self, part: &Part, last: u64) -> Option<Region> {
        (part.lo..part.hi)
            .find(|&s| self.total[s] != 0 && self.floor[s].max(last) + self.total[s] > self.cap)
            .map(|s| Region::new(s, s + 1))
            .or_else(|| self.uncoverable_bottom(part, last))
    }

    /// Well inference: in a section without slack the lowest free byte `f`
    /// must be the start of an unplaced buffer, and buffers starting at
    /// the same byte do not share a section. So a run of consecutive such
    /// sections with the same `f` must be partitioned in time by the
    /// lifetimes (clipped to the run) of unplaced buffers that can still
    /// start at `f`; if no partition exists, neither does a packing: the
    /// run is returned.
    fn uncoverable_bottom(&self, part: &Part, last: u64) -> Option<Region> {
        let bottom = |s: usize| {
            let f = self.floor[s].max(last);
            (self.total[s] != 0 && f + self.total[s] == self.cap).then_some(f)
        };
        let mut s = part.lo;
        while s < part.hi {
            let Some(f) = bottom(s) else {
                s += 1;
                continue;
            };
            let a = s;
            let mut c = s + 1;
            while c < part.hi && bottom(c) == Some(f) {
                c += 1;
            }
            // reach[i]: sections a..a + i can be covered exactly.
            let mut reach = vec![false; c - a + 1];
            reach[0] = true;
            for x in a..c {
                if !reach[x - a] {
                    continue;
                }
                for &b in &self.inst.section_bufs[x] {
                    let b = b as usize;
                    let (lo, hi) = self.inst.span[b];
                    if self.offset[b] != UNPLACED
                        || lo.max(a) != x
                        || self.min_off[b] > f
                        || f % self.inst.bufs[b].align.max(1) != 0
                    {
                        continue;
                    }
                    reach[hi.min(c) - a] = true;
                }
            }
            if !reach[c - a] {
                return Some(Region::new(a, c));
            }
            s = c;
        }
        None
    }

    /// Places `b` at `off`; returns what [`Self::unplace`] restores.
    fn place(&mut self, b: usize, off: u64) -> Undo {
        let inst = self.inst;
        let buf = inst.bufs[b];
        let top = off + buf.size;
        self.mix_buffer(b, false);
        self.offset[b] = off;
        let mut undo = Undo::default();
        for &o in &inst.overlaps[b] {
            let o = o as usize;
            if self.offset[o] != UNPLACED {
                continue;
            }
            let a = inst.bufs[o].align.max(1);
            let raised = top.div_ceil(a) * a;
            if self.min_off[o] < raised {
                undo.offsets.push((o as u32, self.min_off[o]));
                self.set_min_off(o, raised);
            }
        }
        let (lo, hi) = inst.span[b];
        for s in lo..hi {
            undo.floors.push((s as u32, self.floor[s]));
            self.set_floor(s, top);
            self.total[s] -= buf.size;
        }
        // A section's floor is at least its lowest unplaced min offset.
        self.stamp += 1;
        for k in 0..undo.offsets.len() {
            let (l, h) = inst.span[undo.offsets[k].0 as usize];
            for s in l..h {
                if self.seen[s] == self.stamp {
                    continue;
                }
                self.seen[s] = self.stamp;
                if let Some(m) = self.raised_floor(s) {
                    undo.floors.push((s as u32, self.floor[s]));
                    self.set_floor(s, m);
                }
            }
        }
        undo
    }

    /// The lowest offset of the unplaced buffers of section `s`, where
    /// that is above its floor (none live there at the floor). The last
    /// buffer found at the floor ([`Self::witness`]) is looked at first.
    fn raised_floor(&mut self, s: usize) -> Option<u64> {
        let floor = self.floor[s];
        let at_floor = |o: usize| self.offset[o] == UNPLACED && self.min_off[o] <= floor;
        if at_floor(self.witness[s] as usize) {
            return None;
        }
        let mut lowest = u64::MAX;
        for &o in &self.inst.section_bufs[s] {
            if self.offset[o as usize] != UNPLACED {
                continue;
            }
            let m = self.min_off[o as usize];
            if m <= floor {
                self.witness[s] = o;
                return None;
            }
            lowest = lowest.min(m);
        }
        (lowest != u64::MAX).then_some(lowest)
    }

    fn unplace(&mut self, b: usize, undo: Undo) {
        for &(s, f) in undo.floors.iter().rev() {
            self.set_floor(s as usize, f);
        }
        for &(o, m) in undo.offsets.iter().rev() {
            self.set_min_off(o as usize, m);
        }
        let (lo, hi) = self.inst.span[b];
        for s in lo..hi {
            self.total[s] += self.inst.bufs[b].size;
        }
        self.offset[b] = UNPLACED;
        self.mix_buffer(b, true);
    }

    /// Sets the floor of section `s`, keeping its hash.
    fn set_floor(&mut self, s: usize, f: u64) {
        let key = self.inst.section_lanes[s];
        rehash(&mut self.hash[s], key, Some(self.floor[s]), Some(f));
        self.floor[s] = f;
    }

    /// Sets the lowest offset of unplaced buffer `b`, keeping the hash.
    fn set_min_off(&mut self, b: usize, m: u64) {
        let key = self.inst.buffer_lanes[b];
        let h = &mut self.hash[self.inst.span[b].0];
        rehash(h, key, Some(self.min_off[b]), Some(m));
        self.min_off[b] = m;
    }

    /// Adds unplaced buffer `b` with its lowest offset to the hash of the
    /// section it starts in, or takes it out.
    fn mix_buffer(&mut self, b: usize, add: bool) {
        let key = self.inst.buffer_lanes[b];
        let m = Some(self.min_off[b]);
        let (old, new) = if add { (None, m) } else { (m, None) };
        rehash(&mut self.hash[self.inst.span[b].0], key, old, new);
    }
}

/// Takes the term of the value `old` out of `hash` (both lanes) and puts
/// that of `new` in, for the item whose [`lanes`] are `key`.
#[inline]
fn rehash(hash: &mut [u64; 2], key: [u64; 2], old: Option<u64>, new: Option<u64>) {
    for (h, k) in hash.iter_mut().zip(key) {
        if let Some(v) = old {
            *h = h.wrapping_sub(mix_with(k, v));
        }
        if let Some(v) = new {
            *h = h.wrapping_add(mix_with(k, v));
        }
    }
}

/// Marks a buffer's term in [`Search::hash`] apart from a floor's.
const BUFFER_TERM: u64 = 1 << 63;

/// A pseudo-random function of `(a, b)`, one per lane (SplitMix64's
/// finalizer, applied twice): `mix_with(lanes(a)[lane], b)`.
fn mix(lane: usize, a: u64, b: u64) -> u64 {
    mix_with(lanes(a)[lane], b)
}

/// The half of [`mix`] that depends on `a` alone, per lane.
fn lanes(a: u64) -> [u64; 2] {
    [0x9e37_79b9_7f4a_7c15, 0xd1b5_4a32_d192_ed03].map(|seed| finalize(a.wrapping_add(seed)))
}

/// The rest of [`mix`], from `a`'s half for one lane.
fn mix_with(lane_of_a: u64, b: u64) -> u64 {
    finalize(lane_of_a ^ b)
}

/// SplitMix64's finalizer.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How a branch of [`Search::try_place`] ended.
enum Placed {
    /// The search below it ended so; whether nothing unplaced lives above
    /// the placed buffer.
    Searched(St, bool),
    /// Refuted by a region the placement did not touch: the node it was
    /// made at is refuted by the same region.
    Independent(Region),
}

/// What one placement changed.
#[derive(Default)]
struct Undo {
    offsets: Vec<(u32, u64)>,
    floors: Vec<(u32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use std::time::Duration;

    fn far() -> Budget<'static> {
        Budget::new(u64::MAX, Duration::from_secs(60))
    }

    /// The smallest capacity any assignment of offsets fits in, by trying
    /// every offset of every buffer (small instances only).
    fn brute_force(bufs: &[Buffer]) -> u64 {
        fn place(bufs: &[Buffer], cap: u64, offs: &mut Vec<u64>) -> bool {
            let k = offs.len();
            if k == bufs.len() {
                return true;
            }
            let b = bufs[k];
            let mut o = 0;
            while o + b.size <= cap {
                let clash = (0..k).any(|j| {
                    let c = bufs[j];
                    c.first <= b.last
                        && b.first <= c.last
                        && o < offs[j] + c.size
                        && offs[j] < o + b.size
                });
                if !clash {
                    offs.push(o);
                    if place(bufs, cap, offs) {
                        return true;
                    }
                    offs.pop();
                }
                o += b.align;
            }
            false
        }
        let mut cap = Instance::new(bufs).lower_bound();
        while !place(bufs, cap, &mut Vec::new()) {
            cap += 1;
        }
        cap
    }

    fn random(rng: &mut SplitMix64, n: usize) -> Vec<Buffer> {
        (0..n)
            .map(|_| {
                let first = rng.below(6);
                let last = first + rng.below(4);
                Buffer {
                    first,
                    last,
                    size: 1 + rng.below(5) as u64,
                    align: [1, 1, 2, 4][rng.below(4)],
                }
            })
            .collect()
    }

    /// Crowded instances: enough buffers in few operators that the search
    /// reaches the same unplaced set with different floors, where a
    /// remembered refutation must not be reused.
    #[test]
    fn refuted_states_are_not_confused() {
        let mut rng = SplitMix64(29);
        for _ in 0..150 {
            let n = 7 + rng.below(3);
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let first = rng.below(4);
                    Buffer {
                        first,
                        last: first + rng.below(3),
                        size: 1 + rng.below(4) as u64,
                        align: [1, 1, 2][rng.below(3)],
                    }
                })
                .collect();
            let want = brute_force(&bufs);
            let s = minimize(&bufs, None, &far());
            assert!(s.optimal, "{bufs:?}");
            assert_eq!(s.high_water, want, "{bufs:?}");
            assert!(Instance::new(&bufs).is_packing(&s.offsets), "{bufs:?}");
        }
    }

    /// Lifetimes weighed by random operator times reorder the search,
    /// never its answer.
    #[test]
    fn timed_instances_match_brute_force() {
        let mut rng = SplitMix64(43);
        for _ in 0..200 {
            let n = 3 + rng.below(6);
            let bufs = random(&mut rng, n);
            let ops = bufs.iter().map(|b| b.last + 1).max().unwrap();
            let mut times = vec![0u64];
            for _ in 0..ops {
                let last = *times.last().unwrap();
                times.push(last + 1 + rng.below(1000) as u64);
            }
            let want = brute_force(&bufs);
            let s = minimize_in(Instance::new(&bufs).timed(&times), None, &far());
            assert!(s.optimal, "{bufs:?} {times:?}");
            assert_eq!(s.high_water, want, "{bufs:?} {times:?}");
            assert!(Instance::new(&bufs).is_packing(&s.offsets), "{bufs:?}");
        }
    }

    #[test]
    fn proven_optimum_matches_brute_force() {
        let mut rng = SplitMix64(17);
        let mut above_bound = 0;
        for _ in 0..300 {
            let n = 2 + rng.below(6);
            let bufs = random(&mut rng, n);
            let want = brute_force(&bufs);
            let s = minimize(&bufs, None, &far());
            assert!(s.optimal, "{bufs:?}");
            assert_eq!(s.high_water, want, "{bufs:?}");
            let inst = Instance::new(&bufs);
            assert!(inst.is_packing(&s.offsets), "{bufs:?}: {:?}", s.offsets);
            let top = s.offsets.iter().zip(&bufs).map(|(o, b)| o + b.size).max();
            assert_eq!(top, Some(s.high_water));
            if want > inst.lower_bound() {
                above_bound += 1;
            }
        }
        // The sample includes instances whose optimum is above the liveness
        // bound, where optimality needs a proof of infeasibility.
        assert!(above_bound >= 20, "{above_bound}");
    }

    #[test]
    fn impossible_is_proven_one_below_the_optimum() {
        let mut rng = SplitMix64(3);
        let mut checked = 0;
        while checked < 10 {
            let bufs = random(&mut rng, 6);
            let inst = Instance::new(&bufs);
            let best = brute_force(&bufs);
            if best == inst.lower_bound() {
                continue;
            }
            let mut nodes = 0;
            assert_eq!(
                inst.fit(best - 1, &far(), &mut nodes),
                Fit::Impossible,
                "{bufs:?}"
            );
            match inst.fit(best, &far(), &mut nodes) {
                Fit::Packing(p) => assert!(inst.is_packing(&p)),
                other => panic!("{bufs:?}: {other:?}"),
            }
            assert!(nodes > 0);
            checked += 1;
        }
    }

    #[test]
    fn a_known_packing_is_never_made_worse_and_time_runs_out_cleanly() {
        let mut rng = SplitMix64(5);
        let bufs = random(&mut rng, 7);
        let stacked = stacked(&bufs);
        let s = minimize(
            &bufs,
            Some(&stacked),
            &Budget::new(u64::MAX, Duration::ZERO),
        );
        let inst = Instance::new(&bufs);
        assert!(inst.is_packing(&s.offsets));
        let top: u64 = stacked
            .iter()
            .zip(&bufs)
            .map(|(o, b)| o + b.size)
            .max()
            .unwrap();
        assert!(s.high_water <= top);
    }

    /// A node budget stops the search at the same place every time, with
    /// the same packing, and says it did.
    #[test]
    fn a_node_budget_stops_the_search_the_same_way_every_time() {
        // Some 18000 nodes from hill_climb's packing to the optimum.
        let (m, _) = crate::hard::instance(100, 4);
        let bufs: Vec<Buffer> = m
            .tensors
            .iter()
            .filter_map(|t| {
                let l = t.lifetime.as_ref()?;
                Some(Buffer {
                    first: l.start_op,
                    last: l.end_op,
                    size: t.size,
                    align: t.alignment,
                })
            })
            .collect();
        let budget = Budget::new(300, Duration::from_secs(60));
        let a = minimize(&bufs, None, &budget);
        assert_eq!(a.stopped, Some(Stop::NodeBudget));
        assert!(!a.optimal);
        assert!(a.nodes >= 300 && a.nodes <= 301, "{}", a.nodes);
        assert!(Instance::new(&bufs).is_packing(&a.offsets));
        let counted = AtomicU64::new(0);
        let b = minimize(&bufs, None, &budget.with_progress(&counted));
        assert_eq!(a, b);
        let c = counted.load(Ordering::Relaxed);
        // Both workers count into it.
        assert!(c > 0 && c <= 2 * b.nodes, "{c}");
        let small = random(&mut SplitMix64(11), 6);
        let free = minimize(&small, None, &budget);
        assert_eq!((free.stopped, free.optimal), (None, true));
    }

    /// Instances without slack at their lower bound: random buffers, then
    /// one filler per operator that tops its column up to the fullest.
    /// Some pack at the bound, some provably do not; both must agree with
    /// brute force, through the branching on any section.
    #[test]
    fn full_columns_match_brute_force() {
        let mut rng = SplitMix64(41);
        let (mut at_bound, mut above) = (0, 0);
        for _ in 0..300 {
            let ops = 3 + rng.below(3);
            let mut bufs: Vec<Buffer> = (0..2 + rng.below(4))
                .map(|_| {
                    let first = rng.below(ops - 1);
                    Buffer {
                        first,
                        last: (first + 1 + rng.below(2)).min(ops - 1),
                        size: 1 + rng.below(4) as u64,
                        align: [1, 1, 2][rng.below(3)],
                    }
                })
                .collect();
            let column = |t: usize, bufs: &[Buffer]| -> u64 {
                bufs.iter()
                    .filter(|b| b.first <= t && t <= b.last)
                    .map(|b| b.size)
                    .sum()
            };
            let full = (0..ops).map(|t| column(t, &bufs)).max().unwrap() + 1;
            for t in 0..ops {
                let size = full - column(t, &bufs);
                bufs.push(Buffer {
                    first: t,
                    last: t,
                    size,
                    align: [1, 2][rng.below(2)],
                });
            }
            let inst = Instance::new(&bufs);
            assert_eq!(inst.lower_bound(), full);
            let want = brute_force(&bufs);
            let s = minimize(&bufs, None, &far());
            assert!(s.optimal, "{bufs:?}");
            assert_eq!(s.high_water, want, "{bufs:?}");
            assert!(inst.is_packing(&s.offsets), "{bufs:?}");
            if want == full {
                at_bound += 1;
            } else {
                above += 1;
            }
        }
        assert!(at_bound >= 20 && above >= 20, "{at_bound} {above}");
    }

    #[test]
    fn alignment_is_kept() {
        let bufs = [
            Buffer {
                first: 0,
                last: 1,
                size: 3,
                align: 1,
            },
            Buffer {
                first: 1,
                last: 2,
                size: 4,
                align: 4,
            },
        ];
        let s = minimize(&bufs, None, &far());
        // The 4-aligned buffer goes first: 0..4, then 4..7; the other way
        // round it would start at 4 after 0..3 and end at 8.
        assert_eq!((s.high_water, s.optimal), (7, true));
        assert_eq!(s.offsets, vec![4, 0]);
    }
}
