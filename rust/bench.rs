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

/// The Rust grid against raw C `gen_pool_alloc`/`gen_pool_free` on an
/// identical pool (V2 channel 0, 4 KiB granule, 4 KiB allocations). The
/// safe [`GenPool`] wrapper alone is timed too, as a diagnostic: what the
/// grid adds is then its bookkeeping, not the Rust binding.
fn allocator() -> Result {
    let geo = Geometry {
        info: &V2,
        regions: 1,
        min_alloc: 4096,
        carveout: false,
    };
    let grid = Grid::new(geo)?;
    let (start, end) = grid.pool_range(0, 0)?;
    let pool = GenPool::new(12, start | DEVMEM_TAG, start, end - start)?;
    let mut g = [0i64; ROUNDS];
    let mut c = [0i64; ROUNDS];
    let mut w = [0i64; ROUNDS];
    for r in 0..ROUNDS {
        g[r] = time(|| {
            for _ in 0..PAIRS {
                let chunk = grid.alloc(0, 0, 4096, 0)?;
                grid.free(chunk).map_err(|(e, _)| e)?;
            }
            Ok(())
        })?;
        c[r] = time(|| {
            for _ in 0..PAIRS {
                let va = raw::alloc(&pool, 4096);
                if va == 0 {
                    return Err(ENOMEM);
                }
                // SAFETY: `va` was just allocated from `pool` with this size.
                unsafe { raw::free(&pool, va, 4096) };
            }
            Ok(())
        })?;
        w[r] = time(|| {
            for _ in 0..PAIRS {
                let chunk = pool.alloc_aligned(4096, 4096)?;
                pool.free(chunk).map_err(|_| EINVAL)?;
            }
            Ok(())
        })?;
    }
    let (gm, cm, wm) = (median(g), median(c), median(w));
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
