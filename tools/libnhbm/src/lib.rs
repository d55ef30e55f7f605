//! libnhbm: the `nhbm` library for C and C++ Neuron runtimes.
//!
//! Opaque handles ([`nhbm_device`], [`nhbm_plan`], [`nhbm_loaded`],
//! [`nhbm_resolver`]) with explicit free functions; every call that can
//! fail returns 0 on success and a negative errno on failure, with a message
//! in [`nhbm_last_error`]. The UAPI structures (`struct nhbm_device_info`,
//! `struct nhbm_mem_stats`, `struct nhbm_resolve_query`) are those of the
//! library's copy of the UAPI header, `<nhbm/neuron_hbm.h>`, which the
//! generated header `<nhbm/nhbm.h>` includes.
//!
//! Every entry point checks its pointers for NULL and runs under
//! `catch_unwind`; the handles may be used from several threads at once,
//! except by the call that frees them. Documentation/libnhbm.rst has the
//! overview, the build and the ABI policy.

// The types are named as C sees them.
#![allow(non_camel_case_types)]

mod device;
mod error;
mod loaded;
mod map;
mod plan;
mod ptr;
mod resolver;
mod sharing;

use std::ffi::{c_char, c_int};

use error::Error;

pub use device::{
    nhbm_cores, nhbm_device, nhbm_device_close, nhbm_device_fd, nhbm_device_from_fd,
    nhbm_device_info, nhbm_device_open, nhbm_device_open_path, nhbm_mem_stats, nhbm_reset,
    nhbm_reset_start, nhbm_reset_wait,
};
pub use loaded::{
    nhbm_load, nhbm_load_info, nhbm_loaded, nhbm_loaded_free, nhbm_loaded_info, nhbm_mem_read,
    nhbm_mem_write, nhbm_resolve, nhbm_resolve_batch, nhbm_unload,
};
pub use map::{nhbm_map, nhbm_unmap};
pub use plan::{
    nhbm_plan, nhbm_plan_error, nhbm_plan_free, nhbm_plan_from_file, nhbm_plan_from_memory,
    nhbm_plan_validate, nhbm_plan_validate_arch,
};
pub use resolver::{nhbm_resolver, nhbm_resolver_free, nhbm_resolver_new, nhbm_resolver_resolve};
pub use sharing::{nhbm_export, nhbm_import};

/// The major version of the header: the SONAME's number (libnhbm.so.1),
/// changed only when the interface breaks.
pub const NHBM_VERSION_MAJOR: u32 = 1;
/// The minor version of the header: raised by each release that adds to
/// the interface (a new symbol version node, NHBM_<MAJOR>.<MINOR>).
pub const NHBM_VERSION_MINOR: u32 = 3;
/// The patch version of the header: fixes that add nothing.
pub const NHBM_VERSION_PATCH: u32 = 0;

/// The library's version, "MAJOR.MINOR.PATCH" (nhbm.pc's Version; MAJOR is
/// the SONAME's number).
#[unsafe(no_mangle)]
pub extern "C" fn nhbm_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Whether the running library provides the interface of version
/// `major`.`minor`: 0 when it is that version or newer, -ENOTSUP when it is
/// older (a program built against a newer header, run with an older
/// libnhbm.so.1), -EINVAL for a negative number. As liburing's
/// io_uring_check_version(), 0 means the check passed; the header's
/// NHBM_CHECK_VERSION(major, minor) makes the same comparison at compile
/// time, against NHBM_VERSION_MAJOR and NHBM_VERSION_MINOR.
#[unsafe(no_mangle)]
pub extern "C" fn nhbm_check_version(major: c_int, minor: c_int) -> c_int {
    error::call(|| {
        let (Ok(want_major), Ok(want_minor)) = (u32::try_from(major), u32::try_from(minor)) else {
            return Err(Error::inval(format!("version {major}.{minor}")));
        };
        if (want_major, want_minor) > (NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR) {
            return Err(Error::new(
                libc::ENOTSUP,
                format!(
                    "libnhbm {} is older than {major}.{minor}",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        Ok(0)
    })
}

/// The UAPI version the library speaks: a device whose module reports
/// another `abi_version` fails to open with -EPROTO. Compare with
/// `NHBM_ABI_VERSION` of the header a program was built with.
#[unsafe(no_mangle)]
pub extern "C" fn nhbm_abi_version() -> u32 {
    nhbm::uapi::ABI_VERSION
}

/// The message of the last call that failed on this thread ("" before the
/// first); never NULL. Valid until the next call that fails on this thread.
/// Calls that succeed leave it as it was. Once the thread's thread-local
/// storage is torn down (an atexit handler, a thread-specific data
/// destructor) failing calls keep no message, and this returns "".
#[unsafe(no_mangle)]
pub extern "C" fn nhbm_last_error() -> *const c_char {
    error::call_str(error::last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn version_and_abi() {
        // SAFETY: nhbm_version returns a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(nhbm_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        assert_eq!(nhbm_abi_version(), nhbm::uapi::ABI_VERSION);
        assert!(!nhbm_last_error().is_null());
    }

    #[test]
    fn the_header_constants_are_the_crate_version() {
        let v = [NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR, NHBM_VERSION_PATCH];
        let crate_v = [
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
            env!("CARGO_PKG_VERSION_PATCH"),
        ];
        assert_eq!(v.map(|n| n.to_string()), crate_v);
    }

    #[test]
    fn check_version_passes_for_this_version_and_older_ones() {
        let (major, minor) = (NHBM_VERSION_MAJOR as c_int, NHBM_VERSION_MINOR as c_int);
        assert_eq!(nhbm_check_version(major, minor), 0);
        assert_eq!(nhbm_check_version(major, 0), 0);
        assert_eq!(nhbm_check_version(0, 99), 0);
        assert_eq!(nhbm_check_version(major, minor + 1), -libc::ENOTSUP);
        assert_eq!(nhbm_check_version(major + 1, 0), -libc::ENOTSUP);
        // SAFETY: nhbm_last_error returns a NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(nhbm_last_error()) };
        assert!(msg.to_str().unwrap().contains("is older than"), "{msg:?}");
        assert_eq!(nhbm_check_version(-1, 0), -libc::EINVAL);
    }
}
