//! hill_climb's search in one memory: bottom-up packings decoded from a
//! weight per buffer, improved by late-acceptance hill climbing over the
//! weights.
//!
//! Decoding fills the lowest run of operators that share one floor (the
//! top of what is placed there): of the buffers whose lifetime lies inside
//! that run, a set that does not overlap in time is placed side by side on
//! the floor, chosen by dynamic programming to cover the most operators,
//! then (ties) to have the most weight. A run that nothing fits in is raised
//! to its lower neighbour; the bytes it skips are wasted. Every packing
//! without waste (every column filled to the bound) is reachable by some
//! weights.
//!
//! The search changes one weight per move (a random value, or swapped with
//! a buffer live at the same time), preferring buffers live where bytes
//! were wasted, and keeps the change when the cost (high-water mark, then
//! the area under the packing's skyline, which counts wasted bytes) is not
//! above the current one or the one 30 moves back (late acceptance). It
//! stops after its moves, after `stall` moves without a lower high-water
//! mark, or at the liveness lower bound. The generator is seeded and
//! nothing depends on timing: the same arguments give the same packing.

use crate::exact::Buffer;
use crate::planner::SplitMix64;

/// Moves back that late acceptance compares with.
const HISTORY: usize = 30;

/// Per operator floors with range assignment and the lowest, leftmost
/// floor in O(log ops).
struct Floors {
    n: usize,
    min: Vec<u64>,
    /// A pending assignment of the whole node's range.
    set: Vec<Option<u64>>,
}

impl Floors {
    fn new(n: usize) -> Self {
        let n = n.next_power_of_two();
        Floors {
            n,
            min: vec![0; 2 * n],
            set: vec![None; 2 * n],
        }
    }

    /// Floors `key` (operators past them at `u64::MAX`).
    fn reset(&mut self, key: &[u64]) {
        self.set.fill(None);
        for i in 0..self.n {
            self.min[self.n + i] = key.get(i).copied().unwrap_or(u64::MAX);
        }
        for i in (1..self.n).rev() {
            self.min[i] = self.min[2 * i].min(self.min[2 * i + 1]);
        }
    }

    fn push(&mut self, i: usize) {
        if let Some(v) = self.set[i].take() {
            for c in [2 * i, 2 * i + 1] {
                self.min[c] = v;
                if c < self.n {
                    self.set[c] = Some(v);
                }
            }
        }
    }

    /// Sets operators `l..r` to `v`.
    fn assign(&mut self, l: usize, r: usize, v: u64) {
        self.assign_in(1, 0, self.n, l, r, v);
    }

    fn assign_in(&mut self, i: usize, lo: usize, hi: usize, l: usize, r: usize, v: u64) {
        if r <= lo || hi <= l {
            return;
        }
        if l <= lo && hi <= r {
            self.min[i] = v;
            if i < self.n {
                self.set[i] = Some(v);
            }
            return;
        }
        self.push(i);
        let mid = (lo + hi) / 2;
        self.assign_in(2 * i, lo, mid, l, r, v);
        self.assign_in(2 * i + 1, mid, hi, l, r, v);
        self.min[i] = self.min[2 * i].min(self.min[2 * i + 1]);
    }

    /// The lowest floor and its leftmost operator.
    fn lowest(&mut self) -> (u64, usize) {
        let mut i = 1;
        while i < self.n {
            self.push(i);
            i = if self.min[2 * i] <= self.min[2 * i + 1] {
                2 * i
            } else {
                2 * i + 1
            };
        }
        (self.min[i], i - self.n)
    }
}

/// The decoder's state, reused between decodes.
struct Filler<'a> {
    bufs: &'a [Buffer],
    /// Buffers live at each operator.
    live: Vec<Vec<u32>>,
    /// Per operator: the top of the highest buffer placed there.
    floor: Vec<u64>,
    /// The floors the next run is chosen by: `u64::MAX` where no buffer
    /// is left to place.
    key: Vec<u64>,
    /// The same, for the lowest one.
    tree: Floors,
    /// Buffers by first operator.
    starting: Vec<Vec<usize>>,
    placed: Vec<bool>,
    off: Vec<u64>,
    /// Runs raised without a buffer (operators `a..b`) in the last decode.
    raised: Vec<(usize, usize)>,
    /// Candidates of the run being filled, by first operator.
    starts: Vec<Vec<usize>>,
    /// Per operator of the run: (covered, tie score, previous index, buffer + 1).
    best: Vec<(u64, u64, usize, usize)>,
}

