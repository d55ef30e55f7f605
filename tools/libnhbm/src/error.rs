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
/// Once the thread's thread-locals are torn down (a call from an atexit
/// handler or a thread-specific data destructor) the message is dropped.
pub fn set_last(msg: &str) {
    let bytes = msg.bytes().take_while(|&b| b != 0).collect::<Vec<u8>>();
    let msg = CString::new(bytes).unwrap_or_default();
    let _ = LAST.try_with(|l| *l.borrow_mut() = msg);
}

/// This thread's last error message; valid until this thread's next failed
/// call into the library. A static "" once the thread's thread-locals are
/// torn down.
pub fn last() -> *const c_char {
    LAST.try_with(|l| l.borrow().as_ptr())
        .unwrap_or_else(|_| c"".as_ptr())
}

/// This thread's last error message as the C caller reads it, for tests.
#[cfg(test)]
pub(crate) fn last_message() -> String {
    // SAFETY: last() points at this thread's message, alive until the
    // next set_last on this thread.
    unsafe { std::ffi::CStr::from_ptr(last()) }
        .to_string_lossy()
        .into_owned()
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs `f`, which consumes a caught panic's payload, under `catch_unwind`
/// too: a panic there (say, a payload whose drop panics) is forgotten
/// rather than let through.
fn after_panic(f: impl FnOnce()) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(f)) {
        std::mem::forget(again);
    }
}

/// Runs an entry point's body: its value on success; on failure the negated
/// errno, after storing the message. A panic is `-EIO`. Nothing runs
/// outside `catch_unwind`.
pub fn call(body: impl FnOnce() -> Result<c_int>) -> c_int {
    let run = || {
        body().unwrap_or_else(|e| {
            set_last(&e.msg);
            -e.errno
        })
    };
    catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|payload| {
        after_panic(move || {
            set_last(&format!(
                "internal error in libnhbm: {}",
                panic_text(payload.as_ref())
            ));
        });
        -libc::EIO
    })
}

/// Runs the body of an entry point that returns nothing (the free
/// functions): a panic is swallowed, as there is nobody to report it to.
pub fn call_void(body: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
        after_panic(move || drop(payload));
    }
}

/// Runs the body of an entry point that returns a string: a static "" on
/// a panic.
pub fn call_str(body: impl FnOnce() -> *const c_char) -> *const c_char {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        after_panic(move || drop(payload));
        c"".as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn errors_are_negative_errnos_with_a_message() {
        assert_eq!(call(|| Ok(3)), 3);
        assert_eq!(
            call(|| Err(Error::new(libc::ENOENT, "no such var"))),
            -libc::ENOENT
        );
        assert_eq!(last_message(), "no such var");
        // Success leaves the message alone.
        assert_eq!(call(|| Ok(0)), 0);
        assert_eq!(last_message(), "no such var");
    }

    #[test]
    fn a_panic_is_eio() {
        let rc = call(|| panic!("boom"));
        assert_eq!(rc, -libc::EIO);
        assert_eq!(last_message(), "internal error in libnhbm: boom");
        call_void(|| panic!("swallowed"));
    }

    #[test]
    fn the_message_is_per_thread() {
        call(|| Err(Error::inval("main thread")));
        std::thread::spawn(|| {
            assert_eq!(last_message(), "");
            call(|| Err(Error::inval("other thread")));
            assert_eq!(last_message(), "other thread");
        })
        .join()
        .unwrap();
        assert_eq!(last_message(), "main thread");
    }

    /// Fails calls from the destructor of a thread-local that outlives
    /// LAST, and reports what they saw.
    struct LateCaller(std::sync::mpsc::Sender<(bool, c_int, String, String)>);

    impl Drop for LateCaller {
        fn drop(&mut self) {
            let torn_down = LAST.try_with(|_| ()).is_err();
            let rc = call(|| Err(Error::inval("too late")));
            let after_fail = last_message();
            set_last("also too late");
            // SAFETY: nhbm_last_error returns a NUL-terminated string.
            let api = unsafe { CStr::from_ptr(crate::nhbm_last_error()) };
            let _ = self.0.send((
                torn_down,
                rc,
                after_fail,
                api.to_string_lossy().into_owned(),
            ));
        }
    }

    thread_local! {
        static LATE: RefCell<Option<LateCaller>> = const { RefCell::new(None) };
    }

    #[test]
    fn calls_after_the_thread_locals_are_torn_down_do_not_panic() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // LATE is registered first, so it is destroyed after LAST.
            LATE.with(|l| *l.borrow_mut() = Some(LateCaller(tx)));
            call(|| Err(Error::inval("in time")));
            assert_eq!(last_message(), "in time");
        })
        .join()
        .unwrap();
        let (torn_down, rc, after_fail, api) = rx.recv().unwrap();
        assert!(torn_down, "LAST was still alive: the test proves nothing");
        assert_eq!(rc, -libc::EINVAL);
        assert_eq!(after_fail, "");
        assert_eq!(api, "");
    }

    #[test]
    fn a_panicking_payload_drop_does_not_escape() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("payload drop");
            }
        }
        let rc = call(|| std::panic::panic_any(Bomb));
        assert_eq!(rc, -libc::EIO);
        assert_eq!(last_message(), "internal error in libnhbm: (no message)");
        call_void(|| std::panic::panic_any(Bomb));
        assert_eq!(call_str(|| std::panic::panic_any(Bomb)), c"".as_ptr());
    }

    #[test]
    fn interior_nul_ends_the_message() {
        set_last("a\0b");
        assert_eq!(last_message(), "a");
    }
}
