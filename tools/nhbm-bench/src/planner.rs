//! Figure 6: the planners' scratch high-water mark against the liveness
//! lower bound, on the example models and on generated graphs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nhbm_planner::desc::{Io, ModelDesc, OperatorDesc, Platform, TensorDesc};
use nhbm_planner::rng::SplitMix64;
use nhbm_planner::{plan, MemoryPlannerType, Model, PlannerError, PlannerOptions};

use crate::report::{sanitize, Figure, Op, Raw};

pub const PLANNERS: [MemoryPlannerType; 4] = [
    MemoryPlannerType::Greedy,
    MemoryPlannerType::GreedyBySize,
    MemoryPlannerType::HillClimb,
    MemoryPlannerType::Exact,
];

/// Generated graphs in the aggregate figures.
pub const GENERATED: u64 = 20;
/// hill_climb's target on the example models and the hard instances.
pub const HILL_CLIMB_TARGET: f64 = 1.05;
/// Sizes (buffers) of the hard instances, one per size, seeded by it.
pub const HARD_SIZES: [usize; 6] = [50, 100, 200, 300, 400, 500];
/// The exact planner's time budget on the generated graphs (the hard
/// instances get the default).
pub const GENERATED_EXACT_BUDGET_MS: u64 = 1_000;

/// High-water marks of one model, in [`PLANNERS`] order, and its bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub name: String,
    pub hwm: [u64; 4],
    pub lower_bound: u64,
}

impl Outcome {
    /// hwm / lower bound of planner `k` (1.0 for a model without scratch).
    pub fn ratio(&self, k: usize) -> f64 {
        if self.lower_bound == 0 {
            return 1.0;
        }
        self.hwm[k] as f64 / self.lower_bound as f64
    }
    /// greedy_by_size / greedy.
    pub fn gbs_vs_greedy(&self) -> f64 {
        if self.hwm[0] == 0 {
            return 1.0;
        }
        self.hwm[1] as f64 / self.hwm[0] as f64
    }
}

/// Plans `model` with every planner and its own planner options.
pub fn evaluate(name: &str, model: &Model, opts: &PlannerOptions) -> Result<Outcome, PlannerError> {
    let mut hwm = [0u64; 4];
    for (k, kind) in PLANNERS.iter().enumerate() {
        hwm[k] = plan(model, *kind, opts)?.scratch_high_water_mark();
    }
    Ok(Outcome {
        name: name.to_string(),
        hwm,
        lower_bound: model.liveness_lower_bound(),
    })
}

/// The `*.json` files of `dir` that are model descriptions (they have
/// `tensors` and `operators`; plans in JSON form have `records`), sorted.
pub fn model_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let path = e?.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if v.get("tensors").is_some() && v.get("operators").is_some() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn ratio_raws(o: &Outcome, k: usize) -> (Raw, Raw) {
    (
        Raw::new("scratch hwm bytes", o.hwm[k].to_string()),
        Raw::new("liveness lower bound bytes", o.lower_bound.to_string()),
    )
}

/// The four figures of one example model: greedy (never below the bound),
/// greedy_by_size (never above greedy), hill_climb (within 5% of the bound,
/// never above greedy_by_size), exact (never above hill_climb or
/// greedy_by_size).
pub fn model_figures(o: &Outcome) -> Vec<Figure> {
    let base = sanitize(&o.name);
    let mut out = Vec::new();
    for (k, kind) in PLANNERS.iter().enumerate() {
        let (a, b) = ratio_raws(o, k);
        let name = format!("planner_{base}_{kind}");
        let f = match kind {
            MemoryPlannerType::Greedy => Figure::new(name, o.ratio(k), a, b, Op::AtLeast, 1.0)
                .with_verdict(o.hwm[k] >= o.lower_bound),
            MemoryPlannerType::GreedyBySize => {
                Figure::new(name, o.ratio(k), a, b, Op::AtMost, o.ratio(0))
                    .with_verdict(o.hwm[1] <= o.hwm[0])
            }
            MemoryPlannerType::HillClimb => {
                Figure::new(name, o.ratio(k), a, b, Op::AtMost, HILL_CLIMB_TARGET)
                    .with_verdict(o.hwm[2] <= o.hwm[1] && o.ratio(2) <= HILL_CLIMB_TARGET)
            }
            MemoryPlannerType::Exact => Figure::new(name, o.ratio(k), a, b, Op::AtMost, o.ratio(2))
                .with_verdict(o.hwm[3] <= o.hwm[1].min(o.hwm[2])),
        };
        out.push(f);
    }
    out
}

