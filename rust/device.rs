// SPDX-License-Identifier: GPL-2.0-only

//! One Neuron device: its arch, its device-access backend, the HBM grid,
//! the address spaces its memory is mapped into, and its life cycle; its
//! firmware reset is in [`reset`], its BAR4 transfers in [`transfer`].
//! Shared (`Arc`) by its device node and every open file, so it outlives a
//! PCI unbind until the last file is closed.

pub(crate) mod cores;
pub(crate) mod fault;
pub(crate) mod node_index;
pub(crate) mod reset;
pub(crate) mod reset_batch;
pub(crate) mod transfer;
pub(crate) mod tree_batch;

use crate::{
    abstractions::dmem::Region,
    abstractions::vma::Space,
    arch::ArchInfo,
    device::cores::{claimants, CoreOwners, CoreView},
    device::fault::FaultInjector,
    device::node_index::NodeIndex,
    device::reset_batch::ResetBatch,
    device::tree_batch::{batch_from, walk, Batch, BATCH},
    hw::io::DeviceIo,
    pool::{Geometry, Grid},
    sim::SimIo,
};
use kernel::{
    new_condvar, new_mutex, new_work,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    str::CString,
    sync::{atomic::Atomic, Arc, CondVar, Mutex},
    workqueue::Work,
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
    /// The PCI function's slot (`0000:00:04.0`); `None` when simulated.
    pub(crate) pci_slot: Option<CString>,
    backend: Backend,
    /// The HBM pools.
    pub(crate) grid: Grid,
    /// Each channel's HBM as a dmem cgroup region.
    dmem: KVec<Arc<Region>>,
    /// Who may use the device while a reset runs; held only to test and
    /// flip its fields, never across a wait for the firmware.
    #[pin]
    gate: Mutex<Gate>,
    /// Signalled when the gate changes.
    #[pin]
    gate_changed: CondVar,
    /// The device's work on the module's reset workqueue (the reference's
    /// per-device reset thread): it carries out the running batch of
    /// resets, then starts the pending one.
    #[pin]
    reset_work: Work<Device>,
    /// Device resets begun. A plan staged at another value has lost its HBM
    /// contents (read without the gate's lock on every RESOLVE).
    reset_epoch: Atomic<u64>,
    /// Test-only fault injection (debugfs `fail_nth`): simulated devices, or
    /// with the `fault_injection` module parameter.
    pub(crate) fault: FaultInjector,
    /// What each live plan holds, for telemetry, by serial number.
    #[pin]
    pub(crate) plans: Mutex<RBTree<u64, Listed>>,
    /// The address space of each open file (its own, holding its mappings
    /// only), by the file's client id: what a device reset and the
    /// device's removal take every mapping of its memory away from.
    #[pin]
    spaces: Mutex<RBTree<u64, Arc<Space>>>,
    /// The claim on `index`, given back when the device is dropped, after
    /// its dmem regions (fields drop in order).
    _index: NodeIndex,
}

/// The reset gate of a device: one handshake at a time, the requests made
/// meanwhile merged into the next; a device reset waits for the BAR4
/// transfers in flight and holds new ones off until it ends, and a device
/// reset that failed leaves the device in "reset state unknown" until one
/// succeeds.
struct Gate {
    /// Open files of the device node.
    open_files: u32,
    /// The batch whose handshake is under way (on the reset worker).
    running: Option<Arc<ResetBatch>>,
    /// The requests made while it is, for the next handshake.
    pending: Option<Arc<ResetBatch>>,
    /// A device reset is under way: no BAR4 transfer may start.
    blocking: bool,
    /// BAR4 transfer pieces in flight (mapping faults included).
    transfers: u32,
    /// Revocations of every mapping waiting for `transfers` to reach 0.
    draining: u32,
    /// The last device reset failed or was interrupted: the firmware may
    /// still carry it out, so no plan can trust its HBM.
    unknown: bool,
    /// Which open file owns which cores.
    cores: CoreOwners,
}

/// Telemetry of one live plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanSummary {
    /// Unique for the device's lifetime.
    pub(crate) serial: u64,
    /// The process that loaded it, as the initial pid namespace numbers it.
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

