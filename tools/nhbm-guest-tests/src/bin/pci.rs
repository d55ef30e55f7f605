//! nhbm-pci-test: neuron_hbm's PCI driver against the emulated Neuron
//! functions, as KTAP (suite `nhbm_pci`; see `nhbm_guest_tests::pci`).

use std::process::ExitCode;

use clap::Parser;
use nhbm_guest_tests::pci::SUITE;
use nhbm_guest_tests::suite::CaseArgs;

/// The PCI tests of neuron_hbm on emulated Neuron functions, as KTAP
/// (suite nhbm_pci).
#[derive(Parser)]
#[command(name = "nhbm-pci-test")]
struct Cli {
    #[command(flatten)]
    cases: CaseArgs,
}

fn main() -> ExitCode {
    SUITE.main(&Cli::parse().cases)
}
