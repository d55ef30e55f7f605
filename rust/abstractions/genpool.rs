// SPDX-License-Identifier: GPL-2.0-only

//! Safe wrapper over the kernel's `gen_pool` (lib/genalloc.c).
//!
//! A [`GenPool`] owns one `struct gen_pool` with a single chunk whose virtual
//! and physical axes are chosen by the caller. Allocations are handed out as
//! [`GenChunk`] tokens that can be freed exactly once, into the pool they came
//! from: a double free or a foreign free cannot be expressed. A token dropped
//! without being freed leaves its chunk allocated; a pool dropped with chunks
//! still allocated is reported and left in place rather than passed to
//! `gen_pool_destroy()`, which would `BUG()`.

#[cfg(CONFIG_KUNIT = "y")]
use crate::abstractions::helpers::gen_pool_virt_to_phys;
use crate::abstractions::helpers::{
    gen_pool, gen_pool_avail, gen_pool_create, gen_pool_destroy, nhbm_gen_pool_add_virt,
    nhbm_gen_pool_alloc_algo, nhbm_gen_pool_alloc_align, nhbm_gen_pool_free,
};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    ffi::{c_int, c_uint, c_ulong, c_void},
    prelude::*,
};

/// Bits of a word of a chunk's bitmap.
const BITS: usize = usize::BITS as usize;

/// A chunk's allocation bitmap as genalloc hands it to an algorithm, one
/// bit per granule, a set bit busy. Other CPUs may set and clear bits
/// meanwhile (genalloc's atomic bitmap operations): each word is read once,
/// atomically.
pub(crate) struct Bits<'a> {
    words: &'a [AtomicUsize],
    len: usize,
}

impl Bits<'_> {
    /// How many granules the chunk has.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first free granule at or after `from`, if any
    /// (`find_next_zero_bit`).
    pub(crate) fn first_free(&self, from: usize) -> Option<usize> {
        self.first_of(from, self.len, false)
    }

    /// The first busy granule of `[from, to)`, if any (`find_next_bit`).
    pub(crate) fn first_busy(&self, from: usize, to: usize) -> Option<usize> {
        self.first_of(from, to, true)
    }

    /// The first granule of `[from, to)` that is busy (`busy`) or free,
    /// a word at a time.
    fn first_of(&self, from: usize, to: usize, busy: bool) -> Option<usize> {
        let to = to.min(self.len);
        let mut i = from;
        while i < to {
            let w = i / BITS;
            let bits = self.words[w].load(Ordering::Relaxed);
            let word = if busy { bits } else { !bits } & (!0usize << (i % BITS));
            if word != 0 {
                let bit = w * BITS + word.trailing_zeros() as usize;
                return (bit < to).then_some(bit);
            }
            i = (w + 1) * BITS;
        }
        None
    }
}

/// Where an allocation of `nr` granules goes in a chunk: a genalloc
/// algorithm (`genpool_algo_t`) written in Rust.
pub(crate) trait Fit {
    /// The first granule of `nr` free ones of `bits`, or `None`. `start` is
    /// 0 on the first call; when another allocation took the granules first,
    /// genalloc asks again with `start` at the place that failed.
    fn place(&self, bits: &Bits<'_>, nr: usize, start: usize) -> Option<usize>;
}

/// The `genpool_algo_t` of `F`: genalloc calls it with the chunk's bitmap,
/// the granules asked for and `data`, and takes `size` as "no room".
///
/// # Safety
///
/// `map` is a bitmap of `size` bits that lives for the call (genalloc's
/// contract for its algorithms); `data` points to an `F` that lives for the
/// call ([`GenPool::alloc_with`] passes its own borrowed one).
unsafe extern "C" fn algo<F: Fit>(
    map: *mut c_ulong,
    size: c_ulong,
    start: c_ulong,
    nr: c_uint,
    data: *mut c_void,
    _pool: *mut gen_pool,
    _start_addr: c_ulong,
) -> c_ulong {
    // SAFETY: `map` holds `size` bits, in whole words, for the call (the
    // function's contract); `AtomicUsize` has the layout of `c_ulong`, and
    // every access to the words is atomic, as genalloc's own are.
    let words =
        unsafe { core::slice::from_raw_parts(map.cast::<AtomicUsize>(), size.div_ceil(BITS)) };
    // SAFETY: `data` is a live `F`, only read (the function's contract).
    let fit = unsafe { &*data.cast_const().cast::<F>() };
    let bits = Bits { words, len: size };
    fit.place(&bits, nr as usize, start).unwrap_or(size)
}

/// Where an allocation goes.
enum Placement {
    /// First fit at this alignment (`gen_pool_first_fit_align`).
    Aligned(c_int),
    /// Where the algorithm `algo` puts it, given `data`.
    Algo(
        unsafe extern "C" fn(
            *mut c_ulong,
            c_ulong,
            c_ulong,
            c_uint,
            *mut c_void,
            *mut gen_pool,
            c_ulong,
        ) -> c_ulong,
        *mut c_void,
    ),
}

/// Largest alignment `gen_pool_first_fit_align` can express (its `int align`).
pub(crate) const MAX_ALIGN: u64 = 1 << 30;

/// One live allocation of a [`GenPool`]: its virtual address and size.
///
/// Not `Clone`: the only way to give it back is [`GenPool::free`], once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct GenChunk {
    va: u64,
    size: u64,
    /// The `struct gen_pool` it came from, by address: pools of identical
    /// ranges (two devices of one arch) still tell their chunks apart.
    pool: usize,
}

