// SPDX-License-Identifier: GPL-2.0-only

//! neuron_hbm: HBM memory pools, BAR access and static mem_ref plans for AWS
//! Neuron accelerators.
//!
//! Folders, top first (Documentation/design.rst, "The tree"): `pci` (the
//! PCI driver), `chardev` (the file-facing surface), `plan`, `uapi`,
//! `device`, `sim` (the simulated device), `hw` (registers, firmware
//! handshake), `pool` (the HBM grid), `arch` and `abstractions` (the kernel
//! abstractions, the only `unsafe` code). A file imports only from its own
//! folder and those below.

use kernel::prelude::*;

mod abstractions;
mod arch;
mod chardev;
mod device;
mod hw;
mod pci;
mod plan;
mod pool;
mod sim;
mod uapi;

use abstractions::{dmem, reset_queue};
use arch::ArchInfo;
use chardev::Node;
use device::{node_index::MAX_NODES, Backend, Device};
use kernel::sync::Arc;
use pool::Geometry;
use sim::SimIo;

module! {
    type: NeuronHbm,
    name: "neuron_hbm",
    authors: ["neuron_hbm developers"],
    description: "AWS Neuron HBM memory pools and static mem_ref plans",
    license: "GPL",
    params: {
        sim_devices: u32 {
            default: 0,
            description: "Simulated Neuron devices to create (0..16)",
        },
        sim_arch: u32 {
            default: 2,
            description: "Arch of the simulated devices: 2 (default), 3 or 4",
        },
        regions: u32 {
            default: 1,
            description: "Memory regions per HBM channel (1..4)",
        },
        min_alloc: u64 {
            default: 4096,
            description: "Minimum HBM allocation in bytes (power of two, >= 1024)",
        },
        fault_injection: bool {
            default: false,
            description: "Allow debugfs fail_nth on real devices (simulated ones always have it)",
        },
        fw_carveout: bool {
            default: true,
            description: "Keep the 16 MiB firmware carve-out at the start of every region",
        },
        claim_all: bool {
            default: false,
            description: "Bind every Neuron function no driver holds, not only those handed over through driver_override",
        },
        reset_on_probe: bool {
            default: true,
            description: "Reset each device when it is bound, as the reference driver does",
        },
        dma: bool {
            default: true,
            description: "Move bytes on PCI devices with their DMA engine (false: CPU copies through BAR4)",
        },
    },
}

/// Whether the `fault_injection` module parameter asks for fault injection
/// on real devices.
pub(crate) fn fault_injection_asked() -> bool {
    module_parameters::fault_injection.value()
}

/// Whether PCI devices move bytes with their DMA engine (`dma`), not with
/// CPU copies through BAR4.
pub(crate) fn use_dma() -> bool {
    module_parameters::dma.value()
}

/// Whether the driver binds every Neuron function (`claim_all`), not only
/// the functions whose `driver_override` hands them to it.
pub(crate) fn claim_all() -> bool {
    module_parameters::claim_all.value()
}

/// Whether each device is reset when it is bound or created
/// (`reset_on_probe`).
pub(crate) fn reset_on_probe() -> bool {
    module_parameters::reset_on_probe.value()
}

/// The grid geometry the module parameters ask for.
fn geometry(info: &'static ArchInfo) -> Geometry {
    Geometry {
        info,
        regions: module_parameters::regions.value() as usize,
        min_alloc: module_parameters::min_alloc.value(),
        carveout: module_parameters::fw_carveout.value(),
    }
}

/// The module: the PCI driver, the simulated devices' nodes and the reset
/// workqueue, dropped in that order: the queue, last, waits for the resets
/// still running, which removal ends at their next poll.
#[pin_data]
pub struct NeuronHbm {
    #[pin]
    _pci: kernel::driver::Registration<kernel::pci::Adapter<pci::PciDriver>>,
    sim_nodes: KVec<SimNode>,
    _resets: reset_queue::ResetQueue,
    /// Dropped last, after every device.
    _regions: dmem::Kept,
}

/// A simulated device's node; unplugged when the module goes, so that a
/// reset still running on it ends at its next poll.
struct SimNode {
    _node: Pin<KBox<Node>>,
    sim: Arc<SimIo>,
}

impl Drop for SimNode {
    fn drop(&mut self) {
        self.sim.unplug();
    }
}

/// Creates the simulated devices `sim_devices` and `sim_arch` ask for,
/// each reset at creation as a bound PCI function is (`reset_on_probe`).
fn sim_devices() -> Result<KVec<SimNode>> {
    let mut nodes = KVec::new();
    let count = module_parameters::sim_devices.value() as usize;
    if count == 0 {
        return Ok(nodes);
    }
    let arch = module_parameters::sim_arch.value();
    let Some(info) = ArchInfo::from_number(arch) else {
        pr_err!("sim_arch={} must be 2, 3 or 4\n", arch);
        return Err(EINVAL);
    };
    if count > MAX_NODES {
        pr_err!("sim_devices must be at most {}\n", MAX_NODES);
        return Err(EINVAL);
    }
    for _ in 0..count {
        let sim = Arc::pin_init(SimIo::new(info), GFP_KERNEL)?;
        let dev = Device::new(
            (arch::PCI_VENDOR_AMAZON, info.sim_pci_device),
            Backend::Sim(sim.clone()),
            geometry(info),
            None,
        )?;
        pr_info!("neuron_hbm{}: simulated {} device\n", dev.index, info.name);
        if reset_on_probe() {
            Device::reset_at_probe(&dev)?;
        }
        nodes.push(
            SimNode {
                _node: Node::new(dev, None)?,
                sim,
            },
            GFP_KERNEL,
        )?;
    }
    Ok(nodes)
}

/// Refuses parameters no device could use, with a message naming them.
fn check_params() -> Result {
    let regions = module_parameters::regions.value();
    if !(1..=arch::MAX_REGIONS as u32).contains(&regions) {
        pr_err!("regions={} must be 1..{}\n", regions, arch::MAX_REGIONS);
        return Err(EINVAL);
    }
    let min_alloc = module_parameters::min_alloc.value();
    if !min_alloc.is_power_of_two() || !(1024..=arch::GIB).contains(&min_alloc) {
        pr_err!(
            "min_alloc={} must be a power of two in 1024..1 GiB\n",
            min_alloc
        );
        return Err(EINVAL);
    }
    Ok(())
}

impl kernel::InPlaceModule for NeuronHbm {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // Only the build `make bench` loads has benchmarks: they run at load.
        #[cfg(nhbm_bench)]
        pool::bench::run();
        let regions = dmem::Kept::new();
        try_pin_init!(Self {
            _regions: regions,
            _resets: {
                check_params()?;
                reset_queue::ResetQueue::new()?
            },
            sim_nodes: sim_devices()?,
            _pci <- kernel::driver::Registration::new(c"neuron_hbm", module),
        })
    }
}
