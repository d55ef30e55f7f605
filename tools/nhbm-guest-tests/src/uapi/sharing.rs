//! Plans shared across files and processes (PLAN_EXPORT, PLAN_IMPORT): an
//! importer resolves to the exporter's addresses and reads its bytes,
//! writes none of them (MEM_WRITE, a writable mapping, a REMOTE or PTR
//! window onto them), and holds none of the memory; the memory lives while
//! the exporter's plan, a dma-buf or an import of it is left, and a device
//! reset takes it from importers as from the exporter.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nhbm::share::{recv_fd, send_fd};
use nhbm::uapi::*;
use nhbm::{Device, Plan, PlanHandle, Record};

use crate::fixtures::*;
use crate::ktap::*;

/// Bytes of the shared variable.
const SIZE: u64 = 256 * KIB;

/// A plan whose variable 1 holds `pattern(SIZE, seed)`.
fn weights(seed: u32) -> Plan {
    Plan::new(0, 0).with(Record::buffer(1, SIZE).data(pattern(SIZE, seed)))
}

/// `d` loads [`weights`] of `seed` and exports it: the plan and its dma-buf.
fn exported(d: &Device, seed: u32) -> Result<(PlanHandle<'_>, OwnedFd), Fail> {
    let p = d
        .load(&weights(seed).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let fd = d.plan_export(p.id()).ctx("PLAN_EXPORT")?;
    Ok((p, fd))
}

/// `mmap(2)` of `len` bytes of `d` at `offset`, shared, with `prot`: the
/// bytes it reads, or the errno of the refusal.
fn map_and_read(d: &Device, offset: u64, len: u64, prot: i32) -> io::Result<Vec<u8>> {
    // SAFETY: a new mapping at an address of the kernel's choosing, read
    // below and unmapped before return.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            prot,
            libc::MAP_SHARED,
            d.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut out = vec![0u8; len as usize];
    // SAFETY: the mapping is `len` readable bytes, not written meanwhile.
    unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), out.as_mut_ptr(), out.len()) };
    // SAFETY: adding write access to the mapping just made; it is not
    // written either way.
    let upgraded = unsafe { libc::mprotect(addr, len as usize, prot | libc::PROT_WRITE) };
    let err = io::Error::last_os_error();
    // SAFETY: the mapping made above, `len` bytes.
    unsafe { libc::munmap(addr, len as usize) };
    if upgraded == 0 && prot & libc::PROT_WRITE == 0 {
        return Err(io::Error::other(
            "mprotect gave a read-only mapping write access",
        ));
    }
    if upgraded != 0 && err.raw_os_error() != Some(libc::EACCES) {
        return Err(err);
    }
    Ok(out)
}

