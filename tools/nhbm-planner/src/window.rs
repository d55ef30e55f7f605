//! Large memories planned in windows of time.
//!
//! A memory holding more than [`DIRECT_MAX`] scratch buffers is not
//! searched whole (hill_climb's decodes and exact's search grow faster
//! than linearly with the buffers living at once and with the timeline).
//! Instead the timeline is cut into windows of about [`WINDOW`] buffers
//! each, every cut put where the fewest bytes cross it (between two layers
//! of a network, where only the residual stream does). A buffer whose
//! lifetime lies inside one window is local to it; the buffers crossing a
//! cut are planned first, on their own (in windows again while that still
//! leaves some local, else by [`sweep`]), and sit at the bottom of the
//! arena. Each window's local buffers are then packed on their own by the
//! planner's stages, on a flat floor: the top of the crossing buffers that
//! live during the window.
//!
//! What it can cost: in a window, the crossing buffers' highest top
//! rather than their top at each operator is the floor, so a window whose
//! busiest operator is not where the crossing buffers reach highest wastes
//! the difference; and a crossing buffer never shares bytes with a local
//! one placed below it. Where the cuts fall between layers, the residual
//! stream alone crosses and the waste is at most a few residual buffers;
//! where long-lived buffers grow or shrink steadily (a KV cache, the
//! activations a training step keeps for its backward pass), the busiest
//! window is the one where they peak and wastes little.
//!
//! Where long-lived buffers cross every cut (a compiler's trace of a
//! whole graph, the activations of a training step or of a pipeline's
//! micro-batches), the crossing buffers, planned first and on their own,
//! are fixed early and badly: the planner also places every memory
//! greedily ([`crate::portfolio`], [`crate::improve`]) and keeps the
//! lower of the two.
//!
//! Everything here is linear or `n log n` in the buffers, but for the
//! per-window packer, which sees at most [`DIRECT_MAX`] buffers at a time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::exact::Buffer;

/// Buffers of one memory planned whole; more are planned in windows.
pub const DIRECT_MAX: usize = 2000;

/// Buffers a window aims at (between half and all of it).
pub const WINDOW: usize = 1000;

/// The most bytes live at one operator: no packing is smaller.
pub fn lower_bound(bufs: &[Buffer]) -> u64 {
    let mut events: Vec<(usize, bool, u64)> = bufs
        .iter()
        .flat_map(|b| [(b.first, true, b.size), (b.last + 1, false, b.size)])
        .collect();
    // Ends before starts at the same operator: a buffer ending at t - 1
    // and one starting at t do not live at once.
    events.sort_unstable_by_key(|&(t, start, _)| (t, start));
    let (mut live, mut best) = (0u64, 0u64);
    for (_, start, size) in events {
        if start {
            live += size;
            best = best.max(live);
        } else {
            live -= size;
        }
    }
    best
}

/// Whether `offsets` packs `bufs`: aligned, and no two buffers live at
/// once share a byte. In `n log n`.
pub fn is_packing(bufs: &[Buffer], offsets: &[u64]) -> bool {
    if offsets.len() != bufs.len() {
        return false;
    }
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_unstable_by_key(|&i| bufs[i].first);
    let mut ending: Vec<usize> = order.clone();
    ending.sort_unstable_by_key(|&i| bufs[i].last);
    // The live buffers by offset (empty buffers take no bytes).
    let mut live: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    let mut e = 0;
    for &i in &order {
        let b = bufs[i];
        if offsets[i] % b.align.max(1) != 0 {
            return false;
        }
        while e < ending.len() && bufs[ending[e]].last < b.first {
            let j = ending[e];
            live.remove(&(offsets[j], j));
            e += 1;
        }
        if b.size == 0 {
            continue;
        }
        let (lo, hi) = (offsets[i], offsets[i] + b.size);
        // The live buffer starting closest below `hi` is the only one
        // that can overlap, unless one starts inside.
        if let Some((&(o, _), &end)) = live.range(..(hi, 0)).next_back() {
            if o >= lo || end > lo {
                return false;
            }
        }
        live.insert((lo, i), hi);
    }
    true
}

