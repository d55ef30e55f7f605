//! `nhbm info`: the device's geometry (DEVICE_INFO).

use anyhow::Result;
use nhbm::uapi::MAX_CHANNELS;
use serde_json::json;

use crate::device::Session;
use crate::fmt;

/// Prints the DEVICE_INFO read when `s` was opened.
pub fn run(s: &Session) -> Result<()> {
    if s.json {
        print_json(s);
    } else {
        print_text(s);
    }
    Ok(())
}

fn print_json(s: &Session) {
    let i = &s.info;
    let n = (i.nr_channels as usize).min(MAX_CHANNELS);
    println!(
        "{}",
        json!({
            "device": s.path, "abi_version": i.abi_version, "arch": i.arch,
            "pci_vendor": i.pci_vendor, "pci_device": i.pci_device, "simulated": i.simulated != 0,
            "nr_channels": i.nr_channels, "regions_per_channel": i.regions_per_channel,
            "nr_cores": i.nr_cores, "sbuf_size": i.sbuf_size, "min_alloc_size": i.min_alloc_size,
            "bar0_size": i.bar0_size, "bar4_size": i.bar4_size,
            "channel_base": &i.channel_base[..n], "channel_size": &i.channel_size[..n],
        })
    );
}

fn print_text(s: &Session) {
    let i = &s.info;
    let n = (i.nr_channels as usize).min(MAX_CHANNELS);
    println!("{}: neuron_hbm ABI {}", s.path.display(), i.abi_version);
    println!(
        "  arch V{}  PCI {:04x}:{:04x}{}",
        i.arch,
        i.pci_vendor,
        i.pci_device,
        if i.simulated != 0 {
            "  (simulated)"
        } else {
            ""
        }
    );
    println!(
        "  NeuronCores {}  SBUF {} each",
        i.nr_cores,
        fmt::bytes(i.sbuf_size)
    );
    println!(
        "  BAR0 {}  BAR4 {}",
        fmt::bytes(i.bar0_size),
        fmt::bytes(i.bar4_size)
    );
    println!("  minimum allocation {}", fmt::bytes(i.min_alloc_size));
    println!(
        "  HBM: {} channels x {} regions",
        i.nr_channels, i.regions_per_channel
    );
    for c in 0..n {
        let (b, s) = (i.channel_base[c], i.channel_size[c]);
        println!(
            "    hbm{c}  {b:#014x} .. {:#014x}  {}",
            b + s,
            fmt::bytes(s)
        );
    }
}
