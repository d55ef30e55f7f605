//! A pseudo-terminal of a given size, for programs that draw on one.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// The two ends of a new pseudo-terminal `cols` x `rows` in size: the
/// master (what the terminal emulator reads and types into) and the slave
/// (the program's stdin, stdout and stderr).
pub fn open(rows: u16, cols: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: both fd pointers are valid for writes; no name buffer is
    // asked for; `size` and the null termios are valid for reads.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    for fd in [master, slave] {
        // SAFETY: F_SETFD on a descriptor openpty just returned; a child
        // gets the slave through dup2, which clears the flag there.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: openpty succeeded: both are new descriptors owned by nothing
    // else.
    Ok(unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) })
}
