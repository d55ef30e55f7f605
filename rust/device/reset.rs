// SPDX-License-Identifier: GPL-2.0-only

//! The firmware reset of a device, seen from the device: who may reset
//! what, the requests merged into one handshake per batch
//! ([`super::reset_batch`]), the device's reset work that carries each
//! batch out, the gate that holds BAR4 transfers off while a device reset
//! runs, and the reset epochs by which a plan learns that its HBM contents
//! are gone. The handshake with the firmware itself is [`crate::hw::fw`].

use super::{
    reset_batch::{Request, Requester, ResetBatch},
    Device, Gate,
};
use crate::{
    abstractions::resched,
    abstractions::reset_queue,
    abstractions::trace::{self, ResetCounts},
    hw::fw::{self, RealClock, ResetKind, WaitReport, SLEEP_SLICE_MS},
};
use kernel::{
    impl_has_work,
    prelude::*,
    sync::{
        atomic::{Acquire, Release},
        Arc, MutexGuard,
    },
    time::{delay::fsleep, Delta},
    workqueue::WorkItem,
};

impl_has_work! {
    impl HasWork<Self> for Device { self.reset_work }
}

/// The device's reset work: carries out the running batch on the module's
/// reset workqueue, whatever happens to the tasks that asked for it, then
/// starts the pending one.
impl WorkItem for Device {
    type Pointer = Arc<Device>;

    fn run(dev: Arc<Device>) {
        let Some(batch) = dev.gate.lock().running.clone() else {
            return;
        };
        let (kind, cores) = dev.still_allowed(&batch);
        let res = kind.map(|k| dev.handshake(&batch, k, cores));
        // The outcomes, the gate opening and a closed file's cores going
        // back are seen at once: a waiter told its outcome finds them so.
        let mut g = dev.gate.lock();
        if let Some(res) = res {
            batch.finish_rest(res);
        }
        if kind == Some(ResetKind::Device) {
            g.unknown = res.is_some_and(|r| r.is_err());
        }
        g.blocking = false;
        g.running = None;
        // A closed file's cores were kept for its reset, which has ended.
        batch.each(|r| {
            if let Some(c) = r.orphaned_client() {
                let waiting = g.pending.as_ref().is_some_and(|p| p.has_unfinished_of(c));
                if !waiting {
                    g.cores.release_all(c);
                }
            }
        });
        if let Some(next) = g.pending.take() {
            dev.launch(&mut g, next);
        }
        dev.gate_changed.notify_all();
    }
}

