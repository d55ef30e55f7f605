//! How an engine's bytes are copied in the model: a memory copy, except
//! where the host's `memmove` is slow for reasons of its own.
//!
//! glibc copies a descriptor's 64 KiB with `rep movsb`, which on an AMD
//! EPYC host runs at half speed when the destination lies a few bytes past
//! the source modulo a page (measured with two memfd mappings, 64 KiB
//! copies: 4.5 GB/s at 16 bytes, 7.4 at 48, 8.8 at 80, 9.5-12.7 beyond;
//! a loop of unaligned 16-byte moves: 7.5-7.7 at 16 and 48). A user
//! buffer `malloc` placed 16 bytes into a page is such a destination for
//! every S2M descriptor of a MEM_READ. Hardware engines show nothing of
//! the kind, so the model copies those with the loop.

use std::ptr;

/// Destinations up to this many bytes past the source, modulo a page, go
/// through the loop.
const SKEW_LIMIT: usize = 64;
/// Bytes of a page, the period of the skew.
const PAGE: usize = 4096;

/// Copies `len` bytes from `from` to `to`, which may overlap.
///
/// # Safety
///
/// `from` is valid for reads and `to` for writes of `len` bytes, and no
/// Rust reference to either range lives during the call.
pub unsafe fn copy(from: *const u8, to: *mut u8, len: usize) {
    if memmove_is_slow(from as usize, to as usize, len) {
        // SAFETY: the caller's ranges, which do not overlap (`apart`).
        unsafe { copy_skewed(from, to, len) }
    } else {
        // SAFETY: the caller's ranges; `ptr::copy` allows overlap.
        unsafe { ptr::copy(from, to, len) }
    }
}

/// Whether `len` bytes from address `from` to address `to` go through the
/// loop: the ranges apart, the destination 1 to [`SKEW_LIMIT`] - 1 bytes
/// past the source modulo a page.
fn memmove_is_slow(from: usize, to: usize, len: usize) -> bool {
    let apart = from.abs_diff(to) >= len;
    apart && (1..SKEW_LIMIT).contains(&(to.wrapping_sub(from) % PAGE))
}

/// Copies `len` bytes between ranges that do not overlap, 64 bytes at a
/// time in unaligned 16-byte moves (SSE2, which every x86-64 has), the
/// rest with `ptr::copy_nonoverlapping`.
///
/// # Safety
///
/// As for [`copy`], and the ranges do not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_skewed(from: *const u8, to: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
    const LANES: usize = 4;
    const BLOCK: usize = LANES * size_of::<__m128i>();
    let whole = len - len % BLOCK;
    for at in (0..whole).step_by(BLOCK) {
        // SAFETY: `at + BLOCK <= len`: the block lies in both ranges; the
        // loads and stores are unaligned ones.
        unsafe {
            let src = from.add(at).cast::<__m128i>();
            let dst = to.add(at).cast::<__m128i>();
            let block: [__m128i; LANES] = std::array::from_fn(|k| _mm_loadu_si128(src.add(k)));
            for (k, v) in block.into_iter().enumerate() {
                _mm_storeu_si128(dst.add(k), v);
            }
        }
    }
    // SAFETY: the last `len - whole` bytes of both ranges.
    unsafe { ptr::copy_nonoverlapping(from.add(whole), to.add(whole), len - whole) };
}

/// Elsewhere, a plain copy.
///
/// # Safety
///
/// As for [`copy`], and the ranges do not overlap.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_skewed(from: *const u8, to: *mut u8, len: usize) {
    // SAFETY: the caller's ranges, which do not overlap.
    unsafe { ptr::copy_nonoverlapping(from, to, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies `len` bytes of a pattern from offset `src` to offset `dst`
    /// of one buffer and checks every byte of it.
    fn check(src: usize, dst: usize, len: usize) {
        let mut buf: Vec<u8> = (0..40 * PAGE).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut want = buf.clone();
        want.copy_within(src..src + len, dst);
        let p = buf.as_mut_ptr();
        // SAFETY: both ranges lie inside `buf`, which no reference
        // reaches during the call.
        unsafe { copy(p.add(src), p.add(dst), len) };
        assert!(buf == want, "{len} bytes from {src} to {dst}");
    }

    #[test]
    fn every_skew_and_length_copies_exactly() {
        // Skews the loop takes (1-63 past the source, modulo a page) and
        // ones memmove takes, lengths around its 64-byte blocks.
        // The ranges lie 17 pages apart, beyond the longest length.
        let far = 17 * PAGE;
        for skew in [1, 15, 16, 48, 63, 64, 80, PAGE - 16] {
            for len in [0, 1, 63, 64, 65, 127, 1000, 65_536] {
                check(0, far + skew, len);
                check(far + skew, 0, len);
            }
        }
    }

    #[test]
    fn only_a_destination_just_past_the_source_takes_the_loop() {
        let far = 1 << 30;
        assert!(memmove_is_slow(far, 2 * far + 16, 65_536));
        assert!(memmove_is_slow(far, 2 * far + PAGE + 63, 65_536));
        for to in [2 * far, 2 * far + 64, 2 * far + 80, 2 * far - 16] {
            assert!(!memmove_is_slow(far, to, 65_536), "{to:#x}");
        }
        assert!(!memmove_is_slow(far, far + 16, 65_536), "overlapping");
    }

    #[test]
    fn overlapping_ranges_copy_as_memmove_does() {
        for (src, dst) in [(0, 16), (16, 0), (100, 140), (140, 100)] {
            check(src, dst, 5_000);
        }
    }
}
