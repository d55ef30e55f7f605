//! The error convention: every call that can fail returns 0 on success and
//! a negative errno on failure, and leaves a message for
//! [`nhbm_last_error`](crate::nhbm_last_error) in a thread-local slot. No
//! panic crosses into C: [`call`] turns one into `-EIO`.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

use nhbm::{errno_name, io_errno, OpenError, PlanError};

thread_local! {
    /// The message of this thread's last failed call.
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// A failure: the errno the call returns (negated) and what the message says.
#[derive(Debug)]
pub struct Error {
    /// The errno, positive.
    pub errno: i32,
    /// The message for `nhbm_last_error`.
    pub msg: String,
}

/// What every entry point's body returns.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error `errno` saying `msg`.
    pub fn new(errno: i32, msg: impl Into<String>) -> Self {
        Error {
            errno,
            msg: msg.into(),
        }
    }

    /// `EINVAL` saying `msg`.
    pub fn inval(msg: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, msg)
    }

    /// An I/O error of `what`, with its errno (`EIO` when it has none).
    pub fn io(what: &str, e: &io::Error) -> Self {
        let errno = io_errno(e).unwrap_or(libc::EIO);
        Self::new(errno, format!("{what}: {e} ({})", errno_name(errno)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Self {
        Self::new(e.errno(), e.to_string())
    }
}

impl From<&PlanError> for Error {
    fn from(e: &PlanError) -> Self {
        Self::new(e.errno, format!("invalid plan: {e}"))
    }
}

/// Stores `msg` as this thread's last error (an interior NUL ends it).
pub fn set_last(msg: &str) {
    let bytes = msg.bytes().take_while(|&b| b != 0).collect::<Vec<u8>>();
    let msg = CString::new(bytes).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = msg);
}

/// This thread's last error message; valid until this thread's next failed
/// call into the library.
pub fn last() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs an entry point's body: its value on success; on failure the negated
/// errno, after storing the message. A panic is `-EIO`.
pub fn call(body: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_last(&e.msg);
            -e.errno
        }
        Err(payload) => {
            set_last(&format!(
                "internal error in libnhbm: {}",
                panic_text(payload.as_ref())
            ));
            -libc::EIO
        }
    }
}

/// Runs the body of an entry point that returns nothing (the free
/// functions): a panic is swallowed, as there is nobody to report it to.
pub fn call_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_str() -> String {
        // SAFETY: last() points at this thread's message, alive until the
        // next set_last on this thread.
        unsafe { CStr::from_ptr(last()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn errors_are_negative_errnos_with_a_message() {
        assert_eq!(call(|| Ok(3)), 3);
        assert_eq!(
            call(|| Err(Error::new(libc::ENOENT, "no such var"))),
            -libc::ENOENT
        );
        assert_eq!(last_str(), "no such var");
        // Success leaves the message alone.
        assert_eq!(call(|| Ok(0)), 0);
        assert_eq!(last_str(), "no such var");
    }

    #[test]
    fn a_panic_is_eio() {
        let rc = call(|| panic!("boom"));
        assert_eq!(rc, -libc::EIO);
        assert_eq!(last_str(), "internal error in libnhbm: boom");
        call_void(|| panic!("swallowed"));
    }

    #[test]
    fn the_message_is_per_thread() {
        call(|| Err(Error::inval("main thread")));
        std::thread::spawn(|| {
            assert_eq!(last_str(), "");
            call(|| Err(Error::inval("other thread")));
            assert_eq!(last_str(), "other thread");
        })
        .join()
        .unwrap();
        assert_eq!(last_str(), "main thread");
    }

    #[test]
    fn interior_nul_ends_the_message() {
        set_last("a\0b");
        assert_eq!(last_str(), "a");
    }
}
