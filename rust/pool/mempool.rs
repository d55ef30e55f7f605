// SPDX-License-Identifier: GPL-2.0-only

//! One pool of the HBM grid ([`Grid`](super::Grid)): a channel x region,
//! as a main kernel `gen_pool` and a small one above it with one set of
//! books, and the [`Chunk`] tokens of what it hands out.

use crate::{
    abstractions::dmem::{Charge, Region},
    abstractions::genpool::{GenChunk, GenPool},
    pool::fit::TopDown,
    pool::tree_batch::{batch_from, Batch},
};
use kernel::{
    new_spinlock,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{lock::spinlock::SpinLockGuard, SpinLock},
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

struct PoolState {
    stats: PoolStats,
    /// Live chunks keyed by their last byte's PA, valued by their first: the
    /// first key >= pa is the only chunk that can contain pa.
    index: RBTree<u64, u64>,
    /// Index nodes of freed chunks, reused so that steady-state allocation
    /// does not go to the slab allocator.
    spare: KVec<RBTreeNodeReservation<u64, u64>>,
}

/// Spare index nodes a pool keeps.
const SPARE_NODES: usize = 32;

/// One channel x region: a main `gen_pool` and, above it, a small one, with
/// one set of books. genalloc searches its bitmap lock-free, so the books'
/// lock is held only to record a chunk or strike it off: never across a
/// bitmap search, whose cost grows with the pool.
#[pin_data]
pub(super) struct Pool {
    main: GenPool,
    small: Option<GenPool>,
    pa_base: u64,
    size: u64,
    #[pin]
    state: SpinLock<PoolState>,
    /// The longest hold of `state` since it was last read, in ns; negative
    /// while holds are not timed (timing costs two clock reads a hold).
    #[cfg(nhbm_bench)]
    longest_hold: kernel::sync::atomic::Atomic<i64>,
}

/// The books of a [`Pool`], locked. In the benchmark build it times the
/// hold when asked to.
struct Books<'a> {
    guard: SpinLockGuard<'a, PoolState>,
    #[cfg(nhbm_bench)]
    since: (
        Option<kernel::time::Instant<kernel::time::Monotonic>>,
        &'a kernel::sync::atomic::Atomic<i64>,
    ),
}

impl core::ops::Deref for Books<'_> {
    type Target = PoolState;
    fn deref(&self) -> &PoolState {
        &self.guard
    }
}

impl core::ops::DerefMut for Books<'_> {
    fn deref_mut(&mut self) -> &mut PoolState {
        &mut self.guard
    }
}

#[cfg(nhbm_bench)]
impl Drop for Books<'_> {
    fn drop(&mut self) {
        use kernel::sync::atomic::Relaxed;
        if let Some(t0) = self.since.0 {
            let held = t0.elapsed().as_nanos();
            if held > self.since.1.load(Relaxed) {
                self.since.1.store(held, Relaxed);
            }
        }
    }
}

impl Pool {
    /// A region of `size` bytes at `pa`; its top [`SMALL_POOL_SIZE`] bytes
    /// are the small pool when the region is larger than that and it is a
    /// whole number of granules (as the reference, neuron_mempool.c:143-149 in
    /// release 2.24.7.0).
    /// The small pool starts on a [`SMALL_POOL_ALIGN`] boundary, so a
    /// region whose end is not on one has a small pool that much smaller.
    pub(super) fn new(min_order: u32, pa: u64, size: u64) -> Result<Pin<KBox<Self>>> {
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
        let total = size;
        KBox::pin_init(
            try_pin_init!(Self {
                main,
                small,
                pa_base: pa,
                size,
                state <- new_spinlock!(PoolState {
                    stats: PoolStats { total, ..PoolStats::default() },
                    index: RBTree::new(),
                    spare: KVec::with_capacity(SPARE_NODES, GFP_KERNEL)?,
                }),
                #[cfg(nhbm_bench)]
                longest_hold: kernel::sync::atomic::Atomic::new(-1),
            }),
            GFP_KERNEL,
        )
    }