impl Gate {
    /// Whether `who` may reset (`kind`) the cores in `cores` (`all`: every
    /// core of the device). A TPB reset never names a core another file
    /// owns, and needs the caller to own every core it names, to be the
    /// device's only open file, or `CAP_SYS_ADMIN`. A device reset needs
    /// `CAP_SYS_ADMIN`, the only open file, every core of the device, or a
    /// device in "reset state unknown" (it has nothing left to lose: else
    /// one tenant could fail a reset and keep every other from loading).
    /// A file that closed with its reset waiting counts as no open file,
    /// and keeps its cores until that reset ends.
    fn may_reset(&self, kind: ResetKind, cores: u32, all: u32, who: Requester) -> bool {
        let mine = self.cores.of(who.client);
        let alone = self.open_files <= 1;
        match kind {
            ResetKind::Tpb => {
                cores & self.cores.of_others(who.client) == 0
                    && (who.admin || cores & !mine == 0 || alone)
            }
            ResetKind::Device => who.admin || self.unknown || alone || mine == all,
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
        if g.running.is_some() {
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

    /// Hands `batch` to the reset work as the running batch, holding loads
    /// and transfers off from now on if it carries a device reset; if there
    /// is no reset workqueue (the module is being unloaded), its requests
    /// end with `ENODEV`.
    fn launch(self: &Arc<Self>, g: &mut Gate, batch: Arc<ResetBatch>) {
        // Only launched with none running: the work is not queued.
        if reset_queue::enqueue(self.clone()).is_ok() {
            let mut device = false;
            batch.each(|r| device |= r.kind == ResetKind::Device);
            g.blocking = device;
            g.running = Some(batch);
        } else {
            batch.finish_rest(Err(ENODEV));
        }
    }

    /// The requests of `batch` still allowed now, as it starts (a second
    /// file may have opened, or claimed a core, since they were made); the
    /// others end with `EPERM`. Returns the reset that covers them all (a
    /// device reset if one asked for it, else a TPB reset of every core
    /// they name), none if none is left. Transfers stay held off only for
    /// a device reset.
    fn still_allowed(&self, batch: &ResetBatch) -> (Option<ResetKind>, u32) {
        let all = self.info.all_cores();
        let mut g = self.gate.lock();
        let (mut kind, mut cores) = (None, 0);
        batch.each(|r| {
            if r.who.is_some_and(|w| !g.may_reset(r.kind, r.cores, all, w)) {
                r.finish(Err(EPERM));
            } else if r.kind == ResetKind::Device {
                kind = Some(ResetKind::Device);
            } else {
                kind = kind.or(Some(ResetKind::Tpb));
                cores |= r.cores;
            }
        });
        g.blocking = kind == Some(ResetKind::Device);
        // The refused learn it now, and loads held off for a device reset
        // refused go on.
        self.gate_changed.notify_all();
        (kind, cores)
    }

    /// The handshake of `batch`: a reset of `kind` of the cores in `cores`
    /// (all of the device for a device reset), traced once per request
    /// still waiting. Returns its outcome, for those requests.
    fn handshake(&self, batch: &ResetBatch, kind: ResetKind, cores: u32) -> Result<WaitReport> {
        let map = match kind {
            ResetKind::Device => {
                self.quiesce();
                0
            }
            ResetKind::Tpb => self.info.tpb_reset_map(cores),
        };
        // Removal (unbind, unload) ends the handshake at its next poll.
        let stop = || self.check_present();
        let clock = RealClock::new(&stop);
        let mut timer = None;
        let mut asked = 0;
        batch.each(|r| {
            if r.outcome().is_none() {
                let t = trace::reset_begin(self.index, kind as u32, map);
                timer.get_or_insert(t);
                asked += 1;
            }
        });
        let (res, report) = fw::reset(self.io(), &self.info.reset, &clock, kind, map);
        if kind == ResetKind::Device {
            self.io().engines_reset();
        }
        if let Some(t) = &timer {
            for _ in 0..asked {
                let counts = ResetCounts {
                    polls: report.polls,
                    resends: report.sends.saturating_sub(1),
                    looks: report.tries,
                };
                trace::reset_end(t, self.index, kind as u32, &res, counts);
            }
        }
        if let Err(e) = res {
            pr_warn!(
                "neuron_hbm{}: {:?} reset failed ({}) after {} ms, {} requests\n",
                self.index,
                kind,
                e.to_errno(),
                report.elapsed_ms,
                report.sends
            );
        }
        res.map(|()| report)
    }

    /// The start of a device reset, on the reset work with transfers held
    /// off: waits for the transfer pieces in flight (each bounded), moves
    /// the epoch (transfers of older plans waiting at the gate answer `EIO`
    /// now), and takes every mapping of the HBM away.
    fn quiesce(&self) {
        {
            let mut g = self.gate.lock();
            while g.transfers > 0 {
                self.gate_changed.wait(&mut g);
            }
            self.reset_epoch.fetch_add(1, Release);
            self.gate_changed.notify_all();
        }
        self.revoke_mappings();
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

    /// Asks for a reset of `kind` of the cores in `cores` for `who` (`None`:
    /// the kernel), and returns at once. Made while no handshake runs, it
    /// starts one; made while one runs, it joins the next, which carries out
    /// every request made meanwhile as one handshake. `EPERM` unless
    /// [`Gate::may_reset`] allows it now (and it is checked again as its
    /// handshake starts); `EINVAL` for a bad map; `ENODEV` once the device
    /// is gone; `ENOMEM` when the request cannot be allocated (charged to
    /// the caller's memory cgroup). Nothing is asked of the firmware on a
    /// refusal.
    pub(crate) fn request_reset(
        dev: &Arc<Self>,
        kind: ResetKind,
        cores: u32,
        who: Option<Requester>,
    ) -> Result<Arc<Request>> {
        dev.check_present()?;
        dev.reset_map(kind, cores)?;
        let req = Request::new(kind, cores, who)?;
        let fresh = ResetBatch::new()?;
        let all = dev.info.all_cores();
        let mut g = dev.gate.lock();
        if who.is_some_and(|w| !g.may_reset(kind, cores, all, w)) {
            return Err(EPERM);
        }
        if g.running.is_none() {
            fresh.join(req.clone())?;
            dev.launch(&mut g, fresh);
        } else if let Some(next) = &g.pending {
            next.join(req.clone())?;
        } else {
            fresh.join(req.clone())?;
            g.pending = Some(fresh);
        }
        Ok(req)
    }

    /// Waits for `req` to end and returns its outcome. Only a fatal signal
    /// ends the wait early (`EINTR`): the reset goes on without the caller.
    pub(crate) fn wait_reset(&self, req: &Request) -> Result<WaitReport> {
        let mut g = self.gate.lock();
        loop {
            if let Some(res) = req.outcome() {
                return res;
            }
            let (back, res) = self.wait_killable(g);
            g = back;
            res?;
        }
    }

    /// Resets the device (`cores` 0) or the TPBs of the cores in `cores`,
    /// with the engines the reference resets beside each core
    /// ([`ArchInfo::tpb_reset_map`](crate::arch::ArchInfo::tpb_reset_map)),
    /// and waits for it ([`Self::request_reset`], [`Self::wait_reset`]). A
    /// device reset first waits for the BAR4 transfers in flight, holds new
    /// ones off while it runs, and makes every plan staged before it answer
    /// `EIO`. One that fails leaves the device in "reset state unknown"
    /// (loads answer `EIO`) until a device reset succeeds. No lock is held
    /// while the firmware is waited for.
    pub(crate) fn reset(
        dev: &Arc<Self>,
        kind: ResetKind,
        cores: u32,
        who: Requester,
    ) -> Result<WaitReport> {
        let req = Self::request_reset(dev, kind, cores, Some(who))?;
        dev.wait_reset(&req)
    }

    /// Starts a device reset as the reference's probe ends (`neuron_pci.c`):
    /// asynchronously, holding loads and transfers off until it ends, as
    /// every device reset does. Called before the device's node exists.
    pub(crate) fn reset_at_probe(dev: &Arc<Self>) -> Result {
        Self::request_reset(dev, ResetKind::Device, 0, None).map(|_| ())
    }
}

#[kunit_tests(neuron_hbm_reset)]
mod tests {
    use super::*;
    use crate::{arch::GIB, sim::FwScript};

    /// An administrator's file.
    const ADMIN: Requester = crate::device::reset_batch::ADMIN_FOR_TESTS;
    /// A tenant's file, client 1.
    const TENANT: Requester = Requester {
        client: 1,
        admin: false,
    };
    /// Another tenant's file, client 2.
    const OTHER: Requester = Requester {
        client: 2,
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

    /// A firmware whose every reset takes about 300 ms: requests made
    /// meanwhile wait for the next handshake.
    fn slow_firmware(dev: &Device) -> Result {
        dev.sim().ok_or(EINVAL)?.set_fw_script(FwScript {
            take_after: 3,
            ..FwScript::PROMPT
        });
        Ok(())
    }

    #[test]
    fn requests_made_during_a_handshake_share_the_next() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        slow_firmware(&dev)?;
        let first = Device::request_reset(&dev, ResetKind::Tpb, 0b01, Some(ADMIN))?;
        let mut rest = KVec::new();
        for i in 0..7 {
            let cores = 1 << (i % 2);
            rest.push(
                Device::request_reset(&dev, ResetKind::Tpb, cores, Some(ADMIN))?,
                GFP_KERNEL,
            )?;
        }
        dev.wait_reset(&first)?;
        for r in rest.iter() {
            dev.wait_reset(r)?;
        }
        // Eight requests, two handshakes; the second reset both cores.
        assert_eq!(sim.resets_taken(), 2);
        assert_eq!(sim.tpb_map_taken(), dev.info.tpb_reset_map(0b11));
        Ok(())
    }

    #[test]
    fn a_device_request_absorbs_the_waiting_tpb_ones() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        let before = dev.ready_epoch()?;
        slow_firmware(&dev)?;
        let first = Device::request_reset(&dev, ResetKind::Tpb, 0b01, Some(ADMIN))?;
        let tpb = Device::request_reset(&dev, ResetKind::Tpb, 0b10, Some(ADMIN))?;
        let whole = Device::request_reset(&dev, ResetKind::Device, 0, Some(ADMIN))?;
        for r in [&first, &tpb, &whole] {
            dev.wait_reset(r)?;
        }
        assert_eq!(sim.resets_taken(), 2);
        // The second handshake was the device reset: the epoch moved.
        assert_eq!(dev.check_epoch(before), Err(EIO));
        Ok(())
    }

    #[test]
    fn a_request_no_longer_allowed_at_its_turn_is_refused() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        let before = dev.ready_epoch()?;
        dev.file_opened();
        slow_firmware(&dev)?;
        let first = Device::request_reset(&dev, ResetKind::Tpb, 0b01, Some(ADMIN))?;
        // Allowed while its file is the only one ...
        let wipe = Device::request_reset(&dev, ResetKind::Device, 0, Some(TENANT))?;
        // ... but a second file opens before its handshake starts.
        dev.file_opened();
        dev.wait_reset(&first)?;
        assert_eq!(dev.wait_reset(&wipe).err(), Some(EPERM));
        assert_eq!(sim.resets_taken(), 1);
        assert!(dev.check_epoch(before).is_ok());
        dev.file_closed(TENANT.client);
        dev.file_closed(OTHER.client);
        Ok(())
    }

    #[test]
    fn a_closed_files_reset_goes_on_and_keeps_its_cores_till_then() -> Result {
        let dev = Device::new_test_sim(1)?;
        let sim = dev.sim().ok_or(EINVAL)?;
        dev.file_opened();
        dev.file_opened();
        dev.claim_cores(TENANT.client, 0b01, 0)?;
        slow_firmware(&dev)?;
        let first = Device::request_reset(&dev, ResetKind::Tpb, 0b10, Some(ADMIN))?;
        let own = Device::request_reset(&dev, ResetKind::Tpb, 0b01, Some(TENANT))?;
        dev.file_closed(TENANT.client);
        // Its core is under its reset: no one else may claim it yet.
        assert_eq!(dev.claim_cores(OTHER.client, 0b01, 0).err(), Some(EBUSY));
        dev.wait_reset(&first)?;
        dev.wait_reset(&own)?;
        assert_eq!(sim.resets_taken(), 2);
        assert_eq!(sim.tpb_map_taken(), dev.info.tpb_reset_map(0b01));
        // Its reset done, the core is free.
        assert_eq!(dev.claim_cores(OTHER.client, 0b01, 0)?.owned, 0b01);
        dev.file_closed(OTHER.client);
        Ok(())
    }
}
