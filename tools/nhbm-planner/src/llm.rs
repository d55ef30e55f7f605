//! LLM-shaped graphs, the sizes compilers feed a memory planner: decoder
//! stacks of thousands to hundreds of thousands of scratch tensors.
//!
//! [`decoder`] builds a stack of decoder layers from their dimensions:
//! attention (normalisation, the q, k and v projections, scores, softmax,
//! the weighted values, the output projection), the residual adds, the
//! MLP (up and gate projections, activation, product, down projection),
//! optionally a KV cache per layer that lives to the end of the graph,
//! and optionally the backward pass, where every activation the gradients
//! read is kept from its forward operator to its backward one (the nested
//! lifetimes of a training step). [`traced`] is a stack as a tracer that
//! fuses nothing records it: per layer, activations of random sizes living
//! a few operators, and a residual buffer that spans the layer.

use std::path::PathBuf;

use crate::desc::{live_over, ModelDesc, OperatorDesc, TensorDesc};
use crate::rng::SplitMix64;
use crate::Model;

/// The shape of a decoder stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoder {
    /// Decoder layers.
    pub layers: usize,
    /// Tokens processed at once.
    pub tokens: u64,
    /// The model dimension.
    pub hidden: u64,
    /// The MLP's inner dimension.
    pub ffn: u64,
    /// Attention heads.
    pub heads: u64,
    /// Tokens attended to (the KV cache's length).
    pub context: u64,
    /// Bytes per element.
    pub elem: u64,
    /// Each layer's keys and values live to the end of the graph.
    pub kv_cache: bool,
    /// The backward pass follows the forward one.
    pub backward: bool,
    /// Sizes vary by up to this many percent either way, from `seed` (as
    /// shapes vary with padding and fusion); 0: exact dimensions.
    pub jitter: u64,
    /// The seed of the jitter.
    pub seed: u64,
}

impl Decoder {
    /// A small decoder (hidden 512, MLP 2048, 8 heads, 128 tokens over a
    /// context of 512, bf16), forward only with a KV cache, `layers` deep.
    pub fn small(layers: usize) -> Self {
        Decoder {
            layers,
            tokens: 128,
            hidden: 512,
            ffn: 2048,
            heads: 8,
            context: 512,
            elem: 2,
            kv_cache: true,
            backward: false,
            jitter: 0,
            seed: 0,
        }
    }

    /// Scratch tensors per layer.
    pub fn tensors_per_layer(&self) -> usize {
        18 + if self.backward { 14 } else { 0 }
    }
}

/// Builds tensors and operators one operator at a time.
struct Graph {
    tensors: Vec<TensorDesc>,
    operators: Vec<OperatorDesc>,
    rng: SplitMix64,
    jitter: u64,
}

impl Graph {
    /// A scratch tensor of `size` bytes (jittered, 64-byte multiples).
    fn tensor(&mut self, id: String, size: u64) -> String {
        let mut size = size;
        if self.jitter > 0 {
            let span = 2 * self.jitter + 1;
            let pct = 100 - self.jitter + self.rng.next_u64() % span;
            size = size * pct / 100;
        }
        self.tensors.push(TensorDesc::scratch(
            id.clone(),
            size.next_multiple_of(64).max(64),
        ));
        id
    }

    fn op(&mut self, name: String, uses: &[&str], defines: &[&str]) {
        let ids = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        self.operators
            .push(OperatorDesc::new(name, ids(uses), ids(defines)));
    }
}

/// A model of the given scratch tensors and operators, in one memory.
fn model(name: String, tensors: Vec<TensorDesc>, operators: Vec<OperatorDesc>) -> Model {
    let desc = ModelDesc::scratch_only(name, 64, tensors, operators);
    Model::new(desc, PathBuf::from(".")).expect("generated graphs are well formed")
}

