//! The orders greedy placements ([`crate::bestfit`]) take one memory's
//! buffers in: what each buffer weighs (its size, how long it lives, the
//! most bytes live at once during its lifetime), and the orders ranked
//! by them.
//!
//! A buffer live at the busiest operators has no room to spare: placed
//! early, while the arena is empty, it packs tight where the peak is.
//! Large and long-lived buffers placed early leave the small and short
//! ones to fill the gaps. Which of these wins depends on the instance, so
//! every one is tried.

use std::cmp::Reverse;

use crate::exact::Buffer;

/// What the orders rank buffers by.
pub struct Weights {
    /// Each buffer's bytes.
    size: Vec<u64>,
    /// How long each buffer lives: its operators, or the time they take.
    length: Vec<u64>,
    /// The most bytes live at one operator of each buffer's lifetime.
    pressure: Vec<u64>,
    /// Each buffer's first operator.
    first: Vec<usize>,
}

/// A way of ranking buffers, largest key first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// Bytes, then lifetime.
    Size,
    /// Lifetime, then bytes.
    Length,
    /// Bytes times lifetime.
    Area,
    /// The busiest operator it lives at, then bytes.
    PressureSize,
    /// The busiest operator it lives at, then lifetime.
    PressureLength,
    /// Its first operator (earliest first), then bytes.
    Start,
}

/// Every order [`Weights::order`] makes.
pub const KEYS: [Key; 6] = [
    Key::PressureSize,
    Key::Size,
    Key::PressureLength,
    Key::Length,
    Key::Area,
    Key::Start,
];

impl Weights {
    /// The weights of `bufs`; with `times`, operator `t` lasts from
    /// `times[t]` up to `times[t + 1]`, else every operator one unit.
    pub fn new(bufs: &[Buffer], times: Option<&[u64]>) -> Weights {
        let length = bufs
            .iter()
            .map(|b| match times {
                Some(t) => t[b.last + 1].saturating_sub(t[b.first]).max(1),
                None => (b.last - b.first + 1) as u64,
            })
            .collect();
        Weights {
            size: bufs.iter().map(|b| b.size).collect(),
            length,
            pressure: pressure(bufs),
            first: bufs.iter().map(|b| b.first).collect(),
        }
    }

    /// The buffers ranked by `key`, ties by index.
    pub fn order(&self, key: Key) -> Vec<usize> {
        let mut o: Vec<usize> = (0..self.size.len()).collect();
        let (s, l, p) = (&self.size, &self.length, &self.pressure);
        let area = |k: usize| u128::from(s[k]) * u128::from(l[k]);
        match key {
            Key::Size => o.sort_by_key(|&k| (Reverse(s[k]), Reverse(l[k]), k)),
            Key::Length => o.sort_by_key(|&k| (Reverse(l[k]), Reverse(s[k]), k)),
            Key::Area => o.sort_by_key(|&k| (Reverse(area(k)), Reverse(s[k]), k)),
            Key::PressureSize => o.sort_by_key(|&k| (Reverse(p[k]), Reverse(s[k]), k)),
            Key::PressureLength => o.sort_by_key(|&k| (Reverse(p[k]), Reverse(l[k]), k)),
            Key::Start => o.sort_by_key(|&k| (self.first[k], Reverse(s[k]), k)),
        }
        o
    }
}

/// The most bytes live at one operator of each buffer's lifetime: the
/// bytes live at every operator, then a range maximum over each lifetime
/// (a sparse table: `n log n`).
fn pressure(bufs: &[Buffer]) -> Vec<u64> {
    let ops = bufs.iter().map(|b| b.last + 1).max().unwrap_or(0);
    let mut delta = vec![0i128; ops + 1];
    for b in bufs {
        delta[b.first] += i128::from(b.size);
        delta[b.last + 1] -= i128::from(b.size);
    }
    let mut live = 0i128;
    let mut table: Vec<Vec<u64>> = vec![delta[..ops]
        .iter()
        .map(|d| {
            live += d;
            live as u64
        })
        .collect()];
    let mut w = 1;
    while 2 * w <= ops {
        let prev = table.last().unwrap();
        let next = (0..=ops - 2 * w)
            .map(|i| prev[i].max(prev[i + w]))
            .collect();
        table.push(next);
        w *= 2;
    }
    bufs.iter()
        .map(|b| {
            let len = b.last - b.first + 1;
            let lvl = (usize::BITS - 1 - len.leading_zeros()) as usize;
            let row = &table[lvl];
            row[b.first].max(row[b.last + 1 - (1 << lvl)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exact::random_buffers;
    use crate::rng::SplitMix64;

    #[test]
    fn pressure_is_the_busiest_operator_of_each_lifetime() {
        let mut rng = SplitMix64(5);
        let bufs = random_buffers(&mut rng, 300, (100, 40), 1000, 1);
        let live = |t: usize| -> u64 {
            bufs.iter()
                .filter(|b| b.first <= t && t <= b.last)
                .map(|b| b.size)
                .sum()
        };
        let want: Vec<u64> = bufs
            .iter()
            .map(|b| (b.first..=b.last).map(live).max().unwrap())
            .collect();
        assert_eq!(pressure(&bufs), want);
    }

    #[test]
    fn every_order_ranks_every_buffer_once_by_its_key() {
        let mut rng = SplitMix64(9);
        let bufs = random_buffers(&mut rng, 200, (50, 20), 1000, 1);
        let times: Vec<u64> = (0..=80).map(|t| t * t).collect();
        let w = Weights::new(&bufs, Some(&times));
        for key in KEYS {
            let o = w.order(key);
            let mut seen = o.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..bufs.len()).collect::<Vec<_>>(), "{key:?}");
            let first = |k: usize| match key {
                Key::Size => bufs[k].size,
                Key::Length => w.length[k],
                Key::Area => bufs[k].size * w.length[k],
                Key::PressureSize | Key::PressureLength => w.pressure[k],
                Key::Start => u64::MAX - bufs[k].first as u64,
            };
            assert!(o.windows(2).all(|p| first(p[0]) >= first(p[1])), "{key:?}");
        }
        // Timed: a lifetime is the time its operators take.
        let b = bufs[0];
        assert_eq!(w.length[0], times[b.last + 1] - times[b.first]);
    }
}