/// One HBM chunk a live plan holds, for telemetry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkLine {
    /// HBM channel.
    pub(crate) channel: u32,
    /// Region within the channel.
    pub(crate) region: u32,
    /// Device PA of its first byte.
    pub(crate) pa: u64,
    /// Bytes.
    pub(crate) size: u64,
}

/// What the device's telemetry keeps of one live plan: its summary and its
/// chunks (the pools keep no list of chunks; their owners do).
pub(crate) struct Listed {
    /// The plan's numbers.
    pub(crate) summary: PlanSummary,
    /// Its chunks, scratchpads included.
    pub(crate) chunks: KVVec<ChunkLine>,
}

impl Device {
    /// A device over `backend` with a grid of geometry `geo`, under the
    /// lowest free device index (`ENOSPC` when all are taken). `slot` names
    /// the PCI function (its dmem regions are named by it); a simulated
    /// device is `sim<N>`, N its index.
    pub(crate) fn new(
        pci: (u16, u16),
        backend: Backend,
        geo: Geometry,
        slot: Option<&CStr>,
    ) -> Result<Arc<Self>> {
        let sim = matches!(backend, Backend::Sim(_));
        let pci_slot = slot.map(CString::try_from).transpose()?;
        let claim = NodeIndex::claim()?;
        let grid = Grid::new(geo)?;
        let sim_place;
        let place = match slot {
            Some(slot) => slot,
            None => {
                sim_place = CString::try_from_fmt(fmt!("sim{}", claim.get()))?;
                &sim_place
            }
        };
        let mut dmem = KVec::with_capacity(geo.info.nr_channels, GFP_KERNEL)?;
        for ch in 0..geo.info.nr_channels {
            let size = (0..geo.regions)
                .filter_map(|r| grid.stats(ch, r).ok())
                .map(|s| s.total)
                .sum();
            dmem.push(Region::at(place, ch as u32, size)?, GFP_KERNEL)?;
        }
        Arc::pin_init(
            try_pin_init!(Self {
                index: claim.get(),
                _index: claim,
                dmem,
                info: geo.info,
                pci_vendor: pci.0,
                pci_device: pci.1,
                pci_slot,
                backend,
                grid,
                gate <- new_mutex!(Gate {
                    open_files: 0,
                    running: None,
                    pending: None,
                    blocking: false,
                    transfers: 0,
                    draining: 0,
                    unknown: false,
                    cores: CoreOwners::new(),
                }),
                gate_changed <- new_condvar!(),
                reset_work <- new_work!("Device::reset_work"),
                reset_epoch: Atomic::new(0),
                fault: FaultInjector::new(sim || crate::fault_injection_asked()),
                plans <- new_mutex!(RBTree::new()),
                spaces <- new_mutex!(RBTree::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// The dmem cgroup region of HBM channel `channel`.
    pub(crate) fn dmem_region(&self, channel: usize) -> Result<&Region> {
        self.dmem.get(channel).map(|r| &**r).ok_or(EINVAL)
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
        self.gate.lock().open_files += 1;
    }

    /// Counts the closed file `client` of the device node, releasing its
    /// cores; a reset it asked for that has not ended goes on, and keeps
    /// them its own until it ends (no other file can claim a core under a
    /// reset of it).
    pub(crate) fn file_closed(&self, client: u64) {
        let mut g = self.gate.lock();
        g.open_files -= 1;
        let mut outliving = false;
        for b in [&g.running, &g.pending].into_iter().flatten() {
            b.each(|r| {
                if r.is_unfinished_of(client) {
                    r.orphan();
                    outliving = true;
                }
            });
        }
        if !outliving {
            g.cores.release_all(client);
        }
    }

    /// For the open file `client`: releases the cores of `release`, then
    /// claims those of `claim`, all or nothing, and says who owns what
    /// (`NHBM_IOC_CORES`). `EINVAL` for a core the device does not have, a
    /// core in both maps, or a released core the file does not own;
    /// `EBUSY` for a claimed core another file owns; `ENODEV` for a claim
    /// on a device gone.
    pub(crate) fn claim_cores(&self, client: u64, claim: u32, release: u32) -> Result<CoreView> {
        if (claim | release) & !self.info.all_cores() != 0 || claim & release != 0 {
            return Err(EINVAL);
        }
        if claim != 0 {
            self.check_present()?;
        }
        let procs = claimants(claim)?;
        self.gate
            .lock()
            .cores
            .change(client, (claim, release), procs)
    }

    /// Open files of the device node.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn open_files(&self) -> u32 {
        self.gate.lock().open_files
    }

    /// Lists `space`, the address space of the open file `client`, as one
    /// that [`Device::revoke_mappings`] takes mappings away from.
    pub(crate) fn add_space(&self, client: u64, space: Arc<Space>) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        self.spaces.lock().insert(node.into_node(client, space));
        Ok(())
    }

    /// Unlists the address space of the file `client`, which is closing
    /// (no mapping of it is left: each holds the file open).
    pub(crate) fn remove_space(&self, client: u64) {
        drop(self.spaces.lock().remove(&client));
    }

    /// Takes every mapping of the device's memory away from every process:
    /// their next access faults, and is refused. Waits first for the
    /// transfer pieces in flight, mapping faults among them: one that began
    /// before the device was found gone or reset may still map a page, and
    /// the ones after see that. Called once a device reset moved the epoch
    /// and once the device is gone (before its BAR is released).
    ///
    /// Each open file's space is walked once, and holds that file's
    /// mappings only: the walk costs the mappings there are, not files
    /// times mappings. The list of spaces is locked only to take each
    /// batch of them, so opens and closes go on meanwhile (a file opened
    /// after the walk passed it can map nothing from before: its faults
    /// see the new epoch or the device gone).
    pub(crate) fn revoke_mappings(&self) {
        {
            let mut g = self.gate.lock();
            g.draining += 1;
            while g.transfers > 0 {
                self.gate_changed.wait(&mut g);
            }
            g.draining -= 1;
        }
        let spaces = |from| batch_from(&self.spaces.lock(), from, |_, s| s.clone());
        let _ = walk(0, spaces, |space: Arc<Space>| {
            space.unmap(0, 0);
            crate::abstractions::resched::yield_now();
            Ok::<(), Error>(())
        });
    }

    /// Up to [`BATCH`] summaries of live plans with serial numbers from
    /// `from` on, in order, taken under one short hold of the plans' lock:
    /// readers walk batch by batch, so a tenant's many plans never keep
    /// loads and unloads waiting on a reader.
    pub(crate) fn plans_from(&self, from: u64) -> Batch<PlanSummary> {
        batch_from(&self.plans.lock(), from, |_, listed| listed.summary)
    }

    /// Up to [`BATCH`] chunks of live plans, from chunk `at.1` of the plan
    /// of serial `at.0` on, in order, and where the next batch starts,
    /// taken under one short hold of the plans' lock: each plan looked at
    /// counts as an item, so that no hold walks more than [`BATCH`] of
    /// them however many hold no chunk.
    pub(crate) fn chunks_from(&self, at: (u64, usize)) -> Batch<ChunkLine, (u64, usize)> {
        let plans = self.plans.lock();
        let mut batch = [const { None }; BATCH];
        let (mut from, mut first) = at;
        let mut steps = 0;
        while let Some(c) = plans.cursor_lower_bound(&from) {
            let (&serial, listed) = c.current();
            if serial != from {
                first = 0;
            }
            for (i, line) in listed.chunks.iter().enumerate().skip(first) {
                if steps == BATCH {
                    return (batch, Some((serial, i)));
                }
                batch[steps] = Some(*line);
                steps += 1;
            }
            let Some(next) = serial.checked_add(1) else {
                break;
            };
            (from, first) = (next, 0);
            steps += 1;
            if steps >= BATCH {
                return (batch, Some((from, 0)));
            }
        }
        (batch, None)
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
            None,
        )
    }
}

#[kunit_tests(neuron_hbm_device)]
mod tests {
    use super::*;

    #[test]
    fn core_claims_are_checked_and_released_with_their_file() -> Result {
        let dev = Device::new_test_sim(1)?;
        // A core the device does not have, or one in both maps: EINVAL,
        // nothing claimed.
        assert_eq!(dev.claim_cores(1, 0b100, 0).err(), Some(EINVAL));
        assert_eq!(dev.claim_cores(1, 0b01, 0b01).err(), Some(EINVAL));
        assert_eq!(dev.claim_cores(1, 0, 0)?.owned, 0);
        dev.file_opened();
        dev.file_opened();
        dev.claim_cores(1, 0b01, 0)?;
        dev.claim_cores(2, 0b10, 0)?;
        assert_eq!(dev.claim_cores(2, 0b01, 0).err(), Some(EBUSY));
        // Closing file 1 frees its core, not file 2's.
        dev.file_closed(1);
        let v = dev.claim_cores(2, 0, 0)?;
        assert_eq!((v.owned, v.taken, v.pids[0]), (0b10, 0, 0));
        assert_eq!(dev.claim_cores(2, 0b01, 0)?.owned, 0b11);
        dev.file_closed(2);
        assert_eq!(dev.claim_cores(3, 0b11, 0)?.owned, 0b11);
        Ok(())
    }

    #[test]
    fn unplugged_device_answers_enodev() -> Result {
        let dev = Device::new_test_sim(1)?;
        dev.sim().unwrap().unplug();
        assert_eq!(dev.write(0, 0, b"x"), Err(ENODEV));
        Ok(())
    }

    #[test]
    fn plan_summaries_walk_in_short_batches() -> Result {
        let dev = Device::new_test_sim(1)?;
        const PLANS: u64 = 2 * BATCH as u64 + 22;
        for serial in 1..=PLANS {
            let summary = PlanSummary {
                serial,
                pid: 1,
                plan_id: serial as u32,
                vars: 1,
                bytes: 0,
                kmem: 0,
            };
            let listed = Listed {
                summary,
                chunks: KVVec::new(),
            };
            dev.plans
                .lock()
                .try_create_and_insert(serial, listed, GFP_KERNEL)?;
        }
        let (mut seen, mut batches) = (0, 0);
        walk(
            0,
            |key| {
                batches += 1;
                dev.plans_from(key)
            },
            |p| {
                seen += 1;
                assert_eq!(p.serial, seen);
                Ok::<(), Error>(())
            },
        )?;
        assert_eq!((seen, batches), (PLANS, 3));
        Ok(())
    }

    /// Chunks of plans walk in order, a plan of many chunks across
    /// batches, and plans of none count against a batch: no hold of the
    /// lock looks at more than [`BATCH`] of them.
    #[test]
    fn plan_chunks_walk_in_short_batches() -> Result {
        let dev = Device::new_test_sim(1)?;
        // Plan 1 holds 150 chunks, plans 2..=200 none, plan 201 three.
        for serial in 1..=201u64 {
            let count = match serial {
                1 => 150,
                201 => 3,
                _ => 0,
            };
            let mut chunks = KVVec::new();
            for i in 0..count {
                let pa = (serial << 32) + i * 4096;
                let line = ChunkLine {
                    channel: 0,
                    region: 0,
                    pa,
                    size: 4096,
                };
                chunks.push(line, GFP_KERNEL)?;
            }
            let summary = PlanSummary {
                serial,
                pid: 1,
                plan_id: serial as u32,
                vars: 0,
                bytes: 0,
                kmem: 0,
            };
            dev.plans.lock().try_create_and_insert(
                serial,
                Listed { summary, chunks },
                GFP_KERNEL,
            )?;
        }
        let (mut seen, mut last, mut batches) = (0, 0, 0);
        walk(
            (0, 0),
            |at| {
                batches += 1;
                dev.chunks_from(at)
            },
            |c: ChunkLine| {
                assert!(c.pa > last);
                last = c.pa;
                seen += 1;
                Ok::<(), Error>(())
            },
        )?;
        // 153 chunks and 201 plans: 354 steps in batches of at most 64.
        assert_eq!(seen, 153);
        assert_eq!(batches, 354usize.div_ceil(BATCH));
        Ok(())
    }
}
