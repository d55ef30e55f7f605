//! hill_climb's search in one memory: bottom-up packings decoded from a
//! weight per buffer, improved by late-acceptance hill climbing over the
//! weights.
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
//! The search changes one weight per move (a random value, or swapped with
//! a buffer live at the same time), preferring buffers live where bytes
//! were wasted, and keeps the change when the cost (high-water mark, then
//! the area under the packing's skyline, which counts wasted bytes) is not
//! above the current one or the one 30 moves back (late acceptance). A
//! decode stops as soon as the bytes it has wasted prove its cost above
//! both: the area under the skyline is never below every buffer's bytes x
//! operators plus the bytes wasted so far. It runs in rounds, one per
//! entry of `ROUNDS`: a step penalty, and whether operators are taken in
//! reverse order, so that the skyline is filled from the other end (the
//! search scatters widely, so a few rounds from the same first weights do
//! better than one long one); a round stops after half of `moves`, after
//! half of `stall` moves without a lower high-water mark, or at the
//! liveness lower bound, and the rounds stop at it too. Rounds run two at
//! a time, on two threads. The generator is seeded and nothing depends on
//! timing or on which thread ends first: the same arguments give the same
//! packing.

use std::cmp::Reverse;

use crate::exact::Buffer;
use crate::rng::SplitMix64;

/// Moves back that late acceptance compares with.
const HISTORY: usize = 30;

/// Each round's step penalty, in tenths of (operators + 1), the range of a
/// random weight being twice that, and whether it decodes with time
/// reversed.
const ROUNDS: [(i64, bool); 4] = [(10, false), (10, true), (20, false), (20, true)];

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
    /// Per operator of the run: the best cover of the run up to it.
    best: Vec<Prefix>,
    /// Per operator of the run: the earliest end (exclusive, from the
    /// run's start) of a candidate starting there, that candidate, and the
    /// earliest end of another.
    min_end: Vec<(usize, usize, usize)>,
    /// What a step in the skyline costs in the cover's score.
    step_penalty: i64,
    /// The liveness lower bound: no packing's high-water mark is below it.
    bound: u64,
    /// Bytes x operators of every buffer together: the least a packing's
    /// skyline can cover.
    area: u128,
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
    /// The prefix this one extends (`usize::MAX`: none reached yet).
    prev: usize,
    /// The buffer placed last, plus one (0: an operator left uncovered).
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
            best: vec![Prefix::NONE; ops + 1],
            min_end: vec![(0, 0, 0); ops],
            step_penalty: 0,
            bound: 0,
            area: bufs
                .iter()
                .map(|b| u128::from(b.size) * (b.last - b.first + 1) as u128)
                .sum(),
        }
    }

    /// Packs every buffer bottom up (see the module comment); returns
    /// (high-water mark, sum over operators of the top there), or `None`
    /// as soon as the bytes wasted so far prove that the high-water mark
    /// times the operators plus that sum will be above `limit`. Offsets
    /// are left in `self.off`.
    fn fill(&mut self, weight: &[u64], limit: u128) -> Option<(u64, u64)> {
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
        let ops128 = ops as u128;
        let mut waste: u128 = 0;
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
                waste += u128::from(up - f) * (b - a) as u128;
                if u128::from(hwm.max(self.bound)) * ops128 + self.area + waste > limit {
                    return None;
                }
                continue;
            }
            let w = b - a;
            for (t, e) in (a..b).zip(&mut self.min_end) {
                *e = (usize::MAX, usize::MAX, usize::MAX);
                for &k in &self.starts[t] {
                    let end = self.bufs[k].last + 1 - a;
                    if end < e.0 {
                        *e = (end, k, e.0);
                    } else if end < e.2 {
                        e.2 = end;
                    }
                }
            }
            // The floors left and right of the run: walls the new skyline
            // meets.
            let left_top = if a > 0 { self.key[a - 1] } else { u64::MAX };
            let right_top = if b < ops { self.key[b] } else { u64::MAX };
            self.best[0] = Prefix {
                top: left_top,
                prev: 0,
                ..Prefix::NONE
            };
            self.best[1..=w].fill(Prefix::NONE);
            for i in 0..w {
                let p = self.best[i];
                if p.prev == usize::MAX {
                    continue;
                }
                // Operators i..j topped at `top` after prefix p (buffer
                // `buf` + 1, or 0).
                let extend = |j: usize, top: u64, buf: usize, weight: u64| {
                    let mut q = Prefix {
                        covered: p.covered,
                        pits: p.pits,
                        score: p.score + weight as i64,
                        top,
                        segment: p.segment,
                        first: p.first,
                        down: p.down,
                        prev: i,
                        buf,
                    };
                    if buf > 0 {
                        q.covered += (j - i) as u64;
                    }
                    // No other buffer starts at the segment's start and
                    // ends inside it.
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
                };
                let q = extend(i + 1, f, 0, 0);
                if q.beats(&self.best[i + 1]) {
                    self.best[i + 1] = q;
                }
                for &k in &self.starts[a + i] {
                    let bk = self.bufs[k];
                    let j = bk.last + 1 - a;
                    let q = extend(j, f + bk.size, k + 1, weight[k]);
                    if q.beats(&self.best[j]) {
                        self.best[j] = q;
                    }
                }
            }
            let mut j = w;
            while j > 0 {
                let Prefix {
                    prev: i, buf: kk, ..
                } = self.best[j];
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
        Some((hwm, self.floor.iter().sum()))
    }
}

