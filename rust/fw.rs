// SPDX-License-Identifier: GPL-2.0

//! Firmware reset: the MISC RAM mailbox request and the reset-wait poll
//! (reference `nr_wait_for_reset_completion_v2`, neuron_dhal_v2.c:188-208,
//! and its V3 twin in neuron_dhal_v3.c), both through the kernel's
//! [`read_poll_timeout`]. Each poll step first checks for a pending signal
//! and ends the wait with `EINTR` (uapi.rst) when one is, so no wait outlasts
//! a signal by more than one step: `read_poll_timeout` sleeps with `fsleep`,
//! which no signal interrupts.

use crate::{
    io::DeviceIo,
    regs::{FW_IO_BAD_READ, FW_STATUS, GONE, RESET_REQUEST, RESET_TPB_MAP, RESET_TRIGGER},
};
use kernel::{
    io::{poll::read_poll_timeout, Io},
    prelude::*,
    time::Delta,
};

/// Looks at FW_STATUS before giving up (`NR_RESET_RETRY_COUNT`).
pub(crate) const RESET_RETRIES: u32 = 5;
/// Milliseconds of one step of the reset wait: look `i` comes `i` steps after
/// look `i - 1` (the reference's `100 ms * i` backoff, one second in all),
/// and a signal is noticed within one step.
pub(crate) const RESET_STEP_MS: u32 = 100;
/// Milliseconds after which the reset wait gives up whatever its count of
/// looks: a backstop that only sleeps overrunning tenfold would reach.
const RESET_BACKSTOP_MS: u32 = 10_000;
/// Re-reads of a status that read as `0xdeadbeef` within one look.
pub(crate) const BAD_READ_RETRIES: u32 = 3;
/// Milliseconds between two polls of the mailbox for the firmware to take a request.
const MAILBOX_POLL_MS: u32 = 1;
/// Milliseconds the firmware has to take a request.
const MAILBOX_TIMEOUT_MS: u32 = 100;

/// Kind of reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ResetKind {
    /// The whole device.
    Device = 1,
    /// The TPBs (NeuronCores) of a map.
    Tpb = 2,
}

impl ResetKind {
    /// The kind numbered `n` in the UAPI.
    pub(crate) fn from_u32(n: u32) -> Option<Self> {
        match n {
            1 => Some(Self::Device),
            2 => Some(Self::Tpb),
            _ => None,
        }
    }
}

/// What a reset wait did, reported on success and failure alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitReport {
    /// Looks at FW_STATUS made (each one read, after its bad-read retries).
    pub(crate) tries: u32,
    /// Milliseconds of sleep requested in total.
    pub(crate) slept_ms: u32,
}

/// Whether the calling task has a signal pending: what ends a wait early.
pub(crate) fn signal_pending() -> bool {
    kernel::current!().signal_pending()
}

fn millis(ms: u32) -> Delta {
    Delta::from_millis(i64::from(ms))
}

/// `ENODEV` for a register that reads all ones: the device is gone.
fn present(value: u32) -> Result<u32> {
    if value == GONE {
        Err(ENODEV)
    } else {
        Ok(value)
    }
}

/// Reads FW_STATUS, re-reading a bad read up to [`BAD_READ_RETRIES`] times.
/// `None` when every read was bad.
fn read_status(io: &dyn DeviceIo) -> Result<Option<FW_STATUS>> {
    for _ in 0..=BAD_READ_RETRIES {
        let status = present(io.misc_ram(|mb| u32::from(mb.read(FW_STATUS)))?)?;
        if status != FW_IO_BAD_READ {
            return Ok(Some(FW_STATUS::from(status)));
        }
    }
    Ok(None)
}

/// Waits for the firmware to finish a reset: up to [`RESET_RETRIES`] looks
/// at FW_STATUS, look `i` (from 0) after `i` more steps of
/// [`RESET_STEP_MS`] (0, 100, 300, 600, 1000 ms); done when the in-progress
/// bit is clear, `ETIMEDOUT` when the last look still sees it set. `ENODEV`
/// as soon as the device reads as gone, `EINTR` when `signalled` says so at
/// any step.
pub(crate) fn wait_for_reset_completion(
    io: &dyn DeviceIo,
    signalled: &dyn Fn() -> bool,
) -> (Result, WaitReport) {
    let mut report = WaitReport::default();
    let mut step = 0u32;
    let mut next_look = 0u32;
    let res = read_poll_timeout(
        || {
            report.slept_ms = step * RESET_STEP_MS;
            step += 1;
            if signalled() {
                return Err(EINTR);
            }
            if step - 1 != next_look {
                return Ok(false);
            }
            report.tries += 1;
            next_look += report.tries;
            match read_status(io)? {
                Some(st) if !st.reset_in_progress() => Ok(true),
                _ if report.tries == RESET_RETRIES => Err(ETIMEDOUT),
                _ => Ok(false),
            }
        },
        |&done| done,
        millis(RESET_STEP_MS),
        millis(RESET_BACKSTOP_MS),
    );
    (res.map(|_| ()), report)
}

/// Asks the firmware for a reset through the MISC RAM mailbox and waits for
/// it: the request is taken when RESET_REQUEST reads 0 again (polled every
/// [`MAILBOX_POLL_MS`] for at most [`MAILBOX_TIMEOUT_MS`]), then
/// [`wait_for_reset_completion`] runs. Callers serialize resets of one device.
pub(crate) fn reset(
    io: &dyn DeviceIo,
    kind: ResetKind,
    nc_map: u32,
    signalled: &dyn Fn() -> bool,
) -> Result<WaitReport> {
    io.misc_ram(|mb| {
        if kind == ResetKind::Tpb {
            mb.write_reg(RESET_TPB_MAP::zeroed().with_map(nc_map));
        }
        mb.write_reg(RESET_REQUEST::zeroed().with_kind(kind as u32));
        mb.write_reg(RESET_TRIGGER::zeroed().with_ring(true));
    })?;
    read_poll_timeout(
        || {
            if signalled() {
                return Err(EINTR);
            }
            present(io.misc_ram(|mb| u32::from(mb.read(RESET_REQUEST)))?)
        },
        |request| *request == 0,
        millis(MAILBOX_POLL_MS),
        millis(MAILBOX_TIMEOUT_MS),
    )?;
    let (res, report) = wait_for_reset_completion(io, signalled);
    res.map(|()| report)
}

