// SPDX-License-Identifier: GPL-2.0

//! One Neuron device: its arch, its device-access backend, the HBM grid and
//! the firmware reset. Shared (`Arc`) by its device node and every open file,
//! so it outlives a PCI unbind until the last file is closed.

use crate::{
    addr,
    arch::ArchInfo,
    chardev::NodeIndex,
    dmem::Region,
    fault::FaultInjector,
    fw::{self, ResetKind, WaitReport},
    io::{DeviceIo, XFER_CHUNK},
    mempool::{Geometry, Grid},
    resched,
    sim::SimIo,
    uapi::MAX_PLANS_PER_DEVICE,
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::RBTree,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc, CondVar, Mutex,
    },
    uaccess::{UserSliceReader, UserSliceWriter},
};

/// Where a device's registers and HBM window come from.
pub(crate) enum Backend {
    /// A real PCI function.
    Pci(Arc<dyn DeviceIo>),
    /// A simulated device (keeps the concrete type for its test controls).
    Sim(Arc<SimIo>),
}

/// One Neuron device.
#[pin_data]
pub(crate) struct Device {
    /// Index N of `/dev/neuron_hbmN`.
    pub(crate) index: u32,
    /// Generation constants.
    pub(crate) info: &'static ArchInfo,
    /// PCI vendor id.
    pub(crate) pci_vendor: u16,
    /// PCI device id.
    pub(crate) pci_device: u16,
    backend: Backend,
    /// The HBM pools.
    pub(crate) grid: Grid,
    /// Each channel's HBM as a dmem cgroup region.
    dmem: KVec<Region>,
    /// Whether a reset is under way; held only to test and flip it.
    #[pin]
    resetting: Mutex<bool>,
    /// Signalled when a reset ends.
    #[pin]
    reset_done: CondVar,
    /// Device resets begun plus device resets ended: odd while one runs. A
    /// plan staged at another value has lost its HBM contents.
    reset_epoch: Atomic<u64>,
    /// Open files of the device node.
    open_files: Atomic<u32>,
    /// Test-only fault injection (debugfs `fail_nth`).
    pub(crate) fault: FaultInjector,
    /// What each live plan holds, for telemetry, by serial number.
    #[pin]
    pub(crate) plans: Mutex<RBTree<u64, PlanSummary>>,
    /// Live plans (claimed [`PlanSlot`]s).
    live_plans: Atomic<u32>,
    /// The claim on `index`, given back when the device is dropped, after
    /// its dmem regions (fields drop in order).
    _index: NodeIndex,
}

/// One of a device's [`MAX_PLANS_PER_DEVICE`] live-plan slots (over all its
/// open files), given back on drop: a plan is live from its load until its
/// memory is freed. Dereferences to its device.
pub(crate) struct PlanSlot(Arc<Device>);

impl PlanSlot {
    /// Claims a slot of `dev`, `ENOSPC` when all are taken.
    pub(crate) fn claim(dev: &Arc<Device>) -> Result<Self> {
        let mut cur = dev.live_plans.load(Relaxed);
        loop {
            if cur >= MAX_PLANS_PER_DEVICE {
                return Err(ENOSPC);
            }
            match dev.live_plans.cmpxchg(cur, cur + 1, Relaxed) {
                Ok(_) => return Ok(Self(dev.clone())),
                Err(now) => cur = now,
            }
        }
    }
}

impl core::ops::Deref for PlanSlot {
    type Target = Arc<Device>;

    fn deref(&self) -> &Arc<Device> {
        &self.0
    }
}

impl Drop for PlanSlot {
    fn drop(&mut self) {
        self.0.live_plans.fetch_sub(1, Relaxed);
    }
}

/// Telemetry of one live plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanSummary {
    /// Unique for the device's lifetime.
    pub(crate) serial: u64,
    /// Process that loaded it.
    pub(crate) pid: i32,
    /// Its id in the loading file.
    pub(crate) plan_id: u32,
    /// Variables.
    pub(crate) vars: u32,
    /// HBM bytes held.
    pub(crate) bytes: u64,
    /// Kernel bytes of its bookkeeping.
    pub(crate) kmem: u64,
}