    /// Locks the books.
    #[inline(always)]
    fn books(&self) -> Books<'_> {
        let guard = self.state.lock();
        Books {
            guard,
            #[cfg(nhbm_bench)]
            since: (
                (self.longest_hold.load(kernel::sync::atomic::Relaxed) >= 0)
                    .then(kernel::time::Instant::now),
                &self.longest_hold,
            ),
        }
    }

    /// Whether device PA `pa` lies in the pool's range.
    pub(super) fn contains(&self, pa: u64) -> bool {
        pa >= self.pa_base && pa - self.pa_base < self.size
    }

    /// The `gen_pool` a chunk of `small` comes from.
    fn gen(&self, small: bool) -> Option<&GenPool> {
        if small {
            self.small.as_ref()
        } else {
            Some(&self.main)
        }
    }

    /// Takes `size` bytes with `fit`, from the small pool first when `size`
    /// is small, then from the other pool, and records the chunk. The
    /// search runs with no lock held.
    pub(super) fn alloc(
        &self,
        fit: impl Fn(&GenPool) -> Result<GenChunk>,
        small_first: bool,
        at: (u8, u8),
    ) -> Result<Chunk> {
        for small in [small_first, !small_first] {
            let Some(gen) = self.gen(small) else {
                continue;
            };
            match fit(gen) {
                Ok(chunk) => return self.commit(gen, chunk, small, at),
                Err(e) if e == ENOMEM => {}
                Err(e) => return Err(e),
            }
        }
        Err(ENOMEM)
    }

    /// Records `chunk`, just taken from `gen`, in the books and builds its
    /// [`Chunk`]. An index node comes from the spares under the lock, else
    /// from the slab with the lock dropped; without one, `chunk` goes back.
    fn commit(&self, gen: &GenPool, chunk: GenChunk, small: bool, at: (u8, u8)) -> Result<Chunk> {
        let mut books = self.books();
        let node = match books.spare.pop() {
            Some(node) => node,
            None => {
                drop(books);
                // One node per chunk, as many as a tenant makes: charged to it.
                match RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT) {
                    Ok(node) => {
                        books = self.books();
                        node
                    }
                    Err(e) => {
                        // Cannot fail: `chunk` was just taken from `gen`.
                        let _ = gen.free(chunk);
                        return Err(e);
                    }
                }
            }
        };
        let pa = chunk.va() & !DEVMEM_TAG;
        let size = chunk.size();
        books.index.insert(node.into_node(pa + size - 1, pa));
        books.stats.used += size;
        books.stats.live_chunks += 1;
        books.stats.peak = books.stats.peak.max(books.stats.used);
        Ok(Chunk {
            gen: chunk,
            pa,
            channel: at.0,
            region: at.1,
            small,
            charge: Charge::new(),
        })
    }

    /// Strikes `chunk` off the books and gives it back to its `gen_pool`
    /// (with the lock dropped); its index node is kept for reuse while there
    /// is room. A chunk of another pool is handed back untouched.
    pub(super) fn release(&self, chunk: Chunk) -> core::result::Result<(), Chunk> {
        let Some(gen) = self.gen(chunk.small).filter(|g| g.owns(&chunk.gen)) else {
            return Err(chunk);
        };
        let size = chunk.size();
        {
            let mut books = self.books();
            if let Some(node) = books.index.remove_node(&(chunk.pa + size - 1)) {
                // A full spare list drops (frees) the node instead.
                let _ = books.spare.push_within_capacity(node.into_reservation());
            }
            books.stats.used -= size;
            books.stats.live_chunks -= 1;
        }
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

    /// Up to [`BATCH`](crate::pool::tree_batch::BATCH) live chunks `(pa, size)`
    /// whose last byte is at or above `from`, in PA order, taken under one
    /// short hold of the lock.
    pub(super) fn chunks_from(&self, from: u64) -> Batch<(u64, u64)> {
        let books = self.books();
        batch_from(&books.index, from, |last, &start| (start, last - start + 1))
    }

    /// Takes `size` bytes as high in the main pool as there is room, and
    /// records the chunk: scratchpads come from the main pool only, as the
    /// reference's contiguous scratchpad (neuron_mempool.c:674-687 in
    /// release 2.24.7.0); the
    /// small pool is for small chunks.
    pub(super) fn alloc_top(&self, size: u64, at: (u8, u8)) -> Result<Chunk> {
        let chunk = self.main.alloc_with::<TopDown>(size)?;
        self.commit(&self.main, chunk, false, at)
    }

    /// The live chunk `(pa, size)` containing device PA `pa`, if any.
    pub(super) fn lookup(&self, pa: u64) -> Option<(u64, u64)> {
        let books = self.books();
        let cursor = books.index.cursor_lower_bound(&pa)?;
        let (&last, &start) = cursor.current();
        (start <= pa).then_some((start, last - start + 1))
    }

    /// The pool's statistics.
    pub(super) fn stats(&self) -> PoolStats {
        self.books().stats
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

    /// The longest hold of the books' lock since the last call (negative if
    /// holds were not timed), and times the holds from now on if `on`, else
    /// no longer.
    #[cfg(nhbm_bench)]
    pub(super) fn take_longest_hold(&self, on: bool) -> i64 {
        use kernel::sync::atomic::Relaxed;
        let next = if on { 0 } else { -1 };
        self.longest_hold.xchg(next, Relaxed)
    }
}
