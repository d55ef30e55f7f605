// SPDX-License-Identifier: GPL-2.0-only

//! In-kernel benchmarks, built only into the copy of the module that `make
//! bench` loads (`NHBM_BENCH=1`, see Kbuild), run at load and printed to the log as
//! `bench: <name>: <ratio> (<raw a> / <raw b>)`. Every figure is a ratio of two
//! things measured in the same run, interleaved, so that an emulated CPU's
//! absolute speed cancels out.

use crate::{
    abstractions::genpool::{raw, GenPool},
    abstractions::ref_pool,
    arch::V2,
    pool::mempool::DEVMEM_TAG,
    pool::{Geometry, Grid},
};
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

/// Allocate+free pairs per timed round.
const PAIRS: u32 = 25_000;
/// Rounds per side; the median is kept. Many short rounds, alternating,
/// so that a drift of a shared host's speed hits both sides alike.
const ROUNDS: usize = 15;

/// Median of the rounds (every round's value, or its ratio). An insertion sort: core's sorts carry a panic path
/// (`panic_on_ord_violation`) that objtool does not know never returns.
fn median(mut v: [i64; ROUNDS]) -> i64 {
    for i in 1..ROUNDS {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
    v[ROUNDS / 2]
}

fn time(mut f: impl FnMut() -> Result) -> Result<i64> {
    let t0 = Instant::<Monotonic>::now();
    f()?;
    Ok(t0.elapsed().as_nanos())
}

/// A ratio in thousandths as `x.yyy`.
struct Milli(i64);

impl kernel::fmt::Display for Milli {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Prints a figure in the form `make bench` reads: the median of the
/// per-round ratios `a[r]` / `b[r]` (in thousandths) against `target_milli`,
/// with their spread; `a` and `b` are the two sides' medians.
fn figure(
    name: &str,
    a: (&str, [i64; ROUNDS]),
    b: (&str, [i64; ROUNDS]),
    op: &str,
    target_milli: i64,
) {
    let mut ratios = [0i64; ROUNDS];
    for (r, ratio) in ratios.iter_mut().enumerate() {
        *ratio = a.1[r] * 1000 / b.1[r].max(1);
    }
    let milli = median(ratios);
    let (lo, hi) = ratios
        .iter()
        .fold((i64::MAX, i64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    let pass = match op {
        "<=" => milli <= target_milli,
        _ => milli >= target_milli,
    };
    pr_info!(
        "bench: {}: {} ({} {} / {} {}) spread {}-{} of {} target {} {} {}\n",
        name,
        Milli(milli),
        a.0,
        median(a.1),
        b.0,
        median(b.1),
        Milli(lo),
        Milli(hi),
        ROUNDS,
        op,
        Milli(target_milli),
        if pass { "PASS" } else { "FAIL" }
    );
}

/// Prints a diagnostic ratio `a` / `b`.
fn diagnostic(what: &str, a: i64, b: i64) {
    let milli = a * 1000 / b.max(1);
    pr_info!(
        "# bench: allocator: {}: {}.{:03} ({} ns / {} ns)\n",
        what,
        milli / 1000,
        milli % 1000,
        a,
        b
    );
}

/// Bytes of one allocation, and the pools' granule.
const ALLOC_BYTES: u64 = 4096;

/// Times `PAIRS` allocate+free pairs on the grid, on the reference path, on
/// raw C `gen_pool_alloc`/`gen_pool_free` and on the [`GenPool`] wrapper, for
/// round `r`. The grid and its peer run in ABBA order: a drift of the
/// emulator's speed hits both sides.
fn allocator_round(
    r: usize,
    grid: &Grid,
    refpool: &ref_pool::Pool,
    pool: &GenPool,
) -> Result<[i64; 4]> {
    let grid_round = || {
        time(|| {
            for _ in 0..PAIRS {
                let chunk = grid.alloc(0, 0, ALLOC_BYTES, 0, None)?;
                grid.free(chunk);
            }
            Ok(())
        })
    };
    let ref_round = || {
        time(|| {
            for _ in 0..PAIRS {
                let chunk = refpool.alloc(ALLOC_BYTES, ALLOC_BYTES)?;
                refpool.free(chunk);
            }
            Ok(())
        })
    };
    let (g, f) = if r % 2 == 0 {
        let g = grid_round()?;
        (g, ref_round()?)
    } else {
        let f = ref_round()?;
        (grid_round()?, f)
    };
    let c = time(|| raw::alloc_free_pairs(pool, ALLOC_BYTES, PAIRS))?;
    let w = time(|| {
        for _ in 0..PAIRS {
            let chunk = pool.alloc_aligned(ALLOC_BYTES, ALLOC_BYTES)?;
            pool.free(chunk).map_err(|_| EINVAL)?;
        }
        Ok(())
    })?;
    Ok([g, f, c, w])
}

/// The Rust grid against the reference driver's per-allocation path, replayed
/// in C on an identical pool (V2 channel 0, 4 KiB granule, 4 KiB allocations at
/// the granule's alignment). Diagnostics: the grid and the safe [`GenPool`]
/// wrapper against raw C `gen_pool_alloc`/`gen_pool_free` on the same geometry.
fn allocator() -> Result {
    let geo = Geometry {
        info: &V2,
        regions: 1,
        min_alloc: ALLOC_BYTES,
        carveout: false,
    };
    let grid = Grid::new(geo)?;
    let (start, end) = grid.pool_range(0, 0)?;
    let refpool = ref_pool::Pool::new(12, start, end - start)?;
    let pool = GenPool::new(12, start | DEVMEM_TAG, start, end - start)?;
    let mut rounds = [[0i64; ROUNDS]; 4];
    for r in 0..ROUNDS {
        for (side, t) in rounds
            .iter_mut()
            .zip(allocator_round(r, &grid, &refpool, &pool)?)
        {
            side[r] = t;
        }
    }
    figure(
        "allocator",
        ("grid alloc+free median round ns", rounds[0]),
        ("reference mc_alloc+mc_free median round ns", rounds[1]),
        "<=",
        1000,
    );
    let [gm, fm, cm, wm] = rounds.map(median);
    pr_info!(
        "# bench: allocator: {} rounds per side of {} alloc+free pairs of 4 KiB\n",
        ROUNDS,
        PAIRS
    );
    diagnostic("grid / raw C gen_pool", gm, cm);
    diagnostic("reference path / raw C gen_pool", fm, cm);
    diagnostic("GenPool wrapper / raw C gen_pool", wm, cm);
    Ok(())
}

/// Runs every in-kernel benchmark. A figure that cannot be measured prints a
/// failing line of its own, so that `make bench` counts it.
pub(crate) fn run() {
    if let Err(e) = allocator() {
        pr_info!("bench: allocator: error ({:?}) FAIL\n", e);
    }
}
