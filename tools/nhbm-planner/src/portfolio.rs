//! The best of many greedy placements of one memory's buffers: every
//! order of [`crate::orders`] by both rules of [`crate::bestfit`], the
//! ones that do best on compilers' traces first, until the deadline or a
//! placement at the liveness lower bound.
//!
//! On the traces of production compilers (idealloc's IOPDDL and SOMAS
//! instances) no single order wins: of the buffers live at the busiest
//! operators first, best fit of the longest first is within 0.3% of the
//! bound on S_1 and 9% above it on pangu_2.6B, where first fit of the
//! largest first is within 0.8% (and 36% above it on S_1).

use std::time::Instant;

use crate::bestfit::{self, Limit, Rule};
use crate::exact::{high_water, Buffer};
use crate::orders::{Key, Weights};

/// The placements tried, in order: first fit is fast (a placement stops
/// at the first gap), so the first fits that do best on the traces come
/// first, then the best fits.
const TRIES: [(Key, Rule); 12] = [
    (Key::PressureLength, Rule::Lowest),
    (Key::PressureSize, Rule::Lowest),
    (Key::PressureLength, Rule::Tightest),
    (Key::PressureSize, Rule::Tightest),
    (Key::Size, Rule::Tightest),
    (Key::Size, Rule::Lowest),
    (Key::Length, Rule::Tightest),
    (Key::Length, Rule::Lowest),
    (Key::Area, Rule::Tightest),
    (Key::Area, Rule::Lowest),
    (Key::Start, Rule::Tightest),
    (Key::Start, Rule::Lowest),
];

/// A greedy placement: its high-water mark and offsets, and the order and
/// rule that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// The top of the buffers placed.
    pub high_water: u64,
    /// Each buffer's offset.
    pub offsets: Vec<u64>,
    /// The order the buffers were placed in.
    pub order: Vec<usize>,
    /// Which gap each one went into.
    pub rule: Rule,
}

/// The lowest of the placements of `bufs` made within `limit` (see the
/// module comment; `times` as [`Weights::new`] takes them; what they spent
/// is taken from `limit`), stopping at `enough` bytes; none if not one
/// was made within it. A placement cut short by the limit ends the tries.
pub fn best(
    bufs: &[Buffer],
    times: Option<&[u64]>,
    enough: u64,
    limit: &mut Limit,
) -> Option<Seed> {
    let weights = Weights::new(bufs, times);
    let mut best: Option<Seed> = None;
    for (key, rule) in TRIES {
        if Instant::now() >= limit.deadline || best.as_ref().is_some_and(|b| b.high_water <= enough)
        {
            break;
        }
        let order = weights.order(key);
        let Some(offsets) = bestfit::place(bufs, &order, rule, limit) else {
            break;
        };
        let high_water = high_water(bufs, &offsets);
        if best.as_ref().is_none_or(|b| high_water < b.high_water) {
            best = Some(Seed {
                high_water,
                offsets,
                order,
                rule,
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::random_buffers;
    use crate::rng::SplitMix64;
    use crate::window;
    use std::time::Duration;

    #[test]
    fn the_best_is_a_packing_no_higher_than_any_one_try() {
        let mut rng = SplitMix64(11);
        let bufs = random_buffers(&mut rng, 400, (300, 80), 4000, 3);
        let far = Limit::until(Instant::now() + Duration::from_secs(60));
        let Seed {
            high_water: top,
            offsets,
            order,
            rule,
        } = best(&bufs, None, 0, &mut far.clone()).unwrap();
        // The order and rule named are the ones that made it.
        assert_eq!(
            bestfit::place(&bufs, &order, rule, &mut far.clone()).unwrap(),
            offsets
        );
        assert!(window::is_packing(&bufs, &offsets));
        assert_eq!(top, high_water(&bufs, &offsets));
        let w = Weights::new(&bufs, None);
        for (key, rule) in TRIES {
            let o = bestfit::place(&bufs, &w.order(key), rule, &mut far.clone()).unwrap();
            assert!(top <= high_water(&bufs, &o), "{key:?} {rule:?}");
        }
        assert!(best(&bufs, None, 0, &mut Limit::until(Instant::now())).is_none());
    }
}
