// SPDX-License-Identifier: GPL-2.0-only

//! Sparse byte store backing a simulated BAR: pages are allocated on first
//! write, read as zeros until then, and dropped again when zeroed, so a
//! 256 GiB BAR costs only what tests touch.

use crate::{
    blank_page::Blank,
    io::{check_range, Gate, XFER_CHUNK},
    user_source::UserSource,
};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation},
    sync::Mutex,
};

/// Bytes copied under one hold of the page lock.
const LOCK_SPAN: usize = 64 * 1024;

/// Granule of the store: the smallest HBM allocation (`min_alloc`'s
/// default), so that a payload, which starts on an allocation boundary,
/// covers every page it touches whole but its last one.
const SIM_PAGE: usize = 4096;

/// Pages one step of a user write places under one hold of the lock: a
/// transfer piece.
const GROUP: usize = XFER_CHUNK / SIM_PAGE;

/// One simulated page.
type Page = KBox<[u8; SIM_PAGE]>;

/// The resident pages.
struct Pages {
    tree: RBTree<usize, Page>,
}

/// Pages one user write replaced, kept for its own next pages and freed when
/// it ends: a page is charged to the memory cgroup of the task that
/// allocated it, and a page kept across writes would carry one tenant's
/// charge into another's memory.
type Spares = [Option<Page>; GROUP];

/// A sparse, page-granular byte store of a fixed size. An access holds
/// `pages` for at most [`LOCK_SPAN`] bytes of copying between kernel buffers;
/// user memory never takes part (it could fault for as long as its owner
/// likes, with every other user of the device waiting).
#[pin_data]
pub(crate) struct SparseMem {
    size: u64,
    #[pin]
    pages: Mutex<Pages>,
}

/// A fresh page of zeros, charged to the memory cgroup of the task whose
/// write materializes it.
fn zeroed_page() -> Result<Page> {
    Ok(KBox::zeroed(GFP_KERNEL_ACCOUNT)?)
}

