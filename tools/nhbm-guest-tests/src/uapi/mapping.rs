//! A plan's variables mapped into the process (MAP_OFFSET and `mmap`): the
//! mapping shows the bytes MEM_WRITE and MEM_READ move, reaches nothing but
//! the caller's own variable (or, for a scratch variable, its plan's own
//! scratchpad), and is taken away (`SIGBUS`) when the plan is unloaded or
//! the device reset.

use std::io;
use std::os::fd::AsRawFd;

use nhbm::uapi::*;
use nhbm::{Backing, Device, Plan, Record};

use crate::fixtures::*;
use crate::ktap::*;
use crate::mem::page_size;
use crate::sys::map_and_unmap;

/// The page size of the guest.
fn page() -> u64 {
    page_size() as u64
}

/// [`map_and_unmap`] of `d`.
fn try_map(d: &Device, offset: u64, len: u64, flags: i32) -> io::Result<()> {
    map_and_unmap(d.as_raw_fd(), offset, len, flags)
}

/// Runs `f` in a child process, which ends with exit code 0 when `f`
/// returns: the signal that ended the child instead, if any.
pub(super) fn child_signal(f: impl FnOnce() -> Result<(), Fail>) -> Result<Option<i32>, Fail> {
    // SAFETY: the test binary runs its cases on one thread; the child runs
    // `f` and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).ctx("fork");
    }
    if pid == 0 {
        let code = match f() {
            Ok(()) => 0,
            Err(e) => {
                println!("    # child: {e:?}");
                1
            }
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; blocks until it is gone.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(io::Error::last_os_error()).ctx("waitpid");
    }
    if libc::WIFSIGNALED(status) {
        return Ok(Some(libc::WTERMSIG(status)));
    }
    ensure_eq("the child's exit code", libc::WEXITSTATUS(status), 0)?;
    Ok(None)
}

