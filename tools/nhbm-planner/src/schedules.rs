//! Generated training steps and pipeline schedules: shapes where every
//! cut of the timeline is crossed by most of the bytes live at it, which
//! windows of time ([`crate::window`]) plan badly.
//!
//! - [`training`]: a training step. Each layer's forward pass saves
//!   activations for its backward pass, so the activations of every layer
//!   before a cut cross it, nested: the first layer's live longest. Each
//!   pass also has short-lived temporaries, and the backward pass makes a
//!   weight gradient per layer that lives to the optimizer step at the end.
//! - [`pipeline`]: one stage of an interleaved pipeline schedule
//!   (one forward, one backward, after a warm-up of forwards), with
//!   `CHUNKS` model chunks per stage and micro-batches in groups of
//!   `STAGES`: the activations a micro-batch's forward saves live to its
//!   backward, and those of different micro-batches and chunks overlap
//!   without nesting.
//!
//! Sizes are multiples of 64 KiB from 64 KiB to 4 MiB, at random from a
//! seed: the same arguments give the same model.

use std::path::PathBuf;

use crate::desc::{live_over, ModelDesc, OperatorDesc, TensorDesc};
use crate::rng::SplitMix64;
use crate::Model;

/// The unit of every size.
const KIB64: u64 = 64 * 1024;

/// Stages of the pipeline (micro-batches go through the schedule in
/// groups of this many).
pub const STAGES: usize = 4;

/// Model chunks each stage holds.
pub const CHUNKS: usize = 2;

/// Activations a forward saves for its backward.
pub const SAVED: usize = 6;

/// Temporaries of each forward and of each backward.
pub const TEMPS: usize = 4;

/// A model being generated: its tensors, operators and sizes.
struct Gen {
    tensors: Vec<TensorDesc>,
    operators: Vec<OperatorDesc>,
    rng: SplitMix64,
}

