// SPDX-License-Identifier: GPL-2.0-only

//! The HBM memory-pool grid: `channels x regions` kernel `gen_pool`s, one
//! [`mempool::Pool`] each.
//!
//! Each pool's virtual axis is the device PA with bit 63 set
//! ([`DEVMEM_TAG`], the reference's `GENPOOL_DEVMEM_BASE`), its physical axis
//! the clean PA: genalloc treats 0 as failure, and device PA 0 is legal HBM.
//! Only [`Chunk`] carries the tagged VA (to free it); everyone else sees the
//! clean PA. Allocating and freeing take no lock: genalloc is lock-free and
//! each pool's counters are atomics; a chunk is known only to its owner (a
//! plan, which answers what lies where). A chunk whose token is dropped without
//! [`Grid::free`] stays allocated: `GenPool`'s drop then reports it and keeps
//! the pool rather than destroy it with chunks in use.

#[cfg(nhbm_bench)]
pub(crate) mod bench;
pub(crate) mod fit;
pub(crate) mod hints;
pub(crate) mod mempool;

use crate::{
    abstractions::genpool::GenPool,
    arch::{ArchInfo, MAX_CHANNELS, MAX_REGIONS},
    pool::hints::FitHints,
    pool::mempool::{Chunk, Pool, PoolStats, DEVMEM_TAG, MAX_ALIGN, SMALL_ALLOC_MAX},
};
use kernel::prelude::*;

/// How a grid is laid out.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    /// The device generation.
    pub(crate) info: &'static ArchInfo,
    /// Regions per channel (1..=4).
    pub(crate) regions: usize,
    /// Minimum allocation size: a power of two, at least 1024.
    pub(crate) min_alloc: u64,
    /// Keep the firmware carve-out at each channel start out of the pools.
    pub(crate) carveout: bool,
}

impl Geometry {
    /// Bytes per region: an equal share of the channel, rounded down to
    /// `min_alloc` so that every pool starts on an allocation granule (16 GiB
    /// in 3 regions is not a whole number of pages).
    pub(crate) fn region_size(&self) -> u64 {
        (self.info.channel_size / self.regions as u64) & !(self.min_alloc - 1)
    }
}

/// The per-device grid of HBM pools.
pub(crate) struct Grid {
    geo: Geometry,
    min_order: u32,
    pools: KVec<Pool>,
}

impl Grid {
    /// Builds `nr_channels x regions` pools for `geo`.
    pub(crate) fn new(geo: Geometry) -> Result<Self> {
        let info = geo.info;
        if !(1..=MAX_REGIONS).contains(&geo.regions)
            || !geo.min_alloc.is_power_of_two()
            || geo.min_alloc < 1024
            || geo.min_alloc > info.channel_size / geo.regions as u64
            || info.nr_channels > MAX_CHANNELS
        {
            return Err(EINVAL);
        }
        let min_order = geo.min_alloc.trailing_zeros();
        let region_size = geo.region_size();
        let mut pools = KVec::with_capacity(info.nr_channels * geo.regions, GFP_KERNEL)?;
        for ch in 0..info.nr_channels {
            for r in 0..geo.regions {
                let mut pa = info.channel_base[ch] + r as u64 * region_size;
                let mut size = region_size;
                if geo.carveout && info.carveout > 0 {
                    pa += info.carveout;
                    size -= info.carveout;
                }
                pools.push(Pool::new(min_order, pa, size)?, GFP_KERNEL)?;
            }
        }
        Ok(Self {
            geo,
            min_order,
            pools,
        })
    }

