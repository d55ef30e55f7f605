// SPDX-License-Identifier: GPL-2.0-only

//! The firmware reset of a device, seen from the device: the gate that
//! serializes resets and holds BAR4 transfers off while a device reset
//! runs, the reset job on the device's reset worker, and the reset epochs
//! by which a plan learns that its HBM contents are gone. The handshake
//! with the firmware itself is [`crate::hw::fw`].

use super::{reset_line, Device, Gate};
use crate::{
    abstractions::resched,
    abstractions::reset_queue,
    abstractions::trace::{self, ResetCounts},
    hw::fw::{self, RealClock, ResetKind, WaitReport, SLEEP_SLICE_MS},
};
use kernel::{
    impl_has_work, new_spinlock, new_work,
    prelude::*,
    sync::{
        atomic::{Acquire, Release},
        Arc, MutexGuard, SpinLock,
    },
    time::{delay::fsleep, Delta},
    workqueue::{Work, WorkItem},
};

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
        if job.kind == ResetKind::Device {
            dev.io().engines_reset();
        }
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

/// Who asks for a reset through an open file, for [`Device::reset`]'s rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requester {
    /// The client id of the open file.
    pub(crate) client: u64,
    /// The caller has `CAP_SYS_ADMIN`.
    pub(crate) admin: bool,
}

/// An administrator's file, for the tests.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) const ADMIN_FOR_TESTS: Requester = Requester {
    client: 0,
    admin: true,
};

impl Gate {
    /// Whether `who` may reset (`kind`) the cores in `cores` (`all`: every
    /// core of the device). A TPB reset never names a core another file
    /// owns, and needs the caller to own every core it names, to be the
    /// device's only open file, or `CAP_SYS_ADMIN`. A device reset needs
    /// `CAP_SYS_ADMIN`, the only open file, every core of the device, or a
    /// device in "reset state unknown" (it has nothing left to lose: else
    /// one tenant could fail a reset and keep every other from loading).
    fn may_reset(&self, kind: ResetKind, cores: u32, all: u32, who: Requester) -> bool {
        let mine = self.cores.of(who.client);
        match kind {
            ResetKind::Tpb => {
                cores & self.cores.of_others(who.client) == 0
                    && (who.admin || cores & !mine == 0 || self.open_files == 1)
            }
            ResetKind::Device => who.admin || self.unknown || self.open_files == 1 || mine == all,
        }
    }
}

