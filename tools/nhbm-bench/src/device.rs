//! The figures measured against a device node: RESOLVE, RESOLVE_BATCH,
//! PLAN_LOAD scaling, kernel memory per staged variable and MEM_WRITE
//! bandwidth.

use std::fs;
use std::io;
use std::path::Path;
use std::time::Duration;

use nhbm::uapi::ResolveQuery;
use nhbm::{Device, LoadedPlan, Plan, Record, Resolver};

use crate::bar::BarMap;
use crate::copies::{self, rep_movsq};
use crate::measure::{
    calibrate, interleave, median, per_op_ns, time_ns, try_time_ns, Pairs, Ratios,
};
use crate::placed::Dest;
use crate::report::{Figure, Op, Raw};

/// Variables of the plan that RESOLVE and RESOLVE_BATCH are measured on
/// (one batch resolves each of them once).
pub const RESOLVE_VARS: u32 = 4096;
/// Bytes of every variable of the staging plans: a real HBM allocation.
pub const VAR_SIZE: u64 = 4096;
/// The two staging sizes compared.
pub const SMALL_PLAN: u32 = 10_000;
pub const LARGE_PLAN: u32 = 100_000;
/// Upload: one variable of this size written once per repetition, so the
/// guest never holds more than three such buffers (source, the simulated
/// device's pages, the memcpy destination).
pub const UPLOAD_CHUNK: usize = 64 << 20;
/// Repetitions of the upload comparison (one MEM_WRITE and one memcpy each).
pub const UPLOAD_REPS: usize = 9;

/// Every plan goes to HBM channel 0, so that plans staged together share one
/// pool (NHBM_CHANNEL_ANY would spread them over the channels).
pub const CHANNEL: u32 = 0;

/// Length of one timed block of ioctls.
const BLOCK: Duration = Duration::from_millis(150);
/// Blocks per side of an interleaved comparison.
const RESOLVE_ROUNDS: usize = 21;
const BATCH_ROUNDS: usize = 7;
/// Rounds of the staging comparison, and the least time the small loads of
/// one round add up to.
const STAGING_ROUNDS: usize = 7;
const SMALL_LOAD_MIN: Duration = Duration::from_millis(250);

/// Where the module reports the kernel memory of its plans.
pub const KMEM_PATHS: [&str; 2] = [
    "/sys/kernel/debug/neuron_hbm/neuron_hbm0/kmem",
    "/sys/kernel/debug/neuron_hbm0/kmem",
];

/// A plan of `n` MR_BUFFER records of `size` bytes, var ids 1..=n, no
/// payload and no names.
pub fn buffers_blob(n: u32, size: u64) -> Vec<u8> {
    let mut plan = Plan::new(0, 0);
    plan.records = (1..=n).map(|id| Record::buffer(id, size)).collect();
    plan.to_raw()
        .expect("buffer records always lay out")
        .to_bytes()
}

/// A plan of `n` MR_VIRTUAL_TMP_BUF records of 64 bytes in a 1 MiB local
/// scratchpad: records that allocate nothing, for comparison.
pub fn windows_blob(n: u32) -> Vec<u8> {
    let mut plan = Plan::new(1 << 20, 0);
    plan.records = (1..=n)
        .map(|id| {
            let off = (u64::from(id) * 64) % (1 << 20);
            Record::virtual_tmp_buf(id, 64, nhbm::Backing::Local, off)
        })
        .collect();
    plan.to_raw()
        .expect("window records always lay out")
        .to_bytes()
}

/// Median ns of `rounds` PLAN_LOADs of `blob`, each unloaded after.
fn load_ns(dev: &Device, blob: &[u8], rounds: usize) -> io::Result<f64> {
    let mut v = Vec::new();
    for _ in 0..rounds {
        let (p, ns) = time_ns(|| Staged::load(dev, blob));
        drop(p?);
        v.push(ns);
    }
    Ok(median(&v))
}

pub fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Writes a diagnostic line (KTAP comment syntax, never a figure).
pub fn note(msg: &str) {
    println!("# nhbm-bench: {msg}");
}

/// `len` bytes of a pattern no two words of which are equal.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for (i, w) in v.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    }
    v
}

/// The name a figure gives the BAR4 file `bar4`: its file name, else "BAR4".
pub fn bar_file_name(bar4: &Path) -> String {
    bar4.file_name()
        .map_or("BAR4".into(), |f| f.to_string_lossy().into_owned())
}

/// A figure of `p` (this side's time, the other side's time) over `len`
/// bytes as bytes/ns over bytes/ns, `what` naming the two sides.
pub fn bandwidth_figure(
    name: &str,
    p: &Pairs,
    len: usize,
    what: [String; 2],
    target: f64,
) -> Figure {
    let bw = |ns: f64| format!("{:.4}", len as f64 / ns);
    Figure::of_ratios(
        name,
        &p.inverse_ratios(),
        Raw::new(format!("{} median bytes/ns", what[0]), bw(p.a_median())),
        Raw::new(format!("{} median bytes/ns", what[1]), bw(p.b_median())),
        Op::AtLeast,
        target,
    )
}

/// A loaded plan that is unloaded when dropped.
struct Staged<'a> {
    dev: &'a Device,
    id: u32,
    loaded: LoadedPlan,
}

impl<'a> Staged<'a> {
    fn load(dev: &'a Device, blob: &[u8]) -> io::Result<Self> {
        let loaded = dev.plan_load(blob, CHANNEL)?;
        Ok(Staged {
            dev,
            id: loaded.plan_id,
            loaded,
        })
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.dev.plan_unload(self.id) {
            note(&format!("unloading plan {}: {e}", self.id));
        }
    }
}

/// Var id, offset and size of the `i`-th RESOLVE of a run: every variable
/// in turn, at varying offsets.
fn query(i: u64) -> (u32, u64, u64) {
    let var = (i.wrapping_mul(2654435761) % u64::from(RESOLVE_VARS)) as u32 + 1;
    (var, (i % 63) * 64, 64)
}

