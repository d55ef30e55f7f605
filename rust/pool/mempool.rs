// SPDX-License-Identifier: GPL-2.0-only

//! One pool of the HBM grid ([`Grid`](super::Grid)): a channel x region,
//! as a main kernel `gen_pool` and a small one above it with one set of
//! counters, and the [`Chunk`] tokens of what it hands out.

use crate::{
    abstractions::dmem::{Charge, Region},
    abstractions::genpool::{GenChunk, GenPool},
    pool::fit::TopDown,
};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Bit 63: the tag on every pool VA so that device PA 0 is not genalloc's 0.
pub(crate) const DEVMEM_TAG: u64 = 1 << 63;

/// Largest alignment an allocation may ask for.
pub(crate) const MAX_ALIGN: u64 = crate::abstractions::genpool::MAX_ALIGN;

/// What a pool reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PoolStats {
    /// Bytes managed by the pool.
    pub(crate) total: u64,
    /// Bytes allocated (scratchpad included).
    pub(crate) used: u64,
    /// Highest `used` seen.
    pub(crate) peak: u64,
    /// Live allocations.
    pub(crate) live_chunks: u32,
}

/// Bytes of each region's small pool (the reference's
/// `mempool_small_pool_size`, neuron_mempool.c:64 in release 2.24.7.0), at
/// the top of the region (:154-155).
pub(crate) const SMALL_POOL_SIZE: u64 = 1 << 30;

/// Alignment of a small pool's start: transfers, which go in 64 KiB pieces
/// of the device address, then split no more often in a small chunk than in
/// any other.
const SMALL_POOL_ALIGN: u64 = 1 << 20;

/// Largest allocation the small pool takes first (the reference's
/// `mempool_small_alloc_max`, neuron_mempool.c:65 in release 2.24.7.0,
/// compared with `<=` at :666). Each pool falls back on the other when it has
/// no room (:698-707, :719-727).
pub(crate) const SMALL_ALLOC_MAX: u64 = 512 * 1024;

/// A live allocation of the grid. Not `Clone`: it is given back once, with
/// [`Grid::free`](super::Grid::free).
#[derive(Debug)]
pub(crate) struct Chunk {
    gen: GenChunk,
    pa: u64,
    channel: u8,
    region: u8,
    /// Taken from the region's small pool.
    small: bool,
    /// The dmem cgroup charge of the chunk: it goes with the chunk and is
    /// uncharged when the pool takes it back.
    charge: Charge,
}

impl Chunk {
    /// Clean device physical address.
    pub(crate) fn pa(&self) -> u64 {
        self.pa
    }

    /// Size in bytes (rounded up to the minimum allocation size).
    pub(crate) fn size(&self) -> u64 {
        self.gen.size()
    }

    /// Tagged pool VA (`pa | DEVMEM_TAG`), the key genalloc frees by.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn va(&self) -> u64 {
        self.gen.va()
    }

    /// Charges the chunk's bytes to the current task's dmem cgroup in
    /// `region` (its channel's): `EAGAIN` over the cgroup's limit, and
    /// nothing changes. The charge lasts until the pool takes the chunk back.
    pub(crate) fn charge_to(&mut self, region: &Region) -> Result {
        self.charge.add(region, self.size())
    }

    /// HBM channel.
    pub(crate) fn channel(&self) -> usize {
        self.channel as usize
    }

    /// Region within the channel.
    pub(crate) fn region(&self) -> usize {
        self.region as usize
    }
}

/// A pool's counters: atomics, so that allocating and freeing take no lock
/// beyond genalloc's own lock-free bitmap updates. Each is exact on its own;
/// read together while chunks come and go, they may be of different
/// instants.
struct Counters {
    used: Atomic<u64>,
    peak: Atomic<u64>,
    live_chunks: Atomic<u32>,
}

impl Counters {
    /// Counts a chunk of `size` bytes in.
    fn add(&self, size: u64) {
        let used = self.used.fetch_add(size, Relaxed) + size;
        let mut peak = self.peak.load(Relaxed);
        while used > peak {
            match self.peak.cmpxchg(peak, used, Relaxed) {
                Ok(_) => break,
                Err(now) => peak = now,
            }
        }
        self.live_chunks.add(1, Relaxed);
    }

    /// Counts a chunk of `size` bytes out.
    fn sub(&self, size: u64) {
        self.used.fetch_sub(size, Relaxed);
        self.live_chunks.fetch_sub(1, Relaxed);
    }
}

/// One channel x region: a main `gen_pool` and, above it, a small one, with
/// one set of counters. Nothing here takes a lock: genalloc allocates and
/// frees with atomic bitmap operations, and each chunk is known to its
/// owner (a plan), which is what answers for it.
pub(super) struct Pool {
    main: GenPool,
    small: Option<GenPool>,
    pa_base: u64,
    size: u64,
    counters: Counters,
}

