//! Greedy placement of one memory's buffers, one at a time in a given
//! order, fast enough for memories of tens of thousands of buffers: the
//! seeds of the large memories' plans ([`crate::improve`]).
//!
//! Each buffer goes into a gap between the buffers already placed that
//! live at the same time as it: the lowest gap it fits in
//! ([`Rule::Lowest`], first fit), or the smallest ([`Rule::Tightest`], best
//! fit: the larger gaps are left to the buffers that need them), else on
//! top of them. The buffers placed are kept sorted by offset, in blocks,
//! so that a placement looks at them in one pass: first fit stops at the
//! first gap that fits; best fit looks at every one. Which of them live
//! at the same time as the buffer is found 64 at a time as a bit mask,
//! without a branch a buffer; only those are then visited. Both are quadratic in
//! the buffers at worst; the clock is read every [`CLOCK_STEP`]
//! placements, and a placement not finished by its deadline is dropped.

use std::time::Instant;

use crate::exact::Buffer;
use crate::model::align_up;

/// Placements between two looks at the clock.
pub const CLOCK_STEP: usize = 256;

/// Which gap a buffer goes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The lowest gap it fits in (first fit).
    Lowest,
    /// The smallest gap it fits in, the lowest of those (best fit).
    Tightest,
}

/// Entries of a block before it is split in two.
const BLOCK: usize = 128;

/// Positions of a block in one mask of [`Block::live_mask`].
const MASK: usize = 64;

/// Buffers placed, in blocks sorted by offset: each buffer's offset, end
/// and lifetime, side by side.
#[derive(Default)]
struct Block {
    offset: Vec<u64>,
    end: Vec<u64>,
    first: Vec<u32>,
    last: Vec<u32>,
}

/// An operator index as a block keeps it: saturated at `u32::MAX`, which
/// can only make more buffers look live at once, never fewer.
fn op(t: usize) -> u32 {
    u32::try_from(t).unwrap_or(u32::MAX)
}

impl Block {
    fn insert(&mut self, at: usize, b: &Buffer, offset: u64) {
        self.offset.insert(at, offset);
        self.end.insert(at, offset + b.size);
        self.first.insert(at, op(b.first));
        self.last.insert(at, op(b.last));
    }

    /// A mask of the buffers among positions `at..at + MASK` (at most)
    /// that live at the same time as `b`: bit `i` for position `at + i`.
    /// Computed without a branch a buffer, in a loop the compiler
    /// vectorizes: the placements' scans spent most of their time on that
    /// branch before.
    fn live_mask(&self, b: &Buffer, at: usize) -> u64 {
        let (bf, bl) = (op(b.first), op(b.last));
        let end = self.first.len().min(at + MASK);
        let mut mask = 0u64;
        for (i, (&f, &l)) in self.first[at..end]
            .iter()
            .zip(&self.last[at..end])
            .enumerate()
        {
            mask |= u64::from((f <= bl) & (bf <= l)) << i;
        }
        mask
    }

    /// The first position in `from..to` whose offset is `end` or more
    /// (offsets are sorted), if the last one's is.
    fn first_at_or_above(&self, (from, to): (usize, usize), end: u64) -> Option<usize> {
        (from < to && self.offset[to - 1] >= end)
            .then(|| from + self.offset[from..to].partition_point(|&o| o < end))
    }

    /// Its second half, taken out.
    fn split(&mut self) -> Block {
        let h = self.offset.len() / 2;
        Block {
            offset: self.offset.split_off(h),
            end: self.end.split_off(h),
            first: self.first.split_off(h),
            last: self.last.split_off(h),
        }
    }
}

/// The buffers placed so far.
#[derive(Default)]
struct Placed {
    blocks: Vec<Block>,
}

impl Placed {
    /// Adds `b` at `offset`.
    fn add(&mut self, b: &Buffer, offset: u64) {
        if self.blocks.is_empty() {
            self.blocks.push(Block::default());
        }
        let k = self
            .blocks
            .partition_point(|x| x.offset.first().is_some_and(|&o| o <= offset))
            .saturating_sub(1);
        let at = self.blocks[k].offset.partition_point(|&o| o <= offset);
        self.blocks[k].insert(at, b, offset);
        if self.blocks[k].offset.len() >= BLOCK {
            let tail = self.blocks[k].split();
            self.blocks.insert(k + 1, tail);
        }
    }

