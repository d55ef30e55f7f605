// SPDX-License-Identifier: GPL-2.0

//! The PCI backend: binds Amazon Neuron functions, maps BAR0 (APB/CSR) and
//! BAR4 (HBM window) and serves [`DeviceIo`] from them. BAR2 (AXI) is unused
//! on every shipping arch and never touched. Both BARs are device-managed:
//! after unbind every access answers `ENODEV` while open files still hold the
//! [`Device`].
//!
//! BAR0 is mapped uncached (registers); BAR4 write-combining ([`WcBar`]),
//! as the reference driver maps its HBM window. Bulk transfers use 64-bit
//! MMIO accesses.

use crate::{
    arch::{ArchInfo, MIB, PCI_VENDOR_AMAZON},
    chardev::Node,
    device::{Backend, Device},
    geometry,
    io::{check_range, DeviceIo},
    wc_bar::WcBar,
};
use kernel::{
    device::Core,
    devres::Devres,
    io::Io,
    pci::{self, Bar, DevresBar},
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// BAR indices (`apb_bar = 0`, `dram_bar = 4`; seed 001 §1).
const BAR_APB: u32 = 0;
const BAR_DRAM: u32 = 4;

/// BAR0 and BAR4 of one bound PCI function.
pub(crate) struct PciIo {
    bar0: DevresBar,
    bar4: Devres<WcBar>,
    bar0_size: u64,
    bar4_size: u64,
    present: Atomic<bool>,
}

impl PciIo {
    fn with_bar0<R>(&self, f: impl FnOnce(&Bar<'_>) -> Result<R>) -> Result<R> {
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        let guard = self.bar0.try_access().ok_or(ENODEV)?;
        f(&guard)
    }

    fn with_bar4<R>(&self, f: impl FnOnce(&WcBar) -> Result<R>) -> Result<R> {
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        let guard = self.bar4.try_access().ok_or(ENODEV)?;
        f(&guard)
    }

    fn reg_offset(&self, off: u64) -> Result<usize> {
        check_range(off, 4, self.bar0_size)?;
        if off % 4 != 0 {
            return Err(EINVAL);
        }
        Ok(off as usize)
    }
}

impl DeviceIo for PciIo {
    fn read32(&self, off: u64) -> Result<u32> {
        let off = self.reg_offset(off)?;
        self.with_bar0(|b| b.try_read32(off))
    }

    fn write32(&self, off: u64, value: u32) -> Result {
        let off = self.reg_offset(off)?;
        self.with_bar0(|b| b.try_write32(value, off))
    }

    fn bar4_write(&self, off: u64, src: &[u8]) -> Result {
        check_range(off, src.len() as u64, self.bar4_size)?;
        self.with_bar4(|b| {
            let mut i = 0usize;
            while i < src.len() {
                let at = off as usize + i;
                if at % 8 == 0 && src.len() - i >= 8 {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&src[i..i + 8]);
                    b.try_write64(u64::from_le_bytes(w), at)?;
                    i += 8;
                } else {
                    b.try_write8(src[i], at)?;
                    i += 1;
                }
            }
            Ok(())
        })
    }

    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result {
        check_range(off, dst.len() as u64, self.bar4_size)?;
        self.with_bar4(|b| {
            let mut i = 0usize;
            while i < dst.len() {
                let at = off as usize + i;
                if at % 8 == 0 && dst.len() - i >= 8 {
                    dst[i..i + 8].copy_from_slice(&b.try_read64(at)?.to_le_bytes());
                    i += 8;
                } else {
                    dst[i] = b.try_read8(at)?;
                    i += 1;
                }
            }
            Ok(())
        })
    }

    fn bar4_zero(&self, off: u64, len: u64) -> Result {
        check_range(off, len, self.bar4_size)?;
        // Zeros straight from a register: no buffer to allocate or fill.
        self.with_bar4(|b| {
            let (mut at, end) = (off as usize, (off + len) as usize);
            while at < end {
                if at % 8 == 0 && end - at >= 8 {
                    b.try_write64(0, at)?;
                    at += 8;
                } else {
                    b.try_write8(0, at)?;
                    at += 1;
                }
            }
            Ok(())
        })
    }

    fn is_present(&self) -> bool {
        self.present.load(Relaxed) && self.bar0.try_access().is_some()
    }
}

/// What a bound function keeps: its device node and its BARs.
pub(crate) struct PciBinding {
    _node: Pin<KBox<Node>>,
    io: Arc<PciIo>,
}

/// The PCI driver of Neuron devices.
pub(crate) struct PciDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <PciDriver as pci::Driver>::IdInfo,
    [
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7164), ()),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7264), ()),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7364), ()),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7564), ()),
        (pci::DeviceId::from_id(pci::Vendor::AMAZON, 0x7565), ()),
    ]
);

impl PciDriver {
    fn bind(pdev: &pci::Device<Core<'_>>) -> Result<PciBinding> {
        let device_id = pdev.device_id();
        let info = ArchInfo::from_pci_device(device_id).ok_or(ENODEV)?;
        pdev.enable_device_mem()?;
        pdev.set_master();
        let bar0_size = pdev.resource_len(BAR_APB)?;
        let bar4_size = pdev.resource_len(BAR_DRAM)?;
        // The mailbox must be in BAR0 and every channel reachable through BAR4.
        if bar0_size < info.bar0_misc_ram + MIB || bar4_size < info.bar4_size {
            dev_err!(
                pdev,
                "BAR0 ({:#x}) or BAR4 ({:#x}) smaller than the {} layout\n",
                bar0_size,
                bar4_size,
                info.name
            );
            return Err(ENODEV);
        }
        let bar0 = pdev.iomap_region(BAR_APB, c"neuron_hbm")?.into_devres()?;
        let bar4 = WcBar::map(pdev, BAR_DRAM, c"neuron_hbm")?;
        let io = Arc::new(
            PciIo {
                bar0,
                bar4,
                bar0_size,
                bar4_size,
                present: Atomic::new(true),
            },
            GFP_KERNEL,
        )?;
        let dev = Device::new(
            (PCI_VENDOR_AMAZON, device_id),
            Backend::Pci(io.clone()),
            geometry(info),
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
        Ok(PciBinding {
            _node: Node::new(dev)?,
            io,
        })
    }
}

impl pci::Driver for PciDriver {
    type IdInfo = ();
    type Data<'bound> = PciBinding;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        Self::bind(pdev)
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Open files keep the device; from now on they see ENODEV.
        this.io.present.store(false, Relaxed);
    }
}
