//! Hard placement instances with a known optimum: a rectangle of time
//! (operators) x capacity (bytes) is cut into buffers by random guillotine
//! cuts, so the buffers tile it and a packing at exactly the capacity exists
//! by construction. The capacity is also the liveness lower bound (every
//! operator's column is covered), so the optimum is known: the capacity.

use std::path::PathBuf;

use crate::desc::{live_over, ModelDesc, OperatorDesc, TensorDesc};
use crate::rng::SplitMix64;
use crate::Model;

/// Sizes (buffers) of hill_climb's held-out instances: none of them is
/// planned by the benchmarks' other figures.
pub const HELDOUT_SIZES: [usize; 7] = [150, 200, 250, 300, 350, 400, 450];
/// Seeds of the held-out instances, for each size.
pub const HELDOUT_SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// Bytes per capacity unit: every size and cut is a multiple of it, the
/// platform alignment.
pub const UNIT: u64 = 64;

/// One piece of the rectangle: operators `t0..t1`, units `y0..y1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    t0: usize,
    t1: usize,
    y0: u64,
    y1: u64,
}

impl Piece {
    fn width(&self) -> usize {
        self.t1 - self.t0
    }
    fn height(&self) -> u64 {
        self.y1 - self.y0
    }
    fn area(&self) -> u64 {
        self.width() as u64 * self.height()
    }
}

/// An instance of `n` buffers from `seed`: the model, and its capacity in
/// bytes (= the optimum = the liveness lower bound).
///
/// The rectangle is `n` operators wide and `64 n` units (of 64 bytes)
/// high. Cuts take the larger of two random pieces, alternate roughly by
/// the piece's shape, and fall anywhere inside it, so sizes and lifetimes
/// spread over orders of magnitude.
pub fn instance(n: usize, seed: u64) -> (Model, u64) {
    assert!(n >= 1, "at least one buffer");
    let mut rng = SplitMix64(0x6861_7264_0000_0000 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let width = n.max(2);
    let height = 64 * n as u64;
    let mut pieces = vec![Piece {
        t0: 0,
        t1: width,
        y0: 0,
        y1: height,
    }];
    while pieces.len() < n {
        let a = rng.below(pieces.len());
        let b = rng.below(pieces.len());
        let k = if pieces[a].area() >= pieces[b].area() {
            a
        } else {
            b
        };
        let p = pieces[k];
        if p.area() < 2 {
            continue;
        }
        // Cut across time with a probability that grows with how wide the
        // piece is relative to the rectangle.
        let wide = p.width() as f64 / width as f64;
        let tall = p.height() as f64 / height as f64;
        let r = (rng.next_u64() % 1024) as f64 / 1024.0;
        let in_time = p.height() < 2 || (p.width() >= 2 && r < wide / (wide + tall));
        let (lo, hi) = if in_time {
            let c = p.t0 + 1 + rng.below(p.width() - 1);
            (Piece { t1: c, ..p }, Piece { t0: c, ..p })
        } else {
            let c = p.y0 + 1 + rng.next_u64() % (p.height() - 1);
            (Piece { y1: c, ..p }, Piece { y0: c, ..p })
        };
        pieces[k] = lo;
        pieces.push(hi);
    }
    let tiles = pieces.iter().map(|p| (p.t0, p.t1, p.height()));
    let model = tiled_model(format!("hard{n}_s{seed}"), width, tiles);
    (model, height * UNIT)
}

/// A scratch-only model of `width` operators with one tensor per tile
/// `(t0, t1, height)`: `height` units, live from operator `t0` to `t1 - 1`.
/// The generators of packings with a known optimum build their models so.
pub(crate) fn tiled_model(
    name: String,
    width: usize,
    tiles: impl Iterator<Item = (usize, usize, u64)> + Clone,
) -> Model {
    let tensors: Vec<TensorDesc> = tiles
        .clone()
        .enumerate()
        .map(|(i, (_, _, h))| TensorDesc::scratch(format!("b{i}"), h * UNIT))
        .collect();
    let mut operators: Vec<OperatorDesc> = (0..width)
        .map(|t| OperatorDesc::new(format!("op{t}"), Vec::new(), Vec::new()))
        .collect();
    for (i, (t0, t1, _)) in tiles.enumerate() {
        live_over(&mut operators, &format!("b{i}"), t0, t1 - 1);
    }
    let desc = ModelDesc::scratch_only(name, UNIT, tensors, operators);
    Model::new(desc, PathBuf::from(".")).expect("generated instances are well formed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_tile_the_rectangle() {
        for seed in 0..5 {
            let (m, cap) = instance(60, seed);
            let (m2, _) = instance(60, seed);
            assert_eq!(m.desc, m2.desc, "fixed seeds");
            assert_eq!(m.tensors.len(), 60);
            assert_eq!(m.liveness_lower_bound(), cap);
            // Every column is exactly full.
            let n = m.desc.operators.len();
            let mut live = vec![0u64; n];
            for t in &m.tensors {
                let l = t.lifetime.as_ref().unwrap();
                for c in &mut live[l.start_op..=l.end_op] {
                    *c += t.size;
                }
            }
            assert!(live.iter().all(|&c| c == cap), "seed {seed}");
        }
        assert_ne!(instance(60, 0).0.desc, instance(60, 1).0.desc);
    }
}
