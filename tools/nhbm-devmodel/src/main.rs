//! nhbm-devmodel: serves one Neuron PCI function on a vfio-user socket.
//!
//!   nhbm-devmodel --socket PATH [--arch v2|v3|v4] [--reset-ms N | --reset-never]
//!                 [--boot-ms N]
//!
//! Serves one client connection and exits when it closes (QEMU exits or the
//! function is hot-removed).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Parser;
use nhbm_devmodel::{arch::Arch, bar0::Behaviour, device::NeuronFunction};
use vfio_user::Server;

/// Serves one Neuron PCI function to QEMU's vfio-user client.
#[derive(Parser, Debug)]
#[command(name = "nhbm-devmodel")]
struct Cli {
    /// The vfio-user socket to create
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// The function's arch
    #[arg(long, default_value = "v2", value_parser = arch)]
    arch: &'static Arch,
    /// Milliseconds the firmware takes to complete a reset
    #[arg(long, value_name = "N", default_value_t = 150)]
    reset_ms: u64,
    /// The firmware never completes a reset
    #[arg(long, conflicts_with = "reset_ms")]
    reset_never: bool,
    /// Milliseconds the firmware boots after the first BAR0 access, every
    /// mailbox read answering 0xdeadbeef meanwhile
    #[arg(long, value_name = "N", default_value_t = 0)]
    boot_ms: u64,
}

fn arch(name: &str) -> anyhow::Result<&'static Arch> {
    Arch::by_name(name).ok_or_else(|| anyhow!("unknown arch {name:?}"))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let arch = cli.arch;
    let delay = (!cli.reset_never).then(|| Duration::from_millis(cli.reset_ms));
    let how = Behaviour::new(delay, Duration::from_millis(cli.boot_ms));
    let mut function = NeuronFunction::new(arch, how).context("BAR4 memory")?;
    let server = Server::new(
        &cli.socket,
        true,
        NeuronFunction::irqs(),
        function.regions(),
    )
    .with_context(|| cli.socket.display().to_string())?;
    eprintln!(
        "nhbm-devmodel: {} function 1d0f:{:04x} on {}",
        arch.name,
        arch.device_id,
        cli.socket.display()
    );
    server.run(&mut function).map_err(|e| anyhow!("{e}"))
}