    /// The lowest aligned offset where `b` overlaps nothing placed, and
    /// how many placed buffers that looked at: up to the first one at or
    /// above the offset's end.
    fn lowest(&self, b: &Buffer) -> (u64, u64) {
        let align = b.align.max(1);
        let (mut at, mut looked) = (0u64, 0u64);
        for x in &self.blocks {
            // `at` changes only at the buffers live with `b`: up to each,
            // the first offset at or above `at + b.size` is found by
            // bisection.
            for start in (0..x.offset.len()).step_by(MASK) {
                let end = x.offset.len().min(start + MASK);
                let (mut mask, mut from) = (x.live_mask(b, start), start);
                while mask != 0 {
                    let j = start + mask.trailing_zeros() as usize;
                    if let Some(i) = x.first_at_or_above((from, j + 1), at + b.size) {
                        return (at, looked + i as u64 + 1);
                    }
                    at = at.max(align_up(x.end[j], align));
                    from = j + 1;
                    mask &= mask - 1;
                }
                if let Some(i) = x.first_at_or_above((from, end), at + b.size) {
                    return (at, looked + i as u64 + 1);
                }
            }
            looked += x.offset.len() as u64;
        }
        (at, looked)
    }

    /// The aligned offset in the smallest gap `b` fits in between the
    /// buffers placed that live at the same time (the lowest such gap),
    /// else on top of them; and how many placed buffers that looked at
    /// (all of them).
    fn tightest(&self, b: &Buffer) -> (u64, u64) {
        let align = b.align.max(1);
        let (mut reach, mut best, mut looked) = (0u64, None::<(u64, u64)>, 0u64);
        for x in &self.blocks {
            looked += x.offset.len() as u64;
            for start in (0..x.offset.len()).step_by(MASK) {
                let mut mask = x.live_mask(b, start);
                while mask != 0 {
                    let i = start + mask.trailing_zeros() as usize;
                    mask &= mask - 1;
                    let at = align_up(reach, align);
                    let gap = x.offset[i].saturating_sub(reach);
                    if at + b.size <= x.offset[i] && best.is_none_or(|(g, _)| gap < g) {
                        best = Some((gap, at));
                    }
                    reach = reach.max(x.end[i]);
                }
            }
        }
        (best.map_or(align_up(reach, align), |(_, at)| at), looked)
    }
}

/// What a placement may spend: it stops at `deadline` (read every
/// [`CLOCK_STEP`] placements) or once its placements have looked at
/// `looks` placed buffers, a count that is the same on every machine and
/// at any load, and that the time a placement takes is proportional to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// When to stop, whatever is left of `looks`.
    pub deadline: Instant,
    /// Placed buffers the placements may still look at.
    pub looks: u64,
}

impl Limit {
    /// `deadline` alone.
    pub fn until(deadline: Instant) -> Limit {
        Limit {
            deadline,
            looks: u64::MAX,
        }
    }
}

/// The offsets of `bufs` placed one at a time in `order` by `rule`; none
/// if `limit` is reached first (what was spent is taken from it).
pub fn place(bufs: &[Buffer], order: &[usize], rule: Rule, limit: &mut Limit) -> Option<Vec<u64>> {
    let mut offsets = vec![0u64; bufs.len()];
    resume(bufs, (order, 0), rule, &mut offsets, limit).then_some(offsets)
}