fn resolve_block(dev: &Device, plan: u32, n: u64) -> io::Result<()> {
    for i in 0..n {
        let (v, off, size) = query(i);
        std::hint::black_box(dev.resolve(plan, v, off, size)?);
    }
    Ok(())
}

fn info_block(dev: &Device, n: u64) -> io::Result<()> {
    for _ in 0..n {
        std::hint::black_box(dev.device_info()?);
    }
    Ok(())
}

/// The answers are folded into one value and that is kept, not each answer:
/// `black_box` on every answer is a compiler barrier that would make every
/// call reload the resolver's table from memory, which no caller does.
fn library_block(r: &Resolver, n: u64) -> io::Result<()> {
    let mut folded = 0u64;
    for i in 0..n {
        let (v, off, size) = query(i);
        folded ^= r.resolve(v, off, size)?;
    }
    std::hint::black_box(folded);
    Ok(())
}

/// The RESOLVE figures: RESOLVE against DEVICE_INFO (`resolve`), and the
/// library's in-process resolve against RESOLVE (`library_resolve`). The
/// RESOLVE_BATCH comparison is printed as a diagnostic.
pub fn resolve_figures(dev: &Device) -> io::Result<Vec<Figure>> {
    let blob = buffers_blob(RESOLVE_VARS, VAR_SIZE);
    let plan = Staged::load(dev, &blob)?;
    // A resolve answers what the load reported.
    let loaded = Plan::from_blob(&blob).map_err(io::Error::from)?;
    let first = dev.resolve(plan.id, loaded.records[0].var_id, 0, VAR_SIZE)?;
    if first == nhbm::uapi::PA_UNSTAGED || first != plan.loaded.addrs[0] {
        return Err(invalid(format!(
            "RESOLVE returned {first:#x}, PLAN_LOAD reported {:#x}",
            plan.loaded.addrs[0]
        )));
    }

    let n_res = calibrate(BLOCK, |n| resolve_block(dev, plan.id, n))?;
    let n_info = calibrate(BLOCK, |n| info_block(dev, n))?;
    let p = interleave(
        RESOLVE_ROUNDS,
        || per_op_ns(n_res, |n| resolve_block(dev, plan.id, n)),
        || per_op_ns(n_info, |n| info_block(dev, n)),
    )?;
    let (r, i) = (p.a_median(), p.b_median());
    let resolve = Figure::of_ratios(
        "resolve",
        &p.ratios(),
        Raw::new("RESOLVE median ns/call", format!("{r:.1}")),
        Raw::new("DEVICE_INFO median ns/call", format!("{i:.1}")),
        Op::AtMost,
        1.25,
    );
    note(&format!(
        "resolve: {RESOLVE_ROUNDS} blocks per side of {n_res} RESOLVE / {n_info} DEVICE_INFO calls"
    ));
    let library = library_figure(dev, &plan, &loaded, n_res)?;
    batch_diagnostic(dev, plan.id, n_res)?;
    Ok(vec![resolve, library])
}

/// `library_resolve`: the library's in-process resolve of `loaded` (staged
/// as `plan`), first checked against RESOLVE for every variable, against
/// blocks of `n_res` RESOLVEs.
fn library_figure(dev: &Device, plan: &Staged, loaded: &Plan, n_res: u64) -> io::Result<Figure> {
    let lib = Resolver::new(loaded, &plan.loaded, |_, _| None)?;
    for i in 0..u64::from(RESOLVE_VARS) {
        let (v, off, size) = query(i);
        let want = dev.resolve(plan.id, v, off, size)?;
        if lib.resolve(v, off, size)? != want {
            return Err(invalid(format!(
                "library resolve of var {v} differs from RESOLVE"
            )));
        }
    }
    let n_lib = calibrate(BLOCK, |n| library_block(&lib, n))?;
    let p = interleave(
        RESOLVE_ROUNDS,
        || per_op_ns(n_lib, |n| library_block(&lib, n)),
        || per_op_ns(n_res, |n| resolve_block(dev, plan.id, n)),
    )?;
    let (l, r2) = (p.a_median(), p.b_median());
    Ok(Figure::of_ratios(
        "library_resolve",
        &p.ratios(),
        Raw::new("nhbm::Resolver median ns/call", format!("{l:.2}")),
        Raw::new("RESOLVE median ns/call", format!("{r2:.1}")),
        Op::AtMost,
        0.02,
    ))
}

/// RESOLVE_BATCH per entry against RESOLVE, with the share of the user copies
/// (each 32-byte query is copied in and back out) estimated from a userspace
/// `rep movsq` of the same pieces.
fn batch_diagnostic(dev: &Device, plan: u32, n_res: u64) -> io::Result<()> {
    let mut queries = batch_queries(dev, plan)?;
    let mut batch_block = |n: u64| {
        for _ in 0..n {
            dev.resolve_batch(plan, &mut queries)?;
        }
        Ok(())
    };
    let n_batch = calibrate(BLOCK, &mut batch_block)?;
    let p = interleave(
        BATCH_ROUNDS,
        || per_op_ns(n_batch, &mut batch_block),
        || per_op_ns(n_res, |n| resolve_block(dev, plan, n)),
    )?;
    let (b, r) = (p.a_median(), p.b_median());
    let e = b / f64::from(RESOLVE_VARS);
    let c = user_copy_ns()?;
    note(&format!(
        "batch_resolve: RESOLVE_BATCH x{RESOLVE_VARS} {e:.1} ns/entry / RESOLVE {r:.1} ns/call \
         = {:.3}; user copy share: 64 bytes/entry at userspace rep movsq {c:.1} ns = {:.0}% of \
         an entry, {:.3} of a RESOLVE",
        e / r,
        100.0 * c / e,
        c / r
    ));
    Ok(())
}