/// The aggregate figures over generated graphs: per planner, the worst
/// (largest) hwm / lower bound.
pub fn generated_figures(outcomes: &[Outcome]) -> Vec<Figure> {
    let worst = |k: usize| {
        outcomes
            .iter()
            .max_by(|a, b| a.ratio(k).total_cmp(&b.ratio(k)))
            .expect("at least one graph")
    };
    let n = outcomes.len();
    let mut out = Vec::new();
    for (k, kind) in PLANNERS.iter().enumerate() {
        let w = worst(k);
        let a = Raw::new(
            format!("worst of {n} graphs [{}] scratch hwm bytes", w.name),
            w.hwm[k].to_string(),
        );
        let b = Raw::new("liveness lower bound bytes", w.lower_bound.to_string());
        let name = format!("planner_generated_{kind}");
        out.push(match kind {
            MemoryPlannerType::Greedy => Figure::new(name, w.ratio(k), a, b, Op::AtLeast, 1.0)
                .with_verdict(outcomes.iter().all(|o| o.hwm[0] >= o.lower_bound)),
            MemoryPlannerType::GreedyBySize => {
                let g = worst(0).ratio(0);
                Figure::new(name, w.ratio(k), a, b, Op::AtMost, g).with_verdict(w.ratio(k) <= g)
            }
            MemoryPlannerType::HillClimb => {
                Figure::new(name, w.ratio(k), a, b, Op::AtMost, HILL_CLIMB_TARGET).with_verdict(
                    w.ratio(k) <= HILL_CLIMB_TARGET
                        && outcomes.iter().all(|o| o.hwm[2] <= o.hwm[1]),
                )
            }
            MemoryPlannerType::Exact => {
                let h = worst(2).ratio(2);
                Figure::new(name, w.ratio(k), a, b, Op::AtMost, h)
                    .with_verdict(outcomes.iter().all(|o| o.hwm[3] <= o.hwm[1].min(o.hwm[2])))
            }
        });
    }
    out
}

/// The figures over the hard instances: per planner the worst ratio to the
/// bound (which is the optimum). Targets: exact 1.000, hill_climb <= 1.05,
/// greedy_by_size never above greedy's worst; hill_climb and exact never
/// above greedy_by_size on any instance.
pub fn hard_figures(outcomes: &[Outcome]) -> Vec<Figure> {
    let worst = |k: usize| {
        outcomes
            .iter()
            .max_by(|a, b| a.ratio(k).total_cmp(&b.ratio(k)))
            .expect("at least one instance")
    };
    let never_above_gbs = |k: usize| outcomes.iter().all(|o| o.hwm[k] <= o.hwm[1]);
    let n = outcomes.len();
    PLANNERS
        .iter()
        .enumerate()
        .map(|(k, kind)| {
            let w = worst(k);
            let a = Raw::new(
                format!("worst of {n} instances [{}] scratch hwm bytes", w.name),
                w.hwm[k].to_string(),
            );
            let b = Raw::new("optimum bytes", w.lower_bound.to_string());
            let name = format!("planner_hard_{kind}");
            let r = w.ratio(k);
            match kind {
                MemoryPlannerType::Greedy => {
                    Figure::new(name, r, a, b, Op::AtLeast, 1.0).with_verdict(r >= 1.0)
                }
                MemoryPlannerType::GreedyBySize => {
                    let g = worst(0).ratio(0);
                    Figure::new(name, r, a, b, Op::AtMost, g).with_verdict(r <= g)
                }
                MemoryPlannerType::HillClimb => {
                    Figure::new(name, r, a, b, Op::AtMost, HILL_CLIMB_TARGET)
                        .with_verdict(r <= HILL_CLIMB_TARGET && never_above_gbs(k))
                }
                MemoryPlannerType::Exact => Figure::new(name, r, a, b, Op::AtMost, 1.0)
                    .with_verdict(
                        outcomes.iter().all(|o| o.hwm[3] == o.lower_bound) && never_above_gbs(k),
                    ),
            }
        })
        .collect()
}

/// Hard instance of `n` buffers (seeded by `n`), named for the figures.
pub fn hard(n: usize) -> (String, Model) {
    let (m, _) = nhbm_planner::hard::instance(n, n as u64);
    (format!("hard{n}"), m)
}

