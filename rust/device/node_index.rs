// SPDX-License-Identifier: GPL-2.0-only

//! Device indices: the `N` of `/dev/neuron_hbmN`, claimed by a device when it
//! is created and given back when its last user is gone.

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Maximum devices (and device nodes): a host has at most 16 Neuron devices.
pub(crate) const MAX_NODES: usize = 16;

/// A set of device indices `0..MAX_NODES`, one bit each.
pub(crate) struct IndexSet(Atomic<u32>);

/// The indices of the module's devices.
static DEVICE_INDICES: IndexSet = IndexSet::new();

impl IndexSet {
    /// All indices free.
    pub(crate) const fn new() -> Self {
        Self(Atomic::new(0))
    }

    /// Claims the lowest free index, `ENOSPC` when all [`MAX_NODES`] are taken.
    pub(crate) fn claim(&'static self) -> Result<NodeIndex> {
        let mut cur = self.0.load(Relaxed);
        loop {
            let i = cur.trailing_ones();
            if i as usize >= MAX_NODES {
                return Err(ENOSPC);
            }
            match self.0.cmpxchg(cur, cur | 1 << i, Relaxed) {
                Ok(_) => {
                    return Ok(NodeIndex {
                        set: self,
                        index: i,
                    })
                }
                Err(now) => cur = now,
            }
        }
    }
}

/// A claimed device index, free again when dropped: a device gives its index
/// back when the last user of it is gone.
pub(crate) struct NodeIndex {
    set: &'static IndexSet,
    index: u32,
}

impl NodeIndex {
    /// Claims the lowest free index of the module's devices.
    pub(crate) fn claim() -> Result<Self> {
        DEVICE_INDICES.claim()
    }

    /// The index.
    pub(crate) fn get(&self) -> u32 {
        self.index
    }
}

impl Drop for NodeIndex {
    fn drop(&mut self) {
        let bit = 1u32 << self.index;
        let mut cur = self.set.0.load(Relaxed);
        while let Err(now) = self.set.0.cmpxchg(cur, cur & !bit, Relaxed) {
            cur = now;
        }
    }
}

#[kunit_tests(neuron_hbm_node_index)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_claimed_lowest_first_and_reused() -> Result {
        static SET: IndexSet = IndexSet::new();
        // Many more claims in sequence than there are indices.
        for _ in 0..4 * MAX_NODES {
            assert_eq!(SET.claim()?.get(), 0);
        }
        let mut held = KVec::new();
        for i in 0..MAX_NODES {
            let n = SET.claim()?;
            assert_eq!(n.get(), i as u32);
            held.push(n, GFP_KERNEL)?;
        }
        assert_eq!(SET.claim().err(), Some(ENOSPC));
        drop(held.remove(5)?);
        assert_eq!(SET.claim()?.get(), 5);
        Ok(())
    }
}