/// One batch of queries, every variable once, resolved by RESOLVE_BATCH and
/// checked against RESOLVE.
fn batch_queries(dev: &Device, plan: u32) -> io::Result<Vec<ResolveQuery>> {
    let mut queries: Vec<ResolveQuery> = (0..u64::from(RESOLVE_VARS))
        .map(|i| {
            let (var_id, offset, size) = query(i);
            ResolveQuery {
                var_id,
                offset,
                size,
                ..Default::default()
            }
        })
        .collect();
    dev.resolve_batch(plan, &mut queries)?;
    for q in &queries {
        let want = dev.resolve(plan, q.var_id, q.offset, q.size)?;
        if q.status != 0 || q.addr != want {
            return Err(invalid(format!(
                "RESOLVE_BATCH var {}: status {} addr {:#x}, RESOLVE says {want:#x}",
                q.var_id, q.status, q.addr
            )));
        }
    }
    Ok(queries)
}

/// Userspace `rep movsq` ns per batch entry of copying its query in and
/// out: the share of RESOLVE_BATCH's user copies.
fn user_copy_ns() -> io::Result<f64> {
    // The kernel copies the queries in and out in pieces of 256 (8 KiB).
    let bytes = RESOLVE_VARS as usize * std::mem::size_of::<ResolveQuery>();
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut copy_block = |n: u64| {
        for _ in 0..n {
            for (d, s) in dst.chunks_mut(8192).zip(src.chunks(8192)) {
                rep_movsq(d, s);
            }
        }
        Ok(())
    };
    let n_copy = calibrate(BLOCK, &mut copy_block)?;
    let mut copies = Vec::new();
    for _ in 0..3 {
        copies.push(per_op_ns(n_copy, &mut copy_block)?);
    }
    // In and out: twice the bytes.
    Ok(2.0 * median(&copies) / f64::from(RESOLVE_VARS))
}

/// `Slab:` + `VmallocUsed:` of /proc/meminfo, in bytes.
pub fn kernel_bytes(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    Some((field("Slab")? + field("VmallocUsed")?) * 1024)
}

fn meminfo_kernel_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/meminfo")?;
    kernel_bytes(&text).ok_or_else(|| invalid("/proc/meminfo has no Slab or VmallocUsed".into()))
}

/// The module's own accounting: `plans <n> vars <n> bytes <n>` as (vars, bytes).
pub fn parse_kmem(text: &str) -> Option<(u64, u64)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let get = |key: &str| {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse::<u64>().ok()
    };
    Some((get("vars")?, get("bytes")?))
}

fn read_kmem() -> Option<(&'static str, u64, u64)> {
    KMEM_PATHS.iter().find_map(|p| {
        let text = fs::read_to_string(Path::new(p)).ok()?;
        let (vars, bytes) = parse_kmem(&text)?;
        Some((*p, vars, bytes))
    })
}

/// What the staging rounds measured: per round the (large, small) load and
/// unload times, the module's (bytes, vars) and where it reported them, and
/// the meminfo growth while the large plan is staged.
#[derive(Default)]
struct StagingRounds {
    times: Pairs,
    unloads: Pairs,
    kmem: Pairs,
    kmem_path: Option<&'static str>,
    meminfo: Vec<f64>,
}

/// Figures 3 and 5: PLAN_LOAD of 100,000 variables against 10,000, and the
/// kernel memory per variable while the 100,000-variable plan is staged.
pub fn staging_figures(dev: &Device) -> io::Result<(Figure, Figure)> {
    let small = buffers_blob(SMALL_PLAN, VAR_SIZE);
    let large = buffers_blob(LARGE_PLAN, VAR_SIZE);

    // How many small loads one round needs to span SMALL_LOAD_MIN.
    let probe = try_time_ns(|| Staged::load(dev, &small).map(drop))?;
    let reps = ((SMALL_LOAD_MIN.as_nanos() as f64 / probe.max(1.0)).ceil() as usize).clamp(1, 20);

    let rounds = staging_rounds(dev, &small, &large, reps)?;
    let (times, unloads) = (&rounds.times, &rounds.unloads);
    let (l, s) = (times.a_median(), times.b_median());
    note_load_on_top(dev, &small, reps, s)?;
    note_staging_costs(dev)?;
    note(&format!(
        "staging_scale: {STAGING_ROUNDS} rounds, {reps} x {SMALL_PLAN}-var load(s) per round; \
         PLAN_UNLOAD {LARGE_PLAN} / {SMALL_PLAN} vars = {:.0} ns / {:.0} ns = {:.3}",
        unloads.a_median(),
        unloads.b_median(),
        unloads.ratios().median()
    ));
    let scale = Figure::of_ratios(
        "staging_scale",
        &times.ratios(),
        Raw::new(
            format!("PLAN_LOAD {LARGE_PLAN} x 4KiB MR_BUFFER median ns"),
            format!("{l:.0}"),
        ),
        Raw::new(
            format!("PLAN_LOAD {SMALL_PLAN} x 4KiB MR_BUFFER median ns"),
            format!("{s:.0}"),
        ),
        Op::AtMost,
        12.0,
    );
    Ok((scale, kmem_figure(&rounds)?))
}

/// [`STAGING_ROUNDS`] rounds alternating `reps` loads of `small` with one of
/// `large`, in ABBA order, reading the kernel memory at each large load.
fn staging_rounds(
    dev: &Device,
    small: &[u8],
    large: &[u8],
    reps: usize,
) -> io::Result<StagingRounds> {
    let mut m = StagingRounds::default();
    let round_small = || -> io::Result<(f64, f64)> {
        let (mut load, mut unload) = (0.0, 0.0);
        for _ in 0..reps {
            let (p, ns) = time_ns(|| Staged::load(dev, small));
            let p = p?;
            load += ns;
            unload += time_ns(|| drop(p)).1;
        }
        Ok((load / reps as f64, unload / reps as f64))
    };
    for r in 0..STAGING_ROUNDS {
        let mut round_large = || -> io::Result<(f64, f64)> {
            let before = meminfo_kernel_bytes();
            let (p, ns) = time_ns(|| Staged::load(dev, large));
            let p = p?;
            if let (Ok(b), Ok(a)) = (before, meminfo_kernel_bytes()) {
                m.meminfo.push(a as f64 - b as f64);
            }
            if let Some((path, vars, bytes)) = read_kmem() {
                m.kmem_path = Some(path);
                m.kmem.push(bytes as f64, vars as f64);
            }
            Ok((ns, time_ns(|| drop(p)).1))
        };
        let (large_t, small_t) = if r % 2 == 0 {
            let s = round_small()?;
            (round_large()?, s)
        } else {
            let l = round_large()?;
            (l, round_small()?)
        };
        m.times.push(large_t.0, small_t.0);
        m.unloads.push(large_t.1, small_t.1);
    }
    Ok(m)
}

