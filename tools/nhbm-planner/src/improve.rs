//! Iterated greedy over the order of a greedy placement
//! ([`crate::portfolio`]'s best): a buffer on top of the arena (its top
//! is the high-water mark) is moved earlier in the order, to a random
//! place, and the buffers from there on are placed again by the same
//! rule; the new order is kept when its high-water mark is not above the
//! current one and, equal, when no more buffers reach it. Placed earlier,
//! while there is more room, a buffer on top tends to go lower, and the
//! buffers it passes fill in around it.
//!
//! A move places again only the buffers after the place it moves to
//! ([`bestfit::resume`]): half the time anywhere before where it was, half
//! the time within a sixteenth of the buffers of it, which is cheaper. It
//! runs until the deadline, `moves` moves, `stall` moves in a row that
//! lower neither the high-water mark nor the buffers at it, or the lower
//! bound; seeded, so
//! where the deadline does not stop it, the same arguments give the same
//! packing.

use std::time::Instant;

use crate::bestfit::{self, Limit};
use crate::exact::{high_water, Buffer};
use crate::portfolio::Seed;
use crate::rng::SplitMix64;

/// The high-water mark of `offsets`, and how many buffers reach it.
fn cost(bufs: &[Buffer], offsets: &[u64]) -> (u64, usize) {
    let top = high_water(bufs, offsets);
    let at_top = bufs
        .iter()
        .zip(offsets)
        .filter(|(b, &o)| o + b.size == top)
        .count();
    (top, at_top)
}

/// Where to move the buffer at position `i` of `n`: before it, anywhere
/// or near it.
fn earlier(rng: &mut SplitMix64, i: usize, n: usize) -> usize {
    if rng.next_u64() % 2 == 0 {
        rng.below(i)
    } else {
        i - 1 - rng.below(i.min((n / 16).max(1)))
    }
}

/// `start` improved as the module comment says, within `moves` moves,
/// `stall` of them in a row without a lower cost, and `limit` (a move cut
/// short by it is dropped; what the moves spent is taken from it),
/// stopping at `enough` bytes; never higher than `start`.
pub fn improve(
    bufs: &[Buffer],
    start: Seed,
    (moves, stall, seed): (u64, u64, u64),
    (enough, limit): (u64, &mut Limit),
) -> Seed {
    let mut rng = SplitMix64(seed);
    let mut cur = start;
    let mut cur_cost = cost(bufs, &cur.offsets);
    let mut offsets = cur.offsets.clone();
    let mut stalled = 0;
    for _ in 0..moves {
        if cur.high_water <= enough || stalled >= stall || Instant::now() >= limit.deadline {
            break;
        }
        stalled += 1;
        let tops: Vec<usize> = (0..bufs.len())
            .filter(|&k| cur.offsets[k] + bufs[k].size == cur.high_water)
            .collect();
        let k = tops[rng.below(tops.len())];
        let i = cur
            .order
            .iter()
            .position(|&x| x == k)
            .expect("in the order");
        if i == 0 {
            continue;
        }
        let j = earlier(&mut rng, i, bufs.len());
        let mut order = cur.order.clone();
        order[j..=i].rotate_right(1);
        offsets.copy_from_slice(&cur.offsets);
        if !bestfit::resume(bufs, (&order, j), cur.rule, &mut offsets, limit) {
            break;
        }
        let c = cost(bufs, &offsets);
        if c < cur_cost {
            stalled = 0;
        }
        if c <= cur_cost {
            cur_cost = c;
            cur.order = order;
            cur.offsets.copy_from_slice(&offsets);
            cur.high_water = c.0;
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::random_buffers;
    use crate::portfolio;
    use crate::window;
    use std::time::Duration;

    #[test]
    fn moves_never_raise_the_arena_and_can_lower_it() {
        let mut rng = SplitMix64(17);
        let far = Limit::until(Instant::now() + Duration::from_secs(60));
        let mut lowered = 0;
        for _ in 0..5 {
            let bufs = random_buffers(&mut rng, 300, (200, 60), 5000, 1);
            let start = portfolio::best(&bufs, None, 0, &mut far.clone()).unwrap();
            let better = improve(&bufs, start.clone(), (500, 500, 1), (0, &mut far.clone()));
            assert!(window::is_packing(&bufs, &better.offsets));
            assert_eq!(better.high_water, high_water(&bufs, &better.offsets));
            let again =
                bestfit::place(&bufs, &better.order, better.rule, &mut far.clone()).unwrap();
            assert_eq!(
                again, better.offsets,
                "the order kept makes the packing kept"
            );
            assert!(better.high_water <= start.high_water);
            lowered += usize::from(better.high_water < start.high_water);
            let same = improve(&bufs, start.clone(), (500, 500, 1), (0, &mut far.clone()));
            assert_eq!(same, better, "seeded: the same packing");
        }
        assert!(lowered >= 3, "{lowered} of 5 lowered");
    }
}
