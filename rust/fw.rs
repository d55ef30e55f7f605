// SPDX-License-Identifier: GPL-2.0

//! Firmware reset: the MISC RAM mailbox request and the reset-wait poll
//! (reference `nr_wait_for_reset_completion_v2`, neuron_dhal_v2.c:188-208,
//! and its V3 twin in neuron_dhal_v3.c). Every sleep ends early with `EINTR`
//! when a signal arrives.

use crate::{
    arch::ArchInfo,
    io::DeviceIo,
    regs::{
        Mailbox, MiscRamReg, FW_IO_BAD_READ, FW_STATUS, RESET_REQUEST, RESET_TPB_MAP, RESET_TRIGGER,
    },
};
use kernel::{bindings, prelude::*};

/// Status polls before giving up (`NR_RESET_RETRY_COUNT`).
pub(crate) const RESET_RETRIES: u32 = 5;
/// Try `i` sleeps `i * RESET_BACKOFF_MS` first (the first try does not sleep).
pub(crate) const RESET_BACKOFF_MS: u32 = 100;
/// Re-reads of a status that read as `0xdeadbeef` within one try.
pub(crate) const BAD_READ_RETRIES: u32 = 3;
/// Polls of the mailbox for the firmware to take a request, 1 ms apart.
pub(crate) const MAILBOX_POLLS: u32 = 100;

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
    /// Tries made (each one status read, after its bad-read retries).
    pub(crate) tries: u32,
    /// Milliseconds of sleep requested in total.
    pub(crate) slept_ms: u32,
}

/// Sleeps `ms` milliseconds, `EINTR` as soon as a signal is pending.
fn sleep_interruptible(ms: u32) -> Result {
    // SAFETY: `msleep_interruptible` only needs a context that may sleep, which
    // every caller here is (ioctl or KUnit thread, no lock held).
    let left = unsafe { bindings::msleep_interruptible(ms) };
    if left == 0 {
        Ok(())
    } else {
        Err(EINTR)
    }
}

/// Reads FW_STATUS, re-reading a bad read up to [`BAD_READ_RETRIES`] times.
/// `None` when every read was bad.
fn read_status(mb: Mailbox<'_>) -> Result<Option<FW_STATUS>> {
    for _ in 0..=BAD_READ_RETRIES {
        let status = FW_STATUS::read(mb)?;
        if u32::from(status) != FW_IO_BAD_READ {
            return Ok(Some(status));
        }
    }
    Ok(None)
}

/// Waits for the firmware to finish a reset: up to [`RESET_RETRIES`] tries,
/// sleeping `100 ms * i` before try `i`; done when the in-progress bit is clear.
/// `ETIMEDOUT` when it never clears, `ENODEV` as soon as the device is gone,
/// `EINTR` when a signal interrupts a sleep. Not the kernel's
/// `read_poll_timeout`: that sleeps a fixed interval with `fsleep`, which no
/// signal interrupts.
pub(crate) fn wait_for_reset_completion(
    io: &dyn DeviceIo,
    info: &ArchInfo,
) -> (Result, WaitReport) {
    let mb = Mailbox::new(io, info);
    let mut report = WaitReport::default();
    for i in 0..RESET_RETRIES {
        if i > 0 {
            let ms = RESET_BACKOFF_MS * i;
            report.slept_ms += ms;
            if let Err(e) = sleep_interruptible(ms) {
                return (Err(e), report);
            }
        }
        if !mb.is_present() {
            return (Err(ENODEV), report);
        }
        report.tries += 1;
        match read_status(mb) {
            Ok(Some(st)) if !st.reset_in_progress() => return (Ok(()), report),
            Ok(_) => {}
            Err(e) => return (Err(e), report),
        }
    }
    (Err(ETIMEDOUT), report)
}