impl GenChunk {
    /// Virtual address, the pool's key for this allocation.
    pub(crate) fn va(&self) -> u64 {
        self.va
    }

    /// Size in bytes, as requested (already rounded by the caller).
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

/// A `gen_pool` with one chunk `[va_base, va_base + size)` backed by
/// `[pa_base, pa_base + size)`.
///
/// # Invariants
///
/// `raw` is a valid pool created by `gen_pool_create()`, owned by this value
/// and holding exactly one chunk described by `va_base`/`size`.
pub(crate) struct GenPool {
    raw: *mut gen_pool,
    /// Log2 of the granule.
    order: u32,
    va_base: u64,
    pa_base: u64,
    size: u64,
}

// SAFETY: genalloc allocates and frees with atomic bitmap operations under RCU
// and takes its own spinlock only to add chunks, so the pool can be shared and
// used from any thread.
unsafe impl Send for GenPool {}
// SAFETY: See `Send`; every `&self` method maps to a thread-safe genalloc call.
unsafe impl Sync for GenPool {}

impl GenPool {
    /// Creates a pool of granule `1 << min_order` over one chunk: virtual
    /// addresses `[va, va + size)` map to physical `[pa, pa + size)`.
    ///
    /// `va` must not be 0 (genalloc's failure value) and the ranges must not
    /// wrap; both are checked.
    pub(crate) fn new(min_order: u32, va: u64, pa: u64, size: u64) -> Result<Self> {
        if va == 0
            || size == 0
            || min_order >= 31
            || va.checked_add(size).is_none()
            || pa.checked_add(size).is_none()
            || size & ((1u64 << min_order) - 1) != 0
        {
            return Err(EINVAL);
        }
        let len = usize::try_from(size).map_err(|_| EINVAL)?;
        // SAFETY: Plain constructor; `min_order` is below 31 and -1 means any node.
        let raw = unsafe { gen_pool_create(min_order as c_int, -1) };
        if raw.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `raw` was just created and is not shared yet.
        let ret = unsafe { nhbm_gen_pool_add_virt(raw, va as c_ulong, pa, len) };
        if ret != 0 {
            // SAFETY: `raw` holds no chunk and no allocation.
            unsafe { gen_pool_destroy(raw) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: `raw` is valid and owns exactly the chunk just added.
        Ok(Self {
            raw,
            order: min_order,
            va_base: va,
            pa_base: pa,
            size,
        })
    }

    fn check_size(&self, size: u64) -> Result<usize> {
        if size == 0 || size > self.size {
            return Err(if size == 0 { EINVAL } else { ENOMEM });
        }
        usize::try_from(size).map_err(|_| ENOMEM)
    }

    /// Allocates `size` bytes whose virtual address is a multiple of `align`
    /// (a power of two up to [`MAX_ALIGN`]), first fit.
    pub(crate) fn alloc_aligned(&self, size: u64, align: u64) -> Result<GenChunk> {
        let len = self.check_size(size)?;
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(EINVAL);
        }
        self.alloc(len, Placement::Aligned(align as c_int))
    }

    /// Allocates `size` bytes (granule-aligned) where `fit` places them.
    pub(crate) fn alloc_with<F: Fit>(&self, size: u64, fit: &F) -> Result<GenChunk> {
        let len = self.check_size(size)?;
        let data = core::ptr::from_ref(fit).cast_mut().cast::<c_void>();
        self.alloc(len, Placement::Algo(algo::<F>, data))
    }

    /// Bytes of a granule, the pool's unit of allocation.
    pub(crate) fn granule(&self) -> u64 {
        1 << self.order
    }

    /// Granules of the pool.
    pub(crate) fn granules(&self) -> usize {
        (self.size >> self.order) as usize
    }

    /// The granule of the pool that `va` lies in (`va` inside the pool).
    pub(crate) fn granule_of(&self, va: u64) -> usize {
        (va.wrapping_sub(self.va_base) >> self.order) as usize
    }

    /// The number of the pool's first granule on its virtual axis: an
    /// alignment of `a` granules holds at granule `i` when
    /// `(base_granule() + i) % a == 0`.
    pub(crate) fn base_granule(&self) -> u64 {
        self.va_base >> self.order
    }

    /// Allocates `len` bytes (checked by `check_size`) placed as `how` says.
    fn alloc(&self, len: usize, how: Placement) -> Result<GenChunk> {
        // SAFETY: `self.raw` is valid (invariant); `algo` is a
        // `genpool_algo_t` that relies only on genalloc's contract and its
        // `data`, which `alloc_with` borrows for this call.
        let va = unsafe {
            match how {
                Placement::Aligned(align) => nhbm_gen_pool_alloc_align(self.raw, len, align),
                Placement::Algo(algo, data) => {
                    nhbm_gen_pool_alloc_algo(self.raw, len, Some(algo), data)
                }
            }
        };
        if va == 0 {
            return Err(ENOMEM);
        }
        Ok(GenChunk {
            va: va as u64,
            size: len as u64,
            pool: self.raw as usize,
        })
    }

    /// Whether `chunk` was allocated from this pool.
    pub(crate) fn owns(&self, chunk: &GenChunk) -> bool {
        chunk.pool == self.raw as usize && self.contains(chunk.va)
    }

    /// Gives `chunk` back. A chunk of another pool, even one of an identical
    /// range, is refused and handed back to the caller untouched.
    pub(crate) fn free(&self, chunk: GenChunk) -> core::result::Result<(), GenChunk> {
        if !self.owns(&chunk) {
            return Err(chunk);
        }
        // SAFETY: `self.raw` is valid; `chunk` is a live allocation of this
        // pool: only `alloc` creates tokens, each stamped with the address of
        // the pool that made it, and that pool is not destroyed while any of
        // its bytes are allocated (see `Drop`), so no other pool can have
        // that address meanwhile; the token is consumed here, so it is freed
        // once.
        unsafe { nhbm_gen_pool_free(self.raw, chunk.va as c_ulong, chunk.size as usize) };
        Ok(())
    }

    /// Physical address of the pool's first byte.
    pub(crate) fn pa_base(&self) -> u64 {
        self.pa_base
    }

    /// Whether `va` lies inside this pool's virtual range.
    pub(crate) fn contains(&self, va: u64) -> bool {
        va >= self.va_base && va - self.va_base < self.size
    }

    /// Physical address of virtual address `va` (`None` outside the pool).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn virt_to_phys(&self, va: u64) -> Option<u64> {
        if !self.contains(va) {
            return None;
        }
        // SAFETY: `self.raw` is valid (invariant).
        Some(unsafe { gen_pool_virt_to_phys(self.raw, va as c_ulong) })
    }

