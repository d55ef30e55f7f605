//! Destinations for the userspace copies that peers make, placed apart
//! from their source in the emulator's TLB.
//!
//! QEMU's TCG looks guest pages up in a direct-mapped table indexed by the
//! page number modulo its size, a power of two that it grows and shrinks
//! with use, 64 entries at least. glibc's large `memcpy` streams several
//! source and destination pages at a time, so where the destination lies
//! a multiple of the table's size (give or take three pages) from the
//! source, the two evict each other's entries on every access. Measured in
//! the bench guest, a 256 MiB `memcpy` moved 1.35-1.42 bytes/ns at a
//! distance of 0 pages, 1.49-1.55 at 256 and 4,096, 1.52 at 128 in one
//! boot of two, and 2.19-2.24 at 16, 32, 48, 7 to 129 and 1,000 (five
//! boots): the peer's speed was a matter of where the allocator happened
//! to put two buffers, a different draw in every run of the bench. A
//! destination from [`Dest::apart_from`] lies 32 pages away modulo 64,
//! which no table size brings near a multiple: the peer copies at its
//! fastest, the strictest reading of a figure that compares the module
//! with it.

/// Bytes of a guest page.
const PAGE: usize = 4096;
/// The TLB's fewest entries: every size it takes is a multiple of it.
const PERIOD: usize = 64;

/// A destination buffer of `len` bytes inside a larger allocation.
pub struct Dest {
    buf: Vec<u8>,
    at: usize,
    len: usize,
}

impl Dest {
    /// A zeroed destination for a copy of `src`, its address that of `src`
    /// plus half a [`PERIOD`] of pages, modulo the period.
    pub fn apart_from(src: &[u8]) -> Dest {
        let span = PERIOD * PAGE;
        let buf = vec![0u8; src.len() + span];
        let want = (src.as_ptr() as usize + span / 2) % span;
        let at = (want + span - buf.as_ptr() as usize % span) % span;
        Dest {
            buf,
            at,
            len: src.len(),
        }
    }

    /// The destination's bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_lies_half_a_period_from_its_source() {
        for len in [1, PAGE, 3 * PAGE + 5, 64 << 20] {
            let src = vec![1u8; len];
            let mut d = Dest::apart_from(&src);
            let dst = d.as_mut_slice();
            assert_eq!(dst.len(), len);
            assert!(dst.iter().all(|&b| b == 0));
            let gap = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize);
            assert_eq!(gap % (PERIOD * PAGE), PERIOD * PAGE / 2, "{len}");
        }
    }
}
