//! Bytes moved by the function's DMA engine, as the reference moves them:
//! every transfer and scrub goes through the model's UDMA queue (its
//! counters say so), lands at the device address, survives a stalled or
//! faulting engine with a clear errno and nothing half-loaded, lets a
//! killed reader die, sets the queue up again after a device reset, and
//! keeps two tenants' bytes apart.

use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::Device;

use super::function::*;
use super::{control, function, kill_and_reap, node_of, on_cpu_path, wait_until};
use crate::fixtures::{dev, device_index, one_buffer, pattern, KIB, MIB};
use crate::ktap::{ensure, ensure_eq, ensure_errno, fail, Ctx, Fail, TestResult};

/// Runs `f` with the engines as `script` leaves them, then lets them go.
fn with_engines<T>(
    script: impl FnOnce(&Control),
    f: impl FnOnce(&Control) -> Result<T, Fail>,
) -> Result<T, Fail> {
    let c = control()?;
    script(&c);
    let r = f(&c);
    c.write(DMA_STALL, 0);
    r
}

/// A user transfer's piece by DMA (the module's `BULK_PIECE`): its pages
/// are pinned and posted together.
const USER_PIECE: u64 = 16 * MIB;

/// The physical address of every page of `buf`, from `/proc/self/pagemap`
/// (the suite runs as root, which sees frame numbers).
fn frames(buf: &[u8]) -> Result<Vec<u64>, Fail> {
    use std::os::unix::fs::FileExt;
    let map = std::fs::File::open("/proc/self/pagemap").ctx("pagemap")?;
    let first = buf.as_ptr() as u64 / 4096;
    let last = (buf.as_ptr() as u64 + buf.len() as u64 - 1) / 4096;
    (first..=last)
        .map(|vp| {
            let mut e = [0u8; 8];
            map.read_exact_at(&mut e, vp * 8).ctx("pagemap entry")?;
            let e = u64::from_le_bytes(e);
            ensure(e >> 63 == 1, || format!("page {vp:#x} not present"))?;
            Ok((e & ((1 << 55) - 1)) * 4096)
        })
        .collect()
}

/// Descriptor pairs a transfer of `buf` to or from device address `dev`
/// posts when the engine moves the user pages in place: in each
/// [`USER_PIECE`] of the device range, one pair per run of physically
/// contiguous bytes (at most 64 KiB: the guest has no IOMMU, so a DMA
/// address is the physical one) and the marker pair. Through a bounce
/// buffer it would be two pairs per 64 KiB.
fn zero_copy_pairs(buf: &[u8], dev: u64) -> Result<u64, Fail> {
    let frames = frames(buf)?;
    let base = buf.as_ptr() as u64;
    let phys = |i: u64| frames[((base + i) / 4096 - base / 4096) as usize] + (base + i) % 4096;
    let (mut pairs, mut i, len) = (0, 0u64, buf.len() as u64);
    while i < len {
        let piece_end = len.min(i + USER_PIECE - (dev + i) % USER_PIECE);
        pairs += 1; // the marker
        let mut run: Option<(u64, u64)> = None; // (next physical address, bytes)
        while i < piece_end {
            let n = (4096 - (base + i) % 4096).min(piece_end - i);
            run = match run {
                Some((next, bytes)) if next == phys(i) && bytes + n <= 64 * KIB => {
                    Some((next + n, bytes + n))
                }
                _ => {
                    pairs += 1;
                    Some((phys(i) + n, n))
                }
            };
            i += n;
        }
    }
    Ok(pairs)
}

