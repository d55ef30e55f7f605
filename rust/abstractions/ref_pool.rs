// SPDX-License-Identifier: GPL-2.0-only

//! The reference driver's per-allocation path (`bench_refpool.c`), the
//! allocator benchmark's peer; built only with the benchmarks
//! (`NHBM_BENCH=1`).

use crate::abstractions::helpers::{
    nhbm_ref_alloc, nhbm_ref_chunk, nhbm_ref_free, nhbm_ref_pool, nhbm_ref_pool_create,
    nhbm_ref_pool_destroy,
};
use core::marker::PhantomData;
use kernel::{ffi::c_int, prelude::*};

/// One device pool with the reference's books around it.
///
/// # Invariants
///
/// `raw` was returned by `nhbm_ref_pool_create` and is destroyed only on drop.
pub(crate) struct Pool {
    raw: *mut nhbm_ref_pool,
}

/// A live allocation of a [`Pool`], which it borrows; given back once, with
/// [`Pool::free`].
pub(crate) struct Chunk<'a>(*mut nhbm_ref_chunk, PhantomData<&'a Pool>);

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
    pub(crate) fn alloc(&self, size: u64, align: u64) -> Result<Chunk<'_>> {
        let mut out = core::ptr::null_mut();
        // SAFETY: `self.raw` is a live pool (invariant); `out` is writable.
        let ret = unsafe { nhbm_ref_alloc(self.raw, size, align, &mut out) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(Chunk(out, PhantomData))
    }

    /// `mc_free` of `chunk`.
    #[inline(always)]
    pub(crate) fn free(&self, chunk: Chunk<'_>) {
        // SAFETY: `chunk` came from `alloc` of a pool it borrows, so that
        // pool is alive (the C side frees it there, `mc->pool`), and is
        // consumed here, so it is freed once.
        unsafe { nhbm_ref_free(chunk.0) }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: `self.raw` is live (invariant) and no `Chunk` borrows the
        // pool any more: each was freed, or leaked (`mem::forget`), which
        // the C side meets with a warning and `gen_pool_destroy`'s BUG,
        // before it frees anything.
        unsafe { nhbm_ref_pool_destroy(self.raw) }
    }
}