impl<'a> Filler<'a> {
    fn new(bufs: &'a [Buffer]) -> Self {
        let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
        let mut live = vec![Vec::new(); ops];
        for (k, b) in bufs.iter().enumerate() {
            for l in &mut live[b.first..=b.last] {
                l.push(k as u32);
            }
        }
        Filler {
            bufs,
            live,
            floor: vec![0; ops],
            key: vec![0; ops],
            tree: Floors::new(ops),
            starting: {
                let mut st = vec![Vec::new(); ops];
                for (k, b) in bufs.iter().enumerate() {
                    st[b.first].push(k);
                }
                st
            },
            placed: vec![false; bufs.len()],
            off: vec![0; bufs.len()],
            raised: Vec::new(),
            starts: vec![Vec::new(); ops],
            best: vec![(0, 0, 0, 0); ops + 1],
        }
    }

    /// Packs every buffer bottom up (see the module comment); returns
    /// (high-water mark, sum over operators of the top there). Offsets are
    /// left in `self.off`.
    fn fill(&mut self, weight: &[u64]) -> (u64, u64) {
        let n = self.bufs.len();
        let ops = self.floor.len();
        self.floor.fill(0);
        for (k, l) in self.key.iter_mut().zip(&self.live) {
            *k = if l.is_empty() { u64::MAX } else { 0 };
        }
        self.tree.reset(&self.key);
        self.placed.fill(false);
        self.raised.clear();
        let mut left = n;
        let mut hwm = 0;
        while left > 0 {
            // The lowest run, leftmost: operators a..b at floor f.
            let (f, a) = self.tree.lowest();
            let b = a + self.key[a..].iter().take_while(|&&x| x == f).count();
            let mut any = false;
            // The next offset an unaligned buffer of the run could take.
            let mut aligned = u64::MAX;
            for t in a..b {
                self.starts[t].clear();
            }
            for t in a..b {
                for &k in &self.starting[t] {
                    let bf = self.bufs[k];
                    if self.placed[k] || bf.last >= b {
                        continue;
                    }
                    if f % bf.align == 0 {
                        self.starts[t].push(k);
                        any = true;
                    } else {
                        aligned = aligned.min(f.next_multiple_of(bf.align));
                    }
                }
            }
            if !any {
                // Up to the lower neighbour (wasting the bytes between),
                // or where a buffer of the run is aligned; a run with no
                // buffer left in it is done.
                let l = if a > 0 { self.key[a - 1] } else { u64::MAX };
                let r = if b < ops { self.key[b] } else { u64::MAX };
                let up = l.min(r).min(aligned);
                self.key[a..b].fill(up);
                self.tree.assign(a, b, up);
                if up == u64::MAX {
                    continue;
                }
                self.floor[a..b].fill(up);
                self.raised.push((a, b));
                continue;
            }
            self.best[0] = (0, 0, usize::MAX, 0);
            self.best[1..=b - a].fill((0, 0, usize::MAX, usize::MAX));
            for t in a..b {
                let i = t - a;
                if self.best[i].2 == usize::MAX && i > 0 {
                    continue;
                }
                let (c, w, _, _) = self.best[i];
                let better = |x: &(u64, u64, usize, usize), c: u64, w: u64| {
                    x.2 == usize::MAX || (c, w) > (x.0, x.1)
                };
                if better(&self.best[i + 1], c, w) {
                    self.best[i + 1] = (c, w, i, 0);
                }
                for &k in &self.starts[t] {
                    let j = self.bufs[k].last + 1 - a;
                    let c2 = c + (j - i) as u64;
                    let w2 = w + weight[k];
                    if better(&self.best[j], c2, w2) {
                        self.best[j] = (c2, w2, i, k + 1);
                    }
                }
            }
            let mut j = b - a;
            while j > 0 {
                let (_, _, i, kk) = self.best[j];
                if kk > 0 {
                    let k = kk - 1;
                    let bf = self.bufs[k];
                    self.placed[k] = true;
                    self.off[k] = f;
                    self.floor[bf.first..=bf.last].fill(f + bf.size);
                    self.key[bf.first..=bf.last].fill(f + bf.size);
                    self.tree.assign(bf.first, bf.last + 1, f + bf.size);
                    hwm = hwm.max(f + bf.size);
                    left -= 1;
                }
                j = i;
            }
        }
        (hwm, self.floor.iter().sum())
    }
}