impl Pool {
    /// A region of `size` bytes at `pa`; its top [`SMALL_POOL_SIZE`] bytes
    /// are the small pool when the region is larger than that and it is a
    /// whole number of granules (as the reference, neuron_mempool.c:143-149 in
    /// release 2.24.7.0).
    /// The small pool starts on a [`SMALL_POOL_ALIGN`] boundary, so a
    /// region whose end is not on one has a small pool that much smaller.
    pub(super) fn new(min_order: u32, pa: u64, size: u64) -> Result<Self> {
        let align = SMALL_POOL_ALIGN.max(1 << min_order);
        let end = pa + size;
        let small_size = match (end - SMALL_POOL_SIZE.min(end)).checked_next_multiple_of(align) {
            Some(start)
                if size > SMALL_POOL_SIZE
                    && SMALL_POOL_SIZE % (1 << min_order) == 0
                    && start > pa
                    && start < end =>
            {
                end - start
            }
            _ => 0,
        };
        let main_size = size - small_size;
        let main = GenPool::new(min_order, pa | DEVMEM_TAG, pa, main_size)?;
        let small = match small_size {
            0 => None,
            n => {
                let at = pa + main_size;
                Some(GenPool::new(min_order, at | DEVMEM_TAG, at, n)?)
            }
        };
        Ok(Self {
            main,
            small,
            pa_base: pa,
            size,
            counters: Counters {
                used: Atomic::new(0),
                peak: Atomic::new(0),
                live_chunks: Atomic::new(0),
            },
        })
    }

    /// The `gen_pool` a chunk of `small` comes from.
    fn gen(&self, small: bool) -> Option<&GenPool> {
        if small {
            self.small.as_ref()
        } else {
            Some(&self.main)
        }
    }

    /// Takes a chunk with `fit` (told whether it fits the small pool), from
    /// the small pool first when `small_first`, then from the other pool,
    /// and counts the chunk in.
    pub(super) fn alloc(
        &self,
        mut fit: impl FnMut(&GenPool, bool) -> Result<GenChunk>,
        small_first: bool,
        at: (u8, u8),
    ) -> Result<Chunk> {
        for small in [small_first, !small_first] {
            let Some(gen) = self.gen(small) else {
                continue;
            };
            match fit(gen, small) {
                Ok(chunk) => return Ok(self.commit(chunk, small, at)),
                Err(e) if e == ENOMEM => {}
                Err(e) => return Err(e),
            }
        }
        Err(ENOMEM)
    }

    /// Counts `chunk`, just taken from the small pool if `small`, and
    /// builds its [`Chunk`].
    fn commit(&self, chunk: GenChunk, small: bool, at: (u8, u8)) -> Chunk {
        self.counters.add(chunk.size());
        let pa = chunk.va() & !DEVMEM_TAG;
        Chunk {
            gen: chunk,
            pa,
            channel: at.0,
            region: at.1,
            small,
            charge: Charge::new(),
        }
    }

    /// Counts `chunk` out and gives it back to its `gen_pool`. A chunk of
    /// another pool is handed back untouched.
    pub(super) fn release(&self, chunk: Chunk) -> core::result::Result<(), Chunk> {
        let Some(gen) = self.gen(chunk.small).filter(|g| g.owns(&chunk.gen)) else {
            return Err(chunk);
        };
        self.counters.sub(chunk.size());
        let Chunk {
            gen: owned,
            pa,
            charge,
            ..
        } = chunk;
        if gen.free(owned).is_err() {
            // Cannot happen: `owns` said it is this pool's.
            pr_err!("chunk at {:#x} refused by its own pool\n", pa);
        }
        // Uncharged once the bytes are back.
        drop(charge);
        Ok(())
    }

    /// Takes `size` bytes as high in the main pool as there is room, and
    /// counts the chunk in: scratchpads come from the main pool only, as the
    /// reference's contiguous scratchpad (neuron_mempool.c:674-687 in
    /// release 2.24.7.0); the
    /// small pool is for small chunks.
    pub(super) fn alloc_top(&self, size: u64, at: (u8, u8)) -> Result<Chunk> {
        let chunk = self.main.alloc_with(size, &TopDown)?;
        Ok(self.commit(chunk, false, at))
    }

    /// The pool's statistics.
    pub(super) fn stats(&self) -> PoolStats {
        let b = &self.counters;
        PoolStats {
            total: self.size,
            used: b.used.load(Relaxed),
            peak: b.peak.load(Relaxed),
            live_chunks: b.live_chunks.load(Relaxed),
        }
    }

    /// First and one-past-last PA of the pool.
    pub(super) fn range(&self) -> (u64, u64) {
        (self.pa_base, self.pa_base + self.size)
    }

    /// First and one-past-last PA of the small pool, and its free bytes;
    /// `None` when the pool has none.
    pub(super) fn small_range(&self) -> Option<(u64, u64, u64)> {
        let end = self.pa_base + self.size;
        self.small.as_ref().map(|s| (s.pa_base(), end, s.avail()))
    }
}