/// First fit in order of first operator (ties: longer first): each
/// buffer takes the lowest aligned gap among the buffers live when it
/// starts. Every buffer it overlaps in time started no later, so the
/// gaps are those of one sweep over time; with `g` gaps open at once it
/// takes `n (g + log n)`.
pub fn sweep(bufs: &[Buffer]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_unstable_by_key(|&i| (bufs[i].first, Reverse(bufs[i].last), i));
    let mut ending: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut offsets = vec![0u64; bufs.len()];
    // Free bytes below the top, start to end; the top and above is free.
    let mut free: BTreeMap<u64, u64> = BTreeMap::new();
    let mut top = 0u64;
    for &i in &order {
        let b = bufs[i];
        if b.size == 0 {
            continue;
        }
        // Free what ended before this one starts.
        while let Some(&Reverse((last, j))) = ending.peek() {
            if last >= b.first {
                break;
            }
            ending.pop();
            release(&mut free, &mut top, offsets[j], offsets[j] + bufs[j].size);
        }
        let a = b.align.max(1);
        let fit = free
            .iter()
            .map(|(&lo, &hi)| (lo, hi, lo.next_multiple_of(a)))
            .find(|&(_, hi, o)| o + b.size <= hi);
        let o = match fit {
            Some((lo, hi, o)) => {
                free.remove(&lo);
                if lo < o {
                    free.insert(lo, o);
                }
                if o + b.size < hi {
                    free.insert(o + b.size, hi);
                }
                o
            }
            None => {
                let o = top.next_multiple_of(a);
                if top < o {
                    free.insert(top, o);
                }
                top = o + b.size;
                o
            }
        };
        offsets[i] = o;
        ending.push(Reverse((b.last, i)));
    }
    offsets
}

/// [`sweep`] on the highest floor of `base`.
pub fn sweep_on(bufs: &[Buffer], base: &[u64]) -> Vec<u64> {
    let flat = flat_floor(bufs, base);
    sweep(bufs).into_iter().map(|o| o + flat).collect()
}

/// The highest floor of `base`, aligned for every buffer of `bufs`: the
/// flat floor they can all be packed on.
pub fn flat_floor(bufs: &[Buffer], base: &[u64]) -> u64 {
    let align = bufs.iter().map(|b| b.align.max(1)).max().unwrap_or(1);
    base.iter()
        .copied()
        .max()
        .unwrap_or(0)
        .next_multiple_of(align)
}

/// Returns bytes `lo..hi` to the free list, merged with the gaps next to
/// them; where that reaches the top, nothing live is left above, and the
/// top comes down to the merged gap's start.
fn release(free: &mut BTreeMap<u64, u64>, top: &mut u64, lo: u64, hi: u64) {
    let (mut lo, mut hi) = (lo, hi);
    if let Some((&l, &h)) = free.range(..lo).next_back() {
        if h == lo {
            free.remove(&l);
            lo = l;
        }
    }
    if let Some(h) = free.remove(&hi) {
        hi = h;
    }
    if hi >= *top {
        *top = lo;
    } else {
        free.insert(lo, hi);
    }
}

/// What packs one window: its buffers (with operators counted from the
/// window's first), the floor at each of its operators (the bytes below
/// it are taken), and the share of the buffers they are (their number,
/// the number not planned yet, theirs included), to split a time limit
/// by. It returns offsets at or above the floor over each lifetime.
pub type Pack<'a> = dyn FnMut(&[Buffer], &[u64], (usize, usize)) -> Vec<u64> + 'a;

/// Plans `bufs` in windows (see the module comment), each window by
/// `pack`; memories of at most [`DIRECT_MAX`] buffers go to `pack`
/// whole. Returns the offsets.
pub fn plan(bufs: &[Buffer], pack: &mut Pack) -> Vec<u64> {
    let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
    let mut left = bufs.len();
    plan_part(bufs, &vec![0; ops], pack, &mut left)
}

