//! LLM-sized graphs ([`nhbm_planner::llm`]): memories of more than
//! `window::DIRECT_MAX` scratch tensors are planned in windows; the plans
//! must be packings, near the liveness lower bound on decoder stacks, and
//! made within the time limit; at 10,000 tensors of any shape the default
//! planner ends by itself, its plan the same whatever the limit.

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

/// 10,000 tensors of each shape (the hard generator's guillotine pieces,
/// an interleaved pipeline schedule, a traced decoder stack), none of
/// which the planner packs at the bound: the default planner's work is
/// counted, not timed, so it ends by itself (on this project's host
/// in 0.5-0.6 s, the hard instance; the target is 1 s), long before
/// the default 10 s limit, and makes the same plan under a limit of 60 s,
/// as it does on a busy machine. Timed, so in release builds only.
#[test]
#[cfg_attr(debug_assertions, ignore = "timed: release builds only")]
fn ten_thousand_tensors_of_any_shape_plan_the_same_whatever_the_limit() {
    let models = [
        hard::instance(10_000, 1).0,
        schedules::pipeline(10_000, 1),
        llm::traced(400, 4, 1),
    ];
    for m in &models {
        let mut packings = Vec::new();
        for limit in [10_000, 60_000] {
            let opts = PlannerOptions {
                time_budget_ms: limit,
                ..Default::default()
            };
            let t = Instant::now();
            let mp = plan(m, MemoryPlannerType::Exact, &opts).unwrap();
            let took = t.elapsed();
            println!("{}: {took:?} under a {limit} ms limit", m.name());
            // Five times the time measured here: still far from the limit.
            assert!(took < Duration::from_secs(8), "{}: {took:?}", m.name());
            packings.push(planner::scratch_packing(m, &mp, MemoryType::Hbm(0)));
        }
        assert!(packings[0] == packings[1], "{}", m.name());
    }
}
