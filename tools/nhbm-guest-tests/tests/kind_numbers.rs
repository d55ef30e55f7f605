//! The kind numbers of the UAPI header and of the library's constants
//! (generated from the header) are the real format's, as written in
//! `kinds::REAL_KINDS`, and the kernel names each kind by the header's own
//! constant.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nhbm::uapi;
use nhbm_guest_tests::kinds::{real_kind, REAL_KINDS, REAL_KINDS_ABI_VERSION};

fn repo_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `NAME = N` (header enum entries) or `const NAME: u32 = N;` (Rust) lines
/// whose name starts with `prefix`, as name -> value.
fn numbers(text: &str, prefix: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line
            .strip_prefix("pub(crate) const ")
            .or_else(|| line.strip_prefix("pub const "))
            .or_else(|| line.strip_prefix("#define "))
            .unwrap_or(line);
        let Some(rest) = line.strip_prefix(prefix) else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // After `=` (enum entry, Rust constant) or the name (#define).
        let after = &rest[name.len()..];
        let after = after.split_once('=').map_or(after, |(_, v)| v);
        let value: String = after
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(v) = value.parse() {
            out.insert(name, v);
        }
    }
    out
}

fn expected() -> BTreeMap<String, u32> {
    REAL_KINDS
        .iter()
        .map(|&(n, v)| (n.trim_start_matches("MR_").to_string(), v))
        .collect()
}

#[test]
fn the_table_is_the_runtime_enum() {
    // Seed 000 fixes three values; the other nine come from the runtime's
    // enums and are all distinct, 0..=11.
    assert_eq!(real_kind("MR_INVALID"), Some(0));
    assert_eq!(real_kind("MR_PTR"), Some(7));
    assert_eq!(real_kind("MR_REMOTE"), Some(11));
    let mut values: Vec<u32> = REAL_KINDS.iter().map(|k| k.1).collect();
    values.sort_unstable();
    assert_eq!(values, (0..12).collect::<Vec<_>>());
}

#[test]
fn header_enum_has_the_real_numbers() {
    let h = repo_file("include/uapi/linux/neuron_hbm.h");
    assert_eq!(numbers(&h, "NHBM_MR_"), expected());
    assert_eq!(
        numbers(&h, "NHBM_ABI_"),
        BTreeMap::from([("VERSION".to_string(), REAL_KINDS_ABI_VERSION)])
    );
}

/// The kernel's kind constants take their values from the header (through
/// bindgen), each from the header constant of its own name, and it names
/// every kind: what a copy-and-paste slip between two names would break.
#[test]
fn kernel_names_each_kind_by_the_headers_own_constant() {
    let k = repo_file("rust/uapi.rs");
    let mut names = Vec::new();
    for line in k.lines() {
        let Some(rest) = line.strip_prefix("pub(crate) const MR_") else {
            continue;
        };
        let (name, value) = rest.split_once(": u32 = ").expect("a u32 constant");
        assert_eq!(value, format!("c::NHBM_MR_{name};"), "MR_{name}");
        names.push(name.to_string());
    }
    names.sort();
    let mut want: Vec<String> = expected().into_keys().collect();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn library_mirror_has_the_real_numbers() {
    let lib = [
        ("MR_INVALID", uapi::MR_INVALID),
        ("MR_SB", uapi::MR_SB),
        ("MR_BUFFER_STAGED", uapi::MR_BUFFER_STAGED),
        ("MR_BUFFER", uapi::MR_BUFFER),
        ("MR_TMP_BUF", uapi::MR_TMP_BUF),
        ("MR_INPUT", uapi::MR_INPUT),
        ("MR_OUTPUT", uapi::MR_OUTPUT),
        ("MR_PTR", uapi::MR_PTR),
        ("MR_VIRTUAL_TMP_BUF", uapi::MR_VIRTUAL_TMP_BUF),
        ("MR_LIST", uapi::MR_LIST),
        ("MR_PTR_TABLE", uapi::MR_PTR_TABLE),
        ("MR_REMOTE", uapi::MR_REMOTE),
    ];
    for (name, v) in lib {
        assert_eq!(Some(v), real_kind(name), "{name}");
        // The names the library prints are the same names.
        assert_eq!(nhbm::validate::mr_type_name(v), name);
    }
    // The library's constants are generated from the header (checked
    // above); it names no kind the table does not have.
    assert_eq!(nhbm::validate::mr_type_name(12), "mr_type 12");
    assert_eq!(uapi::ABI_VERSION, REAL_KINDS_ABI_VERSION);
}
