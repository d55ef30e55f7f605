//! What the planner's tests compare plans with.

use std::time::{Duration, Instant};

use nhbm_planner::bestfit::{self, Limit, Rule};
use nhbm_planner::exact::{self, Buffer};

/// The peak of best fit as an allocator runs it: the buffers in the order
/// they become live (ties: their order in `bufs`), each in the smallest
/// gap between the ones live with it that it fits in, else on top.
pub fn online_best_fit(bufs: &[Buffer]) -> u64 {
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_by_key(|&k| (bufs[k].first, k));
    let mut far = Limit::until(Instant::now() + Duration::from_secs(600));
    let offsets = bestfit::place(bufs, &order, Rule::Tightest, &mut far).unwrap();
    exact::high_water(bufs, &offsets)
}
