//! One Neuron PCI function served over vfio-user: configuration space, BAR0
//! (trapped: every access is a message to the model, the UDMA engines'
//! registers among them), BAR4 (a sparse memfd the client maps straight
//! into the guest) and the guest memory the client shares for DMA.

use crate::arch::Arch;
use crate::bar0::{ctrl, Bar0, Behaviour, Firmware, Hbm};
use crate::config::{ConfigSpace, CONFIG_SIZE};
use crate::guest_mem::GuestMemory;
use crate::udma::Udma;
use std::fs::File;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, RwLock};
use std::time::Instant;
use vfio_bindings::bindings::vfio::{
    vfio_region_info, vfio_region_sparse_mmap_area, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_BAR4_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_NUM_IRQS,
    VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, ServerBackend, ServerRegion, SparseArea};

/// The HBM behind BAR4: a memfd of the BAR's size, sparse until written.
pub struct Bar4 {
    arch: &'static Arch,
    mem: File,
}

impl Bar4 {
    /// A zero-filled BAR4 of `arch`'s size.
    pub fn new(arch: &'static Arch) -> io::Result<Self> {
        // SAFETY: the name is a NUL-terminated string; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"nhbm-bar4".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let mem = unsafe { File::from_raw_fd(fd) };
        mem.set_len(arch.bar4_size)?;
        Ok(Bar4 { arch, mem })
    }

    /// The memfd.
    pub fn file(&self) -> &File {
        &self.mem
    }