/// An import reads what the exporter's plan holds, at the exporter's
/// addresses, in another open file; MEM_WRITE, PLAN_EXPORT and a writable
/// mapping of it are refused with `EACCES`, a read-only mapping shows the
/// bytes and cannot be made writable, and PLAN_UNLOAD drops the import
/// only.
pub fn imports_read_the_exporters_bytes_and_write_none() -> TestResult {
    let (exp, imp) = (dev()?, dev()?);
    let (p, fd) = exported(&exp, 7)?;
    let got = imp.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?;
    ensure_eq("variables of the import", got.nr_vars, 1)?;
    ensure_eq("bytes of the import", got.bytes, p.loaded().bytes_allocated)?;
    let id = got.plan_id;
    let pa = p.resolve(1, 0, SIZE).ctx("RESOLVE")?;
    ensure_eq(
        "RESOLVE of the import",
        imp.resolve(id, 1, 0, SIZE).ctx("RESOLVE")?,
        pa,
    )?;
    let want = pattern(SIZE, 7);
    ensure_bytes(
        "MEM_READ of the import",
        &read(&imp, id, 1, 0, SIZE)?,
        &want,
    )?;
    ensure_errno(
        "MEM_WRITE of the import",
        imp.mem_write(id, 1, 0, b"x"),
        libc::EACCES,
    )?;
    ensure_errno(
        "PLAN_EXPORT of an import",
        imp.plan_export(id),
        libc::EACCES,
    )?;
    let (off, len) = imp.map_offset(id, 1).ctx("MAP_OFFSET of the import")?;
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let writable = map_and_read(&imp, off, len, rw).map(|b| b.len());
    ensure_errno("writable mmap of the import", writable, libc::EACCES)?;
    let mapped = map_and_read(&imp, off, len, libc::PROT_READ).ctx("read-only mmap")?;
    ensure_bytes("the read-only mapping", &mapped[..SIZE as usize], &want)?;
    // The exporter keeps every right over its plan.
    p.write(1, 0, b"still mine")
        .ctx("the exporter's MEM_WRITE")?;
    ensure_bytes(
        "the import after it",
        &read(&imp, id, 1, 0, 10)?,
        b"still mine",
    )?;
    imp.plan_unload(id).ctx("PLAN_UNLOAD of the import")?;
    ensure_errno("RESOLVE after it", imp.resolve(id, 1, 0, 1), libc::ENOENT)?;
    ensure_eq(
        "the exporter's RESOLVE",
        p.resolve(1, 0, SIZE).ctx("RESOLVE")?,
        pa,
    )
}

/// A REMOTE record naming an imported plan, and a PTR to that record, are
/// windows onto memory the file may only read: they resolve to the
/// exporter's address, and MEM_WRITE through them is refused (`EACCES`)
/// while the plan's own buffer takes it. The import is pinned meanwhile.
pub fn windows_onto_an_import_are_read_only() -> TestResult {
    let (exp, imp) = (dev()?, dev()?);
    let (p, fd) = exported(&exp, 8)?;
    let id = imp.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?.plan_id;
    let blob = Plan::new(0, 0)
        .with(Record::remote(2, 0, id, 1))
        .with(Record::ptr(3, 2, 0))
        .with(Record::buffer(4, 4 * KIB))
        .to_blob()
        .ctx("build")?;
    let own = imp.load(&blob, 0).ctx("PLAN_LOAD over the import")?;
    let pa = p.resolve(1, 0, SIZE).ctx("RESOLVE")?;
    ensure_eq(
        "RESOLVE of the REMOTE",
        own.resolve(2, 0, SIZE).ctx("RESOLVE")?,
        pa,
    )?;
    ensure_errno(
        "MEM_WRITE of the REMOTE",
        own.write(2, 0, b"x"),
        libc::EACCES,
    )?;
    ensure_errno("MEM_WRITE of the PTR", own.write(3, 0, b"x"), libc::EACCES)?;
    own.write(4, 0, b"x")
        .ctx("MEM_WRITE of the plan's own buffer")?;
    ensure_bytes(
        "MEM_READ of the REMOTE",
        &read(&imp, own.id(), 2, 0, SIZE)?,
        &pattern(SIZE, 8),
    )?;
    ensure_errno(
        "PLAN_UNLOAD of the pinned import",
        imp.plan_unload(id),
        libc::EBUSY,
    )?;
    ensure_eq(
        "the importer's own bytes",
        usage(&imp)?.own_bytes,
        own.loaded().bytes_allocated,
    )
}

/// Runs `f` in a forked child, which reports its outcome over a socket and
/// then, holding what `f` gave, waits for a byte from the parent ([`reap`];
/// not for the end of the socket, whose parent end later children hold
/// copies of): the parent's end and the child's pid.
fn importer<T>(f: impl FnOnce(&UnixStream) -> Result<T, Fail>) -> Result<(UnixStream, i32), Fail> {
    let (parent, child) = UnixStream::pair().ctx("socketpair")?;
    // SAFETY: the test binary runs its cases on one thread; the child runs
    // `f` and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).ctx("fork");
    }
    if pid == 0 {
        drop(parent);
        let held = f(&child);
        let report = match &held {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{e:?}"),
        };
        let _ = io::Write::write_all(&mut &child, format!("{report}\n").as_bytes());
        let _ = io::Read::read(&mut &child, &mut [0u8; 1]);
        drop(held);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    Ok((parent, pid))
}

