//! Mappings against everything that takes them away: `mmap` (populated in
//! the kernel), `munmap` and accesses from other processes racing unload,
//! device reset and close.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::Mapping;

use crate::fixtures::{device_index, one_buffer, open_device, Usage, KIB};
use crate::ktap::{ensure, ensure_eq, fail, Ctx, Fail, Notes, TestResult};
use crate::rng::Rng;
use crate::sys::map_and_unmap;

/// Rounds of the race.
const ROUNDS: u64 = 36;
/// Bytes of each round's variable.
const VAR: u64 = 64 * KIB;

/// What ends a round's plan.
#[derive(Clone, Copy, Debug)]
enum Ending {
    Unload,
    Reset,
    Close,
}

/// A child that writes and reads through `m` until `ms` milliseconds have
/// passed: its pid.
fn toucher(m: &mut Mapping, ms: u64) -> Result<libc::pid_t, Fail> {
    // SAFETY: the child only touches the mapping and leaves with _exit; the
    // parent's other thread only makes system calls.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).ctx("fork");
    }
    if pid == 0 {
        let t = Instant::now();
        let mut b = [0u8; 64];
        while t.elapsed() < Duration::from_millis(ms) {
            let _ = m.write(128, &[7; 64]);
            let _ = m.read(4096, &mut b);
        }
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    Ok(pid)
}

/// How the toucher ended: `Ok` for a normal exit or `SIGBUS` (its mapping
/// was taken away), anything else fails.
fn reap(pid: libc::pid_t) -> Result<bool, Fail> {
    let mut status = 0;
    // SAFETY: `pid` is our child; blocks until it is gone.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(io::Error::last_os_error()).ctx("waitpid");
    }
    if libc::WIFSIGNALED(status) {
        ensure_eq("signal of a toucher", libc::WTERMSIG(status), libc::SIGBUS)?;
        return Ok(true);
    }
    ensure_eq("exit code of a toucher", libc::WEXITSTATUS(status), 0)?;
    Ok(false)
}

/// One round: a plan mapped by a toucher process and, over and over, by a
/// thread (populated mmap and munmap), ended by `ending` at a random moment;
/// whether the toucher got `SIGBUS`.
fn round(rng: &mut Rng, ending: Ending) -> Result<bool, Fail> {
    let d = open_device(device_index())?;
    let p = d
        .plan_load(&one_buffer(1, VAR).to_blob().ctx("build")?, CHANNEL_ANY)
        .ctx("PLAN_LOAD")?;
    let mut m = d.map(p.plan_id, 1).ctx("map")?;
    let pid = toucher(&mut m, 150)?;
    let (offset, len) = d.map_offset(p.plan_id, 1).ctx("MAP_OFFSET")?;
    let wait = Duration::from_millis(rng.below(60));
    let stop = AtomicBool::new(false);
    let mapped = std::thread::scope(|s| -> Result<(), Fail> {
        let mapper = s.spawn(|| -> Result<(), String> {
            while !stop.load(Relaxed) {
                let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
                if let Err(e) = map_and_unmap(d.as_raw_fd(), offset, len, flags) {
                    // After the unload: no such offset; after a reset: EIO.
                    if ![libc::EINVAL, libc::EIO].contains(&e.raw_os_error().unwrap_or(0)) {
                        return Err(format!("mmap: {e}"));
                    }
                }
            }
            Ok(())
        });
        std::thread::sleep(wait);
        let ended = match ending {
            Ending::Unload => d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD"),
            Ending::Reset => d
                .reset(RESET_DEVICE, 0)
                .ctx("RESET")
                .and_then(|st| ensure_eq("RESET status", st, 0)),
            // The toucher holds the file (its fd and mapping): closing ours
            // leaves the last reference to the child's exit.
            Ending::Close => Ok(()),
        };
        stop.store(true, Relaxed);
        let joined = mapper
            .join()
            .map_err(|_| Fail::Fail("the mapper panicked".into()))?;
        ended?;
        joined.map_err(Fail::Fail)
    });
    drop(m);
    drop(d);
    let bus = reap(pid)?;
    mapped?;
    Ok(bus)
}

/// Mappings raced against what takes them away, 36 rounds: each round a
/// child process writes and reads through a mapping while a thread maps
/// (populated) and unmaps the variable over and over, and the plan is
/// unloaded, the device reset, or the file closed at a random moment. A
/// toucher may only end normally or by `SIGBUS`; every mmap error is a
/// documented one; and afterwards the device holds exactly what it did.
pub fn mappings_race_unload_reset_and_close(notes: &mut Notes) -> TestResult {
    let before = Usage::of(&open_device(device_index())?).ctx("MEM_STATS")?;
    let mut rng = Rng::for_case(0x6d6d_6170, 0);
    let mut sigbus = 0;
    for i in 0..ROUNDS {
        let ending = [Ending::Unload, Ending::Reset, Ending::Close][(i % 3) as usize];
        if round(&mut rng, ending)? {
            sigbus += 1;
        }
    }
    // The last file's release may still be freeing: look until it is done.
    let t = Instant::now();
    loop {
        let after = Usage::of(&open_device(device_index())?).ctx("MEM_STATS")?;
        if after.device() == before.device() {
            break;
        }
        if t.elapsed() > Duration::from_secs(5) {
            return fail(format!(
                "device usage {:?} after the rounds, {:?} before",
                after.device(),
                before.device()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ensure(sigbus > 0, || {
        "no toucher ever got SIGBUS: nothing was taken away".into()
    })?;
    notes.add(format!(
        "{ROUNDS} rounds, {sigbus} touchers ended by SIGBUS"
    ));
    Ok(())
}