/// Bytes MEM_WRITE put are what the mapping reads, and bytes written
/// through the mapping are what MEM_READ reads, on every page of a
/// variable whose size is not a whole number of pages (its last page is
/// mapped whole: MAP_OFFSET reports the rounded size).
pub fn mapped_bytes_are_mem_reads() -> TestResult {
    let d = dev()?;
    let size = 5 * page() + 1000;
    let p = d
        .load(&one_buffer(1, size).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let (_, mapped) = d.map_offset(p.id(), 1).ctx("MAP_OFFSET")?;
    ensure_eq("mappable bytes", mapped, 6 * page())?;
    let first = pattern(size, 41);
    p.write(1, 0, &first).ctx("MEM_WRITE")?;
    let mut m = p.map(1).ctx("map")?;
    let mut got = vec![0u8; size as usize];
    m.read(0, &mut got).ctx("read through the mapping")?;
    ensure_bytes("mapping after MEM_WRITE", &got, &first)?;
    let second = pattern(size, 42);
    m.write(0, &second).ctx("write through the mapping")?;
    let back = read(&d, p.id(), 1, 0, size)?;
    ensure_bytes("MEM_READ after writing through the mapping", &back, &second)?;
    // Both ways once more, one word inside a page, with the mapping live.
    p.write(1, 3 * page() + 8, b"fresh!!!").ctx("MEM_WRITE")?;
    let mut word = [0u8; 8];
    m.read(3 * page() as usize + 8, &mut word).ctx("read")?;
    ensure_bytes("a word MEM_WRITE put", &word, b"fresh!!!")
}

/// Another open file cannot reach a plan's memory: MAP_OFFSET of the
/// plan's id answers `ENOENT` there (it has no such plan), and `mmap` at
/// the offset the owner was given answers `EINVAL`.
pub fn other_files_cannot_map_a_plan() -> TestResult {
    let owner = dev()?;
    let other = dev()?;
    let p = owner
        .load(&one_buffer(1, 4 * page()).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let (offset, len) = owner.map_offset(p.id(), 1).ctx("MAP_OFFSET")?;
    ensure_errno(
        "MAP_OFFSET from another file",
        other.map_offset(p.id(), 1),
        libc::ENOENT,
    )?;
    ensure_errno(
        "mmap of the owner's offset from another file",
        try_map(&other, offset, len, libc::MAP_SHARED),
        libc::EINVAL,
    )?;
    // The owner may.
    try_map(&owner, offset, len, libc::MAP_SHARED).ctx("the owner's mmap")
}

/// What is not one of the caller's variables, whole, shared, is refused:
/// `MAP_PRIVATE`, a length past the variable, an offset MAP_OFFSET never
/// gave (the page after the variable), MAP_OFFSET of kinds that are not
/// the plan's own memory (a State Buffer window, a pointer), with flags,
/// and of a variable that does not start on a page.
pub fn maps_beyond_a_variable_are_refused() -> TestResult {
    let d = dev()?;
    let plan = Plan::new(0, 0)
        .with(Record::buffer(1, 2 * page()))
        .with(Record::sb(2, 4 * KIB, 0, 0))
        .with(Record::ptr(3, 1, 2 * page()));
    let p = d.load(&plan.to_blob().ctx("build")?, 0).ctx("PLAN_LOAD")?;
    let (offset, len) = d.map_offset(p.id(), 1).ctx("MAP_OFFSET")?;
    ensure_errno(
        "MAP_PRIVATE",
        try_map(&d, offset, len, libc::MAP_PRIVATE),
        libc::EINVAL,
    )?;
    ensure_errno(
        "a length past the variable",
        try_map(&d, offset, len + page(), libc::MAP_SHARED),
        libc::EINVAL,
    )?;
    ensure_errno(
        "the page after the variable",
        try_map(&d, offset + len, page(), libc::MAP_SHARED),
        libc::EINVAL,
    )?;
    ensure_errno(
        "MAP_OFFSET of a State Buffer window",
        d.map_offset(p.id(), 2),
        libc::EINVAL,
    )?;
    ensure_errno(
        "MAP_OFFSET of a pointer",
        d.map_offset(p.id(), 3),
        libc::EINVAL,
    )?;
    ensure_errno(
        "MAP_OFFSET of an unknown variable",
        d.map_offset(p.id(), 9),
        libc::ENOENT,
    )?;
    // A part of the variable is fine.
    try_map(&d, offset + page(), page(), libc::MAP_SHARED).ctx("mmap of the second page")
}

/// A VIRTUAL_TMP_BUF maps through its plan's scratchpad: two that overlap
/// (one not starting on a page) both map, each from the page its first
/// byte is in, show the bytes MEM_WRITE put there, and a mapping may span
/// the plan's scratchpad but not go past it.
pub fn scratch_variables_map_through_their_scratchpad() -> TestResult {
    let d = dev()?;
    let pg = page();
    let plan = Plan::new(4 * pg, 0)
        .with(Record::virtual_tmp_buf(1, 2 * pg, Backing::Local, 0))
        .with(Record::virtual_tmp_buf(2, 100, Backing::Local, pg + 200));
    let p = d.load(&plan.to_blob().ctx("build")?, 0).ctx("PLAN_LOAD")?;
    let (o1, l1) = d.map_offset(p.id(), 1).ctx("MAP_OFFSET of var 1")?;
    let (o2, l2) = d.map_offset(p.id(), 2).ctx("MAP_OFFSET of var 2")?;
    ensure_eq("var 1's mappable bytes", l1, 2 * pg)?;
    ensure_eq("var 2's offset and bytes", (o2, l2), (o1 + pg, pg))?;
    let bytes = pattern(100, 7);
    p.write(2, 0, &bytes).ctx("MEM_WRITE of var 2")?;
    let m = p.map(2).ctx("map var 2")?;
    let mut got = vec![0u8; 100];
    m.read(200, &mut got).ctx("read through the mapping")?;
    ensure_bytes("var 2 through its mapping", &got, &bytes)?;
    try_map(&d, o1, 4 * pg, libc::MAP_SHARED).ctx("mmap of the whole scratchpad")?;
    ensure_errno(
        "a mapping past the scratchpad",
        try_map(&d, o1, 5 * pg, libc::MAP_SHARED),
        libc::EINVAL,
    )
}

/// After PLAN_UNLOAD the mapping is gone from the process: the next access
/// gets `SIGBUS` (a child checks), never the memory's next owner's bytes.
/// The same access before the unload succeeds.
pub fn access_after_unload_gets_sigbus() -> TestResult {
    let signal = child_signal(|| {
        let d = dev()?;
        let p = d
            .plan_load(&one_buffer(1, 2 * page()).to_blob().ctx("build")?, 0)
            .ctx("PLAN_LOAD")?;
        let mut m = d.map(p.plan_id, 1).ctx("map")?;
        m.write(0, b"before").ctx("write before the unload")?;
        d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
        // The freed memory goes to a new plan of the same file.
        let q = d
            .plan_load(&one_buffer(1, 2 * page()).to_blob().ctx("build")?, 0)
            .ctx("PLAN_LOAD")?;
        d.mem_write(q.plan_id, 1, 0, b"secret").ctx("MEM_WRITE")?;
        let mut got = [0u8; 6];
        let _ = m.read(0, &mut got);
        fail(format!("read {got:?} through the unloaded plan's mapping"))
    })?;
    ensure_eq("signal of the child", signal, Some(libc::SIGBUS))
}

/// A device reset takes every mapping away: the next access gets `SIGBUS`.
pub fn access_after_reset_gets_sigbus() -> TestResult {
    let signal = child_signal(|| {
        let d = dev()?;
        let p = d
            .plan_load(&one_buffer(1, page()).to_blob().ctx("build")?, 0)
            .ctx("PLAN_LOAD")?;
        let mut m = d.map(p.plan_id, 1).ctx("map")?;
        m.write(0, b"before").ctx("write before the reset")?;
        let status = d.reset(RESET_DEVICE, 0).ctx("RESET")?;
        ensure_eq("RESET status", status, 0)?;
        let mut got = [0u8; 6];
        let _ = m.read(0, &mut got);
        fail(format!("read {got:?} through a mapping the reset wiped"))
    })?;
    ensure_eq("signal of the child", signal, Some(libc::SIGBUS))
}

/// A child forked with a mapping shares it (MAP_SHARED memory is inherited):
/// what it writes, the parent reads with MEM_READ.
pub fn forked_children_share_a_mapping() -> TestResult {
    let d = dev()?;
    let p = d
        .load(&one_buffer(1, page()).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let mut m = p.map(1).ctx("map")?;
    let signal = child_signal(|| m.write(16, b"from the child").ctx("write in the child"))?;
    ensure_eq("signal of the child", signal, None)?;
    let got = read(&d, p.id(), 1, 16, 14)?;
    ensure_bytes("MEM_READ of the child's write", &got, b"from the child")
}
