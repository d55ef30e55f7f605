//! The copy loops of the module's BAR4 transfers, run from userspace so
//! that a figure compares the module with a peer that executes the same
//! instructions on the same bytes: under an emulator the cost of a copy is
//! the cost of translating its instructions, and a `memcpy` of 32-byte
//! vector stores and the module's 8-byte stores are priced differently on
//! each host CPU. The module's loops (rust/abstractions/wc_bar.rs,
//! user_mmio.c): the BAR one volatile 64-bit access per word, four words a
//! loop iteration, straight from and to the user's pinned pages; and the
//! simulated device's upload, the kernel's non-temporal user copy
//! (`movnti`). `rep movsq` is the kernel's user copy on a CPU without
//! ERMS/FSRM, as the bench guest is.

/// `dst.copy_from_slice(src)` with the string instruction the guest
/// kernel's user copies use, eight bytes at a time.
pub fn rep_movsq(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let words = n / 8;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: both buffers are valid for `words * 8 <= n` bytes and do not
    // overlap (one is borrowed mutably); `rep movsq` needs no alignment; the
    // direction flag is clear per the ABI.
    unsafe {
        std::arch::asm!(
            "rep movsq",
            inout("rcx") words => _,
            inout("rsi") src.as_ptr() => _,
            inout("rdi") dst.as_mut_ptr() => _,
            options(nostack, preserves_flags)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst[..words * 8].copy_from_slice(&src[..words * 8]);
    dst[words * 8..n].copy_from_slice(&src[words * 8..n]);
    std::hint::black_box(dst);
}

/// `dst.copy_from_slice(src)` as the guest kernel's
/// `copy_from_user_inatomic_nontemporal` moves bytes into the simulated
/// device's pages (its `copy_to_nontemporal`, arch/x86/lib/
/// copy_user_uncached_64.S): blocks of 64 bytes as four 8-byte loads and
/// four `movnti` stores twice, then 8 bytes at a time, the rest with plain
/// stores, and an `sfence` at the end, as the module fences its copies.
pub fn movnti_copy(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let words = n / 8 * 8;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: both buffers are valid for `words <= n` bytes and do not
    // overlap (one is borrowed mutably); the loop reads and writes exactly
    // those bytes, with no alignment needed; it only clobbers the registers
    // named.
    unsafe {
        std::arch::asm!(
            "2:",
            "cmp {n}, 64",
            "jb 3f",
            "mov {a}, [{s}]",
            "mov {b}, [{s} + 8]",
            "mov {c}, [{s} + 16]",
            "mov {d}, [{s} + 24]",
            "movnti [{t}], {a}",
            "movnti [{t} + 8], {b}",
            "movnti [{t} + 16], {c}",
            "movnti [{t} + 24], {d}",
            "mov {a}, [{s} + 32]",
            "mov {b}, [{s} + 40]",
            "mov {c}, [{s} + 48]",
            "mov {d}, [{s} + 56]",
            "movnti [{t} + 32], {a}",
            "movnti [{t} + 40], {b}",
            "movnti [{t} + 48], {c}",
            "movnti [{t} + 56], {d}",
            "add {s}, 64",
            "add {t}, 64",
            "sub {n}, 64",
            "jmp 2b",
            "3:",
            "cmp {n}, 8",
            "jb 4f",
            "mov {a}, [{s}]",
            "movnti [{t}], {a}",
            "add {s}, 8",
            "add {t}, 8",
            "sub {n}, 8",
            "jmp 3b",
            "4:",
            "sfence",
            n = inout(reg) words => _,
            s = inout(reg) src.as_ptr() => _,
            t = inout(reg) dst.as_mut_ptr() => _,
            a = out(reg) _,
            b = out(reg) _,
            c = out(reg) _,
            d = out(reg) _,
            options(nostack)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst[..words].copy_from_slice(&src[..words]);
    dst[words..n].copy_from_slice(&src[words..n]);
    std::hint::black_box(dst);
}

/// Words a loop iteration of the module's BAR accesses moves (its
/// `wc_bar::BLOCK`).
const BLOCK: usize = 4;

/// Stores `src` (whole 64-bit words) to `dst` one volatile 64-bit store a
/// word, [`BLOCK`] words a loop iteration: the module's
/// `Words::store_from`.
///
/// # Safety
///
/// `dst` is valid for writes of `src.len()` bytes and 8-byte aligned.
pub unsafe fn store_words(dst: *mut u8, src: &[u8]) {
    let dst = dst.cast::<u64>();
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("8 bytes"));
    let mut blocks = src[..src.len() / 8 * 8].chunks_exact(BLOCK * 8);
    let mut at = 0;
    for block in &mut blocks {
        for (j, w) in block.chunks_exact(8).enumerate() {
            // SAFETY: word `at + j` lies in `dst` (the caller's contract).
            unsafe { dst.add(at + j).write_volatile(word(w)) };
        }
        at += BLOCK;
    }
    for (j, w) in blocks.remainder().chunks_exact(8).enumerate() {
        // SAFETY: as above.
        unsafe { dst.add(at + j).write_volatile(word(w)) };
    }
}

/// Loads `dst.len()` bytes (whole 64-bit words) from `src` one volatile
/// 64-bit load a word, [`BLOCK`] words a loop iteration: the module's
/// `Words::load_into`.
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes and 8-byte aligned.
pub unsafe fn load_words(dst: &mut [u8], src: *const u8) {
    let src = src.cast::<u64>();
    let whole = dst.len() / 8 * 8;
    let mut blocks = dst[..whole].chunks_exact_mut(BLOCK * 8);
    let mut at = 0;
    for block in &mut blocks {
        for (j, w) in block.chunks_exact_mut(8).enumerate() {
            // SAFETY: word `at + j` lies in `src` (the caller's contract).
            w.copy_from_slice(&unsafe { src.add(at + j).read_volatile() }.to_le_bytes());
        }
        at += BLOCK;
    }
    for (j, w) in blocks.into_remainder().chunks_exact_mut(8).enumerate() {
        // SAFETY: as above.
        w.copy_from_slice(&unsafe { src.add(at + j).read_volatile() }.to_le_bytes());
    }
}

/// Zeroes `len` bytes (whole 64-bit words) at `dst` one volatile 64-bit
/// store a word, [`BLOCK`] words a loop iteration, with no buffer: the
/// module's scrub (`Words::zero`).
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes and 8-byte aligned.
pub unsafe fn zero_words(dst: *mut u8, len: usize) {
    let dst = dst.cast::<u64>();
    let (count, blocks) = (len / 8, len / 8 / BLOCK);
    for b in 0..blocks {
        for j in 0..BLOCK {
            // SAFETY: word `b * BLOCK + j` lies in `dst` (the caller's
            // contract).
            unsafe { dst.add(b * BLOCK + j).write_volatile(0) };
        }
    }
    for i in blocks * BLOCK..count {
        // SAFETY: as above.
        unsafe { dst.add(i).write_volatile(0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rep_movsq_copies() {
        // A length that is not a multiple of 8: the tail is copied too.
        let src: Vec<u8> = (0..10_005u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; 10_005];
        rep_movsq(&mut dst, &src);
        assert_eq!(dst, src);
    }

    #[test]
    fn movnti_copy_copies() {
        // Blocks of 64, words after them and a tail of single bytes.
        for n in [0usize, 7, 8, 63, 64, 100, 10_005] {
            let src: Vec<u8> = (0..n as u32).map(|i| (i * 11 + 3) as u8).collect();
            let mut dst = vec![0u8; n + 16];
            movnti_copy(&mut dst[..n], &src);
            assert_eq!(&dst[..n], &src[..], "{n} bytes");
            assert!(dst[n..].iter().all(|&b| b == 0), "{n} bytes: past the end");
        }
    }

    #[test]
    fn word_loops_store_load_and_zero() {
        // 509 words: 127 blocks of four and three more.
        let src: Vec<u8> = (0..4072u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut mem = vec![0u64; 510];
        let p = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `mem` is 4080 bytes, 8-byte aligned, and only reached
        // through `p` until it is read below.
        unsafe { store_words(p, &src) };
        let mut back = vec![0u8; 4072];
        // SAFETY: as above.
        unsafe { load_words(&mut back, p) };
        assert_eq!(back, src);
        assert_eq!(mem[509], 0, "a word past the source was stored");
        // SAFETY: as above; the first 125 words (31 blocks and one) only.
        unsafe { zero_words(p, 1000) };
        assert!(mem[..125].iter().all(|&w| w == 0));
        assert!(mem[125..509].iter().all(|&w| w != 0));
    }
}