/// greedy_by_size against greedy on every model: the worst ratio.
pub fn gbs_vs_greedy_figure(outcomes: &[Outcome]) -> Figure {
    let w = outcomes
        .iter()
        .max_by(|a, b| a.gbs_vs_greedy().total_cmp(&b.gbs_vs_greedy()))
        .expect("at least one model");
    let worse = outcomes.iter().filter(|o| o.hwm[1] > o.hwm[0]).count();
    Figure::new(
        "planner_gbs_vs_greedy",
        w.gbs_vs_greedy(),
        Raw::new(
            format!(
                "worst of {} models [{}, {worse} worse than greedy] greedy_by_size hwm bytes",
                outcomes.len(),
                w.name
            ),
            w.hwm[1].to_string(),
        ),
        Raw::new("greedy hwm bytes", w.hwm[0].to_string()),
        Op::AtMost,
        1.0,
    )
    .with_verdict(worse == 0)
}

/// Planner options of the generated graphs: the defaults with
/// [`GENERATED_EXACT_BUDGET_MS`].
pub fn generated_options() -> PlannerOptions {
    PlannerOptions {
        time_budget_ms: GENERATED_EXACT_BUDGET_MS,
        ..PlannerOptions::default()
    }
}

/// A tensor size: a multiple of 64 bytes, spread over 1 KiB .. 8 MiB.
fn size(rng: &mut SplitMix64) -> u64 {
    let exp = 10 + rng.below(14) as u32; // 1 KiB .. 8 MiB
    let base = 1u64 << exp;
    (base + rng.next_u64() % base) / 64 * 64
}