    fn check(&self, off: u64, len: usize) -> io::Result<()> {
        match off.checked_add(len as u64) {
            Some(end) if end <= self.arch.bar4_size => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Reads BAR4 at `off`.
    pub fn read(&self, off: u64, data: &mut [u8]) -> io::Result<()> {
        self.check(off, data.len())?;
        self.mem.read_exact_at(data, off)
    }

    /// Writes BAR4 at `off`.
    pub fn write(&self, off: u64, data: &[u8]) -> io::Result<()> {
        self.check(off, data.len())?;
        self.mem.write_all_at(data, off)
    }

    /// Bytes of BAR4 backed by memory.
    pub fn resident_bytes(&self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        self.mem.metadata().map(|m| m.blocks() * 512)
    }
}

impl Hbm for Bar4 {
    fn read_pa(&self, pa: u64) -> Option<u32> {
        let off = self.arch.bar4_offset(pa, 4)?;
        let mut b = [0u8; 4];
        self.read(off, &mut b).ok()?;
        Some(u32::from_le_bytes(b))
    }

    fn write_pa(&self, pa: u64, value: u32) -> bool {
        self.arch
            .bar4_offset(pa, 4)
            .is_some_and(|off| self.write(off, &value.to_le_bytes()).is_ok())
    }
}

/// One function: what the vfio-user server asks the model.
pub struct NeuronFunction {
    arch: &'static Arch,
    config: ConfigSpace,
    bar0: Bar0,
    bar4: Bar4,
    /// The firmware the model was started with (restored on device reset).
    how: Behaviour,
    /// The guest memory the client shared.
    guest: Arc<RwLock<GuestMemory>>,
    /// The DMA engines.
    udma: Udma,
    /// Device resets the engines have seen.
    device_resets: u32,
}

impl NeuronFunction {
    /// A function of `arch` whose firmware behaves as `how` says.
    pub fn new(arch: &'static Arch, how: Behaviour) -> io::Result<Self> {
        let bar4 = Bar4::new(arch)?;
        let guest = Arc::new(RwLock::new(GuestMemory::default()));
        let udma = Udma::new(arch, bar4.file(), Arc::clone(&guest))?;
        Ok(NeuronFunction {
            arch,
            config: ConfigSpace::new(arch),
            bar0: Bar0::new(
                arch.bar0_size,
                arch.misc_ram,
                Firmware::new(how, arch.tpb_units),
            ),
            bar4,
            how,
            guest,
            udma,
            device_resets: 0,
        })
    }

    /// The DMA engines.
    pub fn udma(&self) -> &Udma {
        &self.udma
    }

    /// The guest memory the client shared.
    pub fn guest(&self) -> &RwLock<GuestMemory> {
        &self.guest
    }

    /// BAR4.
    pub fn bar4(&self) -> &Bar4 {
        &self.bar4
    }

    /// The regions announced to the client: config space, BAR0 (trapped) and
    /// BAR4 (mmap-able over its whole size through the memfd).
    pub fn regions(&self) -> Vec<ServerRegion> {
        let rw = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
        (0..VFIO_PCI_NUM_REGIONS)
            .map(|index| {
                let (size, flags) = match index {
                    VFIO_PCI_CONFIG_REGION_INDEX => (CONFIG_SIZE, rw),
                    VFIO_PCI_BAR0_REGION_INDEX => (self.arch.bar0_size, rw),
                    VFIO_PCI_BAR4_REGION_INDEX => {
                        (self.arch.bar4_size, rw | VFIO_REGION_INFO_FLAG_MMAP)
                    }
                    _ => (0, 0),
                };
                let mmap = index == VFIO_PCI_BAR4_REGION_INDEX;
                ServerRegion {
                    region_info: vfio_region_info {
                        argsz: size_of::<vfio_region_info>() as u32,
                        index,
                        size,
                        flags,
                        ..Default::default()
                    },
                    sparse_areas: if mmap {
                        vec![SparseArea {
                            area: vfio_region_sparse_mmap_area { offset: 0, size },
                        }]
                    } else {
                        Vec::new()
                    },
                    mmap_fd: mmap.then(|| self.bar4.file().as_raw_fd()),
                }
            })
            .collect()
    }

    /// No interrupts of any kind.
    pub fn irqs() -> Vec<IrqInfo> {
        (0..VFIO_PCI_NUM_IRQS)
            .map(|index| IrqInfo {
                index,
                count: 0,
                flags: 0,
            })
            .collect()
    }

    /// Resets the engines once for each device reset the firmware took.
    fn follow_firmware(&mut self) {
        let n = self.bar0.fw.device_resets();
        if n != self.device_resets {
            self.device_resets = n;
            self.udma.reset();
        }
    }

    /// The control port's DMA registers, read.
    fn dma_ctrl_read(&self, reg: u64) -> Option<u32> {
        let s = self.udma.stats();
        Some(match reg {
            ctrl::DMA_STALL => u32::from(self.udma.stalled()),
            ctrl::DMA_PAIRS => s.pairs,
            ctrl::DMA_FAULTS => s.faults,
            ctrl::DMA_DROPPED => s.dropped,
            ctrl::DMA_MOST_PENDING => s.most_pending,
            ctrl::DMA_DOORBELLS => s.doorbells,
            ctrl::DMA_MAPPED_MIB => {
                let g = self.guest.read().unwrap_or_else(|e| e.into_inner());
                u32::try_from(g.mapped_bytes() >> 20).unwrap_or(u32::MAX)
            }
            _ => return None,
        })
    }

    /// The control port's DMA registers, written; false for another.
    fn dma_ctrl_write(&self, reg: u64, value: u32) -> bool {
        match reg {
            ctrl::DMA_STALL => self.udma.set_stalled(value != 0),
            ctrl::DMA_FAIL_AFTER => self.udma.fail_after(value),
            ctrl::DMA_MOST_PENDING => self.udma.clear_most_pending(),
            _ => return false,
        }
        true
    }

    fn read32(&mut self, off: u64) -> u32 {
        let ctrl_reg = off.checked_sub(self.bar0.ctrl_base());
        if let Some(v) = ctrl_reg.and_then(|r| self.dma_ctrl_read(r)) {
            return v;
        }
        let v = match self.udma.read(off) {
            Some(_) if self.bar0.removed() => u32::MAX,
            Some(v) => v,
            None => self.bar0.read32(off, Instant::now(), &self.bar4),
        };
        self.follow_firmware();
        v
    }

    fn write32(&mut self, off: u64, value: u32) {
        let ctrl_reg = off.checked_sub(self.bar0.ctrl_base());
        if ctrl_reg.is_some_and(|r| self.dma_ctrl_write(r, value)) {
            return;
        }
        if self.bar0.removed() || !self.udma.write(off, value) {
            self.bar0.write32(off, value, Instant::now(), &self.bar4);
        }
        self.follow_firmware();
    }

    fn bar0_read(&mut self, off: u64, data: &mut [u8]) {
        if data.len() == 4 && off % 4 == 0 {
            let v = self.read32(off);
            data.copy_from_slice(&v.to_le_bytes());
        } else {
            data.fill(0xff);
        }
    }

    fn bar0_write(&mut self, off: u64, data: &[u8]) {
        if let Ok(b) = <[u8; 4]>::try_from(data) {
            self.write32(off, u32::from_le_bytes(b));
        }
    }
}

fn unsupported() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

impl ServerBackend for NeuronFunction {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        match region {
            // A function removed by surprise answers nothing: all ones.
            VFIO_PCI_CONFIG_REGION_INDEX if self.bar0.removed() => data.fill(0xff),
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => self.bar0_read(offset, data),
            VFIO_PCI_BAR4_REGION_INDEX => self.bar4.read(offset, data)?,
            _ => return Err(unsupported()),
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.write(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => self.bar0_write(offset, data),
            VFIO_PCI_BAR4_REGION_INDEX => self.bar4.write(offset, data)?,
            _ => return Err(unsupported()),
        }
        Ok(())
    }

    /// Guest memory the engines may reach; a region without a file cannot
    /// be mapped, so DMA to it faults.
    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let Some(fd) = fd else {
            eprintln!(
                "nhbm-devmodel: DMA_MAP of {address:#x}+{size:#x} without a file: \
                 out of the engines' reach"
            );
            return Ok(());
        };
        let writable = flags.contains(DmaMapFlags::WRITE);
        let mut g = self.guest.write().unwrap_or_else(|e| e.into_inner());
        g.map(address, size, &fd, offset, writable)
    }

    /// Waits out a transfer that reads or writes the region (the engines
    /// hold the guest memory shared while they copy), then unmaps it.
    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> io::Result<()> {
        let mut g = self.guest.write().unwrap_or_else(|e| e.into_inner());
        let all = flags.contains(DmaUnmapFlags::UNMAP_ALL);
        // A region announced without a file was never mapped.
        g.unmap(address, size, all).or(Ok(()))
    }

    /// A function-level reset: configuration, firmware and engine state
    /// start over (what the engines had in flight is dropped); HBM keeps
    /// its contents, as device memory does across a reset.
    fn reset(&mut self) -> io::Result<()> {
        self.udma.reset();
        self.device_resets = 0;
        self.config = ConfigSpace::new(self.arch);
        self.bar0 = Bar0::new(
            self.arch.bar0_size,
            self.arch.misc_ram,
            Firmware::new(self.how, self.arch.tpb_units),
        );
        Ok(())
    }

    fn set_irqs(
        &mut self,
        _index: u32,
        _flags: u32,
        _start: u32,
        count: u32,
        _fds: Vec<File>,
    ) -> io::Result<()> {
        if count == 0 {
            Ok(())
        } else {
            Err(unsupported())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{V2, V3};
    use crate::bar0::{ctrl, FW_STATUS, RESET_REQUEST, RESET_TRIGGER};
    use std::time::Duration;

    const GIB: u64 = 1 << 30;
    const CTRL: u64 = GIB - 0x1000;
    const STATUS: u64 = 0x30fa_0000 + FW_STATUS;

    fn prompt(delay: Option<Duration>) -> Behaviour {
        Behaviour::new(delay, Duration::ZERO)
    }

    fn read32(f: &mut NeuronFunction, region: u32, off: u64) -> u32 {
        let mut b = [0u8; 4];
        f.region_read(region, off, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    fn write32(f: &mut NeuronFunction, region: u32, off: u64, v: u32) {
        f.region_write(region, off, &v.to_le_bytes()).unwrap();
    }

    #[test]
    fn regions_announce_bar0_bar4_and_no_bar2() {
        let f = NeuronFunction::new(&V2, prompt(Some(Duration::ZERO))).unwrap();
        let r = f.regions();
        assert_eq!(r.len(), 9);
        assert_eq!(r[0].region_info.size, GIB);
        assert!(r[0].mmap_fd.is_none() && r[0].sparse_areas.is_empty());
        assert_eq!(r[2].region_info.size, 0, "BAR2");
        assert_eq!(r[4].region_info.size, 32 * GIB);
        assert_ne!(r[4].region_info.flags & VFIO_REGION_INFO_FLAG_MMAP, 0);
        assert_eq!(r[4].sparse_areas[0].area.size, 32 * GIB);
        assert!(r[4].mmap_fd.is_some());
        assert_eq!(r[7].region_info.size, 256);
    }

    #[test]
    fn bar4_is_sparse_and_follows_the_remap() {
        let mut f = NeuronFunction::new(&V2, prompt(Some(Duration::ZERO))).unwrap();
        assert_eq!(f.bar4().resident_bytes().unwrap(), 0);
        // The guest writes BAR4 at 16 GiB + 0x100 (the memfd mapping) ...
        f.bar4()
            .write(16 * GIB + 0x100, &0x5eed_u32.to_le_bytes())
            .unwrap();
        // ... which is device address 64 GiB + 0x100 to the control port.
        write32(&mut f, 0, CTRL + ctrl::HBM_PA_HI, 0x10);
        write32(&mut f, 0, CTRL + ctrl::HBM_PA_LO, 0x100);
        assert_eq!(read32(&mut f, 0, CTRL + ctrl::HBM_DATA), 0x5eed);
        assert_eq!(read32(&mut f, 4, 16 * GIB + 0x100), 0x5eed);
        assert!(f.bar4().resident_bytes().unwrap() <= 64 * 1024);
        let mut b = [0u8; 4];
        assert!(f.region_read(4, 32 * GIB - 2, &mut b).is_err());
    }

    #[test]
    fn device_reset_restarts_the_firmware_and_keeps_hbm() {
        let mut f = NeuronFunction::new(&V2, prompt(None)).unwrap();
        write32(&mut f, 0, 0x30fa_0000 + RESET_REQUEST, 1);
        write32(&mut f, 0, 0x30fa_0000 + RESET_TRIGGER, 1);
        assert_eq!(read32(&mut f, 0, STATUS), 0x8);
        f.bar4().write(0, &[1, 2, 3, 4]).unwrap();
        f.reset().unwrap();
        assert_eq!(read32(&mut f, 0, STATUS), 0);
        assert_eq!(read32(&mut f, 4, 0), 0x0403_0201);
        assert_eq!(read32(&mut f, 7, 0), 0x7164_1d0f);
    }

    #[test]
    fn removed_function_reads_ones_in_config_space_too() {
        let mut f = NeuronFunction::new(&V2, prompt(None)).unwrap();
        assert_eq!(read32(&mut f, 7, 0), 0x7164_1d0f);
        write32(&mut f, 0, CTRL + ctrl::REMOVED, 1);
        assert_eq!(read32(&mut f, 7, 0), u32::MAX, "vendor id 0xffff");
        assert_eq!(read32(&mut f, 0, STATUS), u32::MAX);
        write32(&mut f, 0, CTRL + ctrl::REMOVED, 0);
        assert_eq!(read32(&mut f, 7, 0), 0x7164_1d0f);
    }

    #[test]
    fn bar0_accesses_other_than_32_bit_read_ones() {
        let mut f = NeuronFunction::new(&V2, prompt(None)).unwrap();
        let mut b = [0u8; 2];
        f.region_read(0, STATUS, &mut b).unwrap();
        assert_eq!(b, [0xff, 0xff]);
    }

    #[test]
    fn v3_function_has_its_ids_bars_and_mailbox() {
        let mut f = NeuronFunction::new(&V3, prompt(Some(Duration::ZERO))).unwrap();
        let r = f.regions();
        assert_eq!(r[0].region_info.size, 4 * GIB);
        assert_eq!(r[4].region_info.size, 256 * GIB);
        assert_eq!(read32(&mut f, 7, 0), 0x7364_1d0f);
        let misc = 0x680_0000 + 0x48_4000;
        write32(&mut f, 0, misc + RESET_REQUEST, 1);
        write32(&mut f, 0, misc + RESET_TRIGGER, 1);
        assert_eq!(read32(&mut f, 0, misc + RESET_REQUEST), 0, "taken");
        let ctrl_base = 4 * GIB - 0x1000;
        assert_eq!(read32(&mut f, 0, ctrl_base + ctrl::RESETS_TAKEN), 1);
        // Stack 2 (device 0x8000_0000_0000) is BAR4 128 GiB.
        f.bar4().write(128 * GIB + 8, &7u32.to_le_bytes()).unwrap();
        write32(&mut f, 0, ctrl_base + ctrl::HBM_PA_HI, 0x8000);
        write32(&mut f, 0, ctrl_base + ctrl::HBM_PA_LO, 8);
        assert_eq!(read32(&mut f, 0, ctrl_base + ctrl::HBM_DATA), 7);
    }
}
