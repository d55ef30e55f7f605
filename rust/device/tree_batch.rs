// SPDX-License-Identifier: GPL-2.0-only

//! Reading a `u64`-keyed rbtree that writers share in short batches: each
//! batch is taken under one hold of the writers' lock, and the reader works
//! on it with the lock dropped, so a tree a tenant made huge never keeps
//! the writers waiting on a reader (debugfs `chunks`, `plans`, `kmem`, and
//! the revocation of every mapping).

use kernel::rbtree::RBTree;

/// Items in one batch.
pub(crate) const BATCH: usize = 64;

/// One batch: up to [`BATCH`] items, and the key the next starts from
/// (`None`: nothing left).
pub(crate) type Batch<T, K = u64> = ([Option<T>; BATCH], Option<K>);

/// Up to [`BATCH`] items `item(key, value)` of `tree` whose key is at or
/// above `from`, in key order. The caller holds the lock that guards `tree`.
pub(crate) fn batch_from<V, T>(
    tree: &RBTree<u64, V>,
    mut from: u64,
    item: impl Fn(u64, &V) -> T,
) -> Batch<T> {
    let mut batch = [const { None }; BATCH];
    for slot in batch.iter_mut() {
        let Some(c) = tree.cursor_lower_bound(&from) else {
            return (batch, None);
        };
        let (&key, value) = c.current();
        *slot = Some(item(key, value));
        match key.checked_add(1) {
            Some(next) => from = next,
            None => return (batch, None),
        }
    }
    (batch, Some(from))
}

/// Calls `f` with every item of the batches `next` gives, from key `start`
/// on; `next` takes and drops the lock itself, so none is held while `f`
/// runs, and the walk offers to reschedule between batches: a tree of
/// millions of items is read without hogging the CPU.
pub(crate) fn walk<K, T, E>(
    start: K,
    mut next: impl FnMut(K) -> Batch<T, K>,
    mut f: impl FnMut(T) -> core::result::Result<(), E>,
) -> core::result::Result<(), E> {
    let mut from = Some(start);
    while let Some(key) = from {
        let (batch, after) = next(key);
        for item in batch.into_iter().flatten() {
            f(item)?;
        }
        from = after;
        crate::abstractions::resched::yield_now();
    }
    Ok(())
}