    /// Bytes still free.
    pub(crate) fn avail(&self) -> u64 {
        // SAFETY: `self.raw` is valid (invariant).
        unsafe { gen_pool_avail(self.raw) as u64 }
    }
}

impl Drop for GenPool {
    fn drop(&mut self) {
        let live = self.size - self.avail();
        if live != 0 {
            // `gen_pool_destroy` would BUG(): the pool stays, its memory lost.
            pr_err!(
                "gen_pool at va {:#x}: {} bytes still allocated, pool not destroyed\n",
                self.va_base,
                live
            );
            return;
        }
        // SAFETY: `self.raw` is valid and has no outstanding allocation.
        unsafe { gen_pool_destroy(self.raw) };
    }
}

/// Raw C `gen_pool` calls, for the allocator benchmark that compares the grid
/// against them on an identical pool.
#[cfg(nhbm_bench)]
pub(crate) mod raw {
    use super::*;

    /// Allocates and at once frees `size` bytes of `pool`, `pairs` times, by
    /// calling C `gen_pool_alloc_algo` (first fit, aligned to `size`)
    /// and `gen_pool_free` directly. `ENOMEM` if an allocation fails.
    pub(crate) fn alloc_free_pairs(pool: &GenPool, size: u64, pairs: u32) -> Result {
        let (len, align) = (size as usize, size as c_int);
        for _ in 0..pairs {
            // SAFETY: `pool.raw` is valid (invariant).
            let va = unsafe { nhbm_gen_pool_alloc_align(pool.raw, len, align) };
            if va == 0 {
                return Err(ENOMEM);
            }
            // SAFETY: `pool.raw` is valid and `va` was just allocated from it
            // with this size.
            unsafe { nhbm_gen_pool_free(pool.raw, va, len) };
        }
        Ok(())
    }
}

#[kunit_tests(neuron_hbm_genpool)]
mod tests {
    use super::*;