/// Where growth beyond linear comes from: the same small load with the rest
/// of the large plan already staged (same grid occupancy, per-plan
/// structures of the small size), against `s`, its time on an empty device.
fn note_load_on_top(dev: &Device, small: &[u8], reps: usize, s: f64) -> io::Result<()> {
    let _held = Staged::load(dev, &buffers_blob(LARGE_PLAN - SMALL_PLAN, VAR_SIZE))?;
    let mut on_top = Vec::new();
    for _ in 0..3 {
        let mut load = 0.0;
        for _ in 0..reps {
            let (p, ns) = time_ns(|| Staged::load(dev, small));
            drop(p?);
            load += ns;
        }
        on_top.push(load / reps as f64);
    }
    let t = median(&on_top);
    note(&format!(
        "staging_scale: PLAN_LOAD of {SMALL_PLAN} vars with {} vars already staged: \
         {t:.0} ns = {:.2} x the same load on an empty device",
        LARGE_PLAN - SMALL_PLAN,
        t / s
    ));
    Ok(())
}

/// Cost per variable as the plan grows, and the same for records that
/// allocate no HBM.
fn note_staging_costs(dev: &Device) -> io::Result<()> {
    let mut sweep = Vec::new();
    for n in [SMALL_PLAN, 25_000, 50_000, LARGE_PLAN] {
        let ns = load_ns(dev, &buffers_blob(n, VAR_SIZE), 3)?;
        sweep.push(format!("{}k {:.0}", n / 1000, ns / f64::from(n)));
    }
    note(&format!(
        "staging_scale: PLAN_LOAD ns/var by plan size: {}",
        sweep.join(", ")
    ));
    let (ws, wl) = (
        load_ns(dev, &windows_blob(SMALL_PLAN), 5)?,
        load_ns(dev, &windows_blob(LARGE_PLAN), 3)?,
    );
    note(&format!(
        "staging_scale: MR_VIRTUAL_TMP_BUF (no HBM allocation) {LARGE_PLAN} / {SMALL_PLAN} \
         vars: {wl:.0} ns / {ws:.0} ns = {:.3}",
        wl / ws
    ));
    Ok(())
}

/// Figure 5 from the rounds: the module's own accounting where it has
/// one, else the meminfo growth (always printed as a diagnostic).
fn kmem_figure(rounds: &StagingRounds) -> io::Result<Figure> {
    let StagingRounds {
        kmem,
        kmem_path,
        meminfo,
        ..
    } = rounds;
    let growth = median(meminfo);
    if !meminfo.is_empty() {
        note(&format!(
            "kmem_per_var: /proc/meminfo Slab+VmallocUsed grew {growth:.0} bytes (median of \
             {}) over the {LARGE_PLAN}-var load = {:.1} bytes/var",
            meminfo.len(),
            growth / f64::from(LARGE_PLAN)
        ));
    }
    Ok(match kmem_path {
        Some(path) if kmem.b.iter().all(|&v| v > 0.0) => Figure::of_ratios(
            "kmem_per_var",
            &kmem.ratios(),
            Raw::new(
                format!("debugfs {path} bytes"),
                format!("{:.0}", kmem.a_median()),
            ),
            Raw::new("vars", format!("{:.0}", kmem.b_median())),
            Op::AtMost,
            96.0,
        ),
        _ if !meminfo.is_empty() => {
            let per_var = Ratios(meminfo.iter().map(|d| d / f64::from(LARGE_PLAN)).collect());
            Figure::of_ratios(
                "kmem_per_var",
                &per_var,
                Raw::new(
                    "/proc/meminfo Slab+VmallocUsed delta bytes",
                    format!("{growth:.0}"),
                ),
                Raw::new("staged vars", LARGE_PLAN.to_string()),
                Op::AtMost,
                96.0,
            )
        }
        _ => return Err(invalid("no kmem file and no /proc/meminfo".into())),
    })
}

/// Figure 4: MEM_WRITE of UPLOAD_CHUNK bytes into a variable against a
/// userspace memcpy of the same bytes, UPLOAD_REPS repetitions in ABBA
/// order after one untimed pass of each (which materializes the simulated
/// device's pages and faults in the destination); the median ratio.
pub fn upload_figure(dev: &Device) -> io::Result<Figure> {
    let chunk = UPLOAD_CHUNK;
    let blob = buffers_blob(1, chunk as u64);
    let plan = Staged::load(dev, &blob)?;
    let src = pattern(chunk);
    let mut dst = Dest::apart_from(&src);

    let write = || dev.mem_write(plan.id, 1, 0, &src);
    let mut copy = |src: &[u8]| {
        dst.as_mut_slice()
            .copy_from_slice(std::hint::black_box(src));
        std::hint::black_box(dst.as_mut_slice());
    };
    write()?;
    copy(&src);
    let p = interleave(
        UPLOAD_REPS,
        || try_time_ns(write),
        || Ok(time_ns(|| copy(&src)).1),
    )?;
    // What was written is there.
    let mut back = vec![0u8; 4096];
    for off in [0, chunk / 2 + 12_345, chunk - 4096] {
        dev.mem_read(plan.id, 1, off as u64, &mut back)?;
        if back[..] != src[off..off + 4096] {
            return Err(invalid(format!(
                "MEM_READ at {off} differs from what was written"
            )));
        }
    }
    let (r_ns, m_ns) = rep_movsq_and_read_ns(dev, plan.id, dst.as_mut_slice(), &src)?;
    drop(plan);
    let bytes = chunk as f64;
    let (w_bw, c_bw) = (bytes / p.a_median(), bytes / p.b_median());
    let half = (chunk * 2) as f64;
    note(&format!(
        "upload_bandwidth: bytes/ns: MEM_WRITE {w_bw:.4}, MEM_READ {:.4}, memcpy {c_bw:.4}, \
         userspace rep movsq {:.4}",
        half / m_ns,
        half / r_ns
    ));
    let total = format!("{} MiB", chunk >> 20);
    Ok(bandwidth_figure(
        "upload_bandwidth",
        &p,
        chunk,
        [format!("MEM_WRITE {total}"), format!("memcpy {total}")],
        0.5,
    ))
}

