//! What taking mappings away costs, and whom: a device reset walks each
//! mapping once however many files are open, holds no open() back while it
//! walks, and an unload walks only its own file's mappings, never the stale
//! ones another tenant left over the same offsets; a file's mappings are
//! bounded. The walks are counted by a kprobe on `tlb_gather_mmu`, which
//! `unmap_mapping_range` calls once for each mapping it visits (the zap
//! itself, `zap_vma_range_batched`, is inlined there; this one lives in
//! another file and cannot be). Nothing else in the guest unmaps memory
//! while a count runs.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use nhbm::uapi::*;
use nhbm::{Device, Mapping};

use crate::fixtures::{device_index, one_buffer, open_device};
use crate::ktap::{ensure, ensure_eq, skip, Ctx, Fail, Notes, TestResult};
use crate::mem::page_size;
use crate::sys::{kprobe_events, CallCounter};

/// The kernel function called once per mapping a revocation visits.
const ZAP: &str = "tlb_gather_mmu";

/// Mappings one open file may have (`NHBM_MAPS_PER_FILE`, uapi.rst).
const MAPS_PER_FILE: usize = 32768;

/// A counter of [`ZAP`] calls, or the reason the case cannot count them.
fn zap_counter(name: &str) -> Result<CallCounter, Fail> {
    let Some(events) = kprobe_events() else {
        return skip("no kprobe events on this kernel or guest");
    };
    CallCounter::new(&events, name, ZAP)
}

/// A one-page plan loaded on `d`: its id.
fn one_page_plan(d: &Device) -> Result<u32, Fail> {
    let blob = one_buffer(1, page_size() as u64).to_blob().ctx("build")?;
    Ok(d.plan_load(&blob, CHANNEL_ANY).ctx("PLAN_LOAD")?.plan_id)
}

/// `n` mappings of variable 1 of plan `plan_id` of `d`.
fn map_many(d: &Device, plan_id: u32, n: usize) -> Result<Vec<Mapping>, Fail> {
    (0..n)
        .map(|i| d.map(plan_id, 1).ctx(&format!("mmap {i}")))
        .collect()
}

/// Raises this process's open-file limit to its hard limit.
fn raise_open_files() -> Result<(), Fail> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    let ok = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0
        }
    };
    ensure(ok, || {
        format!("RLIMIT_NOFILE: {}", io::Error::last_os_error())
    })
}

/// A device reset with 1,000 files open and one variable mapped 20,000
/// times walks each mapping once (20,000 zaps, where one shared address
/// space made it 1,000 x 20,000), and open() goes on while it walks: an
/// open made after the walk began returns before it ends.
pub fn a_reset_walks_each_mapping_once(notes: &mut Notes) -> TestResult {
    const FILES: usize = 1000;
    const MAPS: usize = 20_000;
    raise_open_files()?;
    let d = open_device(device_index())?;
    let plan = one_page_plan(&d)?;
    let maps = map_many(&d, plan, MAPS)?;
    let others = (1..FILES)
        .map(|_| open_device(device_index()))
        .collect::<Result<Vec<_>, _>>()?;
    let zaps = zap_counter("reset_zap")?;
    let done = AtomicBool::new(false);
    let (reset, opens) = std::thread::scope(|s| {
        let reset = s.spawn(|| {
            let r = d.reset(RESET_DEVICE, 0);
            done.store(true, Relaxed);
            r
        });
        // (zaps before the open, zaps once it returned) of each open
        // made while the reset ran.
        let mut opens = Vec::new();
        while !done.load(Relaxed) {
            let before = zaps.calls()?;
            drop(open_device(device_index())?);
            opens.push((before, zaps.calls()?));
        }
        let reset = reset
            .join()
            .map_err(|_| Fail::Fail("the reset panicked".into()))?;
        Ok::<_, Fail>((reset, opens))
    })?;
    ensure_eq("RESET status", reset.ctx("RESET")?, 0)?;
    let total = zaps.calls()?;
    drop((maps, others));
    ensure((MAPS as u64..MAPS as u64 + 64).contains(&total), || {
        format!("the reset made {total} zaps for {MAPS} mappings in {FILES} files")
    })?;
    // Begun once the walk was well under way (past any stray call), back
    // before it made its last zap (strays only add).
    let during = opens
        .iter()
        .filter(|&&(before, after)| before >= 100 && after < MAPS as u64)
        .count();
    ensure(during > 0, || {
        format!("no open() of {} returned while the walk ran", opens.len())
    })?;
    notes.add(format!(
        "{total} zaps; {during} of {} opens returned during the walk",
        opens.len()
    ));
    Ok(())
}

/// One tenant's unload walks its own mappings only: another file left
/// 20,000 stale mappings over the device address the tenant's plan then
/// gets, and the tenant's PLAN_UNLOAD still zaps only its one mapping.
pub fn an_unload_never_walks_another_files_mappings(notes: &mut Notes) -> TestResult {
    const STALE: usize = 20_000;
    let first = open_device(device_index())?;
    let plan = one_page_plan(&first)?;
    let pa = first.resolve(plan, 1, 0, 1).ctx("RESOLVE")?;
    let stale = map_many(&first, plan, STALE)?;
    first.plan_unload(plan).ctx("PLAN_UNLOAD")?;
    let tenant = open_device(device_index())?;
    let mine = one_page_plan(&tenant)?;
    ensure_eq(
        "device address of the second plan",
        tenant.resolve(mine, 1, 0, 1).ctx("RESOLVE")?,
        pa,
    )?;
    let map = tenant.map(mine, 1).ctx("mmap")?;
    let zaps = zap_counter("unload_zap")?;
    tenant.plan_unload(mine).ctx("PLAN_UNLOAD")?;
    let calls = zaps.calls()?;
    drop((map, stale));
    ensure(calls <= 4, || {
        format!("the unload made {calls} zaps for one mapping beside {STALE} stale ones")
    })?;
    notes.add(format!("{calls} zaps beside {STALE} stale mappings"));
    Ok(())
}

/// A file's mappings are bounded: the 32,769th mmap, and a munmap of part
/// of a mapping (which splits it) at the limit, get ENOMEM; room comes back
/// when a mapping goes.
pub fn mappings_per_file_are_bounded(notes: &mut Notes) -> TestResult {
    let d = open_device(device_index())?;
    let page = page_size();
    let blob = one_buffer(1, 2 * page as u64).to_blob().ctx("build")?;
    let plan = d.plan_load(&blob, CHANNEL_ANY).ctx("PLAN_LOAD")?.plan_id;
    let mut maps = map_many(&d, plan, MAPS_PER_FILE)?;
    let refused = d.map(plan, 1).map(drop);
    ensure_eq(
        "errno of an mmap past the limit",
        refused.map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOMEM)),
    )?;
    let head = maps.last().map_or(std::ptr::null_mut(), |m| m.as_ptr());
    // SAFETY: the first page of a two-page mapping this case owns and
    // never touches; the kernel refuses the split.
    let r = unsafe { libc::munmap(head.cast(), page) };
    ensure_eq(
        "munmap of part of a mapping at the limit",
        (r, io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ENOMEM)),
    )?;
    drop(maps.pop());
    maps.push(d.map(plan, 1).ctx("mmap once a mapping went")?);
    notes.add(format!("{} mappings of one file", maps.len()));
    Ok(())
}