/// The report of the importer at `sock` (see [`importer`]).
fn report(sock: &UnixStream) -> TestResult {
    let mut line = String::new();
    io::BufRead::read_line(&mut io::BufReader::new(sock), &mut line).ctx("importer's report")?;
    ensure_eq("the importer's report", line.trim(), "ok")
}

/// Lets the importer at `sock` go and waits for it.
fn reap(sock: UnixStream, pid: i32) -> TestResult {
    let _ = io::Write::write_all(&mut &sock, b"x");
    drop(sock);
    let mut status = 0;
    // SAFETY: `pid` is our child; blocks until it is gone.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(io::Error::last_os_error()).ctx("waitpid");
    }
    ensure_eq("the importer's exit status", status, 0)
}

/// What each importing process checks: its import resolves to `pa` and
/// reads `pattern(SIZE, seed)`, MEM_WRITE is refused, and its file holds
/// no memory (MEM_STATS and fdinfo). The file, with the import, is kept.
fn import_in_child(fd: OwnedFd, pa: u64, seed: u32) -> Result<Device, Fail> {
    let d = dev()?;
    let id = d.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?.plan_id;
    drop(fd);
    ensure_eq(
        "RESOLVE in the importer",
        d.resolve(id, 1, 0, SIZE).ctx("RESOLVE")?,
        pa,
    )?;
    ensure_bytes(
        "MEM_READ in the importer",
        &read(&d, id, 1, 0, SIZE)?,
        &pattern(SIZE, seed),
    )?;
    ensure_errno(
        "MEM_WRITE in the importer",
        d.mem_write(id, 1, 0, b"x"),
        libc::EACCES,
    )?;
    ensure_eq("the importer's own bytes", usage(&d)?.own_bytes, 0)?;
    let channels = info(&d)?.nr_channels as usize;
    let shown = super::fdinfo::per_channel(&d, channels)?;
    ensure_eq("the importer's fdinfo", shown, vec![0; channels])?;
    Ok(d)
}

/// A forked child (the dma-buf inherited) and processes that only receive
/// it over a Unix socket (SCM_RIGHTS) import the weights: each resolves to
/// the exporter's address, reads its bytes and cannot write them, and the
/// device's memory in use grows once for all of them.
pub fn importing_processes_share_one_copy() -> TestResult {
    let d = dev()?;
    let base = usage(&d)?.used;
    let (p, fd) = exported(&d, 9)?;
    let pa = p.resolve(1, 0, SIZE).ctx("RESOLVE")?;
    let bytes = p.loaded().bytes_allocated;
    let mut children = Vec::new();
    for i in 0..3 {
        let child = if i == 0 {
            let fd = fd.try_clone().ctx("dup")?;
            importer(move |_| import_in_child(fd, pa, 9))?
        } else {
            // Forked before the descriptor is sent: it has no copy of its own.
            importer(move |s| import_in_child(recv_fd(s).ctx("recvmsg")?, pa, 9))?
        };
        if i > 0 {
            send_fd(&child.0, fd.as_fd()).ctx("sendmsg")?;
        }
        children.push(child);
    }
    drop(fd);
    let mut outcome = Ok(());
    for (sock, _) in &children {
        outcome = outcome.and_then(|()| report(sock));
    }
    let used = usage(&d)?.used;
    for (sock, pid) in children {
        reap(sock, pid)?;
    }
    outcome?;
    ensure_eq("memory in use with three importers", used, base + bytes)
}

