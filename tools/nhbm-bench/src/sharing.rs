//! `shared_weights_hbm`: device memory in use while eight processes import
//! one exported plan of weights, against while one does. An import
//! allocates nothing, so the two are the same plan's bytes.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nhbm::uapi::{PlanImport, IOC_PLAN_IMPORT};
use nhbm::{Device, Plan, Record};

use crate::device::{invalid, note};
use crate::report::{Figure, Op, Raw};

/// Bytes of the weights.
const WEIGHTS: u64 = 16 << 20;
/// Importing processes of the figure's numerator.
const IMPORTERS: usize = 8;
/// The figure's target: eight importers hold what one does.
const TARGET: f64 = 1.01;

/// An importing process: its pid and the write end of the pipe it waits
/// on (a byte written there lets it exit; later children hold copies of
/// the end, so closing it would not).
struct Importer {
    pid: libc::pid_t,
    hold: OwnedFd,
}

/// A pipe's read and write ends.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 makes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks a process that opens `node`, imports the dma-buf `buf` there,
/// says so on a pipe and holds the import until the parent lets it go.
/// The child makes system calls only (no allocation), so a fork of a
/// threaded process is safe.
fn spawn(node: &CString, buf: RawFd) -> io::Result<Importer> {
    let (ready_r, ready_w) = pipe()?;
    let (hold_r, hold_w) = pipe()?;
    // SAFETY: the child below makes only async-signal-safe system calls on
    // memory prepared before the fork, and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        drop(hold_w);
        let mut arg = PlanImport {
            fd: buf,
            ..PlanImport::default()
        };
        // SAFETY: a NUL-terminated path; `arg` is the ioctl's argument; the
        // byte buffers live on this stack; the process ends with _exit.
        unsafe {
            let dev = libc::open(node.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            let ok = dev >= 0 && libc::ioctl(dev, IOC_PLAN_IMPORT as _, &raw mut arg) == 0;
            let said = [u8::from(ok)];
            libc::write(ready_w.as_raw_fd(), said.as_ptr().cast(), 1);
            let mut b = [0u8; 1];
            libc::read(hold_r.as_raw_fd(), b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    drop((ready_w, hold_r));
    let importer = Importer { pid, hold: hold_w };
    let mut said = [0u8; 1];
    // SAFETY: reads one byte into `said`.
    let n = unsafe { libc::read(ready_r.as_raw_fd(), said.as_mut_ptr().cast(), 1) };
    if n != 1 || said[0] != 1 {
        return Err(invalid("an importing process could not import".into()));
    }
    Ok(importer)
}

/// Lets the importers go and waits for them.
fn release(importers: Vec<Importer>) {
    for i in importers {
        // SAFETY: writes one byte from a local.
        unsafe { libc::write(i.hold.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        drop(i.hold);
        let mut status = 0;
        // SAFETY: `pid` is our child; blocks until it is gone.
        unsafe { libc::waitpid(i.pid, &mut status, 0) };
    }
}

/// Device memory in use (MEM_STATS, all pools) while `n` processes hold an
/// import of `buf`, less `base`.
fn used_with(dev: &Device, node: &CString, buf: RawFd, n: usize, base: u64) -> io::Result<u64> {
    let mut importers = Vec::new();
    let mut res = Ok(0);
    for _ in 0..n {
        match spawn(node, buf) {
            Ok(i) => importers.push(i),
            Err(e) => {
                res = Err(e);
                break;
            }
        }
    }
    if res.is_ok() {
        res = dev.mem_stats().map(|s| s.total_used() - base);
    }
    release(importers);
    res
}

/// `shared_weights_hbm`.
pub fn shared_weights_figure(dev: &Device) -> io::Result<Figure> {
    let node = CString::new(dev.path().as_os_str().as_bytes()).map_err(io::Error::other)?;
    let base = dev.mem_stats()?.total_used();
    let blob = Plan::new(0, 0)
        .with(Record::buffer(1, WEIGHTS))
        .to_blob()
        .map_err(|e| invalid(e.to_string()))?;
    let plan = dev.load(&blob, 0)?;
    let buf = plan.export()?;
    let one = used_with(dev, &node, buf.as_raw_fd(), 1, base)?;
    let eight = used_with(dev, &node, buf.as_raw_fd(), IMPORTERS, base)?;
    drop(buf);
    plan.unload()?;
    note(&format!(
        "shared_weights_hbm: a {} MiB plan, {one} bytes in use with one importer, {eight} with {IMPORTERS}",
        WEIGHTS >> 20
    ));
    Ok(Figure::new(
        "shared_weights_hbm",
        eight as f64 / one as f64,
        Raw::new(
            format!("bytes in use, {IMPORTERS} importing processes"),
            eight.to_string(),
        ),
        Raw::new("bytes in use, one importing process", one.to_string()),
        Op::AtMost,
        TARGET,
    ))
}
