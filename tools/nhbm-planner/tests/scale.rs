//! LLM-sized graphs ([`nhbm_planner::llm`]): memories of more than
//! `window::DIRECT_MAX` scratch tensors are planned in windows; the plans
//! must be packings, near the liveness lower bound on decoder stacks, and
//! made within the time limit.

use std::time::{Duration, Instant};

use nhbm_planner::llm::{self, Decoder};
use nhbm_planner::*;

/// Plans `m` with `kind` and `opts`; checks the plan is a packing and
/// returns its scratch arena over the liveness lower bound.
fn ratio(m: &Model, kind: MemoryPlannerType, opts: &PlannerOptions) -> f64 {
    let mp = plan(m, kind, opts).unwrap();
    let (bufs, offsets) = planner::scratch_packing(m, &mp, MemoryType::Hbm(0));
    assert!(window::is_packing(&bufs, &offsets), "{}", m.name());
    mp.scratch_high_water_mark() as f64 / m.liveness_lower_bound() as f64
}

#[test]
fn decoder_stacks_plan_in_windows_near_the_bound() {
    let opts = PlannerOptions::default();
    let train = Decoder {
        backward: true,
        jitter: 20,
        seed: 1,
        ..Decoder::small(100)
    };
    let models = [
        llm::traced(200, 16, 1),
        llm::traced(200, 8, 2),
        llm::decoder(&Decoder::small(200)),
        llm::decoder(&train),
    ];
    for m in &models {
        assert!(m.tensors.len() > window::DIRECT_MAX, "{}", m.name());
        let r = ratio(m, MemoryPlannerType::Exact, &opts);
        assert!(r <= 1.01, "{}: {r}", m.name());
        let r = ratio(m, MemoryPlannerType::HillClimb, &opts);
        assert!(r <= 1.01, "{}: hill_climb {r}", m.name());
    }
}

#[test]
fn a_limit_already_past_still_gives_a_packing() {
    let m = llm::traced(150, 4, 3);
    let opts = PlannerOptions {
        time_budget_ms: 0,
        ..Default::default()
    };
    for kind in [MemoryPlannerType::Exact, MemoryPlannerType::HillClimb] {
        let r = ratio(&m, kind, &opts);
        assert!(r < 1.5, "{kind}: {r}");
    }
}

/// The one timed test: a 100,000-tensor model (the hard generator's, on
/// which the search never ends by itself) with a 2 s limit must be planned
/// in well under twice that. Timed, so in release builds only
/// (`host-tests.sh` runs this crate's tests in one).
#[test]
#[cfg_attr(debug_assertions, ignore = "timed: release builds only")]
fn a_100k_tensor_model_is_planned_within_a_2s_limit() {
    let (m, _) = hard::instance(100_000, 1);
    let opts = PlannerOptions {
        time_budget_ms: 2000,
        ..Default::default()
    };
    let t = Instant::now();
    let mp = plan(&m, m.desc.planner, &opts);
    let took = t.elapsed();
    let mp = mp.unwrap();
    assert!(took < Duration::from_secs(4), "{took:?}");
    let (bufs, offsets) = planner::scratch_packing(&m, &mp, MemoryType::Hbm(0));
    assert!(window::is_packing(&bufs, &offsets));
}
