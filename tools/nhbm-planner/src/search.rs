//! hill_climb's search in one memory: bottom-up packings decoded from a
//! weight per buffer, improved by hill climbing over the weights.
//!
//! Decoding fills the lowest run of operators that share one floor (the
//! top of what is placed there): of the buffers whose lifetime lies inside
//! that run, a set that does not overlap in time is placed side by side on
//! the floor, chosen by dynamic programming to cover the most operators,
//! then to leave the fewest pits that no buffer can start to fill (a
//! stretch of equal tops lower than its neighbours on both sides, where
//! no other buffer of the run starts at its first operator and ends inside
//! it), then to have the most weight less a penalty for every step in the
//! new skyline (a flat skyline leaves wide runs that more buffers fit in).
//! A run that nothing fits in is raised to its lower neighbour; the bytes
//! it skips are wasted.
//!
//! The cost of a packing is first how low its first mistake is: the floor
//! of the first run raised, where bytes start being wasted (every column
//! of a perfect packing is full, so the longer a packing stays free of
//! them the better); then its high-water mark times the operators plus the
//! area under its skyline, which counts the wasted bytes. The search
//! changes one weight per move (a random value, or swapped with a buffer
//! live at the same time), half the time of a buffer on top of the walls
//! of that first mistake, and keeps the change when the cost is not above
//! the current one. A decode stops as soon as it proves its cost above
//! that: a mistake lower than its, or wasted bytes that put its high-water
//! mark (no column ends below its floor plus what is left to place there)
//! or its area above its.
//!
//! A decode after a move takes the current packing's steps again as they
//! were, choosing a cover anew only where a buffer whose weight changed is
//! a candidate, until one such cover differs; once no step ahead has them
//! as candidates, the packing is known to be the current one. Up to
//! `MAX_FREE` moves in a row that leave the packing as it is do not count
//! against the budget.
//!
//! It runs in rounds, one per entry of `ROUNDS`: a step penalty, and
//! whether operators are taken in reverse order, so that the skyline is
//! filled from the other end (the search scatters widely, so a few rounds
//! from the same first weights do better than one long one); a round stops
//! after half of `moves`, after half of `stall` moves without a lower
//! cost, or at the liveness lower bound, and the rounds stop at it too.
//! Rounds run two at a time, on two threads. The generator is seeded and
//! nothing depends on timing or on which thread ends first: the same
//! arguments give the same packing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::exact::Buffer;
use crate::rng::SplitMix64;

/// Moves in a row that may leave the packing as it is without counting.
const MAX_FREE: u32 = 16;

/// Moves between two looks at the clock.
pub const CLOCK_STEP: u64 = 64;

/// Each round's step penalty, in tenths of (operators + 1), the range of a
/// random weight being twice that, and whether it decodes with time
/// reversed.
const ROUNDS: [(i64, bool); 4] = [(10, false), (10, true), (20, false), (20, true)];

/// The skyline as runs of operators with one floor, and the lowest run,
/// leftmost, in O(log runs).
struct Skyline {
    /// Per run, at its first operator: where it ends (exclusive).
    end: Vec<usize>,
    /// Per run, at its first operator: the first operator of the run
    /// before (`usize::MAX`: none).
    prev: Vec<usize>,
    /// Per run, at its first operator: its floor (`u64::MAX` where nothing
    /// is left to place).
    floor: Vec<u64>,
    /// Whether an operator is the first of a run.
    first: Vec<bool>,
    /// Runs by floor, then first operator; entries of runs since changed
    /// are skipped.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The runs [`Self::set`] makes.
    pieces: Vec<(usize, usize, u64)>,
}

impl Skyline {
    fn new(ops: usize) -> Self {
        Skyline {
            end: vec![0; ops],
            prev: vec![usize::MAX; ops],
            floor: vec![0; ops],
            first: vec![false; ops],
            heap: BinaryHeap::new(),
            pieces: Vec::new(),
        }
    }

    /// Floors `key` per operator.
    fn reset(&mut self, key: &[u64]) {
        self.first.fill(false);
        self.heap.clear();
        let mut prev = usize::MAX;
        let mut a = 0;
        while a < key.len() {
            let b = a + key[a..].iter().take_while(|&&x| x == key[a]).count();
            self.first[a] = true;
            self.end[a] = b;
            self.prev[a] = prev;
            self.floor[a] = key[a];
            if key[a] != u64::MAX {
                self.heap.push(Reverse((key[a], a)));
            }
            prev = a;
            a = b;
        }
    }

    /// The lowest run, leftmost: (floor, first operator, end).
    fn lowest(&mut self) -> Option<(u64, usize, usize)> {
        while let Some(Reverse((f, a))) = self.heap.pop() {
            if self.first[a] && self.floor[a] == f {
                return Some((f, a, self.end[a]));
            }
        }
        None
    }

    /// The floors left and right of the run starting at `a`.
    fn walls(&self, a: usize) -> (u64, u64) {
        let left = self.prev[a];
        let b = self.end[a];
        (
            if left == usize::MAX {
                u64::MAX
            } else {
                self.floor[left]
            },
            if b < self.first.len() {
                self.floor[b]
            } else {
                u64::MAX
            },
        )
    }

