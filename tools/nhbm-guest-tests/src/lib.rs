//! The tests of neuron_hbm that run in the QEMU guest against the real device
//! nodes and print KTAP, one program per suite (`make check` runs every
//! `/tests/*-test` in name order):
//!
//! - `nhbm-uapi-test` (suite `nhbm_uapi`, [`uapi`]): every ioctl and errno,
//!   every validation rule, isolation, limits, killed and stalled copies;
//! - `nhbm-pci-test` (suite `nhbm_pci`, [`pci`]): the PCI driver against the
//!   emulated Neuron functions of `nhbm-devmodel`;
//! - `nhbm-fuzz-test` (suite `nhbm_fuzz`, [`fuzz`]): a seeded, deterministic
//!   fuzzer of the ioctl surface;
//! - `nhbm-stress-test` (suite `nhbm_stress`, [`stress`]): isolation between
//!   open files, fault injection through debugfs `fail_nth`, processes and
//!   threads on both devices at once;
//! - `nhbm-monitor-test` (suite `nhbm_monitor`, [`monitor`]): `nhbm ls`,
//!   `monitor` and `top` while two tenant processes hold plans;
//! - `nhbm-unplug-test` (suite `nhbm_unplug`, [`unplug`]): surprise removal
//!   of `/dev/neuron_hbm1`, irreversible until the module is reloaded, so it
//!   runs last.
//!
//! # Case tables
//!
//! The cases of `nhbm_uapi`, `nhbm_pci` and `nhbm_stress` are not listed by
//! hand: `build.rs` generates each suite's table from its directory
//! (`src/uapi/`, `src/pci/`, `src/stress/`). A case is a top-level
//!
//! ```text
//! pub fn name_that_says_what_holds() -> TestResult
//! pub fn name_that_says_what_holds(notes: &mut Notes) -> TestResult
//! ```
//!
//! in the suite's `mod.rs` or in a module it declares; the cases run in
//! module declaration order, then source order, under their function's name.
//! Any other `pub fn` returning `TestResult` there stops the build (helpers
//! are not `pub`), and a case written without `pub` is dead code, which
//! `make lint` refuses: a case cannot be written and left out. The fuzzer's
//! and the removal's result lines are fixed by their own structure (one per
//! fuzz category, one per finding of the removal).
//!
//! # Shared parts
//!
//! - [`ktap`]: the KTAP printer, each case run in isolation;
//! - [`suite`]: the case-table suites' command line and run;
//! - [`fixtures`]: the device under test, small plans, usage snapshots;
//! - [`loaded`]: the checks every loaded plan must pass;
//! - [`kinds`]: the kind numbers of the real format, the one literal table;
//! - [`mem`], [`sys`]: mappings with chosen protections, faulting pointers;
//! - [`debugfs`], [`rng`]: the module's debugfs files, a seeded generator;
//! - [`tenant`], [`pty`], [`as_user`]: a child process holding a plan, a
//!   pseudo-terminal, a program run as another user.

#![deny(missing_docs)]

pub mod as_user;
pub mod debugfs;
pub mod fixtures;
pub mod fuzz;
pub mod kinds;
pub mod ktap;
pub mod loaded;
pub mod mem;
pub mod monitor;
pub mod pci;
pub mod pty;
pub mod rng;
pub mod stress;
pub mod suite;
pub mod sys;
pub mod tenant;
pub mod uapi;
pub mod unplug;