/// The decoder stack `d` as a model.
pub fn decoder(d: &Decoder) -> Model {
    let mut g = Graph {
        tensors: Vec::new(),
        operators: Vec::new(),
        rng: SplitMix64(0x6c6c_6d00 ^ d.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        jitter: d.jitter.min(90),
    };
    let e = d.elem;
    let z = Sizes {
        act: d.tokens * d.hidden * e,
        wide: d.tokens * d.ffn * e,
        att: d.heads * d.tokens * d.context * e,
        cache: d.context * d.hidden * e,
    };
    let mut x = g.tensor("x0".into(), z.act);
    g.op("embed".into(), &[], &[&x]);
    let mut caches = Vec::new();
    // Per layer, what the backward pass reads.
    let mut saved = Vec::new();
    for l in 0..d.layers {
        let (y, sv) = g.forward_layer(l, x, z);
        if d.kv_cache {
            caches.push(sv[3].clone());
            caches.push(sv[4].clone());
        }
        saved.push(sv);
        x = y;
    }
    let logits = g.tensor("logits".into(), d.tokens * d.hidden * e);
    let mut uses: Vec<&str> = vec![&x];
    uses.extend(caches.iter().map(String::as_str));
    g.op("head".into(), &uses, &[&logits]);
    if d.backward {
        let mut dx = g.tensor("dy".into(), z.act);
        g.op("loss".into(), &[&logits], &[&dx]);
        for (l, sv) in saved.iter().enumerate().rev() {
            dx = g.backward_layer(l, &dx, sv, z);
        }
        g.op("grad_out".into(), &[&dx], &[]);
    }
    let kind = if d.backward { "train" } else { "fwd" };
    model(
        format!("decoder{}_{kind}", d.layers),
        g.tensors,
        g.operators,
    )
}

/// The bytes of a decoder's tensors: an activation, an MLP activation,
/// the attention scores and probabilities, one KV cache.
#[derive(Clone, Copy)]
struct Sizes {
    act: u64,
    wide: u64,
    att: u64,
    cache: u64,
}

/// What a layer's backward pass reads of its forward pass: its input x,
/// n1, q, the K and V caches, p, a, r, n2, u, the gate, the activated
/// gate and m.
type Saved = [String; 13];

impl Graph {
    /// Layer `l` of the forward pass, from its input `x`: its output, and
    /// what its backward pass reads.
    fn forward_layer(&mut self, l: usize, x: String, z: Sizes) -> (String, Saved) {
        let g = self;
        let t = |s: &str| format!("l{l}.{s}");
        let n1 = g.tensor(t("n1"), z.act);
        g.op(t("ln1"), &[&x], &[&n1]);
        let (q, k, v) = (
            g.tensor(t("q"), z.act),
            g.tensor(t("k"), z.act),
            g.tensor(t("v"), z.act),
        );
        g.op(t("qkv"), &[&n1], &[&q, &k, &v]);
        let (kc, vc) = (g.tensor(t("kc"), z.cache), g.tensor(t("vc"), z.cache));
        g.op(t("kv"), &[&k, &v], &[&kc, &vc]);
        let s = g.tensor(t("s"), z.att);
        g.op(t("scores"), &[&q, &kc], &[&s]);
        let p = g.tensor(t("p"), z.att);
        g.op(t("softmax"), &[&s], &[&p]);
        let a = g.tensor(t("a"), z.act);
        g.op(t("pv"), &[&p, &vc], &[&a]);
        let o = g.tensor(t("o"), z.act);
        g.op(t("oproj"), &[&a], &[&o]);
        let r = g.tensor(t("r"), z.act);
        g.op(t("add1"), &[&x, &o], &[&r]);
        let n2 = g.tensor(t("n2"), z.act);
        g.op(t("ln2"), &[&r], &[&n2]);
        let (u, gt) = (g.tensor(t("u"), z.wide), g.tensor(t("g"), z.wide));
        g.op(t("up"), &[&n2], &[&u]);
        g.op(t("gate"), &[&n2], &[&gt]);
        let ga = g.tensor(t("ga"), z.wide);
        g.op(t("act"), &[&gt], &[&ga]);
        let m = g.tensor(t("m"), z.wide);
        g.op(t("mul"), &[&u, &ga], &[&m]);
        let dn = g.tensor(t("d"), z.act);
        g.op(t("down"), &[&m], &[&dn]);
        let y = g.tensor(t("y"), z.act);
        g.op(t("add2"), &[&r, &dn], &[&y]);
        (y, [x, n1, q, kc, vc, p, a, r, n2, u, gt, ga, m])
    }

    /// Layer `l` of the backward pass, from the gradient `dx` of its
    /// output, reading `saved`: the gradient of its input.
    fn backward_layer(&mut self, l: usize, dx: &str, saved: &Saved, z: Sizes) -> String {
        let g = self;
        let [x, n1, q, kc, vc, p, a, r, n2, u, gt, ga, m] = saved.each_ref();
        let t = |s: &str| format!("l{l}.d{s}");
        let dm = g.tensor(t("m"), z.wide);
        g.op(t("down"), &[dx, m], &[&dm]);
        let (du, dga) = (g.tensor(t("u"), z.wide), g.tensor(t("ga"), z.wide));
        g.op(t("mul"), &[&dm, u, ga], &[&du, &dga]);
        let dg = g.tensor(t("g"), z.wide);
        g.op(t("act"), &[&dga, gt], &[&dg]);
        let dn2 = g.tensor(t("n2"), z.act);
        g.op(t("upgate"), &[&du, &dg, n2], &[&dn2]);
        let dr = g.tensor(t("r"), z.act);
        g.op(t("ln2"), &[&dn2, r, dx], &[&dr]);
        let da = g.tensor(t("a"), z.act);
        g.op(t("oproj"), &[&dr, a], &[&da]);
        let (dp, dv) = (g.tensor(t("p"), z.att), g.tensor(t("v"), z.act));
        g.op(t("pv"), &[&da, p, vc], &[&dp, &dv]);
        let ds = g.tensor(t("s"), z.att);
        g.op(t("softmax"), &[&dp, p], &[&ds]);
        let (dq, dk) = (g.tensor(t("q"), z.act), g.tensor(t("k"), z.act));
        g.op(t("scores"), &[&ds, q, kc], &[&dq, &dk]);
        let dn1 = g.tensor(t("n1"), z.act);
        g.op(t("qkv"), &[&dq, &dk, &dv, n1], &[&dn1]);
        let dxp = g.tensor(t("x"), z.act);
        g.op(t("ln1"), &[&dn1, x, &dr], &[&dxp]);
        dxp
    }
}

/// A traced decoder stack of `layers` layers from `seed`: per layer `ops`
/// operators (at least 1), 24 activations of 192 KiB to 3 MiB (multiples of 64 KiB),
/// each defined at a random operator of the layer and living 1 to 6
/// operators, and a residual buffer defined at the layer's first operator
/// and read at the next layer's first. 25 scratch tensors per layer.
pub fn traced(layers: usize, ops: usize, seed: u64) -> Model {
    const KIB64: u64 = 64 * 1024;
    let mut rng = SplitMix64(0x7472_6163_6500 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let per = ops.max(1);
    let ops = layers * per + 1;
    let mut operators: Vec<OperatorDesc> = (0..ops)
        .map(|t| OperatorDesc::new(format!("op{t}"), Vec::new(), Vec::new()))
        .collect();
    let mut tensors = Vec::with_capacity(layers * 25);
    for l in 0..layers {
        let base = l * per;
        let id = format!("l{l}.res");
        tensors.push(TensorDesc::scratch(id.clone(), 3 * 1024 * 1024));
        live_over(&mut operators, &id, base, base + per);
        for j in 0..24 {
            let id = format!("l{l}.a{j}");
            let size = (3 + rng.next_u64() % 46) * KIB64;
            let first = base + rng.below(per);
            let last = (first + rng.below(6)).min(ops - 1);
            tensors.push(TensorDesc::scratch(id.clone(), size));
            live_over(&mut operators, &id, first, last);
        }
    }
    model(format!("traced{layers}x{per}_s{seed}"), tensors, operators)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoders_have_their_shape() {
        for backward in [false, true] {
            let d = Decoder {
                backward,
                ..Decoder::small(3)
            };
            let m = decoder(&d);
            let scratch = m.tensors.iter().filter(|t| t.is_packed_scratch()).count();
            // Plus x0 and the logits, and the loss's gradient.
            let extra = 2 + usize::from(backward);
            assert_eq!(scratch, 3 * d.tensors_per_layer() + extra);
            let life = |id: &str| m.tensors.iter().find(|t| t.id() == id).unwrap();
            let last = m.desc.operators.len() - 1;
            let kc = life("l0.kc").lifetime.clone().unwrap();
            if backward {
                // Saved from the forward pass to the backward one.
                assert!(kc.end_op > m.desc.operators.len() / 2);
                let x0 = life("x0").lifetime.clone().unwrap();
                assert_eq!(x0.end_op, last - 1);
            } else {
                // The cache lives to the head.
                assert_eq!(kc.end_op, last);
            }
        }
        let j = decoder(&Decoder {
            jitter: 20,
            seed: 3,
            ..Decoder::small(2)
        });
        let plain = decoder(&Decoder::small(2));
        assert_ne!(j.desc, plain.desc);
        assert_eq!(
            j.desc,
            decoder(&Decoder {
                jitter: 20,
                seed: 3,
                ..Decoder::small(2)
            })
            .desc
        );
    }

    #[test]
    fn traced_stacks_have_their_shape() {
        let m = traced(10, 16, 1);
        assert_eq!(m.tensors.len(), 250);
        assert_eq!(m.desc.operators.len(), 161);
        assert_eq!(m.desc, traced(10, 16, 1).desc);
        assert_ne!(m.desc, traced(10, 16, 2).desc);
        for t in &m.tensors {
            let l = t.lifetime.as_ref().unwrap();
            if t.id().ends_with(".res") {
                assert_eq!(l.end_op - l.start_op, 16);
            } else {
                assert!(l.end_op - l.start_op < 6);
                assert!((192 * 1024..=3 * 1024 * 1024).contains(&t.size));
            }
        }
    }
}