/// Which way a page access copies.
enum Copy<'a> {
    From(&'a [u8]),
    To(&'a mut [u8]),
}

/// Page index, offset in the page and bytes in the page of the part of an
/// access of `len` bytes at `off` that starts `done` bytes in.
fn page_part(off: u64, done: usize, len: usize) -> Result<(usize, usize, usize)> {
    let pos = off + done as u64;
    let idx = usize::try_from(pos / SIM_PAGE as u64)?;
    let in_page = (pos % SIM_PAGE as u64) as usize;
    Ok((idx, in_page, (SIM_PAGE - in_page).min(len - done)))
}

impl SparseMem {
    /// A store of `size` bytes, all zero.
    pub(crate) fn new(size: u64) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            size,
            pages <- new_mutex!(Pages {
                tree: RBTree::new(),
            }),
        })
    }

    /// Number of pages currently materialized.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn resident_pages(&self) -> usize {
        self.pages.lock().tree.iter().count()
    }

    fn walk(&self, off: u64, len: usize, mut op: Copy<'_>) -> Result {
        check_range(off, len as u64, self.size)?;
        let create = matches!(op, Copy::From(_));
        let mut done = 0usize;
        let mut pages = self.pages.lock();
        let mut held = 0usize;
        while done < len {
            if held >= LOCK_SPAN {
                // Let others in between spans.
                drop(pages);
                pages = self.pages.lock();
                held = 0;
            }
            let (idx, in_page, n) = page_part(off, done, len)?;
            held += n;
            if create && pages.tree.get(&idx).is_none() {
                // Allocated with the lock dropped: reclaim in the writer's
                // memory cgroup never runs while every other user of the
                // device waits on `pages`.
                drop(pages);
                let node = RBTreeNode::new(idx, zeroed_page()?, GFP_KERNEL_ACCOUNT)?;
                pages = self.pages.lock();
                held = n;
                if pages.tree.get(&idx).is_none() {
                    // Nothing to replace: the slot was just seen empty.
                    let _ = pages.tree.insert(node);
                }
            }
            match pages.tree.get_mut(&idx) {
                Some(page) => {
                    let bytes = &mut page[in_page..in_page + n];
                    match &mut op {
                        Copy::From(src) => bytes.copy_from_slice(&src[done..done + n]),
                        Copy::To(dst) => dst[done..done + n].copy_from_slice(bytes),
                    }
                }
                None => match &mut op {
                    Copy::To(dst) => dst[done..done + n].fill(0),
                    Copy::From(_) => {}
                },
            }
            done += n;
        }
        Ok(())
    }

    /// Writes `src` at `off`.
    pub(crate) fn write(&self, off: u64, src: &[u8]) -> Result {
        self.walk(off, src.len(), Copy::From(src))
    }

    /// Writes `len` bytes read from `src` at `off`, each byte copied once and
    /// with no lock held while user memory is read: every page the write
    /// touches is filled while it is still private (a page this write
    /// replaced, or a fresh one charged to the writer, never zeroed first),
    /// up to a piece's worth of pages at
    /// a time, and then put in place of the resident page under one hold of
    /// the lock. A page the write covers only in part takes the rest of its
    /// bytes from the page it replaces (zeros where there is none); with
    /// pages of the smallest allocation, that is only ever the last page of
    /// a payload, and the rest is padding. Only the steps that change the
    /// store run inside `gate`, never a user copy.
    pub(crate) fn write_from_user(
        &self,
        off: u64,
        src: &mut UserSource,
        len: usize,
        gate: Gate<'_>,
    ) -> Result {
        check_range(off, len as u64, self.size)?;
        let mut done = 0usize;
        let mut spares: Spares = [const { None }; GROUP];
        while done < len {
            let mut blanks: [Option<(usize, Blank<SIM_PAGE>)>; GROUP] = [const { None }; GROUP];
            let mut count = 0;
            let mut end = done;
            while end < len && count < GROUP {
                end += page_part(off, end, len)?.2;
                count += 1;
            }
            for (slot, page) in blanks.iter_mut().zip(spares.iter_mut()).take(count) {
                let (idx, in_page, n) = page_part(off, done, len)?;
                let mut blank = match page.take() {
                    Some(p) => Blank::reuse(p),
                    None => Blank::new(GFP_KERNEL_ACCOUNT)?,
                };
                blank.fill_from_user(src, in_page, n)?;
                *slot = Some((idx, blank));
                done += n;
            }
            // Tree nodes for pages not yet resident, allocated with the lock
            // dropped as many as the last try missed.
            let mut nodes: [Option<RBTreeNodeReservation<usize, Page>>; GROUP] =
                [const { None }; GROUP];
            loop {
                let mut missing = 0;
                gate(&mut || {
                    missing = self.place(&mut blanks, &mut nodes, &mut spares);
                    Ok(())
                })?;
                if missing == 0 {
                    break;
                }
                for slot in nodes.iter_mut().filter(|n| n.is_none()).take(missing) {
                    *slot = Some(RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?);
                }
            }
        }
        Ok(())
    }

    /// Puts each filled page of `blanks` (in ascending order) in place under
    /// one hold of the lock: in place of the resident page (which goes to
    /// `spares`), or in a node of `nodes`. Returns how many found neither (left
    /// in `blanks`). Resident pages are found by walking the tree from the
    /// first, not by a lookup each.
    fn place(
        &self,
        blanks: &mut [Option<(usize, Blank<SIM_PAGE>)>],
        nodes: &mut [Option<RBTreeNodeReservation<usize, Page>>],
        spares: &mut Spares,
    ) -> usize {
        let mut pages = self.pages.lock();
        let tree = &mut pages.tree;
        // Resident pages: one walk of the tree from the first page on.
        let first = blanks.iter().flatten().map(|(idx, _)| *idx).next();
        let mut cursor = first.and_then(|idx| tree.cursor_lower_bound_mut(&idx));
        for slot in blanks.iter_mut() {
            let Some(idx) = slot.as_ref().map(|(idx, _)| *idx) else {
                continue;
            };
            while cursor.as_ref().is_some_and(|c| *c.current().0 < idx) {
                cursor = cursor.and_then(|c| c.move_next());
            }
            let Some(c) = cursor.as_mut().filter(|c| *c.current().0 == idx) else {
                continue;
            };
            if let Some((_, blank)) = slot.take() {
                let old = c.current_mut().1;
                let new = blank.finish(Some(old));
                let old = core::mem::replace(old, new);
                // Beyond the spares kept, the page is freed.
                if let Some(free) = spares.iter_mut().find(|s| s.is_none()) {
                    *free = Some(old);
                }
            }
        }
        // The rest are new: a node each, as far as `nodes` go.
        let mut missing = 0;
        for slot in blanks.iter_mut() {
            if slot.is_none() {
                continue;
            }
            match nodes.iter_mut().find_map(Option::take) {
                Some(node) => {
                    if let Some((idx, blank)) = slot.take() {
                        let _ = tree.insert(node.into_node(idx, blank.finish(None)));
                    }
                }
                None => missing += 1,
            }
        }
        missing
    }

    /// Reads `dst.len()` bytes at `off`.
    pub(crate) fn read(&self, off: u64, dst: &mut [u8]) -> Result {
        let len = dst.len();
        self.walk(off, len, Copy::To(dst))
    }

    /// Zeroes `[off, off + len)`: resident pages inside the range are dropped,
    /// the partial pages at its ends are cleared. Costs what is resident, not
    /// what the range spans.
    pub(crate) fn zero(&self, off: u64, len: u64) -> Result {
        check_range(off, len, self.size)?;
        let end = off + len;
        let page = SIM_PAGE as u64;
        let mut pages = self.pages.lock();
        for pos in [off, end.saturating_sub(1)] {
            if len == 0 {
                break;
            }
            let idx = usize::try_from(pos / page)?;
            let first = (idx as u64 * page).max(off);
            let last = ((idx as u64 + 1) * page).min(end);
            if let Some(p) = pages.tree.get_mut(&idx) {
                let base = idx as u64 * page;
                p[(first - base) as usize..(last - base) as usize].fill(0);
            }
        }
        // Whole pages: drop every resident one in [ceil(off), floor(end)).
        let first_whole = usize::try_from(off.div_ceil(page))?;
        let end_whole = usize::try_from(end / page)?;
        while let Some(cursor) = pages.tree.cursor_lower_bound_mut(&first_whole) {
            if *cursor.current().0 >= end_whole {
                break;
            }
            let (_, node) = cursor.remove_current();
            drop(node);
        }
        Ok(())
    }
}

