// SPDX-License-Identifier: GPL-2.0-only

//! Sparse byte store backing a simulated BAR: pages are allocated on first
//! write, read as zeros until then, and dropped again when zeroed, so a
//! 256 GiB BAR costs only what tests touch. Pages are kept in groups of a
//! transfer piece's worth, one tree node per group.

use crate::{
    abstractions::blank_page::Blank,
    abstractions::page_box::{PageBox, Uninit, BATCH},
    abstractions::user_source::UserSource,
    hw::io::{check_range, Gate, XFER_CHUNK},
};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Mutex, MutexGuard},
};

/// Bytes copied under one hold of the page lock.
const LOCK_SPAN: usize = 64 * 1024;

/// Granule of the store: a page of the kernel's, which a process can map;
/// 4 KiB on x86-64, the smallest HBM allocation (`min_alloc`'s default), so
/// that a payload, which starts on an allocation boundary, covers every page
/// it touches whole but its last one.
const SIM_PAGE: usize = kernel::page::PAGE_SIZE;

/// Pages one step of a user write places under one hold of the lock: a
/// transfer piece.
const GROUP: usize = XFER_CHUNK / SIM_PAGE;

/// One simulated page.
type Page = PageBox;

/// The pages of one group: [`GROUP`] consecutive pages, page `g * GROUP + i`
/// in slot `i` of group `g`.
type Group = [Option<Page>; GROUP];

/// Group and slot of page `idx`.
fn split(idx: usize) -> (usize, usize) {
    (idx / GROUP, idx % GROUP)
}

/// Makes `blank` page `i` of `group`, in place of the resident page, which
/// goes to a free slot of `spares` (or is freed); a page a process maps
/// (or pinned) stays where the mapping sees it and takes the new bytes.
fn swap_in(group: &mut Group, i: usize, blank: Blank, spares: &mut Spares) {
    let spare = match group[i].as_mut() {
        Some(old) if old.is_shared() => {
            let new = blank.finish(Some(old));
            old.copy_from(&new);
            Some(new)
        }
        _ => {
            let old = group[i].take();
            group[i] = Some(blank.finish(old.as_ref()));
            old
        }
    };
    // Beyond the spares kept, the page is freed; a shared page never
    // becomes a spare.
    if let (Some(page), Some(free)) = (spare, spares.iter_mut().find(|s| s.is_none())) {
        *free = Some(page);
    }
}

/// The resident pages, by group; a group holds at least one.
struct Pages {
    tree: RBTree<usize, Group>,
}

impl Pages {
    /// Page `idx`, if resident.
    fn page_mut(&mut self, idx: usize) -> Option<&mut Page> {
        let (g, i) = split(idx);
        self.tree.get_mut(&g)?[i].as_mut()
    }

    /// Whether page `idx` is resident.
    fn has_page(&self, idx: usize) -> bool {
        let (g, i) = split(idx);
        self.tree.get(&g).is_some_and(|group| group[i].is_some())
    }

    /// Makes `page` page `idx` unless one is resident there already (then
    /// `page` is dropped): in its group, or in a new group in `node`.
    /// Hands `page` back when its group is not resident and there is no
    /// node.
    fn put(
        &mut self,
        idx: usize,
        page: Page,
        node: &mut Option<RBTreeNodeReservation<usize, Group>>,
    ) -> core::result::Result<(), Page> {
        let (g, i) = split(idx);
        if let Some(group) = self.tree.get_mut(&g) {
            if group[i].is_none() {
                group[i] = Some(page);
            }
            return Ok(());
        }
        let Some(node) = node.take() else {
            return Err(page);
        };
        let mut group: Group = [const { None }; GROUP];
        group[i] = Some(page);
        let _ = self.tree.insert(node.into_node(g, group));
        Ok(())
    }
}

/// Pages one user write replaced, kept for its own next pages and freed when
/// it ends: a page is charged to the memory cgroup of the task that
/// allocated it, and a page kept across writes would carry one tenant's
/// charge into another's memory.
type Spares = [Option<Page>; GROUP];