/// [`place`] from position `from` of `order` on: the buffers before it
/// stay at their `offsets` (as a placement in `order` put them), the
/// others are placed anew into `offsets`; false if `limit` is reached
/// first (`offsets` is then part old, part new). What was spent is taken
/// from `limit`.
pub fn resume(
    bufs: &[Buffer],
    (order, from): (&[usize], usize),
    rule: Rule,
    offsets: &mut [u64],
    limit: &mut Limit,
) -> bool {
    let mut placed = Placed::default();
    for &k in &order[..from] {
        placed.add(&bufs[k], offsets[k]);
    }
    for (n, &k) in order[from..].iter().enumerate() {
        if n % CLOCK_STEP == CLOCK_STEP - 1 && Instant::now() >= limit.deadline {
            return false;
        }
        let b = &bufs[k];
        let (at, looked) = match rule {
            Rule::Lowest => placed.lowest(b),
            Rule::Tightest => placed.tightest(b),
        };
        if looked > limit.looks {
            limit.looks = 0;
            return false;
        }
        limit.looks -= looked;
        offsets[k] = at;
        placed.add(b, offsets[k]);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::random_buffers;
    use crate::rng::SplitMix64;
    use crate::window;
    use std::time::Duration;

    fn far() -> Limit {
        Limit::until(Instant::now() + Duration::from_secs(60))
    }

    #[test]
    fn every_order_and_rule_gives_a_packing() {
        let mut rng = SplitMix64(7);
        for n in [1, 10, 300, 1000] {
            let bufs = random_buffers(&mut rng, n, (200, 60), 5000, 4);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&k| std::cmp::Reverse(bufs[k].size));
            for rule in [Rule::Lowest, Rule::Tightest] {
                let o = place(&bufs, &order, rule, &mut far()).unwrap();
                assert!(window::is_packing(&bufs, &o), "{n} {rule:?}");
            }
        }
    }

    #[test]
    fn best_fit_takes_the_smallest_gap_first_fit_the_lowest() {
        let b = |first, last, size| Buffer {
            first,
            last,
            size,
            align: 1,
        };
        // Stacked while all live (0..=4): 0..30 and 35..45 end at 4, 30..35
        // and 45..65 live on. Over 5..=9 the gaps are 0..30, 35..45 and
        // the top, 65.
        let bufs = [
            b(0, 4, 30),
            b(0, 9, 5),
            b(0, 4, 10),
            b(0, 9, 20),
            b(5, 9, 8),
        ];
        let order = [0, 1, 2, 3, 4];
        for rule in [Rule::Lowest, Rule::Tightest] {
            let o = place(&bufs, &order, rule, &mut far()).unwrap();
            assert_eq!(o[..4], [0, 30, 35, 45], "{rule:?}");
            let want = if rule == Rule::Lowest { 0 } else { 35 };
            assert_eq!(o[4], want, "{rule:?}");
        }
    }

    /// [`Placed::lowest`] and [`Placed::tightest`] as one plain scan of
    /// every placed buffer in offset order (ties in the order placed).
    fn scan(placed: &[(u64, &Buffer)], b: &Buffer, rule: Rule) -> (u64, u64) {
        let (align, mut at, mut best) = (b.align.max(1), 0u64, None::<(u64, u64)>);
        for (i, &(o, x)) in placed.iter().enumerate() {
            let live = x.first <= b.last && b.first <= x.last;
            match rule {
                Rule::Lowest if o >= at + b.size => return (at, i as u64 + 1),
                Rule::Lowest if live => at = at.max(align_up(o + x.size, align)),
                Rule::Tightest if live => {
                    let gap = o.saturating_sub(at);
                    let fit = align_up(at, align);
                    if fit + b.size <= o && best.is_none_or(|(g, _)| gap < g) {
                        best = Some((gap, fit));
                    }
                    at = at.max(o + x.size);
                }
                _ => {}
            }
        }
        match rule {
            Rule::Lowest => (at, placed.len() as u64),
            Rule::Tightest => (
                best.map_or(align_up(at, align), |(_, fit)| fit),
                placed.len() as u64,
            ),
        }
    }

    #[test]
    fn the_block_scans_answer_as_a_plain_scan_does() {
        let mut rng = SplitMix64(11);
        let bufs = random_buffers(&mut rng, 1500, (300, 40), 4000, 8);
        for rule in [Rule::Lowest, Rule::Tightest] {
            let mut placed = Placed::default();
            let mut flat: Vec<(u64, &Buffer)> = Vec::new();
            for b in &bufs {
                let got = match rule {
                    Rule::Lowest => placed.lowest(b),
                    Rule::Tightest => placed.tightest(b),
                };
                assert_eq!(got, scan(&flat, b, rule), "{rule:?} after {}", flat.len());
                placed.add(b, got.0);
                let at = flat.partition_point(|&(o, _)| o <= got.0);
                flat.insert(at, (got.0, b));
            }
        }
    }

    #[test]
    fn a_placement_resumed_from_its_prefix_is_the_same() {
        let mut rng = SplitMix64(13);
        let bufs = random_buffers(&mut rng, 500, (200, 50), 3000, 2);
        let order: Vec<usize> = (0..bufs.len()).rev().collect();
        for rule in [Rule::Lowest, Rule::Tightest] {
            let whole = place(&bufs, &order, rule, &mut far()).unwrap();
            let mut part = whole.clone();
            // What follows the prefix is placed anew, whatever it held.
            for &k in &order[200..] {
                part[k] = 7;
            }
            assert!(resume(&bufs, (&order, 200), rule, &mut part, &mut far()));
            assert_eq!(part, whole, "{rule:?}");
        }
    }

    #[test]
    fn a_deadline_past_drops_the_placement() {
        let mut rng = SplitMix64(3);
        let bufs = random_buffers(&mut rng, 2 * CLOCK_STEP, (100, 30), 100, 1);
        let order: Vec<usize> = (0..bufs.len()).collect();
        let now = Limit::until(Instant::now());
        assert!(place(&bufs, &order, Rule::Lowest, &mut now.clone()).is_none());
    }

    #[test]
    fn a_placement_stops_where_its_looks_run_out() {
        let mut rng = SplitMix64(5);
        let bufs = random_buffers(&mut rng, 400, (100, 30), 1000, 1);
        let order: Vec<usize> = (0..bufs.len()).collect();
        for rule in [Rule::Lowest, Rule::Tightest] {
            let mut limit = far();
            let whole = place(&bufs, &order, rule, &mut limit).unwrap();
            let spent = u64::MAX - limit.looks;
            assert!(spent > 0, "{rule:?}");
            // The same count every time: exactly enough, then one short.
            let mut just = Limit {
                looks: spent,
                ..far()
            };
            assert_eq!(place(&bufs, &order, rule, &mut just), Some(whole));
            assert_eq!(just.looks, 0, "{rule:?}");
            let mut short = Limit {
                looks: spent - 1,
                ..far()
            };
            assert!(place(&bufs, &order, rule, &mut short).is_none(), "{rule:?}");
        }
    }
}
