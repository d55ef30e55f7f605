//! Running a program as another user: this program again with `--as UID
//! PROGRAM ARGS...`, which gives up root (supplementary groups, then group
//! and user id UID) and executes PROGRAM. Done in a process of its own:
//! `Command::uid` and `gid`, which switch in the forked child, failed with
//! ENOSYS in the test guest, where the same calls made by a program of its
//! own succeed.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// A command that runs `program` as user and group `uid` through `exe`
/// (this program).
pub fn command(exe: &Path, uid: u32, program: &Path) -> Command {
    let mut c = Command::new(exe);
    c.arg("--as").arg(uid.to_string()).arg(program);
    c
}

/// The `--as` side: `args` are UID PROGRAM ARGS...; returns only on failure.
pub fn main(args: &[String]) -> String {
    let (Some(uid), Some(program)) = (
        args.first().and_then(|u| u.parse::<u32>().ok()),
        args.get(1),
    ) else {
        return format!("--as: bad arguments {args:?}");
    };
    // SAFETY: plain system calls on this process's own credentials; no
    // pointer is passed but the null, empty group list.
    let rc = unsafe {
        [
            libc::setgroups(0, std::ptr::null()),
            libc::setgid(uid),
            libc::setuid(uid),
        ]
    };
    if rc.iter().any(|&r| r != 0) {
        return format!("--as {uid}: {}", std::io::Error::last_os_error());
    }
    let e = Command::new(program).args(&args[2..]).exec();
    format!("--as {uid}: {program}: {e}")
}
