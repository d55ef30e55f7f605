//! The reset as the reference's reset thread runs it, against the model's
//! firmware: no signal but a fatal one ends a caller's wait, a reset runs
//! to its end after its caller is killed, a TPB reset carries each core's
//! engines, every bind resets the device, and all ones read from a
//! function that is still there is waited out.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use nhbm::uapi::*;

use super::function::*;
use super::{control, function, kill_and_reap, rebind, timed_reset, wait_until, with_firmware};
use crate::fixtures::{dev, one_buffer, KIB};
use crate::ktap::{ensure, ensure_eq, fail, Ctx, TestResult};

/// SIGALRMs delivered to this process.
static ALARMS: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_alarm(_: libc::c_int) {
    ALARMS.fetch_add(1, SeqCst);
}

/// Arms (`period` > 0) or disarms the process's real-time interval timer.
fn interval_timer(period: Duration) {
    let tv = libc::timeval {
        tv_sec: period.as_secs() as libc::time_t,
        tv_usec: period.subsec_micros() as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: `it` is a valid itimerval; no old value is asked for.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
}

/// Runs `f` while SIGALRM fires every `period` with a handler installed
/// without SA_RESTART (so a wait the kernel lets signals end ends with
/// EINTR); returns what `f` returned and the signals delivered meanwhile.
fn under_interval_timer<T>(period: Duration, f: impl FnOnce() -> T) -> (T, u32) {
    // SAFETY: a zeroed sigaction with a handler and no flags is valid; the
    // handler only bumps an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = count_alarm as extern "C" fn(libc::c_int) as usize;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
    let before = ALARMS.load(SeqCst);
    interval_timer(period);
    let r = f();
    interval_timer(Duration::ZERO);
    (r, ALARMS.load(SeqCst) - before)
}

/// A runtime with a 1 ms interval timer (SIGALRM, as profilers and
/// Python's signal machinery arm) gets through a device reset whose take
/// comes after 3 s: the timer fires from the first millisecond on, RESET
/// returns 0 after the take (the signal is delivered then), and the
/// firmware took one reset.
pub fn reset_survives_an_interval_timer() -> TestResult {
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 3000),
        |d, c| {
            let taken = c.read(RESETS_TAKEN);
            let ((r, took), alarms) =
                under_interval_timer(Duration::from_millis(1), || timed_reset(d, RESET_DEVICE, 0));
            ensure_eq("RESET under the timer", r.ctx("RESET")?, 0)?;
            ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
            ensure(took >= Duration::from_secs(3), || {
                format!("RESET returned after {took:?}, the take comes at 3 s")
            })?;
            // A pending SIGALRM is one signal however often the timer
            // fires: it is delivered when RESET returns.
            ensure(alarms >= 1, || {
                "the timer never fired during the reset".into()
            })
        },
    )
}

/// Forks a child that opens the device and resets it; returns its pid.
fn fork_resetter() -> Result<libc::pid_t, crate::ktap::Fail> {
    // SAFETY: the case runs on the suite's only thread; the child only
    // opens the device, calls one ioctl and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return fail(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let ok = dev().is_ok_and(|d| d.reset(RESET_DEVICE, 0).is_ok());
        // SAFETY: _exit ends the child without running the parent's
        // destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    Ok(pid)
}

/// A resetter killed (SIGKILL) while its device reset waits for a take 2 s
/// away dies at once; the reset runs to its end without it, once, and the
/// next tenant finds the device reset and usable: its load succeeds (no
/// "reset state unknown") and no second reset is needed or made.
pub fn killed_resetter_leaves_a_clean_device() -> TestResult {
    with_firmware(
        |c| c.write(TAKE_DELAY_MS, 2000),
        |_, c| {
            let (taken, rung) = (c.read(RESETS_TAKEN), c.read(DOORBELLS));
            let pid = fork_resetter()?;
            let asked = wait_until(Duration::from_secs(5), || c.read(DOORBELLS) > rung);
            std::thread::sleep(Duration::from_millis(200));
            let (status, died_in) = kill_and_reap(pid);
            ensure(asked, || {
                "the child's request never reached the mailbox".into()
            })?;
            ensure(libc::WIFSIGNALED(status), || {
                format!("the child was not killed (status {status:#x})")
            })?;
            ensure(died_in < Duration::from_secs(1), || {
                format!("the killed resetter took {died_in:?} to die")
            })?;
            ensure_eq(
                "resets taken when the child died",
                c.read(RESETS_TAKEN),
                taken,
            )?;
            reset_runs_once_to_a_clean_device(c, taken)
        },
    )
}

