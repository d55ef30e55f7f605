// SPDX-License-Identifier: GPL-2.0-only

//! A page of bytes allocated without zeroing, readable only once every byte
//! was written: one range comes from user memory, the rest from another
//! page or zeros. The simulated device fills the pages a write covers whole
//! this way, so a payload byte is copied once and nothing is cleared first.
//!
//! [`Blank`] keeps the range that was filled and completes the rest itself
//! before it gives the page out as a [`PageBox`].

use crate::{
    abstractions::page_box::{PageBox, Uninit},
    abstractions::user_source::UserSource,
};
use core::mem::MaybeUninit;
use kernel::{alloc::Flags, page::PAGE_SIZE, prelude::*};

/// A page of which `[from, to)` was written.
///
/// # Invariants
///
/// Every byte of the page's `[from, to)` is initialized, `from <= to <= PAGE_SIZE`.
pub(crate) struct Blank {
    page: Uninit,
    from: usize,
    to: usize,
}

impl Blank {
    /// `page`, a fresh page not zeroed ([`PageBox::new_uninit`],
    /// [`PageBox::new_uninit_batch`]).
    pub(crate) fn new(page: Uninit) -> Self {
        // INVARIANT: the empty range is initialized.
        Self {
            page,
            from: 0,
            to: 0,
        }
    }

    /// `page`, its bytes to be written again; a fresh page (allocated with
    /// `flags`) in its place if anything else holds it.
    pub(crate) fn reuse(page: PageBox, flags: Flags) -> Result<Self> {
        let page = match page.into_uninit() {
            Ok(page) => page,
            Err(_shared) => PageBox::new_uninit(flags)?,
        };
        Ok(Self::new(page))
    }

    /// Checks that `[at, at + len)` lies inside the page: its end.
    fn end(at: usize, len: usize) -> Result<usize> {
        at.checked_add(len)
            .filter(|&e| e <= PAGE_SIZE)
            .ok_or(EINVAL)
    }

    /// Fills `[at, at + len)` with `len` bytes read from `src` (`EINVAL` past
    /// the page); the range filled before, if any, no longer counts.
    pub(crate) fn fill_from_user(&mut self, src: &mut UserSource, at: usize, len: usize) -> Result {
        let end = Self::end(at, len)?;
        // INVARIANT: the empty range is initialized, whatever the copy does.
        self.to = self.from;
        // SAFETY: `[at, end)` lies inside the page (checked above), which
        // nothing else reads or writes (`Uninit::as_mut_ptr`);
        // `MaybeUninit<u8>` has the layout of `u8` and no invalid value.
        let room = unsafe {
            core::slice::from_raw_parts_mut(
                self.page.as_mut_ptr().add(at).cast::<MaybeUninit<u8>>(),
                len,
            )
        };
        src.read_raw_nontemporal(room)?;
        // INVARIANT: `read_raw_nontemporal` succeeded, so it wrote every byte of the range.
        (self.from, self.to) = (at, end);
        Ok(())
    }

    /// Fills `[at, at + data.len())` with `data` (`EINVAL` past the page).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn fill_from_slice(&mut self, at: usize, data: &[u8]) -> Result {
        let end = Self::end(at, data.len())?;
        // SAFETY: `[at, end)` lies inside the page (checked above), which is
        // ours alone, and `data` is another object.
        unsafe {
            core::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.page.as_mut_ptr().add(at),
                data.len(),
            )
        };
        // INVARIANT: every byte of `[at, end)` was just written.
        (self.from, self.to) = (at, end);
        Ok(())
    }

    /// The page, its bytes outside the filled range copied from `rest`, or
    /// zeros without one.
    pub(crate) fn finish(mut self, rest: Option<&PageBox>) -> PageBox {
        let (from, to) = (self.from, self.to);
        let p = self.page.as_mut_ptr();
        // A page filled whole, the common case, skips both (not even a call).
        if from > 0 || to < PAGE_SIZE {
            // SAFETY: `[0, from)` and `[to, PAGE_SIZE)` lie inside the page
            // (invariant), which is ours alone.
            let (head, tail) = unsafe {
                (
                    core::slice::from_raw_parts_mut(p, from),
                    core::slice::from_raw_parts_mut(p.add(to), PAGE_SIZE - to),
                )
            };
            // A whole page's ranges: neither copy can fail.
            match rest {
                Some(r) => {
                    let _ = r.read(0, head);
                    let _ = r.read(to, tail);
                }
                None => {
                    head.fill(0);
                    tail.fill(0);
                }
            }
        }
        // SAFETY: `[from, to)` was initialized (invariant), the rest just now.
        unsafe { self.page.assume_init() }
    }
}

