//! `nhbm-stress-test` (suite `nhbm_stress`): isolation between open files,
//! fault injection over every injection point of a load, a transfer, an
//! unload and a close, and several processes and threads on both devices
//! at once.
//!
//!   nhbm-stress-test [-d N] [--seconds T] [--procs P] [--seed S] [--list] [NAME...]
//!
//! The cases are the `pub fn`s of the modules below, run in the order these
//! are declared (see the crate's documentation): isolation, fault
//! injection, then the load.

mod isolation;
mod tenancy;

mod faults;

mod concurrency;

use std::io::{self, Write};

use nhbm::cli::num;

pub use concurrency::{set_load, Load};

use crate::ktap::{catch, fail, Case, Fail};
use crate::suite::{device_opens, CaseArgs, Suite};

/// A forked child process reporting one line back through a pipe.
struct Child {
    /// The child's process id.
    pid: i32,
    fd: i32,
    status: std::cell::Cell<Option<i32>>,
}

impl Child {
    /// Whether the child has exited (reaps it if so).
    fn exited(&self) -> bool {
        if self.status.get().is_some() {
            return true;
        }
        let mut st = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r == self.pid {
            self.status.set(Some(st));
            true
        } else {
            r < 0
        }
    }

    /// Waits for the child and returns its report (`Ok`) or its failure.
    fn wait(self) -> Result<String, String> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reading into our own buffer from our pipe end.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut _, buf.len()) };
            if n > 0 {
                out.extend_from_slice(&buf[..n as usize]);
            } else if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        // SAFETY: closing our own pipe end once.
        unsafe { libc::close(self.fd) };
        let st = match self.status.get() {
            Some(s) => s,
            None => {
                let mut st = 0;
                // SAFETY: waitpid on our own child.
                unsafe { libc::waitpid(self.pid, &mut st, 0) };
                st
            }
        };
        let text = String::from_utf8_lossy(&out).into_owned();
        if libc::WIFSIGNALED(st) {
            return Err(format!("killed by signal {} ({text})", libc::WTERMSIG(st)));
        }
        match text.split_once(' ') {
            Some(("ok", rest)) => Ok(rest.to_string()),
            Some(("fail", rest)) => Err(rest.to_string()),
            _ => Err(format!("exit status {:#x}, report {text:?}", st)),
        }
    }
}

/// Forks a child that runs `f` and reports its result through a pipe.
/// The caller must have no other threads (fork copies only the caller).
fn spawn_child(f: impl FnOnce() -> Result<String, String>) -> Result<Child, Fail> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two fds into our array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return fail(format!("pipe: {}", io::Error::last_os_error()));
    }
    let _ = io::stdout().flush();
    // SAFETY: fork; the child only runs `f` and exits with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return fail(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: the child closes the read end it does not use.
        unsafe { libc::close(fds[0]) };
        let msg = match catch(|| f().map_err(Fail::Fail)) {
            Ok(s) => format!("ok {s}"),
            Err(Fail::Fail(m) | Fail::Skip(m)) => format!("fail {m}"),
        };
        let mut b = msg.into_bytes();
        b.truncate(16 * 1024);
        let mut off = 0;
        while off < b.len() {
            // SAFETY: writing our own bytes to our pipe end.
            let n = unsafe { libc::write(fds[1], b[off..].as_ptr() as *const _, b.len() - off) };
            if n <= 0 {
                break;
            }
            off += n as usize;
        }
        // SAFETY: leave without running the parent's atexit handlers or
        // flushing its stdio buffers.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the parent closes the write end it does not use.
    unsafe { libc::close(fds[1]) };
    Ok(Child {
        pid,
        fd: fds[0],
        status: std::cell::Cell::new(None),
    })
}

/// Runs `f` in a child process and waits for it.
fn fork_child(f: impl FnOnce() -> Result<(), String>) -> Result<Result<(), String>, Fail> {
    let c = spawn_child(|| f().map(|()| String::new()))?;
    Ok(c.wait().map(|_| ()))
}

/// The suite `nhbm_stress`.
pub const SUITE: Suite = Suite {
    name: "nhbm_stress",
    unit: "tests",
    cases: include!(concat!(env!("OUT_DIR"), "/stress_cases.rs")),
    ready: device_opens,
};

/// The command line of nhbm-stress-test.
#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "nhbm-stress-test",
    about = "Isolation, fault injection (debugfs fail_nth) and concurrency tests of \
             /dev/neuron_hbmN and N+1 (default N = 0), printed as KTAP (suite nhbm_stress)"
)]
pub struct Args {
    /// The device, `--list` and the case filters.
    #[command(flatten)]
    pub cases: CaseArgs,
    /// Length of the concurrency phase
    #[arg(short = 't', long, default_value_t = Load::default().seconds, value_parser = num::<u64>)]
    pub seconds: u64,
    /// Processes of the concurrency phase (1..64)
    #[arg(long, default_value_t = Load::default().procs, value_parser = num::<usize>)]
    pub procs: usize,
    /// The seed
    #[arg(long, default_value_t = Load::default().seed, value_parser = num::<u64>)]
    pub seed: u64,
}

impl Args {
    /// The knobs of the concurrency test.
    pub fn load(&self) -> Load {
        Load {
            seconds: self.seconds,
            procs: self.procs,
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        use clap::Parser;
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("stress").chain(v.iter().copied()));
        let d = parse(&[]).unwrap();
        assert_eq!((d.seconds, d.procs, d.seed), (20, 4, 0x5354_5245_5353));
        assert_eq!(d.cases.device.index().unwrap(), 0);
        let a = parse(&["--seconds", "5", "--procs", "2", "-d", "1", "fault"]).unwrap();
        assert_eq!(
            (a.seconds, a.procs, a.cases.device.index().unwrap()),
            (5, 2, 1)
        );
        assert_eq!(a.cases.filters, vec!["fault".to_string()]);
        assert!(parse(&["--nope"]).is_err());
    }

    #[test]
    fn the_load_runs_last() {
        let names: Vec<&str> = SUITE.cases.iter().map(|c| c.name).collect();
        assert_eq!(names[0], "device_nodes_are_mode_0660");
        assert_eq!(
            names.last().unwrap(),
            &"processes_and_threads_on_both_devices"
        );
    }

    #[test]
    fn a_child_reports_back() {
        let c = spawn_child(|| Ok("hello".into())).unwrap();
        assert_eq!(c.wait(), Ok("hello".into()));
        let r = fork_child(|| Err("no".into())).unwrap();
        assert_eq!(r, Err("no".into()));
    }
}
