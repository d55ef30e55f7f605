//! Generates the library's UAPI types from `include/uapi/linux/neuron_hbm.h`
//! with bindgen, so the header is the one source of the layouts on this side
//! (the kernel generates its own from the same header: `Kbuild`).
//!
//! Types take Rust names (`struct nhbm_mem_ref` becomes `MemRef`), constants
//! and enum entries lose their `NHBM_` prefix, and every structure derives the
//! zerocopy traits; `IntoBytes` only compiles for a structure without
//! padding, so a hole in the header fails this build. The union of
//! `struct nhbm_mem_ref` is left out: a Rust union cannot be `IntoBytes`, so
//! `nhbm::uapi` declares it as its two raw words and decodes it per kind
//! (bindgen's size and offset checks of `MemRef` still cover it).

use std::env;
use std::path::PathBuf;

use bindgen::callbacks::{
    DeriveInfo, DeriveTrait, ImplementsTrait, IntKind, ItemInfo, ItemKind, ParseCallbacks,
};

/// The union, declared in `nhbm::uapi` as its raw words.
const UNION: &str = "nhbm_mem_ref_union";

#[derive(Debug)]
struct Names;

/// `nhbm_mem_ref` -> `MemRef`.
fn camel(c_name: &str) -> String {
    c_name
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

impl ParseCallbacks for Names {
    fn item_name(&self, item: ItemInfo) -> Option<String> {
        match item.kind {
            ItemKind::Type => item.name.strip_prefix("nhbm_").map(camel),
            ItemKind::Var => item.name.strip_prefix("NHBM_").map(str::to_string),
            _ => None,
        }
    }

    fn enum_variant_name(
        &self,
        _enum_name: Option<&str>,
        name: &str,
        _value: bindgen::callbacks::EnumVariantValue,
    ) -> Option<String> {
        name.strip_prefix("NHBM_").map(str::to_string)
    }

    /// Array lengths are `usize`; constants above `u32` are `u64` whatever
    /// their value.
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        match name {
            "NHBM_MAX_CHANNELS" | "NHBM_MAX_REGIONS" | "NHBM_MAX_CORES" => Some(IntKind::Custom {
                name: "usize",
                is_signed: false,
            }),
            "NHBM_PA_UNSTAGED" | "NHBM_MAX_ALIGNMENT" => Some(IntKind::U64),
            _ => None,
        }
    }

    /// The union's stand-in derives everything a record derives.
    fn blocklisted_type_implements_trait(
        &self,
        name: &str,
        _derive: DeriveTrait,
    ) -> Option<ImplementsTrait> {
        (name == format!("union {UNION}") || name == UNION).then_some(ImplementsTrait::Yes)
    }

    /// Every type generated is a structure of integers: all get byte views.
    fn add_derives(&self, _info: &DeriveInfo<'_>) -> Vec<String> {
        ["FromBytes", "IntoBytes", "Immutable", "KnownLayout"]
            .iter()
            .map(|t| format!("zerocopy::{t}"))
            .collect()
    }
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let header = manifest.join("../../include/uapi/linux/neuron_hbm.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");

    let bindings = bindgen::Builder::default()
        .header(header.to_str().expect("a UTF-8 path"))
        .allowlist_type("nhbm_.*")
        .allowlist_var("NHBM_.*")
        .blocklist_type(UNION)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .translate_enum_integer_types(true)
        .derive_default(true)
        .derive_eq(true)
        .derive_partialeq(true)
        .derive_hash(false)
        .use_core()
        // `char` (dtype) is a byte here, as in the kernel's mirror.
        .ctypes_prefix("ctypes")
        .generate_comments(false)
        .parse_callbacks(Box::new(Names))
        .generate()
        .expect("bindgen could not read include/uapi/linux/neuron_hbm.h (is libclang installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("neuron_hbm.rs");
    bindings.write_to_file(&out).expect("writing the bindings");
}