    /// Replaces the run starting at `a` by `pieces` (operators `x..y` at
    /// a floor, in order, covering it), joining equal neighbours.
    fn set(&mut self, a: usize, pieces: &[(usize, usize, u64)]) {
        let b = self.end[a];
        let before = self.prev[a];
        self.pieces.clear();
        if before != usize::MAX && self.floor[before] == pieces[0].2 {
            self.first[a] = false;
            self.pieces.push((before, a, pieces[0].2));
        }
        for &(x, y, v) in pieces {
            match self.pieces.last_mut() {
                Some(last) if last.2 == v => last.1 = y,
                _ => self.pieces.push((x, y, v)),
            }
        }
        if let Some(last) = self.pieces.last_mut() {
            if b < self.first.len() && self.floor[b] == last.2 {
                last.1 = self.end[b];
                self.first[b] = false;
            }
        }
        let mut prev = self.pieces.first().map_or(before, |p| {
            if p.0 == before {
                self.prev[before]
            } else {
                before
            }
        });
        for &(x, y, v) in &self.pieces {
            self.first[x] = true;
            self.end[x] = y;
            self.prev[x] = prev;
            self.floor[x] = v;
            if v != u64::MAX {
                self.heap.push(Reverse((v, x)));
            }
            prev = x;
        }
        if let Some(&(_, y, _)) = self.pieces.last() {
            if y < self.first.len() {
                self.prev[y] = prev;
            }
        }
    }
}

/// What a decode is ranked by, lowest first: the floor its first mistake
/// is at (higher first), then high-water mark times operators plus the
/// area under the skyline.
type Cost = (Reverse<u64>, u128);

/// One step of a decode (the run it took follows from the steps before):
/// the candidates its cover was chosen from (at `cands` of
/// [`Trace::cands`]; none where the run was raised instead), the buffers
/// chosen (at `chosen` of [`Trace::chosen`]) and the runs it left in its
/// place (at `pieces` of [`Trace::pieces`]).
#[derive(Clone, Copy)]
struct Step {
    cands: (usize, usize),
    chosen: (usize, usize),
    pieces: (usize, usize),
}

/// The steps of a decode, in order.
#[derive(Default)]
struct Trace {
    steps: Vec<Step>,
    cands: Vec<usize>,
    chosen: Vec<usize>,
    pieces: Vec<(usize, usize, u64)>,
}

impl Trace {
    fn clear(&mut self) {
        self.steps.clear();
        self.cands.clear();
        self.chosen.clear();
        self.pieces.clear();
    }
}

/// The decoder's state, reused between decodes.
struct Filler<'a> {
    bufs: &'a [Buffer],
    /// Buffers live at each operator.
    live: Vec<Vec<u32>>,
    /// Per operator: the floor before anything is placed (`u64::MAX`
    /// where no buffer lives).
    key0: Vec<u64>,
    skyline: Skyline,
    /// Buffers by first operator.
    by_first: Vec<usize>,
    /// Their first operators.
    firsts: Vec<usize>,
    /// Per operator: where the buffers starting there or later begin in
    /// `by_first`.
    from: Vec<usize>,
    /// Per buffer: its place in `by_first`.
    rank: Vec<usize>,
    /// Over `by_first`, the next buffer not placed: a union-find whose
    /// roots are the unplaced ones (and the end).
    next: Vec<usize>,
    off: Vec<u64>,
    /// Per operator: the bytes of the unplaced buffers live there.
    rem: Vec<u64>,
    /// The same before any is placed.
    load: Vec<u64>,
    /// Per operator: the buffer placed there last (`usize::MAX`: none).
    top: Vec<usize>,
    /// The buffers on top of the walls of the last decode's first mistake.
    suspects: Vec<usize>,
    /// Candidates of the run being filled, by first operator.
    cands: Vec<usize>,
    /// The next offset a buffer of the run that is not aligned at its
    /// floor could take.
    aligned: u64,
    /// Operators of the run (from its start) where a candidate starts or
    /// ends, and its start and end: where the covers' segments meet.
    pos: Vec<usize>,
    /// Per operator of the run (from its start) in `pos`: its place there.
    at: Vec<usize>,
    /// The operators of `pos`, one bit each.
    marks: Vec<u64>,
    /// Per place in `pos`: the best cover of the run up to it.
    best: Vec<Prefix>,
    /// Per operator of the run in `pos`: the earliest end (exclusive, from
    /// the run's start) of a candidate starting there, that candidate, and
    /// the earliest end of another.
    min_end: Vec<(usize, usize, usize)>,
    /// The buffers of the last cover, from the right.
    chosen: Vec<usize>,
    /// The runs the last cover leaves.
    pieces: Vec<(usize, usize, u64)>,
    /// The steps of the last decode.
    trial: Trace,
    /// The steps of the packing the search is at.
    kept: Trace,
    /// Per buffer: the steps of `kept` it is a candidate of, in order.
    runs_of: Vec<Vec<usize>>,
    /// The cost and high-water mark of the packing the search is at.
    kept_cost: Cost,
    kept_hwm: u64,
    /// What a step in the skyline costs in the cover's score.
    step_penalty: i64,
    /// The liveness lower bound: no packing's high-water mark is below it.
    bound: u64,
    /// Bytes x operators of every buffer together: the least a packing's
    /// skyline can cover.
    area: u128,
}

