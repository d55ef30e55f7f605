//! Child processes of the stress cases: forked, each reporting one line back
//! through a pipe.

use std::io::{self, Write};

use crate::ktap::{catch, fail, Fail};

/// A forked child process reporting one line back through a pipe.
pub(super) struct Child {
    /// The child's process id.
    pub(super) pid: i32,
    fd: i32,
    status: std::cell::Cell<Option<i32>>,
}

impl Child {
    /// Whether the child has exited (reaps it if so).
    pub(super) fn exited(&self) -> bool {
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
    pub(super) fn wait(self) -> Result<String, String> {
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
pub(super) fn spawn_child(f: impl FnOnce() -> Result<String, String>) -> Result<Child, Fail> {
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
pub(super) fn fork_child(
    f: impl FnOnce() -> Result<(), String>,
) -> Result<Result<(), String>, Fail> {
    let c = spawn_child(|| f().map(|()| String::new()))?;
    Ok(c.wait().map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_reports_back() {
        let c = spawn_child(|| Ok("hello".into())).unwrap();
        assert_eq!(c.wait(), Ok("hello".into()));
        let r = fork_child(|| Err("no".into())).unwrap();
        assert_eq!(r, Err("no".into()));
    }
}
