// SPDX-License-Identifier: GPL-2.0-only

//! `var_id -> record` index, built once at load and read-only afterwards.
//! Compilers number variables densely, and such ids index a table directly
//! (O(1)); any other id set is kept sorted and searched by bisection, so that
//! no choice of ids costs more than O(log n) per lookup or O(n log n) to
//! build (a hash table would let crafted ids collide into one probe run).

use crate::abstractions::resched;
use kernel::prelude::*;

const EMPTY: u32 = u32::MAX;

/// How ids map to records.
enum Layout {
    /// Slot `id - base` holds the record position (or `EMPTY`): used when the
    /// ids span at most twice their count.
    Direct { base: u32, slots: KVVec<u32> },
    /// `(id, position)` pairs sorted by id.
    Sorted { pairs: KVVec<(u32, u32)> },
}

/// Immutable map from var id to record position.
pub(crate) struct VarIndex {
    layout: Layout,
}

/// Sorts `(id, position)` pairs by id in place: heapsort, O(n log n) and no
/// memory whatever the input, with a preemption point every
/// [`resched::EVERY`] sift-downs.
fn heapsort(v: &mut [(u32, u32)]) -> Result {
    fn sift_down(v: &mut [(u32, u32)], mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && v[child].0 < v[child + 1].0 {
                child += 1;
            }
            if v[root].0 >= v[child].0 {
                return;
            }
            v.swap(root, child);
            root = child;
        }
    }
    let n = v.len();
    for (k, root) in (0..n / 2).rev().enumerate() {
        if k % resched::EVERY == 0 {
            resched::checkpoint()?;
        }
        sift_down(v, root, n);
    }
    for (k, end) in (1..n).rev().enumerate() {
        if k % resched::EVERY == 0 {
            resched::checkpoint()?;
        }
        v.swap(0, end);
        sift_down(v, 0, end);
    }
    Ok(())
}

impl VarIndex {
    /// Indexes `ids` (position `i` holds record `i`'s var id). `EINVAL` on a
    /// duplicate id.
    pub(crate) fn new(ids: impl Iterator<Item = u32> + Clone, count: usize) -> Result<Self> {
        let (min, max) = ids
            .clone()
            .fold((u32::MAX, 0), |(lo, hi), id| (lo.min(id), hi.max(id)));
        let span = u64::from(max.saturating_sub(min)) + 1;
        if span <= 2 * count as u64 {
            Self::direct(ids, min, span as usize)
        } else {
            Self::sorted(ids, count)
        }
    }

    fn direct(ids: impl Iterator<Item = u32>, base: u32, span: usize) -> Result<Self> {
        let mut slots = KVVec::with_capacity(span, GFP_KERNEL_ACCOUNT)?;
        slots.resize(span, EMPTY, GFP_KERNEL_ACCOUNT)?;
        for (pos, id) in ids.enumerate() {
            let slot = &mut slots[(id - base) as usize];
            if *slot != EMPTY {
                return Err(EINVAL);
            }
            *slot = pos as u32;
        }
        Ok(Self {
            layout: Layout::Direct { base, slots },
        })
    }

    fn sorted(ids: impl Iterator<Item = u32>, count: usize) -> Result<Self> {
        let mut pairs = KVVec::with_capacity(count, GFP_KERNEL_ACCOUNT)?;
        for (pos, id) in ids.enumerate() {
            pairs.push((id, pos as u32), GFP_KERNEL_ACCOUNT)?;
        }
        resched::checkpoint()?;
        heapsort(&mut pairs)?;
        if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(EINVAL);
        }
        Ok(Self {
            layout: Layout::Sorted { pairs },
        })
    }

    /// Bytes this index holds.
    pub(crate) fn footprint(&self) -> usize {
        match &self.layout {
            Layout::Direct { slots, .. } => {
                (slots.capacity() * size_of::<u32>()).next_power_of_two()
            }
            Layout::Sorted { pairs } => {
                (pairs.capacity() * size_of::<(u32, u32)>()).next_power_of_two()
            }
        }
    }

    /// Position of the record with var id `id`.
    #[inline(always)]
    pub(crate) fn get(&self, id: u32) -> Option<usize> {
        match &self.layout {
            Layout::Direct { base, slots } => {
                let pos = *slots.get(id.wrapping_sub(*base) as usize)?;
                (pos != EMPTY).then_some(pos as usize)
            }
            Layout::Sorted { pairs } => pairs
                .binary_search_by_key(&id, |&(k, _)| k)
                .ok()
                .map(|i| pairs[i].1 as usize),
        }
    }

    /// Whether ids index the table directly.
    #[cfg(CONFIG_KUNIT = "y")]
    fn is_direct(&self) -> bool {
        matches!(self.layout, Layout::Direct { .. })
    }
}

