// SPDX-License-Identifier: GPL-2.0-only

//! The pools' genalloc algorithms: the top-down first fit, so that
//! scratchpads go as high in a pool as there is room while other chunks
//! fill it from the bottom, and the aligned first fit from a granule on,
//! which lets one plan's chunks skip what its own search already passed.

use crate::abstractions::genpool::{Bits, Fit, GenPool};
use kernel::prelude::*;

/// The start of the highest run of `nr` free granules. A window
/// `[end - nr, end)` holding a busy granule moves down to end at the lowest
/// busy granule it holds, so each step skips a busy granule and those above
/// it. The whole chunk is searched every time: when another allocation took
/// the granules first, genalloc asks again, and a top-down search must not
/// stop at the failed place, or it would miss the room below.
pub(crate) struct TopDown;

impl Fit for TopDown {
    fn place(&self, bits: &Bits<'_>, nr: usize, _start: usize) -> Option<usize> {
        let mut end = bits.len();
        while end >= nr {
            match bits.first_busy(end - nr, end) {
                None => return Some(end - nr),
                Some(busy) => end = busy,
            }
        }
        None
    }
}

/// The first run of `nr` free granules at or after granule `from` whose
/// address is a multiple of an alignment: genalloc's aligned first fit
/// (`gen_pool_first_fit_align`) told where to begin. A candidate holding a
/// busy granule moves past it, so a search costs the granules and busy runs
/// it passes, and searches from where the last one ended cost, together,
/// one pass over the pool.
pub(crate) struct FirstFitFrom {
    /// Alignment in granules, a power of two.
    align: usize,
    /// The pool's first granule's offset in `align`: added to a granule
    /// index, it makes an aligned one a multiple of `align`.
    skew: usize,
    from: usize,
}

impl FirstFitFrom {
    /// The first fit of `pool` at byte alignment `align` (a power of two,
    /// at least the granule) from granule `from` on.
    pub(crate) fn new(pool: &GenPool, align: u64, from: usize) -> Self {
        let granules = (align / pool.granule()).max(1);
        Self {
            align: granules as usize,
            skew: (pool.base_granule() & (granules - 1)) as usize,
            from,
        }
    }
}

impl Fit for FirstFitFrom {
    fn place(&self, bits: &Bits<'_>, nr: usize, start: usize) -> Option<usize> {
        let mask = self.align - 1;
        let mut at = start.max(self.from);
        loop {
            let free = bits.first_free(at)?;
            // The first aligned granule at or after `free`.
            let cand = free.checked_add(self.skew + mask)? & !mask;
            let cand = cand.checked_sub(self.skew)?;
            let end = cand.checked_add(nr).filter(|&e| e <= bits.len())?;
            match bits.first_busy(cand, end) {
                None => return Some(cand),
                Some(busy) => at = busy + 1,
            }
        }
    }
}

#[kunit_tests(neuron_hbm_fit)]
mod tests {
    use super::*;
    use crate::abstractions::genpool::GenPool;

    const TAG: u64 = 1 << 63;
    const MIB: u64 = 1 << 20;

    #[test]
    fn top_fit_takes_the_highest_room() -> Result {
        let pool = GenPool::new(12, TAG, 0, 16 * MIB)?;
        let top = pool.alloc_with(MIB, &TopDown)?;
        assert_eq!(pool.virt_to_phys(top.va()), Some(15 * MIB));
        let next = pool.alloc_with(4096, &TopDown)?;
        assert_eq!(pool.virt_to_phys(next.va()), Some(15 * MIB - 4096));
        // A hole at the top is reused by what fits in it, and skipped by
        // what does not.
        assert!(pool.free(top).is_ok());
        let big = pool.alloc_with(2 * MIB, &TopDown)?;
        assert_eq!(pool.virt_to_phys(big.va()), Some(15 * MIB - 4096 - 2 * MIB));
        let small = pool.alloc_with(8192, &TopDown)?;
        assert_eq!(pool.virt_to_phys(small.va()), Some(16 * MIB - 8192));
        // Bottom-up allocations fill from the start, the top fit fills the
        // last hole, and then nothing is left either way.
        let low = pool.alloc_aligned(13 * MIB - 4096, 4096)?;
        assert_eq!(pool.virt_to_phys(low.va()), Some(0));
        let rest = pool.alloc_with(MIB - 8192, &TopDown)?;
        assert_eq!(pool.virt_to_phys(rest.va()), Some(15 * MIB));
        assert_eq!(pool.avail(), 0);
        assert_eq!(pool.alloc_with(4096, &TopDown).err(), Some(ENOMEM));
        for c in [next, big, small, low, rest] {
            assert!(pool.free(c).is_ok());
        }
        assert_eq!(pool.avail(), 16 * MIB);
        Ok(())
    }

    /// From granule 0, the search places chunks where genalloc's aligned
    /// first fit does, in a pool whose first granule is off every
    /// alignment asked for; from a later granule, nothing below it.
    #[test]
    fn first_fit_from_places_as_first_fit_does() -> Result {
        // The pool starts 12 KiB past a 16 KiB boundary.
        let (va, pa) = (TAG | (MIB + 12288), MIB + 12288);
        let ours = GenPool::new(12, va, pa, 4 * MIB)?;
        let theirs = GenPool::new(12, va, pa, 4 * MIB)?;
        let mut live = KVec::new();
        for i in 0..64u64 {
            let size = 4096 * (1 + i % 3);
            let align = 4096 << (i % 4);
            let a = ours.alloc_with(size, &FirstFitFrom::new(&ours, align, 0))?;
            let b = theirs.alloc_aligned(size, align)?;
            assert_eq!(a.va(), b.va());
            assert_eq!(a.va() % align, 0);
            live.push((a, b), GFP_KERNEL)?;
        }
        // Holes of every kind, refilled the same way.
        let mut kept = KVec::new();
        for (i, (a, b)) in live.drain_all().enumerate() {
            if i % 3 == 0 {
                assert!(ours.free(a).is_ok());
                assert!(theirs.free(b).is_ok());
            } else {
                kept.push((a, b), GFP_KERNEL)?;
            }
        }
        let a = ours.alloc_with(8192, &FirstFitFrom::new(&ours, 16384, 0))?;
        let b = theirs.alloc_aligned(8192, 16384)?;
        assert_eq!(a.va(), b.va());
        kept.push((a, b), GFP_KERNEL)?;
        // Told to begin at granule 700, it takes nothing below it.
        let late = ours.alloc_with(4096, &FirstFitFrom::new(&ours, 4096, 700))?;
        assert_eq!(late.va(), va + 700 * 4096);
        assert!(ours.free(late).is_ok());
        // Past the pool's end there is no room.
        let end = FirstFitFrom::new(&ours, 4096, ours.granules());
        assert_eq!(ours.alloc_with(4096, &end).err(), Some(ENOMEM));
        for (a, b) in kept.drain_all() {
            assert!(ours.free(a).is_ok());
            assert!(theirs.free(b).is_ok());
        }
        assert_eq!(ours.avail(), 4 * MIB);
        Ok(())
    }
}
