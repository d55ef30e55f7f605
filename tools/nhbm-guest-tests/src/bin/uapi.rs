//! nhbm-uapi-test: every neuron_hbm ioctl through the real device nodes, as
//! KTAP (suite `nhbm_uapi`; see `nhbm_guest_tests::uapi`).

use std::process::ExitCode;

use clap::Parser;
use nhbm_guest_tests::suite::CaseArgs;
use nhbm_guest_tests::uapi::SUITE;

/// The UAPI tests of neuron_hbm, as KTAP (suite nhbm_uapi).
#[derive(Parser)]
#[command(name = "nhbm-uapi-test")]
struct Cli {
    #[command(flatten)]
    cases: CaseArgs,
}

fn main() -> ExitCode {
    SUITE.main(&Cli::parse().cases)
}
