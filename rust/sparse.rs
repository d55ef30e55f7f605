// SPDX-License-Identifier: GPL-2.0-only

//! Sparse byte store backing a simulated BAR: pages are allocated on first
//! write, read as zeros until then, and dropped again when zeroed, so a
//! 256 GiB BAR costs only what tests touch.

use crate::io::{check_range, Gate};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNode},
    sync::Mutex,
    uaccess::UserSliceReader,
};

/// Bytes copied under one hold of the page lock.
const LOCK_SPAN: usize = 64 * 1024;

/// Granule of the store: large enough that a bulk copy pays its page lookup
/// rarely, small enough that tests touching a few bytes stay cheap.
const SIM_PAGE: usize = 16 * 1024;

/// One simulated page.
#[derive(Zeroable)]
struct SimPage([u8; SIM_PAGE]);

/// A sparse, page-granular byte store of a fixed size. An access holds
/// `pages` for at most [`LOCK_SPAN`] bytes of copying between kernel buffers;
/// user memory never takes part (it could fault for as long as its owner
/// likes, with every other user of the device waiting).
#[pin_data]
pub(crate) struct SparseMem {
    size: u64,
    #[pin]
    pages: Mutex<RBTree<usize, KBox<SimPage>>>,
}

/// A fresh page of zeros, charged to the memory cgroup of the task whose
/// write materializes it.
fn zeroed_page() -> Result<KBox<SimPage>> {
    Ok(KBox::zeroed(GFP_KERNEL_ACCOUNT)?)
}

/// Which way a page access copies.
enum Copy<'a> {
    From(&'a [u8]),
    To(&'a mut [u8]),
}

impl SparseMem {
    /// A store of `size` bytes, all zero.
    pub(crate) fn new(size: u64) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            size,
            pages <- new_mutex!(RBTree::new()),
        })
    }

    /// Number of pages currently materialized.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn resident_pages(&self) -> usize {
        self.pages.lock().iter().count()
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
            let pos = off + done as u64;
            let idx = usize::try_from(pos / SIM_PAGE as u64)?;
            let in_page = (pos % SIM_PAGE as u64) as usize;
            let n = (SIM_PAGE - in_page).min(len - done);
            held += n;
            if create && pages.get(&idx).is_none() {
                // Allocated with the lock dropped: reclaim in the writer's
                // memory cgroup never runs while every other user of the
                // device waits on `pages`.
                drop(pages);
                let node = RBTreeNode::new(idx, zeroed_page()?, GFP_KERNEL_ACCOUNT)?;
                pages = self.pages.lock();
                held = n;
                if pages.get(&idx).is_none() {
                    // Nothing to replace: the slot was just seen empty.
                    let _ = pages.insert(node);
                }
            }
            match pages.get_mut(&idx) {
                Some(page) => {
                    let bytes = &mut page.0[in_page..in_page + n];
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

    /// Writes `len` bytes read from `src` at `off`, with no lock held while
    /// user memory is read: a page the write covers whole is filled while it
    /// is still private, then put in place of the page it replaces (a single
    /// copy; the page it replaces is filled for the next one); the part of a
    /// page at either end goes through `bounce` (room for at least `len`
    /// bytes, its contents replaced). Only the steps that change the store
    /// run inside `gate`, never a user copy.
    pub(crate) fn write_from_user(
        &self,
        off: u64,
        src: &mut UserSliceReader,
        len: usize,
        bounce: &mut [u8],
        gate: Gate<'_>,
    ) -> Result {
        check_range(off, len as u64, self.size)?;
        let mut spare: Option<KBox<SimPage>> = None;
        let mut done = 0usize;
        while done < len {
            let pos = off + done as u64;
            let idx = usize::try_from(pos / SIM_PAGE as u64)?;
            let in_page = (pos % SIM_PAGE as u64) as usize;
            let n = (SIM_PAGE - in_page).min(len - done);
            if n < SIM_PAGE {
                let room = bounce.get_mut(..n).ok_or(EINVAL)?;
                src.read_slice(room)?;
                gate(&mut || self.write(pos, room))?;
            } else {
                // A page of the device's own, replaced whole: zeroed only
                // when it is new.
                let mut page = match spare.take() {
                    Some(page) => page,
                    None => zeroed_page()?,
                };
                src.read_slice(&mut page.0)?;
                let mut node = Some(RBTreeNode::new(idx, page, GFP_KERNEL_ACCOUNT)?);
                let mut old = None;
                gate(&mut || {
                    if let Some(node) = node.take() {
                        old = self.pages.lock().insert(node);
                    }
                    Ok(())
                })?;
                // The page replaced, if any, takes the next page's bytes.
                spare = old.map(|node| node.to_key_value().1);
            }
            done += n;
        }
        Ok(())
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
            if let Some(p) = pages.get_mut(&idx) {
                let base = idx as u64 * page;
                p.0[(first - base) as usize..(last - base) as usize].fill(0);
            }
        }
        // Whole pages: drop every resident one in [ceil(off), floor(end)).
        let first_whole = usize::try_from(off.div_ceil(page))?;
        let end_whole = usize::try_from(end / page)?;
        while let Some(cursor) = pages.cursor_lower_bound_mut(&first_whole) {
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