/// MEM_WRITE and MEM_READ with an unaligned head and tail across several
/// 64 KiB descriptors and across a piece's boundary of the device
/// address, and of exactly 64 KiB: the engine
/// moves the user pages in place (its pair counter grows by exactly the
/// pairs of the buffer's physical runs, which a bounce buffer would not
/// give), the model finds the bytes at the device address, MEM_READ
/// brings them back, and a new buffer's scrub goes through the engine too.
pub fn transfers_go_through_the_dma_engine() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let len = 2 * MIB;
    let p = d
        .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
    for (off, n) in [
        (3u64, 3 * 64 * KIB + 5),
        (MIB - 5000, 70 * KIB + 3),
        (64 * KIB, 64 * KIB),
    ] {
        let w = pattern(n, off as u32);
        let before = c.read(DMA_PAIRS);
        d.mem_write(p.plan_id, 1, off, &w).ctx("MEM_WRITE")?;
        ensure_eq(
            &format!("pairs for {n} bytes written at {off}"),
            u64::from(c.read(DMA_PAIRS) - before),
            zero_copy_pairs(&w, pa + off)?,
        )?;
        for at in [
            off.next_multiple_of(4),
            (off + n / 2) & !3,
            (off + n - 4) & !3,
        ] {
            let i = (at - off) as usize;
            let want = u32::from_le_bytes(w[i..i + 4].try_into().unwrap_or_default());
            ensure_eq(&format!("HBM at +{at}"), c.hbm_read(pa + at), want)?;
        }
        let mut back = vec![0u8; n as usize];
        let before = c.read(DMA_PAIRS);
        d.mem_read(p.plan_id, 1, off, &mut back).ctx("MEM_READ")?;
        ensure(back == w, || {
            format!("MEM_READ of {n} bytes at {off} differs")
        })?;
        ensure_eq(
            &format!("pairs for {n} bytes read at {off}"),
            u64::from(c.read(DMA_PAIRS) - before),
            zero_copy_pairs(&back, pa + off)?,
        )?;
    }
    let before = c.read(DMA_PAIRS);
    let q = d
        .plan_load(&one_buffer(1, MIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD of 1 MiB")?;
    ensure(c.read(DMA_PAIRS) - before >= 16, || {
        format!("a 1 MiB scrub moved {} pairs", c.read(DMA_PAIRS) - before)
    })?;
    d.plan_unload(q.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// User memory that cannot be pinned (a mapping of the device's own BAR4,
/// I/O memory with no pages) still transfers: MEM_WRITE from it and
/// MEM_READ into it go through the bounce buffer (two pairs per 64 KiB;
/// none on the CPU path, which copies the bounce buffer itself) and the
/// bytes land.
pub fn memory_that_cannot_be_pinned_goes_through_the_bounce_buffer() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let len = 128 * KIB;
    let blob = one_buffer(1, len).to_blob().ctx("build")?;
    let (src, dst) = (
        d.plan_load(&blob, 0).ctx("PLAN_LOAD")?,
        d.plan_load(&blob, 0).ctx("PLAN_LOAD")?,
    );
    let mut m = d.map(src.plan_id, 1).ctx("map")?;
    let w = pattern(len, 77);
    m.write(0, &w).ctx("write the mapping")?;
    let before = c.read(DMA_PAIRS);
    d.mem_write(dst.plan_id, 1, 0, &m[..len as usize])
        .ctx("MEM_WRITE from the mapping")?;
    let pairs = if on_cpu_path() { 0 } else { 4 };
    ensure_eq(
        "pairs of the bounced write",
        c.read(DMA_PAIRS) - before,
        pairs,
    )?;
    let pa = d.resolve(dst.plan_id, 1, 0, len).ctx("RESOLVE")?;
    ensure_eq(
        "HBM at +64 KiB",
        c.hbm_read(pa + 64 * KIB),
        u32::from_le_bytes(w[65536..65540].try_into().unwrap_or_default()),
    )?;
    m.write(0, &[0u8; 4096]).ctx("clear the mapping")?;
    d.mem_read(dst.plan_id, 1, 0, &mut m[..len as usize])
        .ctx("MEM_READ into the mapping")?;
    ensure(m[..len as usize] == w[..], || {
        "the mapping read other bytes".to_string()
    })?;
    drop(m);
    d.plan_unload(dst.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(src.plan_id).ctx("PLAN_UNLOAD")
}

/// With the engine stalled, MEM_WRITE answers ETIMEDOUT within its bound
/// (2 s a batch, well under 5 s), and once the engine runs again the same
/// file's next transfer works: the driver stopped and set the queue up
/// again.
pub fn a_stalled_engine_times_out_and_the_next_transfer_works() -> TestResult {
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, 64 * KIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    with_engines(
        |c| c.write(DMA_STALL, 1),
        |_| {
            let t = Instant::now();
            let r = d.mem_write(p.plan_id, 1, 0, b"stalled");
            ensure_errno("MEM_WRITE on a stalled engine", r, libc::ETIMEDOUT)?;
            ensure(t.elapsed() < Duration::from_secs(5), || {
                format!("the timeout took {:?}", t.elapsed())
            })
        },
    )?;
    d.mem_write(p.plan_id, 1, 0, b"flowing")
        .ctx("MEM_WRITE after")?;
    let mut b = [0u8; 7];
    d.mem_read(p.plan_id, 1, 0, &mut b).ctx("MEM_READ after")?;
    ensure_eq("bytes after the stall", &b, b"flowing")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A descriptor the engine rejects (a fault after two pairs) in the middle
/// of a load's scrub fails the load and leaves nothing of it: no plan, no
/// chunk, no byte of the pools; the next load works.
pub fn an_engine_fault_leaves_no_partial_plan() -> TestResult {
    let d = dev()?;
    let blob = one_buffer(1, 2 * MIB).to_blob().ctx("build")?;
    let before = d.mem_stats().ctx("MEM_STATS")?;
    let faults = with_engines(
        |c| c.write(DMA_FAIL_AFTER, 2),
        |c| {
            let f = c.read(DMA_FAULTS);
            let r = d.plan_load(&blob, 0);
            ensure_errno("PLAN_LOAD through a faulting engine", r, libc::ETIMEDOUT)?;
            Ok(c.read(DMA_FAULTS) - f)
        },
    )?;
    ensure_eq("queues the model stopped", faults, 1)?;
    let after = d.mem_stats().ctx("MEM_STATS")?;
    ensure_eq("own plans", after.own_plans, before.own_plans)?;
    ensure_eq("own bytes", after.own_bytes, before.own_bytes)?;
    ensure_eq(
        "pool 0 in use",
        after.pools[0][0].used,
        before.pools[0][0].used,
    )?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD after the fault")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A process SIGKILLed inside a 64 MiB MEM_READ dies within a second (the
/// transfer stops at its next piece, whose batch is short) and leaves no
/// page pinned.
pub fn a_killed_reader_dies_at_its_next_piece() -> TestResult {
    let len = 64 * MIB;
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let c = control()?;
    let pairs = c.read(DMA_PAIRS);
    let (pinned, unpinned) = pins()?;
    // SAFETY: the case runs on the suite's only thread; the child reads
    // through the inherited file and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return fail(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let mut buf = vec![0u8; len as usize];
        let ok = d.mem_read(p.plan_id, 1, 0, &mut buf).is_ok();
        // SAFETY: ends the child without the parent's destructors.
        unsafe { libc::_exit(i32::from(!ok)) };
    }
    let started = wait_until(Duration::from_secs(5), || c.read(DMA_PAIRS) > pairs + 8);
    let (status, died_in) = kill_and_reap(pid);
    ensure(started, || {
        "the child's read never reached the engine".into()
    })?;
    ensure(libc::WIFSIGNALED(status), || {
        format!("the reader finished before the kill (status {status:#x})")
    })?;
    ensure(died_in < Duration::from_secs(1), || {
        format!("the killed reader took {died_in:?} to die")
    })?;
    let (a, u) = pins()?;
    ensure_eq(
        "pages the reader left pinned",
        (a - pinned) - (u - unpinned),
        0,
    )?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// After a device reset (which returns the engine's queues to their reset
/// state), a new plan's transfers work and land: the driver set the queue
/// up again before using it.
pub fn a_device_reset_sets_the_queue_up_again() -> TestResult {
    let d = dev()?;
    let c = control()?;
    let blob = one_buffer(1, 64 * KIB).to_blob().ctx("build")?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    d.mem_write(p.plan_id, 1, 0, b"before").ctx("MEM_WRITE")?;
    ensure_eq("RESET", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)?;
    let q = d.plan_load(&blob, 0).ctx("PLAN_LOAD after the reset")?;
    let pa = d.resolve(q.plan_id, 1, 0, 8).ctx("RESOLVE")?;
    d.mem_write(q.plan_id, 1, 0, b"afterall")
        .ctx("MEM_WRITE after the reset")?;
    ensure_eq(
        "HBM after the reset",
        c.hbm_read(pa + 4),
        u32::from_le_bytes(*b"rall"),
    )?;
    d.plan_unload(q.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A device reset in the middle of a 32 MiB MEM_WRITE: the write ends
/// with EIO (its plan's HBM is gone) or, had it finished first, 0; no page
/// stays pinned, the engine is left with nothing half-done, and a new
/// plan's bytes land.
pub fn a_device_reset_in_the_middle_of_a_large_upload() -> TestResult {
    let len = 32 * MIB;
    let d = dev()?;
    let c = control()?;
    let blob = one_buffer(1, len).to_blob().ctx("build")?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let w = pattern(len, 9);
    let (pinned, unpinned) = pins()?;
    let pairs = c.read(DMA_PAIRS);
    let (write, reset) = std::thread::scope(|s| {
        let t = s.spawn(|| d.mem_write(p.plan_id, 1, 0, &w));
        let started = wait_until(Duration::from_secs(5), || c.read(DMA_PAIRS) > pairs + 16);
        let reset = started.then(|| d.reset(RESET_DEVICE, 0));
        (t.join().ok(), reset)
    });
    match reset {
        Some(r) => ensure_eq("RESET", r.ctx("RESET")?, 0)?,
        None => return fail("the upload never reached the engine"),
    }
    match write {
        Some(Ok(())) => {}
        Some(r) => ensure_errno("MEM_WRITE cut by the reset", r, libc::EIO)?,
        None => return fail("the writer panicked"),
    }
    let (a, u) = pins()?;
    ensure_eq("pages unpinned as pinned", u - unpinned, a - pinned)?;
    let q = d.plan_load(&blob, 0).ctx("PLAN_LOAD after the reset")?;
    let pa = d.resolve(q.plan_id, 1, 0, len).ctx("RESOLVE")?;
    d.mem_write(q.plan_id, 1, len - 8, b"landed!!")
        .ctx("MEM_WRITE after")?;
    ensure_eq(
        "HBM after the reset",
        c.hbm_read(pa + len - 4),
        u32::from_le_bytes(*b"ed!!"),
    )?;
    d.plan_unload(q.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// Descriptor pairs the module posts at one doorbell at most (the
/// reference's 2031) and the marker pair behind them.
const BATCH_DESCS: u32 = 2031 + 1;

/// `len` bytes of `pattern(len, seed)` in pages no two of which are
/// physically contiguous (the even pages are faulted in before the odd
/// ones), so each page is a descriptor pair of its own.
fn scattered(len: u64, seed: u32) -> Vec<u8> {
    let mut w = vec![0u8; len as usize];
    for first in [0, 4096] {
        for at in (first..w.len()).step_by(8192) {
            w[at] = 1;
        }
    }
    w.copy_from_slice(&pattern(len, seed));
    w
}

/// A 32 MiB MEM_WRITE from scattered pages (pieces of more pairs than one
/// batch holds) posts the next batch of a piece while the engine still
/// holds the one before it: with the engine stalled, the queue comes to
/// hold more descriptors than one batch has, and once the engine runs
/// again every byte lands.
pub fn a_piece_posts_its_next_batch_while_one_runs() -> TestResult {
    let len = 32 * MIB;
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let pa = d.resolve(p.plan_id, 1, 0, len).ctx("RESOLVE")?;
    let w = scattered(len, 12);
    // At most three pieces: one of them has more pairs than a batch.
    let pairs = zero_copy_pairs(&w, pa)?;
    ensure(pairs > 3 * u64::from(BATCH_DESCS), || {
        format!("the buffer's pages make only {pairs} pairs")
    })?;
    let (write, most) = with_engines(
        |c| {
            c.write(DMA_MOST_PENDING, 0);
            c.write(DMA_STALL, 1);
        },
        |c| {
            Ok(std::thread::scope(|s| {
                let t = s.spawn(|| d.mem_write(p.plan_id, 1, 0, &w));
                // Under the 2 s a batch may wait.
                wait_until(Duration::from_millis(1500), || {
                    c.read(DMA_MOST_PENDING) > BATCH_DESCS
                });
                let most = c.read(DMA_MOST_PENDING);
                c.write(DMA_STALL, 0);
                (t.join().ok(), most)
            }))
        },
    )?;
    ensure(most > BATCH_DESCS, || {
        format!("at most {most} descriptors posted at once, a batch is {BATCH_DESCS}")
    })?;
    match write {
        Some(r) => r.ctx("MEM_WRITE")?,
        None => return fail("the writer panicked"),
    }
    let c = control()?;
    for at in [0, len / 2 + 4, len - 4] {
        let i = at as usize;
        let want = u32::from_le_bytes(w[i..i + 4].try_into().unwrap_or_default());
        ensure_eq(&format!("HBM at +{at}"), c.hbm_read(pa + at), want)?;
    }
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// The batches of a piece staged while the engine still holds the one
/// before share one pair of doorbells: a scattered piece of three batches,
/// written with the engine stalled, is rung twice (its first batch at
/// once, the two staged behind it together at the end), not three times,
/// and every byte lands once the engine runs again.
pub fn batches_staged_behind_a_running_one_share_their_doorbells() -> TestResult {
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, 2 * USER_PIECE).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let pa = d.resolve(p.plan_id, 1, 0, 2 * USER_PIECE).ctx("RESOLVE")?;
    // One piece: from a piece boundary, less a page than a piece.
    let off = (USER_PIECE - pa % USER_PIECE) % USER_PIECE;
    let len = USER_PIECE - 4 * KIB;
    let w = scattered(len, 14);
    // The marker pairs zero_copy_pairs counts: one a piece.
    let pairs = zero_copy_pairs(&w, pa + off)? - 1;
    let batch = u64::from(BATCH_DESCS) - 1;
    ensure(pairs > 2 * batch && pairs <= 3 * batch, || {
        format!("the buffer's pages make {pairs} pairs, not three batches")
    })?;
    let all = u32::try_from(pairs + 3).unwrap_or(u32::MAX);
    let (write, rung) = with_engines(
        |c| {
            c.write(DMA_MOST_PENDING, 0);
            c.write(DMA_STALL, 1);
        },
        |c| {
            let before = c.read(DMA_DOORBELLS);
            Ok(std::thread::scope(|s| {
                let t = s.spawn(|| d.mem_write(p.plan_id, 1, off, &w));
                // Under the 2 s a batch may wait.
                wait_until(Duration::from_millis(1500), || {
                    c.read(DMA_MOST_PENDING) >= all
                });
                c.write(DMA_STALL, 0);
                let write = t.join().ok();
                (write, c.read(DMA_DOORBELLS).wrapping_sub(before))
            }))
        },
    )?;
    match write {
        Some(r) => r.ctx("MEM_WRITE")?,
        None => return fail("the writer panicked"),
    }
    ensure_eq("doorbells (S2M and M2S) for three batches", rung, 4)?;
    let c = control()?;
    for at in [0, len / 2 + 4, len - 4] {
        let i = at as usize;
        let want = u32::from_le_bytes(w[i..i + 4].try_into().unwrap_or_default());
        ensure_eq(&format!("HBM at +{at}"), c.hbm_read(pa + off + at), want)?;
    }
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// One tenant's rounds of write-then-read of its own pattern.
fn tenant_rounds(d: &Device, plan_id: u32, seed: u32) -> Result<(), String> {
    for round in 0..24u32 {
        let w = pattern(200 * KIB, seed + round);
        d.mem_write(plan_id, 1, 0, &w)
            .map_err(|e| format!("MEM_WRITE: {e}"))?;
        let mut back = vec![0u8; w.len()];
        d.mem_read(plan_id, 1, 0, &mut back)
            .map_err(|e| format!("MEM_READ: {e}"))?;
        if back != w {
            return Err(format!("tenant {seed}: round {round} read other bytes"));
        }
    }
    Ok(())
}

/// Two tenants (two open files, two threads) writing and reading their own
/// buffers at once through the one queue each get their own bytes back,
/// every round.
pub fn two_tenants_transferring_at_once_get_their_own_bytes() -> TestResult {
    let blob = one_buffer(1, 200 * KIB).to_blob().ctx("build")?;
    let (a, b) = (dev()?, dev()?);
    let pa = a.plan_load(&blob, 0).ctx("PLAN_LOAD a")?;
    let pb = b.plan_load(&blob, 0).ctx("PLAN_LOAD b")?;
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| tenant_rounds(&a, pa.plan_id, 100));
        let rb = tenant_rounds(&b, pb.plan_id, 200);
        (
            ta.join()
                .unwrap_or_else(|_| Err("tenant a panicked".into())),
            rb,
        )
    });
    if let Err(e) = ra.and(rb) {
        return fail(e);
    }
    a.plan_unload(pa.plan_id).ctx("PLAN_UNLOAD a")?;
    b.plan_unload(pb.plan_id).ctx("PLAN_UNLOAD b")
}

/// Pages pinned and unpinned in the whole system (`/proc/vmstat`, after
/// folding every CPU's pending counts in), in that order: nothing in the
/// guest but the module pins pages.
fn pins() -> Result<(u64, u64), Fail> {
    std::fs::write("/proc/sys/vm/stat_refresh", "1").ctx("vm.stat_refresh")?;
    let vmstat = std::fs::read_to_string("/proc/vmstat").ctx("/proc/vmstat")?;
    let field = |name: &str| {
        vmstat
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .ok_or_else(|| Fail::Fail(format!("no {name} in /proc/vmstat")))
    };
    Ok((
        field("nr_foll_pin_acquired ")?,
        field("nr_foll_pin_released ")?,
    ))
}

/// Every page a transfer pins is unpinned, whatever the transfer's end:
/// after a write and a read that complete, a write that times out on a
/// stalled engine and a read into memory that cannot be written (EFAULT),
/// the system's pin and unpin counts have grown alike.
pub fn pinned_pages_are_all_unpinned() -> TestResult {
    let d = dev()?;
    let len = 3 * MIB;
    let p = d
        .plan_load(&one_buffer(1, len).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let (acquired, released) = pins()?;
    let w = pattern(len, 5);
    d.mem_write(p.plan_id, 1, 0, &w).ctx("MEM_WRITE")?;
    let mut back = vec![0u8; len as usize];
    d.mem_read(p.plan_id, 1, 0, &mut back).ctx("MEM_READ")?;
    ensure(back == w, || "MEM_READ differs".to_string())?;
    with_engines(
        |c| c.write(DMA_STALL, 1),
        |_| {
            let r = d.mem_write(p.plan_id, 1, 0, &w[..MIB as usize]);
            ensure_errno("MEM_WRITE on a stalled engine", r, libc::ETIMEDOUT)
        },
    )?;
    // SAFETY: a new private read-only mapping at an address of the
    // kernel's choosing; it touches no memory of ours.
    let ro = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ro == libc::MAP_FAILED {
        return fail("mmap of a read-only page");
    }
    // SAFETY: the page stays mapped until the munmap below; the module is
    // asked to write it and must refuse (EFAULT) without writing.
    let page = unsafe { std::slice::from_raw_parts_mut(ro.cast::<u8>(), 4096) };
    let r = d.mem_read(p.plan_id, 1, 0, page);
    // SAFETY: unmaps the page mapped above, not used after.
    unsafe { libc::munmap(ro, 4096) };
    ensure_errno("MEM_READ into read-only memory", r, libc::EFAULT)?;
    let (a, r) = pins()?;
    ensure(a - acquired >= 2 * len / 4096, || {
        format!("only {} pages were pinned", a - acquired)
    })?;
    ensure_eq("pages unpinned as pinned", r - released, a - acquired)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A MEM_WRITE pins what its path needs and no more: on the CPU path no
/// page (the module reads the process's memory with page faults off and
/// faults a missing page in outside the reset gate), on the engine's the
/// pages it reads. The buffer's odd pages were never touched, so the CPU
/// path meets a missing page at every other one; every byte lands either
/// way.
pub fn cpu_writes_pin_nothing_and_fault_missing_pages_in() -> TestResult {
    let d = dev()?;
    let len = 2 * MIB as usize;
    let p = d
        .plan_load(&one_buffer(1, len as u64).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    // SAFETY: a new private anonymous mapping at an address of the
    // kernel's choosing; it touches no memory of ours.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return fail("mmap of the source");
    }
    // SAFETY: the mapping stays until the munmap below, and only this
    // slice reaches it.
    let src = unsafe { std::slice::from_raw_parts_mut(at.cast::<u8>(), len) };
    let w = pattern(len as u64, 21);
    let mut want = vec![0u8; len];
    for page in (0..len).step_by(8192) {
        src[page..page + 4096].copy_from_slice(&w[page..page + 4096]);
        want[page..page + 4096].copy_from_slice(&w[page..page + 4096]);
    }
    let (before, _) = pins()?;
    let r = d.mem_write(p.plan_id, 1, 0, src);
    let (after, _) = pins()?;
    // SAFETY: unmaps the mapping made above; `src` is not used after.
    unsafe { libc::munmap(at, len) };
    r.ctx("MEM_WRITE")?;
    let pinned = after - before;
    if on_cpu_path() {
        ensure_eq("pages the write pinned", pinned, 0)?;
    } else {
        // The pages written; a missing one is read as the zero page,
        // whose pins the system does not count.
        ensure(pinned >= (len / 8192) as u64, || {
            format!("the engine's write pinned only {pinned} pages")
        })?;
    }
    let mut back = vec![0u8; len];
    d.mem_read(p.plan_id, 1, 0, &mut back).ctx("MEM_READ")?;
    ensure(back == want, || {
        "MEM_READ differs from the source".to_string()
    })?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// Unbinding the function in the middle of a 32 MiB MEM_WRITE waits the
/// write out: it ends with ENODEV (or 0, had it finished first) before
/// the queue's memory and the pinned pages go; the function bound again
/// moves bytes.
pub fn an_unbind_in_the_middle_of_a_large_upload() -> TestResult {
    let len = 32 * MIB;
    let f = function()?;
    let c = control()?;
    let d = dev()?;
    let blob = one_buffer(1, len).to_blob().ctx("build")?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let w = pattern(len, 11);
    let (pinned, unpinned) = pins()?;
    let pairs = c.read(DMA_PAIRS);
    let drv = "/sys/bus/pci/drivers/neuron_hbm";
    let (write, unbound) = std::thread::scope(|s| {
        let t = s.spawn(|| d.mem_write(p.plan_id, 1, 0, &w));
        let started = wait_until(Duration::from_secs(5), || c.read(DMA_PAIRS) > pairs + 16);
        let unbound = started.then(|| std::fs::write(format!("{drv}/unbind"), f.address()));
        (t.join().ok(), unbound)
    });
    let r = match (write, unbound) {
        (_, None) => fail("the upload never reached the engine"),
        (_, Some(Err(e))) => fail(format!("unbind: {e}")),
        (None, _) => fail("the writer panicked"),
        (Some(Ok(())), _) => Ok(()),
        (Some(r), _) => ensure_errno("MEM_WRITE cut by the unbind", r, libc::ENODEV),
    };
    let (a, u) = pins()?;
    drop(d);
    std::fs::write(format!("{drv}/bind"), f.address()).ctx("bind")?;
    r?;
    ensure_eq("pages unpinned as pinned", u - unpinned, a - pinned)?;
    ensure_eq("node after binding again", node_of(&f)?, device_index())?;
    let d = dev()?;
    let q = d
        .plan_load(&one_buffer(1, MIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD after")?;
    let pa = d.resolve(q.plan_id, 1, 0, 8).ctx("RESOLVE")?;
    d.mem_write(q.plan_id, 1, 0, b"rebound!")
        .ctx("MEM_WRITE after")?;
    ensure_eq(
        "HBM after binding again",
        c.hbm_read(pa + 4),
        u32::from_le_bytes(*b"und!"),
    )?;
    d.plan_unload(q.plan_id).ctx("PLAN_UNLOAD")
}

/// A plan of 64 payloads of 16 KiB uploads them together: the engine
/// moves exactly the pairs of the payloads' physical runs and one marker
/// for all of them (64 transfers would post 64 markers), and every
/// payload lands.
pub fn small_payloads_are_uploaded_together() -> TestResult {
    const N: u32 = 64;
    const SIZE: u64 = 16 * KIB;
    let d = dev()?;
    let c = control()?;
    let mut plan = nhbm::Plan::new(0, 0);
    for i in 0..N {
        let data = pattern(SIZE, 1000 + i);
        plan = plan.with(nhbm::Record::buffer_staged(i + 1, SIZE).data(data));
    }
    let blob = plan.to_blob().ctx("build")?;
    let start = nhbm::RawPlan::data_start(N as usize);
    let before = c.read(DMA_PAIRS);
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let pairs = u64::from(c.read(DMA_PAIRS) - before);
    let mut want = 1; // one marker
    for i in 0..N {
        let pa = d.resolve(p.plan_id, i + 1, 0, SIZE).ctx("RESOLVE")?;
        let at = start + (i as u64 * SIZE) as usize;
        let payload = &blob[at..at + SIZE as usize];
        // Less its own marker: the payloads share one.
        want += zero_copy_pairs(payload, pa)? - 1;
        let word = u32::from_le_bytes(payload[100..104].try_into().unwrap_or_default());
        ensure_eq(&format!("payload {i} at +100"), c.hbm_read(pa + 100), word)?;
    }
    ensure_eq("pairs of the load", pairs, want)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A plan of 64 payloads that each leave the last 4 KiB of their buffer
/// unwritten scrubs those tails together: the engine moves one pair a
/// tail and one marker for all of them (a scrub each would post 63
/// markers), and every tail reads zero though the same HBM held bytes
/// before.
pub fn unwritten_tails_are_scrubbed_together() -> TestResult {
    const N: u32 = 64;
    const SIZE: u64 = 16 * KIB;
    const DATA: u64 = 12 * KIB;
    let d = dev()?;
    let c = control()?;
    // The last payload fills its buffer: the tails end at the next buffer.
    let build = |data: &dyn Fn(u32) -> Vec<u8>| {
        let recs = (0..N).map(|i| nhbm::Record::buffer_staged(i + 1, SIZE).data(data(i)));
        recs.fold(nhbm::Plan::new(0, 0), nhbm::Plan::with).to_blob()
    };
    let dirty = build(&|_| vec![0xa5; SIZE as usize]).ctx("build")?;
    let p = d.plan_load(&dirty, 0).ctx("PLAN_LOAD of bytes")?;
    let dirty_pa = d.resolve(p.plan_id, 1, 0, 8).ctx("RESOLVE")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    let len = |i| if i + 1 == N { SIZE } else { DATA };
    let blob = build(&|i| pattern(len(i), 2000 + i)).ctx("build")?;
    let before = c.read(DMA_PAIRS);
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let pairs = u64::from(c.read(DMA_PAIRS) - before);
    let pas = (0..N)
        .map(|i| d.resolve(p.plan_id, i + 1, 0, SIZE).ctx("RESOLVE"))
        .collect::<Result<Vec<_>, _>>()?;
    ensure_eq("the place of the plan", pas[0], dirty_pa)?;
    // One marker for the payloads, one for the tails.
    let (mut want, mut at) = (2, nhbm::RawPlan::data_start(N as usize));
    for i in 0..N {
        let (pa, n) = (pas[i as usize], len(i));
        want += zero_copy_pairs(&blob[at..at + n as usize], pa)? - 1;
        at += n as usize;
        if let Some(&next) = pas.get(i as usize + 1) {
            want += (next - pa - DATA).div_ceil(64 * KIB);
            for tail in [pa + DATA, next - 4] {
                ensure_eq(&format!("tail {i} at {tail:#x}"), c.hbm_read(tail), 0)?;
            }
        }
    }
    ensure_eq("pairs of the load", pairs, want)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}

/// A buffer address outside user memory (the last page of the address
/// space, whose next page boundary does not exist; kernel addresses; the
/// null page) gets EFAULT from MEM_WRITE and MEM_READ, whether the module
/// tries to pin it or copy it, and the device moves bytes after.
pub fn buffers_outside_user_memory_get_efault() -> TestResult {
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, 64 * KIB).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    for buf in [
        u64::MAX - 4095,
        u64::MAX - 4095 + 8,
        0xffff_8880_0000_0000,
        0,
    ] {
        for write in [true, false] {
            let mut arg = MemXfer {
                plan_id: p.plan_id,
                var_id: 1,
                offset: 0,
                len: 1024,
                buf,
            };
            // SAFETY: the module must refuse the address; nothing of this
            // process is at any of them.
            let r = unsafe { d.mem_xfer_raw(write, &mut arg) };
            ensure_errno(&format!("write {write} from {buf:#x}"), r, libc::EFAULT)?;
        }
    }
    d.mem_write(p.plan_id, 1, 0, b"still here")
        .ctx("MEM_WRITE after")?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")
}
