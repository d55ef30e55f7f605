//! Links the shared library as libnhbm.so.<major> (the crate's major
//! version) and exports only the `nhbm_*` symbols, versioned by
//! `libnhbm.map`.

use std::env;

fn main() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnhbm.so.{major}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libnhbm.map");
    println!("cargo:rerun-if-changed=libnhbm.map");
    println!("cargo:rerun-if-changed=build.rs");
}
