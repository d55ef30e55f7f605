// SPDX-License-Identifier: GPL-2.0-only

//! The PCI backend: binds Amazon Neuron functions, maps BAR0 (APB/CSR) and
//! BAR4 (HBM window) and serves [`DeviceIo`] from them. BAR2 (AXI) is unused
//! on every shipping arch and never touched. Both BARs are device-managed:
//! after unbind every access answers `ENODEV` while open files still hold the
//! [`Device`].
//!
//! BAR0 is mapped uncached (registers); BAR4 write-combining ([`WcBar`]),
//! as the reference driver maps its HBM window. Bulk transfers use 64-bit
//! MMIO accesses in a loop without calls ([`bar4::write_words`]); only the
//! unaligned bytes at their ends go one at a time.

use crate::{
    abstractions::io_view::mmio_window,
    abstractions::pci_override,
    abstractions::pci_presence,
    abstractions::resched,
    abstractions::vma::Backing,
    abstractions::wc_bar::WcBar,
    arch::{ArchInfo, MIB, PCI_VENDOR_AMAZON, V2, V3, V4},
    chardev::Node,
    device::{Backend, Device},
    geometry,
    hw::bar4,
    hw::fw::{self, Clock, RealClock},
    hw::io::{check_range, DeviceIo},
    hw::regs::{MiscRam, DEVICE_ID, GONE, MISC_RAM_SIZE},
};
use kernel::{
    device::Core,
    devres::Devres,
    io::{Io, IoBase, IoSysMap},
    page::{PAGE_SHIFT, PAGE_SIZE},
    pci::{self, Bar, DevresBar},
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// BAR indices (`apb_bar = 0`, `dram_bar = 4`; seed 001 §1).
const BAR_APB: u32 = 0;
const BAR_DRAM: u32 = 4;

/// Bytes of the widest BAR4 access a bulk transfer makes.
const WIDE: usize = size_of::<u64>();

/// The word-aligned middle of a transfer of `len` bytes at BAR offset
/// `off`: bytes before it, and its length (a multiple of [`WIDE`], 0 when
/// the transfer holds no aligned word). The bytes around it go one at a
/// time.
fn aligned_part(off: usize, len: usize) -> (usize, usize) {
    let head = (WIDE - off % WIDE) % WIDE;
    if head + WIDE > len {
        return (len, 0);
    }
    (head, (len - head) / WIDE * WIDE)
}

/// BAR0 and BAR4 of one bound PCI function.
pub(crate) struct PciIo {
    /// The function, for its configuration space.
    pdev: ARef<pci::Device>,
    bar0: DevresBar,
    bar4: Devres<WcBar>,
    /// Bus address of BAR4, where a process's mapping of it points.
    bar4_start: u64,
    /// BAR0 offset of the MISC RAM; `MISC_RAM_SIZE` bytes from there are in BAR0.
    misc_ram: usize,
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
}

impl DeviceIo for PciIo {
    fn with_misc_ram(&self, f: &mut dyn FnMut(MiscRam<'_>)) -> Result {
        self.with_bar0(|b| {
            // Mapped while the access guard `b` lives, i.e. for this call.
            let window = mmio_window::<MISC_RAM_SIZE>(b.as_view(), self.misc_ram)?;
            f(IoSysMap::Io(window));
            Ok(())
        })
    }

    fn bar4_write(&self, off: u64, src: &[u8]) -> Result {
        check_range(off, src.len() as u64, self.bar4_size)?;
        let off = off as usize;
        let (head, len) = aligned_part(off, src.len());
        self.with_bar4(|b| {
            let narrow = |i: usize| b.try_write8(src[i], off + i);
            (0..head).try_for_each(narrow)?;
            if len > 0 {
                bar4::write_words(b, off + head, &src[head..head + len])?;
            }
            (head + len..src.len()).try_for_each(narrow)
        })
    }

    fn bar4_read(&self, off: u64, dst: &mut [u8]) -> Result {
        check_range(off, dst.len() as u64, self.bar4_size)?;
        let off = off as usize;
        let (head, len) = aligned_part(off, dst.len());
        self.with_bar4(|b| {
            for i in Iterator::chain(0..head, head + len..dst.len()) {
                dst[i] = b.try_read8(off + i)?;
            }
            if len > 0 {
                bar4::read_words(b, off + head, &mut dst[head..head + len])?;
            }
            Ok(())
        })
    }

    fn bar4_zero(&self, off: u64, len: u64) -> Result {
        check_range(off, len, self.bar4_size)?;
        let (off, total) = (off as usize, len as usize);
        let (head, len) = aligned_part(off, total);
        // Zeros straight from a register: no buffer to allocate or fill.
        self.with_bar4(|b| {
            let narrow = |i: usize| b.try_write8(0, off + i);
            (0..head).try_for_each(narrow)?;
            if len > 0 {
                bar4::zero_words(b, off + head, len)?;
            }
            (head + len..total).try_for_each(narrow)
        })
    }

    fn bar4_backing(&self) -> Backing {
        Backing::Io
    }

    fn bar4_map_page(&self, off: u64, insert: &mut dyn FnMut(usize) -> Result) -> Result {
        // The BAR stays requested until the function is unbound, and
        // unbinding takes every mapping away (`Device::revoke_mappings`)
        // after this flag falls and before the BAR is released; a fault
        // racing it runs under the lock the revocation takes.
        if !self.present.load(Relaxed) {
            return Err(ENODEV);
        }
        check_range(off, PAGE_SIZE as u64, self.bar4_size)?;
        if off % PAGE_SIZE as u64 != 0 {
            return Err(EINVAL);
        }
        let pfn = (self.bar4_start + off) >> PAGE_SHIFT;
        insert(usize::try_from(pfn)?)
    }

    fn is_present(&self) -> bool {
        self.present.load(Relaxed) && self.bar0.try_access().is_some()
    }

    fn config_present(&self) -> bool {
        pci_presence::is_present(&self.pdev)
    }

    fn confirm_present(&self) -> Result {
        let io: &dyn DeviceIo = self;
        let id = io.misc_ram(|mb| u32::from(mb.read(DEVICE_ID)))?;
        // All ones alone may be a transient (a link retraining): the
        // function is gone only when its configuration space is too.
        if id == GONE && !self.config_present() {
            // Removed by surprise: no read answers any more, and none will.
            self.present.store(false, Relaxed);
            return Err(ENODEV);
        }
        Ok(())
    }
}

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

    /// Maps BAR0 uncached and BAR4 write-combining.
    fn map_bars(
        pdev: &pci::Device<Core<'_>>,
        info: &'static ArchInfo,
        bar4_size: u64,
    ) -> Result<Arc<PciIo>> {
        Ok(Arc::new(
            PciIo {
                pdev: pdev.into(),
                bar0: pdev.iomap_region(BAR_APB, c"neuron_hbm")?.into_devres()?,
                bar4: WcBar::map(pdev, BAR_DRAM, c"neuron_hbm")?,
                bar4_start: pdev.resource_start(BAR_DRAM)?,
                misc_ram: usize::try_from(info.bar0_misc_ram)?,
                bar4_size,
                present: Atomic::new(true),
            },
            GFP_KERNEL,
        )?)
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
        let io = Self::map_bars(pdev, info, bar4_size)?;
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
        this.io.present.store(false, Relaxed);
        this.dev.revoke_mappings();
    }
}

#[kunit_tests(neuron_hbm_pci)]
mod tests {
    use super::*;

    #[test]
    fn transfers_split_into_bytes_words_and_bytes() {
        // No aligned word inside: every byte on its own.
        assert_eq!(aligned_part(0, 2), (2, 0));
        assert_eq!(aligned_part(1, 1), (1, 0));
        assert_eq!(aligned_part(7, 8), (8, 0));
        assert_eq!(aligned_part(0, 0), (0, 0));
        // Head, words, tail.
        assert_eq!(aligned_part(0, 16), (0, 16));
        assert_eq!(aligned_part(3, 20), (5, 8));
        assert_eq!(aligned_part(7, 9), (1, 8));
        assert_eq!(aligned_part(8, 65536), (0, 65536));
    }
}
