//! A process killed in the middle of a long PLAN_LOAD or MEM_READ stops
//! there: the kernel notices the fatal signal between two pieces of the
//! transfer, answers EINTR and leaves nothing behind.
//!
//! The child's user buffer is shared anonymous memory, populated in the
//! child before its call, so that no user copy faults: a fault would itself
//! end the copy on a fatal signal, and only the module's own check between
//! pieces is under test. The child runs on an open file it shares with the
//! parent, so a PLAN_LOAD that ran to the end would leave its plan behind in
//! that file after the child is gone.

use std::io;
use std::time::{Duration, Instant};

use nhbm::{Device, Plan, Record};

use crate::fixtures::*;
use crate::ktap::*;
use crate::mem::{page_size, Mapping};

/// Bytes moved by the killed call: far more than what the kernel moves
/// between the start the parent sees and the kill.
const LEN: usize = 96 << 20;
/// How long a child may take to start its transfer.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// What the parent fills a MEM_READ buffer with; the variable reads zeros.
const FILL: u8 = 0xa5;

/// Shared anonymous memory: parent and child see the same pages.
struct SharedBuf {
    map: Mapping,
}

impl SharedBuf {
    /// At least `len` bytes holding `bytes`, then `fill`.
    fn new(len: usize, bytes: &[u8], fill: u8) -> io::Result<Self> {
        let mut map = Mapping::shared(len.div_ceil(page_size()))?;
        map.write(0, bytes);
        map.write(bytes.len(), &vec![fill; map.len() - bytes.len()]);
        Ok(Self { map })
    }

    fn addr(&self) -> u64 {
        self.map.addr()
    }

    fn byte(&self, at: usize) -> u8 {
        assert!(at < self.map.len());
        // SAFETY: in the mapping; read volatile, the child's kernel writes it.
        unsafe { self.map.as_ptr().add(at).read_volatile() }
    }

    /// Maps every page writable in the calling process's page tables, by
    /// writing each page's first byte back (madvise may be compiled out).
    fn populate(&self) {
        for at in (0..self.map.len()).step_by(page_size()) {
            // SAFETY: in the mapping; nothing else writes it meanwhile.
            unsafe {
                let p = self.map.as_ptr().add(at);
                p.write_volatile(p.read_volatile());
            }
        }
    }
}

/// Runs `call` in a child process after populating `buf` there, and kills
/// the child with SIGKILL as soon as `started()` holds. Fails if the child
/// ends on its own.
fn kill_midway(
    buf: &SharedBuf,
    started: impl Fn() -> Result<bool, Fail>,
    call: impl FnOnce() -> io::Result<()>,
) -> TestResult {
    // SAFETY: the test binary runs its cases on one thread; the child only
    // populates the buffer, makes the prepared ioctl and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).ctx("fork");
    }
    if pid == 0 {
        buf.populate();
        let code = match call() {
            Ok(()) => 0,
            Err(e) => 100 + e.raw_os_error().unwrap_or(0),
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let begin = Instant::now();
    let mut status = 0;
    let outcome = loop {
        let now = started();
        if !matches!(now, Ok(false)) {
            // SAFETY: `pid` is our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break now.map(|_| ());
        }
        // SAFETY: `pid` is our child; WNOHANG never blocks.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            return fail(format!(
                "the child ended on its own (exit code {}: 100 + errno of its call) before it could be killed",
                libc::WEXITSTATUS(status)
            ));
        }
        if begin.elapsed() > START_TIMEOUT {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break fail("the child's call never started its transfer");
        }
        std::hint::spin_loop();
    };
    // SAFETY: `pid` is our child; blocks until it is gone.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(io::Error::last_os_error()).ctx("waitpid");
    }
    outcome?;
    ensure(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
        || format!("the child was not killed by SIGKILL (status {status:#x})"),
    )
}

/// SIGKILL during the payload upload of a PLAN_LOAD: the upload stops with
/// EINTR, and the shared open file holds no plan afterwards.
pub fn killed_plan_load_stops_and_leaves_nothing() -> TestResult {
    let d = dev()?;
    let base = usage(&d)?;
    let blob = Plan::new(0, 0)
        .with(Record::buffer(1, LEN as u64).data(vec![FILL; LEN]))
        .to_blob()
        .ctx("build")?;
    let buf = SharedBuf::new(blob.len(), &blob, 0).ctx("mmap")?;
    let mut arg = nhbm::uapi::PlanLoad {
        blob: buf.addr(),
        blob_len: blob.len() as u64,
        ..Default::default()
    };
    drop(blob);
    // The arena is allocated before the payload streams into it.
    let started = || Ok(usage(&d)?.used > base.used);
    kill_midway(&buf, started, || {
        // SAFETY: the blob is readable for blob_len bytes; no addrs array.
        unsafe { d.plan_load_raw(&mut arg) }
    })?;
    ensure_eq("MEM_STATS after the killed load", usage(&d)?, base)
}

/// SIGKILL during a MEM_READ of a large variable: the copy stops where it
/// was, and the plan stays loaded and readable for the file's other user.
pub fn killed_mem_read_stops_and_the_plan_stays() -> TestResult {
    let d: Device = dev()?;
    let blob = crate::fixtures::one_buffer(1, LEN as u64)
        .to_blob()
        .ctx("build")?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let loaded = usage(&d)?;
    let buf = SharedBuf::new(LEN, &[], FILL).ctx("mmap")?;
    let mut arg = nhbm::uapi::MemXfer {
        plan_id: p.plan_id,
        var_id: 1,
        offset: 0,
        len: LEN as u64,
        buf: buf.addr(),
    };
    // Fresh memory reads zeros: the copy has begun once a byte is zero.
    let started = || Ok(buf.byte(0) != FILL);
    kill_midway(&buf, started, || {
        // SAFETY: the buffer is writable for LEN bytes.
        unsafe { d.mem_xfer_raw(false, &mut arg) }
    })?;
    let last = buf.byte(LEN - 1);
    ensure(last == FILL, || {
        "MEM_READ went on to the end after SIGKILL".to_string()
    })?;
    ensure_eq("MEM_STATS after the killed read", usage(&d)?, loaded)?;
    ensure_bytes(
        "the variable read after the kill",
        &read(&d, p.plan_id, 1, 0, 4096)?,
        &[0; 4096],
    )?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}
