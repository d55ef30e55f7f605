// SPDX-License-Identifier: GPL-2.0-only

//! One Neuron device: its arch, its device-access backend, the HBM grid and
//! the firmware reset. Shared (`Arc`) by its device node and every open file,
//! so it outlives a PCI unbind until the last file is closed.

pub(crate) mod fault;
pub(crate) mod node_index;
pub(crate) mod reset_line;

use crate::{
    abstractions::dmem::Region,
    abstractions::resched,
    abstractions::reset_queue,
    abstractions::trace::{self, ResetCounts},
    abstractions::user_source::UserSource,
    abstractions::vma::Space,
    arch::addr,
    arch::ArchInfo,
    device::fault::FaultInjector,
    device::node_index::NodeIndex,
    device::reset_line::ResetLine,
    hw::fw::{self, RealClock, ResetKind, WaitReport, SLEEP_SLICE_MS},
    hw::io::{Bounce, DeviceIo, XFER_CHUNK},
    pool::{Geometry, Grid},
    pool::tree_batch::{batch_from, Batch},
    sim::SimIo,
};
use kernel::{
    impl_has_work, new_condvar, new_mutex, new_spinlock, new_work,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    str::CString,
    sync::{
        atomic::{Acquire, Atomic, Release},
        Arc, CondVar, Mutex, MutexGuard, SpinLock,
    },
    time::{delay::fsleep, Delta},
    uaccess::UserSliceWriter,
    workqueue::{Work, WorkItem},
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
    /// Device resets begun. A plan staged at another value has lost its HBM
    /// contents (read without the gate's lock on every RESOLVE).
    reset_epoch: Atomic<u64>,
    /// Test-only fault injection (debugfs `fail_nth`): simulated devices, or
    /// with the `fault_injection` module parameter.
    pub(crate) fault: FaultInjector,
    /// What each live plan holds, for telemetry, by serial number.
    #[pin]
    pub(crate) plans: Mutex<RBTree<u64, PlanSummary>>,
    /// The address space of each open file, by the file's client id:
    /// what a device reset and the device's removal take every mapping of
    /// its memory away from.
    #[pin]
    spaces: Mutex<RBTree<u64, Arc<Space>>>,
    /// The claim on `index`, given back when the device is dropped, after
    /// its dmem regions (fields drop in order).
    _index: NodeIndex,
}

/// The reset gate of a device: resets are serialized, a device reset waits
/// for the BAR4 transfers in flight and holds new ones off until it ends,
/// and a device reset that failed leaves the device in "reset state
/// unknown" until one succeeds.
struct Gate {
    /// Open files of the device node.
    open_files: u32,
    /// A reset (of any kind) is under way.
    resetting: bool,
    /// A device reset is under way: no BAR4 transfer may start.
    blocking: bool,
    /// BAR4 transfer pieces in flight (mapping faults included).
    transfers: u32,
    /// Revocations of every mapping waiting for `transfers` to reach 0.
    draining: u32,
    /// The last device reset failed or was interrupted: the firmware may
    /// still carry it out, so no plan can trust its HBM.
    unknown: bool,
    /// The order in which waiting resets start.
    line: ResetLine,
}

/// One reset on the module's reset workqueue, the device's reset worker
/// (the reference's per-device reset thread, `nr_reset_thread_fn` in
/// neuron_reset.c): it runs to its own end whatever happens to the task
/// that asked for it.
#[pin_data]
struct ResetJob {
    dev: Arc<Device>,
    kind: ResetKind,
    /// RESET_TPB_MAP of the request (0 for a device reset).
    map: u32,
    /// How it ended, once it has.
    #[pin]
    outcome: SpinLock<Option<Result<WaitReport>>>,
    #[pin]
    work: Work<ResetJob>,
}

impl_has_work! {
    impl HasWork<Self> for ResetJob { self.work }
}

impl WorkItem for ResetJob {
    type Pointer = Arc<ResetJob>;