/// The guest kernel copies user memory with `rep movsq` (its CPU has no
/// ERMS/FSRM); how fast the emulator runs that, measured in userspace on
/// the same buffers: ns of two such copies of `src` into `dst`, and of two
/// MEM_READs of variable 1 of `plan` into `dst`.
fn rep_movsq_and_read_ns(
    dev: &Device,
    plan: u32,
    dst: &mut [u8],
    src: &[u8],
) -> io::Result<(f64, f64)> {
    let mut r_ns = 0.0;
    let mut m_ns = 0.0;
    for _ in 0..2 {
        r_ns += time_ns(|| rep_movsq(dst, src)).1;
        m_ns += try_time_ns(|| dev.mem_read(plan, 1, 0, dst))?;
    }
    Ok((r_ns, m_ns))
}

/// Whole-model staging: payload bytes and records of the plan.
pub const MODEL_BYTES: usize = 256 << 20;
pub const MODEL_RECORDS: u32 = 1000;
/// Repetitions of the whole-model figure (one load and one memcpy each).
const MODEL_REPS: usize = 15;
/// What `model_staging` must reach (see Documentation/benchmarks.rst).
pub const MODEL_STAGING_TARGET: f64 = 0.8;

/// Sizes of the whole-model plan's records: varied multiples of 64 (rarely of
/// 4 KiB) around the mean, adding up to exactly [`MODEL_BYTES`], so that the
/// payloads lie back to back in the blob.
pub fn model_sizes() -> Vec<u64> {
    let n = MODEL_RECORDS as u64;
    let mean = MODEL_BYTES as u64 / n;
    let mut sizes: Vec<u64> = (0..n)
        .map(|i| (mean / 2 + (i * 7919 % n) * mean / n) & !63)
        .collect();
    let sum: u64 = sizes.iter().sum();
    let last = sizes.last_mut().expect("records");
    *last = *last + MODEL_BYTES as u64 - sum;
    sizes
}

/// A plan of [`MODEL_RECORDS`] MR_BUFFER_STAGED records whose payloads add up
/// to [`MODEL_BYTES`], and where in the blob the payload bytes start.
pub fn model_blob() -> io::Result<(Vec<u8>, usize)> {
    let mut plan = Plan::new(0, 0);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for (i, size) in model_sizes().into_iter().enumerate() {
        let data: Vec<u8> = (0..size)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        plan.records
            .push(Record::buffer_staged(i as u32 + 1, size).data(data));
    }
    // One copy of the payloads at a time: the guest holds three more later.
    let raw = plan.to_raw().map_err(io::Error::from)?;
    drop(plan);
    Ok((
        raw.to_bytes(),
        nhbm::RawPlan::data_start(MODEL_RECORDS as usize),
    ))
}

/// The whole model's payloads, as [`model_blob`] lays them out: `blob`
/// from `start`, checked to be that long.
fn model_payloads(blob: &[u8], start: usize) -> io::Result<&[u8]> {
    blob.get(start..start + MODEL_BYTES)
        .ok_or_else(|| invalid("model blob shorter than its payloads".into()))
}

/// PLAN_LOAD of `blob`, the whole model, timed and unloaded again.
fn load_model_ns(dev: &Device, blob: &[u8]) -> io::Result<f64> {
    let (p, ns) = time_ns(|| Staged::load(dev, blob));
    drop(p?);
    Ok(ns)
}

/// `model_staging`: PLAN_LOAD of a whole model's weights (upload, scrub,
/// placement) into the simulated device against a userspace `memcpy` of
/// the same bytes (a copy with the instructions the module's upload runs,
/// [`copies::movnti_copy`], printed beside it as information), and
/// `model_staging_vs_mem_write`: the same PLAN_LOAD against MEM_WRITE of
/// the same payloads into a fresh plan of the same variables, which
/// isolates what PLAN_LOAD costs beyond its copy (records, placement,
/// scrub). Equal bytes: each ratio is the peer's time / PLAN_LOAD's.
pub fn model_staging_figures(dev: &Device) -> io::Result<[Figure; 2]> {
    let (blob, start) = model_blob()?;
    let src = model_payloads(&blob, start)?;
    let peer = StagingPeer {
        what: "memcpy",
        copy: <[u8]>::copy_from_slice,
    };
    let (staging, p) = staging_figure(dev, "model_staging", &blob, src, MODEL_REPS, peer)?;
    let mut dst = Dest::apart_from(src);
    note_beside_peer(
        "model_staging",
        &p,
        MODEL_BYTES,
        "the module's non-temporal copy (movnti)",
        || copies::movnti_copy(dst.as_mut_slice(), std::hint::black_box(src)),
    );
    Ok([staging, model_vs_write_figure(dev, &blob, src)?])
}

/// Repetitions of `pci_model_staging`: the function's HBM is scrubbed at
/// every load, and the guest is slower than the simulated device's.
const PCI_MODEL_REPS: usize = 5;

