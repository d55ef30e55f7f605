// SPDX-License-Identifier: GPL-2.0-only

//! The PCI driver: binds Amazon Neuron functions, checks their BARs, maps
//! them ([`io::PciIo`]), waits for the firmware, and creates each
//! function's [`Device`] and device node. Both BARs are device-managed:
//! after unbind every access answers `ENODEV` while open files still hold
//! the [`Device`].

pub(crate) mod io;

use crate::{
    abstractions::pci_override,
    abstractions::resched,
    arch::{ArchInfo, MIB, PCI_VENDOR_AMAZON, V2, V3, V4},
    chardev::Node,
    device::{Backend, Device},
    geometry,
    hw::fw::{self, Clock, RealClock},
    hw::regs::MISC_RAM_SIZE,
    pci::io::{PciIo, BAR_APB, BAR_DRAM},
};
use kernel::{device::Core, pci, prelude::*, sync::Arc};

/// What a bound function keeps: its device node and its BARs.
pub(crate) struct PciBinding {
    _node: Pin<KBox<Node>>,
    io: Arc<PciIo>,
    dev: Arc<Device>,
}

/// The PCI driver of Neuron devices.
pub(crate) struct PciDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <PciDriver as pci::Driver>::IdInfo,
    [
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7164), &V2),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7264), &V2),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7364), &V3),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7564), &V4),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7565), &V4),
    ]
);

impl PciDriver {
    /// Checks the function's BARs against `info`: `(BAR0 size, BAR4 size)`.
    /// The reference refuses only BARs of length 0 (v2/neuron_dhal_v2.c:
    /// 980-983) and checks no BAR4 size. The mailbox this driver reads must
    /// lie inside BAR0; every BAR4 access is checked against the BAR's real
    /// size, so a BAR4 smaller than the arch's layout only leaves the HBM
    /// beyond it unreachable (transfers there: `ERANGE`).
    fn check_bars(pdev: &pci::Device<Core<'_>>, info: &'static ArchInfo) -> Result<(u64, u64)> {
        let bar0_size = pdev.resource_len(BAR_APB)?;
        let bar4_size = pdev.resource_len(BAR_DRAM)?;
        if bar0_size < info.bar0_misc_ram + MISC_RAM_SIZE as u64 || bar4_size == 0 {
            dev_err!(
                pdev,
                "BAR0 ({:#x}) does not hold the {} mailbox, or BAR4 is absent\n",
                bar0_size,
                info.name
            );
            return Err(ENODEV);
        }
        if bar4_size < info.bar4_size {
            dev_warn!(
                pdev,
                "BAR4 ({:#x}) smaller than the {} layout ({:#x}): HBM beyond it unreachable\n",
                bar4_size,
                info.name,
                info.bar4_size
            );
        }
        Ok((bar0_size, bar4_size))
    }

    /// Waits for the firmware to answer, as the reference's probe does before
    /// it uses a device (`neuron_pci_get_device_id`).
    fn wait_for_firmware(pdev: &pci::Device<Core<'_>>, io: &PciIo) -> Result {
        // A probe run from a sysfs write or insmod stops once its task is killed.
        let killed = resched::checkpoint;
        let clock = RealClock::new(&killed);
        fw::wait_for_firmware(io, &clock).inspect_err(|e| {
            dev_err!(pdev, "firmware does not answer ({:?})\n", e);
        })?;
        if clock.now_ms() > 0 {
            dev_info!(pdev, "firmware answered after {} ms\n", clock.now_ms());
        }
        Ok(())
    }

    /// Refuses a function that no administrator handed to this driver
    /// through its `driver_override`, unless `claim_all` is set: AWS's
    /// `neuron` driver claims the same ids, and which of the two gets a
    /// function must not depend on which module loads first
    /// (Documentation/packaging.rst). `ENODEV` leaves it to other drivers.
    fn check_handed(pdev: &pci::Device<Core<'_>>) -> Result {
        if crate::claim_all() || pci_override::is_set(pdev) {
            return Ok(());
        }
        dev_info!(
            pdev,
            "left to other drivers: not handed to neuron_hbm through driver_override\n"
        );
        Err(ENODEV)
    }

    /// Binds `pdev` of arch `info`: checks and maps its BARs, waits for its
    /// firmware, creates its device, starts the device reset the reference's
    /// probe ends with (unless `reset_on_probe` is off), and registers its
    /// node.
    fn bind(pdev: &pci::Device<Core<'_>>, info: &'static ArchInfo) -> Result<PciBinding> {
        let device_id = pdev.device_id();
        pdev.enable_device_mem()?;
        pdev.set_master();
        let (bar0_size, bar4_size) = Self::check_bars(pdev, info)?;
        let io = PciIo::map(pdev, info, bar4_size)?;
        Self::wait_for_firmware(pdev, &io)?;
        let dev = Device::new(
            (PCI_VENDOR_AMAZON, device_id),
            Backend::Pci(io.clone()),
            geometry(info),
            Some(pdev.as_ref().name()),
        )?;
        dev_info!(
            pdev,
            "neuron_hbm{}: {:04x}:{:04x} {}, BAR0 {} MiB uncached, BAR4 {} GiB write-combining\n",
            dev.index,
            PCI_VENDOR_AMAZON,
            device_id,
            info.name,
            bar0_size / MIB,
            bar4_size / crate::arch::GIB
        );
        if crate::reset_on_probe() {
            Device::reset_at_probe(&dev)?;
        }
        Ok(PciBinding {
            _node: Node::new(dev.clone(), Some(pdev.as_ref().into()))?,
            io,
            dev,
        })
    }
}

impl pci::Driver for PciDriver {
    /// The arch of each device id.
    type IdInfo = &'static ArchInfo;
    type Data<'bound> = PciBinding;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        info.copied().ok_or(ENODEV).and_then(|info| {
            Self::check_handed(pdev)?;
            Self::bind(pdev, info)
        })
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Open files keep the device; from now on they see ENODEV, and no
        // process keeps a page of the BAR, which is released after this.
        this.io.set_gone();
        this.dev.revoke_mappings();
        // No transfer runs any more (the revocation waited them out): the
        // DMA queue's memory goes while the function is still bound.
        this.io.release_dma();
    }
}
