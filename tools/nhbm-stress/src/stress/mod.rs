//! `nhbm-stress-test` (suite `nhbm_stress`): isolation between open files,
//! fault injection over every injection point of a load, a transfer, an
//! unload and a close, and several processes and threads on both devices
//! at once.
//!
//!   nhbm-stress-test [-d N] [--seconds T] [--procs P] [--seed S] [--list] [NAME...]

pub mod concurrency;
pub mod faults;
pub mod isolation;
pub mod tenancy;

use clap::Parser;
use nhbm::cli::{num, DeviceArg};
use nhbm::Device;
use nhbm_testkit::fixtures::set_device_index;
use std::io::{self, Write};

use nhbm_testkit::ktap::{self, catch, fail, Case, Fail};

/// A forked child process reporting one line back through a pipe.
pub struct Child {
    pub pid: i32,
    fd: i32,
    status: std::cell::Cell<Option<i32>>,
}

impl Child {
    /// Whether the child has exited (reaps it if so).
    pub fn exited(&self) -> bool {
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
    pub fn wait(self) -> Result<String, String> {
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
pub fn spawn_child(f: impl FnOnce() -> Result<String, String>) -> Result<Child, Fail> {
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
pub fn fork_child(f: impl FnOnce() -> Result<(), String>) -> Result<Result<(), String>, Fail> {
    let c = spawn_child(|| f().map(|()| String::new()))?;
    Ok(c.wait().map(|_| ()))
}

/// The command line of nhbm-stress-test.
#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "nhbm-stress-test",
    about = "Isolation, fault injection (debugfs fail_nth) and concurrency tests of \
             /dev/neuron_hbmN and N+1 (default N = 0), printed as KTAP (suite nhbm_stress)"
)]
pub struct Args {
    #[command(flatten)]
    pub device: DeviceArg,
    /// Length of the concurrency phase
    #[arg(short = 't', long, default_value_t = 20, value_parser = num::<u64>)]
    pub seconds: u64,
    /// Processes of the concurrency phase (1..64)
    #[arg(long, default_value_t = 4, value_parser = num::<usize>)]
    pub procs: usize,
    /// The seed
    #[arg(long, default_value_t = 0x5354_5245_5353, value_parser = num::<u64>)]
    pub seed: u64,
    /// Print the names of the cases instead of running them
    #[arg(long)]
    pub list: bool,
    /// Run only the cases whose name contains one of these
    #[arg(value_name = "NAME")]
    pub filters: Vec<String>,
}

/// The cases, in order: isolation, fault injection, then the load.
pub fn cases(a: &Args) -> Vec<Case> {
    let load = concurrency::Load {
        seconds: a.seconds,
        procs: a.procs.clamp(1, 64),
        seed: a.seed,
    };
    vec![
        Case::new(
            "device_nodes_are_mode_0660",
            isolation::device_nodes_are_mode_0660,
        ),
        Case::new(
            "other_files_cannot_reach_a_plan",
            isolation::other_files_cannot_reach_a_plan,
        ),
        Case::new(
            "no_kernel_pointers_reach_userspace",
            isolation::no_kernel_pointers_reach_userspace,
        ),
        Case::new(
            "new_plans_never_see_old_bytes",
            isolation::new_plans_never_see_old_bytes,
        ),
        Case::new(
            "sbuf_windows_never_reach_hbm",
            tenancy::sbuf_windows_never_reach_hbm,
        ),
        Case::new(
            "reset_is_not_every_tenants",
            tenancy::reset_is_not_every_tenants,
        ),
        Case::new(
            "fault_injection_plan_load_every_point",
            faults::plan_load_every_point,
        ),
        Case::new(
            "fault_injection_transfers_every_point",
            faults::transfers_every_point,
        ),
        Case::new(
            "fault_injection_unload_and_close_every_point",
            faults::unload_and_close_every_point,
        ),
        Case::new("processes_and_threads_on_both_devices", move |n| {
            concurrency::processes_and_threads_on_both_devices(n, load)
        }),
    ]
}

/// The program: exit status 0 when every case passed.
pub fn main() -> i32 {
    let a = Args::parse();
    let device = match a.device.index() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("nhbm-stress-test: --device: {e}");
            return 2;
        }
    };
    set_device_index(device);
    let mut cs = cases(&a);
    if !a.filters.is_empty() {
        cs.retain(|c| a.filters.iter().any(|f| c.name.contains(f.as_str())));
    }
    if a.list {
        for c in &cs {
            println!("{}", c.name);
        }
        return 0;
    }
    if let Err(e) = Device::open(device) {
        let msg = format!(
            "cannot open {}: {}",
            nhbm::device_path(device).display(),
            nhbm::io_errno_name(&e)
        );
        ktap::run(
            "nhbm_stress",
            &[Case::new("open_device_node", move |_| fail(msg.clone()))],
        );
        return 1;
    }
    i32::from(!ktap::run("nhbm_stress", &cs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("stress").chain(v.iter().copied()));
        let d = parse(&[]).unwrap();
        assert_eq!((d.seconds, d.procs, d.seed), (20, 4, 0x5354_5245_5353));
        assert_eq!(d.device.index().unwrap(), 0);
        let a = parse(&["--seconds", "5", "--procs", "2", "-d", "1", "fault"]).unwrap();
        assert_eq!((a.seconds, a.procs, a.device.index().unwrap()), (5, 2, 1));
        assert_eq!(a.filters, vec!["fault".to_string()]);
        assert!(parse(&["--nope"]).is_err());
        let names: Vec<String> = cases(&d).into_iter().map(|c| c.name).collect();
        assert_eq!(
            names.last().unwrap(),
            "processes_and_threads_on_both_devices"
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