/// `pci_model_staging`: `model_staging` on a PCI function, whose PLAN_LOAD
/// uploads and scrubs through the function's DMA engine, against a
/// userspace `memcpy` (the module's CPU copies none of the bytes).
pub fn pci_model_staging_figure(dev: &Device) -> io::Result<Figure> {
    let (blob, start) = model_blob()?;
    let src = model_payloads(&blob, start)?;
    let peer = StagingPeer {
        what: "memcpy",
        copy: <[u8]>::copy_from_slice,
    };
    Ok(staging_figure(dev, "pci_model_staging", &blob, src, PCI_MODEL_REPS, peer)?.0)
}

/// The userspace copy a staging figure's PLAN_LOAD is compared with.
struct StagingPeer {
    /// What the copy is, for the figure's line.
    what: &'static str,
    /// Copies the second slice into the first (equal lengths).
    copy: fn(&mut [u8], &[u8]),
}

/// Figure `name`: PLAN_LOAD of the whole model `blob` (payloads `src`)
/// against `peer`'s copy of `src`, `reps` of each in ABBA order; and the
/// pairs timed.
fn staging_figure(
    dev: &Device,
    name: &str,
    blob: &[u8],
    src: &[u8],
    reps: usize,
    peer: StagingPeer,
) -> io::Result<(Figure, Pairs)> {
    let mut dst = Dest::apart_from(src);
    let mut copy = || {
        (peer.copy)(dst.as_mut_slice(), std::hint::black_box(src));
        std::hint::black_box(dst.as_mut_slice());
    };
    // One untimed pass of each: faults in the destination, and checks that
    // the payloads arrive (the simulated device's pages go at each unload,
    // so every timed load allocates its own).
    copy();
    check_model_arrives(dev, blob, src)?;
    let p = interleave(
        reps,
        || load_model_ns(dev, blob),
        || Ok(time_ns(&mut copy).1),
    )?;
    let bytes = MODEL_BYTES as f64;
    let load = Raw::new(
        format!("PLAN_LOAD {MODEL_RECORDS} records, 256 MiB of payloads, median bytes/ns"),
        format!("{:.4}", bytes / p.a_median()),
    );
    let figure = Figure::of_ratios(
        name,
        &p.inverse_ratios(),
        load,
        Raw::new(
            format!("{} 256 MiB median bytes/ns", peer.what),
            format!("{:.4}", bytes / p.b_median()),
        ),
        Op::AtLeast,
        MODEL_STAGING_TARGET,
    );
    Ok((figure, p))
}

/// Loads the whole model once and checks that its last payload arrived.
fn check_model_arrives(dev: &Device, blob: &[u8], src: &[u8]) -> io::Result<()> {
    let first = Staged::load(dev, blob)?;
    let last = MODEL_RECORDS - 1;
    let mut tail = vec![0u8; 64];
    let size = model_sizes()[last as usize];
    dev.mem_read(first.id, last + 1, size - 64, &mut tail)?;
    if tail[..] != src[MODEL_BYTES - 64..] {
        return Err(invalid("the last payload did not arrive".into()));
    }
    Ok(())
}

/// What `model_staging_vs_mem_write` must reach (see Documentation/benchmarks.rst).
pub const MODEL_VS_WRITE_TARGET: f64 = 0.9;

/// The whole model's variables without payloads (MR_BUFFER of the same
/// sizes), for MEM_WRITE to fill.
fn model_shell_blob(sizes: &[u64]) -> io::Result<Vec<u8>> {
    let mut plan = Plan::new(0, 0);
    plan.records = (1..)
        .zip(sizes)
        .map(|(id, &s)| Record::buffer(id, s))
        .collect();
    Ok(plan.to_raw().map_err(io::Error::from)?.to_bytes())
}

/// MEM_WRITE of every payload of `src` into a fresh load of `shell`
/// (untimed, as its unload): the time of the writes.
fn write_model_ns(dev: &Device, shell: &[u8], sizes: &[u64], src: &[u8]) -> io::Result<f64> {
    let plan = Staged::load(dev, shell)?;
    let (r, ns) = time_ns(|| {
        let mut at = 0usize;
        for (id, &size) in (1..).zip(sizes) {
            let end = at + size as usize;
            dev.mem_write(plan.id, id, 0, &src[at..end])?;
            at = end;
        }
        io::Result::Ok(())
    });
    r?;
    Ok(ns)
}

/// `model_staging_vs_mem_write` (see [`model_staging_figures`]).
fn model_vs_write_figure(dev: &Device, blob: &[u8], src: &[u8]) -> io::Result<Figure> {
    let sizes = model_sizes();
    let shell = model_shell_blob(&sizes)?;
    write_model_ns(dev, &shell, &sizes, src)?;
    let p = interleave(
        MODEL_REPS,
        || load_model_ns(dev, blob),
        || write_model_ns(dev, &shell, &sizes, src),
    )?;
    let bytes = MODEL_BYTES as f64;
    Ok(Figure::of_ratios(
        "model_staging_vs_mem_write",
        &p.inverse_ratios(),
        Raw::new(
            format!("PLAN_LOAD {MODEL_RECORDS} records, 256 MiB of payloads, median bytes/ns"),
            format!("{:.4}", bytes / p.a_median()),
        ),
        Raw::new(
            format!("MEM_WRITE of the {MODEL_RECORDS} payloads, median bytes/ns"),
            format!("{:.4}", bytes / p.b_median()),
        ),
        Op::AtLeast,
        MODEL_VS_WRITE_TARGET,
    ))
}

/// PCI MEM_WRITE: bytes per write and alternating rounds per side.
pub const PCI_CHUNK: usize = 16 << 20;
const PCI_ROUNDS: usize = 6;