/// Packs `bufs` (at least one) in rounds of at most `moves / 2` moves,
/// `stall / 2` of them without gain (see the module comment); returns the
/// best packing's high-water mark and offsets.
pub fn pack(bufs: &[Buffer], moves: u64, stall: u64, seed: u64) -> (u64, Vec<u64>) {
    let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
    // No packing goes below the most bytes live at one operator.
    let mut load = vec![0u64; ops + 1];
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
        let mut d = Filler::new(if backwards { &reversed } else { bufs });
        d.step_penalty = penalty * (ops as i64 + 1) / 10;
        climb(
            &mut d,
            share(moves),
            share(stall),
            seed.wrapping_add(r as u64),
            bound,
        )
    };
    // Rounds in pairs, the second of each on another thread: every round
    // depends on its arguments alone, and the first of the lowest wins, so
    // the packing is the one the rounds would give one after the other.
    let mut best: Option<(u64, Vec<u64>)> = None;
    for pair in (0..ROUNDS.len()).collect::<Vec<_>>().chunks(2) {
        let results: Vec<(u64, Vec<u64>)> = std::thread::scope(|s| {
            let second = pair.get(1).map(|&r| {
                let round = &round;
                s.spawn(move || round(r))
            });
            let mut out = vec![round(pair[0])];
            out.extend(second.map(|h| h.join().expect("a round does not panic")));
            out
        });
        for r in results {
            if best.as_ref().is_none_or(|b| r.0 < b.0) {
                best = Some(r);
            }
        }
        if best.as_ref().is_some_and(|b| b.0 <= bound) {
            break;
        }
    }
    best.expect("at least one round")
}

/// One round of late-acceptance hill climbing with `d`'s step penalty;
/// returns its best packing's high-water mark and offsets.
fn climb(d: &mut Filler, moves: u64, stall: u64, seed: u64, bound: u64) -> (u64, Vec<u64>) {
    let bufs = d.bufs;
    let n = bufs.len();
    let ops = d.floor.len() as u64;
    // Longer-lived buffers first among equals: they are the hardest to
    // fit once the floor is uneven.
    let mut wt: Vec<u64> = bufs.iter().map(|b| (b.last - b.first + 1) as u64).collect();
    let top = ops + 1;
    let cost = |(h, area): (u64, u64)| u128::from(h) * u128::from(ops) + u128::from(area);
    d.bound = bound;
    let first = d.fill(&wt, u128::MAX).expect("no limit");
    let mut best = (first.0, d.off.clone());
    let mut cur = cost(first);
    let mut history = [cur; HISTORY];
    let mut rng = SplitMix64(seed);
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
        let h = m as usize % HISTORY;
        let limit = cur.max(history[h]);
        let r = d.fill(&wt, limit).filter(|&r| cost(r) <= limit);
        if let Some(r) = r {
            cur = cost(r);
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

    impl Filler<'_> {
        fn fill_all(&mut self, weight: &[u64]) {
            self.fill(weight, u128::MAX).expect("no limit");
        }
    }

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
        let mut d = Filler::new(&bufs);
        d.fill_all(&[100, 100, 100, 0]);
        assert_eq!(d.off, [8, 8, 8, 0]);
        // With a second buffer for the pit, the weights decide.
        let bufs = [bufs[0], bufs[1], bufs[2], bufs[3], buf(1, 1, 4)];
        let mut d = Filler::new(&bufs);
        d.fill_all(&[100, 100, 100, 0, 0]);
        assert_eq!(d.off[..4], [0, 0, 0, 8]);
    }

    #[test]
    fn steps_in_the_skyline_cost_their_penalty() {
        // a b end at 8 and 4 (three steps with the walls), d flat at 8
        // (two); e could fill b's pit.
        let bufs = [buf(0, 0, 8), buf(1, 1, 4), buf(0, 1, 8), buf(1, 1, 4)];
        let mut d = Filler::new(&bufs);
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
