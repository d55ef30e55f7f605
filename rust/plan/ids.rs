// SPDX-License-Identifier: GPL-2.0-only

//! Plan ids of one open file: taken when a load starts, so that no two
//! plans, live or still loading, ever have the same id, however often the
//! 32-bit counter wraps.

use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// A node of the set of ids being loaded, allocated before the file's lock
/// is taken.
pub(crate) type IdNode = RBTreeNodeReservation<u32, ()>;

/// The ids of one file: a counter and the ids of loads in flight.
pub(crate) struct PlanIds {
    next: u32,
    loading: RBTree<u32, ()>,
}

impl PlanIds {
    /// Ids count up from 1 (0 is never an id).
    pub(crate) fn new() -> Self {
        Self::starting_at(1)
    }

    /// Ids counting up from `next` (tests start near the wrap).
    pub(crate) fn starting_at(next: u32) -> Self {
        Self {
            next: next.max(1),
            loading: RBTree::new(),
        }
    }

    /// Takes the next id that neither a live plan (`live`) nor a load in
    /// flight holds, and holds it for a load until [`PlanIds::release`].
    /// The file holds at most `NHBM_MAX_PLANS_PER_FILE` live plans and one
    /// load per thread in flight, so the search ends long before it could
    /// come round.
    pub(crate) fn take(&mut self, live: impl Fn(u32) -> bool, node: IdNode) -> u32 {
        let mut id = self.next;
        while live(id) || self.loading.get(&id).is_some() {
            id = id.wrapping_add(1).max(1);
        }
        self.next = id.wrapping_add(1).max(1);
        self.loading.insert(node.into_node(id, ()));
        id
    }

    /// Ends the load that holds `id`, whether it was listed or failed.
    pub(crate) fn release(&mut self, id: u32) {
        self.loading.remove(&id);
    }
}

#[kunit_tests(neuron_hbm_plan_ids)]
mod tests {
    use super::*;

    fn node() -> Result<IdNode> {
        RBTreeNodeReservation::new(GFP_KERNEL)
    }

    #[test]
    fn a_stalled_load_keeps_its_id_across_the_wrap() -> Result {
        let mut ids = PlanIds::starting_at(u32::MAX - 1);
        // A load that stalls holds u32::MAX - 1; a live plan holds 1.
        let stalled = ids.take(|_| false, node()?);
        assert_eq!(stalled, u32::MAX - 1);
        let live = |id: u32| id == 1;
        // Loads that come and go drive the counter across the wrap: 0 and
        // the live plan's id are skipped.
        let mut seen = KVec::new();
        for _ in 0..3 {
            let id = ids.take(live, node()?);
            ids.release(id);
            seen.push(id, GFP_KERNEL)?;
        }
        assert_eq!(&seen[..], &[u32::MAX, 2, 3]);
        // 2^32 loads later the counter reaches the stalled id again.
        let mut again = PlanIds::starting_at(stalled);
        again.loading = core::mem::replace(&mut ids.loading, RBTree::new());
        let id = again.take(live, node()?);
        assert_ne!(id, stalled);
        assert_eq!(id, u32::MAX);
        // Once the stalled load ends, its id is free again.
        again.release(stalled);
        again.release(id);
        let mut back = PlanIds::starting_at(stalled);
        back.loading = core::mem::replace(&mut again.loading, RBTree::new());
        assert_eq!(back.take(live, node()?), stalled);
        Ok(())
    }
}