    /// The grid's geometry.
    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geo
    }

    fn pool(&self, channel: usize, region: usize) -> Result<&Pool> {
        if channel >= self.geo.info.nr_channels || region >= self.geo.regions {
            return Err(EINVAL);
        }
        Ok(&self.pools[channel * self.geo.regions + region])
    }

    fn round(&self, size: u64) -> Result<u64> {
        if size == 0 {
            return Err(EINVAL);
        }
        let mask = (1u64 << self.min_order) - 1;
        size.checked_add(mask).map(|s| s & !mask).ok_or(ENOMEM)
    }

    /// Allocates `size` bytes (rounded up to the minimum allocation size)
    /// from pool (`channel`, `region`) at a PA that is a multiple of `align`
    /// (a power of two up to 1 GiB; 0 means the minimum allocation size).
    /// A chunk of at most [`SMALL_ALLOC_MAX`] bytes so rounded tries the
    /// small pool first and takes just those bytes there; in the main pool
    /// a chunk is rounded up to a multiple of `align` as well.
    ///
    /// Given `hints`, the allocation is one of a run (a plan's chunks):
    /// its search begins where the run's last search for such a chunk
    /// ended, the same place as a first fit from the start unless another
    /// tenant freed room below it meanwhile.
    pub(crate) fn alloc(
        &self,
        channel: usize,
        region: usize,
        size: u64,
        align: u64,
        mut hints: Option<&mut FitHints>,
    ) -> Result<Chunk> {
        let pool = self.pool(channel, region)?;
        let align = if align == 0 {
            self.geo.min_alloc
        } else {
            align
        };
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(EINVAL);
        }
        let pages = self.round(size)?;
        // In the main pool a chunk spans a multiple of its alignment: placed
        // on an `align` boundary, it withholds that span from every
        // larger-aligned allocation, so its owner holds (and is charged for)
        // all of it. A 4 KiB chunk at 1 GiB alignment is a 1 GiB chunk there,
        // and a tenant cannot fragment the space large records need for the
        // price of a few pages. The small pool, which exists to hold small
        // chunks, takes a chunk's own pages placed aligned, as the reference
        // does (neuron_mempool.c:606, 682-706 in release 2.24.7.0): what its
        // gaps withhold is other small chunks' first choice, never a large
        // record's room.
        let spanned = pages.checked_next_multiple_of(align).ok_or(ENOMEM)?;
        let align = align.max(self.geo.min_alloc);
        let fit = |gen: &GenPool, small: bool| {
            let size = if small { pages } else { spanned };
            let chunk = match hints.as_deref_mut() {
                Some(h) => h.alloc(gen, (region, small), size, align)?,
                None => gen.alloc_aligned(size, align)?,
            };
            // genalloc aligns the tagged VA; bit 63 cannot change a lower
            // alignment, and this re-check on the PA proves it.
            let pa = chunk.va() & !DEVMEM_TAG;
            if pa & (align - 1) != 0 {
                pr_err!(
                    "genalloc returned misaligned PA {:#x} for align {:#x}\n",
                    pa,
                    align
                );
                let _ = gen.free(chunk);
                return Err(EINVAL);
            }
            Ok(chunk)
        };
        pool.alloc(fit, pages <= SMALL_ALLOC_MAX, (channel as u8, region as u8))
    }

    /// Allocates `size` bytes of contiguous scratchpad as high in pool
    /// (`channel`, `region`) as there is room: scratchpads grow down from the
    /// top while the other chunks fill up from the bottom. A hole that an
    /// unloaded scratchpad leaves is reused at once by the next that fits.
    pub(crate) fn alloc_scratch(&self, channel: usize, region: usize, size: u64) -> Result<Chunk> {
        let pool = self.pool(channel, region)?;
        let size = self.round(size)?;
        pool.alloc_top(size, (channel as u8, region as u8))
    }

    /// Gives `chunk` back to its pool (and its charge to its cgroup). A chunk
    /// of another grid is refused and handed back untouched.
    pub(crate) fn try_free(&self, chunk: Chunk) -> core::result::Result<(), Chunk> {
        match self.pool(chunk.channel(), chunk.region()) {
            Ok(pool) => pool.release(chunk),
            Err(_) => Err(chunk),
        }
    }

    /// Gives `chunk` back to its pool (and its charge to its cgroup). A chunk
    /// of another grid cannot be freed here: it is reported and left
    /// allocated in its own pool, never given to the wrong one.
    pub(crate) fn free(&self, chunk: Chunk) {
        if let Err(c) = self.try_free(chunk) {
            pr_err!(
                "chunk at {:#x} is not of this grid, left allocated\n",
                c.pa()
            );
        }
    }

    /// Statistics of pool (`channel`, `region`).
    pub(crate) fn stats(&self, channel: usize, region: usize) -> Result<PoolStats> {
        Ok(self.pool(channel, region)?.stats())
    }

    /// The channel with the most free bytes.
    pub(crate) fn emptiest_channel(&self) -> usize {
        (0..self.geo.info.nr_channels)
            .max_by_key(|&ch| {
                let free: u64 = (0..self.geo.regions)
                    .filter_map(|r| self.stats(ch, r).ok())
                    .map(|s| s.total - s.used)
                    .sum();
                // Ties go to the lowest channel.
                (free, core::cmp::Reverse(ch))
            })
            .unwrap_or(0)
    }

    /// First and one-past-last PA of pool (`channel`, `region`).
    pub(crate) fn pool_range(&self, channel: usize, region: usize) -> Result<(u64, u64)> {
        Ok(self.pool(channel, region)?.range())
    }

    /// First and one-past-last PA of the small pool of (`channel`,
    /// `region`), and its free bytes; `None` when the region has none.
    pub(crate) fn small_pool(
        &self,
        channel: usize,
        region: usize,
    ) -> Result<Option<(u64, u64, u64)>> {
        Ok(self.pool(channel, region)?.small_range())
    }
}