/// Generated graph `seed`, one of three shapes (by `seed % 3`):
/// - a chain with residual connections (a skip spans 2..6 operators);
/// - a branchy DAG whose operators read 1..3 of the last few tensors;
/// - an encoder/decoder: sizes shrink then grow, with long skips between
///   mirrored stages (U-Net).
///
/// 25..73 operators, one graph input and one output, every tensor a
/// scratch tensor of 1 KiB .. 16 MiB.
pub fn generated(seed: u64) -> (String, Model) {
    let mut rng = SplitMix64(0x6e68_626d_0000_0000 ^ seed.wrapping_mul(0x9e37_79b9));
    let shape = seed % 3;
    let ops_n = 24 + rng.below(49);
    let mut tensors = vec![TensorDesc {
        io: Some(Io::Input),
        ..TensorDesc::scratch("input".into(), size(&mut rng))
    }];
    let mut ops: Vec<OperatorDesc> = Vec::new();
    let mut defined: Vec<String> = vec!["input".into()];
    let next = |tensors: &mut Vec<TensorDesc>, bytes: u64| {
        let id = format!("t{}", tensors.len());
        tensors.push(TensorDesc::scratch(id.clone(), bytes));
        id
    };
    match shape {
        0 => {
            for i in 0..ops_n {
                let mut uses = vec![defined.last().unwrap().clone()];
                if i >= 2 && rng.below(3) == 0 {
                    let back = 2 + rng.below(5).min(defined.len() - 1);
                    let back = back.min(defined.len());
                    uses.push(defined[defined.len() - back].clone());
                }
                let id = next(&mut tensors, size(&mut rng));
                defined.push(id.clone());
                ops.push(OperatorDesc {
                    name: format!("op{i}"),
                    uses,
                    defines: vec![id],
                });
            }
        }
        1 => {
            for i in 0..ops_n {
                let window = defined.len().min(6);
                let mut uses = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    let t = defined[defined.len() - 1 - rng.below(window)].clone();
                    if !uses.contains(&t) {
                        uses.push(t);
                    }
                }
                let mut defines = Vec::new();
                for _ in 0..1 + rng.below(2) {
                    let id = next(&mut tensors, size(&mut rng));
                    defined.push(id.clone());
                    defines.push(id);
                }
                ops.push(OperatorDesc {
                    name: format!("op{i}"),
                    uses,
                    defines,
                });
            }
        }
        _ => {
            let depth = ops_n / 2;
            let top = 1u64 << (20 + rng.below(4));
            let mut skips = Vec::new();
            for i in 0..depth {
                let bytes = (top >> i.min(10)).max(4096) / 64 * 64;
                let id = next(&mut tensors, bytes);
                ops.push(OperatorDesc {
                    name: format!("down{i}"),
                    uses: vec![defined.last().unwrap().clone()],
                    defines: vec![id.clone()],
                });
                defined.push(id.clone());
                skips.push(id);
            }
            for i in (0..depth).rev() {
                let bytes = (top >> i.min(10)).max(4096) / 64 * 64;
                let id = next(&mut tensors, bytes);
                ops.push(OperatorDesc {
                    name: format!("up{i}"),
                    uses: vec![defined.last().unwrap().clone(), skips[i].clone()],
                    defines: vec![id.clone()],
                });
                defined.push(id);
            }
        }
    }
    tensors.push(TensorDesc {
        io: Some(Io::Output),
        ..TensorDesc::scratch("output".into(), size(&mut rng))
    });
    ops.push(OperatorDesc {
        name: "head".into(),
        uses: vec![defined.last().unwrap().clone()],
        defines: vec!["output".into()],
    });
    let name = format!(
        "gen{seed:02}_{}",
        ["residual", "branchy", "unet"][shape as usize]
    );
    let desc = ModelDesc {
        name: name.clone(),
        description: None,
        memories: Vec::new(),
        platform: Platform::default(),
        planner: MemoryPlannerType::Greedy,
        planner_options: PlannerOptions::default(),
        tensors,
        operators: ops,
    };
    let model = Model::new(desc, PathBuf::from(".")).expect("generated graphs are well formed");
    (name, model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm_planner::planner::overlapping_pairs;

    #[test]
    fn generated_graphs_are_deterministic_and_plannable() {
        for seed in 0..GENERATED {
            let (name, m) = generated(seed);
            let (name2, m2) = generated(seed);
            assert_eq!(name, name2);
            assert_eq!(m.desc, m2.desc);
            let ops = m.desc.operators.len();
            assert!((25..=73).contains(&ops), "{name}: {ops} operators");
            let o = evaluate(&name, &m, &generated_options()).unwrap();
            assert!(o.lower_bound > 0);
            for k in 0..4 {
                assert!(o.hwm[k] >= o.lower_bound, "{name} {k}");
            }
            assert!(o.hwm[3] <= o.hwm[2], "exact never worse than hill_climb");
            assert!(
                o.hwm[2] <= o.hwm[1],
                "hill_climb never worse than greedy_by_size"
            );
            let mp = plan(&m, MemoryPlannerType::HillClimb, &PlannerOptions::default()).unwrap();
            assert!(overlapping_pairs(&m, &mp).is_empty(), "{name}");
        }
    }

    fn examples() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    #[test]
    fn examples_are_found_and_judged() {
        let files = model_files(&examples()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_stem().unwrap().to_str().unwrap().to_string())
            .collect();
        assert!(names.contains(&"small_cnn".to_string()), "{names:?}");
        assert!(names.contains(&"transformer_block".to_string()));
        for (f, name) in files.iter().zip(&names) {
            let m = Model::load(f).unwrap();
            let o = evaluate(name, &m, &m.desc.planner_options).unwrap();
            let figs = model_figures(&o);
            assert_eq!(figs.len(), 4);
            assert!(figs[0]
                .line()
                .starts_with(&format!("bench: planner_{name}_greedy: ")));
            assert!(figs[0].pass(), "{}", figs[0].line());
        }
    }

    #[test]
    fn plans_in_json_form_are_not_models() {
        let dir = std::env::temp_dir().join(format!("nhbm-bench-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("p.json"), r#"{"records": []}"#).unwrap();
        fs::write(
            dir.join("m.json"),
            r#"{"name": "m", "tensors": [], "operators": []}"#,
        )
        .unwrap();
        fs::write(dir.join("x.bin"), b"{}").unwrap();
        let files = model_files(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(files, vec![dir.join("m.json")]);
    }

    #[test]
    fn aggregates_take_the_worst_graph() {
        let a = Outcome {
            name: "a".into(),
            hwm: [120, 110, 100, 100],
            lower_bound: 100,
        };
        let b = Outcome {
            name: "b".into(),
            hwm: [100, 130, 104, 101],
            lower_bound: 100,
        };
        let g = generated_figures(&[a.clone(), b.clone()]);
        assert!(g[0].line().contains("[a]"));
        assert!((g[1].value - 1.3).abs() < 1e-9);
        assert!(!g[1].pass(), "1.3 > worst greedy 1.2");
        assert!(g[2].pass());
        assert!(g[3].pass() && g[3].line().contains("[b]"));
        let h = hard_figures(&[a.clone(), b.clone()]);
        assert!(!h[3].pass(), "exact missed the optimum of b");
        assert!(
            h[2].pass(),
            "hill_climb within 5% and never above greedy_by_size"
        );
        let v = gbs_vs_greedy_figure(&[a, b]);
        assert!((v.value - 1.3).abs() < 1e-9 && !v.pass());
        assert!(v.line().contains("1 worse than greedy"));
    }
}
