// SPDX-License-Identifier: GPL-2.0-only

//! The reference driver's per-allocation path (`bench_refpool.c`), the
//! allocator benchmark's peer; built only with the benchmarks
//! (`NHBM_BENCH=1`).

use crate::abstractions::helpers::{
    nhbm_ref_alloc, nhbm_ref_chunk, nhbm_ref_free, nhbm_ref_pool, nhbm_ref_pool_create,
    nhbm_ref_pool_destroy,
};
use kernel::{ffi::c_int, prelude::*};

/// One device pool with the reference's books around it.
///
/// # Invariants
///
/// `raw` was returned by `nhbm_ref_pool_create` and is destroyed only on drop.
pub(crate) struct Pool {
    raw: *mut nhbm_ref_pool,
}

/// A live allocation of a [`Pool`]; given back once, with [`Pool::free`].
pub(crate) struct Chunk(*mut nhbm_ref_chunk);

impl Pool {
    /// A pool of granule `1 << min_order` over `[pa, pa + size)`.
    pub(crate) fn new(min_order: u32, pa: u64, size: u64) -> Result<Self> {
        // SAFETY: Plain constructor; it checks nothing we rely on.
        let raw = unsafe { nhbm_ref_pool_create(min_order as c_int, pa, size) };
        if raw.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self { raw })
    }

    /// `mc_alloc` of `size` bytes at alignment `align`.
    #[inline(always)]
    pub(crate) fn alloc(&self, size: u64, align: u64) -> Result<Chunk> {
        let mut out = core::ptr::null_mut();
        // SAFETY: `self.raw` is a live pool (invariant); `out` is writable.
        let ret = unsafe { nhbm_ref_alloc(self.raw, size, align, &mut out) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(Chunk(out))
    }

    /// `mc_free` of `chunk`.
    #[inline(always)]
    pub(crate) fn free(&self, chunk: Chunk) {
        // SAFETY: `chunk` came from `alloc` of this pool, which outlives it,
        // and is consumed here, so it is freed once.
        unsafe { nhbm_ref_free(chunk.0) }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: `self.raw` is live (invariant) and every chunk was freed:
        // `Chunk` tokens borrow nothing, but the benchmark frees each one
        // before the next allocation.
        unsafe { nhbm_ref_pool_destroy(self.raw) }
    }
}