impl Device {
    /// The device's state as an administrator reads it (debugfs `state`):
    /// `removed` once it is gone, `resetting` while a reset runs, `unknown`
    /// after a device reset that failed (until one succeeds), else `ready`.
    pub(crate) fn reset_state(&self) -> &'static str {
        if !self.io().is_present() {
            return "removed";
        }
        let g = self.gate.lock();
        if g.resetting {
            "resetting"
        } else if g.unknown {
            "unknown"
        } else {
            "ready"
        }
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
    pub(super) fn transfer_piece(&self, staged_at: u64, op: impl FnOnce() -> Result) -> Result {
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

    /// Takes the gate for a reset of `kind` of the cores in `cores`:
    /// waits, in line ([`ResetLine`](super::reset_line::ResetLine)), for
    /// the resets under way or asked for earlier and, for a device reset,
    /// for the transfers in flight, then moves the epoch. Only a fatal
    /// signal ends these waits (`EINTR`). With a requester, `EPERM` unless
    /// [`Gate::may_reset`] allows it, checked under the lock that opens,
    /// closes and claims take, before taking a place in line and at every
    /// wake-up in it.
    fn begin_reset(&self, kind: ResetKind, cores: u32, who: Option<Requester>) -> Result {
        let all = self.info.all_cores();
        let allowed = |g: &Gate| who.is_none_or(|w| g.may_reset(kind, cores, all, w));
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
    /// ([`ArchInfo::tpb_reset_map`](crate::arch::ArchInfo::tpb_reset_map)),
    /// on the device's reset worker, and waits for the firmware as the
    /// reference does ([`fw::reset`]).
    /// Resets are serialized and start in the order they were asked for; a
    /// device reset first waits for the BAR4 transfers in flight, holds new
    /// ones off while it runs, and makes every plan staged before it answer
    /// `EIO`. One that fails leaves the device in "reset state unknown"
    /// (loads answer `EIO`) until a device reset succeeds. Only a fatal
    /// signal ends the caller's waits (`EINTR`); a reset once started runs
    /// to its own end regardless, and its outcome alone decides the device's
    /// state. No lock is held while the firmware is waited for. `EPERM`
    /// unless [`Gate::may_reset`] allows `who` the reset.
    pub(crate) fn reset(
        dev: &Arc<Self>,
        kind: ResetKind,
        cores: u32,
        who: Requester,
    ) -> Result<WaitReport> {
        dev.check_present()?;
        let map = dev.reset_map(kind, cores)?;
        let job = Self::new_job(dev, kind, map)?;
        dev.begin_reset(kind, cores, Some(who))?;
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
        dev.begin_reset(ResetKind::Device, 0, None)?;
        dev.start(job)
    }
}

#[kunit_tests(neuron_hbm_reset)]
mod tests {
    use super::*;
    use crate::{arch::GIB, sim::FwScript};

    /// An administrator's file.
    const ADMIN: Requester = ADMIN_FOR_TESTS;
    /// A tenant's file, client 1.
    const TENANT: Requester = Requester {
        client: 1,
        admin: false,
    };

    #[test]
    fn tpb_reset_checks_the_core_map() -> Result {
        let dev = Device::new_test_sim(1)?;
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0, ADMIN).err(),
            Some(EINVAL)
        );
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0b100, ADMIN).err(),
            Some(EINVAL)
        );
        assert!(Device::reset(&dev, ResetKind::Tpb, 0b11, ADMIN).is_ok());
        Ok(())
    }

    #[test]
    fn tpb_reset_hands_the_firmware_the_references_map() -> Result {
        for info in [&crate::arch::V2, &crate::arch::V3, &crate::arch::V4] {
            let dev = Device::new_test_sim_of(info, 1)?;
            let sim = dev.sim().ok_or(EINVAL)?;
            let last = 1u32 << (info.nr_cores - 1);
            for cores in [0b1, last, last | 1] {
                Device::reset(&dev, ResetKind::Tpb, cores, ADMIN)?;
                assert_eq!(sim.tpb_map_taken(), info.tpb_reset_map(cores));
                // Each core's engines are in it, not only the core's bit.
                assert!(sim.tpb_map_taken() & !cores != 0);
            }
        }
        Ok(())
    }

    #[test]
    fn probe_reset_holds_loads_off_until_it_ends() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        Device::reset_at_probe(&dev)?;
        // Waits for the worker's reset, then stages at the moved epoch.
        assert_eq!(dev.ready_epoch()?, 1);
        assert_eq!(sim.resets_taken(), 1);
        Ok(())
    }

    #[test]
    fn unplugged_device_refuses_a_reset() -> Result {
        let dev = Device::new_test_sim(1)?;
        dev.sim().ok_or(EINVAL)?.unplug();
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, ADMIN).err(),
            Some(ENODEV)
        );
        Ok(())
    }

    #[test]
    fn device_reset_takes_no_core_map() -> Result {
        let dev = Device::new_test_sim(1)?;
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0b1, ADMIN).err(),
            Some(EINVAL)
        );
        assert_eq!(dev.sim().map(|s| s.resets_taken()), Some(0));
        assert!(Device::reset(&dev, ResetKind::Device, 0, ADMIN).is_ok());
        Ok(())
    }

    #[test]
    fn device_reset_moves_the_epoch() -> Result {
        let dev = Device::new_test_sim(1)?;
        let before = dev.ready_epoch()?;
        assert!(dev.check_epoch(before).is_ok());
        Device::reset(&dev, ResetKind::Tpb, 0b1, ADMIN)?;
        assert!(dev.check_epoch(before).is_ok());
        Device::reset(&dev, ResetKind::Device, 0, ADMIN)?;
        assert_eq!(dev.check_epoch(before), Err(EIO));
        assert!(dev.check_epoch(dev.ready_epoch()?).is_ok());
        // A transfer of data staged before the reset is refused.
        assert_eq!(dev.write(before, GIB, b"x"), Err(EIO));
        Ok(())
    }

    #[test]
    fn failed_device_reset_leaves_the_state_unknown() -> Result {
        let dev = Device::new_test_sim(1)?;
        let staged = dev.ready_epoch()?;
        assert_eq!(dev.reset_state(), "ready");
        let sim = dev.sim().ok_or(EINVAL)?;
        sim.set_fw_script(FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        });
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, ADMIN).err(),
            Some(ETIMEDOUT)
        );
        assert_eq!(dev.reset_state(), "unknown");
        // Every plan and every new load answers EIO ...
        assert_eq!(dev.check_epoch(staged), Err(EIO));
        assert_eq!(dev.ready_epoch(), Err(EIO));
        // ... a TPB reset does not end it ...
        sim.set_fw_script(FwScript::PROMPT);
        Device::reset(&dev, ResetKind::Tpb, 0b1, ADMIN)?;
        assert_eq!(dev.ready_epoch(), Err(EIO));
        // ... a device reset that succeeds does.
        Device::reset(&dev, ResetKind::Device, 0, ADMIN)?;
        assert_eq!(dev.reset_state(), "ready");
        let now = dev.ready_epoch()?;
        assert!(dev.write(now, GIB, b"x").is_ok());
        assert_eq!(dev.check_epoch(staged), Err(EIO));
        Ok(())
    }

    #[test]
    fn exclusive_reset_needs_the_only_open_file() -> Result {
        let dev = Device::new_test_sim(1)?;
        dev.file_opened();
        dev.file_opened();
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, TENANT).err(),
            Some(EPERM)
        );
        assert_eq!(dev.sim().map(|s| s.resets_taken()), Some(0));
        dev.file_closed(1);
        assert!(Device::reset(&dev, ResetKind::Device, 0, TENANT).is_ok());
        dev.file_closed(1);
        assert_eq!(dev.open_files(), 0);
        Ok(())
    }

    #[test]
    fn any_tenant_may_end_a_reset_state_unknown() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        dev.file_opened();
        // The only open file fails a device reset, then a second file opens.
        sim.set_fw_script(FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        });
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, TENANT).err(),
            Some(ETIMEDOUT)
        );
        dev.file_opened();
        assert_eq!(dev.ready_epoch(), Err(EIO));
        sim.set_fw_script(FwScript::PROMPT);
        // A TPB reset still needs the only open file; the recovery does not.
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0b1, TENANT).err(),
            Some(EPERM)
        );
        assert!(Device::reset(&dev, ResetKind::Device, 0, TENANT).is_ok());
        assert!(dev.ready_epoch().is_ok());
        // Recovered: exclusive again.
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, TENANT).err(),
            Some(EPERM)
        );
        dev.file_closed(1);
        dev.file_closed(1);
        Ok(())
    }

    /// A tenant's file, client 2.
    const OTHER: Requester = Requester {
        client: 2,
        admin: false,
    };

    #[test]
    fn owners_reset_their_own_cores_beside_each_other() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        dev.file_opened();
        dev.file_opened();
        dev.claim_cores(TENANT.client, 0b01, 0)?;
        dev.claim_cores(OTHER.client, 0b10, 0)?;
        // Each resets its own core while both files are open.
        Device::reset(&dev, ResetKind::Tpb, 0b01, TENANT)?;
        Device::reset(&dev, ResetKind::Tpb, 0b10, OTHER)?;
        assert_eq!(sim.resets_taken(), 2);
        // The other's core, alone or beside one's own, even for an
        // administrator: EPERM, and the firmware is asked nothing.
        for (cores, who) in [(0b10, TENANT), (0b11, TENANT), (0b01, OTHER), (0b10, ADMIN)] {
            assert_eq!(
                Device::reset(&dev, ResetKind::Tpb, cores, who).err(),
                Some(EPERM)
            );
        }
        // A device reset wipes the other's cores too: EPERM to a tenant
        // that does not own every core.
        assert_eq!(
            Device::reset(&dev, ResetKind::Device, 0, TENANT).err(),
            Some(EPERM)
        );
        assert_eq!(sim.resets_taken(), 2);
        // Released, the core is the first tenant's to claim and reset;
        // owning every core, it may reset the device.
        dev.claim_cores(OTHER.client, 0, 0b10)?;
        assert_eq!(
            Device::reset(&dev, ResetKind::Tpb, 0b10, TENANT).err(),
            Some(EPERM)
        );
        dev.claim_cores(TENANT.client, 0b10, 0)?;
        Device::reset(&dev, ResetKind::Tpb, 0b11, TENANT)?;
        Device::reset(&dev, ResetKind::Device, 0, TENANT)?;
        assert_eq!(sim.resets_taken(), 4);
        dev.file_closed(TENANT.client);
        dev.file_closed(OTHER.client);
        Ok(())
    }
}