impl Gen {
    fn new(seed: u64, salt: u64) -> Gen {
        Gen {
            tensors: Vec::new(),
            operators: Vec::new(),
            rng: SplitMix64(salt ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }

    /// A new operator's index.
    fn op(&mut self) -> usize {
        let t = self.operators.len();
        self.operators
            .push(OperatorDesc::new(format!("op{t}"), Vec::new(), Vec::new()));
        t
    }

    /// A tensor `id` of a random size, live over operators `first..=last`.
    fn tensor(&mut self, id: String, first: usize, last: usize) {
        let size = (1 + self.rng.next_u64() % 64) * KIB64;
        live_over(&mut self.operators, &id, first, last);
        self.tensors.push(TensorDesc::scratch(id, size));
    }

    /// `n` temporaries named `prefix.tJ` over the operators `ops` (at
    /// least one), each from a random one of them for 1 to 3 operators.
    fn temporaries(&mut self, prefix: &str, ops: (usize, usize), n: usize) {
        for j in 0..n {
            let first = ops.0 + self.rng.below(ops.1 - ops.0 + 1);
            let last = (first + self.rng.below(3)).min(ops.1);
            self.tensor(format!("{prefix}.t{j}"), first, last);
        }
    }

    fn model(self, name: String) -> Model {
        let desc = ModelDesc::scratch_only(name, 64, self.tensors, self.operators);
        Model::new(desc, PathBuf::from(".")).expect("generated graphs are well formed")
    }
}

/// Operators of one forward or backward of a layer or chunk.
const OPS: usize = 3;

/// A training step of about `buffers` scratch tensors from `seed` (see
/// the module comment): `buffers / 15` layers (at least one), each with
/// [`SAVED`] saved activations, [`TEMPS`] temporaries a pass and a weight
/// gradient.
pub fn training(buffers: usize, seed: u64) -> Model {
    let layers = (buffers / (SAVED + 2 * TEMPS + 1)).max(1);
    let mut g = Gen::new(seed, 0x7472_6169_6e00);
    let fwd: Vec<(usize, usize)> = (0..layers).map(|_| span(&mut g)).collect();
    let bwd: Vec<(usize, usize)> = (0..layers).map(|_| span(&mut g)).collect();
    let step = g.op();
    for (l, &f) in fwd.iter().enumerate() {
        // The backward pass runs the layers in reverse.
        let b = bwd[layers - 1 - l];
        for j in 0..SAVED {
            let first = f.0 + g.rng.below(OPS);
            let last = b.0 + g.rng.below(OPS);
            g.tensor(format!("l{l}.s{j}"), first, last);
        }
        g.temporaries(&format!("l{l}.f"), f, TEMPS);
        g.temporaries(&format!("l{l}.b"), b, TEMPS);
        g.tensor(format!("l{l}.dw"), b.1, step);
    }
    g.model(format!("training{layers}_s{seed}"))
}

/// [`OPS`] new operators: the first and the last.
fn span(g: &mut Gen) -> (usize, usize) {
    let first = g.op();
    (1..OPS).for_each(|_| {
        g.op();
    });
    (first, first + OPS - 1)
}

/// One stage of an interleaved pipeline schedule of about `buffers`
/// scratch tensors from `seed` (see the module comment): micro-batches
/// in groups of [`STAGES`], each through [`CHUNKS`] chunks, each forward
/// saving [`SAVED`] activations, with [`TEMPS`] temporaries a pass, and a
/// weight gradient a chunk from its first backward to the end.
pub fn pipeline(buffers: usize, seed: u64) -> Model {
    let per = SAVED + 2 * TEMPS;
    let groups = (buffers / (per * STAGES * CHUNKS)).max(1);
    let (forwards, backwards) = passes(groups);
    let mut g = Gen::new(seed, 0x7069_7065_0000);
    let mut saved_from = vec![(0usize, 0usize); forwards.len()];
    let mut grad_from = [None::<usize>; CHUNKS];
    let warm = STAGES * CHUNKS;
    let (mut f, mut b) = (0, 0);
    while b < backwards.len() {
        let forward = f < forwards.len() && (f < warm || f - warm <= b);
        let ops = span(&mut g);
        let (m, c) = if forward { forwards[f] } else { backwards[b] };
        let at = m * CHUNKS + c;
        if forward {
            saved_from[at] = ops;
            g.temporaries(&format!("m{m}c{c}.f"), ops, TEMPS);
            f += 1;
        } else {
            for j in 0..SAVED {
                let first = saved_from[at].0 + g.rng.below(OPS);
                let last = ops.0 + g.rng.below(OPS);
                g.tensor(format!("m{m}c{c}.s{j}"), first, last);
            }
            g.temporaries(&format!("m{m}c{c}.b"), ops, TEMPS);
            grad_from[c].get_or_insert(ops.1);
            b += 1;
        }
    }
    let end = g.op();
    for (c, from) in grad_from.iter().enumerate() {
        g.tensor(format!("c{c}.dw"), from.unwrap_or(0), end);
    }
    g.model(format!("pipeline{groups}_s{seed}"))
}

/// A forward or a backward: (micro-batch, chunk).
type Pass = (usize, usize);

/// The forwards and the backwards of `groups` groups of micro-batches, as
/// (micro-batch, chunk), in the order the schedule runs each: a group's
/// chunks in turn, each over the group's micro-batches; backwards from
/// the last chunk.
fn passes(groups: usize) -> (Vec<Pass>, Vec<Pass>) {
    let mut forwards = Vec::new();
    let mut backwards = Vec::new();
    for grp in 0..groups {
        let batch = grp * STAGES..(grp + 1) * STAGES;
        for c in 0..CHUNKS {
            forwards.extend(batch.clone().map(|m| (m, c)));
            backwards.extend(batch.clone().map(|m| (m, CHUNKS - 1 - c)));
        }
    }
    (forwards, backwards)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lifetime of tensor `id` of `m`.
    fn life(m: &Model, id: &str) -> (usize, usize) {
        let t = m.tensors.iter().find(|t| t.id() == id).unwrap();
        let l = t.lifetime.as_ref().unwrap();
        (l.start_op, l.end_op)
    }

    #[test]
    fn training_steps_nest_their_saved_activations() {
        let m = training(150, 1);
        assert_eq!(m.tensors.len(), 150);
        assert_eq!(m.desc, training(150, 1).desc);
        assert_ne!(m.desc, training(150, 2).desc);
        // The first layer's saved activations live across the last one's.
        let (first, last) = (life(&m, "l0.s0"), life(&m, "l9.s0"));
        assert!(first.0 < last.0 && last.1 < first.1, "{first:?} {last:?}");
        assert_eq!(life(&m, "l3.dw").1, m.desc.operators.len() - 1);
    }

    #[test]
    fn pipelines_interleave_micro_batches() {
        let m = pipeline(1000, 1);
        let groups = 1000 / ((SAVED + 2 * TEMPS) * STAGES * CHUNKS);
        assert_eq!(m.tensors.len(), groups * STAGES * CHUNKS * 14 + CHUNKS);
        assert_eq!(m.desc, pipeline(1000, 1).desc);
        // Micro-batch 0's activations of chunk 0 live past the forward of
        // micro-batch 4 (the next group's), and end before micro-batch
        // 4's own do: overlapping, not nested.
        let (a, b) = (life(&m, "m0c0.s0"), life(&m, "m4c0.s0"));
        assert!(a.0 < b.0 && b.0 < a.1 && a.1 < b.1, "{a:?} {b:?}");
        // One forward, one backward after the warm-up: the first backward
        // runs before the last micro-batch's first forward.
        let last = format!("m{}c0.s0", groups * STAGES - 1);
        assert!(life(&m, "m0c1.s0").1 < life(&m, &last).0);
        for t in &m.tensors {
            assert!(t.size % KIB64 == 0 && t.size <= 64 * KIB64, "{}", t.id());
        }
    }
}