#[kunit_tests(neuron_hbm_var_index)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_id_and_nothing_else() -> Result {
        let ids = [7u32, 0, u32::MAX - 1, 1 << 20, 3, 65536 * 7];
        let idx = VarIndex::new(ids.iter().copied(), ids.len())?;
        assert!(!idx.is_direct());
        for (pos, &id) in ids.iter().enumerate() {
            assert_eq!(idx.get(id), Some(pos));
        }
        assert_eq!(idx.get(1), None);
        assert_eq!(idx.get(u32::MAX), None);
        Ok(())
    }

    #[test]
    fn dense_ids_at_scale() -> Result {
        let n = 10_000u32;
        let idx = VarIndex::new((0..n).map(|i| i * 3), n as usize)?;
        assert!(!idx.is_direct());
        for i in 0..n {
            assert_eq!(idx.get(i * 3), Some(i as usize));
            assert_eq!(idx.get(i * 3 + 1), None);
        }
        Ok(())
    }

    #[test]
    fn compact_ids_index_directly() -> Result {
        // Ids 1000..1016 with every third one missing: a span of 16 for 11 ids.
        let ids: KVec<u32> = {
            let mut v = KVec::new();
            for id in (1000u32..1016).rev().filter(|id| id % 3 != 0) {
                v.push(id, GFP_KERNEL)?;
            }
            v
        };
        let idx = VarIndex::new(ids.iter().copied(), ids.len())?;
        assert!(idx.is_direct());
        assert_eq!(idx.footprint(), 64);
        for (pos, &id) in ids.iter().enumerate() {
            assert_eq!(idx.get(id), Some(pos));
        }
        for id in [0, 999, 1002, 1016, u32::MAX, 1000u32.wrapping_sub(1 << 31)] {
            assert_eq!(idx.get(id), None);
        }
        // A single id at the top of the range.
        let top = VarIndex::new([u32::MAX].into_iter(), 1)?;
        assert!(top.is_direct());
        assert_eq!(top.get(u32::MAX), Some(0));
        assert_eq!(top.get(0), None);
        Ok(())
    }

    #[test]
    fn heapsort_sorts_any_order() -> Result {
        for n in [0usize, 1, 2, 3, 1000, 4097] {
            let mut v = KVec::new();
            for i in 0..n as u32 {
                v.push((i.wrapping_mul(0x9e37_79b1) ^ 0x5bd1, i), GFP_KERNEL)?;
            }
            heapsort(&mut v)?;
            assert!(v.windows(2).all(|w| w[0].0 <= w[1].0));
            assert_eq!(v.len(), n);
        }
        Ok(())
    }

    #[test]
    fn ids_sharing_low_bits_stay_distinct() -> Result {
        // Ids that differ only above bit 16: one bucket for many simple hashes.
        let n = 4096u32;
        let idx = VarIndex::new((0..n).rev().map(|i| i << 17 | 5), n as usize)?;
        assert!(!idx.is_direct());
        assert_eq!(idx.footprint(), 8 * n as usize);
        for i in 0..n {
            assert_eq!(idx.get(i << 17 | 5), Some((n - 1 - i) as usize));
            assert_eq!(idx.get(i << 17 | 4), None);
        }
        assert_eq!(idx.get(u32::MAX), None);
        Ok(())
    }

    #[test]
    fn duplicate_is_refused() {
        let ids = [1u32, 2, 1];
        assert_eq!(VarIndex::new(ids.iter().copied(), 3).err(), Some(EINVAL));
        let sparse = [1u32, 1 << 20, 1];
        assert_eq!(VarIndex::new(sparse.iter().copied(), 3).err(), Some(EINVAL));
    }
}