/// Asks the firmware for a reset through the MISC RAM mailbox and waits for
/// it: the request is taken when RESET_REQUEST reads 0 again (bounded by
/// [`MAILBOX_POLLS`] ms), then [`wait_for_reset_completion`] runs. Callers
/// serialize resets of one device.
pub(crate) fn reset(
    io: &dyn DeviceIo,
    info: &ArchInfo,
    kind: ResetKind,
    nc_map: u32,
) -> Result<WaitReport> {
    let mb = Mailbox::new(io, info);
    if kind == ResetKind::Tpb {
        RESET_TPB_MAP::zeroed().with_map(nc_map).write(mb)?;
    }
    RESET_REQUEST::zeroed().with_kind(kind as u32).write(mb)?;
    RESET_TRIGGER::zeroed().with_ring(true).write(mb)?;
    let mut taken = false;
    for _ in 0..MAILBOX_POLLS {
        if !mb.is_present() {
            return Err(ENODEV);
        }
        if RESET_REQUEST::read(mb)?.kind().get() == 0 {
            taken = true;
            break;
        }
        sleep_interruptible(1)?;
    }
    if !taken {
        return Err(ETIMEDOUT);
    }
    let (res, report) = wait_for_reset_completion(io, info);
    res.map(|()| report)
}

#[kunit_tests(neuron_hbm_fw)]
mod tests {
    use super::*;
    use crate::{
        arch::{V2, V3},
        sim::{FwScript, SimIo},
    };

    fn sim(script: FwScript) -> Result<Pin<KBox<SimIo>>> {
        sim_of(&V2, script)
    }

    fn sim_of(info: &'static ArchInfo, script: FwScript) -> Result<Pin<KBox<SimIo>>> {
        let s = KBox::pin_init(SimIo::new(info), GFP_KERNEL)?;
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

    /// Starts a reset in a firmware following `script` and waits for it.
    fn wait(script: FwScript) -> Result<(Result, WaitReport)> {
        let s = sim(script)?;
        s.begin_reset();
        Ok(wait_for_reset_completion(&*s, &V2))
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
        assert_eq!(wait(script(0, 0))?, (Err(ETIMEDOUT), report(5, 1000)));
        Ok(())
    }

    #[test]
    fn bad_reads_are_reread() -> Result {
        assert_eq!(wait(script(1, 2))?, (Ok(()), report(1, 0)));
        // More bad reads than one try re-reads: the next try sees the status.
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
        let (res, rep) = wait_for_reset_completion(&*s, &V2);
        assert_eq!(res, Err(ENODEV));
        assert_eq!(rep.tries, 0);
        Ok(())
    }

    #[test]
    fn mailbox_reset_device_and_tpb() -> Result {
        let s = sim(script(2, 0))?;
        assert_eq!(reset(&*s, &V2, ResetKind::Device, 0), Ok(report(2, 100)));
        assert_eq!(
            reset(&*s, &V2, ResetKind::Tpb, 0b11).map(|r| r.tries),
            Ok(2)
        );
        let map = RESET_TPB_MAP::read(Mailbox::new(&*s, &V2))?;
        assert_eq!(map.map().get(), 0b11);
        assert_eq!(s.resets_taken(), 2);
        Ok(())
    }

    #[test]
    fn v3_mailbox_is_at_its_own_misc_ram() -> Result {
        let s = sim_of(&V3, script(1, 0))?;
        assert_eq!(reset(&*s, &V3, ResetKind::Tpb, 0x81), Ok(report(1, 0)));
        assert_eq!(s.read32(0x6c8_41d8), Ok(0x81));
        // V2's mailbox offset is plain BAR0 memory on a V3 device.
        assert_eq!(RESET_TPB_MAP::read(Mailbox::new(&*s, &V2))?.map().get(), 0);
        assert_eq!(s.resets_taken(), 1);
        // Requests rung at V2's offsets reach no firmware.
        assert_eq!(reset(&*s, &V2, ResetKind::Device, 0), Err(ETIMEDOUT));
        assert_eq!(s.resets_taken(), 1);
        Ok(())
    }

    #[test]
    fn mailbox_not_taken_times_out() -> Result {
        let s = sim(FwScript {
            takes_requests: false,
            ..FwScript::PROMPT
        })?;
        assert_eq!(reset(&*s, &V2, ResetKind::Device, 0), Err(ETIMEDOUT));
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