    const TAG: u64 = 1 << 63;
    const MIB: u64 = 1 << 20;

    #[test]
    fn pa_zero_is_allocatable_with_tagged_va() -> Result {
        let pool = GenPool::new(12, TAG, 0, 16 * MIB)?;
        let c = pool.alloc_aligned(4096, 4096)?;
        assert_eq!(c.va(), 0x8000_0000_0000_0000);
        assert_eq!(pool.virt_to_phys(c.va()), Some(0));
        assert!(pool.free(c).is_ok());
        assert_eq!(pool.avail(), 16 * MIB);
        Ok(())
    }

    #[test]
    fn zero_va_is_refused() {
        assert_eq!(GenPool::new(12, 0, 0, MIB).err(), Some(EINVAL));
    }

    #[test]
    fn alignment_is_honoured() -> Result {
        let pool = GenPool::new(12, TAG | 0x1000_0000, 0x1000_0000, 64 * MIB)?;
        let small = pool.alloc_aligned(4096, 4096)?;
        let big = pool.alloc_aligned(4096, 16 * MIB)?;
        assert_eq!(big.va() % (16 * MIB), 0);
        assert_eq!(pool.virt_to_phys(big.va()).unwrap() % (16 * MIB), 0);
        assert!(pool.free(big).is_ok());
        assert!(pool.free(small).is_ok());
        assert_eq!(pool.alloc_aligned(4096, 3).err(), Some(EINVAL));
        assert_eq!(pool.alloc_aligned(4096, 2 * MAX_ALIGN).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn exhaustion_then_recovery() -> Result {
        let pool = GenPool::new(12, TAG, 0, MIB)?;
        let a = pool.alloc_aligned(MIB / 2, 4096)?;
        let b = pool.alloc_aligned(MIB / 2, 4096)?;
        assert_eq!(pool.avail(), 0);
        assert_eq!(pool.alloc_aligned(4096, 4096).err(), Some(ENOMEM));
        assert!(pool.free(a).is_ok());
        let c = pool.alloc_aligned(MIB / 2, 4096)?;
        assert!(pool.free(b).is_ok());
        assert!(pool.free(c).is_ok());
        assert_eq!(pool.avail(), MIB);
        Ok(())
    }

    #[test]
    fn foreign_chunk_is_refused() -> Result {
        let a = GenPool::new(12, TAG, 0, MIB)?;
        let b = GenPool::new(12, TAG | (16 * MIB), 16 * MIB, MIB)?;
        let c = a.alloc_aligned(4096, 4096)?;
        let back = b.free(c).unwrap_err();
        assert!(a.free(back).is_ok());
        Ok(())
    }

    #[test]
    fn chunk_of_an_identical_pool_is_refused() -> Result {
        // Two devices of one arch: the same ranges, different pools.
        let a = GenPool::new(12, TAG, 0, MIB)?;
        let b = GenPool::new(12, TAG, 0, MIB)?;
        let c = a.alloc_aligned(4096, 4096)?;
        assert!(!b.owns(&c));
        let back = b.free(c).unwrap_err();
        assert_eq!(b.avail(), MIB);
        assert_eq!(a.avail(), MIB - 4096);
        assert!(a.free(back).is_ok());
        assert_eq!(a.avail(), MIB);
        Ok(())
    }
}