#[kunit_tests(neuron_hbm_sparse)]
mod tests {
    use super::*;
    use crate::arch::GIB;

    #[test]
    fn untouched_reads_zero_and_costs_nothing() -> Result {
        let m = KBox::pin_init(SparseMem::new(32 * GIB), GFP_KERNEL)?;
        let mut buf = [0xffu8; 16];
        m.read(20 * GIB, &mut buf)?;
        assert_eq!(buf, [0u8; 16]);
        assert_eq!(m.resident_pages(), 0);
        Ok(())
    }

    #[test]
    fn write_read_across_pages() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        let src: [u8; 100] = core::array::from_fn(|i| i as u8 + 1);
        let off = 3 * SIM_PAGE as u64 - 40;
        m.write(off, &src)?;
        assert_eq!(m.resident_pages(), 2);
        let mut dst = [0u8; 100];
        m.read(off, &mut dst)?;
        assert_eq!(dst, src);
        Ok(())
    }

    #[test]
    fn pages_written_whole_or_in_part_hold_exactly_the_bytes() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        // Page 0 in part (its last 100 bytes), pages 1 and 2 whole, page 3
        // in part: the parts never written read as zeros.
        let mut src = KVec::with_capacity(2 * SIM_PAGE + 200, GFP_KERNEL)?;
        for i in 0..2 * SIM_PAGE + 200 {
            src.push((i % 251) as u8 + 1, GFP_KERNEL)?;
        }
        let off = SIM_PAGE - 100;
        m.write(off as u64, &src)?;
        assert_eq!(m.resident_pages(), 4);
        let mut dst = KVec::from_elem(0xffu8, 4 * SIM_PAGE, GFP_KERNEL)?;
        m.read(0, &mut dst)?;
        assert!(dst[..off].iter().all(|&b| b == 0));
        assert!(dst[off..off + src.len()] == src[..]);
        assert!(dst[off + src.len()..].iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn zero_drops_whole_pages() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        let src = KVec::from_elem(7u8, 3 * SIM_PAGE, GFP_KERNEL)?;
        m.write(0, &src)?;
        assert_eq!(m.resident_pages(), 3);
        m.zero(100, 2 * SIM_PAGE as u64)?;
        assert_eq!(m.resident_pages(), 2); // page 1 dropped, 0 and 2 zeroed in part
        let mut dst = KVec::from_elem(1u8, 3 * SIM_PAGE, GFP_KERNEL)?;
        m.read(0, &mut dst)?;
        assert!(dst[..100].iter().all(|&b| b == 7));
        assert!(dst[100..100 + 2 * SIM_PAGE].iter().all(|&b| b == 0));
        assert!(dst[100 + 2 * SIM_PAGE..].iter().all(|&b| b == 7));
        Ok(())
    }

    #[test]
    fn out_of_range_is_refused() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        assert_eq!(m.write(GIB - 1, &[0, 0]), Err(ERANGE));
        assert_eq!(m.zero(u64::MAX, 2), Err(ERANGE));
        Ok(())
    }
}