/// `pci_mem_write`: NHBM_IOC_MEM_WRITE of a 16 MiB buffer into a variable of
/// an emulated PCI function (64-bit stores into its write-combining BAR4,
/// which QEMU maps from the device model's memfd) against the same write
/// into the simulated device (a copy into its sparse kernel pages), after
/// one untimed write of each, 6 repetitions in ABBA order. Figure: the
/// median of PCI bytes/ns / simulated bytes/ns.
pub fn pci_write_figure(sim: &Device, pci: &Device) -> io::Result<Figure> {
    let chunk = PCI_CHUNK;
    let blob = buffers_blob(1, chunk as u64);
    let on_sim = Staged::load(sim, &blob)?;
    let on_pci = Staged::load(pci, &blob)?;
    let src = pattern(chunk);
    let write_sim = || sim.mem_write(on_sim.id, 1, 0, &src);
    let write_pci = || pci.mem_write(on_pci.id, 1, 0, &src);
    write_sim()?;
    write_pci()?;
    let p = interleave(
        PCI_ROUNDS,
        || try_time_ns(write_pci),
        || try_time_ns(write_sim),
    )?;
    let mut back = vec![0u8; 4096];
    for off in [0, chunk / 2 + 4096, chunk - 4096] {
        pci.mem_read(on_pci.id, 1, off as u64, &mut back)?;
        if back[..] != src[off..off + 4096] {
            return Err(invalid(format!(
                "MEM_READ of the PCI function at {off} differs from what was written"
            )));
        }
    }
    let total = format!("{} MiB", chunk >> 20);
    Ok(bandwidth_figure(
        "pci_mem_write",
        &p,
        chunk,
        [
            format!("PCI BAR4 MEM_WRITE {total}"),
            format!("simulated MEM_WRITE {total}"),
        ],
        PCI_WRITE_TARGET,
    ))
}

/// What `pci_mem_write` must reach (see Documentation/benchmarks.rst).
pub const PCI_WRITE_TARGET: f64 = 0.02;

/// Bytes of each transfer compared with the BAR mapping, and repetitions.
pub const BAR_XFER: usize = 64 << 20;
const BAR_REPS: usize = 9;
/// Targets of the three figures against the BAR mapping (see
/// Documentation/benchmarks.rst).
pub const BAR_WRITE_TARGET: f64 = 0.8;
pub const BAR_READ_TARGET: f64 = 0.65;
pub const BAR_SCRUB_TARGET: f64 = 0.65;

/// `pci_write_vs_bar_copy`, `pci_read_vs_bar_copy` and
/// `pci_scrub_vs_memset`: MEM_WRITE and MEM_READ of [`BAR_XFER`] bytes, and
/// the PLAN_LOAD of one fresh [`BAR_XFER`]-byte MR_BUFFER (whose HBM the
/// module scrubs), against the module's own copy and zeroing loops
/// ([`copies`]) into, out of and over the same bytes of the function's
/// BAR4 mapped by this process through `bar4` (sysfs `resource4_wc`),
/// [`BAR_REPS`] repetitions each in ABBA order after one untimed pass of
/// each. Figures: the module's bytes/ns / the loops'. A libc `memcpy` and
/// `memset` of the same bytes are printed beside them, as information.
pub fn pci_bar_figures(pci: &Device, bar4: &Path) -> io::Result<Vec<Figure>> {
    let info = pci.device_info()?;
    if info.arch != 2 {
        // V2's channel 0 starts at device address 0 and BAR4 offset 0.
        return Err(invalid(format!(
            "the BAR4 comparison needs a V2 function, not v{}",
            info.arch
        )));
    }
    let len = BAR_XFER;
    let file = bar_file_name(bar4);
    let blob = buffers_blob(1, len as u64);
    let plan = Staged::load(pci, &blob)?;
    let pa = plan.loaded.addrs[0];
    let map = BarMap::open(bar4, pa, len)?;
    let (w, r) = bar_copy_pairs(pci, plan.id, &map, len)?;
    drop(plan);
    let z = bar_scrub_pairs(pci, &blob, pa, &map)?;
    let mib = len >> 20;
    Ok(vec![
        bandwidth_figure(
            "pci_write_vs_bar_copy",
            &w,
            len,
            [
                format!("MEM_WRITE {mib} MiB"),
                format!("the module's loop into {file} {mib} MiB"),
            ],
            BAR_WRITE_TARGET,
        ),
        bandwidth_figure(
            "pci_read_vs_bar_copy",
            &r,
            len,
            [
                format!("MEM_READ {mib} MiB"),
                format!("the module's loop out of {file} {mib} MiB"),
            ],
            BAR_READ_TARGET,
        ),
        bandwidth_figure(
            "pci_scrub_vs_memset",
            &z,
            len,
            [
                format!("PLAN_LOAD of a fresh {mib} MiB buffer (scrub)"),
                format!("the module's zeroing loop over {file} {mib} MiB"),
            ],
            BAR_SCRUB_TARGET,
        ),
    ])
}

/// Repetitions of the other copies (`memcpy`, `memset`, the module's own
/// instructions) some figures print beside theirs, as information.
const BESIDE_REPS: usize = 3;

/// Prints, as information, `figure`'s module side against `op`, a copy or
/// clearing of the same `len` bytes other than the figure's peer (for
/// the PCI figures a libc `memcpy` or `memset` of the mapping, what they
/// compared before their peer ran the module's own loops), timed
/// [`BESIDE_REPS`] times.
fn note_beside_peer(figure: &str, p: &Pairs, len: usize, what: &str, mut op: impl FnMut()) {
    let mut ns: Vec<f64> = (0..BESIDE_REPS).map(|_| time_ns(&mut op).1).collect();
    ns.sort_by(f64::total_cmp);
    let (module, other) = (len as f64 / p.a_median(), len as f64 / ns[BESIDE_REPS / 2]);
    note(&format!(
        "{figure} beside {what}: module {module:.4} bytes/ns, {what} {other:.4} bytes/ns, \
         ratio {:.3} (information)",
        module / other
    ));
}

