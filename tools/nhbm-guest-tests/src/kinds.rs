//! The numbers of the runtime's `kbin_mr_type_t`, written out literally in
//! this one place. The UAPI header and the library's constants
//! (`nhbm::uapi`, generated from the header) are checked against this
//! table, and the kernel's names (`rust/uapi.rs`, also from the header)
//! against the header
//! (`tests/kind_numbers.rs`), and the in-guest every-kind test checks the
//! numbers a built blob carries against it, so a changed kind value fails.

/// Every kind, by its name without the `NHBM_` prefix, and its number.
pub const REAL_KINDS: [(&str, u32); 12] = [
    ("MR_INVALID", 0),
    ("MR_SB", 1),
    ("MR_BUFFER_STAGED", 2),
    ("MR_BUFFER", 3),
    ("MR_TMP_BUF", 4),
    ("MR_INPUT", 5),
    ("MR_OUTPUT", 6),
    ("MR_PTR", 7),
    ("MR_VIRTUAL_TMP_BUF", 8),
    ("MR_LIST", 9),
    ("MR_PTR_TABLE", 10),
    ("MR_REMOTE", 11),
];

/// The ABI version that carries these numbers.
pub const REAL_KINDS_ABI_VERSION: u32 = 2;

/// The number of the kind called `name` (e.g. "MR_SB").
pub fn real_kind(name: &str) -> Option<u32> {
    REAL_KINDS.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}