/// After a reset whose requester was killed: the reset (the firmware's
/// take `taken + 1`) runs to its end without it, once, and the next tenant
/// loads and writes a plan on the device, needing no second reset.
pub(super) fn reset_runs_once_to_a_clean_device(c: &Control, taken: u32) -> TestResult {
    let done = wait_until(Duration::from_secs(10), || {
        c.read(RESETS_TAKEN) == taken + 1 && c.read(RESETTING) == 0
    });
    ensure(done, || "the reset did not run to its end".into())?;
    let blob = one_buffer(1, 4 * KIB).to_blob().ctx("build")?;
    let d = dev()?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD after the reset")?;
    d.mem_write(p.plan_id, 1, 0, b"clean").ctx("MEM_WRITE")?;
    ensure_eq("resets taken", c.read(RESETS_TAKEN), taken + 1)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// The reference's TPB reset map of `cores` on `arch`, written from
/// `nr_get_tpb_reset_map`: on V2 each core's bit and its three top SPs
/// from bit 8 (v2/neuron_dhal_v2.c); on V3 and V4 the core's bit, its SDMA
/// group at +8 and TOP_SP group at +16 (v3/neuron_dhal_v3.c).
fn reference_tpb_map(arch: &str, cores: u32) -> u32 {
    (0..32)
        .filter(|i| cores >> i & 1 == 1)
        .map(|i| match arch {
            "v2" => 1 << i | 0b111 << (8 + 3 * i),
            _ => 1 << i | 1 << (i + 8) | 1 << (i + 16),
        })
        .fold(0, |m, b| m | b)
}

/// A TPB reset hands the firmware the reference's map for the cores asked
/// for, engines included: the model takes it with no map error and shows
/// the bits it reset, for the first core, the last and all of them.
pub fn tpb_reset_map_is_the_references() -> TestResult {
    let arch = function()?.arch().unwrap_or("v2");
    let cores = if arch == "v2" { 2 } else { 8 };
    with_firmware(
        |_| {},
        |d, c| {
            for map in [1, 1 << (cores - 1), (1 << cores) - 1] {
                let errors = c.read(TPB_MAP_ERRORS);
                let r = d.reset(RESET_TPB, map).ctx("RESET TPB")?;
                ensure_eq(&format!("RESET TPB {map:#x}"), r, 0)?;
                ensure_eq(
                    &format!("map the firmware took for cores {map:#x}"),
                    c.read(TPB_MAP_TAKEN),
                    reference_tpb_map(arch, map),
                )?;
                ensure_eq("TPB map errors", c.read(TPB_MAP_ERRORS), errors)?;
            }
            Ok(())
        },
    )
}

/// Binding a function resets it, as the reference's probe does: with the
/// take 1.5 s after the doorbell, the model takes exactly one reset per
/// bind, and the first load after the bind returns only once it has
/// ended (never before the take).
pub fn probe_resets_the_device() -> TestResult {
    let f = function()?;
    let c = control()?;
    let delay = c.read(RESET_DELAY_MS);
    c.write(TAKE_DELAY_MS, 1500);
    let taken = c.read(RESETS_TAKEN);
    let bound = rebind(&f);
    let t = Instant::now();
    let load = dev().and_then(|d| {
        d.plan_load(&one_buffer(1, 4 * KIB).to_blob().ctx("build")?, 0)
            .ctx("PLAN_LOAD after the bind")
            .map(|_| ())
    });
    let (seen, resetting, took) = (c.read(RESETS_TAKEN), c.read(RESETTING), t.elapsed());
    c.restore(delay);
    bound?;
    load?;
    ensure_eq("resets taken by the bind", seen, taken + 1)?;
    ensure_eq("model resetting when the load returned", resetting, 0)?;
    ensure(took >= Duration::from_millis(1000), || {
        format!("the load returned {took:?} after the bind, the take comes at 1.5 s")
    })
}

/// The mailbox reads all ones for 500 ms from the take while the function
/// stays present (configuration space answers): RESET polls through it and
/// returns 0, and the device stays usable afterwards.
pub fn transient_all_ones_is_waited_out() -> TestResult {
    let blob = one_buffer(1, 4 * KIB).to_blob().ctx("build")?;
    with_firmware(
        |c| {
            c.write(ALL_ONES_MS, 500);
            c.write(RESET_DELAY_MS, 300);
        },
        |d, c| {
            let (r, took) = timed_reset(d, RESET_DEVICE, 0);
            ensure_eq("RESET through all ones", r.ctx("RESET")?, 0)?;
            ensure(c.read(ONES_READS) >= 2, || {
                format!("{} mailbox reads saw all ones", c.read(ONES_READS))
            })?;
            ensure(took >= Duration::from_millis(500), || {
                format!("RESET returned after {took:?}, inside the all-ones window")
            })?;
            c.write(ALL_ONES_MS, 0);
            let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD after the reset")?;
            d.mem_write(p.plan_id, 1, 0, b"still here")
                .ctx("MEM_WRITE")?;
            let mut b = [0u8; 10];
            d.mem_read(p.plan_id, 1, 0, &mut b).ctx("MEM_READ")?;
            ensure_eq("bytes read back", &b, b"still here")?;
            d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
        },
    )
}

/// NeuronCores owned per open file, on this function's arch: two
/// unprivileged tenants each reset their own core beside each other and
/// root, and no one resets the other's (the stress suite's case).
pub fn owners_reset_their_own_cores() -> TestResult {
    crate::stress::owners_reset_their_own_cores(&mut crate::ktap::Notes::default())
}
