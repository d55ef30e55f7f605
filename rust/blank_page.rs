// SPDX-License-Identifier: GPL-2.0-only

//! A page of bytes allocated without zeroing, readable only once every byte
//! was written: one range comes from user memory, the rest from another
//! page or zeros. The simulated device fills the pages a write covers whole
//! this way, so a payload byte is copied once and nothing is cleared first.
//!
//! `KBox::new_uninit` hands out a `MaybeUninit<[u8; N]>`, which the kernel
//! crate has no safe way to fill in parts and then declare initialized (the
//! standard library's `MaybeUninit` slice helpers are unstable). [`Blank`]
//! keeps the range that was filled and completes the rest itself before it
//! gives the page out.

use crate::user_source::UserSource;
use core::mem::MaybeUninit;
use kernel::{alloc::Flags, prelude::*};

/// `N` bytes, of which `[from, to)` were written.
///
/// # Invariants
///
/// Every byte of `page[from..to]` is initialized, `from <= to <= N`.
pub(crate) struct Blank<const N: usize> {
    page: KBox<MaybeUninit<[u8; N]>>,
    from: usize,
    to: usize,
}

impl<const N: usize> Blank<N> {
    /// A fresh page, not zeroed.
    pub(crate) fn new(flags: Flags) -> Result<Self> {
        // INVARIANT: the empty range is initialized.
        Ok(Self {
            page: KBox::new_uninit(flags)?,
            from: 0,
            to: 0,
        })
    }

    /// `page`, its bytes to be written again.
    pub(crate) fn reuse(page: KBox<[u8; N]>) -> Self {
        // INVARIANT: the empty range is initialized.
        Self {
            page: KBox::drop_contents(page),
            from: 0,
            to: 0,
        }
    }

    /// The page's bytes, initialized or not.
    fn bytes(&mut self) -> *mut u8 {
        self.page.as_mut_ptr().cast()
    }

    /// Fills `[at, at + len)` with `len` bytes read from `src` (`EINVAL` past
    /// the page); the range filled before, if any, no longer counts.
    pub(crate) fn fill_from_user(&mut self, src: &mut UserSource, at: usize, len: usize) -> Result {
        let end = at.checked_add(len).filter(|&e| e <= N).ok_or(EINVAL)?;
        // INVARIANT: the empty range is initialized, whatever the copy does.
        self.to = self.from;
        // SAFETY: `[at, end)` lies inside the page (checked above), which is
        // ours alone; `MaybeUninit<u8>` has the layout of `u8` and no
        // invalid value.
        let room = unsafe {
            core::slice::from_raw_parts_mut(self.bytes().add(at).cast::<MaybeUninit<u8>>(), len)
        };
        src.read_raw_nontemporal(room)?;
        // INVARIANT: `read_raw_nontemporal` succeeded, so it wrote every byte of the range.
        (self.from, self.to) = (at, end);
        Ok(())
    }

    /// Fills `[at, at + data.len())` with `data` (`EINVAL` past the page).
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn fill_from_slice(&mut self, at: usize, data: &[u8]) -> Result {
        let end = at
            .checked_add(data.len())
            .filter(|&e| e <= N)
            .ok_or(EINVAL)?;
        // SAFETY: `[at, end)` lies inside the page (checked above), which is
        // ours alone, and `data` is another object.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.bytes().add(at), data.len()) };
        // INVARIANT: every byte of `[at, end)` was just written.
        (self.from, self.to) = (at, end);
        Ok(())
    }

    /// The page, its bytes outside the filled range copied from `rest`, or
    /// zeros without one.
    pub(crate) fn finish(mut self, rest: Option<&[u8; N]>) -> KBox<[u8; N]> {
        let (from, to) = (self.from, self.to);
        let p = self.bytes();
        // A page filled whole, the common case, skips both (not even a call).
        if from > 0 || to < N {
            // SAFETY: `[0, from)` and `[to, N)` lie inside the page
            // (invariant), which is ours alone; `rest` is another page, `N`
            // bytes long.
            unsafe {
                match rest {
                    Some(r) => {
                        core::ptr::copy_nonoverlapping(r.as_ptr(), p, from);
                        core::ptr::copy_nonoverlapping(r.as_ptr().add(to), p.add(to), N - to);
                    }
                    None => {
                        core::ptr::write_bytes(p, 0, from);
                        core::ptr::write_bytes(p.add(to), 0, N - to);
                    }
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

    #[test]
    fn the_rest_is_zeros_or_the_other_page() -> Result {
        let mut b = Blank::<64>::new(GFP_KERNEL)?;
        b.fill_from_slice(10, &[7; 20])?;
        let page = b.finish(None);
        assert!(page[..10].iter().all(|&x| x == 0));
        assert!(page[10..30].iter().all(|&x| x == 7));
        assert!(page[30..].iter().all(|&x| x == 0));

        let other: [u8; 64] = core::array::from_fn(|i| i as u8);
        let mut b = Blank::reuse(page);
        b.fill_from_slice(60, &[0xaa; 4])?;
        let page = b.finish(Some(&other));
        assert_eq!(page[..60], other[..60]);
        assert_eq!(page[60..], [0xaa; 4]);
        Ok(())
    }

    #[test]
    fn whole_and_empty_fills() -> Result {
        let mut b = Blank::<32>::new(GFP_KERNEL)?;
        b.fill_from_slice(0, &[3; 32])?;
        assert_eq!(*b.finish(Some(&[9; 32])), [3; 32]);
        // Nothing filled: the other page whole.
        assert_eq!(
            *Blank::<32>::new(GFP_KERNEL)?.finish(Some(&[9; 32])),
            [9; 32]
        );
        Ok(())
    }

    #[test]
    fn fills_past_the_page_are_refused() -> Result {
        let mut b = Blank::<32>::new(GFP_KERNEL)?;
        assert_eq!(b.fill_from_slice(30, &[1; 4]), Err(EINVAL));
        assert_eq!(b.fill_from_slice(usize::MAX, &[1; 4]), Err(EINVAL));
        // A refused fill leaves nothing counted as written.
        assert_eq!(*b.finish(None), [0; 32]);
        Ok(())
    }
}
