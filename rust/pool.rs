// SPDX-License-Identifier: GPL-2.0-only

//! The HBM pool grid: `channels x regions` allocators of device memory.

#[cfg(nhbm_bench)]
pub(crate) mod bench;
pub(crate) mod fit;
pub(crate) mod mempool;
pub(crate) mod tree_batch;