    fn run(job: Arc<ResetJob>) {
        let dev = &job.dev;
        // Removal (unbind, unload) ends the handshake at its next poll.
        let stop = || dev.check_present();
        let clock = RealClock::new(&stop);
        let timer = trace::reset_begin(dev.index, job.kind as u32, job.map);
        let (res, report) = fw::reset(dev.io(), &dev.info.reset, &clock, job.kind, job.map);
        let counts = ResetCounts {
            polls: report.polls,
            resends: report.sends.saturating_sub(1),
            looks: report.tries,
        };
        trace::reset_end(&timer, dev.index, job.kind as u32, &res, counts);
        if let Err(e) = res {
            pr_warn!(
                "neuron_hbm{}: {:?} reset failed ({}) after {} ms, {} requests\n",
                dev.index,
                job.kind,
                e.to_errno(),
                report.elapsed_ms,
                report.sends
            );
        }
        // Published before the gate opens: its waiter wakes on the gate.
        *job.outcome.lock() = Some(res.map(|()| report));
        dev.end_reset(job.kind, &res);
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
                    resetting: false,
                    blocking: false,
                    transfers: 0,
                    draining: 0,
                    unknown: false,
                    line: ResetLine::new(),
                }),
                gate_changed <- new_condvar!(),
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

    /// Counts a closed file of the device node.
    pub(crate) fn file_closed(&self) {
        self.gate.lock().open_files -= 1;
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
    pub(crate) fn revoke_mappings(&self) {
        {
            let mut g = self.gate.lock();
            g.draining += 1;
            while g.transfers > 0 {
                self.gate_changed.wait(&mut g);
            }
            g.draining -= 1;
        }
        let spaces = self.spaces.lock();
        for space in spaces.values() {
            space.unmap(0, 0);
        }
    }

    /// Open files of the device node.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn open_files(&self) -> u32 {
        self.gate.lock().open_files
    }

    /// The reset epoch a plan staged now records: waits (`EINTR` on a
    /// signal) for a device reset under way to end; `EIO` in "reset state
    /// unknown".
    pub(crate) fn ready_epoch(&self) -> Result<u64> {
        let mut g = self.gate.lock();
        while g.blocking {
            if self.gate_changed.wait_interruptible(&mut g) {
                return Err(EINTR);
            }
        }
        if g.unknown {
            return Err(EIO);
        }
        Ok(self.reset_epoch.load(Acquire))
    }

    /// `EIO` when a device reset began since epoch `staged_at`: the HBM
    /// contents of a plan staged then are gone.
    #[inline(always)]
    pub(crate) fn check_epoch(&self, staged_at: u64) -> Result {
        if self.reset_epoch.load(Acquire) == staged_at {
            Ok(())
        } else {
            Err(EIO)
        }
    }

    /// Runs one BAR4 transfer piece `op` of data staged at epoch `staged_at`
    /// outside any device reset: `EIO` when one began since `staged_at`
    /// (at once, not after the reset it would otherwise wait out), else
    /// waits (`EINTR` on a signal) for one under way to end and looks again.
    fn transfer_piece(&self, staged_at: u64, op: impl FnOnce() -> Result) -> Result {
        {
            let mut g = self.gate.lock();
            while g.blocking {
                self.check_epoch(staged_at)?;
                if self.gate_changed.wait_interruptible(&mut g) {
                    return Err(EINTR);
                }
            }
            self.check_epoch(staged_at)?;
            g.transfers += 1;
        }
        let res = op();
        let mut g = self.gate.lock();
        g.transfers -= 1;
        if g.transfers == 0 && (g.blocking || g.draining > 0) {
            self.gate_changed.notify_all();
        }
        res
    }

    /// Up to [`BATCH`](crate::pool::tree_batch::BATCH) summaries of live plans with serial numbers from
    /// `from` on, in order, taken under one short hold of the plans' lock:
    /// readers walk batch by batch, so a tenant's many plans never keep
    /// loads and unloads waiting on a reader.
    pub(crate) fn plans_from(&self, from: u64) -> Batch<PlanSummary> {
        batch_from(&self.plans.lock(), from, |_, summary| *summary)
    }

    /// Waits for the gate to change, with the gate's lock `g` released
    /// meanwhile; `EINTR` once a fatal signal is pending, and only then: a
    /// signal that is not fatal (an interval timer) stays pending for the
    /// return to user space, and the wait goes on in [`SLEEP_SLICE_MS`]
    /// naps until it ends.
    fn wait_killable<'a>(&'a self, mut g: MutexGuard<'a, Gate>) -> (MutexGuard<'a, Gate>, Result) {
        if let Err(e) = resched::checkpoint() {
            return (g, Err(e));
        }
        if kernel::current!().signal_pending() {
            drop(g);
            fsleep(Delta::from_millis(i64::from(SLEEP_SLICE_MS)));
            return (self.gate.lock(), Ok(()));
        }
        // Woken by a change or by a signal (a fatal one included).
        let _ = self.gate_changed.wait_interruptible(&mut g);
        (g, Ok(()))
    }

    /// Takes the gate for a reset of `kind`: waits, in line
    /// ([`ResetLine`]), for the resets under way or asked for earlier and,
    /// for a device reset, for the transfers in flight, then moves the
    /// epoch. Only a fatal signal ends these waits (`EINTR`). With
    /// `exclusive`, `EPERM` unless the caller's file is the device's only
    /// open file or the reset is the device reset that ends a "reset state
    /// unknown", checked under the lock that opens take.
    fn begin_reset(&self, kind: ResetKind, exclusive: bool) -> Result {
        // A device in "reset state unknown" has no data left to lose: anyone
        // may run the device reset that ends it, or one tenant could fail a
        // reset and keep every other from loading.
        let allowed =
            |g: &Gate| !exclusive || g.open_files == 1 || (g.unknown && kind == ResetKind::Device);
        let room = reset_line::room()?;
        let mut g = self.gate.lock();
        // Refused before taking a place: a refusal leaves the line as it was.
        if !allowed(&g) {
            return Err(EPERM);
        }
        let ticket = g.line.take(room);
        loop {
            let refused = if !allowed(&g) {
                Some(EPERM)
            } else if !g.resetting && g.line.is_first(&ticket) {
                break;
            } else {
                let (back, res) = self.wait_killable(g);
                g = back;
                res.err()
            };
            if let Some(e) = refused {
                g.line.give_up(ticket);
                self.gate_changed.notify_all();
                return Err(e);
            }
        }
        g.line.start(ticket);
        g.resetting = true;
        if kind == ResetKind::Device {
            g.blocking = true;
            while g.transfers > 0 {
                let (back, res) = self.wait_killable(g);
                g = back;
                if res.is_err() {
                    g.resetting = false;
                    g.blocking = false;
                    self.gate_changed.notify_all();
                    return Err(EINTR);
                }
            }
            self.reset_epoch.fetch_add(1, Release);
            // Transfers of older plans waiting at the gate answer EIO now.
            self.gate_changed.notify_all();
        }
        Ok(())
    }

    /// Opens the gate after a reset of `kind` that ended with `res`.
    fn end_reset(&self, kind: ResetKind, res: &Result) {
        let mut g = self.gate.lock();
        g.resetting = false;
        if kind == ResetKind::Device {
            g.blocking = false;
            g.unknown = res.is_err();
        }
        self.gate_changed.notify_all();
    }

    /// The mailbox map of a reset of `kind` of the cores in `cores`:
    /// `EINVAL` for a device reset that names cores, or a TPB reset that
    /// names none or one the device does not have.
    fn reset_map(&self, kind: ResetKind, cores: u32) -> Result<u32> {
        match kind {
            ResetKind::Device if cores == 0 => Ok(0),
            ResetKind::Tpb if cores != 0 && u64::from(cores) >> self.info.nr_cores == 0 => {
                Ok(self.info.tpb_reset_map(cores))
            }
            _ => Err(EINVAL),
        }
    }

    /// A reset of `kind` with mailbox map `map`, for the worker.
    fn new_job(dev: &Arc<Self>, kind: ResetKind, map: u32) -> Result<Arc<ResetJob>> {
        Arc::pin_init(
            pin_init!(ResetJob {
                dev: dev.clone(),
                kind,
                map,
                outcome <- new_spinlock!(None),
                work <- new_work!("ResetJob::work"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Hands `job`, which holds the gate, to the reset worker; if there is
    /// none (the module is being unloaded) the gate opens again with
    /// `ENODEV`.
    fn start(&self, job: Arc<ResetJob>) -> Result {
        let kind = job.kind;
        // A job is queued once, when it is made: it cannot be queued already.
        if let Err(e) = reset_queue::enqueue(job) {
            self.end_reset(kind, &Err(e));
            return Err(e);
        }
        Ok(())
    }

    /// Resets the device (`cores` 0) or the TPBs of the cores in `cores`,
    /// with the engines the reference resets beside each core
    /// ([`ArchInfo::tpb_reset_map`]), on the device's reset worker, and
    /// waits for the firmware as the reference does ([`fw::reset`]).
    /// Resets are serialized and start in the order they were asked for; a
    /// device reset first waits for the BAR4 transfers in flight, holds new
    /// ones off while it runs, and makes every plan staged before it answer
    /// `EIO`. One that fails leaves the device in "reset state unknown"
    /// (loads answer `EIO`) until a device reset succeeds. Only a fatal
    /// signal ends the caller's waits (`EINTR`); a reset once started runs
    /// to its own end regardless, and its outcome alone decides the device's
    /// state. No lock is held while the firmware is waited for. With
    /// `exclusive`, `EPERM` unless the caller's file is the only open file
    /// of the device, or the device is in "reset state unknown" and this is
    /// a device reset.
    pub(crate) fn reset(
        dev: &Arc<Self>,
        kind: ResetKind,
        cores: u32,
        exclusive: bool,
    ) -> Result<WaitReport> {
        dev.check_present()?;
        let map = dev.reset_map(kind, cores)?;
        let job = Self::new_job(dev, kind, map)?;
        dev.begin_reset(kind, exclusive)?;
        if kind == ResetKind::Device {
            // The reset wipes the HBM: no process keeps a page of it.
            dev.revoke_mappings();
        }
        dev.start(job.clone())?;
        let mut g = dev.gate.lock();
        loop {
            if let Some(res) = *job.outcome.lock() {
                return res;
            }
            let (back, res) = dev.wait_killable(g);
            g = back;
            res?;
        }
    }

    /// Starts a device reset as the reference's probe ends (`neuron_pci.c`):
    /// asynchronously, holding loads and transfers off until it ends, as
    /// every device reset does. Called before the device's node exists.
    pub(crate) fn reset_at_probe(dev: &Arc<Self>) -> Result {
        let job = Self::new_job(dev, ResetKind::Device, 0)?;
        dev.begin_reset(ResetKind::Device, false)?;
        dev.start(job)
    }

    /// Runs `op(bar4_offset, len)` over `[pa, pa + len)` in pieces that end
    /// on [`XFER_CHUNK`] boundaries of the device address (so a backend sees
    /// whole, aligned pieces but at the ends), each remapped to BAR4 on its
    /// own and preceded by a preemption point (`EINTR` once the caller is
    /// killed); `op` takes
    /// the reset gate for its BAR4 access ([`Device::transfer_piece`]).
    /// Ends by confirming that the device still answers (`ENODEV` when it
    /// was removed by surprise: its reads were all ones, its writes lost).
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
            let chunk = XFER_CHUNK as u64;
            let n = (len - done).min(chunk - (pa + done) % chunk);
            let off = addr::bar4_offset(self.info, pa + done, n)?;
            op(off, n as usize)?;
            done += n;
        }
        self.io().confirm_present()
    }

    /// Copies `len` bytes from user memory to device PA `pa` through BAR4,
    /// for data staged at reset epoch `staged_at`.
    pub(crate) fn write_from_user(
        &self,
        staged_at: u64,
        pa: u64,
        src: &mut UserSource,
        len: u64,
    ) -> Result {
        // User memory is copied with no lock held, through a bounce buffer
        // (allocated only if the backend needs one) or by the backend into
        // memory of its own, and outside the gate: a buffer that faults
        // slowly (userfaultfd) must not hold off a device reset and, behind
        // it, every other tenant.
        let mut bounce = Bounce::new(len)?;
        let gate = |op: &mut dyn FnMut() -> Result| self.transfer_piece(staged_at, op);
        self.for_each_piece(pa, len, |off, n| {
            self.io()
                .bar4_write_from_user(off, src, n, &mut bounce, &gate)
        })
    }

    /// Copies `len` bytes at device PA `pa` to user memory through BAR4,
    /// for data staged at reset epoch `staged_at`.
    pub(crate) fn read_to_user(
        &self,
        staged_at: u64,
        pa: u64,
        dst: &mut UserSliceWriter,
        len: u64,
    ) -> Result {
        let mut bounce = Bounce::new(len)?;
        self.for_each_piece(pa, len, |off, n| {
            let buf = bounce.get(n)?;
            self.transfer_piece(staged_at, || self.io().bar4_read(off, buf))?;
            dst.write_slice(buf)
        })
    }

    /// Writes `src` at device PA `pa` through BAR4, for data staged at reset
    /// epoch `staged_at`.
    pub(crate) fn write(&self, staged_at: u64, pa: u64, src: &[u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, src.len() as u64, |off, n| {
            self.transfer_piece(staged_at, || {
                self.io().bar4_write(off, &src[done..done + n])
            })?;
            done += n;
            Ok(())
        })
    }

    /// Reads device PA `pa` into `dst` through BAR4.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn read(&self, staged_at: u64, pa: u64, dst: &mut [u8]) -> Result {
        let mut done = 0usize;
        self.for_each_piece(pa, dst.len() as u64, |off, n| {
            self.transfer_piece(staged_at, || {
                self.io().bar4_read(off, &mut dst[done..done + n])
            })?;
            done += n;
            Ok(())
        })
    }

    /// Calls `insert` with the page frame backing the page at device PA
    /// `pa` (a page boundary) of memory staged at reset epoch `staged_at`,
    /// for a process to map; inside the reset gate, as a transfer piece:
    /// `EIO` once a device reset began since, `ENODEV` once the device is
    /// gone.
    pub(crate) fn map_page(
        &self,
        staged_at: u64,
        pa: u64,
        insert: &mut dyn FnMut(usize) -> Result,
    ) -> Result {
        self.check_present()?;
        let off = addr::bar4_offset(self.info, pa, PAGE_SIZE as u64)?;
        self.transfer_piece(staged_at, || self.io().bar4_map_page(off, insert))
    }

    /// Gives back what backs `[pa, pa + len)`, a chunk being freed (the
    /// simulated device drops its pages, and with them their memory
    /// charge). Runs to the end whatever signal is pending, offering to
    /// reschedule between pieces.
    pub(crate) fn release(&self, pa: u64, len: u64) {
        let mut done = 0u64;
        while done < len {
            let chunk = XFER_CHUNK as u64;
            let n = (len - done).min(chunk - (pa + done) % chunk);
            // A chunk of the grid lies inside the BAR4 window, whole.
            if let Ok(off) = addr::bar4_offset(self.info, pa + done, n) {
                self.io().bar4_release(off, n);
            }
            done += n;
            resched::yield_now();
        }
    }

    /// Zeroes `[pa, pa + len)` (the simulated device discards its pages),
    /// for memory staged at reset epoch `staged_at`.
    pub(crate) fn zero(&self, staged_at: u64, pa: u64, len: u64) -> Result {
        self.for_each_piece(pa, len, |off, n| {
            self.transfer_piece(staged_at, || self.io().bar4_zero(off, n as u64))
        })
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
    use crate::pool::tree_batch::{walk, BATCH};
    use crate::{arch::GIB, sim::FwScript};

    fn sim_device() -> Result<Arc<Device>> {
        Device::new_test_sim(1)
    }

    #[test]
    fn bar4_write_read_through_remap() -> Result {
        let dev = sim_device()?;
        // Device PA 64 GiB + 8 KiB is BAR4 offset 16 GiB + 8 KiB on V2.
        let pa = 64 * GIB + 8192;
        dev.write(0, pa, b"neuron")?;
        let mut back = [0u8; 6];
        dev.read(0, pa, &mut back)?;
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
        assert_eq!(dev.write(0, 20 * GIB, b"x"), Err(EINVAL));
        assert_eq!(dev.write(0, u64::MAX, b"xy"), Err(EINVAL));
        Ok(())
    }

    #[test]
    fn zero_of_gigabytes_stays_sparse() -> Result {
        let dev = sim_device()?;
        dev.write(0, GIB, &[0xaa; 16])?;
        dev.zero(0, 0, 12 * GIB)?;
        assert_eq!(dev.sim().map(|s| s.bar4_resident_pages()), Some(0));
        let mut b = [1u8; 16];
        dev.read(0, GIB, &mut b)?;
        assert_eq!(b, [0u8; 16]);
        Ok(())
    }

    #[test]
    fn unplugged_device_answers_enodev() -> Result {
        let dev = sim_device()?;
        dev.sim().unwrap().unplug();
        assert_eq!(dev.write(0, 0, b"x"), Err(ENODEV));
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, false).err(),
            Some(ENODEV)
        );
        Ok(())
    }

    #[test]
    fn tpb_reset_checks_the_core_map() -> Result {
        let dev = sim_device()?;
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0, false).err(),
            Some(EINVAL)
        );
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0b100, false).err(),
            Some(EINVAL)
        );
        assert!(Device::reset(&dev, ResetKind::Tpb, 0b11, false).is_ok());
        Ok(())
    }

    #[test]
    fn tpb_reset_hands_the_firmware_the_references_map() -> Result {
        for info in [&crate::arch::V2, &crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 1)?;
            let sim = dev.sim().ok_or(EINVAL)?;
            let last = 1u32 << (info.nr_cores - 1);
            for cores in [0b1, last, last | 1] {
                Device::reset(&dev, ResetKind::Tpb, cores, false)?;
                assert_eq!(sim.tpb_map_taken(), info.tpb_reset_map(cores));
                // Each core's engines are in it, not only the core's bit.
                assert!(sim.tpb_map_taken() & !cores != 0);
            }
        }
        Ok(())
    }

    #[test]
    fn probe_reset_holds_loads_off_until_it_ends() -> Result {
        let dev = sim_device()?;
        let sim = dev.sim().ok_or(EINVAL)?;
        Device::reset_at_probe(&dev)?;
        // Waits for the worker's reset, then stages at the moved epoch.
        assert_eq!(dev.ready_epoch()?, 1);
        assert_eq!(sim.resets_taken(), 1);
        Ok(())
    }

    #[test]
    fn device_reset_takes_no_core_map() -> Result {
        let dev = sim_device()?;
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0b1, false).err(),
            Some(EINVAL)
        );
        assert_eq!(dev.sim().map(|s| s.resets_taken()), Some(0));
        assert!(Device::reset(&dev, ResetKind::Device, 0, false).is_ok());
        Ok(())
    }

    #[test]
    fn device_reset_moves_the_epoch() -> Result {
        let dev = sim_device()?;
        let before = dev.ready_epoch()?;
        assert!(dev.check_epoch(before).is_ok());
        Device::reset(&dev, ResetKind::Tpb, 0b1, false)?;
        assert!(dev.check_epoch(before).is_ok());
        Device::reset(&dev, ResetKind::Device, 0, false)?;
        assert_eq!(dev.check_epoch(before), Err(EIO));
        assert!(dev.check_epoch(dev.ready_epoch()?).is_ok());
        // A transfer of data staged before the reset is refused.
        assert_eq!(dev.write(before, GIB, b"x"), Err(EIO));
        Ok(())
    }

    #[test]
    fn sbuf_is_never_behind_bar4() -> Result {
        for info in [&crate::arch::V2, &crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 1)?;
            for nc in 0..info.nr_cores {
                let (base, size) = addr::sbuf_window(info, nc).ok_or(EINVAL)?;
                let mut b = [0u8; 8];
                assert_eq!(dev.read(0, base, &mut b), Err(EINVAL));
                assert_eq!(dev.write(0, base + size - 8, &b), Err(EINVAL));
            }
        }
        Ok(())
    }

    #[test]
    fn failed_device_reset_leaves_the_state_unknown() -> Result {
        let dev = sim_device()?;
        let staged = dev.ready_epoch()?;
        let sim = dev.sim().ok_or(EINVAL)?;
        sim.set_fw_script(FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        });
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, false).err(),
            Some(ETIMEDOUT)
        );
        // Every plan and every new load answers EIO ...
        assert_eq!(dev.check_epoch(staged), Err(EIO));
        assert_eq!(dev.ready_epoch(), Err(EIO));
        // ... a TPB reset does not end it ...
        sim.set_fw_script(FwScript::PROMPT);
        Device::reset(&dev, ResetKind::Tpb, 0b1, false)?;
        assert_eq!(dev.ready_epoch(), Err(EIO));
        // ... a device reset that succeeds does.
        Device::reset(&dev, ResetKind::Device, 0, false)?;
        let now = dev.ready_epoch()?;
        assert!(dev.write(now, GIB, b"x").is_ok());
        assert_eq!(dev.check_epoch(staged), Err(EIO));
        Ok(())
    }

    #[test]
    fn exclusive_reset_needs_the_only_open_file() -> Result {
        let dev = sim_device()?;
        dev.file_opened();
        dev.file_opened();
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, true).err(),
            Some(EPERM)
        );
        assert_eq!(dev.sim().map(|s| s.resets_taken()), Some(0));
        dev.file_closed();
        assert!(Device::reset(&dev, ResetKind::Device, 0, true).is_ok());
        dev.file_closed();
        assert_eq!(dev.open_files(), 0);
        Ok(())
    }

    #[test]
    fn plan_summaries_walk_in_short_batches() -> Result {
        let dev = sim_device()?;
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
            dev.plans
                .lock()
                .try_create_and_insert(serial, summary, GFP_KERNEL)?;
        }
        let (mut seen, mut batches) = (0, 0);
        walk(
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

    #[test]
    fn any_tenant_may_end_a_reset_state_unknown() -> Result {
        let dev = sim_device()?;
        let sim = dev.sim().ok_or(EINVAL)?;
        dev.file_opened();
        // The only open file fails a device reset, then a second file opens.
        sim.set_fw_script(FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        });
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, true).err(),
            Some(ETIMEDOUT)
        );
        dev.file_opened();
        assert_eq!(dev.ready_epoch(), Err(EIO));
        sim.set_fw_script(FwScript::PROMPT);
        // A TPB reset still needs the only open file; the recovery does not.
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0b1, true).err(),
            Some(EPERM)
        );
        assert!(Device::reset(&dev, ResetKind::Device, 0, true).is_ok());
        assert!(dev.ready_epoch().is_ok());
        // Recovered: exclusive again.
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, true).err(),
            Some(EPERM)
        );
        dev.file_closed();
        dev.file_closed();
        Ok(())
    }
}