/// Packs `bufs` (at least one) with at most `moves` moves of search (see
/// the module comment); returns the best packing's high-water mark and
/// offsets.
pub fn pack(bufs: &[Buffer], moves: u64, stall: u64, seed: u64) -> (u64, Vec<u64>) {
    let n = bufs.len();
    let mut d = Filler::new(bufs);
    let ops = d.floor.len() as u64;
    // Longer-lived buffers first among equals: they are the hardest to
    // fit once the floor is uneven.
    let mut wt: Vec<u64> = bufs.iter().map(|b| (b.last - b.first + 1) as u64).collect();
    let top = ops + 1;
    let cost = |(h, area): (u64, u64)| u128::from(h) * u128::from(ops) + u128::from(area);
    let first = d.fill(&wt);
    let mut best = (first.0, d.off.clone());
    let mut cur = cost(first);
    let mut history = [cur; HISTORY];
    let mut rng = SplitMix64(seed);
    // No packing goes below the most bytes live at one operator.
    let mut load = vec![0u64; ops as usize + 1];
    for b in bufs {
        load[b.first] = load[b.first].wrapping_add(b.size);
        load[b.last + 1] = load[b.last + 1].wrapping_sub(b.size);
    }
    let bound = load
        .iter()
        .scan(0u64, |live, &d| {
            *live = live.wrapping_add(d);
            Some(*live)
        })
        .max()
        .unwrap_or(0);
    let mut last_gain = 0;
    for m in 0..moves {
        if best.0 <= bound || m - last_gain > stall {
            break;
        }
        let mut k = rng.below(n);
        if !d.raised.is_empty() && rng.below(2) == 0 {
            let (a, b) = d.raised[rng.below(d.raised.len())];
            let t = a + rng.below(b - a);
            if !d.live[t].is_empty() {
                k = d.live[t][rng.below(d.live[t].len())] as usize;
            }
        }
        let b = bufs[k];
        let t = b.first + rng.below(b.last - b.first + 1);
        let q = d.live[t][rng.below(d.live[t].len())] as usize;
        let (wk, wq) = (wt[k], wt[q]);
        if rng.below(2) == 0 {
            wt[k] = rng.next_u64() % (2 * top);
        } else {
            wt.swap(k, q);
        }
        let r = d.fill(&wt);
        let c = cost(r);
        let h = m as usize % HISTORY;
        if c <= cur || c <= history[h] {
            cur = c;
            if r.0 < best.0 {
                best = (r.0, d.off.clone());
                last_gain = m;
            }
        } else {
            wt[k] = wk;
            wt[q] = wq;
        }
        history[h] = cur;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::Instance;
    use crate::planner::{overlapping_pairs, plan};
    use crate::{MemoryPlannerType, PlannerOptions};

    #[test]
    fn packings_are_valid_and_aligned() {
        let mut rng = SplitMix64(5);
        for round in 0..20 {
            let bufs: Vec<Buffer> = (0..40)
                .map(|_| {
                    let first = rng.below(30);
                    Buffer {
                        first,
                        last: first + rng.below(10),
                        size: 1 + rng.next_u64() % 5000,
                        align: 1 << rng.below(9),
                    }
                })
                .collect();
            let (hwm, offsets) = pack(&bufs, 200, 200, round);
            assert!(Instance::new(&bufs).is_packing(&offsets), "round {round}");
            let top = bufs.iter().zip(&offsets).map(|(b, o)| o + b.size).max();
            assert_eq!(Some(hwm), top);
        }
    }

    #[test]
    fn hill_climb_packs_a_hard_instance_within_five_percent() {
        // greedy_by_size needs 1.22 times the optimum here.
        let (m, optimum) = crate::hard::instance(200, 200);
        let opts = PlannerOptions::default();
        let mp = plan(&m, MemoryPlannerType::HillClimb, &opts).unwrap();
        assert!(overlapping_pairs(&m, &mp).is_empty());
        let hwm = mp.scratch_high_water_mark();
        assert!(hwm * 100 <= optimum * 105, "{hwm} / {optimum}");
        assert_eq!(mp, plan(&m, MemoryPlannerType::HillClimb, &opts).unwrap());
    }
}
