//! nhbm-devmodel: serves one Neuron PCI function on a vfio-user socket.
//!
//!   nhbm-devmodel --socket PATH [--arch v2] [--reset-ms N | --reset-never]
//!
//! Serves one client connection and exits when it closes (QEMU exits or the
//! function is hot-removed).

use nhbm_devmodel::{arch::Arch, device::NeuronFunction};
use std::path::PathBuf;
use std::process::exit;
use std::time::Duration;
use vfio_user::Server;

fn usage() -> ! {
    eprintln!("usage: nhbm-devmodel --socket PATH [--arch v2] [--reset-ms N | --reset-never]");
    exit(2);
}

fn main() {
    let mut socket = None;
    let mut arch = &nhbm_devmodel::arch::V2;
    let mut delay = Some(Duration::from_millis(150));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--arch" => {
                let name = args.next().unwrap_or_else(|| usage());
                arch = Arch::by_name(&name).unwrap_or_else(|| usage());
            }
            "--reset-ms" => {
                let ms = args.next().and_then(|s| s.parse().ok());
                delay = Some(Duration::from_millis(ms.unwrap_or_else(|| usage())));
            }
            "--reset-never" => delay = None,
            _ => usage(),
        }
    }
    let socket = socket.unwrap_or_else(|| usage());
    let mut function = match NeuronFunction::new(arch, delay) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("nhbm-devmodel: BAR4 memory: {e}");
            exit(1);
        }
    };
    let server = match Server::new(&socket, true, NeuronFunction::irqs(), function.regions()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nhbm-devmodel: {}: {e}", socket.display());
            exit(1);
        }
    };
    eprintln!(
        "nhbm-devmodel: {} function 1d0f:{:04x} on {}",
        arch.name,
        arch.device_id,
        socket.display()
    );
    if let Err(e) = server.run(&mut function) {
        eprintln!("nhbm-devmodel: {e}");
        exit(1);
    }
}