/// Per operator, the buffers live there and their bytes.
fn live_and_load(bufs: &[Buffer], ops: usize) -> (Vec<Vec<u32>>, Vec<u64>) {
    let mut live = vec![Vec::new(); ops];
    let mut load = vec![0; ops];
    for (k, b) in bufs.iter().enumerate() {
        for (l, x) in live[b.first..=b.last].iter_mut().zip(&mut load[b.first..]) {
            l.push(k as u32);
            *x += b.size;
        }
    }
    (live, load)
}

/// The buffers by first operator; per buffer, its place in that order;
/// per operator (and one past the last), where the buffers starting there
/// or later begin in it.
fn by_first(bufs: &[Buffer], ops: usize) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut by_first: Vec<usize> = (0..bufs.len()).collect();
    by_first.sort_by_key(|&k| bufs[k].first);
    let mut rank = vec![0; bufs.len()];
    for (i, &k) in by_first.iter().enumerate() {
        rank[k] = i;
    }
    let from = (0..=ops)
        .map(|t| by_first.partition_point(|&k| bufs[k].first < t))
        .collect();
    (by_first, rank, from)
}

/// What a decode has counted so far.
#[derive(Default)]
struct Tally {
    /// Buffers left to place.
    left: usize,
    /// The high-water mark.
    hwm: u64,
    /// The sum over operators of the floor there.
    floors: u128,
    /// The bytes wasted, and the least high-water mark they leave.
    waste: u128,
    least: u64,
    /// The floor of the first run raised (`u64::MAX`: none yet).
    mistake: u64,
}

impl Tally {
    /// Whether the decode's cost is proven above `limit` (over `ops`
    /// operators, with the liveness lower bound `bound` and `area`, the
    /// bytes x operators of every buffer): once it has made a mistake,
    /// its wasted bytes put its high-water mark or its area above.
    fn above(&self, limit: Cost, ops: u128, (bound, area): (u64, u128)) -> bool {
        let high = u128::from(self.hwm.max(bound).max(self.least));
        self.mistake != u64::MAX && (Reverse(self.mistake), high * ops + area + self.waste) > limit
    }
}

/// How a step taken again from the kept packing ended.
enum Replayed {
    /// No later step has a changed buffer as a candidate: the packing is
    /// the kept one.
    Kept,
    /// The step is the kept one.
    Same,
    /// Its cover differs from the kept one: the decode goes on afresh.
    Differs,
}

/// The best cover of a run's first operators: what it covers, its pits
/// and score, how it ends (the last segment of equal tops: where it
/// starts, its top, whether it is lower than the segment before) and the
/// choice that led to it.
#[derive(Clone, Copy)]
struct Prefix {
    covered: u64,
    pits: u64,
    score: i64,
    top: u64,
    segment: usize,
    /// The buffer the last segment starts with (`usize::MAX`: none).
    first: usize,
    down: bool,
    /// The place in `pos` of the prefix this one extends (`usize::MAX`:
    /// none reached yet).
    prev: usize,
    /// The buffer placed last, plus one (0: operators left uncovered).
    buf: usize,
}

impl Prefix {
    const NONE: Prefix = Prefix {
        covered: 0,
        pits: 0,
        score: 0,
        top: 0,
        segment: 0,
        first: usize::MAX,
        down: false,
        prev: usize::MAX,
        buf: 0,
    };

    /// Whether this prefix is preferred to `other`: it covers more, then
    /// leaves fewer pits, then scores more.
    fn beats(&self, other: &Prefix) -> bool {
        let key = |p: &Prefix| (p.covered, Reverse(p.pits), p.score);
        other.prev == usize::MAX || key(self) > key(other)
    }
}

impl<'a> Filler<'a> {
    /// The decoder of `bufs` above the floor `base` (per operator; none:
    /// 0).
    fn new(bufs: &'a [Buffer], base: Option<&[u64]>) -> Self {
        let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
        let (live, load) = live_and_load(bufs, ops);
        let (by_first, rank, from) = by_first(bufs, ops);
        Filler {
            bufs,
            firsts: by_first.iter().map(|&k| bufs[k].first).collect(),
            key0: live
                .iter()
                .enumerate()
                .map(|(t, l)| match (l.is_empty(), base) {
                    (true, _) => u64::MAX,
                    (false, Some(f)) => f[t],
                    (false, None) => 0,
                })
                .collect(),
            live,
            skyline: Skyline::new(ops),
            by_first,
            from,
            rank,
            next: (0..=bufs.len()).collect(),
            off: vec![0; bufs.len()],
            rem: load.clone(),
            load,
            top: vec![usize::MAX; ops],
            suspects: Vec::new(),
            cands: Vec::new(),
            aligned: u64::MAX,
            pos: Vec::new(),
            at: vec![0; ops + 1],
            marks: vec![0; ops / 64 + 1],
            best: Vec::new(),
            min_end: vec![(0, 0, 0); ops + 1],
            chosen: Vec::new(),
            pieces: Vec::new(),
            trial: Trace::default(),
            kept: Trace::default(),
            runs_of: vec![Vec::new(); bufs.len()],
            kept_cost: (Reverse(0), 0),
            kept_hwm: 0,
            step_penalty: 0,
            bound: 0,
            area: bufs
                .iter()
                .map(|b| u128::from(b.size) * (b.last - b.first + 1) as u128)
                .sum(),
        }
    }

