//! Pointers from C, in one place: each helper checks for NULL (`EINVAL`)
//! and lengths for overflow, and states in its `# Safety` section what the
//! caller (the header's contract) guarantees. Inputs become references;
//! outputs stay pointers ([`Out`]), written once the inputs are read.

use std::ffi::{c_char, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::NonNull;

use crate::error::{Error, Result};

/// NULL is `EINVAL`, naming the argument.
fn null(what: &str) -> Error {
    Error::inval(format!("{what} is NULL"))
}

/// The object a handle points at.
///
/// # Safety
/// `p` is NULL or a handle the library returned and has not freed, which
/// nobody frees during `'a`.
pub unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: by the caller's guarantee, a non-NULL `p` is a live `T`.
    unsafe { p.as_ref() }.ok_or_else(|| null(what))
}

/// Takes back a handle made by [`into_handle`]; NULL is `None`.
///
/// # Safety
/// `p` is NULL or a handle [`into_handle`] returned for a `T`, not freed
/// before and not used after.
pub unsafe fn take_handle<T>(p: *mut T) -> Option<Box<T>> {
    // SAFETY: by the caller's guarantee, a non-NULL `p` came from
    // Box::into_raw and is given back once.
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

/// A new object as a handle for C.
pub fn into_handle<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

/// An output argument, checked for NULL before the call does anything and
/// written at its end, through the pointer: no reference to it is made, so
/// that C may pass one lying inside an input of the same call.
#[derive(Debug)]
pub struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Stores the result (the old contents are neither read nor dropped).
    ///
    /// # Safety
    /// No reference made from the call's C inputs (a [`bytes`] slice, a
    /// [`cstr`] string) is used after this write, nor held by a function up
    /// the stack: the output may lie inside them.
    pub unsafe fn set(self, v: T) {
        // SAFETY: `out`'s caller made the pointer valid for writing a T
        // during the call, and it is not NULL; by our caller's guarantee no
        // live reference covers the bytes written.
        unsafe { self.0.as_ptr().write(v) }
    }
}

/// The output argument `p`.
///
/// # Safety
/// `p` is NULL or valid (and aligned) for writing a `T`, initialized or
/// not, until the entry point returns; it may lie inside one of its inputs.
pub unsafe fn out<T>(p: *mut T, what: &str) -> Result<Out<T>> {
    NonNull::new(p).map(Out).ok_or_else(|| null(what))
}

/// An output argument the caller may leave NULL: `None` then.
///
/// # Safety
/// As [`out`].
pub unsafe fn out_opt<T>(p: *mut T) -> Option<Out<T>> {
    NonNull::new(p).map(Out)
}

/// A buffer length: past `SSIZE_MAX` (`isize::MAX`) is `EOVERFLOW`.
fn length(len: usize, what: &str) -> Result<usize> {
    if isize::try_from(len).is_err() {
        return Err(Error::new(
            libc::EOVERFLOW,
            format!("{what}: length {len} too large"),
        ));
    }
    Ok(len)
}

/// The `len` bytes at `p`.
///
/// # Safety
/// `p` is NULL or readable for `len` bytes, unchanged during `'a`.
pub unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(null(what));
    }
    let len = length(len, what)?;
    // SAFETY: non-NULL, readable for `len` (<= isize::MAX) bytes by the
    // caller's guarantee; u8 has no alignment or validity requirement.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// The NUL-terminated string at `p`.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string, unchanged during `'a`.
