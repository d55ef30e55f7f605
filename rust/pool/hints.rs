// SPDX-License-Identifier: GPL-2.0-only

//! Where a run of allocations may begin its next search of a pool. Each
//! allocation of a plan's records, one chunk each, would search its pool
//! from the start and pass every chunk the ones before it took: a plan of
//! n small, aligned records, whose gaps no word-at-a-time skip can jump,
//! would cost its loader n^2/2 steps. [`FitHints`] remembers, for each kind
//! of chunk, where the last search of its pool ended: no chunk of that kind
//! fits below it (the run's own chunks only take room), so the next search
//! begins there and the run costs one pass over each pool per kind. Room
//! that another tenant frees below a hint meanwhile is not seen by the run.

use crate::{
    abstractions::genpool::{GenChunk, GenPool},
    arch::MAX_REGIONS,
    pool::fit::FirstFitFrom,
};
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// Tree nodes kept ready: one allocation may meet a new kind of chunk in
/// each pool of each region it tries.
const SPARES: usize = 2 * MAX_REGIONS;

/// Where the searches of a run of allocations resume, by kind of chunk.
pub(crate) struct FitHints {
    /// The first granule a chunk of each kind may still fit at, keyed by
    /// [`key`].
    next: RBTree<u64, usize>,
    /// Nodes for kinds not seen yet, taken before an allocation so that
    /// remembering never fails after it.
    spares: KVec<RBTreeNodeReservation<u64, usize>>,
}

/// The kind of a chunk: the pool it is searched in (`region`, and the
/// region's small pool or its main one), its alignment and its granules.
/// A search for one kind says nothing of another.
fn key(region: usize, small: bool, align: u64, granules: u64) -> u64 {
    (granules << 16)
        | (u64::from(align.trailing_zeros()) << 8)
        | (u64::from(small) << 7)
        | region as u64
}

impl FitHints {
    /// Hints of a run that has searched nothing yet.
    pub(crate) fn new() -> Self {
        Self {
            next: RBTree::new(),
            spares: KVec::new(),
        }
    }

    /// Makes sure the next allocation can remember where it ended in every
    /// pool it tries.
    pub(crate) fn reserve(&mut self) -> Result {
        while self.spares.len() < SPARES {
            let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
            self.spares.push(node, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(())
    }

    /// Allocates `size` bytes (granules of `gen`) at byte alignment `align`
    /// from `gen`, which is pool (`region`, `small`), first fit from where
    /// the last search for such a chunk ended.
    pub(crate) fn alloc(
        &mut self,
        gen: &GenPool,
        (region, small): (usize, bool),
        size: u64,
        align: u64,
    ) -> Result<GenChunk> {
        let granules = size / gen.granule();
        let key = key(region, small, align, granules);
        let known = self.next.get_mut(&key);
        let from = known.as_deref().copied().unwrap_or(0);
        let chunk = gen.alloc_with(size, &FirstFitFrom::new(gen, align, from));
        let next = match &chunk {
            Ok(c) => gen.granule_of(c.va()) + granules as usize,
            // Nothing of this kind fits from `from` on.
            Err(_) => gen.granules(),
        };
        match known {
            Some(at) => *at = next,
            None => {
                if let Some(node) = self.spares.pop() {
                    self.next.insert(node.into_node(key, next));
                }
            }
        }
        chunk
    }
}