    /// The first unplaced buffer from place `i` of `by_first` on (its
    /// length: none).
    fn find(&mut self, i: usize) -> usize {
        let mut r = i;
        while self.next[r] != r {
            r = self.next[r];
        }
        let mut x = i;
        while self.next[x] != r {
            let y = self.next[x];
            self.next[x] = r;
            x = y;
        }
        r
    }

    /// Takes the last decode as the packing the search is at.
    fn keep(&mut self, cost: Cost, hwm: u64) {
        std::mem::swap(&mut self.trial, &mut self.kept);
        (self.kept_cost, self.kept_hwm) = (cost, hwm);
        for r in &mut self.runs_of {
            r.clear();
        }
        for (i, s) in self.kept.steps.iter().enumerate() {
            for &k in &self.kept.cands[s.cands.0..s.cands.1] {
                self.runs_of[k].push(i);
            }
        }
    }

    /// Packs every buffer bottom up (see the module comment); returns its
    /// cost, its high-water mark and whether it differs from the packing
    /// the search is at, or `None` as soon as its cost is proven above
    /// `limit`. Offsets are left in `self.off`.
    ///
    /// With `changed`, `weight` differs from the weights of the packing
    /// the search is at only for those buffers, and that packing's steps
    /// are taken again as they were up to the first whose cover one of
    /// them changes: a step where neither is a candidate has the same
    /// inputs, so it chooses the same cover without choosing again.
    fn fill(
        &mut self,
        weight: &[u64],
        limit: Cost,
        changed: Option<[usize; 2]>,
    ) -> Option<(Cost, u64, bool)> {
        self.reset();
        let ops128 = self.top.len() as u128;
        let mut tally = Tally {
            left: self.bufs.len(),
            mistake: u64::MAX,
            ..Tally::default()
        };
        // While the kept packing is taken again: the changed buffers, and
        // how far through their steps the decode is.
        let mut replay = changed.filter(|_| !self.kept.steps.is_empty());
        let mut seen = [0usize; 2];
        while tally.left > 0 {
            // The lowest run, leftmost: operators a..b at floor f.
            let Some((f, a, b)) = self.skyline.lowest() else {
                break;
            };
            let tops = self.skyline.walls(a);
            let s = self.trial.steps.len();
            match (replay, self.kept.steps.get(s).copied()) {
                (Some(ks), Some(st)) => {
                    match self.replay_step(weight, (ks, &mut seen), (s, st), (f, a, b, tops)) {
                        Replayed::Kept => return Some((self.kept_cost, self.kept_hwm, false)),
                        Replayed::Same => {}
                        Replayed::Differs => replay = None,
                    }
                }
                _ => {
                    replay = None;
                    self.choose_step(weight, (f, a, b, tops));
                }
            }
            self.record_step();
            self.skyline.set(a, &self.pieces);
            if self.cands.is_empty() {
                match self.raise(&mut tally, (f, a, b)) {
                    None => continue,
                    Some(true) if Reverse(f) > limit.0 => return None,
                    Some(_) => {}
                }
            } else {
                self.place_chosen(&mut tally, f);
            }
            if tally.above(limit, ops128, (self.bound, self.area)) {
                return None;
            }
        }
        let differs = replay.is_none() || self.trial.steps.len() != self.kept.steps.len();
        let cost = (
            Reverse(tally.mistake),
            u128::from(tally.hwm) * ops128 + tally.floors,
        );
        Some((cost, tally.hwm, differs))
    }

    /// Makes ready for a decode: nothing placed, the first floors.
    fn reset(&mut self) {
        self.skyline.reset(&self.key0);
        for (i, x) in self.next.iter_mut().enumerate() {
            *x = i;
        }
        self.rem.copy_from_slice(&self.load);
        self.top.fill(usize::MAX);
        self.suspects.clear();
        self.trial.clear();
    }

    /// Step `s` of a decode that is taking the kept packing's steps again
    /// (`st`, the kept step `s`), at the run `a..b` at floor `f` between
    /// walls at `tops`: the kept step, except that where one of the
    /// changed buffers `ks` is a candidate the cover is chosen again.
    /// `seen` is how far through each one's kept steps the decode is.
    fn replay_step(
        &mut self,
        weight: &[u64],
        (ks, seen): ([usize; 2], &mut [usize; 2]),
        (s, st): (usize, Step),
        (f, a, b, tops): (u64, usize, usize, (u64, u64)),
    ) -> Replayed {
        let mut involved = false;
        let mut later = false;
        for (x, &k) in seen.iter_mut().zip(&ks) {
            let r = &self.runs_of[k];
            while r.get(*x).is_some_and(|&i| i < s) {
                *x += 1;
            }
            involved |= r.get(*x) == Some(&s);
            later |= *x < r.len();
        }
        if !later {
            // No step from here on has them as candidates: the rest, and
            // so the packing, is the kept one.
            return Replayed::Kept;
        }
        self.cands.clear();
        self.cands
            .extend_from_slice(&self.kept.cands[st.cands.0..st.cands.1]);
        let chosen = st.chosen.0..st.chosen.1;
        if involved {
            self.cover(weight, f, a, b, tops);
            if self.chosen[..] != self.kept.chosen[chosen] {
                return Replayed::Differs;
            }
        } else {
            self.chosen.clear();
            self.chosen.extend_from_slice(&self.kept.chosen[chosen]);
            self.pieces.clear();
            self.pieces
                .extend_from_slice(&self.kept.pieces[st.pieces.0..st.pieces.1]);
        }
        Replayed::Same
    }

