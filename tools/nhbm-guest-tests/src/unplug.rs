//! `nhbm-unplug-test` (suite `nhbm_unplug`): removal of a device with a file
//! open, a plan loaded and threads inside ioctls.
//!
//! A simulated device is removed by writing `1` to its debugfs `unplug`; an
//! emulated PCI function (`NHBM_BACKEND=pci`) by the host: the test prints
//! `NHBM-HOST-REQUEST device_del nhbm<N>` on the console, the QEMU harness
//! sends QEMU's `device_del` over QMP, and the kernel's PCI hotplug unbinds
//! the driver. Neither can be undone until the module is reloaded, so this
//! runs on `/dev/neuron_hbm1` only, and only as the last test program of a
//! run: when started from a directory holding other `*-test` programs that
//! sort after it, it skips.
//!
//!   nhbm-unplug-test [-d N] [--force]

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use clap::Parser;
use nhbm::cli::DeviceArg;
use nhbm::uapi::*;
use nhbm::{Device, Record};

use crate::debugfs::DevDebugFs;
use crate::fixtures::{every_local_kind, one_buffer, pattern, Usage, KIB};
use crate::ktap::{self, Ctx, Fail, Ktap, Outcome};
use crate::sys::errno_of;

/// The device that may be removed.
const DEFAULT_DEVICE: u32 = 1;

/// Test programs in `dir` (executables named `*-test`) that sort after
/// `me`: they would find the device gone.
fn later_tests(dir: &Path, me: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-test") && n.as_bytes() > me.as_bytes())
        .collect();
    v.sort();
    v
}

/// Whether the devices are emulated PCI functions the host removes.
fn host_removal() -> bool {
    std::env::var("NHBM_BACKEND").as_deref() == Ok("pci")
}

