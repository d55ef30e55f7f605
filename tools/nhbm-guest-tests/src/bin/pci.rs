//! nhbm-pci-test: neuron_hbm's PCI driver against the emulated Neuron
//! functions, as KTAP (suite `nhbm_pci_<arch>` of the function under test;
//! see `nhbm_guest_tests::pci`).

use std::process::ExitCode;

use clap::Parser;
use nhbm_guest_tests::pci::suite_for;
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
    let cli = Cli::parse();
    let index = cli.cases.device.index().unwrap_or(0);
    suite_for(index).main(&cli.cases)
}