    /// A step chosen afresh at the run `a..b` at floor `f` between walls
    /// at `tops`: a cover of its candidates, or, with none, the run raised
    /// up to the lower neighbour (wasting the bytes between) or to where
    /// a buffer of the run is aligned; a run with no buffer left in it is
    /// done.
    fn choose_step(&mut self, weight: &[u64], (f, a, b, tops): (u64, usize, usize, (u64, u64))) {
        self.candidates(f, a, b);
        if self.cands.is_empty() {
            let up = tops.0.min(tops.1).min(self.aligned);
            self.chosen.clear();
            self.pieces.clear();
            self.pieces.push((a, b, up));
        } else {
            self.cover(weight, f, a, b, tops);
        }
    }

    /// Appends the step just taken to the trial decode's steps.
    fn record_step(&mut self) {
        let t = &mut self.trial;
        t.steps.push(Step {
            cands: (t.cands.len(), t.cands.len() + self.cands.len()),
            chosen: (t.chosen.len(), t.chosen.len() + self.chosen.len()),
            pieces: (t.pieces.len(), t.pieces.len() + self.pieces.len()),
        });
        t.cands.extend_from_slice(&self.cands);
        t.chosen.extend_from_slice(&self.chosen);
        t.pieces.extend_from_slice(&self.pieces);
    }

    /// Counts the run `a..b` at floor `f` raised in `tally`: its wasted
    /// bytes, the least high-water mark they leave and, the first time,
    /// the mistake and the buffers on its walls. None where the run had
    /// nothing left to place; whether it was the first mistake.
    fn raise(&mut self, tally: &mut Tally, (f, a, b): (u64, usize, usize)) -> Option<bool> {
        let up = self.pieces[0].2;
        if up == u64::MAX {
            return None;
        }
        let wasted = u128::from(up - f) * (b - a) as u128;
        tally.floors += wasted;
        tally.waste += wasted;
        for &r in &self.rem[a..b] {
            if r > 0 {
                tally.least = tally.least.max(up + r);
            }
        }
        if tally.mistake != u64::MAX {
            return Some(false);
        }
        tally.mistake = f;
        for c in [a.wrapping_sub(1), b] {
            if let Some(&k) = self.top.get(c).filter(|&&k| k != usize::MAX) {
                self.suspects.push(k);
            }
        }
        Some(true)
    }

    /// Places the chosen buffers at floor `f`, counting them in `tally`.
    fn place_chosen(&mut self, tally: &mut Tally, f: u64) {
        for &k in &self.chosen {
            let bk = self.bufs[k];
            self.off[k] = f;
            self.next[self.rank[k]] = self.rank[k] + 1;
            for r in &mut self.rem[bk.first..=bk.last] {
                *r -= bk.size;
            }
            self.top[bk.first..=bk.last].fill(k);
            tally.floors += u128::from(bk.size) * (bk.last - bk.first + 1) as u128;
            tally.hwm = tally.hwm.max(f + bk.size);
            tally.left -= 1;
        }
    }

    /// The buffers not yet placed whose lifetimes lie inside the run `a..b`
    /// and that can start at `f`, by first operator, into `self.cands`;
    /// the next offset one that cannot could take into `self.aligned`.
    fn candidates(&mut self, f: u64, a: usize, b: usize) {
        let n = self.bufs.len();
        self.aligned = u64::MAX;
        self.cands.clear();
        let mut i = self.find(self.from[a]);
        while i < n && self.firsts[i] < b {
            let k = self.by_first[i];
            let bf = self.bufs[k];
            if bf.last < b {
                // Alignments are powers of two.
                if f & (bf.align - 1) == 0 {
                    self.cands.push(k);
                } else {
                    self.aligned = self.aligned.min(f.next_multiple_of(bf.align));
                }
            }
            i = self.find(i + 1);
        }
    }

    /// Chooses the cover of the run `a..b` at floor `f`, between walls at
    /// `tops` (see the module comment), from `self.cands`: its buffers in
    /// `self.chosen`, the runs it leaves in `self.pieces`.
    fn cover(&mut self, weight: &[u64], f: u64, a: usize, b: usize, tops: (u64, u64)) {
        self.segment_points(a, b - a);
        self.best_prefixes(weight, f, a, b - a, tops);
        self.pieces.clear();
        self.chosen.clear();
        let mut j = self.pos.len() - 1;
        while j > 0 {
            let p = self.best[j];
            let (x, y) = (a + self.pos[p.prev], a + self.pos[j]);
            let v = if p.buf > 0 {
                self.chosen.push(p.buf - 1);
                f + self.bufs[p.buf - 1].size
            } else {
                f
            };
            self.pieces.push((x, y, v));
            j = p.prev;
        }
        self.pieces.reverse();
    }

