//! What a tenant's memory costs stays its own: the simulated device's pages
//! stay charged to the cgroup whose write made them resident and go when
//! their plan does, and small chunks cannot shred the space that large
//! records need.

use super::limits::Cgroup;
use crate::fixtures::*;
use crate::ktap::*;
use nhbm::{Plan, Record};

/// Why these cases need the simulated device: only its HBM is kernel memory,
/// charged to memory cgroups.
const SIM_ONLY: &str = "only the simulated device's HBM is kernel memory";

/// `memory.current` of `cg`.
fn current(cg: &Cgroup) -> Result<u64, Fail> {
    let text = cg.read("memory.current")?;
    text.trim()
        .parse()
        .map_err(|_| Fail::Fail(format!("memory.current: {text:?}")))
}

/// A victim rewrites its variable again and again while, between its
/// writes, another tenant in another cgroup writes ranges it never wrote
/// before. Pages a rewrite replaces must not be handed to the other
/// tenant's writes still charged to the victim: the victim's
/// `memory.current` stays where its first write put it, and the other
/// tenant's grows by what it wrote.
pub fn simulated_pages_stay_charged_to_their_writer() -> TestResult {
    const SIZE: u64 = 2 * MIB;
    const PIECE: u64 = 64 * KIB;
    const ROUNDS: u64 = 64;
    if expected_simulated() == 0 {
        return skip(SIM_ONLY);
    }
    let data = pattern(SIZE, 31);
    let victim_cg = Cgroup::create("nhbm-victim", &["memory"])?;
    let other_cg = Cgroup::create("nhbm-other", &["memory"])?;
    let victim = dev()?;
    let other = dev()?;
    let v = victim
        .plan_load(&one_buffer(1, SIZE).to_blob().ctx("build")?, 0)
        .ctx("victim PLAN_LOAD")?;
    let o = other
        .plan_load(&one_buffer(1, ROUNDS * PIECE).to_blob().ctx("build")?, 0)
        .ctx("other PLAN_LOAD")?;
    victim_cg.join()?;
    victim
        .mem_write(v.plan_id, 1, 0, &data)
        .ctx("victim's first MEM_WRITE")?;
    let (victim0, other0) = (current(&victim_cg)?, current(&other_cg)?);
    for i in 0..ROUNDS {
        victim_cg.join()?;
        victim
            .mem_write(v.plan_id, 1, 0, &data)
            .ctx("victim's rewrite")?;
        other_cg.join()?;
        other
            .mem_write(o.plan_id, 1, i * PIECE, &data[..PIECE as usize])
            .ctx("other tenant's MEM_WRITE")?;
    }
    let victim_grew = current(&victim_cg)?.saturating_sub(victim0);
    let other_grew = current(&other_cg)?.saturating_sub(other0);
    victim_cg.join()?;
    victim.plan_unload(v.plan_id).ctx("victim PLAN_UNLOAD")?;
    other.plan_unload(o.plan_id).ctx("other PLAN_UNLOAD")?;
    ensure(victim_grew < ROUNDS * PIECE / 4, || {
        format!(
            "the victim's cgroup grew by {victim_grew} bytes while another tenant wrote {}",
            ROUNDS * PIECE
        )
    })?;
    ensure(other_grew >= ROUNDS * PIECE * 3 / 4, || {
        format!(
            "the writer's cgroup grew by {other_grew} bytes for {} bytes written",
            ROUNDS * PIECE
        )
    })
}

