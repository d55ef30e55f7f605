// SPDX-License-Identifier: GPL-2.0

//! `var_id -> record` index, built once at load and read-only afterwards.
//! Lookups allocate nothing and take O(1): compilers number variables
//! densely, and such ids index a table directly; any other id set goes to
//! open addressing over a table twice the number of records.

use kernel::prelude::*;

const EMPTY: u32 = u32::MAX;

/// How ids map to slots.
enum Layout {
    /// Slot `id - base`: used when the ids span at most twice their count.
    Direct { base: u32 },
    /// Fibonacci-hashed, linear probing; `ids` holds the var id of the
    /// record at each position so that a probe needs no other memory.
    Hashed { mask: usize, ids: KVVec<u32> },
}

/// Immutable map from var id to record position.
pub(crate) struct VarIndex {
    /// Record position per slot, or `EMPTY`.
    slots: KVVec<u32>,
    layout: Layout,
}

fn hash(id: u32) -> usize {
    (id.wrapping_mul(0x9e37_79b9) as usize) ^ (id as usize >> 16)
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
            Self::hashed(ids, count)
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
            slots,
            layout: Layout::Direct { base },
        })
    }

    fn hashed(ids: impl Iterator<Item = u32> + Clone, count: usize) -> Result<Self> {
        let cap = (count.max(1) * 2).next_power_of_two();
        let mask = cap - 1;
        let mut slots = KVVec::with_capacity(cap, GFP_KERNEL_ACCOUNT)?;
        slots.resize(cap, EMPTY, GFP_KERNEL_ACCOUNT)?;
        let mut copy = KVVec::with_capacity(count, GFP_KERNEL_ACCOUNT)?;
        for id in ids.clone() {
            copy.push(id, GFP_KERNEL_ACCOUNT)?;
        }
        for (pos, id) in ids.enumerate() {
            let mut slot = hash(id) & mask;
            loop {
                let cur = slots[slot];
                if cur == EMPTY {
                    slots[slot] = pos as u32;
                    break;
                }
                if copy[cur as usize] == id {
                    return Err(EINVAL);
                }
                slot = (slot + 1) & mask;
            }
        }
        Ok(Self {
            slots,
            layout: Layout::Hashed { mask, ids: copy },
        })
    }

    /// Bytes this index holds.
    pub(crate) fn footprint(&self) -> usize {
        let arr = |n: usize| (n * size_of::<u32>()).next_power_of_two();
        arr(self.slots.capacity())
            + match &self.layout {
                Layout::Direct { .. } => 0,
                Layout::Hashed { ids, .. } => arr(ids.capacity()),
            }
    }

    /// Position of the record with var id `id`.
    #[inline(always)]
    pub(crate) fn get(&self, id: u32) -> Option<usize> {
        match &self.layout {
            Layout::Direct { base } => {
                let pos = *self.slots.get(id.wrapping_sub(*base) as usize)?;
                (pos != EMPTY).then_some(pos as usize)
            }
            Layout::Hashed { mask, ids } => {
                let mut slot = hash(id) & mask;
                loop {
                    let cur = self.slots[slot];
                    if cur == EMPTY {
                        return None;
                    }
                    if ids[cur as usize] == id {
                        return Some(cur as usize);
                    }
                    slot = (slot + 1) & mask;
                }
            }
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
    fn duplicate_is_refused() {
        let ids = [1u32, 2, 1];
        assert_eq!(VarIndex::new(ids.iter().copied(), 3).err(), Some(EINVAL));
        let sparse = [1u32, 1 << 20, 1];
        assert_eq!(VarIndex::new(sparse.iter().copied(), 3).err(), Some(EINVAL));
    }
}