    /// The places of the run starting at `a`, `w` operators wide, where
    /// the candidates' segments meet (its ends and where a candidate
    /// starts or ends) into `self.pos` (and `self.at`), and per place the
    /// earliest ends of candidates starting there into `self.min_end`.
    fn segment_points(&mut self, a: usize, w: usize) {
        let words = w / 64 + 1;
        self.marks[..words].fill(0);
        let mut mark = |x: usize| self.marks[x / 64] |= 1 << (x % 64);
        mark(0);
        mark(w);
        for &k in &self.cands {
            let bk = self.bufs[k];
            mark(bk.first - a);
            mark(bk.last + 1 - a);
        }
        self.pos.clear();
        for (i, &m) in self.marks[..words].iter().enumerate() {
            let mut m = m;
            while m != 0 {
                self.pos.push(i * 64 + m.trailing_zeros() as usize);
                m &= m - 1;
            }
        }
        for (j, &x) in self.pos.iter().enumerate() {
            self.at[x] = j;
            self.min_end[x] = (usize::MAX, usize::MAX, usize::MAX);
        }
        for &k in &self.cands {
            let bk = self.bufs[k];
            let e = &mut self.min_end[bk.first - a];
            let end = bk.last + 1 - a;
            if end < e.0 {
                *e = (end, k, e.0);
            } else if end < e.2 {
                e.2 = end;
            }
        }
    }

    /// The best cover of the run starting at `a`, `w` operators wide, at
    /// floor `f` between walls at `tops`, up to every place of
    /// `self.pos`, into `self.best` (dynamic programming, place by place).
    fn best_prefixes(&mut self, weight: &[u64], f: u64, a: usize, w: usize, tops: (u64, u64)) {
        let np = self.pos.len();
        self.best.clear();
        self.best.resize(np, Prefix::NONE);
        self.best[0] = Prefix {
            top: tops.0,
            prev: 0,
            ..Prefix::NONE
        };
        let relax = |best: &mut [Prefix], j: usize, q: Prefix| {
            if q.beats(&best[j]) {
                best[j] = q;
            }
        };
        let mut c = 0;
        for pi in 0..np - 1 {
            let i = self.pos[pi];
            let from = (self.best[pi], pi, i);
            // Operators left uncovered up to the next place: where that is
            // the next operator, before the buffers starting here, else
            // after them (the order one operator at a time gives).
            let next = self.pos[pi + 1];
            let uncovered = self.extend(from, (next, f, 0, 0), (w, tops.1));
            if next == i + 1 {
                relax(&mut self.best, pi + 1, uncovered);
            }
            while let Some(&k) = self.cands.get(c).filter(|&&k| self.bufs[k].first == a + i) {
                let bk = self.bufs[k];
                let j = bk.last + 1 - a;
                let q = self.extend(from, (j, f + bk.size, k + 1, weight[k]), (w, tops.1));
                relax(&mut self.best, self.at[j], q);
                c += 1;
            }
            if next > i + 1 {
                relax(&mut self.best, pi + 1, uncovered);
            }
        }
    }

    /// Prefix `p` (at place `pi`, operator `i` of the run) extended by
    /// operators `i..j` topped at `top` (by buffer `buf` - 1 of weight
    /// `weight`, or uncovered where `buf` is 0), in a run `w` operators
    /// wide whose right wall is at `right_top`.
    #[inline]
    fn extend(
        &self,
        (p, pi, i): (Prefix, usize, usize),
        (j, top, buf, weight): (usize, u64, usize, u64),
        (w, right_top): (usize, u64),
    ) -> Prefix {
        let mut q = Prefix {
            covered: p.covered,
            pits: p.pits,
            score: p.score + weight as i64,
            top,
            segment: p.segment,
            first: p.first,
            down: p.down,
            prev: pi,
            buf,
        };
        if buf > 0 {
            q.covered += (j - i) as u64;
        }
        // No other buffer starts at the segment's start and ends inside
        // it.
        let unfillable = |start: usize, first: usize, end: usize| {
            let (e1, k1, e2) = self.min_end[start];
            (if k1 == first { e2 } else { e1 }) > end
        };
        if top != p.top {
            q.score -= self.step_penalty;
            if p.down && top > p.top && unfillable(p.segment, p.first, i) {
                q.pits += 1;
            }
            q.segment = i;
            q.first = buf.wrapping_sub(1);
            q.down = top < p.top;
        }
        if j == w && top != right_top {
            q.score -= self.step_penalty;
            if q.down && right_top > top && unfillable(q.segment, q.first, j) {
                q.pits += 1;
            }
        }
        q
    }
}