/// [`plan`] of `bufs` above the floor `base` (per operator).
fn plan_part(bufs: &[Buffer], base: &[u64], pack: &mut Pack, left: &mut usize) -> Vec<u64> {
    let n = bufs.len();
    if n == 0 {
        return Vec::new();
    }
    if n <= DIRECT_MAX {
        let share = (n, *left);
        *left -= n;
        let (squeezed, floor) = squeeze(bufs, base);
        return pack(&squeezed, &floor, share);
    }
    let t0 = bufs.iter().map(|b| b.first).min().unwrap_or(0);
    let t1 = bufs.iter().map(|b| b.last).max().unwrap_or(0);
    let cuts = cuts(bufs);
    let window_of = |t: usize| cuts.partition_point(|&c| c <= t);
    let mut crossing = Vec::new();
    let mut local: Vec<Vec<usize>> = vec![Vec::new(); cuts.len() + 1];
    for (i, b) in bufs.iter().enumerate() {
        let w = window_of(b.first);
        if window_of(b.last) == w {
            local[w].push(i);
        } else {
            crossing.push(i);
        }
    }
    // Nowhere to cut, or hardly anything local: one sweep, on the highest
    // floor.
    if cuts.is_empty() || crossing.len() * 10 >= n * 9 {
        *left -= n;
        return sweep_on(bufs, &base[t0..=t1]);
    }
    let mut offsets = vec![0u64; n];
    let cb: Vec<Buffer> = crossing.iter().map(|&i| bufs[i]).collect();
    let co = plan_part(&cb, base, pack, left);
    for (&i, &o) in crossing.iter().zip(&co) {
        offsets[i] = o;
    }
    let floor = skyline(&cb, &co, base);
    for ks in &local {
        let lb: Vec<Buffer> = ks.iter().map(|&i| bufs[i]).collect();
        let lo = plan_part(&lb, &floor, pack, left);
        for (&i, o) in ks.iter().zip(lo) {
            offsets[i] = o;
        }
    }
    offsets
}

/// `bufs` with time counted in sections (the ranges of operators between
/// two consecutive starts or ends: the same buffers live throughout
/// one), and the highest floor of `base` in each: a packing of one is a
/// packing of the other, at most `2n` operators long however long the
/// lifetimes are.
fn squeeze(bufs: &[Buffer], base: &[u64]) -> (Vec<Buffer>, Vec<u64>) {
    let mut points: Vec<usize> = bufs.iter().flat_map(|b| [b.first, b.last + 1]).collect();
    points.sort_unstable();
    points.dedup();
    let at = |t: usize| points.partition_point(|&p| p < t);
    let squeezed = bufs
        .iter()
        .map(|b| Buffer {
            first: at(b.first),
            last: at(b.last + 1) - 1,
            ..*b
        })
        .collect();
    let floor = points
        .windows(2)
        .map(|w| base[w[0]..w[1]].iter().copied().max().unwrap_or(0))
        .collect();
    (squeezed, floor)
}

/// Per operator, the highest of `base` and the tops of `bufs` (at
/// `offsets`) live there.
fn skyline(bufs: &[Buffer], offsets: &[u64], base: &[u64]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_unstable_by_key(|&i| bufs[i].first);
    let mut live: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    let mut next = 0;
    let mut out = base.to_vec();
    for (t, f) in out.iter_mut().enumerate() {
        while next < order.len() && bufs[order[next]].first <= t {
            let i = order[next];
            live.push((offsets[i] + bufs[i].size, bufs[i].last));
            next += 1;
        }
        while live.peek().is_some_and(|&(_, last)| last < t) {
            live.pop();
        }
        if let Some(&(top, _)) = live.peek() {
            *f = (*f).max(top);
        }
    }
    out
}

