// SPDX-License-Identifier: GPL-2.0

//! `var_id -> record` index: open addressing over a table twice the number of
//! records, built once at load and read-only afterwards. Lookups are O(1)
//! expected and allocate nothing.

use kernel::prelude::*;

const EMPTY: u32 = u32::MAX;

/// Immutable map from var id to record position.
pub(crate) struct VarIndex {
    mask: usize,
    /// Record position per slot, or `EMPTY`.
    slots: KVVec<u32>,
    /// Var id of the record at each position (owned by the plan, copied here
    /// so a probe needs no other memory).
    ids: KVVec<u32>,
}

fn hash(id: u32) -> usize {
    // Fibonacci hashing: ids are often dense or strided.
    (id.wrapping_mul(0x9e37_79b9) as usize) ^ (id as usize >> 16)
}

impl VarIndex {
    /// Indexes `ids` (position `i` holds record `i`'s var id). `EINVAL` on a
    /// duplicate id.
    pub(crate) fn new(ids: impl Iterator<Item = u32> + Clone, count: usize) -> Result<Self> {
        let cap = (count.max(1) * 2).next_power_of_two();
        let mut slots = KVVec::with_capacity(cap, GFP_KERNEL)?;
        slots.resize(cap, EMPTY, GFP_KERNEL)?;
        let mut copy = KVVec::with_capacity(count, GFP_KERNEL)?;
        for id in ids.clone() {
            copy.push(id, GFP_KERNEL)?;
        }
        let mut index = Self {
            mask: cap - 1,
            slots,
            ids: copy,
        };
        for (pos, id) in ids.enumerate() {
            let mut slot = hash(id) & index.mask;
            loop {
                let cur = index.slots[slot];
                if cur == EMPTY {
                    index.slots[slot] = pos as u32;
                    break;
                }
                if index.ids[cur as usize] == id {
                    return Err(EINVAL);
                }
                slot = (slot + 1) & index.mask;
            }
        }
        Ok(index)
    }

    /// Bytes this index holds.
    pub(crate) fn footprint(&self) -> usize {
        let arr = |n: usize| (n * size_of::<u32>()).next_power_of_two();
        arr(self.slots.capacity()) + arr(self.ids.capacity())
    }

    /// Position of the record with var id `id`.
    pub(crate) fn get(&self, id: u32) -> Option<usize> {
        let mut slot = hash(id) & self.mask;
        loop {
            let cur = self.slots[slot];
            if cur == EMPTY {
                return None;
            }
            if self.ids[cur as usize] == id {
                return Some(cur as usize);
            }
            slot = (slot + 1) & self.mask;
        }
    }
}

#[kunit_tests(neuron_hbm_var_index)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_id_and_nothing_else() -> Result {
        let ids = [7u32, 0, u32::MAX - 1, 1 << 20, 3, 65536 * 7];
        let idx = VarIndex::new(ids.iter().copied(), ids.len())?;
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
        for i in 0..n {
            assert_eq!(idx.get(i * 3), Some(i as usize));
            assert_eq!(idx.get(i * 3 + 1), None);
        }
        Ok(())
    }

    #[test]
    fn duplicate_is_refused() {
        let ids = [1u32, 2, 1];
        assert_eq!(VarIndex::new(ids.iter().copied(), 3).err(), Some(EINVAL));
    }
}