/// Removes `device`: through debugfs for a simulated device, through the
/// host's `device_del` for a PCI function (returns once its node is gone).
fn remove(dbg: &DevDebugFs, device: u32) -> Result<(), String> {
    if !host_removal() {
        return dbg
            .write("unplug", "1\n")
            .map_err(|e| format!("writing 1 to debugfs unplug: {e}"));
    }
    println!("NHBM-HOST-REQUEST device_del nhbm{device}");
    let node = nhbm::device_path(device);
    let t = Instant::now();
    while node.exists() {
        if t.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "{} still there 60 s after device_del",
                node.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Why the removal must not run here, if it must not.
fn refuse(device: u32, force: bool) -> Option<String> {
    if !force {
        if let Ok(exe) = std::env::current_exe() {
            let me = exe
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(dir) = exe.parent() {
                let later = later_tests(dir, &me);
                if !later.is_empty() {
                    return Some(format!(
                        "not the last test: {} would run after the removal",
                        later.join(" ")
                    ));
                }
            }
        }
    }
    let dbg = DevDebugFs::new(device);
    if !host_removal() && !dbg.has("unplug") {
        return Some("debugfs file missing".into());
    }
    let want = u32::from(!host_removal());
    match Device::open(device)
        .map_err(std::io::Error::from)
        .and_then(|d| d.device_info())
    {
        Ok(i) if i.simulated == want => None,
        Ok(_) => Some(format!(
            "/dev/neuron_hbm{device}: simulated is not {want} (NHBM_BACKEND)"
        )),
        Err(e) => Some(format!(
            "/dev/neuron_hbm{device}: {}",
            nhbm::io_errno_name(&e)
        )),
    }
}

fn expect_enodev<T: std::fmt::Debug>(what: &str, r: std::io::Result<T>, bad: &mut Vec<String>) {
    match r {
        Err(e) if errno_of(&e) == libc::ENODEV => {}
        Err(e) => bad.push(format!("{what}: {}, want ENODEV", nhbm::io_errno_name(&e))),
        Ok(v) => bad.push(format!("{what}: succeeded ({v:x?}), want ENODEV")),
    }
}

/// What the removal left, for the KTAP lines.
struct Findings {
    enodev: Result<Vec<String>, String>,
    threads: Result<String, String>,
    reopen: Result<String, String>,
    close: Result<String, String>,
    other: Result<String, String>,
    mapping: Result<String, String>,
    imported: Result<String, String>,
}

/// A child's access to `m`, a mapping of the removed device made before
/// the removal: it must die of `SIGBUS`.
fn access_in_child(m: &[u8]) -> Result<String, String> {
    // SAFETY: the child only reads the mapping and leaves with _exit; the
    // threads of the removal have all been joined.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: the mapping's first byte, mapped readable.
        let _ = unsafe { m.as_ptr().read_volatile() };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; blocks until it is gone.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS {
        Ok("a mapping made before the removal: SIGBUS at the next access".into())
    } else {
        Err(format!(
            "an access to a mapping made before the removal did not get SIGBUS (status {status:#x})"
        ))
    }
}

/// One ioctl thread of the removal: resolves (`kind` 0), reads (1) or
/// loads and unloads on the second file (2) until told to stop or the
/// device has answered ENODEV more than three times. Returns how often it
/// did.
fn removal_worker(
    kind: u32,
    stop: &AtomicBool,
    ops: &AtomicU64,
    (f1, f2): (&Device, &Device),
    pid: u32,
) -> Result<u64, String> {
    let mut enodev_at = 0;
    let t = Instant::now();
    while !stop.load(Relaxed) && t.elapsed() < Duration::from_secs(10) {
        let r: std::io::Result<()> = match kind {
            0 => f1.resolve(pid, 3, 0, 8).map(|_| ()),
            1 => {
                let mut b = vec![0u8; 64 * KIB as usize];
                f1.mem_read(pid, 3, 0, &mut b)
            }
            _ => {
                let b = one_buffer(1, 4 * KIB).to_blob().unwrap();
                f2.plan_load(&b, CHANNEL_ANY)
                    .and_then(|q| f2.plan_unload(q.plan_id))
            }
        };
        ops.fetch_add(1, Relaxed);
        match r {
            Ok(()) => {}
            Err(e) if errno_of(&e) == libc::ENODEV => {
                enodev_at += 1;
                if enodev_at > 3 {
                    break;
                }
            }
            Err(e) => {
                return Err(format!(
                    "thread {kind}: {} during the removal",
                    nhbm::io_errno_name(&e)
                ))
            }
        }
    }
    Ok(enodev_at)
}

/// Threads inside ioctls while the device goes away.
fn ioctls_across_removal(
    dbg: &DevDebugFs,
    device: u32,
    files: (&Device, &Device),
    pid: u32,
) -> Result<String, String> {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    std::thread::scope(|s| {
        let (stop, ops) = (&stop, &ops);
        let hs = [0, 1, 2].map(|kind| s.spawn(move || removal_worker(kind, stop, ops, files, pid)));
        std::thread::sleep(Duration::from_millis(200));
        let wrote = remove(dbg, device);
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Relaxed);
        let rs: Vec<Result<u64, String>> = hs
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect();
        wrote?;
        let msgs: Vec<String> = rs.into_iter().filter_map(|r| r.err()).collect();
        if msgs.is_empty() {
            Ok(format!(
                "{} ioctls from 3 threads across the removal",
                ops.load(Relaxed)
            ))
        } else {
            Err(msgs.join("\n"))
        }
    })
}

/// Every ioctl on the files open across the removal answers ENODEV.
fn ioctls_after_removal(f1: &Device, f2: &Device, pid: u32) -> Result<Vec<String>, String> {
    let mut bad = Vec::new();
    expect_enodev("DEVICE_INFO", f1.device_info(), &mut bad);
    expect_enodev(
        "PLAN_LOAD",
        f1.plan_load(&one_buffer(1, 4096).to_blob().unwrap(), CHANNEL_ANY),
        &mut bad,
    );
    expect_enodev("RESOLVE", f1.resolve(pid, 3, 0, 0), &mut bad);
    let mut qs = [ResolveQuery {
        var_id: 3,
        ..Default::default()
    }];
    expect_enodev("RESOLVE_BATCH", f1.resolve_batch(pid, &mut qs), &mut bad);
    expect_enodev("MEM_WRITE", f1.mem_write(pid, 3, 0, &[1; 64]), &mut bad);
    let mut b = [0u8; 64];
    expect_enodev("MEM_READ", f1.mem_read(pid, 3, 0, &mut b), &mut bad);
    expect_enodev("MEM_STATS", f1.mem_stats(), &mut bad);
    expect_enodev("RESET", f1.reset(RESET_DEVICE, 0), &mut bad);
    expect_enodev("MEM_STATS (second file)", f2.mem_stats(), &mut bad);
    let mut notes = Vec::new();
    // Unloading a plan of a gone device: freeing is harmless, either answer.
    match f1.plan_unload(pid) {
        Ok(()) => notes.push("PLAN_UNLOAD after removal: succeeded (memory freed)".to_string()),
        Err(e) if errno_of(&e) == libc::ENODEV => {
            notes.push("PLAN_UNLOAD after removal: ENODEV".to_string())
        }
        Err(e) => bad.push(format!(
            "PLAN_UNLOAD after removal: {}, want ENODEV or success",
            nhbm::io_errno_name(&e)
        )),
    }
    if bad.is_empty() {
        Ok(notes)
    } else {
        Err(bad.join("\n"))
    }
}

/// A new open of the node: refused, or a file whose ioctls answer ENODEV.
fn open_after_removal(device: u32) -> Result<String, String> {
    // Unchecked: the check's DEVICE_INFO is what this looks at.
    match Device::open_path_unchecked(nhbm::device_path(device)) {
        Err(e) => match e.errno() {
            libc::ENODEV | libc::ENOENT | libc::ENXIO => Ok(format!(
                "open after removal: {}",
                nhbm::errno_name(e.errno())
            )),
            _ => Err(format!(
                "open after removal: {}",
                nhbm::errno_name(e.errno())
            )),
        },
        Ok(d) => {
            let mut b = Vec::new();
            expect_enodev(
                "DEVICE_INFO on a file opened after removal",
                d.device_info(),
                &mut b,
            );
            if b.is_empty() {
                Ok("open after removal succeeds, its ioctls answer ENODEV".into())
            } else {
                Err(b.join("\n"))
            }
        }
    }
}

/// Once both files are closed, debugfs (if still readable) shows every
/// pool unused: the memory went at the last close.
fn closed_files_free_everything(dbg: &DevDebugFs) -> Result<String, String> {
    match dbg.read_text("pools") {
        Ok(text) => {
            // `ch region start end total used peak live` per pool.
            let used: Vec<u64> = text
                .lines()
                .filter_map(|l| l.split_whitespace().nth(5)?.parse().ok())
                .collect();
            if used.iter().all(|&u| u == 0) {
                Ok(format!(
                    "files closed; debugfs pools: {} pools, all unused",
                    used.len()
                ))
            } else {
                Err(format!(
                    "files closed, but debugfs pools still shows used bytes: {used:?}"
                ))
            }
        }
        Err(_) => Ok("files closed (debugfs pools unreadable after removal)".into()),
    }
}

/// The other device does not notice: it loads, copies and unloads, and its
/// usage is what it was before the removal.
fn other_device_untouched(other: u32, other_before: Option<Usage>) -> Result<String, String> {
    let d = Device::open(other).map_err(|e| format!("open other device: {e}"))?;
    let p = d
        .plan_load(&one_buffer(1, 64 * KIB).to_blob().unwrap(), CHANNEL_ANY)
        .map_err(|e| format!("PLAN_LOAD on the other device: {e}"))?;
    let w = pattern(64 * KIB, 3);
    d.mem_write(p.plan_id, 1, 0, &w)
        .map_err(|e| format!("MEM_WRITE: {e}"))?;
    let mut r = vec![0u8; w.len()];
    d.mem_read(p.plan_id, 1, 0, &mut r)
        .map_err(|e| format!("MEM_READ: {e}"))?;
    if r != w {
        return Err("the other device's bytes do not read back".into());
    }
    d.plan_unload(p.plan_id)
        .map_err(|e| format!("PLAN_UNLOAD: {e}"))?;
    let after = Usage::of(&d).map_err(|e| format!("MEM_STATS: {e}"))?;
    match other_before {
        Some(b) if b.device() != after.device() => Err(format!(
            "other device usage {:?}, before {:?}",
            after.device(),
            b.device()
        )),
        _ => Ok(format!(
            "/dev/neuron_hbm{other} loads, copies and unloads as before"
        )),
    }
}

fn run_removal(device: u32, other: u32) -> Result<Findings, Fail> {
    let dbg = DevDebugFs::new(device);
    // The other device's usage before, to show it is untouched.
    let other_before = Device::open(other).ok().and_then(|d| Usage::of(&d).ok());

    let f1 = Device::open(device).ctx("open")?;
    let f2 = Device::open(device).ctx("open second file")?;
    let anchor = f1
        .plan_load(
            &one_buffer(1, 16 * KIB).to_blob().ctx("build")?,
            CHANNEL_ANY,
        )
        .ctx("PLAN_LOAD anchor")?;
    let plan = every_local_kind(128 * KIB).with(Record::remote(16, 0, anchor.plan_id, 1));
    let p = f1
        .plan_load(&plan.to_blob().ctx("build")?, CHANNEL_ANY)
        .ctx("PLAN_LOAD")?;
    f1.mem_write(p.plan_id, 3, 0, &pattern(128 * KIB, 1))
        .ctx("MEM_WRITE")?;
    let mapped = f1.map(p.plan_id, 3).ctx("map")?;
    // A third file imports the plan and maps it read-only.
    let f3 = Device::open(device).ctx("open the importer's file")?;
    let shared = f1.plan_export(p.plan_id).ctx("PLAN_EXPORT")?;
    let import = f3.plan_import(shared.as_fd()).ctx("PLAN_IMPORT")?;
    let imported_map = f3.map_read_only(import.plan_id, 3).ctx("map the import")?;

    let threads = ioctls_across_removal(&dbg, device, (&f1, &f2), p.plan_id);
    let mapping = access_in_child(&mapped);
    drop(mapped);
    let imported = imported_after_removal(&f3, import.plan_id, &imported_map);
    drop(imported_map);
    drop((f3, shared));
    let enodev = ioctls_after_removal(&f1, &f2, p.plan_id);
    let reopen = open_after_removal(device);
    // Close both files; the memory goes at the last close.
    drop(f2);
    drop(f1);
    let close = closed_files_free_everything(&dbg);
    let other = other_device_untouched(other, other_before);
    Ok(Findings {
        enodev,
        threads,
        reopen,
        close,
        other,
        mapping,
        imported,
    })
}

/// An importer of a plan of the removed device: its read-only mapping
/// made before the removal gets `SIGBUS`, its MEM_READ `ENODEV`.
fn imported_after_removal(f: &Device, id: u32, m: &[u8]) -> Result<String, String> {
    let mut b = [0u8; 8];
    match f.mem_read(id, 3, 0, &mut b) {
        Err(e) if errno_of(&e) == libc::ENODEV => {}
        other => {
            return Err(format!(
                "MEM_READ of the import after the removal: {other:?}"
            ))
        }
    }
    access_in_child(m).map(|_| "an import's read-only mapping: SIGBUS, MEM_READ ENODEV".into())
}

const TESTS: [&str; 7] = [
    "ioctls_answer_enodev_after_removal",
    "ioctls_in_flight_across_removal",
    "open_after_removal_is_refused",
    "open_files_close_after_removal",
    "other_device_unaffected",
    "mappings_fault_after_removal",
    "imported_mappings_fault_after_removal",
];

/// The suite; returns whether it passed.
fn run_suite(device: u32, force: bool, w: &mut dyn std::io::Write) -> bool {
    let mut k = Ktap::begin(w, "nhbm_unplug", TESTS.len());
    if let Some(why) = refuse(device, force) {
        for t in TESTS {
            k.result(t, &Outcome::Skip(why.clone()), &[]);
        }
        return k.end();
    }
    let other = if device == 0 { 1 } else { 0 };
    let r = ktap::catch(|| run_removal(device, other));
    match r {
        Err(Fail::Fail(m) | Fail::Skip(m)) => {
            for t in TESTS {
                k.result(t, &Outcome::Fail(m.clone()), &[]);
            }
        }
        Ok(f) => {
            let line = |r: Result<String, String>| match r {
                Ok(n) => (Outcome::Pass, vec![n]),
                Err(m) => (Outcome::Fail(m), vec![]),
            };
            let (o, n) = match f.enodev {
                Ok(n) => (Outcome::Pass, n),
                Err(m) => (Outcome::Fail(m), vec![]),
            };
            k.result(TESTS[0], &o, &n);
            for (t, r) in TESTS[1..]
                .iter()
                .zip([f.threads, f.reopen, f.close, f.other, f.mapping, f.imported])
            {
                let (o, n) = line(r);
                k.result(t, &o, &n);
            }
        }
    }
    k.end()
}

/// The command line of nhbm-unplug-test.
#[derive(clap::Parser, Debug)]
#[command(
    name = "nhbm-unplug-test",
    about = "Removes /dev/neuron_hbmN (default 1): a simulated device through debugfs `unplug`, \
             an emulated PCI function (NHBM_BACKEND=pci) through the host's device_del; then \
             checks what follows (KTAP suite nhbm_unplug)",
    long_about = None,
    after_help = "Irreversible until the module is reloaded: skipped unless this is the last \
                  *-test program of its directory (--force overrides)."
)]
struct Args {
    #[command(flatten)]
    device: DeviceArg,
    /// Run even when other *-test programs follow this one
    #[arg(long)]
    force: bool,
}

/// The program: exit status 0 when every test passed.
pub fn main() -> i32 {
    let a = Args::parse();
    let device = match a.device.device {
        None => DEFAULT_DEVICE,
        Some(_) => match a.device.index() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("nhbm-unplug-test: --device: {e}");
                return 2;
            }
        },
    };
    let ok = run_suite(device, a.force, &mut std::io::stdout().lock());
    i32::from(!ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_tests_sort_bytewise() {
        let dir = std::env::temp_dir().join(format!("nhbm-unplug-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in [
            "nhbm-cli-test",
            "nhbm-fuzz-test",
            "nhbm-stress-test",
            "nhbm-uapi-test",
            "nhbm-unplug-test",
            "nhbm",
        ] {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        assert!(later_tests(&dir, "nhbm-unplug-test").is_empty());
        assert_eq!(
            later_tests(&dir, "nhbm-stress-test"),
            vec!["nhbm-uapi-test".to_string(), "nhbm-unplug-test".to_string()]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
