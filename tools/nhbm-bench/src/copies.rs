//! The copy loops of the module's BAR4 transfers, run from userspace so
//! that a figure compares the module with a peer that executes the same
//! instructions on the same bytes: under an emulator the cost of a copy is
//! the cost of translating its instructions, and a `memcpy` of 32-byte
//! vector stores and the module's 8-byte stores are priced differently on
//! each host CPU. The module's loops (rust/hw/bar4.rs, rust/abstractions/
//! wc_bar.rs): user memory through a 64 KiB bounce buffer with the kernel's
//! user copy (`rep movsq` on a CPU without ERMS/FSRM, as the bench guest
//! is), and the BAR one volatile 64-bit access per word.

/// Bytes the module moves through its bounce buffer at once (a transfer
/// piece, `XFER_CHUNK`).
pub const PIECE: usize = 64 * 1024;

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

/// Stores `src` (whole 64-bit words) to `dst` one volatile 64-bit store a
/// word: the module's `Words::store_each`.
///
/// # Safety
///
/// `dst` is valid for writes of `src.len()` bytes and 8-byte aligned.
pub unsafe fn store_words(dst: *mut u8, src: &[u8]) {
    let dst = dst.cast::<u64>();
    for (i, w) in src.chunks_exact(8).enumerate() {
        let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        // SAFETY: word `i` lies in `dst` (the caller's contract).
        unsafe { dst.add(i).write_volatile(v) };
    }
}

/// Loads `dst.len()` bytes (whole 64-bit words) from `src` one volatile
/// 64-bit load a word: the module's `Words::load_each`.
///
/// # Safety
///
/// `src` is valid for reads of `dst.len()` bytes and 8-byte aligned.
pub unsafe fn load_words(dst: &mut [u8], src: *const u8) {
    let src = src.cast::<u64>();
    for (i, w) in dst.chunks_exact_mut(8).enumerate() {
        // SAFETY: word `i` lies in `src` (the caller's contract).
        w.copy_from_slice(&unsafe { src.add(i).read_volatile() }.to_le_bytes());
    }
}

/// Zeroes `len` bytes (whole 64-bit words) at `dst` one volatile 64-bit
/// store a word, with no buffer: the module's scrub.
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes and 8-byte aligned.
pub unsafe fn zero_words(dst: *mut u8, len: usize) {
    let dst = dst.cast::<u64>();
    for i in 0..len / 8 {
        // SAFETY: word `i` lies in `dst` (the caller's contract).
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
    fn word_loops_store_load_and_zero() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut mem = vec![0u64; 512];
        let p = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `mem` is 4096 bytes, 8-byte aligned, and only reached
        // through `p` until it is read below.
        unsafe { store_words(p, &src) };
        let mut back = vec![0u8; 4096];
        // SAFETY: as above.
        unsafe { load_words(&mut back, p) };
        assert_eq!(back, src);
        // SAFETY: as above; the first 1 KiB only.
        unsafe { zero_words(p, 1024) };
        assert!(mem[..128].iter().all(|&w| w == 0));
        assert!(mem[128..].iter().all(|&w| w != 0));
    }
}
