// SPDX-License-Identifier: GPL-2.0-only

//! Bulk copies to, from and zeroing of BAR4, the HBM window, in whole 64-bit
//! words: one access per word over a range of the write-combining mapping
//! checked once ([`Words`](crate::abstractions::wc_bar::Words)), from and to
//! buffers of any alignment.

use crate::abstractions::wc_bar::WcBar;
use kernel::prelude::*;

/// Writes `src` (whole 64-bit words) at BAR offset `off` (word-aligned).
pub(crate) fn write_words(bar: &WcBar, off: usize, src: &[u8]) -> Result {
    bar.words(off, src.len())?.store_from(src);
    Ok(())
}

/// Reads `dst.len()` bytes (whole 64-bit words) at BAR offset `off`
/// (word-aligned).
pub(crate) fn read_words(bar: &WcBar, off: usize, dst: &mut [u8]) -> Result {
    bar.words(off, dst.len())?.load_into(dst);
    Ok(())
}

/// Zeroes `len` bytes (whole 64-bit words) at BAR offset `off`
/// (word-aligned), with no buffer.
pub(crate) fn zero_words(bar: &WcBar, off: usize, len: usize) -> Result {
    bar.words(off, len)?.zero();
    Ok(())
}