/// Packs `bufs` (at least one) in rounds of at most `moves / 2` moves,
/// `stall / 2` of them without gain (see the module comment); returns the
/// best packing's high-water mark and offsets.
///
/// At `deadline` it stops with the best packing so far: the rounds not
/// started are left out, and a round looks at the clock every
/// [`CLOCK_STEP`] moves (at least its first decode is made).
///
/// With `base`, every buffer sits at or above it over its lifetime (the
/// bytes below are taken: a floor per operator, at least as long as the
/// operators of `bufs`). A packing no higher than `enough` ends the
/// search as the lower bound does (0: only the lower bound).
pub fn pack(
    bufs: &[Buffer],
    (moves, stall): (u64, u64),
    seed: u64,
    (deadline, enough): (Instant, u64),
    base: Option<&[u64]>,
) -> (u64, Vec<u64>) {
    let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
    let bound = lower_bound_on(bufs, base, ops).max(enough);
    let base_rev: Option<Vec<u64>> = base.map(|f| f[..ops].iter().rev().copied().collect());
    // The same buffers with time reversed: the same packings, decoded
    // from the other end.
    let reversed: Vec<Buffer> = bufs
        .iter()
        .map(|b| Buffer {
            first: ops - 1 - b.last,
            last: ops - 1 - b.first,
            ..*b
        })
        .collect();
    // Half the moves each: a round mostly stalls well before its end.
    let share = |x: u64| x / 2;
    let round = |r: usize| {
        let (penalty, backwards) = ROUNDS[r];
        let mut d = if backwards {
            Filler::new(&reversed, base_rev.as_deref())
        } else {
            Filler::new(bufs, base)
        };
        d.step_penalty = penalty * (ops as i64 + 1) / 10;
        climb(
            &mut d,
            share(moves),
            share(stall),
            seed.wrapping_add(r as u64),
            (bound, deadline),
        )
    };
    best_of_rounds(&round, bound, deadline)
}

/// The most bytes live at one operator of `bufs` above `base` (per
/// operator; none: 0), the first `ops` operators: no packing goes below.
fn lower_bound_on(bufs: &[Buffer], base: Option<&[u64]>, ops: usize) -> u64 {
    let mut load = vec![0u64; ops + 1];
    for b in bufs {
        load[b.first] = load[b.first].wrapping_add(b.size);
        load[b.last + 1] = load[b.last + 1].wrapping_sub(b.size);
    }
    let at = |t: usize| base.map_or(0, |f| f[t]);
    load[..ops]
        .iter()
        .enumerate()
        .scan(0u64, |live, (t, &d)| {
            *live = live.wrapping_add(d);
            Some(*live + at(t))
        })
        .max()
        .unwrap_or(0)
}

/// The lowest packing of the rounds of [`ROUNDS`] (`round(r)` makes
/// round `r`'s), run in pairs, the second of each on another thread,
/// until one reaches `bound` or `deadline` passes: every round depends on
/// its arguments alone, and the first of the lowest wins, so the packing
/// is the one the rounds would give one after the other.
fn best_of_rounds(
    round: &(dyn Fn(usize) -> (u64, Vec<u64>) + Sync),
    bound: u64,
    deadline: Instant,
) -> (u64, Vec<u64>) {
    let mut best: Option<(u64, Vec<u64>)> = None;
    for pair in (0..ROUNDS.len()).collect::<Vec<_>>().chunks(2) {
        let results: Vec<(u64, Vec<u64>)> = std::thread::scope(|s| {
            let second = pair.get(1).map(|&r| s.spawn(move || round(r)));
            let mut out = vec![round(pair[0])];
            out.extend(second.map(|h| h.join().expect("a round does not panic")));
            out
        });
        for r in results {
            if best.as_ref().is_none_or(|b| r.0 < b.0) {
                best = Some(r);
            }
        }
        if best.as_ref().is_some_and(|b| b.0 <= bound) || Instant::now() >= deadline {
            break;
        }
    }
    best.expect("at least one round")
}

/// One move of [`climb`] on the weights `wt` of `d`'s buffers: a buffer
/// (half the time one of the `suspects` on the walls of the first
/// mistake) gets a random weight, or swaps it with a buffer live at the
/// same time. The two buffers and their weights before.
fn shake(
    d: &Filler,
    wt: &mut [u64],
    suspects: &[usize],
    rng: &mut SplitMix64,
) -> [(usize, u64); 2] {
    let top = d.top.len() as u64 + 1;
    let mut k = rng.below(d.bufs.len());
    if !suspects.is_empty() && rng.below(2) == 0 {
        k = suspects[rng.below(suspects.len())];
    }
    let b = d.bufs[k];
    let t = b.first + rng.below(b.last - b.first + 1);
    let q = d.live[t][rng.below(d.live[t].len())] as usize;
    let before = [(k, wt[k]), (q, wt[q])];
    if rng.below(4) == 0 {
        wt[k] = rng.next_u64() % (2 * top);
    } else {
        wt.swap(k, q);
    }
    before
}

