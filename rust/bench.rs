// SPDX-License-Identifier: GPL-2.0

//! In-kernel benchmarks, run at load with `bench=1` and printed to the log as
//! `bench: <name>: <ratio> (<raw a> / <raw b>)`. Every figure is a ratio of two
//! things measured in the same run, interleaved, so that an emulated CPU's
//! absolute speed cancels out.

use crate::{
    arch::V2,
    genpool::{raw, GenPool},
    mempool::{Geometry, Grid, DEVMEM_TAG},
};
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

/// Allocate+free pairs per timed round.
const PAIRS: u32 = 100_000;
/// Rounds per side; the median is kept.
const ROUNDS: usize = 5;

/// Median of the rounds. An insertion sort: core's sorts carry a panic path
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

/// Bytes of one allocation, and the pools' granule.
const ALLOC_BYTES: u64 = 4096;

/// Times `PAIRS` allocate+free pairs on the grid, on raw C
/// `gen_pool_alloc`/`gen_pool_free` and on the [`GenPool`] wrapper, in that
/// order, for one round.
fn allocator_round(grid: &Grid, pool: &GenPool) -> Result<[i64; 3]> {
    let g = time(|| {
        for _ in 0..PAIRS {
            let chunk = grid.alloc(0, 0, ALLOC_BYTES, 0)?;
            grid.free(chunk).map_err(|(e, _)| e)?;
        }
        Ok(())
    })?;
    let c = time(|| raw::alloc_free_pairs(pool, ALLOC_BYTES, PAIRS))?;
    let w = time(|| {
        for _ in 0..PAIRS {
            let chunk = pool.alloc_aligned(ALLOC_BYTES, ALLOC_BYTES)?;
            pool.free(chunk).map_err(|_| EINVAL)?;
        }
        Ok(())
    })?;
    Ok([g, c, w])
}

/// The Rust grid against raw C `gen_pool_alloc`/`gen_pool_free` on an
/// identical pool (V2 channel 0, 4 KiB granule, 4 KiB allocations). The
/// safe [`GenPool`] wrapper alone is timed too, as a diagnostic: what the
/// grid adds is then its bookkeeping, not the Rust binding.
fn allocator() -> Result {
    let geo = Geometry {
        info: &V2,
        regions: 1,
        min_alloc: ALLOC_BYTES,
        carveout: false,
    };
    let grid = Grid::new(geo)?;
    let (start, end) = grid.pool_range(0, 0)?;
    let pool = GenPool::new(12, start | DEVMEM_TAG, start, end - start)?;
    let mut rounds = [[0i64; ROUNDS]; 3];
    for r in 0..ROUNDS {
        for (side, t) in rounds.iter_mut().zip(allocator_round(&grid, &pool)?) {
            side[r] = t;
        }
    }
    let [gm, cm, wm] = rounds.map(median);
    let milli = gm * 1000 / cm.max(1);
    let verdict = if milli <= 1150 { "PASS" } else { "FAIL" };
    pr_info!(
        "bench: allocator: {}.{:03} (grid {} ns / raw C gen_pool {} ns, {} alloc+free pairs) target <= 1.150 {}\n",
        milli / 1000,
        milli % 1000,
        gm,
        cm,
        PAIRS,
        verdict
    );
    let milli = wm * 1000 / cm.max(1);
    pr_info!(
        "# bench: allocator: GenPool wrapper / raw C gen_pool: {}.{:03} ({} ns / {} ns)\n",
        milli / 1000,
        milli % 1000,
        wm,
        cm
    );
    Ok(())
}

/// Runs every in-kernel benchmark.
pub(crate) fn run() -> Result {
    allocator()
}