#[kunit_tests(neuron_hbm_fw)]
mod tests {
    use super::*;
    use crate::{
        arch::V2,
        sim::{FwScript, SimIo},
    };
    use core::cell::Cell;

    fn sim(script: FwScript) -> Result<Pin<KBox<SimIo>>> {
        let s = KBox::pin_init(SimIo::new(&V2), GFP_KERNEL)?;
        s.set_fw_script(script);
        Ok(s)
    }

    fn script(ready_on_poll: u32, bad_reads: u32) -> FwScript {
        FwScript {
            ready_on_poll,
            bad_reads,
            takes_requests: true,
        }
    }

    /// No signal ever arrives.
    fn never() -> bool {
        false
    }

    /// Starts a reset in a firmware following `script` and waits for it.
    fn wait(script: FwScript) -> Result<(Result, WaitReport)> {
        let s = sim(script)?;
        s.begin_reset();
        Ok(wait_for_reset_completion(&*s, &never))
    }

    fn report(tries: u32, slept_ms: u32) -> WaitReport {
        WaitReport { tries, slept_ms }
    }

    #[test]
    fn ready_at_once_does_not_sleep() -> Result {
        assert_eq!(wait(script(1, 0))?, (Ok(()), report(1, 0)));
        Ok(())
    }

    #[test]
    fn ready_after_three_polls() -> Result {
        assert_eq!(wait(script(3, 0))?, (Ok(()), report(3, 300)));
        Ok(())
    }

    #[test]
    fn never_ready_times_out_after_one_second() -> Result {
        assert_eq!(
            wait(script(0, 0))?,
            (Err(ETIMEDOUT), report(RESET_RETRIES, 1000))
        );
        Ok(())
    }

    #[test]
    fn a_signal_ends_the_wait_between_looks() -> Result {
        let s = sim(script(0, 0))?;
        s.begin_reset();
        let checks = Cell::new(0u32);
        let third_check = || {
            checks.set(checks.get() + 1);
            checks.get() == 3
        };
        // Looks at steps 0 and 1; the signal is seen at step 2, between looks.
        assert_eq!(
            wait_for_reset_completion(&*s, &third_check),
            (Err(EINTR), report(2, 200))
        );
        Ok(())
    }

    #[test]
    fn a_signal_ends_the_mailbox_poll() -> Result {
        let s = sim(FwScript {
            takes_requests: false,
            ..FwScript::PROMPT
        })?;
        let checks = Cell::new(0u32);
        let fifth_check = || {
            checks.set(checks.get() + 1);
            checks.get() == 5
        };
        assert_eq!(reset(&*s, ResetKind::Device, 0, &fifth_check), Err(EINTR));
        assert_eq!(checks.get(), 5);
        assert_eq!(s.resets_taken(), 0);
        Ok(())
    }

    #[test]
    fn bad_reads_are_reread() -> Result {
        assert_eq!(wait(script(1, 2))?, (Ok(()), report(1, 0)));
        // More bad reads than one look re-reads: the next look sees the status.
        assert_eq!(
            wait(script(1, BAD_READ_RETRIES + 1))?,
            (Ok(()), report(2, 100))
        );
        Ok(())
    }

    #[test]
    fn removal_stops_the_wait() -> Result {
        let s = sim(script(0, 0))?;
        s.begin_reset();
        s.unplug();
        // The first look reads all ones: the device is gone.
        assert_eq!(
            wait_for_reset_completion(&*s, &never),
            (Err(ENODEV), report(1, 0))
        );
        Ok(())
    }

    #[test]
    fn removal_stops_the_mailbox_poll() -> Result {
        let s = sim(FwScript::PROMPT)?;
        s.unplug();
        assert_eq!(reset(&*s, ResetKind::Device, 0, &never), Err(ENODEV));
        assert_eq!(s.resets_taken(), 0);
        Ok(())
    }

    #[test]
    fn mailbox_reset_device_and_tpb() -> Result {
        let s = sim(script(2, 0))?;
        assert_eq!(reset(&*s, ResetKind::Device, 0, &never), Ok(report(2, 100)));
        assert_eq!(
            reset(&*s, ResetKind::Tpb, 0b11, &never).map(|r| r.tries),
            Ok(2)
        );
        let io: &dyn DeviceIo = &*s;
        let (map, request, trigger) = io.misc_ram(|mb| {
            (
                mb.read(RESET_TPB_MAP).map().get(),
                mb.read(RESET_REQUEST).kind().get(),
                mb.read(RESET_TRIGGER).ring(),
            )
        })?;
        assert_eq!(map, 0b11);
        // The firmware took the request and cleared the doorbell.
        assert_eq!((request, trigger), (0, false));
        assert_eq!(s.resets_taken(), 2);
        Ok(())
    }

    #[test]
    fn mailbox_not_taken_times_out() -> Result {
        let s = sim(FwScript {
            takes_requests: false,
            ..FwScript::PROMPT
        })?;
        assert_eq!(reset(&*s, ResetKind::Device, 0, &never), Err(ETIMEDOUT));
        assert_eq!(s.resets_taken(), 0);
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