/// One round of late-acceptance hill climbing with `d`'s step penalty,
/// ending at the lower bound `bound` or at `deadline`; returns its best
/// packing's high-water mark and offsets.
fn climb(
    d: &mut Filler,
    moves: u64,
    stall: u64,
    seed: u64,
    (bound, deadline): (u64, Instant),
) -> (u64, Vec<u64>) {
    // Longer-lived buffers first among equals: they are the hardest to
    // fit once the floor is uneven.
    let mut wt: Vec<u64> = d
        .bufs
        .iter()
        .map(|b| (b.last - b.first + 1) as u64)
        .collect();
    d.bound = bound;
    let (mut cur, hwm, _) = d
        .fill(&wt, (Reverse(0), u128::MAX), None)
        .expect("no limit");
    let mut best = (hwm, d.off.clone());
    let mut sus = d.suspects.clone();
    let mut rng = SplitMix64(seed);
    let mut last_gain = 0;
    d.keep(cur, hwm);
    let mut m = 0;
    let mut free = 0;
    while m < moves {
        if best.0 <= bound || m - last_gain > stall {
            break;
        }
        if m % CLOCK_STEP == 0 && free == 0 && Instant::now() >= deadline {
            break;
        }
        let [(k, wk), (q, wq)] = shake(d, &mut wt, &sus, &mut rng);
        let r = d.fill(&wt, cur, Some([k, q]));
        if free < MAX_FREE && r.is_some_and(|r| !r.2) {
            free += 1;
            continue;
        }
        free = 0;
        if let Some((c, hwm, differs)) = r.filter(|r| r.0 <= cur) {
            if c < cur {
                last_gain = m;
            }
            cur = c;
            if differs {
                d.keep(c, hwm);
                sus.clone_from(&d.suspects);
            }
            if hwm < best.0 {
                best = (hwm, d.off.clone());
            }
        } else {
            wt[k] = wk;
            wt[q] = wq;
        }
        m += 1;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::Instance;

    impl Filler<'_> {
        fn fill_all(&mut self, weight: &[u64]) {
            self.fill(weight, (Reverse(0), u128::MAX), None)
                .expect("no limit");
        }
    }

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(60)
    }

    #[test]
    fn packings_are_valid_and_aligned() {
        let mut rng = SplitMix64(5);
        for round in 0..20 {
            let bufs = crate::exact::random_buffers(&mut rng, 40, (30, 10), 5000, 9);
            let (hwm, offsets) = pack(&bufs, (200, 200), round, (far(), 0), None);
            assert!(Instance::new(&bufs).is_packing(&offsets), "round {round}");
            let top = bufs.iter().zip(&offsets).map(|(b, o)| o + b.size).max();
            assert_eq!(Some(hwm), top);
        }
    }

    #[test]
    fn decodes_after_a_move_match_decodes_from_scratch() {
        let mut rng = SplitMix64(11);
        let no_limit = (Reverse(0), u128::MAX);
        let (mut kept, mut changed) = (0, 0);
        for round in 0..8 {
            let bufs = crate::exact::random_buffers(&mut rng, 60, (40, 12), 64, 3);
            let mut d = Filler::new(&bufs, None);
            let mut fresh = Filler::new(&bufs, None);
            d.step_penalty = 5 * round;
            fresh.step_penalty = d.step_penalty;
            let mut wt: Vec<u64> = (0..bufs.len()).map(|_| rng.next_u64() % 50).collect();
            let (c, h, _) = d.fill(&wt, no_limit, None).expect("no limit");
            d.keep(c, h);
            let mut at = d.off.clone();
            for _ in 0..200 {
                let (k, q) = (rng.below(bufs.len()), rng.below(bufs.len()));
                if rng.below(2) == 0 {
                    wt[k] = rng.next_u64() % 50;
                } else {
                    wt.swap(k, q);
                }
                let (c, h, differs) = d.fill(&wt, no_limit, Some([k, q])).expect("no limit");
                let (fc, fh, _) = fresh.fill(&wt, no_limit, None).expect("no limit");
                assert_eq!((c, h), (fc, fh), "round {round}");
                if differs {
                    assert_eq!(d.off, fresh.off, "round {round}");
                    d.keep(c, h);
                    at.clone_from(&d.off);
                    changed += 1;
                } else {
                    assert_eq!(at, fresh.off, "round {round}");
                    kept += 1;
                }
            }
        }
        // Both ways a decode after a move ends were taken.
        assert!(kept > 100 && changed > 50, "{kept} kept, {changed} changed");
    }

    fn buf(first: usize, last: usize, size: u64) -> Buffer {
        Buffer {
            first,
            last,
            size,
            align: 1,
        }
    }

    #[test]
    fn covers_leave_no_pit_nothing_can_fill() {
        // Side by side, a b c leave b's top a pit no other buffer fits
        // in; d alone covers the run flat, whatever the weights say.
        let bufs = [buf(0, 0, 8), buf(1, 1, 4), buf(2, 2, 8), buf(0, 2, 8)];
        let mut d = Filler::new(&bufs, None);
        d.fill_all(&[100, 100, 100, 0]);
        assert_eq!(d.off, [8, 8, 8, 0]);
        // With a second buffer for the pit, the weights decide.
        let bufs = [bufs[0], bufs[1], bufs[2], bufs[3], buf(1, 1, 4)];
        let mut d = Filler::new(&bufs, None);
        d.fill_all(&[100, 100, 100, 0, 0]);
        assert_eq!(d.off[..4], [0, 0, 0, 8]);
    }

    #[test]
    fn steps_in_the_skyline_cost_their_penalty() {
        // a b end at 8 and 4 (three steps with the walls), d flat at 8
        // (two); e could fill b's pit.
        let bufs = [buf(0, 0, 8), buf(1, 1, 4), buf(0, 1, 8), buf(1, 1, 4)];
        let mut d = Filler::new(&bufs, None);
        let weights = [3, 3, 0, 0];
        d.fill_all(&weights);
        assert_eq!(d.off[2], 8, "a and b first without a penalty");
        d.step_penalty = 10;
        d.fill_all(&weights);
        assert_eq!(d.off[2], 0, "d first: 0 - 20 beats 6 - 30");
        d.step_penalty = 2;
        d.fill_all(&weights);
        assert_eq!(d.off[2], 8, "a and b first: 6 - 6 beats 0 - 4");
    }
}
