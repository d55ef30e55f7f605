//! Robustness tests of neuron_hbm that run in the QEMU guest against the real
//! device nodes and print KTAP:
//!
//! - `nhbm-fuzz-test` (suite `nhbm_fuzz`): a seeded, deterministic fuzzer of
//!   the ioctl surface ([`fuzz`]);
//! - `nhbm-stress-test` (suite `nhbm_stress`): processes and threads on both
//!   devices at once, fault injection through debugfs `fail_nth`, isolation
//!   between open files ([`stress`]);
//! - `nhbm-unplug-test` (suite `nhbm_unplug`): simulated surprise removal of
//!   `/dev/neuron_hbm1`, irreversible until the module is reloaded, so it runs
//!   last ([`unplug`]).

pub mod debugfs;
pub mod fixtures;
pub mod fuzz;
pub mod rng;
pub mod stress;
pub mod sys;
pub mod unplug;
