// SPDX-License-Identifier: GPL-2.0-only

//! Firmware reset as the reference driver does it (aws-neuron-driver,
//! `nr_initiate_reset_via_fw` in neuron_reset.c, `fw_io_read_csr_array_direct`
//! in neuron_fw_io.c, `nr_wait_for_reset_completion_v2/_v3`):
//!
//! 1. the request (TPB map, reset kind, doorbell) goes to the MISC RAM
//!    mailbox;
//! 2. every [`ResetTiming::poll_ms`] the driver looks whether the firmware
//!    took it (RESET_REQUEST reads 0), writes it again every
//!    [`DEVICE_RESEND_MS`] or [`TPB_RESEND_MS`] because the firmware may
//!    have missed it, and gives up after [`ResetTiming::initiate_max_ms`];
//! 3. then up to [`RESET_RETRIES`] looks at FW_STATUS wait for the
//!    reset-in-progress bit to clear: the driver looks, and sleeps
//!    `100 ms * i` after look `i` (from 0) that still sees it set.
//!
//! Every register read of the handshake is a firmware read: one that answers
//! `0xdeadbeef` is read again every [`BAD_READ_POLL_MS`] for up to
//! [`BAD_READ_WINDOW_MS`], and that window is tried [`BAD_READ_TRIES`] times.
//! A register that reads all ones is an ordinary value while a reset runs
//! ("not taken yet", "still resetting"), as in the reference: only a
//! function whose configuration space is gone too ends the handshake with
//! `ENODEV` ([`DeviceIo::config_present`]).
//!
//! The handshake runs on the device's reset worker, as the reference's runs
//! on its per-device reset thread (`nr_reset_thread_fn`, neuron_reset.c):
//! signals never reach it; every sleep is cut into [`SLEEP_SLICE_MS`]
//! slices, and before each the [`RealClock`]'s stop check may end it (the
//! device was removed). Time comes from a [`Clock`], the monotonic clock on
//! a real device, a counter in the KUnit tests, so the reference's 30 s
//! re-send and 480 s deadline are tested without waiting for them.

use crate::{
    arch::ResetTiming,
    hw::io::DeviceIo,
    hw::regs::{
        FW_IO_BAD_READ, FW_STATUS, GONE, RESET_REQUEST, RESET_TPB_MAP, RESET_TRIGGER,
        RESET_TYPE_DEVICE, RESET_TYPE_TPB,
    },
};
use kernel::{
    io::Io,
    prelude::*,
    time::{delay::fsleep, Delta, Instant, Monotonic},
};

/// Looks at FW_STATUS before giving up (`NR_RESET_RETRY_COUNT`,
/// neuron_reset.h:17; `retry_count`, v2/neuron_dhal_v2.c:1714,
/// v3/neuron_dhal_v3.c:2108).
pub(crate) const RESET_RETRIES: u32 = 5;
/// Look `i` (from 0) at FW_STATUS comes `i` times this many milliseconds
/// after look `i - 1` (`NR_RESET_RETRY_SLEEP_MS`, v2/neuron_dhal_v2.c:27,205;
/// v3/neuron_dhal_v3.c:33,378).
pub(crate) const RESET_STEP_MS: u32 = 100;
/// Re-send interval of a device reset request
/// (`NR_DEVICE_RESET_RETRY_INTERVAL`, neuron_reset.c:28).
pub(crate) const DEVICE_RESEND_MS: u64 = 30_000;
/// Re-send interval of a TPB reset request (`NR_TPB_RESET_RETRY_INTERVAL`,
/// neuron_reset.c:29).
pub(crate) const TPB_RESEND_MS: u64 = 10_000;
/// Milliseconds between two reads of a register that answered `0xdeadbeef`
/// (`msleep(1)`, neuron_fw_io.c:381).
pub(crate) const BAD_READ_POLL_MS: u32 = 1;
/// Milliseconds one window of `0xdeadbeef` re-reads lasts (`FW_IO_RD_TIMEOUT`,
/// neuron_fw_io.h:117).
pub(crate) const BAD_READ_WINDOW_MS: u64 = 1_000;
/// Windows of re-reads before a read fails (`FW_IO_RD_RETRY`, neuron_fw_io.h:118).
pub(crate) const BAD_READ_TRIES: u32 = 15;
/// Longest sleep between two stop checks: a removal ends a reset within
/// this many ms.
pub(crate) const SLEEP_SLICE_MS: u32 = 10;

/// Kind of reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ResetKind {
    /// The whole device.
    Device = RESET_TYPE_DEVICE,
    /// The TPBs (NeuronCores) of a map.
    Tpb = RESET_TYPE_TPB,
}