/// The exporter's unload, and then SIGKILL of an exporting process, leave
/// importers their bytes: the memory is freed when the last import and
/// dma-buf of it are gone, not before.
pub fn imports_outlive_their_exporter() -> TestResult {
    let (exp, imp) = (dev()?, dev()?);
    let base = usage(&imp)?.used;
    let (p, fd) = exported(&exp, 10)?;
    let bytes = p.loaded().bytes_allocated;
    let id = imp.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?.plan_id;
    p.unload().ctx("the exporter's PLAN_UNLOAD")?;
    drop(fd);
    ensure_bytes(
        "MEM_READ after the unload",
        &read(&imp, id, 1, 0, SIZE)?,
        &pattern(SIZE, 10),
    )?;
    ensure_eq(
        "memory in use after the unload",
        usage(&imp)?.used,
        base + bytes,
    )?;
    imp.plan_unload(id).ctx("PLAN_UNLOAD of the import")?;
    ensure_eq(
        "memory in use once the import is gone",
        usage(&imp)?.used,
        base,
    )?;
    // An exporting process killed while an import lives.
    let (sock, pid) = importer(|s| {
        let d = dev()?;
        let (p, fd) = exported(&d, 11)?;
        send_fd(s, fd.as_fd()).ctx("sendmsg")?;
        Ok((p.keep(), d))
    })?;
    let fd = recv_fd(&sock).ctx("recvmsg")?;
    report(&sock)?;
    let id = imp.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?.plan_id;
    // SAFETY: `pid` is our child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut status = 0;
    // SAFETY: `pid` is our child; blocks until it is gone.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure_bytes(
        "MEM_READ after SIGKILL",
        &read(&imp, id, 1, 0, SIZE)?,
        &pattern(SIZE, 11),
    )?;
    drop(fd);
    imp.plan_unload(id).ctx("PLAN_UNLOAD of the import")?;
    ensure_eq("memory in use at the end", usage(&imp)?.used, base)
}

/// PLAN_IMPORT refuses what is not an exported plan of this device, and
/// both calls refuse bad arguments, changing nothing: no descriptor
/// (`EBADF`), a file that is no dma-buf or another exporter's dma-buf
/// (`EINVAL`), a plan of the other device (`EXDEV`, where there is one),
/// flags (`EINVAL`), an unknown plan (`ENOENT`).
pub fn foreign_descriptors_are_refused() -> TestResult {
    let d = dev()?;
    let before = usage(&d)?;
    let import = |fd: RawFd| {
        let mut arg = PlanImport {
            fd,
            ..PlanImport::default()
        };
        // SAFETY: `arg` is the ioctl's argument, valid for its duration.
        unsafe { d.ioctl_raw(IOC_PLAN_IMPORT, (&raw mut arg).cast()) }
    };
    ensure_errno("PLAN_IMPORT of no descriptor", import(-1), libc::EBADF)?;
    let null = std::fs::File::open("/dev/null").ctx("open /dev/null")?;
    ensure_errno(
        "PLAN_IMPORT of /dev/null",
        import(null.as_raw_fd()),
        libc::EINVAL,
    )?;
    if let Some(heap) = system_heap_buffer()? {
        ensure_errno(
            "PLAN_IMPORT of a heap's dma-buf",
            import(heap.as_raw_fd()),
            libc::EINVAL,
        )?;
    }
    // The other device's plan, where there is a second device (a Neuron
    // host's single function has none).
    if let Ok(other) = Device::open(device_index() + 1) {
        let (_p, fd) = exported(&other, 12)?;
        ensure_errno(
            "PLAN_IMPORT of the other device's plan",
            import(fd.as_raw_fd()),
            libc::EXDEV,
        )?;
    }
    let (q, fd) = exported(&d, 13)?;
    let mut arg = PlanImport {
        fd: fd.as_raw_fd(),
        flags: 1,
        ..PlanImport::default()
    };
    // SAFETY: `arg` is the ioctl's argument, valid for its duration.
    let r = unsafe { d.ioctl_raw(IOC_PLAN_IMPORT, (&raw mut arg).cast()) };
    ensure_errno("PLAN_IMPORT with flags", r, libc::EINVAL)?;
    let mut arg = PlanExport {
        plan_id: q.id(),
        flags: 1,
        ..PlanExport::default()
    };
    // SAFETY: as above.
    let r = unsafe { d.ioctl_raw(IOC_PLAN_EXPORT, (&raw mut arg).cast()) };
    ensure_errno("PLAN_EXPORT with flags", r, libc::EINVAL)?;
    ensure_errno(
        "PLAN_EXPORT of no plan",
        d.plan_export(q.id() + 1000),
        libc::ENOENT,
    )?;
    drop((q, fd));
    ensure_eq("MEM_STATS after the refusals", usage(&d)?, before)
}