#[kunit_tests(neuron_hbm_mempool)]
mod tests {
    use super::*;
    use crate::arch::{FW_CARVEOUT, GIB, MIB, V2, V3, V4};
    use crate::pool::mempool::SMALL_POOL_SIZE;

    const KIB: u64 = 1 << 10;

    fn grid(info: &'static ArchInfo, regions: usize, carveout: bool) -> Result<Grid> {
        Grid::new(Geometry {
            info,
            regions,
            min_alloc: 4096,
            carveout,
        })
    }

    #[test]
    fn pa_zero_allocates_with_tagged_va() -> Result {
        let g = grid(&V2, 1, false)?;
        let c = g.alloc(0, 0, MIB, 0, None)?;
        assert_eq!(c.pa(), 0);
        assert_eq!(c.va(), 0x8000_0000_0000_0000);
        assert_eq!(g.stats(0, 0)?.live_chunks, 1);
        // Freed by its tagged VA: the pool is whole again and PA 0 comes back.
        g.free(c);
        assert_eq!(g.stats(0, 0)?.used, 0);
        let again = g.alloc(0, 0, MIB, 0, None)?;
        assert_eq!(again.pa(), 0);
        g.free(again);
        Ok(())
    }

    #[test]
    fn v2_channel1_starts_at_64_gib() -> Result {
        let g = grid(&V2, 1, false)?;
        let c = g.alloc(1, 0, MIB, 0, None)?;
        assert_eq!(c.pa(), 64 * GIB);
        assert_eq!(c.va(), DEVMEM_TAG | (64 * GIB));
        g.free(c);
        assert_eq!(g.alloc(2, 0, 4096, 0, None).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn four_regions_split_each_channel() -> Result {
        for info in [&V2, &V3, &V4] {
            let g = grid(info, 4, false)?;
            let rsize = info.channel_size / 4;
            for ch in 0..info.nr_channels {
                for r in 0..4 {
                    let (start, _) = g.pool_range(ch, r)?;
                    assert_eq!(start, info.channel_base[ch] + r as u64 * rsize);
                    let c = g.alloc(ch, r, MIB, 0, None)?;
                    assert_eq!(c.pa(), start);
                    g.free(c);
                }
            }
            assert_eq!(g.alloc(0, 4, 4096, 0, None).err(), Some(EINVAL));
        }
        assert_eq!(grid(&V2, 0, false).err(), Some(EINVAL));
        assert_eq!(grid(&V2, 5, false).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn alignments_4k_to_1g() -> Result {
        let g = grid(&V3, 1, true)?;
        let (s_start, s_end, _) = g.small_pool(1, 0)?.ok_or(EINVAL)?;
        let first = g.alloc(1, 0, 4096, 0, None)?; // offset the free space
        for order in 12..=30 {
            let align = 1u64 << order;
            let c = g.alloc(1, 0, 8192, align, None)?;
            assert_eq!(c.pa() % align, 0);
            assert_eq!(c.va(), c.pa() | DEVMEM_TAG);
            // In the small pool the chunk takes its own pages; in the main
            // pool it spans its alignment, what its placement withholds.
            let small = (s_start..s_end).contains(&c.pa());
            let want = if small { 8192 } else { align.max(8192) };
            assert_eq!(c.size(), want);
            assert_eq!(g.stats(1, 0)?.used, 4096 + want);
            // The small pool (a GiB) has room at every alignment up to half
            // its size.
            assert!(small || align > GIB / 2);
            g.free(c);
        }
        assert_eq!(g.alloc(1, 0, 4096, 3, None).err(), Some(EINVAL));
        assert_eq!(g.alloc(1, 0, 4096, 2 * GIB, None).err(), Some(EINVAL));
        g.free(first);
        Ok(())
    }

    #[test]
    fn sizes_round_up_to_min_alloc() -> Result {
        let g = grid(&V2, 1, false)?;
        let c = g.alloc(0, 0, 1, 0, None)?;
        assert_eq!(c.size(), 4096);
        assert_eq!(g.stats(0, 0)?.used, 4096);
        g.free(c);
        assert_eq!(g.alloc(0, 0, 0, 0, None).err(), Some(EINVAL));
        assert_eq!(g.alloc(0, 0, u64::MAX, 0, None).err(), Some(ENOMEM));
        Ok(())
    }

    #[test]
    fn exhaustion_then_recovery() -> Result {
        let g = grid(&V2, 4, false)?;
        let total = g.stats(0, 1)?.total;
        // The main pool whole, then the small pool whole (a large chunk
        // falls back on it when the main pool has no room).
        let a = g.alloc(0, 1, total - SMALL_POOL_SIZE, 0, None)?;
        let b = g.alloc(0, 1, SMALL_POOL_SIZE, 0, None)?;
        assert_eq!(b.pa(), a.pa() + total - SMALL_POOL_SIZE);
        let before = g.stats(0, 1)?;
        assert_eq!(g.alloc(0, 1, 4096, 0, None).err(), Some(ENOMEM));
        assert_eq!(g.alloc_scratch(0, 1, 4096).err(), Some(ENOMEM));
        assert_eq!(g.stats(0, 1)?, before); // a failed allocation changes nothing
        g.free(a);
        // A small chunk falls back on the main pool when the small one is
        // full, and spans its alignment there.
        let c = g.alloc(0, 1, 4096, 64 * KIB, None)?;
        let (start, _) = g.pool_range(0, 1)?;
        assert_eq!((c.pa(), c.size()), (start, 64 * KIB));
        let s = g.stats(0, 1)?;
        assert_eq!(
            (s.used, s.peak, s.live_chunks),
            (SMALL_POOL_SIZE + 64 * KIB, total, 2)
        );
        g.free(b);
        g.free(c);
        assert_eq!(g.stats(0, 1)?.used, 0);
        Ok(())
    }

    #[test]
    fn small_chunks_take_the_small_pool_first() -> Result {
        let g = grid(&V2, 1, false)?;
        let (start, end) = g.pool_range(0, 0)?;
        let (s_start, s_end, free) = g.small_pool(0, 0)?.ok_or(EINVAL)?;
        // The top GiB of the stack.
        assert_eq!((s_start, s_end), (15 * GIB, end));
        assert_eq!((end, free), (16 * GIB, GIB));
        let small = g.alloc(0, 0, SMALL_ALLOC_MAX, 0, None)?;
        assert_eq!(small.pa(), s_start);
        let large = g.alloc(0, 0, SMALL_ALLOC_MAX + 1, 0, None)?;
        assert_eq!((large.pa(), large.size()), (start, SMALL_ALLOC_MAX + 4096));
        // A scratchpad comes from the top of the main pool, below the small one.
        let scratch = g.alloc_scratch(0, 0, 4096)?;
        assert_eq!(scratch.pa(), s_start - 4096);
        for c in [small, large, scratch] {
            g.free(c);
        }
        assert_eq!(g.small_pool(0, 0)?.map(|p| p.2), Some(GIB));
        Ok(())
    }

    /// In the small pool an aligned chunk takes its own pages and the gaps
    /// its alignment leaves stay free for other small chunks, first fit.
    #[test]
    fn small_pool_chunks_take_their_own_pages() -> Result {
        let g = grid(&V2, 1, false)?;
        let (s_start, _, free) = g.small_pool(0, 0)?.ok_or(EINVAL)?;
        let mut aligned = KVec::new();
        for i in 0..16 {
            let c = g.alloc(0, 0, 4096, 64 * KIB, None)?;
            assert_eq!((c.pa(), c.size()), (s_start + i * 64 * KIB, 4096));
            aligned.push(c, GFP_KERNEL)?;
        }
        assert_eq!(g.stats(0, 0)?.used, 16 * 4096);
        assert_eq!(g.small_pool(0, 0)?.map(|p| p.2), Some(free - 16 * 4096));
        // The threshold is on a chunk's pages, not on its alignment.
        let far = g.alloc(0, 0, 4096, 2 * SMALL_ALLOC_MAX, None)?;
        assert_eq!(
            (far.pa(), far.size()),
            (s_start + 2 * SMALL_ALLOC_MAX, 4096)
        );
        let filler = g.alloc(0, 0, 8192, 0, None)?;
        assert_eq!(filler.pa(), s_start + 4096);
        aligned.push(far, GFP_KERNEL)?;
        aligned.push(filler, GFP_KERNEL)?;
        for c in aligned.drain_all() {
            g.free(c);
        }
        assert_eq!(g.stats(0, 0)?.used, 0);
        Ok(())
    }

    /// A run of allocations places its chunks where first fit would, each
    /// search beginning where the run's last one for such a chunk ended:
    /// room freed below that place is left to others, and a chunk of
    /// another kind searches from the start.
    #[test]
    fn a_run_resumes_where_its_search_ended() -> Result {
        let g = grid(&V2, 1, false)?;
        let (s_start, _, _) = g.small_pool(0, 0)?.ok_or(EINVAL)?;
        let mut hints = FitHints::new();
        let mut run = KVec::new();
        for i in 0..8 {
            hints.reserve()?;
            let c = g.alloc(0, 0, 4096, 8 * KIB, Some(&mut hints))?;
            assert_eq!(c.pa(), s_start + i * 8 * KIB);
            run.push(c, GFP_KERNEL)?;
        }
        g.free(run.remove(0)?);
        hints.reserve()?;
        let next = g.alloc(0, 0, 4096, 8 * KIB, Some(&mut hints))?;
        assert_eq!(next.pa(), s_start + 8 * 8 * KIB);
        let other = g.alloc(0, 0, 4096, 8 * KIB, None)?;
        assert_eq!(other.pa(), s_start);
        // Another kind: its first search starts at the bottom and finds the
        // first 4 KiB gap the run left.
        let odd = g.alloc(0, 0, 4096, 4 * KIB, Some(&mut hints))?;
        assert_eq!(odd.pa(), s_start + 4 * KIB);
        for c in run.drain_all() {
            g.free(c);
        }
        for c in [next, other, odd] {
            g.free(c);
        }
        assert_eq!(g.stats(0, 0)?.used, 0);
        Ok(())
    }

    /// The fragmentation a tenant could make with one-record plans of 64 MiB
    /// and 4 KiB, first fit, once it frees the large ones: with the small
    /// chunks in the small pool, the freed space is one run again.
    #[test]
    fn small_chunks_cannot_shred_the_main_pool() -> Result {
        const ROUNDS: u64 = 32;
        let g = grid(&V2, 4, false)?;
        let mut large = KVec::new();
        let mut small = KVec::new();
        for _ in 0..ROUNDS {
            large.push(g.alloc(0, 0, 64 * MIB, 0, None)?, GFP_KERNEL)?;
            small.push(g.alloc(0, 0, 4096, 0, None)?, GFP_KERNEL)?;
        }
        for c in large.drain_all() {
            g.free(c);
        }
        // Half of what was freed, in one record.
        let half = g.alloc(0, 0, ROUNDS * 64 * MIB / 2, 0, None)?;
        g.free(half);
        for c in small.drain_all() {
            g.free(c);
        }
        assert_eq!(g.stats(0, 0)?.live_chunks, 0);
        Ok(())
    }

    #[test]
    fn a_chunk_of_another_grid_is_refused() -> Result {
        // Two devices of one arch: identical pool ranges.
        let a = grid(&V2, 1, false)?;
        let b = grid(&V2, 1, false)?;
        for size in [4096, MIB] {
            let c = a.alloc(0, 0, size, 0, None)?;
            let before = b.stats(0, 0)?;
            let back = b.try_free(c).err().ok_or(EINVAL)?;
            assert_eq!(b.stats(0, 0)?, before);
            assert_eq!(a.stats(0, 0)?.live_chunks, 1);
            assert!(a.try_free(back).is_ok());
            assert_eq!(a.stats(0, 0)?.used, 0);
        }
        Ok(())
    }

    /// No pool of any region count hands out a byte of the firmware
    /// carve-out at the start of each region: neither the whole pool in one
    /// chunk nor a scratchpad growing down to the pool's start.
    fn carveout_is_never_handed_out(info: &'static ArchInfo) -> Result {
        for regions in 1..=MAX_REGIONS {
            // 1 MiB granules keep the whole-pool allocations quick.
            let g = Grid::new(Geometry {
                info,
                regions,
                min_alloc: MIB,
                carveout: true,
            })?;
            let region_size = g.geometry().region_size();
            for ch in 0..info.nr_channels {
                for r in 0..regions {
                    let base = info.channel_base[ch] + r as u64 * region_size;
                    let (start, end) = g.pool_range(ch, r)?;
                    assert_eq!(start, base + FW_CARVEOUT);
                    let small = g.small_pool(ch, r)?.map_or(0, |(s, e, _)| e - s);
                    let all = g.alloc(ch, r, end - start - small, 0, None)?;
                    assert_eq!(all.pa(), base + FW_CARVEOUT);
                    let rest = match small {
                        0 => None,
                        n => Some(g.alloc(ch, r, n, 0, None)?),
                    };
                    assert_eq!(g.alloc(ch, r, 4096, 0, None).err(), Some(ENOMEM));
                    g.free(all);
                    let top = g.alloc_scratch(ch, r, end - start - small)?;
                    assert_eq!(top.pa(), base + FW_CARVEOUT);
                    g.free(top);
                    if let Some(c) = rest {
                        g.free(c);
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn v2_carveout_is_never_handed_out() -> Result {
        carveout_is_never_handed_out(&V2)
    }

    #[test]
    fn v3_carveout_is_never_handed_out() -> Result {
        carveout_is_never_handed_out(&V3)
    }

    #[test]
    fn v4_carveout_is_never_handed_out() -> Result {
        carveout_is_never_handed_out(&V4)
    }

    #[test]
    fn v2_stack_end_is_handed_out_and_reachable() -> Result {
        let g = grid(&V2, 1, false)?;
        for ch in 0..2 {
            let stack_end = V2.channel_base[ch] + 16 * GIB;
            assert_eq!(g.pool_range(ch, 0)?.1, stack_end);
            // The main pool full, a GiB falls back on the small pool: the
            // whole top GiB, which the BAR4 remap reaches to its last byte.
            let main = g.alloc(ch, 0, 15 * GIB, 0, None)?;
            let top = g.alloc(ch, 0, GIB, 0, None)?;
            assert_eq!(top.pa() + top.size(), stack_end);
            let off = crate::arch::addr::bar4_offset(&V2, top.pa(), top.size())?;
            assert_eq!(off + GIB, (ch as u64 + 1) * 16 * GIB);
            g.free(top);
            g.free(main);
        }
        Ok(())
    }

    #[test]
    fn scratchpads_grow_down_from_the_top() -> Result {
        let g = grid(&V2, 1, false)?;
        let top = g.small_pool(0, 0)?.ok_or(EINVAL)?.0;
        let a = g.alloc_scratch(0, 0, 8192)?;
        let b = g.alloc_scratch(0, 0, 4096)?;
        let c = g.alloc_scratch(0, 0, 3 * 4096)?;
        assert_eq!(a.pa(), top - 8192);
        assert_eq!(b.pa(), a.pa() - 4096);
        assert_eq!(c.pa(), b.pa() - 3 * 4096);
        g.free(c);
        g.free(b);
        // The next chunk reuses the space just freed, directly below `a`.
        let d = g.alloc_scratch(0, 0, 4096)?;
        assert_eq!(d.pa(), a.pa() - 4096);
        g.free(d);
        g.free(a);
        assert_eq!(g.stats(0, 0)?.used, 0);
        Ok(())
    }

    #[test]
    fn a_scratchpad_below_does_not_hold_those_above() -> Result {
        let g = grid(&V2, 1, false)?;
        let top = g.small_pool(0, 0)?.ok_or(EINVAL)?.0;
        let mut chunks = KVec::new();
        for _ in 0..8 {
            chunks.push(Some(g.alloc_scratch(0, 0, 4096)?), GFP_KERNEL)?;
        }
        // Chunk 0 is the highest, 7 the lowest. Freed in any order, each
        // one's bytes come back at once, whatever is still below it.
        for (n, i) in [3, 0, 5, 6, 4, 2, 1].into_iter().enumerate() {
            g.free(chunks[i].take().ok_or(EINVAL)?);
            assert_eq!(g.stats(0, 0)?.used, 4096 * (7 - n as u64));
        }
        // The holes above the last one are reused, highest first.
        let big = g.alloc_scratch(0, 0, 7 * 4096)?;
        assert_eq!(big.pa(), top - 7 * 4096);
        g.free(big);
        if let Some(c) = chunks[7].take() {
            g.free(c);
        }
        assert_eq!(g.stats(0, 0)?.live_chunks, 0);
        Ok(())
    }

    #[test]
    fn scratch_and_main_meet_with_enomem() -> Result {
        let g = grid(&V2, 4, false)?;
        let total = g.stats(0, 0)?.total;
        let small = g.small_pool(0, 0)?.map_or(0, |(s, e, _)| e - s);
        let main = g.alloc(0, 0, total - small - 8192, 0, None)?;
        let s = g.alloc_scratch(0, 0, 8192)?;
        // Never from the small pool, which is all free.
        assert_eq!(g.alloc_scratch(0, 0, 4096).err(), Some(ENOMEM));
        g.free(s);
        g.free(main);
        Ok(())
    }

    #[test]
    fn emptiest_channel_wins() -> Result {
        let g = grid(&V2, 1, false)?;
        assert_eq!(g.emptiest_channel(), 0);
        let c = g.alloc(0, 0, MIB, 0, None)?;
        assert_eq!(g.emptiest_channel(), 1);
        g.free(c);
        Ok(())
    }

    #[test]
    fn bad_geometry_refused() {
        let mut geo = Geometry {
            info: &V2,
            regions: 1,
            min_alloc: 512,
            carveout: false,
        };
        assert_eq!(Grid::new(geo).err(), Some(EINVAL));
        geo.min_alloc = 3000;
        assert_eq!(Grid::new(geo).err(), Some(EINVAL));
    }
}

#[kunit_tests(neuron_hbm_mempool_concurrency)]
mod concurrency_tests {
    use super::*;
    use crate::arch::V2;
    use kernel::{
        sync::{
            atomic::{Atomic, Relaxed},
            Arc, Completion,
        },
        workqueue,
    };

    const WORKERS: usize = 4;
    const ROUNDS: usize = 200;

    #[pin_data]
    struct Shared {
        grid: Grid,
        left: Atomic<u32>,
        failures: Atomic<u32>,
        #[pin]
        done: Completion,
    }

    #[test]
    fn threads_allocate_and_free_at_once() -> Result {
        let grid = Grid::new(Geometry {
            info: &V2,
            regions: 2,
            min_alloc: 4096,
            carveout: true,
        })?;
        let shared = Arc::pin_init(
            pin_init!(Shared {
                grid,
                left: Atomic::new(WORKERS as u32),
                failures: Atomic::new(0),
                done <- Completion::new(),
            }),
            GFP_KERNEL,
        )?;
        for w in 0..WORKERS {
            let s = shared.clone();
            let mut held = KVec::with_capacity(ROUNDS, GFP_KERNEL)?;
            workqueue::system_unbound().try_spawn(GFP_KERNEL, move || {
                for i in 0..ROUNDS {
                    // Two workers share each pool; sizes vary to fragment it.
                    let size = 4096 * (1 + (i % 7) as u64);
                    match s
                        .grid
                        .alloc(w % 2, (w / 2) % 2, size, 4096 << (i % 3), None)
                    {
                        // Cannot fail: at most ROUNDS chunks are held.
                        Ok(c) => drop(held.push_within_capacity(c)),
                        Err(_) => {
                            s.failures.fetch_add(1, Relaxed);
                        }
                    }
                    if i % 3 == 2 {
                        if let Some(c) = held.pop() {
                            s.grid.free(c);
                        }
                    }
                }
                for c in held.drain_all() {
                    s.grid.free(c);
                }
                if s.left.fetch_add(u32::MAX, Relaxed) == 1 {
                    s.done.complete_all();
                }
            })?;
        }
        shared.done.wait_for_completion();
        assert_eq!(shared.failures.load(Relaxed), 0);
        for ch in 0..2 {
            for r in 0..2 {
                let s = shared.grid.stats(ch, r)?;
                assert_eq!((s.used, s.live_chunks), (0, 0));
                assert!(s.peak > 0);
            }
        }
        Ok(())
    }
}
