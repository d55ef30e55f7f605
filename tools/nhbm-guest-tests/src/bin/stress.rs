//! nhbm-stress-test: concurrency, fault injection and isolation, as KTAP
//! (suite `nhbm_stress`; see `nhbm_guest_tests::stress`).

use std::process::ExitCode;

use clap::Parser;
use nhbm_guest_tests::stress::{set_load, Args, SUITE};

fn main() -> ExitCode {
    let a = Args::parse();
    set_load(a.load());
    SUITE.main(&a.cases)
}
