//! Pinwheel instances with a known optimum that no straight cut reaches: a
//! rectangle of time (operators) x capacity (bytes) is split again and
//! again, each split of a tile making five pieces, a centre ringed by four
//! blades that turn around it (bottom-left to the right, right up to the
//! top, top back to the left, left down to the bottom). No line across
//! time or across the bytes runs through such a tile from edge to edge, so
//! a planner that cuts the timeline into windows, or the bytes into
//! levels, cannot take the pieces apart where the optimum does (the
//! instances of omnimalloc's `PinwheelSource`, built here from their
//! description).
//!
//! The pieces tile the rectangle, so every operator's column is full: the
//! capacity is both the liveness lower bound and the optimum.

use crate::hard::tiled_model;
use crate::rng::SplitMix64;
use crate::Model;

/// Bytes per capacity unit: every size is a multiple of it, the platform
/// alignment.
pub const UNIT: u64 = 64;

/// The fewest operators and units a piece spans.
const MIN: u64 = 1;

/// One piece: operators `t0..t1`, units `y0..y1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    t0: u64,
    t1: u64,
    y0: u64,
    y1: u64,
}

impl Tile {
    fn width(&self) -> u64 {
        self.t1 - self.t0
    }
    fn height(&self) -> u64 {
        self.y1 - self.y0
    }
    fn area(&self) -> u128 {
        u128::from(self.width()) * u128::from(self.height())
    }
    /// Wide and high enough for a centre and four blades.
    fn splits(&self) -> bool {
        self.width() >= 3 * MIN && self.height() >= 3 * MIN
    }

    /// The five pieces: blades `p` operators wide and `q` units high
    /// around the centre.
    fn pinwheel(&self, p: u64, q: u64) -> [Tile; 5] {
        let Tile { t0, t1, y0, y1 } = *self;
        [
            Tile {
                t1: t1 - p,
                y1: y0 + q,
                ..*self
            },
            Tile {
                t0: t1 - p,
                y1: y1 - q,
                ..*self
            },
            Tile {
                t0: t0 + p,
                y0: y1 - q,
                ..*self
            },
            Tile {
                t1: t0 + p,
                y0: y0 + q,
                ..*self
            },
            Tile {
                t0: t0 + p,
                t1: t1 - p,
                y0: y0 + q,
                y1: y1 - q,
            },
        ]
    }
}

/// Uniform in `lo..=hi`.
fn between(rng: &mut SplitMix64, lo: u64, hi: u64) -> u64 {
    lo + rng.next_u64() % (hi - lo + 1)
}

/// An instance of about `n` buffers from `seed` (`n` rounded up to one
/// more than a multiple of four, as each split adds four pieces): the
/// model, and its capacity in bytes (= the optimum = the liveness lower
/// bound).
///
/// The rectangle is `n` operators wide and `64 n` units (of 64 bytes)
/// high. The tile split next is the larger of two drawn at random (large
/// tiles split first, so pieces of every scale remain), each blade at
/// most half of what the centre leaves.
pub fn instance(n: usize, seed: u64) -> (Model, u64) {
    let mut rng = SplitMix64(0x7069_6e77_6865_656c ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let width = n.max(3) as u64;
    let height = 64 * n.max(3) as u64;
    let mut tiles = vec![Tile {
        t0: 0,
        t1: width,
        y0: 0,
        y1: height,
    }];
    let mut splittable: Vec<usize> = vec![0];
    while tiles.len() < n && !splittable.is_empty() {
        let a = rng.below(splittable.len());
        let b = rng.below(splittable.len());
        let pick = if tiles[splittable[a]].area() >= tiles[splittable[b]].area() {
            a
        } else {
            b
        };
        let k = splittable.swap_remove(pick);
        let tile = tiles[k];
        let p = between(&mut rng, MIN, (tile.width() - MIN) / 2);
        let q = between(&mut rng, MIN, (tile.height() - MIN) / 2);
        let [first, rest @ ..] = tile.pinwheel(p, q);
        tiles[k] = first;
        if first.splits() {
            splittable.push(k);
        }
        for t in rest {
            if t.splits() {
                splittable.push(tiles.len());
            }
            tiles.push(t);
        }
    }
    let spans = tiles
        .iter()
        .map(|t| (t.t0 as usize, t.t1 as usize, t.height()));
    let model = tiled_model(format!("pinwheel{n}_s{seed}"), width as usize, spans);
    (model, height * UNIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_tile_the_rectangle() {
        for seed in 0..5 {
            let (m, cap) = instance(61, seed);
            assert_eq!(m.desc, instance(61, seed).0.desc, "fixed seeds");
            assert_eq!(m.tensors.len(), 61);
            assert_eq!(m.liveness_lower_bound(), cap);
            let ops = m.desc.operators.len();
            let mut live = vec![0u64; ops];
            for t in &m.tensors {
                let l = t.lifetime.as_ref().unwrap();
                for c in &mut live[l.start_op..=l.end_op] {
                    *c += t.size;
                }
            }
            assert!(live.iter().all(|&c| c == cap), "seed {seed}");
        }
        assert_ne!(instance(61, 0).0.desc, instance(61, 1).0.desc);
    }

    #[test]
    fn a_pinwheel_has_no_straight_cut() {
        let tile = Tile {
            t0: 0,
            t1: 9,
            y0: 0,
            y1: 9,
        };
        let pieces = tile.pinwheel(2, 3);
        let area: u128 = pieces.iter().map(Tile::area).sum();
        assert_eq!(area, tile.area());
        // Every line strictly inside the tile, across time or across the
        // bytes, runs through the inside of some piece.
        for c in 1..9 {
            assert!(pieces.iter().any(|p| p.t0 < c && c < p.t1), "time {c}");
            assert!(pieces.iter().any(|p| p.y0 < c && c < p.y1), "bytes {c}");
        }
    }
}