pub unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a CStr> {
    if p.is_null() {
        return Err(null(what));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's guarantee.
    Ok(unsafe { CStr::from_ptr(p) })
}

/// The NUL-terminated path at `p`, bytes as they are.
///
/// # Safety
/// As [`cstr`].
pub unsafe fn c_path<'a>(p: *const c_char, what: &str) -> Result<&'a Path> {
    // SAFETY: forwarded to the caller.
    let s = unsafe { cstr(p, what) }?;
    Ok(Path::new(OsStr::from_bytes(s.to_bytes())))
}

/// A C buffer's address for an ioctl argument: the kernel reads or writes
/// it itself (a bad address is its `EFAULT`), so no Rust reference to it is
/// made. NULL is `EINVAL`.
pub fn user_ptr(p: *const c_void, what: &str) -> Result<u64> {
    if p.is_null() {
        return Err(null(what));
    }
    Ok(p as u64)
}

/// A C buffer of `len` bytes for an ioctl argument, as [`user_ptr`]: its
/// address and length. NULL is `EINVAL`, a length past `SSIZE_MAX`
/// `EOVERFLOW`.
pub fn user_buf(p: *const c_void, len: usize, what: &str) -> Result<(u64, u64)> {
    let addr = user_ptr(p, what)?;
    Ok((addr, length(len, what)? as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn null_pointers_are_einval() {
        // SAFETY: NULL is allowed for every helper.
        unsafe {
            assert_eq!(
                handle::<u32>(ptr::null(), "dev").unwrap_err().errno,
                libc::EINVAL
            );
            assert!(take_handle::<u32>(ptr::null_mut()).is_none());
            assert_eq!(
                out::<u32>(ptr::null_mut(), "out").unwrap_err().msg,
                "out is NULL"
            );
            assert!(out_opt::<u32>(ptr::null_mut()).is_none());
            assert_eq!(
                bytes(ptr::null(), 0, "blob").unwrap_err().errno,
                libc::EINVAL
            );
            assert_eq!(cstr(ptr::null(), "arch").unwrap_err().errno, libc::EINVAL);
            assert_eq!(c_path(ptr::null(), "path").unwrap_err().errno, libc::EINVAL);
        }
        assert_eq!(
            user_ptr(ptr::null(), "buf").unwrap_err().errno,
            libc::EINVAL
        );
    }

    #[test]
    fn lengths_past_isize_are_eoverflow() {
        let b = [0u8; 4];
        // SAFETY: the length is refused before the pointer is read.
        let e = unsafe { bytes(b.as_ptr().cast(), usize::MAX, "blob") }.unwrap_err();
        assert_eq!(e.errno, libc::EOVERFLOW);
        // SAFETY: `b` is readable for its 4 bytes.
        assert_eq!(unsafe { bytes(b.as_ptr().cast(), 4, "blob") }.unwrap(), &b);
    }

    #[test]
    fn handles_round_trip_and_outputs_are_written() {
        let h = into_handle(7u32);
        // SAFETY: `h` is a live handle, taken back once.
        unsafe {
            assert_eq!(*handle(h, "h").unwrap(), 7);
            assert_eq!(*take_handle(h).unwrap(), 7);
        }
        let mut v = 0u64;
        // SAFETY: `v` is writable, and no reference to it is live.
        unsafe { out(&raw mut v, "v").unwrap().set(9) };
        assert_eq!(v, 9);
    }

    #[test]
    fn an_output_may_lie_inside_an_input() {
        // The output's 8 bytes are the input's first 8: the input is read
        // whole before the output is written.
        let mut buf = [0x11u64, 0x22];
        let p = buf.as_mut_ptr();
        // SAFETY: `p` is valid for both 16 bytes of reading and 8 of writing;
        // the input slice is last used (copied) before the write.
        unsafe {
            let o = out(p, "o").unwrap();
            let input = bytes(p.cast_const().cast(), 16, "input").unwrap().to_vec();
            o.set(0x33);
            assert_eq!(input[0], 0x11);
            assert_eq!(input[8], 0x22);
        }
        assert_eq!(buf, [0x33, 0x22]);
    }

    #[test]
    fn user_buffers_are_checked_for_null_and_length() {
        let b = [0u8; 4];
        let p = b.as_ptr().cast();
        assert_eq!(user_buf(p, 4, "buf").unwrap(), (p as u64, 4));
        let max = isize::MAX as usize;
        assert_eq!(user_buf(p, max, "buf").unwrap().1, max as u64);
        let e = user_buf(p, max + 1, "buf").unwrap_err();
        assert_eq!(e.errno, libc::EOVERFLOW);
        assert_eq!(
            user_buf(ptr::null(), usize::MAX, "buf").unwrap_err().errno,
            libc::EINVAL
        );
    }
}