impl Device {
    /// A device over `backend` with a grid of geometry `geo`, under the
    /// lowest free device index (`ENOSPC` when all are taken).
    pub(crate) fn new(pci: (u16, u16), backend: Backend, geo: Geometry) -> Result<Arc<Self>> {
        let claim = NodeIndex::claim()?;
        let grid = Grid::new(geo)?;
        let mut dmem = KVec::with_capacity(geo.info.nr_channels, GFP_KERNEL)?;
        for ch in 0..geo.info.nr_channels {
            let size = (0..geo.regions)
                .filter_map(|r| grid.stats(ch, r).ok())
                .map(|s| s.total)
                .sum();
            dmem.push(Region::register(claim.get(), ch as u32, size)?, GFP_KERNEL)?;
        }
        Arc::pin_init(
            try_pin_init!(Self {
                index: claim.get(),
                _index: claim,
                dmem,
                info: geo.info,
                pci_vendor: pci.0,
                pci_device: pci.1,
                backend,
                grid,
                resetting <- new_mutex!(false),
                reset_done <- new_condvar!(),
                reset_epoch: Atomic::new(0),
                open_files: Atomic::new(0),
                fault: FaultInjector::new(),
                plans <- new_mutex!(RBTree::new()),
                live_plans: Atomic::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// The dmem cgroup region of HBM channel `channel`.
    pub(crate) fn dmem_region(&self, channel: usize) -> Result<&Region> {
        self.dmem.get(channel).ok_or(EINVAL)
    }

    /// The device-access interface.
    pub(crate) fn io(&self) -> &dyn DeviceIo {
        match &self.backend {
            Backend::Pci(io) => &**io,
            Backend::Sim(sim) => &**sim,
        }
    }

    /// The simulated backend, if this device is simulated.
    pub(crate) fn sim(&self) -> Option<&SimIo> {
        match &self.backend {
            Backend::Sim(sim) => Some(sim),
            Backend::Pci(_) => None,
        }
    }

    /// `ENODEV` once the device is gone.
    pub(crate) fn check_present(&self) -> Result {
        if self.io().is_present() {
            Ok(())
        } else {
            Err(ENODEV)
        }
    }

    /// Counts an open file of the device node.
    pub(crate) fn file_opened(&self) {
        self.open_files.fetch_add(1, Relaxed);
    }

    /// Counts a closed file of the device node.
    pub(crate) fn file_closed(&self) {
        self.open_files.fetch_sub(1, Relaxed);
    }

    /// Open files of the device node.
    pub(crate) fn open_files(&self) -> u32 {
        self.open_files.load(Relaxed)
    }

    /// The reset epoch a plan staged now records (see [`Device::check_epoch`]).
    pub(crate) fn reset_epoch(&self) -> u64 {
        self.reset_epoch.load(Acquire)
    }

    /// `EIO` when a device reset began or ended since epoch `staged_at`: the
    /// HBM contents of a plan staged then are gone.
    #[inline(always)]
    pub(crate) fn check_epoch(&self, staged_at: u64) -> Result {
        if self.reset_epoch.load(Acquire) == staged_at {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// Resets the device (`nc_map` 0) or the TPBs in `nc_map` and waits for
    /// the firmware. Concurrent requests are serialized, never interleaved;
    /// every wait ends with `EINTR` when a signal arrives. A device reset
    /// moves the reset epoch when it begins and when it ends.
    pub(crate) fn reset(&self, kind: ResetKind, nc_map: u32) -> Result<WaitReport> {
        self.check_present()?;
        let map_ok = match kind {
            ResetKind::Device => nc_map == 0,
            ResetKind::Tpb => nc_map != 0 && u64::from(nc_map) >> self.info.nr_cores == 0,
        };
        if !map_ok {
            return Err(EINVAL);
        }
        {
            let mut busy = self.resetting.lock();
            while *busy {
                if self.reset_done.wait_interruptible(&mut busy) {
                    return Err(EINTR);
                }
            }
            *busy = true;
        }
        let device = kind == ResetKind::Device;
        if device {
            self.reset_epoch.fetch_add(1, Release);
        }
        let res = fw::reset(self.io(), self.info, kind, nc_map);
        if device {
            self.reset_epoch.fetch_add(1, Release);
        }
        *self.resetting.lock() = false;
        self.reset_done.notify_one();
        res
    }

    /// Runs `op(bar4_offset, len)` over `[pa, pa + len)` in pieces of at most
    /// [`XFER_CHUNK`] bytes, each remapped to BAR4 on its own and preceded by
    /// a preemption point (`EINTR` once the caller is killed).
    fn for_each_piece(
        &self,
        pa: u64,
        len: u64,
        mut op: impl FnMut(u64, usize) -> Result,
    ) -> Result {
        self.check_present()?;
        pa.checked_add(len).ok_or(EINVAL)?;
        // SBUF is on-core SRAM, never HBM: no transfer may reach it.
        if addr::range_touches_sbuf(self.info, pa, len) {
            return Err(EINVAL);
        }
        let mut done = 0u64;
        while done < len {
            resched::checkpoint()?;
            self.fault.point(EIO)?;
            let n = (len - done).min(XFER_CHUNK as u64);
            let off = addr::bar4_offset(self.info, pa + done, n)?;
            op(off, n as usize)?;
            done += n;
        }
        Ok(())
    }

    /// A bounce buffer for a user transfer of `len` bytes: one per transfer,
    /// at most one piece long. User memory is copied to and from it with no
    /// lock held, so a user buffer that faults slowly stalls only its caller.
    fn bounce(len: u64) -> Result<KVVec<u8>> {
        let n = usize::try_from(len.min(XFER_CHUNK as u64))?;
        Ok(KVVec::from_elem(0u8, n, GFP_KERNEL_ACCOUNT)?)
    }

    /// Copies `len` bytes from user memory to device PA `pa` through BAR4.
    /// Its bounce buffer is not cleared first: every byte written to the
    /// device was just copied in from user memory.
    pub(crate) fn write_from_user(&self, pa: u64, src: &mut UserSliceReader, len: u64) -> Result {
        let n = usize::try_from(len.min(XFER_CHUNK as u64))?;
        let mut bounce = KVVec::<u8>::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        self.for_each_piece(pa, len, |off, n| {
            self.io().bar4_write_from_user(off, src, n, &mut bounce)
        })
    }

    /// Copies `len` bytes at device PA `pa` to user memory through BAR4.
    pub(crate) fn read_to_user(&self, pa: u64, dst: &mut UserSliceWriter, len: u64) -> Result {
        let mut bounce = Self::bounce(len)?;
        self.for_each_piece(pa, len, |off, n| {
            self.io().bar4_read(off, &mut bounce[..n])?;
            dst.write_slice(&bounce[..n])
        })
    }

    /// Writes `src` at device PA `pa` through BAR4.
    pub(crate) fn write(&self, pa: u64, src: &[u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, src.len() as u64, |off, n| {
            self.io().bar4_write(off, &src[done..done + n])?;
            done += n;
            Ok(())
        })
    }

    /// Reads device PA `pa` into `dst` through BAR4.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn read(&self, pa: u64, dst: &mut [u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, dst.len() as u64, |off, n| {
            self.io().bar4_read(off, &mut dst[done..done + n])?;
            done += n;
            Ok(())
        })
    }

    /// Zeroes `[pa, pa + len)` (the simulated device discards its pages).
    pub(crate) fn zero(&self, pa: u64, len: u64) -> Result {
        self.for_each_piece(pa, len, |off, n| self.io().bar4_zero(off, n as u64))
    }
}

#[cfg(CONFIG_KUNIT = "y")]
impl Device {
    /// A simulated V2 device with `regions` regions per channel, for tests.
    pub(crate) fn new_test_sim(regions: usize) -> Result<Arc<Self>> {
        Self::new_test_sim_of(&crate::arch::V2, regions)
    }

    /// A simulated device of arch `info`, for tests.
    pub(crate) fn new_test_sim_of(info: &'static ArchInfo, regions: usize) -> Result<Arc<Self>> {
        let sim = Arc::pin_init(SimIo::new(info), GFP_KERNEL)?;
        Device::new(
            (crate::arch::PCI_VENDOR_AMAZON, info.sim_pci_device),
            Backend::Sim(sim),
            Geometry {
                info,
                regions,
                min_alloc: 4096,
                carveout: true,
            },
        )
    }
}

#[kunit_tests(neuron_hbm_device)]
mod tests {
    use super::*;
    use crate::arch::GIB;

    fn sim_device() -> Result<Arc<Device>> {
        Device::new_test_sim(1)
    }

    #[test]
    fn bar4_write_read_through_remap() -> Result {
        let dev = sim_device()?;
        // Device PA 64 GiB + 8 KiB is BAR4 offset 16 GiB + 8 KiB on V2.
        let pa = 64 * GIB + 8192;
        dev.write(pa, b"neuron")?;
        let mut back = [0u8; 6];
        dev.read(pa, &mut back)?;
        assert_eq!(&back, b"neuron");
        let mut raw = [0u8; 6];
        dev.io().bar4_read(16 * GIB + 8192, &mut raw)?;
        assert_eq!(&raw, b"neuron");
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(1));
        Ok(())
    }

    #[test]
    fn transfers_outside_hbm_are_refused() -> Result {
        let dev = sim_device()?;
        assert_eq!(dev.write(20 * GIB, b"x"), Err(EINVAL));
        assert_eq!(dev.write(u64::MAX, b"xy"), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn zero_of_gigabytes_stays_sparse() -> Result {
        let dev = sim_device()?;
        dev.write(GIB, &[0xaa; 16])?;
        dev.zero(0, 12 * GIB)?;
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        let mut b = [1u8; 16];
        dev.read(GIB, &mut b)?;
        assert_eq!(b, [0u8; 16]);
        Ok(())
    }

    #[test]
    fn unplugged_device_answers_enodev() -> Result {
        let dev = sim_device()?;
        dev.sim().unwrap().unplug();
        assert_eq!(dev.write(0, b"x"), Err(ENODEV));
        assert_eq!(dev.reset(ResetKind::Device, 0).err(), Some(ENODEV));
        Ok(())
    }

    #[test]
    fn tpb_reset_checks_the_core_map() -> Result {
        let dev = sim_device()?;
        assert_eq!(dev.reset(ResetKind::Tpb, 0).err(), Some(EINVAL));
        assert_eq!(dev.reset(ResetKind::Tpb, 0b100).err(), Some(EINVAL));
        assert!(dev.reset(ResetKind::Tpb, 0b11).is_ok());
        Ok(())
    }

    #[test]
    fn device_reset_takes_no_core_map() -> Result {
        let dev = sim_device()?;
        assert_eq!(dev.reset(ResetKind::Device, 0b1).err(), Some(EINVAL));
        assert_eq!(dev.sim().map(|s| s.resets_taken()), Some(0));
        assert!(dev.reset(ResetKind::Device, 0).is_ok());
        Ok(())
    }

    #[test]
    fn device_reset_moves_the_epoch() -> Result {
        let dev = sim_device()?;
        let before = dev.reset_epoch();
        assert!(dev.check_epoch(before).is_ok());
        dev.reset(ResetKind::Tpb, 0b1)?;
        assert!(dev.check_epoch(before).is_ok());
        dev.reset(ResetKind::Device, 0)?;
        assert_eq!(dev.check_epoch(before), Err(EIO));
        assert!(dev.check_epoch(dev.reset_epoch()).is_ok());
        Ok(())
    }

    #[test]
    fn sbuf_is_never_behind_bar4() -> Result {
        for info in [&crate::arch::V2, &crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 1)?;
            for nc in 0..info.nr_cores {
                let (base, size) = addr::sbuf_window(info, nc).ok_or(EINVAL)?;
                let mut b = [0u8; 8];
                assert_eq!(dev.read(base, &mut b), Err(EINVAL));
                assert_eq!(dev.write(base + size - 8, &b), Err(EINVAL));
            }
        }
        Ok(())
    }
}
