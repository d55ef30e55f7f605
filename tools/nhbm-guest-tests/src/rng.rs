//! A small deterministic PRNG (SplitMix64): the same seed gives the same
//! cases on every host and kernel.

/// SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl Rng {
    /// The generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The generator of case `case` of a run seeded with `seed`: every case
    /// can be replayed on its own.
    pub fn for_case(seed: u64, case: u64) -> Self {
        let mut r = Rng(seed ^ case.wrapping_add(1).wrapping_mul(0xd6e8_feb8_6659_fd93));
        r.next_u64();
        r
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 32 random bits (the high half of [`Rng::next_u64`]).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(n) => lo + self.below(n),
            None => self.next_u64(),
        }
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// Uniform in `0..len`: an index into a slice of `len` elements (0 when
    /// `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// A random element (the slice must not be empty).
    pub fn pick<'a, T>(&mut self, s: &'a [T]) -> &'a T {
        &s[self.index(s.len())]
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            c.copy_from_slice(&w[..c.len()]);
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }

    /// A value from the edges of the u64 range: 0, 1, all ones, powers of
    /// two and their neighbours, or anything.
    pub fn edgy_u64(&mut self) -> u64 {
        let k = self.below(64) as u32;
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => 1u64 << k,
            4 => (1u64 << k).wrapping_sub(1),
            5 => (1u64 << k).wrapping_add(1),
            6 => u64::MAX - self.below(16),
            _ => self.next_u64(),
        }
    }

    /// Like [`Rng::edgy_u64`] for u32.
    pub fn edgy_u32(&mut self) -> u32 {
        let k = self.below(32) as u32;
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u32::MAX,
            3 => 1u32 << k,
            4 => (1u32 << k).wrapping_sub(1),
            5 => (1u32 << k).wrapping_add(1),
            6 => u32::MAX - self.below(16) as u32,
            _ => self.next_u32(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = (0..8).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::for_case(1, 5);
        let mut y = Rng::for_case(1, 5);
        let mut z = Rng::for_case(1, 6);
        let (vx, vy, vz) = (x.next_u64(), y.next_u64(), z.next_u64());
        assert_eq!(vx, vy);
        assert_ne!(vx, vz);
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(42);
        for _ in 0..10_000 {
            let v = r.range(3, 9);
            assert!((3..=9).contains(&v));
            assert!(r.below(5) < 5);
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(4, 4), 4);
        r.range(0, u64::MAX);
    }
}