impl ResetKind {
    /// The kind numbered `n` in the UAPI.
    pub(crate) fn from_u32(n: u32) -> Option<Self> {
        match n {
            RESET_TYPE_DEVICE => Some(Self::Device),
            RESET_TYPE_TPB => Some(Self::Tpb),
            _ => None,
        }
    }

    /// Milliseconds after which an untaken request is written again.
    fn resend_ms(self) -> u64 {
        match self {
            Self::Device => DEVICE_RESEND_MS,
            Self::Tpb => TPB_RESEND_MS,
        }
    }
}

/// Time as the handshake sees it.
pub(crate) trait Clock {
    /// Milliseconds since some fixed point.
    fn now_ms(&self) -> u64;
    /// Sleeps `ms` milliseconds; an error when the wait must end early.
    fn sleep_ms(&self, ms: u32) -> Result;
}

/// The monotonic clock and real sleeps, cut into [`SLEEP_SLICE_MS`] slices
/// with a call of `stop` before each: the wait ends with the error `stop`
/// returns.
pub(crate) struct RealClock<'a> {
    start: Instant<Monotonic>,
    stop: &'a dyn Fn() -> Result,
}

impl<'a> RealClock<'a> {
    /// A clock that counts from now and stops when `stop` fails.
    pub(crate) fn new(stop: &'a dyn Fn() -> Result) -> Self {
        Self {
            start: Instant::now(),
            stop,
        }
    }
}

impl Clock for RealClock<'_> {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis().max(0) as u64
    }

    fn sleep_ms(&self, ms: u32) -> Result {
        let mut left = ms;
        loop {
            (self.stop)()?;
            if left == 0 {
                return Ok(());
            }
            let n = left.min(SLEEP_SLICE_MS);
            fsleep(Delta::from_millis(i64::from(n)));
            left -= n;
        }
    }
}

/// What a reset did, reported on success and failure alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitReport {
    /// Requests written to the mailbox (the first and every re-send).
    pub(crate) sends: u32,
    /// Polls of RESET_REQUEST for the firmware's take of a request.
    pub(crate) polls: u32,
    /// Looks at FW_STATUS made.
    pub(crate) tries: u32,
    /// Milliseconds from the first request to the end, by the clock.
    pub(crate) elapsed_ms: u64,
}

