// SPDX-License-Identifier: GPL-2.0-only

//! The pools' top-down first fit, a genalloc algorithm: scratchpads go as
//! high in a pool as there is room, while other chunks fill it from the
//! bottom.

use crate::abstractions::genpool::{Bits, Fit};
use kernel::prelude::*;

/// The start of the highest run of `nr` free granules. A window
/// `[end - nr, end)` holding a busy granule moves down to end at the lowest
/// busy granule it holds, so each step skips a busy granule and those above
/// it. The whole chunk is searched every time: when another allocation took
/// the granules first, genalloc asks again, and a top-down search must not
/// stop at the failed place, or it would miss the room below.
pub(crate) struct TopDown;

impl Fit for TopDown {
    fn place(bits: &Bits<'_>, nr: usize) -> Option<usize> {
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

#[kunit_tests(neuron_hbm_fit)]
mod tests {
    use super::*;
    use crate::abstractions::genpool::GenPool;

    const TAG: u64 = 1 << 63;
    const MIB: u64 = 1 << 20;

    #[test]
    fn top_fit_takes_the_highest_room() -> Result {
        let pool = GenPool::new(12, TAG, 0, 16 * MIB)?;
        let top = pool.alloc_with::<TopDown>(MIB)?;
        assert_eq!(pool.virt_to_phys(top.va()), Some(15 * MIB));
        let next = pool.alloc_with::<TopDown>(4096)?;
        assert_eq!(pool.virt_to_phys(next.va()), Some(15 * MIB - 4096));
        // A hole at the top is reused by what fits in it, and skipped by
        // what does not.
        assert!(pool.free(top).is_ok());
        let big = pool.alloc_with::<TopDown>(2 * MIB)?;
        assert_eq!(pool.virt_to_phys(big.va()), Some(15 * MIB - 4096 - 2 * MIB));
        let small = pool.alloc_with::<TopDown>(8192)?;
        assert_eq!(pool.virt_to_phys(small.va()), Some(16 * MIB - 8192));
        // Bottom-up allocations fill from the start, the top fit fills the
        // last hole, and then nothing is left either way.
        let low = pool.alloc_aligned(13 * MIB - 4096, 4096)?;
        assert_eq!(pool.virt_to_phys(low.va()), Some(0));
        let rest = pool.alloc_with::<TopDown>(MIB - 8192)?;
        assert_eq!(pool.virt_to_phys(rest.va()), Some(15 * MIB));
        assert_eq!(pool.avail(), 0);
        assert_eq!(pool.alloc_with::<TopDown>(4096).err(), Some(ENOMEM));
        for c in [next, big, small, low, rest] {
            assert!(pool.free(c).is_ok());
        }
        assert_eq!(pool.avail(), 16 * MIB);
        Ok(())
    }
}