/// MEM_WRITE and then MEM_READ of the `len` bytes of variable 1 of `plan`
/// against the module's own copy loops into and out of the same bytes
/// through `map` (one 64-bit access a word, straight between the buffer
/// and the mapping), after one untimed pass of each and a check that both read back
/// what was written: the (write, read) pairs. A `memcpy` of the same bytes
/// is printed beside each, as information.
fn bar_copy_pairs(pci: &Device, plan: u32, map: &BarMap, len: usize) -> io::Result<(Pairs, Pairs)> {
    let src = pattern(len);
    let write = || pci.mem_write(plan, 1, 0, &src);
    write()?;
    map.store_words_from(&src);
    let w = interleave(
        BAR_REPS,
        || try_time_ns(write),
        || Ok(time_ns(|| map.store_words_from(&src)).1),
    )?;
    note_beside_peer("pci_write_vs_bar_copy", &w, len, "memcpy", || {
        map.copy_from(&src)
    });
    let (mut via_module, mut via_map) = (vec![0u8; len], vec![0u8; len]);
    pci.mem_read(plan, 1, 0, &mut via_module)?;
    map.load_words_to(&mut via_map);
    if via_module != src || via_map != src {
        return Err(invalid(
            "MEM_READ or the BAR mapping differs from what was written".into(),
        ));
    }
    let r = interleave(
        BAR_REPS,
        || try_time_ns(|| pci.mem_read(plan, 1, 0, &mut via_module)),
        || Ok(time_ns(|| map.load_words_to(&mut via_map)).1),
    )?;
    note_beside_peer("pci_read_vs_bar_copy", &r, len, "memcpy", || {
        map.copy_to(&mut via_map)
    });
    Ok((w, r))
}

/// PLAN_LOAD of `blob`, one fresh buffer whose HBM the module scrubs,
/// against the module's own zeroing loop over its bytes through `map`,
/// after one untimed pass of each and a check that the load scrubbed
/// them; a `memset` is printed beside it, as information.
fn bar_scrub_pairs(pci: &Device, blob: &[u8], pa: u64, map: &BarMap) -> io::Result<Pairs> {
    // A fresh allocation of the same size lands where the variable was (an
    // empty channel, first fit); its scrub zeroes the pattern.
    let load = || -> io::Result<f64> {
        let (p, ns) = time_ns(|| Staged::load(pci, blob));
        let p = p?;
        if p.loaded.addrs[0] != pa {
            return Err(invalid(format!(
                "the scrubbed buffer moved from {pa:#x} to {:#x}",
                p.loaded.addrs[0]
            )));
        }
        Ok(ns)
    };
    load()?;
    let mut head = vec![0xffu8; 4096];
    map.copy_to(&mut head);
    if head.iter().any(|&b| b != 0) {
        return Err(invalid("PLAN_LOAD left the fresh buffer unscrubbed".into()));
    }
    map.zero_words();
    let z = interleave(BAR_REPS, load, || Ok(time_ns(|| map.zero_words()).1))?;
    note_beside_peer("pci_scrub_vs_memset", &z, BAR_XFER, "memset", || map.zero());
    Ok(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every timed figure is the median of enough repetitions.
    const _: () = {
        use crate::measure::MIN_REPS;
        assert!(RESOLVE_ROUNDS >= MIN_REPS && STAGING_ROUNDS >= MIN_REPS);
        assert!(UPLOAD_REPS >= MIN_REPS && MODEL_REPS >= MIN_REPS);
        assert!(PCI_ROUNDS >= MIN_REPS && BAR_REPS >= MIN_REPS);
    };

    #[test]
    fn staging_blobs_are_valid_plans_of_buffers() {
        let blob = buffers_blob(100, VAR_SIZE);
        let plan = Plan::from_blob(&blob).expect("valid");
        assert_eq!(plan.records.len(), 100);
        assert!(plan
            .records
            .iter()
            .enumerate()
            .all(|(i, r)| r.var_id == i as u32 + 1
                && r.size == VAR_SIZE
                && r.kind == nhbm::Kind::Buffer
                && r.data.is_empty()));
        assert_eq!(blob.len(), 24 + 100 * 152);
    }

    #[test]
    fn model_payloads_add_up_and_lie_back_to_back() {
        let sizes = model_sizes();
        assert_eq!(sizes.len(), MODEL_RECORDS as usize);
        assert_eq!(sizes.iter().sum::<u64>(), MODEL_BYTES as u64);
        assert!(sizes.iter().all(|&s| s > 0 && s % 64 == 0));
        assert!(sizes.iter().any(|&s| s % 4096 != 0));
    }

    #[test]
    fn window_blobs_are_valid_plans() {
        let plan = Plan::from_blob(&windows_blob(20_000)).expect("valid");
        assert_eq!(plan.records.len(), 20_000);
        assert_eq!(plan.local_scratchpad_size, 1 << 20);
    }

    #[test]
    fn queries_stay_inside_their_variable() {
        for i in 0..10_000u64 {
            let (v, off, size) = query(i);
            assert!((1..=RESOLVE_VARS).contains(&v));
            assert!(off + size <= VAR_SIZE);
        }
        // One batch touches every variable.
        let mut seen = vec![false; RESOLVE_VARS as usize + 1];
        for i in 0..u64::from(RESOLVE_VARS) {
            seen[query(i).0 as usize] = true;
        }
        assert!(seen[1..].iter().all(|&s| s));
    }

    #[test]
    fn meminfo_and_kmem_parse() {
        let m = "MemTotal:  500000 kB\nSlab:   12000 kB\nSReclaimable: 3000 kB\n\
                 VmallocUsed:    800 kB\n";
        assert_eq!(kernel_bytes(m), Some(12_800 * 1024));
        assert_eq!(kernel_bytes("Slab: 1 kB\n"), None);
        assert_eq!(
            parse_kmem("plans 1 vars 100000 bytes 8400000\n"),
            Some((100_000, 8_400_000))
        );
        assert_eq!(parse_kmem("plans 0\n"), None);
    }
}