/// A firmware read of one register (`fw_io_read_csr_array_direct`, not
/// operational): `None` when every read of every window answered
/// `0xdeadbeef`. All ones is a value like any other unless the function's
/// configuration space is gone too: then `ENODEV`.
fn fw_read(
    io: &dyn DeviceIo,
    clock: &dyn Clock,
    read: &dyn Fn(&crate::hw::regs::MiscRam<'_>) -> u32,
) -> Result<Option<u32>> {
    for _ in 0..BAD_READ_TRIES {
        let start = clock.now_ms();
        loop {
            let value = io.misc_ram(|mb| read(&mb))?;
            if value == GONE && !io.config_present() {
                return Err(ENODEV);
            }
            if value != FW_IO_BAD_READ {
                return Ok(Some(value));
            }
            clock.sleep_ms(BAD_READ_POLL_MS)?;
            if clock.now_ms() - start >= BAD_READ_WINDOW_MS {
                break;
            }
        }
    }
    Ok(None)
}

/// Writes the request of `kind` (with `nc_map` for a TPB reset) and rings
/// the doorbell (`fw_io_initiate_reset`, neuron_fw_io.c:415-431).
fn send(io: &dyn DeviceIo, kind: ResetKind, nc_map: u32) -> Result {
    io.misc_ram(|mb| {
        if kind == ResetKind::Tpb {
            mb.write_reg(RESET_TPB_MAP::zeroed().with_map(nc_map));
        }
        mb.write_reg(RESET_REQUEST::zeroed().with_kind(kind as u32));
        mb.write_reg(RESET_TRIGGER::zeroed().with_ring(true));
    })
}

/// Whether the firmware took the request: RESET_REQUEST reads 0
/// (`fw_io_is_reset_initiated`, neuron_fw_io.c:433-444).
fn taken(io: &dyn DeviceIo, clock: &dyn Clock) -> Result<bool> {
    Ok(fw_read(io, clock, &|mb| u32::from(mb.read(RESET_REQUEST)))? == Some(0))
}

/// Sends the request and waits for the firmware to take it, re-sending it
/// every [`ResetKind::resend_ms`]; `ETIMEDOUT` after
/// [`ResetTiming::initiate_max_ms`].
fn initiate(
    io: &dyn DeviceIo,
    timing: &ResetTiming,
    clock: &dyn Clock,
    (kind, nc_map): (ResetKind, u32),
    report: &mut WaitReport,
) -> Result {
    let start = clock.now_ms();
    send(io, kind, nc_map)?;
    report.sends = 1;
    let mut resend_at = start + kind.resend_ms();
    loop {
        clock.sleep_ms(timing.poll_ms)?;
        report.polls += 1;
        if taken(io, clock)? {
            return Ok(());
        }
        let now = clock.now_ms();
        if now >= resend_at {
            send(io, kind, nc_map)?;
            report.sends += 1;
            resend_at = now + kind.resend_ms();
        }
        if now - start >= timing.initiate_max_ms {
            return Err(ETIMEDOUT);
        }
    }
}

/// Waits for the firmware to finish a reset as
/// `nr_wait_for_reset_completion_v2/_v3` do: up to [`RESET_RETRIES`] looks
/// at FW_STATUS, done when the in-progress bit is clear; after look `i`
/// (from 0) that still sees it set (or reads `0xdeadbeef` throughout), a
/// sleep of `i * RESET_STEP_MS` ms, so looks come at +0, 0, 100, 300 and
/// 600 ms and `ETIMEDOUT` at +1000 ms.
pub(crate) fn wait_for_reset_completion(
    io: &dyn DeviceIo,
    clock: &dyn Clock,
    report: &mut WaitReport,
) -> Result {
    for i in 0..RESET_RETRIES {
        report.tries += 1;
        let status = fw_read(io, clock, &|mb| u32::from(mb.read(FW_STATUS)))?;
        if let Some(st) = status {
            if !FW_STATUS::from(st).reset_in_progress() {
                return Ok(());
            }
        }
        clock.sleep_ms(RESET_STEP_MS * i)?;
    }
    Err(ETIMEDOUT)
}

/// Asks the firmware for a reset of `kind` (`nc_map` for a TPB reset) and
/// waits for it to be taken and done, as the reference does. Callers
/// serialize resets of one device.
pub(crate) fn reset(
    io: &dyn DeviceIo,
    timing: &ResetTiming,
    clock: &dyn Clock,
    kind: ResetKind,
    nc_map: u32,
) -> (Result, WaitReport) {
    let mut report = WaitReport::default();
    let start = clock.now_ms();
    let res = initiate(io, timing, clock, (kind, nc_map), &mut report)
        .and_then(|()| wait_for_reset_completion(io, clock, &mut report));
    report.elapsed_ms = clock.now_ms() - start;
    (res, report)
}

/// Waits for the firmware to answer at probe, as the reference's probe
/// does before it uses a device (`neuron_pci_get_device_id`,
/// v2/neuron_dhal_v2.c:1076-1088): up to [`PROBE_TRIES`] firmware reads of
/// the device-id register, [`PROBE_SLEEP_MS`] apart, until one is not
/// `0xdeadbeef`; `ETIMEDOUT` otherwise.
pub(crate) fn wait_for_firmware(io: &dyn DeviceIo, clock: &dyn Clock) -> Result<u32> {
    for i in 0..PROBE_TRIES {
        if i > 0 {
            clock.sleep_ms(PROBE_SLEEP_MS)?;
        }
        let id = fw_read(io, clock, &|mb| {
            u32::from(mb.read(crate::hw::regs::DEVICE_ID))
        })?;
        if let Some(id) = id {
            return Ok(id);
        }
    }
    Err(ETIMEDOUT)
}

/// Reads of the device-id register at probe (`v2/neuron_dhal_v2.c:1076`,
/// `v3/neuron_dhal_v3.c:1329`: 20 tries).
pub(crate) const PROBE_TRIES: u32 = 20;
/// Milliseconds between two of them (`msleep(1000)`, same lines).
pub(crate) const PROBE_SLEEP_MS: u32 = 1_000;

#[kunit_tests(neuron_hbm_fw)]
mod tests {
    use super::*;
    use crate::{
        arch::{V2, V3},
        sim::{FwScript, SimIo},
    };
    use core::cell::Cell;

    /// Time that passes only when slept, and a removal that comes at a
    /// given time.
    struct FakeClock {
        now: Cell<u64>,
        stop_at: u64,
    }

    impl FakeClock {
        fn new() -> Self {
            Self::stopped_at(u64::MAX)
        }

        fn stopped_at(ms: u64) -> Self {
            Self {
                now: Cell::new(0),
                stop_at: ms,
            }
        }
    }

    impl Clock for FakeClock {
        fn now_ms(&self) -> u64 {
            self.now.get()
        }

        fn sleep_ms(&self, ms: u32) -> Result {
            if self.now.get() >= self.stop_at {
                return Err(ENODEV);
            }
            self.now.set(self.now.get() + u64::from(ms));
            Ok(())
        }
    }

    fn sim(script: FwScript) -> Result<Pin<KBox<SimIo>>> {
        let s = KBox::pin_init(SimIo::new(&V2), GFP_KERNEL)?;
        s.set_fw_script(script);
        Ok(s)
    }

    /// A device reset of a V2 device whose firmware follows `script`.
    fn device_reset(script: FwScript, clock: &FakeClock) -> Result<(Result, WaitReport)> {
        let s = sim(script)?;
        Ok(reset(&*s, &V2.reset, clock, ResetKind::Device, 0))
    }

    fn report(sends: u32, polls: u32, tries: u32, elapsed_ms: u64) -> WaitReport {
        WaitReport {
            sends,
            polls,
            tries,
            elapsed_ms,
        }
    }

    #[test]
    fn prompt_firmware_takes_one_poll() -> Result {
        let c = FakeClock::new();
        // One 100 ms poll sees the request taken, the first look sees it done.
        assert_eq!(
            device_reset(FwScript::PROMPT, &c)?,
            (Ok(()), report(1, 1, 1, 100))
        );
        Ok(())
    }

    #[test]
    fn completion_looks_back_off_by_100_ms_each() -> Result {
        let c = FakeClock::new();
        let script = FwScript {
            ready_on_poll: 3,
            ..FwScript::PROMPT
        };
        // Look first, then sleep 100 ms * i: looks at +0, +0 and +100 ms
        // after the take seen at 100 ms.
        assert_eq!(device_reset(script, &c)?, (Ok(()), report(1, 1, 3, 200)));
        let c = FakeClock::new();
        let script = FwScript {
            ready_on_poll: 5,
            ..FwScript::PROMPT
        };
        // The fifth look, at +600 ms.
        assert_eq!(device_reset(script, &c)?, (Ok(()), report(1, 1, 5, 700)));
        let never = FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        };
        // Five looks at +0, 0, 100, 300, 600, and a last sleep of 400 ms.
        let c = FakeClock::new();
        assert_eq!(
            device_reset(never, &c)?,
            (Err(ETIMEDOUT), report(1, 1, 5, 1100))
        );
        Ok(())
    }

    #[test]
    fn slow_firmware_is_polled_every_100_ms() -> Result {
        let c = FakeClock::new();
        // Taken at the 25th step: the 25th poll, 2.5 s in.
        let script = FwScript {
            take_after: 24,
            ..FwScript::PROMPT
        };
        assert_eq!(device_reset(script, &c)?, (Ok(()), report(1, 25, 1, 2500)));
        Ok(())
    }

    #[test]
    fn a_missed_request_is_sent_again_after_30_s() -> Result {
        let c = FakeClock::new();
        let script = FwScript {
            ignore_requests: 1,
            ..FwScript::PROMPT
        };
        // The re-send at 30 s is taken at the next poll.
        assert_eq!(
            device_reset(script, &c)?,
            (Ok(()), report(2, 301, 1, 30_100))
        );
        Ok(())
    }

    #[test]
    fn a_missed_tpb_request_is_sent_again_after_10_s() -> Result {
        let c = FakeClock::new();
        let s = sim(FwScript {
            ignore_requests: 2,
            ..FwScript::PROMPT
        })?;
        let (res, rep) = reset(&*s, &V2.reset, &c, ResetKind::Tpb, 0b11);
        assert_eq!((res, rep), (Ok(()), report(3, 201, 1, 20_100)));
        let io: &dyn DeviceIo = &*s;
        assert_eq!(io.misc_ram(|mb| mb.read(RESET_TPB_MAP).map().get())?, 0b11);
        Ok(())
    }

    #[test]
    fn an_untaken_request_is_given_up_at_the_arch_deadline() -> Result {
        let never = FwScript {
            ignore_requests: u32::MAX,
            ..FwScript::PROMPT
        };
        // V2: 120 s, a send at 0 and every 30 s up to and including 120 s.
        let c = FakeClock::new();
        assert_eq!(
            device_reset(never, &c)?,
            (Err(ETIMEDOUT), report(5, 1200, 0, 120_000))
        );
        // V3: 480 s.
        let s = KBox::pin_init(SimIo::new(&V3), GFP_KERNEL)?;
        s.set_fw_script(never);
        let c = FakeClock::new();
        let (res, rep) = reset(&*s, &V3.reset, &c, ResetKind::Device, 0);
        assert_eq!((res, rep), (Err(ETIMEDOUT), report(17, 4800, 0, 480_000)));
        assert_eq!(s.resets_taken(), 0);
        Ok(())
    }

    #[test]
    fn deadbeef_is_reread_every_ms_for_a_second() -> Result {
        // 200 bad reads, 1 ms apart: waited out within the first look.
        let c = FakeClock::new();
        let script = FwScript {
            bad_reads: 200,
            ..FwScript::PROMPT
        };
        assert_eq!(device_reset(script, &c)?, (Ok(()), report(1, 1, 1, 300)));
        // A second and a half of them: the first window of 1 s ends, the
        // second one sees the status.
        let c = FakeClock::new();
        let script = FwScript {
            bad_reads: 1500,
            ..FwScript::PROMPT
        };
        assert_eq!(device_reset(script, &c)?, (Ok(()), report(1, 1, 1, 1600)));
        Ok(())
    }

    #[test]
    fn deadbeef_forever_fails_each_look_after_15_windows() -> Result {
        let c = FakeClock::new();
        let script = FwScript {
            bad_reads: u32::MAX,
            ..FwScript::PROMPT
        };
        // Each of the five looks reads for 15 windows of 1 s.
        let (res, rep) = device_reset(script, &c)?;
        assert_eq!((res, rep.sends, rep.tries), (Err(ETIMEDOUT), 1, 5));
        assert_eq!(rep.elapsed_ms, 100 + 1000 + 5 * 15 * BAD_READ_WINDOW_MS);
        Ok(())
    }

    #[test]
    fn a_stop_ends_every_wait() -> Result {
        let never_taken = FwScript {
            ignore_requests: u32::MAX,
            ..FwScript::PROMPT
        };
        let c = FakeClock::stopped_at(45_000);
        let (res, rep) = device_reset(never_taken, &c)?;
        assert_eq!((res, rep.sends), (Err(ENODEV), 2));
        assert_eq!(rep.elapsed_ms, 45_000);
        let bad = FwScript {
            bad_reads: u32::MAX,
            ..FwScript::PROMPT
        };
        let c = FakeClock::stopped_at(3_000);
        assert_eq!(device_reset(bad, &c)?.0, Err(ENODEV));
        Ok(())
    }

    #[test]
    fn all_ones_is_polled_on_while_config_space_answers() -> Result {
        // BAR0 reads all ones for the first three looks after the take;
        // the function is still there: the fourth look, at +300 ms, sees
        // the reset done.
        let s = sim(FwScript {
            all_ones: 3,
            ..FwScript::PROMPT
        })?;
        let c = FakeClock::new();
        let (res, rep) = reset(&*s, &V2.reset, &c, ResetKind::Device, 0);
        assert_eq!((res, rep), (Ok(()), report(1, 1, 4, 400)));
        Ok(())
    }

    #[test]
    fn removal_ends_the_handshake() -> Result {
        let s = sim(FwScript {
            ready_on_poll: 0,
            ..FwScript::PROMPT
        })?;
        s.unplug();
        let c = FakeClock::new();
        assert_eq!(
            reset(&*s, &V2.reset, &c, ResetKind::Device, 0).0,
            Err(ENODEV)
        );
        assert_eq!(s.resets_taken(), 0);
        Ok(())
    }

    #[test]
    fn probe_waits_out_a_booting_firmware() -> Result {
        // DEVICE_ID reads 0xdeadbeef for 2,500 reads, 1 ms apart: three
        // windows of the first firmware read, no probe retry.
        let s = sim(FwScript {
            booting: 2500,
            ..FwScript::PROMPT
        })?;
        let c = FakeClock::new();
        assert_eq!(wait_for_firmware(&*s, &c), Ok(0));
        assert_eq!(c.now_ms(), 2500);
        // A firmware that never answers: 20 reads of 15 s, 1 s apart.
        let s = sim(FwScript {
            booting: u32::MAX,
            ..FwScript::PROMPT
        })?;
        let c = FakeClock::new();
        assert_eq!(wait_for_firmware(&*s, &c), Err(ETIMEDOUT));
        assert_eq!(
            c.now_ms(),
            u64::from(PROBE_TRIES) * 15 * BAD_READ_WINDOW_MS
                + u64::from(PROBE_TRIES - 1) * u64::from(PROBE_SLEEP_MS)
        );
        Ok(())
    }

    #[test]
    fn reset_kinds_from_uapi() {
        assert_eq!(ResetKind::from_u32(1), Some(ResetKind::Device));
        assert_eq!(ResetKind::from_u32(2), Some(ResetKind::Tpb));
        assert_eq!(ResetKind::from_u32(0), None);
        assert_eq!(ResetKind::from_u32(3), None);
    }
}
