//! MiniMalloc's challenging set (`tests/minimalloc-challenging`, the
//! instances of its paper): exact, with a node budget (the same result on
//! every machine), against what MiniMalloc packs each instance in.
//!
//! MiniMalloc (10 s an instance, run on this project's host, which is
//! shared and loaded) packs C, E, G, H, I and K at their liveness lower
//! bound, and found nothing at the bound of A, B, D, F and J in its time
//! (B in 0.3 s with the times counted in sections; its paper packs every
//! one in 1,048,576 bytes). exact proves the bound on A, B, C, F, G and H
//! and stays under 1,048,576 bytes on D and J; on E, I and K it stays
//! where hill_climb left it, 3.6%, 4.8% and 6.0% above the bound
//! MiniMalloc reaches: its search at the bound finds no packing within any
//! budget tried (480,000 nodes).
//! The test holds exact to that: a change that loses any of it fails.

use nhbm_planner::exact::Buffer;
use nhbm_planner::*;

/// The capacity MiniMalloc is given for every instance of the set.
const CAPACITY: u64 = 1_048_576;

/// What exact must reach on an instance.
enum Reach {
    /// The liveness lower bound, proven optimal.
    Bound,
    /// The capacity MiniMalloc's paper packs it in (MiniMalloc finds
    /// nothing at the bound).
    Capacity,
    /// Short of MiniMalloc, which reaches the bound: at most this many
    /// bytes over it (exact's peak now).
    Short(u64),
}

const SET: [(&str, &str, Reach); 11] = [
    (
        "A",
        include_str!("minimalloc-challenging/A.1048576.csv"),
        Reach::Bound,
    ),
    (
        "B",
        include_str!("minimalloc-challenging/B.1048576.csv"),
        Reach::Bound,
    ),
    (
        "C",
        include_str!("minimalloc-challenging/C.1048576.csv"),
        Reach::Bound,
    ),
    (
        "D",
        include_str!("minimalloc-challenging/D.1048576.csv"),
        Reach::Capacity,
    ),
    (
        "E",
        include_str!("minimalloc-challenging/E.1048576.csv"),
        Reach::Short(37_888),
    ),
    (
        "F",
        include_str!("minimalloc-challenging/F.1048576.csv"),
        Reach::Bound,
    ),
    (
        "G",
        include_str!("minimalloc-challenging/G.1048576.csv"),
        Reach::Bound,
    ),
    (
        "H",
        include_str!("minimalloc-challenging/H.1048576.csv"),
        Reach::Bound,
    ),
    (
        "I",
        include_str!("minimalloc-challenging/I.1048576.csv"),
        Reach::Short(50_176),
    ),
    (
        "J",
        include_str!("minimalloc-challenging/J.1048576.csv"),
        Reach::Capacity,
    ),
    (
        "K",
        include_str!("minimalloc-challenging/K.1048576.csv"),
        Reach::Short(62_464),
    ),
];

/// The scratch tensors of `m` at their offsets in `mp`, as buffers.
fn placed(m: &Model, mp: &MemoryPlan) -> (Vec<Buffer>, Vec<u64>) {
    m.tensors
        .iter()
        .map(|t| {
            let l = t.lifetime.as_ref().unwrap();
            let b = Buffer {
                first: l.start_op,
                last: l.end_op,
                size: t.size,
                align: t.alignment,
            };
            (b, mp.tensor_allocs[t.id()].offset)
        })
        .unzip()
}

/// About a minute in a release build: release builds only
/// (`host-tests.sh` runs it in one).
#[test]
#[cfg_attr(debug_assertions, ignore = "a minute of search: release builds only")]
fn exact_on_minimallocs_challenging_set() {
    let opts = PlannerOptions {
        node_budget: 2_000,
        time_budget_ms: 600_000,
        ..Default::default()
    };
    for (name, csv, reach) in &SET {
        let m = minimalloc::read(name, csv).unwrap();
        let (mp, out) = plan_with_outcome(&m, MemoryPlannerType::Exact, &opts).unwrap();
        let (bufs, offsets) = placed(&m, &mp);
        assert!(window::is_packing(&bufs, &offsets), "{name}");
        let (peak, bound) = (out[0].high_water, out[0].lower_bound);
        assert_eq!(peak, mp.scratch_high_water_mark(), "{name}");
        assert!(out[0].stopped != Some(Stop::TimeLimit), "{name}");
        match reach {
            Reach::Bound => assert!(
                peak == bound && out[0].optimal,
                "{name}: {peak} over {bound}"
            ),
            Reach::Capacity => assert!(peak <= CAPACITY, "{name}: {peak}"),
            Reach::Short(over) => assert!(peak <= bound + over, "{name}: {peak} over {bound}"),
        }
    }
}
