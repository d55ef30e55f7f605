//! Resets merged and asynchronous, against the model's firmware: the
//! requests made while a handshake runs share the next one, RESET_START
//! returns at once and RESET_WAIT (from any thread) gives the outcome, and
//! a reset started by a process killed before it waited runs to its end.

use std::time::{Duration, Instant};

use nhbm::uapi::*;

use super::function::*;
use super::reset::reset_runs_once_to_a_clean_device;
use super::{function, kill_and_reap, wait_until, with_firmware};
use crate::fixtures::dev;
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Ctx, TestResult};

/// Forks a child that opens the device, resets the cores of `map` (as
/// root) and leaves with 0 when that answered 0.
fn fork_tpb_resetter(map: u32) -> Result<libc::pid_t, crate::ktap::Fail> {
    // SAFETY: the case runs on the suite's only thread; the child only
    // opens the device, calls one ioctl and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return fail(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let ok = dev().is_ok_and(|d| d.reset(RESET_TPB, map).is_ok_and(|s| s == 0));
        // SAFETY: _exit ends the child without running the parent's
        // destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    Ok(pid)
}

/// Whether our child `pid` exited with 0 (waits for it).
fn exited_cleanly(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: `pid` is our own child; `status` is a valid out pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Eight processes ask for TPB resets while a handshake (its take 1 s
/// away) runs: the firmware takes two resets for the nine requests, the
/// second of every core they named, and each process is told 0.
pub fn resets_asked_meanwhile_share_one_handshake() -> TestResult {
    let cores = if function()?.arch() == Some("v2") {
        2
    } else {
        8
    };
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 1000),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            ensure_eq(
                "RESET_START",
                d.reset_start(RESET_TPB, 1).ctx("RESET_START")?,
                0,
            )?;
            let mut pids = Vec::new();
            for i in 0..8 {
                pids.push(fork_tpb_resetter(1 << (i % cores))?);
            }
            let failed = pids.into_iter().filter(|&p| !exited_cleanly(p)).count();
            d.reset_wait().ctx("RESET_WAIT")?;
            ensure_eq("processes whose reset failed", failed, 0)?;
            ensure_eq("resets the firmware took", c.read(RESETS_TAKEN) - taken, 2)?;
            ensure_eq(
                "cores of the second reset",
                c.read(TPB_MAP_TAKEN) & 0xff,
                (1u32 << cores.min(8)) - 1,
            )
        },
    )
}

/// RESET_START returns at once while the take is 1.5 s away, a second one
/// meanwhile is EBUSY, and RESET_WAIT from another thread returns the
/// reset's type and map after the take; waited again, the same at once.
pub fn a_started_reset_is_waited_for_from_another_thread() -> TestResult {
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 1500),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            let t = Instant::now();
            ensure_eq(
                "RESET_START",
                d.reset_start(RESET_TPB, 1).ctx("RESET_START")?,
                0,
            )?;
            let started_in = t.elapsed();
            ensure(started_in < Duration::from_millis(500), || {
                format!("RESET_START took {started_in:?}")
            })?;
            ensure_errno(
                "a second RESET_START",
                d.reset_start(RESET_TPB, 1),
                libc::EBUSY,
            )?;
            let waited = std::thread::scope(|s| s.spawn(|| d.reset_wait()).join());
            let got = waited
                .map_err(|_| crate::ktap::Fail::Fail("the waiting thread panicked".into()))?
                .ctx("RESET_WAIT")?;
            ensure_eq("RESET_WAIT's reset", got, (RESET_TPB, 1))?;
            ensure(t.elapsed() >= Duration::from_millis(1500), || {
                format!(
                    "RESET_WAIT returned after {:?}, the take is at 1.5 s",
                    t.elapsed()
                )
            })?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            let again = Instant::now();
            ensure_eq(
                "RESET_WAIT again",
                d.reset_wait().ctx("RESET_WAIT")?,
                (RESET_TPB, 1),
            )?;
            ensure(again.elapsed() < Duration::from_millis(100), || {
                "RESET_WAIT of a reset that ended waited".into()
            })
        },
    )
}

/// A process that started a device reset (its take 1.5 s away) and is
/// killed before waiting for it: the reset runs to its end, once, and the
/// next tenant loads and writes on a clean device.
pub fn a_started_reset_outlives_its_killed_process() -> TestResult {
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 1500),
        |_, c| {
            let (taken, rung) = (c.read(RESETS_TAKEN), c.read(DOORBELLS));
            // SAFETY: the case runs on the suite's only thread; the child
            // only starts a reset and sleeps until it is killed.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return fail(format!("fork: {}", std::io::Error::last_os_error()));
            }
            if pid == 0 {
                let started = dev().is_ok_and(|d| {
                    let ok = d.reset_start(RESET_DEVICE, 0).is_ok();
                    std::mem::forget(d);
                    ok
                });
                loop {
                    if !started {
                        // SAFETY: leave at once, without the parent's destructors.
                        unsafe { libc::_exit(1) };
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            let asked = wait_until(Duration::from_secs(5), || c.read(DOORBELLS) > rung);
            let (status, _) = kill_and_reap(pid);
            ensure(asked, || {
                "the child's reset never reached the mailbox".into()
            })?;
            ensure(libc::WIFSIGNALED(status), || {
                format!("the child ended before it was killed (status {status:#x})")
            })?;
            reset_runs_once_to_a_clean_device(c, taken)
        },
    )
}