/// Where to cut the timeline of `bufs`: operators each window starts at
/// (the first at 0 left out). A window holds [`WINDOW`] / 2 to
/// [`WINDOW`] starting buffers where the operators allow; among those
/// places, the cut is where the fewest bytes cross it, the latest of
/// equals.
fn cuts(bufs: &[Buffer]) -> Vec<usize> {
    let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
    // started[t]: buffers starting before operator t; cross[t]: bytes of
    // those live at both t - 1 and t.
    let mut started = vec![0usize; ops + 1];
    let mut delta = vec![0i128; ops + 2];
    for b in bufs {
        started[b.first + 1] += 1;
        delta[b.first + 1] += i128::from(b.size);
        delta[b.last + 1] -= i128::from(b.size);
    }
    for t in 1..=ops {
        started[t] += started[t - 1];
    }
    let mut cross = vec![0i128; ops + 1];
    for t in 1..=ops {
        cross[t] = cross[t - 1] + delta[t];
    }
    let n = bufs.len();
    let mut cuts = Vec::new();
    let mut s = 0;
    while n - started[s] > WINDOW * 3 / 2 {
        let mut best: Option<usize> = None;
        for t in s + 1..ops {
            let c = started[t] - started[s];
            if c > WINDOW {
                best = best.or(Some(t));
                break;
            }
            if c >= WINDOW / 2 && best.is_none_or(|b| cross[t] <= cross[b]) {
                best = Some(t);
            }
        }
        match best {
            Some(b) => {
                cuts.push(b);
                s = b;
            }
            None => break,
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::Instance;
    use crate::rng::SplitMix64;

    fn random(rng: &mut SplitMix64, n: usize, ops: usize, span: usize) -> Vec<Buffer> {
        crate::exact::random_buffers(rng, n, (ops, span), 100, 4)
    }

    #[test]
    fn bounds_and_checks_agree_with_the_instance() {
        let mut rng = SplitMix64(7);
        let (mut good, mut bad) = (0, 0);
        for _ in 0..300 {
            let bufs = random(&mut rng, 12, 10, 5);
            let inst = Instance::new(&bufs);
            assert_eq!(lower_bound(&bufs), inst.lower_bound());
            // A packing with one buffer moved: sometimes still one.
            let mut offsets = sweep(&bufs);
            let k = rng.below(bufs.len());
            offsets[k] = (rng.next_u64() % 200).next_multiple_of(bufs[k].align);
            let ok = inst.is_packing(&offsets);
            assert_eq!(is_packing(&bufs, &offsets), ok, "{bufs:?} {offsets:?}");
            if ok {
                good += 1;
            } else {
                bad += 1;
            }
            let s = sweep(&bufs);
            assert!(inst.is_packing(&s), "{bufs:?} {s:?}");
        }
        assert!(good > 20 && bad > 20, "{good} {bad}");
    }

    #[test]
    fn sweep_packs_nested_lifetimes_at_the_bound() {
        // Activations kept from a forward pass to a backward one, last
        // in first out, with short-lived ones in between.
        let mut bufs = Vec::new();
        let layers = 50;
        for l in 0..layers {
            let (fwd, bwd) = (2 * l, 4 * layers - 2 * l);
            bufs.push(Buffer {
                first: fwd,
                last: bwd,
                size: 64 * (1 + l as u64 % 3),
                align: 64,
            });
            bufs.push(Buffer {
                first: fwd + 1,
                last: fwd + 1,
                size: 640,
                align: 64,
            });
            bufs.push(Buffer {
                first: bwd - 1,
                last: bwd - 1,
                size: 640,
                align: 64,
            });
        }
        let s = sweep(&bufs);
        assert!(is_packing(&bufs, &s));
        let top = bufs.iter().zip(&s).map(|(b, o)| o + b.size).max().unwrap();
        assert_eq!(top, lower_bound(&bufs));
    }

    #[test]
    fn windows_are_small_and_floors_are_kept() {
        let mut rng = SplitMix64(3);
        // Short lifetimes, and a few buffers living long.
        let mut bufs = random(&mut rng, 6000, 3000, 8);
        bufs.extend(random(&mut rng, 60, 3000, 1500));
        let (mut calls, mut seen) = (0, 0);
        let mut last_left = usize::MAX;
        let offsets = plan(&bufs, &mut |wb, base, (part, left)| {
            assert!(wb.len() <= DIRECT_MAX && wb.len() == part);
            assert!(left <= last_left && part <= left);
            last_left = left - part;
            assert!(wb.iter().all(|b| b.last < base.len()));
            calls += 1;
            seen += part;
            // First fit on the highest floor.
            let flat = base.iter().copied().max().unwrap().next_multiple_of(8);
            sweep(wb).into_iter().map(|o| o + flat).collect()
        });
        assert!(calls > 6, "{calls}");
        assert_eq!(seen, bufs.len());
        assert_eq!(last_left, 0);
        assert!(is_packing(&bufs, &offsets));
    }
}
