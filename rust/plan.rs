// SPDX-License-Identifier: GPL-2.0-only

//! Static mem_ref plans: parse and validate a blob ([`parse`]), then place
//! every variable once ([`stage`]); resolving is a lookup, a bounds check and
//! an add ([`stage::Plan::resolve`]).

pub(crate) mod blob;
pub(crate) mod ids;
pub(crate) mod index;
pub(crate) mod mr_type;
pub(crate) mod parse;
pub(crate) mod stage;
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod test_blob;