#[kunit_tests(neuron_hbm_blank_page)]
mod tests {
    use super::*;

    /// The bytes of `page`.
    fn bytes(page: &PageBox) -> Result<KVec<u8>> {
        let mut v = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
        page.read(0, &mut v)?;
        Ok(v)
    }

    #[test]
    fn the_rest_is_zeros_or_the_other_page() -> Result {
        let mut b = Blank::new(PageBox::new_uninit(GFP_KERNEL)?);
        b.fill_from_slice(10, &[7; 20])?;
        let page = b.finish(None);
        let got = bytes(&page)?;
        assert!(got[..10].iter().all(|&x| x == 0));
        assert!(got[10..30].iter().all(|&x| x == 7));
        assert!(got[30..].iter().all(|&x| x == 0));

        let mut other = PageBox::zeroed(GFP_KERNEL)?;
        for i in 0..PAGE_SIZE / 256 {
            let ramp: [u8; 256] = core::array::from_fn(|j| j as u8);
            other.write(i * 256, &ramp)?;
        }
        let mut b = Blank::reuse(page, GFP_KERNEL)?;
        b.fill_from_slice(PAGE_SIZE - 4, &[0xaa; 4])?;
        let page = b.finish(Some(&other));
        let (got, want) = (bytes(&page)?, bytes(&other)?);
        assert!(got[..PAGE_SIZE - 4] == want[..PAGE_SIZE - 4]);
        assert_eq!(got[PAGE_SIZE - 4..], [0xaa; 4]);
        Ok(())
    }

    #[test]
    fn whole_and_empty_fills() -> Result {
        let mut b = Blank::new(PageBox::new_uninit(GFP_KERNEL)?);
        let threes = KVec::from_elem(3u8, PAGE_SIZE, GFP_KERNEL)?;
        b.fill_from_slice(0, &threes)?;
        let mut nines = PageBox::zeroed(GFP_KERNEL)?;
        nines.write(0, &KVec::from_elem(9u8, PAGE_SIZE, GFP_KERNEL)?)?;
        assert!(bytes(&b.finish(Some(&nines)))?.iter().all(|&x| x == 3));
        // Nothing filled: the other page whole.
        let page = Blank::new(PageBox::new_uninit(GFP_KERNEL)?).finish(Some(&nines));
        assert!(bytes(&page)?.iter().all(|&x| x == 9));
        Ok(())
    }

    #[test]
    fn a_batch_is_pages_of_their_own() -> Result {
        let mut pages = KVec::new();
        for (i, page) in PageBox::new_uninit_batch()?
            .into_iter()
            .flatten()
            .enumerate()
        {
            let mut b = Blank::new(page);
            b.fill_from_slice(0, &KVec::from_elem(i as u8 + 1, PAGE_SIZE, GFP_KERNEL)?)?;
            pages.push(b.finish(None), GFP_KERNEL)?;
        }
        assert!(!pages.is_empty());
        // Each page keeps its own bytes, and lives on when the first goes.
        let first = pages.remove(0)?;
        assert!(bytes(&first)?.iter().all(|&x| x == 1));
        drop(first);
        for (i, page) in pages.iter().enumerate() {
            assert!(bytes(page)?.iter().all(|&x| x == i as u8 + 2));
        }
        Ok(())
    }

    #[test]
    fn fills_past_the_page_are_refused() -> Result {
        let mut b = Blank::new(PageBox::new_uninit(GFP_KERNEL)?);
        assert_eq!(b.fill_from_slice(PAGE_SIZE - 2, &[1; 4]), Err(EINVAL));
        assert_eq!(b.fill_from_slice(usize::MAX, &[1; 4]), Err(EINVAL));
        // A refused fill leaves nothing counted as written.
        assert!(bytes(&b.finish(None))?.iter().all(|&x| x == 0));
        Ok(())
    }
}
