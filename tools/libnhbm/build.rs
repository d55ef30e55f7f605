//! Links the shared library as libnhbm.so.<major> (the crate's major
//! version). What it exports is rustc's choice for a cdylib: the
//! `#[no_mangle]` items, the `nhbm_*` functions, and nothing of the Rust
//! runtime (rustc's own version script hides the rest).

use std::env;

fn main() {
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnhbm.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
