//! The planner on compilers' traces (`nhbm-planner/tests/idealloc-traces`:
//! IOPDDL's XLA graphs and MindSpore SOMAS's), beside omnimalloc's best fit
//! and SuperMalloc: `planner_traces_lb`, `planner_vs_bestfit_traces`,
//! `planner_vs_supermalloc_traces`.
//!
//! omnimalloc is a peer, not part of the tree: `bench-planner.sh` installs
//! it in a venv and runs `tools/testing/omnimalloc-peaks.py` on the same
//! files, whose JSON (per trace: `lower_bound`, `best_fit`, `supermalloc`
//! peaks in bytes) this reads.

use std::path::Path;

use nhbm_planner::{minimalloc, plan_model, Model, Target};
use serde_json::Value;

use crate::report::{Figure, Op, Raw};

/// The traces: name (the file's stem) and CSV.
const TRACES: [(&str, &str); 5] = [
    (
        "G_1",
        include_str!("../../nhbm-planner/tests/idealloc-traces/G_1.csv"),
    ),
    (
        "S_1",
        include_str!("../../nhbm-planner/tests/idealloc-traces/S_1.csv"),
    ),
    (
        "Y_1",
        include_str!("../../nhbm-planner/tests/idealloc-traces/Y_1.csv"),
    ),
    (
        "pangu_2.6B",
        include_str!("../../nhbm-planner/tests/idealloc-traces/pangu_2.6B.csv"),
    ),
    (
        "resnet50",
        include_str!("../../nhbm-planner/tests/idealloc-traces/resnet50.csv"),
    ),
];

/// The most bytes a Neuron region holds is below Y_1's 497 GB: it is
/// planned for a device of one channel of one 1 TiB region.
fn target_for(name: &str, m: Model) -> Result<Model, String> {
    if name != "Y_1" {
        return Ok(m);
    }
    let t = Target {
        name: "1 TiB".into(),
        pools: vec![vec![1 << 40]],
        min_alloc: 4096,
    };
    m.for_target(t).map_err(|e| e.0)
}

/// One trace planned by default: name, peak and lower bound in bytes.
pub struct Planned {
    name: &'static str,
    peak: u64,
    lower_bound: u64,
}

/// Every trace planned by the default planner with its default options.
pub fn plan_traces() -> Result<Vec<Planned>, String> {
    let mut out = Vec::new();
    for (name, csv) in TRACES {
        let m = target_for(name, minimalloc::read(name, csv)?)?;
        let mp = plan_model(&m).map_err(|e| format!("{name}: {e}"))?;
        out.push(Planned {
            name,
            peak: mp.scratch_high_water_mark(),
            lower_bound: m.liveness_lower_bound(),
        });
    }
    Ok(out)
}

/// The worst ratio of `plans`' peaks to `of` of each: its value, the
/// trace, and the two peaks.
fn worst(plans: &[Planned], of: impl Fn(&Planned) -> Option<u64>) -> Option<(f64, &str, u64, u64)> {
    plans
        .iter()
        .filter_map(|p| {
            let b = of(p)?;
            Some((p.peak as f64 / b.max(1) as f64, p.name, p.peak, b))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// `planner_traces_lb`: the worst peak over the liveness lower bound,
/// target <= 1.01.
pub fn bound_figure(plans: &[Planned]) -> Figure {
    let (value, name, peak, lb) = worst(plans, |p| Some(p.lower_bound)).unwrap_or_default();
    Figure::new(
        "planner_traces_lb",
        value,
        Raw::new(
            format!("worst of {} traces [{name}] peak bytes", plans.len()),
            peak.to_string(),
        ),
        Raw::new("lower bound bytes", lb.to_string()),
        Op::AtMost,
        1.01,
    )
}

/// `planner_vs_bestfit_traces` and `planner_vs_supermalloc_traces`: the
/// worst of our peak over omnimalloc's, target <= 1.000 (judged on the
/// bytes), from `peers` (the JSON of `omnimalloc-peaks.py`).
pub fn peer_figures(plans: &[Planned], peers: &Value) -> Vec<Figure> {
    let figure = |name: &str, key: &str, who: &str| {
        let of = |p: &Planned| peers.get(p.name)?.get(key)?.as_u64();
        let judged = plans.iter().filter(|p| of(p).is_some()).count();
        let (value, trace, peak, theirs) = worst(plans, of).unwrap_or_default();
        Figure::new(
            name,
            value,
            Raw::new(
                format!("worst of {judged} traces [{trace}] planner peak bytes"),
                peak.to_string(),
            ),
            Raw::new(format!("{who} peak bytes"), theirs.to_string()),
            Op::AtMost,
            1.0,
        )
        .with_verdict(judged == plans.len() && peak <= theirs)
    };
    vec![
        figure(
            "planner_vs_bestfit_traces",
            "best_fit",
            "omnimalloc best fit",
        ),
        figure(
            "planner_vs_supermalloc_traces",
            "supermalloc",
            "omnimalloc SuperMalloc",
        ),
    ]
}

/// The JSON file `path` of omnimalloc's peaks.
pub fn read_peers(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(name: &'static str, peak: u64, lower_bound: u64) -> Planned {
        Planned {
            name,
            peak,
            lower_bound,
        }
    }

    #[test]
    fn the_worst_trace_decides_and_every_one_must_be_judged() {
        let plans = [planned("G_1", 100, 100), planned("S_1", 103, 100)];
        let lb = bound_figure(&plans);
        assert!((lb.value - 1.03).abs() < 1e-9 && !lb.pass());
        let peers = serde_json::json!({
            "G_1": {"best_fit": 101, "supermalloc": 100},
            "S_1": {"best_fit": 110, "supermalloc": 102},
        });
        let [bf, sm] = <[Figure; 2]>::try_from(peer_figures(&plans, &peers)).unwrap();
        assert!(bf.pass(), "{}", bf.line());
        assert!(!sm.pass() && sm.line().contains("S_1"), "{}", sm.line());
        // A trace omnimalloc has no figure for fails the comparison.
        let partial = serde_json::json!({"G_1": {"best_fit": 101, "supermalloc": 100}});
        assert!(peer_figures(&plans, &partial).iter().all(|f| !f.pass()));
    }
}
