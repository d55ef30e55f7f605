//! MiniMalloc's challenging set (`tests/minimalloc-challenging`, the
//! instances of its paper): exact, with the default node budget (the same
//! result on every machine), against what MiniMalloc packs each instance
//! in.
//!
//! MiniMalloc, run on this project's host (shared and loaded, so its times
//! vary by a factor of two and more), packs C, E, G, H, I and K at their
//! liveness lower bound in 10 s or so (E and I in 8 s when the host is
//! quiet, 13 and 17 s when it is not), and A, B and F too given a
//! minute; it found nothing at the bound of D and J in a minute (its
//! paper packs every one in 1,048,576 bytes). exact reaches and proves
//! the bound on all nine, and stays under 1,048,576 bytes on D and J.
//! On E, I and K that takes the files' own times: MiniMalloc's preorders
//! rank buffers by lifetime and area in them, and so do exact's
//! ([`OperatorDesc::duration`], which [`minimalloc::read`] sets); with
//! lifetimes counted in operators, neither finds a packing at the bound
//! of E, I or K (MiniMalloc in a minute each, exact in 100,000 nodes).
//! The test holds exact to that: a change that loses any of it fails.
//!
//! [`OperatorDesc::duration`]: nhbm_planner::desc::OperatorDesc::duration

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
        Reach::Bound,
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
        Reach::Bound,
    ),
    (
        "J",
        include_str!("minimalloc-challenging/J.1048576.csv"),
        Reach::Capacity,
    ),
    (
        "K",
        include_str!("minimalloc-challenging/K.1048576.csv"),
        Reach::Bound,
    ),
];

/// Some 30 s in a release build (D and J search to the end of the
/// budget): release builds only (`host-tests.sh` runs it in one). The
/// time limit is lifted so that the node budget alone decides.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "half a minute of search: release builds only"
)]
fn exact_on_minimallocs_challenging_set() {
    let opts = PlannerOptions {
        time_budget_ms: 600_000,
        ..Default::default()
    };
    for (name, csv, reach) in &SET {
        let m = minimalloc::read(name, csv).unwrap();
        let (mp, out) = plan_with_outcome(&m, MemoryPlannerType::Exact, &opts).unwrap();
        let (bufs, offsets) = planner::scratch_packing(&m, &mp, MemoryType::Hbm(0));
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
        }
    }
}