/// A plan's simulated pages go when it is unloaded, not when a later load
/// happens to scrub their range: the writer's `memory.current` drops by
/// what it wrote.
pub fn unload_gives_back_simulated_pages() -> TestResult {
    const SIZE: u64 = 16 * MIB;
    if expected_simulated() == 0 {
        return skip(SIM_ONLY);
    }
    let data = pattern(SIZE, 32);
    let cg = Cgroup::create("nhbm-pages", &["memory"])?;
    let d = dev()?;
    let p = d
        .plan_load(&one_buffer(1, SIZE).to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD")?;
    cg.join()?;
    let before = current(&cg)?;
    d.mem_write(p.plan_id, 1, 0, &data).ctx("MEM_WRITE")?;
    let written = current(&cg)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    let unloaded = current(&cg)?;
    ensure(written >= before + SIZE * 7 / 8, || {
        format!("MEM_WRITE of {SIZE} bytes charged {}", written - before)
    })?;
    ensure(unloaded + SIZE * 7 / 8 <= written, || {
        format!(
            "after PLAN_UNLOAD the cgroup holds {} of the {} bytes its write charged",
            unloaded.saturating_sub(before),
            written - before
        )
    })
}

/// The fragmentation a tenant could make for the price of a few pages: it
/// fills channel 0 with one-record plans of 64 MiB and 4 KiB in turn (first
/// fit), then unloads the large ones. With small chunks in the region's
/// small pool, what it freed is one run again: another tenant places a
/// record of half of it.
pub fn small_chunks_cannot_shred_a_region() -> TestResult {
    const LARGE: u64 = 64 * MIB;
    if expected_simulated() == 0 {
        return skip(HOST_BACKED_BAR4);
    }
    let large = one_buffer(1, LARGE).to_blob().ctx("build")?;
    let small = one_buffer(1, 4 * KIB).to_blob().ctx("build")?;
    let base = usage(&dev()?)?;
    let attacker = dev()?;
    let mut larges = Vec::new();
    let mut smalls = Vec::new();
    loop {
        match attacker.plan_load(&large, 0) {
            Ok(p) => larges.push(p.plan_id),
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => break,
            Err(e) => return fail(format!("PLAN_LOAD of 64 MiB: {e}")),
        }
        match attacker.plan_load(&small, 0) {
            Ok(p) => smalls.push(p.plan_id),
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => break,
            Err(e) => return fail(format!("PLAN_LOAD of 4 KiB: {e}")),
        }
    }
    for id in &larges {
        attacker.plan_unload(*id).ctx("PLAN_UNLOAD of 64 MiB")?;
    }
    let freed = larges.len() as u64 * LARGE;
    ensure(freed >= 8 * LARGE, || {
        format!("only {} large plans fit", larges.len())
    })?;
    let other = dev()?;
    let half = (freed / 2) & !(MIB - 1);
    let p = other
        .plan_load(&one_buffer(1, half).to_blob().ctx("build")?, 0)
        .ctx(&format!(
            "PLAN_LOAD of {half} bytes beside {} small plans, {freed} bytes freed",
            smalls.len()
        ))?;
    other.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    drop(attacker);
    ensure_eq("MEM_STATS once all is unloaded", usage(&dev()?)?, base)
}

/// A plan of 10,000 4 KiB buffers aligned to 64 KiB, beside two ordinary
/// records, takes the buffers' pages (40 MiB, not the 625 MiB their
/// alignment would span packed): each a chunk of its own, placed aligned,
/// outside the others' arena. `bytes_allocated`, MEM_STATS and the
/// cgroup's `dmem.current` agree, bytes move through the first and the
/// last, and the unload gives every chunk back.
pub fn small_aligned_buffers_take_their_own_pages() -> TestResult {
    const COUNT: u32 = 10_000;
    const ALIGN: u64 = 64 * KIB;
    const ARENA: u64 = 72 * KIB;
    let mut plan = Plan::new(0, 0)
        .with(Record::buffer(1, 64 * KIB))
        .with(Record::input(2, 8 * KIB));
    for id in 3..3 + COUNT {
        plan = plan.with(Record::buffer(id, 4 * KIB).alignment(ALIGN));
    }
    let blob = plan.to_blob().ctx("build")?;
    let d = dev()?;
    let base = usage(&d)?;
    let cg = Cgroup::enter("nhbm-small", &["dmem"])?;
    let p = d.plan_load(&blob, 0).ctx("PLAN_LOAD")?;
    let want = ARENA + u64::from(COUNT) * 4 * KIB;
    ensure_eq("bytes_allocated", p.bytes_allocated, want)?;
    let now = usage(&d)?;
    ensure_eq("own bytes", now.own_bytes - base.own_bytes, want)?;
    ensure_eq("own chunks", now.own_chunks - base.own_chunks, COUNT + 1)?;
    let region = dmem_region(device_index(), 0);
    let charged = cg.read("dmem.current")?;
    ensure(
        charged.lines().any(|l| l == format!("{region} {want}")),
        || format!("dmem.current {charged:?}, want {region} {want}"),
    )?;
    let mut pas = p.addrs[2..].to_vec();
    pas.sort_unstable();
    let arena = p.addrs[0]..p.addrs[0] + ARENA;
    ensure(
        pas.iter().all(|pa| pa % ALIGN == 0 && !arena.contains(pa)),
        || format!("a buffer is misaligned or in the arena {arena:x?}"),
    )?;
    ensure(pas.windows(2).all(|w| w[1] - w[0] >= ALIGN), || {
        "two buffers overlap".into()
    })?;
    let data = pattern(4 * KIB, 7);
    for id in [3, 2 + COUNT] {
        d.mem_write(p.plan_id, id, 0, &data).ctx("MEM_WRITE")?;
        let mut back = vec![0; data.len()];
        d.mem_read(p.plan_id, id, 0, &mut back).ctx("MEM_READ")?;
        ensure(back == data, || format!("var {id} read back other bytes"))?;
    }
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    drop(cg);
    ensure_eq("MEM_STATS once unloaded", usage(&d)?, base)
}
