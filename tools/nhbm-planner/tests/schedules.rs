//! Training steps and pipeline schedules ([`nhbm_planner::schedules`]),
//! whose every cut of time is crossed by most of the bytes live at it, at
//! 1,000 and 10,000 tensors: the default planner (with a 2 s limit, to
//! keep the tests short) against the liveness lower bound and against best
//! fit as an allocator runs it. Within a time limit, so in release builds
//! only (`host-tests.sh` runs this crate's tests in one).
//!
//! Training steps pack at the bound. The pipeline schedules have no
//! packing known at it: omnimalloc 1.0.0's SuperMalloc (10 s, one thread)
//! packed the same two in 1.0995 and 1.1067 of it, its best fit in 1.3633
//! and 1.4365, where the planner is at 1.063 and 1.101.

mod common;

use nhbm_planner::*;

/// Plans `m` by default within 2 s; checks the plan is a packing no higher than
/// best fit's and at most `within` times the lower bound.
fn check(m: &Model, within: f64) {
    let opts = PlannerOptions {
        time_budget_ms: 2000,
        ..m.desc.planner_options
    };
    let mp = plan(m, m.desc.planner, &opts).unwrap();
    let (bufs, offsets) = planner::scratch_packing(m, &mp, MemoryType::Hbm(0));
    assert!(window::is_packing(&bufs, &offsets), "{}", m.name());
    let peak = mp.scratch_high_water_mark();
    let ratio = peak as f64 / m.liveness_lower_bound() as f64;
    let best_fit = common::online_best_fit(&bufs);
    println!(
        "{}: {} tensors, {ratio:.4} of the bound, best fit {:.4}",
        m.name(),
        bufs.len(),
        best_fit as f64 / m.liveness_lower_bound() as f64
    );
    assert!(
        peak <= best_fit,
        "{}: {peak} over best fit's {best_fit}",
        m.name()
    );
    assert!(ratio <= within, "{}: {ratio:.4}", m.name());
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: release builds only")]
fn training_steps_near_the_bound() {
    check(&schedules::training(1000, 1), 1.001);
    check(&schedules::training(10_000, 1), 1.001);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: release builds only")]
fn pipeline_schedules_near_the_bound() {
    check(&schedules::pipeline(1000, 1), 1.08);
    check(&schedules::pipeline(10_000, 1), 1.12);
}
