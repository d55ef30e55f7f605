//! Lifetime and resource limits: a transfer whose user buffer stalls (held
//! with userfaultfd) neither lets memory it can reach be freed nor blocks
//! other users; plan bookkeeping is charged to the caller's memory cgroup;
//! HBM is limited per cgroup by the dmem controller; a device holds a bounded
//! number of live plans.

use std::fs;
use std::io;
use std::sync::mpsc;
use std::time::Duration;

use nhbm::uapi::*;
use nhbm::{Device, LoadedPlan, Plan, Record};

use super::uffd::Stall;
use crate::fixtures::*;
use crate::ktap::*;

/// How long a call that must not wait for a stalled copy may take. Only a
/// failing run waits this long.
const NO_WAIT: Duration = Duration::from_secs(30);

/// Where cgroup2 is mounted in the guest.
pub(super) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// MEM_WRITE through a REMOTE variable stalls on its user buffer while the
/// REMOTE plan and then its target are unloaded and a new plan is loaded
/// where the target was: the late bytes must not land in the new plan.
pub fn remote_target_outlives_a_stalled_transfer() -> TestResult {
    let d = dev()?;
    let base = usage(&d)?;
    let size = 8 * KIB;
    let a = d
        .plan_load(&one_buffer(1, size).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD target")?;
    let b_plan = Plan::new(0, 0)
        .with(Record::buffer(1, 64))
        .with(Record::remote(2, 0, a.plan_id, 1));
    let b = d
        .plan_load(&b_plan.to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD referencing")?;
    let stall = Stall::new(size as usize).ctx("userfaultfd")?;
    stall.fill_head(0x5a);
    std::thread::scope(|s| -> TestResult {
        let writer = s.spawn(|| d.mem_write(b.plan_id, 2, 0, stall.buf()));
        stall
            .wait_fault(NO_WAIT)
            .ctx("waiting for the copy to stall")?;
        let (tx, rx) = mpsc::channel();
        let d = &d;
        let newcomer = s.spawn(move || {
            let r = (|| -> Result<u32, Fail> {
                d.plan_unload(b.plan_id).ctx("PLAN_UNLOAD referencing")?;
                d.plan_unload(a.plan_id).ctx("PLAN_UNLOAD target")?;
                let blob = one_buffer(1, size).to_blob().ctx("build")?;
                Ok(d.plan_load(&blob, 0).ctx("PLAN_LOAD newcomer")?.plan_id)
            })();
            let _ = tx.send(r);
        });
        // Unloads and the load must not wait for the stalled copy.
        let c = rx.recv_timeout(NO_WAIT);
        stall.release(0xa5).ctx("UFFDIO_COPY")?;
        let _ = newcomer.join();
        let written = writer
            .join()
            .map_err(|_| Fail::Fail("writer panicked".into()))?;
        let c = match c {
            Ok(c) => c?,
            Err(_) => return fail("unloading and loading waited for the stalled copy"),
        };
        written.ctx("MEM_WRITE through the unloaded REMOTE plan")?;
        ensure_bytes(
            "newcomer's memory after the stalled write",
            &read(d, c, 1, 0, size)?,
            &vec![0; size as usize],
        )?;
        d.plan_unload(c).ctx("PLAN_UNLOAD newcomer")
    })?;
    // The transfer is over: the target's memory went back with it.
    ensure_eq("MEM_STATS at the end", usage(&d)?, base)
}

/// What [`during_a_stalled_write`] saw.
struct Stalled<T> {
    /// What `during` gave, or `None` when it had not answered within
    /// [`NO_WAIT`] of the stall.
    during: Option<T>,
    /// The stalled MEM_WRITE's result once released.
    written: io::Result<()>,
    /// The plan written to.
    plan_id: u32,
}

/// Loads an 8 KiB buffer on `d` and starts a MEM_WRITE into it whose user
/// buffer stalls after its first page (0x11 bytes there, 0x22 once
/// released); runs `during` on another thread while it stalls, then
/// releases it.
fn during_a_stalled_write<T: Send>(
    d: &Device,
    during: impl FnOnce() -> T + Send,
) -> Result<Stalled<T>, Fail> {
    let size = 8 * KIB;
    let a = d
        .plan_load(&one_buffer(1, size).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    let stall = Stall::new(size as usize).ctx("userfaultfd")?;
    stall.fill_head(0x11);
    std::thread::scope(|s| {
        let writer = s.spawn(|| d.mem_write(a.plan_id, 1, 0, stall.buf()));
        stall
            .wait_fault(NO_WAIT)
            .ctx("waiting for the copy to stall")?;
        let (tx, rx) = mpsc::channel();
        let other = s.spawn(move || {
            let _ = tx.send(during());
        });
        let got = rx.recv_timeout(NO_WAIT).ok();
        stall.release(0x22).ctx("UFFDIO_COPY")?;
        let _ = other.join();
        let written = writer
            .join()
            .map_err(|_| Fail::Fail("writer panicked".into()))?;
        Ok(Stalled {
            during: got,
            written,
            plan_id: a.plan_id,
        })
    })
}

/// While one file's MEM_WRITE stalls on its user buffer, another file loads,
/// reads and writes on the same device.
pub fn stalled_user_copy_does_not_block_others() -> TestResult {
    let d = dev()?;
    let st = during_a_stalled_write(&d, || -> io::Result<Vec<u8>> {
        let d2 = Device::open(device_index())?;
        let p = d2.plan_load(&one_buffer(1, 4096).to_blob().map_err(io::Error::other)?, 0)?;
        d2.mem_write(p.plan_id, 1, 0, &pattern(4096, 3))?;
        let mut back = vec![0; 4096];
        d2.mem_read(p.plan_id, 1, 0, &mut back)?;
        Ok(back)
    })?;
    let Some(back) = st.during else {
        return fail("another file waited for the stalled copy");
    };
    let back = back.ctx("another file's load, write and read")?;
    ensure_bytes("another file's bytes", &back, &pattern(4096, 3))?;
    st.written.ctx("MEM_WRITE after the stall")?;
    let mut want = vec![0x11; 4096];
    want.extend(vec![0x22; 4096]);
    ensure_bytes(
        "stalled write",
        &read(&d, st.plan_id, 1, 0, 8 * KIB)?,
        &want,
    )
}

/// While one file's MEM_WRITE stalls on its user buffer, an administrator's
/// device RESET does not wait for it (the user copy is outside the reset
/// gate): it returns, and the stalled write, once released, answers EIO
/// (its plan's HBM went with the reset).
pub fn stalled_user_copy_does_not_hold_off_a_reset() -> TestResult {
    let d = dev()?;
    let st = during_a_stalled_write(&d, || {
        Device::open(device_index())
            .map_err(io::Error::from)
            .and_then(|d2| d2.reset(RESET_DEVICE, 0))
    })?;
    let Some(r) = st.during else {
        return fail("RESET waited for another file's stalled user copy");
    };
    ensure_eq("RESET", r.ctx("RESET beside a stalled copy")?, 0)?;
    ensure_errno("MEM_WRITE across the reset", st.written, libc::EIO)
}

/// A child cgroup of the guest's cgroup2 root with `controllers` enabled;
/// when dropped, this process goes back to the root and the cgroup goes.
pub(super) struct Cgroup {
    path: String,
}

impl Cgroup {
    /// Creates the cgroup and moves this process into it.
    pub(super) fn enter(name: &str, controllers: &[&str]) -> Result<Self, Fail> {
        let cg = Self::create(name, controllers)?;
        cg.join()?;
        Ok(cg)
    }

    /// Creates the cgroup (afresh), this process staying where it is.
    pub(super) fn create(name: &str, controllers: &[&str]) -> Result<Self, Fail> {
        let avail = fs::read_to_string(format!("{CGROUP_ROOT}/cgroup.controllers"))
            .ctx("cgroup2 at /sys/fs/cgroup")?;
        for c in controllers {
            if !avail.split_whitespace().any(|a| a == *c) {
                return skip(format!("the kernel has no {c} cgroup controller"));
            }
            fs::write(
                format!("{CGROUP_ROOT}/cgroup.subtree_control"),
                format!("+{c}"),
            )
            .ctx("cgroup.subtree_control")?;
        }
        let path = format!("{CGROUP_ROOT}/{name}");
        let _ = fs::remove_dir(&path);
        fs::create_dir(&path).ctx("mkdir cgroup")?;
        Ok(Cgroup { path })
    }

    /// Moves this process into the cgroup: what it charges from now on is
    /// charged here (what it charged before stays where it was).
    pub(super) fn join(&self) -> TestResult {
        self.write("cgroup.procs", &std::process::id().to_string())
    }

    pub(super) fn write(&self, file: &str, value: &str) -> TestResult {
        fs::write(format!("{}/{file}", self.path), value).ctx(file)
    }

    pub(super) fn read(&self, file: &str) -> Result<String, Fail> {
        fs::read_to_string(format!("{}/{file}", self.path)).ctx(file)
    }

    /// The value of `key` in a flat-keyed file such as memory.stat.
    pub(super) fn stat(&self, file: &str, key: &str) -> Result<u64, Fail> {
        let text = self.read(file)?;
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.trim().parse().ok())
            .ok_or_else(|| Fail::Fail(format!("{file}: no {key}")))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = fs::write(
            format!("{CGROUP_ROOT}/cgroup.procs"),
            std::process::id().to_string(),
        );
        let _ = fs::remove_dir(&self.path);
    }
}

/// A plan's bookkeeping (records, variables, index) is kernel memory the
/// caller chose the size of: it is charged to the caller's memory cgroup.
pub fn plan_bookkeeping_is_charged_to_the_memory_cgroup() -> TestResult {
    const RECORDS: u32 = 1 << 16;
    let mut plan = Plan::new(0, 0);
    for id in 0..RECORDS {
        // Sparse ids: the index is hashed and holds a table of its own.
        plan.push(Record::buffer(id * 3, 64));
    }
    let blob = plan.to_blob().ctx("build")?;
    let d = dev()?;
    let cg = Cgroup::enter("nhbm-memcg", &["memory"])?;
    let before = cg.stat("memory.stat", "kernel")?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let after = cg.stat("memory.stat", "kernel")?;
    drop(p);
    drop(d);
    drop(cg);
    // Variables alone take 24 bytes each and stay for the plan's lifetime.
    let want = u64::from(RECORDS) * 24;
    ensure(after.saturating_sub(before) >= want, || {
        format!(
            "memory.stat kernel grew {} bytes over the load, want at least {want}",
            after.saturating_sub(before)
        )
    })
}

/// A plan whose arena fits in no free run of its channel is placed one chunk
/// per record, and each chunk takes a node of the pool's index: those nodes
/// are charged to the loader's memory cgroup like the rest of its
/// bookkeeping. Channel 0 is filled with 1 GiB plans between 16 MiB holes,
/// and a plan of 32768 4 KiB buffers (128 MiB: no arena fits) loads there;
/// its kernel memory exceeds that of the same plan loaded whole on channel 1
/// by at least its chunk (48 bytes) and an index node (40) per record.
/// Measured: 135 bytes per record; 63 with the nodes allocated uncharged.
pub fn index_nodes_of_a_scattered_plan_are_charged(notes: &mut Notes) -> TestResult {
    const RECORDS: u32 = 32768;
    const HOLE: u64 = 16 * MIB;
    let d = dev()?;
    let i = info(&d)?;
    if i.nr_channels < 2 {
        return skip("needs a second channel");
    }
    if expected_simulated() == 0 {
        return skip(HOST_BACKED_BAR4);
    }
    let base = usage(&d)?;
    let fill = fill_with_holes(&d, HOLE)?;
    let mut plan = Plan::new(0, 0);
    for id in 0..RECORDS {
        plan.push(Record::buffer(id, 4096));
    }
    let blob = plan.to_blob().ctx("build")?;
    let cg = Cgroup::enter("nhbm-index", &["memory"])?;
    let k0 = cg.stat("memory.stat", "kernel")?;
    let whole = d
        .plan_load(&blob, 1)
        .ctx("PLAN_LOAD on channel 1 (one arena)")?;
    let k1 = cg.stat("memory.stat", "kernel")?;
    let chunks = usage(&d)?.own_chunks;
    let scattered = d
        .plan_load(&blob, 0)
        .ctx("PLAN_LOAD on channel 0 (one chunk per record)")?;
    let k2 = cg.stat("memory.stat", "kernel")?;
    ensure_eq(
        "chunks of the scattered plan",
        usage(&d)?.own_chunks - chunks,
        RECORDS,
    )?;
    for p in [whole, scattered].into_iter().chain(fill) {
        d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    }
    drop(cg);
    ensure_eq("MEM_STATS after unloading everything", usage(&d)?, base)?;
    let extra = (k2 - k1).saturating_sub(k1 - k0) / u64::from(RECORDS);
    notes.add(format!(
        "one chunk per record: {extra} more kernel bytes per record than one arena"
    ));
    ensure(extra >= 48 + 40, || {
        format!(
            "one chunk per record cost {extra} more kernel bytes per record \
             than one arena ({} vs {}), want at least 88",
            k2 - k1,
            k1 - k0
        )
    })
}

/// Fills channel 0 of `d` with plans, leaving free only holes of `hole`
/// bytes (and less than twice that at its end); returns the plans.
fn fill_with_holes(d: &Device, hole: u64) -> Result<Vec<LoadedPlan>, Fail> {
    let full = |r: io::Result<LoadedPlan>, what: &str| match r {
        Ok(p) => Ok(Some(p)),
        Err(e) if crate::sys::errno_of(&e) == libc::ENOMEM => Ok(None),
        Err(e) => fail(format!("PLAN_LOAD {what}: {e}")),
    };
    let hole_blob = one_buffer(1, hole).to_blob().ctx("build")?;
    let keeper = one_buffer(1, GIB - hole).to_blob().ctx("build")?;
    let (mut holes, mut kept) = (Vec::new(), Vec::new());
    while let Some(h) = full(d.plan_load(&hole_blob, 0), "hole")? {
        holes.push(h);
        let Some(k) = full(d.plan_load(&keeper, 0), "keeper")? else {
            break;
        };
        kept.push(k);
    }
    let mut size = GIB / 2;
    while size >= 2 * hole {
        let blob = one_buffer(1, size).to_blob().ctx("build")?;
        match full(d.plan_load(&blob, 0), "filler")? {
            Some(p) => kept.push(p),
            None => size /= 2,
        }
    }
    for h in holes {
        d.plan_unload(h.plan_id).ctx("PLAN_UNLOAD hole")?;
    }
    Ok(kept)
}

/// A child cgroup with dmem.max on channel 0 of the device loads plans up to
/// its limit and no further; other channels are not limited.
pub fn dmem_max_caps_hbm_per_cgroup() -> TestResult {
    const LIMIT: u64 = MIB;
    let plan = one_buffer(1, 256 * KIB).to_blob().ctx("build")?;
    let d = dev()?;
    let cg = Cgroup::enter("nhbm-dmem", &["dmem"])?;
    let region = dmem_region(device_index(), 0);
    let capacity = cg_root_read("dmem.capacity")?;
    ensure(capacity.lines().any(|l| l.starts_with(&region)), || {
        format!("dmem.capacity has no {region}: {capacity:?}")
    })?;
    cg.write("dmem.max", &format!("{region} {LIMIT}"))?;
    let mut held = Vec::new();
    for _ in 0..LIMIT / (256 * KIB) {
        held.push(d.plan_load(&plan, 0).ctx("PLAN_LOAD within dmem.max")?);
    }
    ensure_eq(
        "dmem.current",
        cg.read("dmem.current")?
            .lines()
            .find(|l| l.starts_with(&region))
            .map(str::to_owned),
        Some(format!("{region} {LIMIT}")),
    )?;
    load_rejected(&d, &plan, 0, libc::EAGAIN)?;
    d.plan_load(&plan, 1)
        .ctx("PLAN_LOAD on the unlimited channel")?;
    d.plan_unload(held.pop().unwrap().plan_id)
        .ctx("PLAN_UNLOAD")?;
    d.plan_load(&plan, 0).ctx("PLAN_LOAD after making room")?;
    Ok(())
}

pub(super) fn cg_root_read(file: &str) -> Result<String, Fail> {
    fs::read_to_string(format!("{CGROUP_ROOT}/{file}")).ctx(file)
}

/// Each file holds at most NHBM_MAX_PLANS_PER_FILE plans (E2BIG beyond),
/// and nothing device-wide can be filled by one tenant: with 16 files of
/// 4096 plans each held (the count that used to be the device's limit),
/// another file still loads.
pub fn plans_are_limited_per_file_not_per_device() -> TestResult {
    let blob = Plan::new(0, 0)
        .with(Record::sb(1, 64, 0, 0))
        .to_blob()
        .ctx("build")?;
    let files = (MAX_PLANS_PER_DEVICE / MAX_PLANS_PER_FILE) as usize;
    let mut held = Vec::new();
    for f in 0..files {
        let d = dev()?;
        for i in 0..MAX_PLANS_PER_FILE {
            d.plan_load(&blob, CHANNEL_ANY)
                .ctx(&format!("PLAN_LOAD {i} of file {f}"))?;
        }
        if f == 0 {
            ensure_errno(
                "PLAN_LOAD over the file's limit",
                d.plan_load(&blob, CHANNEL_ANY),
                libc::E2BIG,
            )?;
        }
        held.push(d);
    }
    dev()?
        .plan_load(&blob, CHANNEL_ANY)
        .ctx("PLAN_LOAD of another tenant beside 65536 held plans")?;
    Ok(())
}

/// Unloading never allocates: with every non-sleeping slab allocation of the
/// unloading thread failing (failslab, debug kernels), plans unloaded out of
/// order still give back every byte.
pub fn unloading_never_allocates() -> TestResult {
    const FAILSLAB: &str = "/sys/kernel/debug/failslab";
    if fs::metadata(FAILSLAB).is_err() {
        return skip("the kernel has no failslab");
    }
    let d = dev()?;
    let base = usage(&d)?;
    let blob = Plan::new(64 * KIB, 0)
        .with(Record::buffer(1, 4096))
        .to_blob()
        .ctx("build")?;
    let upper = d.plan_load(&blob, 0).ctx("PLAN_LOAD upper")?;
    let lower = d.plan_load(&blob, 0).ctx("PLAN_LOAD lower")?;
    let set = |file: &str, v: &str| fs::write(format!("{FAILSLAB}/{file}"), v).ctx(file);
    set("ignore-gfp-wait", "Y")?;
    set("task-filter", "Y")?;
    set("times", "-1")?;
    set("verbose", "0")?;
    set("probability", "100")?;
    fs::write("/proc/thread-self/make-it-fail", "1").ctx("make-it-fail")?;
    let unloaded = d.plan_unload(upper.plan_id);
    let _ = fs::write("/proc/thread-self/make-it-fail", "0");
    set("probability", "0")?;
    unloaded.ctx("PLAN_UNLOAD of the upper plan")?;
    d.plan_unload(lower.plan_id)
        .ctx("PLAN_UNLOAD of the lower plan")?;
    ensure_eq("MEM_STATS after both", usage(&d)?, base)
}

/// The dmem usage of `region` in `cg`, from its `dmem.current`.
fn dmem_current(cg: &Cgroup, region: &str) -> Result<u64, Fail> {
    let text = cg.read("dmem.current")?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{region} ")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| Fail::Fail(format!("dmem.current has no {region}: {text:?}")))
}

/// A variable too large for the small pool takes, and is charged for, the
/// whole aligned span in the main pool: placed on that boundary it withholds
/// the span from every allocation as aligned or larger, so a tenant cannot
/// fragment a channel against everyone else's big buffers for the price of
/// a few pages. A small one takes just its pages in the small pool, placed
/// aligned. Under a dmem.max of 64 MiB, 4 KiB at 32 MiB alignment is
/// charged 4 KiB, 600 KiB at 32 MiB alignment 32 MiB, and 600 KiB at
/// 128 MiB alignment is refused.
pub fn aligned_chunks_take_their_alignment() -> TestResult {
    const LIMIT: u64 = 64 * MIB;
    const LARGE: u64 = 600 * KIB;
    let at = |size: u64, align: u64| {
        Plan::new(0, 0)
            .with(Record::buffer(1, size).alignment(align))
            .to_blob()
            .ctx("build")
    };
    let d = dev()?;
    let cg = Cgroup::enter("nhbm-align", &["dmem"])?;
    let region = dmem_region(device_index(), 0);
    cg.write("dmem.max", &format!("{region} {LIMIT}"))?;
    let small = d
        .plan_load(&at(4 * KIB, 32 * MIB)?, 0)
        .ctx("PLAN_LOAD of 4 KiB")?;
    ensure_eq("bytes_allocated of 4 KiB", small.bytes_allocated, 4 * KIB)?;
    ensure_eq("dmem.current", dmem_current(&cg, &region)?, 4 * KIB)?;
    let p = d
        .plan_load(&at(LARGE, 32 * MIB)?, 0)
        .ctx("PLAN_LOAD of 600 KiB")?;
    ensure_eq("bytes_allocated of 600 KiB", p.bytes_allocated, 32 * MIB)?;
    ensure_eq(
        "dmem.current",
        dmem_current(&cg, &region)?,
        32 * MIB + 4 * KIB,
    )?;
    load_rejected(&d, &at(LARGE, 128 * MIB)?, 0, libc::EAGAIN)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(small.plan_id).ctx("PLAN_UNLOAD")?;
    ensure_eq(
        "dmem.current with nothing loaded",
        dmem_current(&cg, &region)?,
        0,
    )
}

/// A scratchpad is freed, and uncharged, when its plan is unloaded, whatever
/// is loaded below it: a tenant holding a small scratchpad under another's
/// cannot keep that one allocated and charged. In a cgroup with dmem.max of
/// 64 MiB, a plan with a 48 MiB scratchpad unloaded above a small one gives
/// its 48 MiB back at once, and the next such plan takes the same place.
pub fn unloaded_scratchpads_are_freed_whatever_lies_below() -> TestResult {
    const LIMIT: u64 = 64 * MIB;
    let big = Plan::new(48 * MIB, 0)
        .with(Record::buffer(1, 4096))
        .to_blob()
        .ctx("build")?;
    let small = Plan::new(64 * KIB, 0)
        .with(Record::buffer(1, 4096))
        .to_blob()
        .ctx("build")?;
    let d = dev()?;
    let other = dev()?;
    let cg = Cgroup::enter("nhbm-scratch", &["dmem"])?;
    let region = dmem_region(device_index(), 0);
    cg.write("dmem.max", &format!("{region} {LIMIT}"))?;
    let current = || dmem_current(&cg, &region);
    let a = d.plan_load(&big, 0).ctx("PLAN_LOAD big")?;
    let b = other
        .plan_load(&small, 0)
        .ctx("PLAN_LOAD small, by another file")?;
    let small_bytes = current()? - a.bytes_allocated;
    d.plan_unload(a.plan_id).ctx("PLAN_UNLOAD big")?;
    ensure_eq(
        "dmem.current after unloading the big plan",
        current()?,
        small_bytes,
    )?;
    let again = d
        .plan_load(&big, 0)
        .ctx("PLAN_LOAD big again, beside the small one")?;
    ensure_eq(
        "the new big scratchpad's PA",
        again.local_scratchpad_pa,
        a.local_scratchpad_pa,
    )?;
    other.plan_unload(b.plan_id).ctx("PLAN_UNLOAD small")?;
    d.plan_unload(again.plan_id).ctx("PLAN_UNLOAD big")?;
    ensure_eq("dmem.current with nothing loaded", current()?, 0)
}