/// `struct dma_heap_allocation_data` of `<linux/dma-heap.h>`.
#[repr(C)]
struct HeapAlloc {
    /// Bytes to allocate.
    len: u64,
    /// Out: the dma-buf's descriptor.
    fd: u32,
    /// Flags of that descriptor.
    fd_flags: u32,
    /// Flags of the heap (none).
    heap_flags: u64,
}

/// A dma-buf of the kernel's system heap (another exporter), if the kernel
/// has one.
fn system_heap_buffer() -> Result<Option<OwnedFd>, Fail> {
    let heap = match std::fs::File::open("/dev/dma_heap/system") {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("open /dev/dma_heap/system"),
    };
    let mut arg = HeapAlloc {
        len: 4096,
        fd: 0,
        fd_flags: (libc::O_RDWR | libc::O_CLOEXEC) as u32,
        heap_flags: 0,
    };
    // DMA_HEAP_IOCTL_ALLOC: _IOWR('H', 0x0, struct dma_heap_allocation_data).
    let req = (3u64 << 30) | ((size_of::<HeapAlloc>() as u64) << 16) | ((b'H' as u64) << 8);
    // SAFETY: `arg` is the 24-byte argument the ioctl reads and writes.
    if unsafe { libc::ioctl(heap.as_raw_fd(), req as _, &mut arg) } != 0 {
        return Err(io::Error::last_os_error()).ctx("DMA_HEAP_IOCTL_ALLOC");
    }
    // SAFETY: the ioctl returned a new descriptor, ours.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(arg.fd as RawFd) }))
}

/// A device reset takes the exporter's memory from its importers too:
/// their transfers and RESOLVE answer `EIO`, and a mapping of the import
/// made before the reset gets `SIGBUS`.
pub fn a_device_reset_revokes_imports() -> TestResult {
    let signal = super::mapping::child_signal(|| {
        let (exp, imp) = (dev()?, dev()?);
        let (_p, fd) = exported(&exp, 14)?;
        let id = imp.plan_import(fd.as_fd()).ctx("PLAN_IMPORT")?.plan_id;
        let (off, len) = imp.map_offset(id, 1).ctx("MAP_OFFSET")?;
        // SAFETY: a new read-only mapping at an address of the kernel's
        // choosing, only read below; the child ends without unmapping it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                imp.as_raw_fd(),
                off as libc::off_t,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).ctx("read-only mmap");
        }
        // SAFETY: the mapping's first byte, readable.
        let before = unsafe { at.cast::<u8>().read_volatile() };
        let status = exp.reset(RESET_DEVICE, 0).ctx("RESET")?;
        ensure_eq("RESET status", status, 0)?;
        ensure_errno(
            "RESOLVE after the reset",
            imp.resolve(id, 1, 0, 1),
            libc::EIO,
        )?;
        // SAFETY: as above; the reset took the page away, so this faults.
        let after = unsafe { at.cast::<u8>().read_volatile() };
        fail(format!(
            "read {before} then {after} through an import the reset wiped"
        ))
    })?;
    ensure_eq("signal of the child", signal, Some(libc::SIGBUS))
}