/// Fresh pages for one user write, allocated [`BATCH`] at a time (a page's
/// allocation cost a quarter of a written page's time in PLAN_LOAD, one at
/// a time) until the allocator has no such block free, then one at a time
/// for the rest of the write; charged to the writer, and what the write
/// leaves unused is freed when it ends, as [`Spares`] are.
struct Fresh {
    pages: [Option<Uninit>; BATCH],
    /// Whether the last batch came whole.
    batches: bool,
}

impl Fresh {
    fn new() -> Self {
        Self {
            pages: [const { None }; BATCH],
            batches: true,
        }
    }

    /// The next fresh page.
    fn take(&mut self) -> Result<Uninit> {
        if let Some(page) = self.pages.iter_mut().find_map(Option::take) {
            return Ok(page);
        }
        if !self.batches {
            return PageBox::new_uninit(GFP_KERNEL_ACCOUNT);
        }
        self.pages = PageBox::new_uninit_batch()?;
        self.batches = self.pages.iter().all(Option::is_some);
        self.pages.iter_mut().find_map(Option::take).ok_or(ENOMEM)
    }
}

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
    PageBox::zeroed(GFP_KERNEL_ACCOUNT)
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
        let pages = self.pages.lock();
        pages
            .tree
            .iter()
            .map(|(_, group)| group.iter().flatten().count())
            .sum()
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
            if create && !pages.has_page(idx) {
                pages = self.materialize(pages, idx)?;
                held = n;
            }
            match pages.page_mut(idx) {
                Some(page) => match &mut op {
                    Copy::From(src) => page.write(in_page, &src[done..done + n])?,
                    Copy::To(dst) => page.read(in_page, &mut dst[done..done + n])?,
                },
                None => match &mut op {
                    Copy::To(dst) => dst[done..done + n].fill(0),
                    Copy::From(_) => {}
                },
            }
            done += n;
        }
        Ok(())
    }

    /// Makes page `idx` resident (zeroed, charged to the caller's memory
    /// cgroup) if it is not, with `pages` dropped while it is allocated:
    /// reclaim in the caller's cgroup never runs while every other user of
    /// the device waits on the lock. Returns the lock, held again.
    fn materialize<'a>(
        &'a self,
        mut pages: MutexGuard<'a, Pages>,
        idx: usize,
    ) -> Result<MutexGuard<'a, Pages>> {
        while !pages.has_page(idx) {
            // A node only for a new group; if the group went meanwhile, once more.
            let new_group = pages.tree.get(&split(idx).0).is_none();
            drop(pages);
            let page = zeroed_page()?;
            let mut node = match new_group {
                true => Some(RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?),
                false => None,
            };
            pages = self.pages.lock();
            // A page handed back (its group went) is freed.
            let _ = pages.put(idx, page, &mut node);
        }
        Ok(pages)
    }

    /// Calls `insert` with the page frame of the page at `off`, a page
    /// boundary, for a process to map: a page not resident yet is
    /// allocated (zeroed, charged to the caller's memory cgroup, as a write
    /// would). `insert` runs with the lock free (it may allocate page
    /// tables, and reclaim in the caller's cgroup), on a reference of its
    /// own to the page, taken under the lock: a write meanwhile sees the
    /// page shared and writes it in place (see `place`), so the page
    /// mapped is the one the store keeps.
    pub(crate) fn map_page(&self, off: u64, insert: &mut dyn FnMut(usize) -> Result) -> Result {
        check_range(off, SIM_PAGE as u64, self.size)?;
        if off % SIM_PAGE as u64 != 0 {
            return Err(EINVAL);
        }
        let idx = usize::try_from(off / SIM_PAGE as u64)?;
        let page = {
            let mut pages = self.materialize(self.pages.lock(), idx)?;
            pages.page_mut(idx).ok_or(EFAULT)?.new_ref()?
        };
        insert(page.pfn())
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
        let mut fresh = Fresh::new();
        // Tree nodes for groups not yet resident, allocated with the lock
        // dropped; one is reserved before each first try (after an unload
        // every group is new) and kept for the next group if unused.
        let mut nodes: [Option<RBTreeNodeReservation<usize, Group>>; GROUP] =
            [const { None }; GROUP];
        while done < len {
            let mut blanks: [Option<(usize, Blank)>; GROUP] = [const { None }; GROUP];
            let mut count = 0;
            let mut end = done;
            while end < len && count < GROUP {
                end += page_part(off, end, len)?.2;
                count += 1;
            }
            for (slot, page) in blanks.iter_mut().zip(spares.iter_mut()).take(count) {
                let (idx, in_page, n) = page_part(off, done, len)?;
                let mut blank = match page.take() {
                    Some(p) => Blank::reuse(p, GFP_KERNEL_ACCOUNT)?,
                    None => Blank::new(fresh.take()?),
                };
                blank.fill_from_user(src, in_page, n)?;
                *slot = Some((idx, blank));
                done += n;
            }
            if nodes.iter().all(Option::is_none) {
                nodes[0] = Some(RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?);
            }
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
    /// `spares`), in its resident group, or in a new group in a node of
    /// `nodes`; one tree lookup a group. Returns how many new groups found
    /// no node (their pages are left in `blanks`).
    fn place(
        &self,
        blanks: &mut [Option<(usize, Blank)>],
        nodes: &mut [Option<RBTreeNodeReservation<usize, Group>>],
        spares: &mut Spares,
    ) -> usize {
        let group_of = |slot: &Option<(usize, Blank)>| slot.as_ref().map(|(idx, _)| split(*idx).0);
        let mut pages = self.pages.lock();
        let mut missing = 0;
        let mut k = 0;
        while k < blanks.len() {
            let Some(g) = group_of(&blanks[k]) else {
                k += 1;
                continue;
            };
            // Ascending order keeps a group's pages together.
            let end = k
                + 1
                + blanks[k + 1..]
                    .iter()
                    .take_while(|s| group_of(s).is_none_or(|h| h == g))
                    .count();
            if pages.tree.get(&g).is_none() {
                let Some(node) = nodes.iter_mut().find_map(Option::take) else {
                    missing += 1;
                    k = end;
                    continue;
                };
                let _ = pages
                    .tree
                    .insert(node.into_node(g, [const { None }; GROUP]));
            }
            if let Some(group) = pages.tree.get_mut(&g) {
                for (idx, blank) in blanks[k..end].iter_mut().filter_map(Option::take) {
                    swap_in(group, split(idx).1, blank, spares);
                }
            }
            k = end;
        }
        missing
    }

    /// Reads `dst.len()` bytes at `off`.
    pub(crate) fn read(&self, off: u64, dst: &mut [u8]) -> Result {
        let len = dst.len();
        self.walk(off, len, Copy::To(dst))
    }

    /// How many bytes from `off` on, at most `len`, lie before the first
    /// resident page that ends after `off`: they read as zero and hold
    /// nothing. Looks at two groups at most (each holds a page).
    pub(crate) fn untouched(&self, off: u64, len: u64) -> u64 {
        let page = SIM_PAGE as u64;
        let Ok(idx) = usize::try_from(off / page) else {
            return 0;
        };
        // The first resident page at or after `idx` in group `g`.
        let first = |g: usize, group: &Group| {
            (0..GROUP)
                .map(|i| g * GROUP + i)
                .find(|&n| n >= idx && group[n % GROUP].is_some())
        };
        let pages = self.pages.lock();
        let next = pages.tree.cursor_lower_bound(&split(idx).0).and_then(|c| {
            let (&g, group) = c.current();
            first(g, group).or_else(|| c.peek_next().and_then(|(&g, group)| first(g, group)))
        });
        match next {
            Some(n) => (n as u64 * page).saturating_sub(off).min(len),
            None => len,
        }
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
            if let Some(p) = pages.page_mut(idx) {
                let base = idx as u64 * page;
                p.zero((first - base) as usize, (last - first) as usize)?;
            }
        }
        // Whole pages: drop every resident one in [ceil(off), floor(end)).
        let first_whole = usize::try_from(off.div_ceil(page))?;
        let end_whole = usize::try_from(end / page)?;
        if first_whole >= end_whole {
            return Ok(());
        }
        let mut cursor = pages.tree.cursor_lower_bound_mut(&split(first_whole).0);
        while let Some(mut c) = cursor {
            let g = *c.current().0;
            if g * GROUP >= end_whole {
                break;
            }
            let group = c.current_mut().1;
            for (i, slot) in group.iter_mut().enumerate() {
                if (first_whole..end_whole).contains(&(g * GROUP + i)) {
                    *slot = None;
                }
            }
            cursor = if group.iter().all(Option::is_none) {
                c.remove_current().0
            } else {
                c.move_next()
            };
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
    fn groups_come_and_go_with_their_pages() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        let groups = |m: &SparseMem| m.pages.lock().tree.iter().count();
        // Pages 10..50: the last 6 of group 0, groups 1 and 2 whole, 2 of 3.
        let src = KVec::from_elem(9u8, 40 * SIM_PAGE, GFP_KERNEL)?;
        m.write(10 * SIM_PAGE as u64, &src)?;
        assert_eq!((m.resident_pages(), groups(&m)), (40, 4));
        // Pages 12..45 go: group 1 with them, groups 0, 2 and 3 keep some.
        m.zero(12 * SIM_PAGE as u64, 33 * SIM_PAGE as u64)?;
        assert_eq!((m.resident_pages(), groups(&m)), (7, 3));
        let mut dst = KVec::from_elem(1u8, 40 * SIM_PAGE, GFP_KERNEL)?;
        m.read(10 * SIM_PAGE as u64, &mut dst)?;
        assert!(dst[..2 * SIM_PAGE].iter().all(|&b| b == 9));
        assert!(dst[2 * SIM_PAGE..35 * SIM_PAGE].iter().all(|&b| b == 0));
        assert!(dst[35 * SIM_PAGE..].iter().all(|&b| b == 9));
        m.zero(0, GIB)?;
        assert_eq!((m.resident_pages(), groups(&m)), (0, 0));
        Ok(())
    }

    #[test]
    fn untouched_runs_to_the_next_resident_page() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        let page = SIM_PAGE as u64;
        m.write(40 * page, &[1])?;
        m.write(100 * page + 7, &[1])?;
        assert_eq!(m.untouched(0, GIB), 40 * page);
        assert_eq!(m.untouched(5, 10), 10);
        // Inside a resident page, wherever in it: nothing to skip.
        assert_eq!(m.untouched(40 * page + 5, GIB), 0);
        // Past a group's last resident page, on to the next group's.
        assert_eq!(m.untouched(41 * page, GIB), 59 * page);
        assert_eq!(m.untouched(101 * page, 1000), 1000);
        assert_eq!(m.untouched(101 * page, GIB), GIB);
        Ok(())
    }

    #[test]
    fn map_page_inserts_with_the_lock_free() -> Result {
        let m = KBox::pin_init(SparseMem::new(GIB), GFP_KERNEL)?;
        let page = SIM_PAGE as u64;
        let mut mapped = 0;
        m.map_page(3 * page, &mut |pfn| {
            // Page tables may be allocated here: every other user of the
            // store must be able to go on.
            assert!(m.pages.try_lock().is_some());
            // A write meanwhile lands in the page being mapped.
            m.write(3 * page + 8, &[0x5a])?;
            mapped = pfn;
            Ok(())
        })?;
        let mut again = 0;
        m.map_page(3 * page, &mut |pfn| {
            again = pfn;
            Ok(())
        })?;
        assert_eq!(again, mapped);
        let mut b = [0u8; 1];
        m.read(3 * page + 8, &mut b)?;
        assert_eq!((b[0], m.resident_pages()), (0x5a, 1));
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
