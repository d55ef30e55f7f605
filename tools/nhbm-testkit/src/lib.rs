//! What the in-guest tests of neuron_hbm (`nhbm-uapi-test`, `nhbm-fuzz-test`,
//! `nhbm-stress-test`, `nhbm-unplug-test`) have in common:
//!
//! - [`ktap`]: results printed as KTAP, one `nhbm_*` subtest in a one-test
//!   top level, each case run in isolation;
//! - [`fixtures`]: the device under test, small plans and usage snapshots;
//! - [`kinds`]: the kind numbers of the real format, the one literal table;
//! - [`mem`]: anonymous mappings with chosen protections, for user pointers
//!   that fault at a known byte.

#![deny(missing_docs)]

pub mod fixtures;
pub mod kinds;
pub mod ktap;
pub mod mem;
