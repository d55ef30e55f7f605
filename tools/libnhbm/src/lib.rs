//! libnhbm: the `nhbm` library for C and C++ Neuron runtimes.
//!
//! Opaque handles ([`nhbm_device`], [`nhbm_plan`], [`nhbm_loaded`],
//! [`nhbm_resolver`]) with explicit free functions; every call that can
//! fail returns 0 on success and a negative errno on failure, with a message
//! in [`nhbm_last_error`]. The UAPI structures (`struct nhbm_device_info`,
//! `struct nhbm_mem_stats`, `struct nhbm_resolve_query`) are those of
//! `<linux/neuron_hbm.h>`, which the generated header `nhbm.h` includes.
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
mod plan;
mod ptr;
mod resolver;

use std::ffi::c_char;

pub use device::{
    nhbm_device, nhbm_device_close, nhbm_device_info, nhbm_device_open, nhbm_device_open_path,
    nhbm_mem_stats, nhbm_reset,
};
pub use loaded::{
    nhbm_load, nhbm_load_info, nhbm_loaded, nhbm_loaded_free, nhbm_loaded_info, nhbm_mem_read,
    nhbm_mem_write, nhbm_resolve, nhbm_resolve_batch, nhbm_unload,
};
pub use plan::{
    nhbm_plan, nhbm_plan_error, nhbm_plan_free, nhbm_plan_from_file, nhbm_plan_from_memory,
    nhbm_plan_validate, nhbm_plan_validate_arch,
};
pub use resolver::{nhbm_resolver, nhbm_resolver_free, nhbm_resolver_new, nhbm_resolver_resolve};

/// The library's version, "MAJOR.MINOR.PATCH" (nhbm.pc's Version; MAJOR is
/// the SONAME's number).
#[unsafe(no_mangle)]
pub extern "C" fn nhbm_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
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
}
