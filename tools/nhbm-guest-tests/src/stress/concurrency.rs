//! Several processes, each with several threads, on both devices at once:
//! loading, resolving, copying with verification, unloading and closing,
//! while the parent resets the devices. At the end every surviving plan
//! still resolves to the addresses it got at load and holds the bytes
//! written to it, and once every file is closed the devices' usage is what
//! it was before.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::{Device, Kind};

use crate::debugfs::DevDebugFs;
use crate::fixtures::pattern;
use crate::fixtures::{device_index, one_buffer, usage, KIB};
use crate::fuzz::gen::{valid_plan, GenCtx, RemoteTarget};
use crate::ktap::{ensure, fail, Ctx, Fail, Notes, TestResult};
use crate::rng::Rng;
use crate::stress::child::{spawn_child, Child};
use crate::sys::errno_of;

/// Knobs of the concurrency test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    /// How long the processes run.
    pub seconds: u64,
    /// How many processes (1..64).
    pub procs: usize,
    /// The seed of every process's generator.
    pub seed: u64,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            seconds: 20,
            procs: 4,
            seed: 0x5354_5245_5353,
        }
    }
}

static LOAD: OnceLock<Load> = OnceLock::new();

/// Sets the knobs of the concurrency test; only the first call counts.
pub fn set_load(load: Load) {
    let _ = LOAD.set(Load {
        procs: load.procs.clamp(1, 64),
        ..load
    });
}

/// A plan registered by a loader: what it got at load and what was written.
#[derive(Clone, Debug)]
struct Entry {
    plan_id: u32,
    vars: Vec<(u32, u64)>,
    written: Option<(u32, Vec<u8>)>,
}

/// What one process counts, in [`Counts::line`] order.
#[derive(Clone, Copy)]
enum C {
    Loads,
    Enomem,
    Unloads,
    Resolves,
    Batches,
    Writes,
    Reads,
    Races,
    Closes,
    Stats,
    Pins,
    Busy,
}

const COUNT_NAMES: [&str; 12] = [
    "loads",
    "enomem",
    "unloads",
    "resolves",
    "batches",
    "writes",
    "reads",
    "enoent_races",
    "closes",
    "stats",
    "remote_pins",
    "ebusy",
];

/// Operation counts of one process.
#[derive(Default)]
struct Counts([AtomicU64; 12]);

impl Counts {
    fn inc(&self, c: C) {
        self.0[c as usize].fetch_add(1, Relaxed);
    }

    fn line(&self) -> String {
        COUNT_NAMES
            .iter()
            .zip(&self.0)
            .map(|(n, v)| format!("{n}={}", v.load(Relaxed)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn add(&self, other: &[u64; 12]) {
        for (a, &v) in self.0.iter().zip(other) {
            a.fetch_add(v, Relaxed);
        }
    }
}

/// Parses a [`Counts::line`] back.
fn parse_counts(line: &str) -> Option<[u64; 12]> {
    let mut out = [0u64; 12];
    let mut n = 0;
    for (i, kv) in line.split_whitespace().enumerate() {
        let v = kv.split_once('=')?.1.parse().ok()?;
        *out.get_mut(i)? = v;
        n += 1;
    }
    (n == 12).then_some(out)
}

fn io_err(what: &str, e: &std::io::Error) -> String {
    format!("{what}: {}", nhbm::io_errno_name(e))
}

struct Shared<'a> {
    file: &'a Device,
    reg: Mutex<Vec<Entry>>,
    /// Plans a REMOTE record was ever aimed at (set before the load).
    aimed: Mutex<std::collections::HashSet<u32>>,
    counts: &'a Counts,
    deadline: Instant,
    gen: GenCtx,
    nr_channels: u32,
}

impl Shared<'_> {
    /// A registered plan chosen at random, if any.
    fn pick(&self, rng: &mut Rng) -> Option<Entry> {
        let reg = self.reg.lock().unwrap();
        if reg.is_empty() {
            None
        } else {
            Some(reg[rng.index(reg.len())].clone())
        }
    }

    fn registered(&self, id: u32) -> bool {
        self.reg.lock().unwrap().iter().any(|e| e.plan_id == id)
    }

    /// Unloads a plan taken out of the registry. EBUSY is right only for a
    /// plan some REMOTE was aimed at; it goes back into the registry.
    fn unload(&self, e: Entry) -> Result<(), String> {
        match self.file.plan_unload(e.plan_id) {
            Ok(()) => {
                self.counts.inc(C::Unloads);
                Ok(())
            }
            Err(err)
                if errno_of(&err) == libc::EBUSY
                    && self.aimed.lock().unwrap().contains(&e.plan_id) =>
            {
                self.counts.inc(C::Busy);
                self.reg.lock().unwrap().push(e);
                Ok(())
            }
            Err(err) => Err(io_err(&format!("PLAN_UNLOAD {}", e.plan_id), &err)),
        }
    }

    /// ENOENT on plan `id` is a race with an unload only if it is gone.
    fn enoent_ok(&self, id: u32, what: &str, e: &std::io::Error) -> Result<(), String> {
        if errno_of(e) == libc::ENOENT && !self.registered(id) {
            self.counts.inc(C::Races);
            Ok(())
        } else {
            Err(format!("{what} on plan {id}: {}", nhbm::io_errno_name(e)))
        }
    }
}

/// Loads plans, checks them, writes one variable, registers them; keeps a
/// handful alive and unloads the rest.
fn loader(s: &Shared, mut rng: Rng) -> Result<(), String> {
    while Instant::now() < s.deadline {
        let plan = valid_plan(&mut rng, &s.gen, 8);
        let blob = plan.to_blob().map_err(|e| e.to_string())?;
        let ch = if rng.chance(1, 2) {
            CHANNEL_ANY
        } else {
            rng.below(u64::from(s.nr_channels)) as u32
        };
        let p = match s.file.plan_load(&blob, ch) {
            Ok(p) => p,
            Err(e) if errno_of(&e) == libc::ENOMEM => {
                s.counts.inc(C::Enomem);
                continue;
            }
            Err(e) => return Err(io_err("PLAN_LOAD", &e)),
        };
        s.counts.inc(C::Loads);
        let vars: Vec<(u32, u64)> = plan
            .records
            .iter()
            .zip(&p.addrs)
            .map(|(r, &a)| (r.var_id, a))
            .collect();
        s.resolve_fresh(p.plan_id, &vars)?;
        let written = s.write_one(&plan, p.plan_id, &mut rng)?;
        s.register(
            Entry {
                plan_id: p.plan_id,
                vars,
                written,
            },
            &mut rng,
        )?;
    }
    Ok(())
}

impl Shared<'_> {
    /// Every variable of a fresh plan resolves to the address its load said.
    fn resolve_fresh(&self, plan_id: u32, vars: &[(u32, u64)]) -> Result<(), String> {
        for &(v, a) in vars {
            let got = self
                .file
                .resolve(plan_id, v, 0, 0)
                .map_err(|e| io_err("RESOLVE of a fresh plan", &e))?;
            self.counts.inc(C::Resolves);
            if got != a {
                return Err(format!(
                    "plan {plan_id} var {v}: RESOLVE {got:#x}, load said {a:#x}"
                ));
            }
        }
        Ok(())
    }

    /// Writes a pattern to the first writable variable of `plan`, if any,
    /// and reads it back: that variable and its bytes.
    fn write_one(
        &self,
        plan: &nhbm::Plan,
        plan_id: u32,
        rng: &mut Rng,
    ) -> Result<Option<(u32, Vec<u8>)>, String> {
        let target = plan.records.iter().find(|r| {
            matches!(
                r.kind,
                Kind::Input | Kind::Output | Kind::Buffer | Kind::BufferStaged | Kind::TmpBuf
            )
        });
        let Some(r) = target else {
            return Ok(None);
        };
        let n = r.size.min(64 * KIB);
        let bytes = pattern(n, rng.next_u32());
        self.file
            .mem_write(plan_id, r.var_id, 0, &bytes)
            .map_err(|e| io_err("MEM_WRITE", &e))?;
        self.counts.inc(C::Writes);
        let mut back = vec![0u8; bytes.len()];
        self.file
            .mem_read(plan_id, r.var_id, 0, &mut back)
            .map_err(|e| io_err("MEM_READ", &e))?;
        self.counts.inc(C::Reads);
        if back != bytes {
            return Err(format!(
                "plan {plan_id} var {}: bytes written do not read back",
                r.var_id
            ));
        }
        Ok(Some((r.var_id, bytes)))
    }

    /// Registers `entry`; past six registered plans, unloads one at random.
    fn register(&self, entry: Entry, rng: &mut Rng) -> Result<(), String> {
        let victim = {
            let mut reg = self.reg.lock().unwrap();
            reg.push(entry);
            if reg.len() > 6 {
                let k = rng.index(reg.len());
                Some(reg.swap_remove(k))
            } else {
                None
            }
        };
        if let Some(v) = victim {
            self.unload(v)?;
        }
        Ok(())
    }
}

/// Resolves, reads and batch-resolves registered plans while loaders
/// unload them; sometimes unloads one itself.
fn racer(s: &Shared, mut rng: Rng) -> Result<(), String> {
    while Instant::now() < s.deadline {
        let Some(e) = s.pick(&mut rng) else {
            std::thread::yield_now();
            continue;
        };
        match rng.below(9) {
            0..=2 => race_resolve(s, &e, &mut rng)?,
            3..=4 => race_read(s, &e)?,
            5..=6 => race_batch(s, &e)?,
            7 => {
                let st = s.file.mem_stats().map_err(|e| io_err("MEM_STATS", &e))?;
                if st.own_plans == 0 {
                    return Err("MEM_STATS: own_plans 0 while plans are loaded".into());
                }
                s.counts.inc(C::Stats);
            }
            _ => {
                let mine = {
                    let mut reg = s.reg.lock().unwrap();
                    reg.iter()
                        .position(|x| x.plan_id == e.plan_id)
                        .map(|k| reg.swap_remove(k))
                };
                if let Some(m) = mine {
                    s.unload(m)?;
                }
            }
        }
    }
    Ok(())
}

/// One RESOLVE of a variable of `e`: its address, or ENOENT once unloaded.
fn race_resolve(s: &Shared, e: &Entry, rng: &mut Rng) -> Result<(), String> {
    let (v, a) = e.vars[rng.index(e.vars.len())];
    match s.file.resolve(e.plan_id, v, 0, 0) {
        Ok(got) if got == a => {}
        Ok(got) => {
            return Err(format!(
                "plan {} var {v}: RESOLVE {got:#x}, load said {a:#x}",
                e.plan_id
            ))
        }
        Err(err) => s.enoent_ok(e.plan_id, "RESOLVE", &err)?,
    }
    s.counts.inc(C::Resolves);
    Ok(())
}

/// One MEM_READ of the variable `e` wrote, if any: its bytes, or ENOENT.
fn race_read(s: &Shared, e: &Entry) -> Result<(), String> {
    let Some((v, bytes)) = &e.written else {
        return Ok(());
    };
    let mut buf = vec![0u8; bytes.len()];
    match s.file.mem_read(e.plan_id, *v, 0, &mut buf) {
        Ok(()) if buf == *bytes => {}
        Ok(()) => return Err(format!("plan {} var {v}: MEM_READ bytes differ", e.plan_id)),
        Err(err) => s.enoent_ok(e.plan_id, "MEM_READ", &err)?,
    }
    s.counts.inc(C::Reads);
    Ok(())
}

/// One RESOLVE_BATCH of every variable of `e`: their addresses, or ENOENT.
fn race_batch(s: &Shared, e: &Entry) -> Result<(), String> {
    let mut qs: Vec<ResolveQuery> = e
        .vars
        .iter()
        .map(|&(v, _)| ResolveQuery {
            var_id: v,
            ..Default::default()
        })
        .collect();
    match s.file.resolve_batch(e.plan_id, &mut qs) {
        Ok(()) => {
            for (q, &(v, a)) in qs.iter().zip(&e.vars) {
                if q.status != 0 || q.addr != a {
                    return Err(format!(
                        "plan {} var {v}: batch status {} addr {:#x}, want {a:#x}",
                        e.plan_id, q.status, q.addr
                    ));
                }
            }
        }
        Err(err) => s.enoent_ok(e.plan_id, "RESOLVE_BATCH", &err)?,
    }
    s.counts.inc(C::Batches);
    Ok(())
}

/// Loads plans whose MR_REMOTE points into registered plans of the same
/// file while other threads unload those: the load either pins its target
/// (whose unload is then EBUSY) and resolves to the target's address, or
/// finds it gone (ENOENT).
fn pinner(s: &Shared, mut rng: Rng) -> Result<(), String> {
    while Instant::now() < s.deadline {
        let Some(e) = s.pick(&mut rng) else {
            std::thread::yield_now();
            continue;
        };
        let (v, pa) = e.vars[rng.index(e.vars.len())];
        s.aimed.lock().unwrap().insert(e.plan_id);
        let plan = nhbm::Plan::new(0, 0)
            .with(nhbm::Record::buffer(1, 4 * KIB))
            .with(nhbm::Record::remote(2, 0, e.plan_id, v))
            .with(nhbm::Record::ptr(3, 2, 0));
        let blob = plan.to_blob().map_err(|e| e.to_string())?;
        match s.file.plan_load(&blob, CHANNEL_ANY) {
            Ok(p) => {
                s.counts.inc(C::Pins);
                for var in [2, 3] {
                    let got = s
                        .file
                        .resolve(p.plan_id, var, 0, 0)
                        .map_err(|err| io_err("RESOLVE of a REMOTE", &err))?;
                    if got != pa || p.addrs[var as usize - 1] != pa {
                        return Err(format!(
                            "REMOTE into plan {} var {v}: {got:#x}, the target is at {pa:#x}",
                            e.plan_id
                        ));
                    }
                }
                for _ in 0..rng.range(0, 3) {
                    std::thread::yield_now();
                }
                s.file
                    .plan_unload(p.plan_id)
                    .map_err(|err| io_err("PLAN_UNLOAD of a REMOTE plan", &err))?;
            }
            Err(err) => s.enoent_ok(e.plan_id, "PLAN_LOAD with a REMOTE", &err)?,
        }
    }
    Ok(())
}

/// Opens files on any device, loads, copies, and closes them with plans
/// still loaded.
fn churn(devs: &[u32], counts: &Counts, deadline: Instant, mut rng: Rng) -> Result<(), String> {
    while Instant::now() < deadline {
        let i = devs[rng.index(devs.len())];
        let d = Device::open(i).map_err(|e| io_err("open", &e.into()))?;
        let info = d.device_info().map_err(|e| io_err("DEVICE_INFO", &e))?;
        let gen = GenCtx {
            nr_cores: info.nr_cores,
            sbuf_size: info.sbuf_size,
            remotes: vec![],
        };
        let mut ids = Vec::new();
        for _ in 0..rng.range(1, 3) {
            let plan = valid_plan(&mut rng, &gen, 6);
            match d.plan_load(&plan.to_blob().map_err(|e| e.to_string())?, CHANNEL_ANY) {
                Ok(p) => {
                    counts.inc(C::Loads);
                    ids.push(p.plan_id);
                }
                Err(e) if errno_of(&e) == libc::ENOMEM => {
                    counts.inc(C::Enomem);
                }
                Err(e) => return Err(io_err("PLAN_LOAD", &e)),
            }
        }
        let b = one_buffer(1, 16 * KIB)
            .to_blob()
            .map_err(|e| e.to_string())?;
        let p = d
            .plan_load(&b, CHANNEL_ANY)
            .map_err(|e| io_err("PLAN_LOAD", &e))?;
        let bytes = pattern(16 * KIB, rng.next_u32());
        d.mem_write(p.plan_id, 1, 0, &bytes)
            .map_err(|e| io_err("MEM_WRITE", &e))?;
        let mut back = vec![0u8; bytes.len()];
        d.mem_read(p.plan_id, 1, 0, &mut back)
            .map_err(|e| io_err("MEM_READ", &e))?;
        if back != bytes {
            return Err("churn: bytes written do not read back".into());
        }
        counts.inc(C::Writes);
        counts.inc(C::Reads);
        if rng.chance(1, 2) {
            if let Some(&id) = ids.first() {
                d.plan_unload(id).map_err(|e| io_err("PLAN_UNLOAD", &e))?;
                counts.inc(C::Unloads);
            }
        }
        drop(d);
        counts.inc(C::Closes);
    }
    Ok(())
}

/// One process: two loaders, a racer and a pinner on one shared file, a
/// churner opening and closing files on every device. Returns its counts.
fn process(k: usize, devs: &[u32], seed: u64, deadline: Instant) -> Result<String, String> {
    let primary = devs[k % devs.len()];
    let file = Device::open(primary).map_err(|e| io_err("open", &e.into()))?;
    let info = file.device_info().map_err(|e| io_err("DEVICE_INFO", &e))?;
    let anchor = file
        .plan_load(
            &one_buffer(1, 16 * KIB)
                .to_blob()
                .map_err(|e| e.to_string())?,
            CHANNEL_ANY,
        )
        .map_err(|e| io_err("PLAN_LOAD anchor", &e))?;
    let counts = Counts::default();
    let shared = Shared {
        file: &file,
        reg: Mutex::new(Vec::new()),
        aimed: Mutex::new(std::collections::HashSet::new()),
        counts: &counts,
        deadline,
        gen: GenCtx {
            nr_cores: info.nr_cores,
            sbuf_size: info.sbuf_size,
            remotes: vec![RemoteTarget {
                plan_id: anchor.plan_id,
                var_id: 1,
                size: 16 * KIB,
            }],
        },
        nr_channels: info.nr_channels,
    };
    run_threads(&shared, devs, seed ^ ((k as u64) << 32))?;
    let reg = shared.reg.into_inner().unwrap();
    check_survivors(&file, &reg)?;
    unload_survivors(&file, &reg, anchor.plan_id)?;
    Ok(format!("{} survivors={}", counts.line(), reg.len()))
}

/// The five threads of one process, seeded from `base`; the first error.
fn run_threads(sh: &Shared<'_>, devs: &[u32], base: u64) -> Result<(), String> {
    let (c, deadline) = (sh.counts, sh.deadline);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs = vec![
            sc.spawn(move || run_caught(|| loader(sh, Rng::for_case(base, 1)))),
            sc.spawn(move || run_caught(|| loader(sh, Rng::for_case(base, 2)))),
            sc.spawn(move || run_caught(|| racer(sh, Rng::for_case(base, 3)))),
            sc.spawn(move || run_caught(|| pinner(sh, Rng::for_case(base, 5)))),
            sc.spawn(move || run_caught(|| churn(devs, c, deadline, Rng::for_case(base, 4)))),
        ];
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    results.into_iter().collect()
}

/// Survivors: the same addresses, the same bytes, and MEM_STATS counting
/// them and the anchor.
fn check_survivors(file: &Device, reg: &[Entry]) -> Result<(), String> {
    for e in reg {
        for &(v, a) in &e.vars {
            let got = file.resolve(e.plan_id, v, 0, 0).map_err(|err| {
                io_err(&format!("final RESOLVE plan {} var {v}", e.plan_id), &err)
            })?;
            if got != a {
                return Err(format!(
                    "survivor plan {} var {v}: {got:#x}, load said {a:#x}",
                    e.plan_id
                ));
            }
        }
        if let Some((v, bytes)) = &e.written {
            let mut buf = vec![0u8; bytes.len()];
            file.mem_read(e.plan_id, *v, 0, &mut buf)
                .map_err(|err| io_err("final MEM_READ", &err))?;
            if buf != *bytes {
                return Err(format!(
                    "survivor plan {} var {v}: bytes changed",
                    e.plan_id
                ));
            }
        }
    }
    let st = file.mem_stats().map_err(|e| io_err("MEM_STATS", &e))?;
    if st.own_plans as usize != reg.len() + 1 {
        return Err(format!(
            "own_plans {} with {} survivors and the anchor",
            st.own_plans,
            reg.len()
        ));
    }
    Ok(())
}

/// Unloads the survivors, then the anchor: no REMOTE pin may be left on it.
fn unload_survivors(file: &Device, reg: &[Entry], anchor: u32) -> Result<(), String> {
    for e in reg {
        file.plan_unload(e.plan_id)
            .map_err(|err| io_err(&format!("PLAN_UNLOAD survivor {}", e.plan_id), &err))?;
    }
    file.plan_unload(anchor).map_err(|err| {
        io_err(
            "PLAN_UNLOAD of the anchor (a REMOTE pin left behind?)",
            &err,
        )
    })
}

fn run_caught(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    crate::ktap::catch(|| f().map_err(Fail::Fail)).map_err(Fail::into_message)
}

/// TPB resets of the watched devices at random intervals until every child
/// has exited: how many succeeded, and the failures.
fn reset_while_running(kids: &[Child], watch: &[Device], seed: u64) -> (u64, Vec<String>) {
    let mut rng = Rng::new(seed ^ 0x5e5e);
    let mut resets = 0u64;
    let mut reset_errs = Vec::new();
    while kids.iter().any(|c| !c.exited()) {
        let i = rng.index(watch.len());
        // TPB resets only: a device reset turns every plan loaded before it
        // to EIO (checked by `reset_is_not_every_tenants`), which would end
        // the processes' work here.
        let (t, map) = (RESET_TPB, rng.range(1, 3) as u32);
        match watch[i].reset(t, map) {
            Ok(0) => resets += 1,
            Ok(st) => reset_errs.push(format!("RESET type {t} status {st}")),
            Err(e) => reset_errs.push(format!("RESET type {t}: {}", nhbm::io_errno_name(&e))),
        }
        std::thread::sleep(Duration::from_millis(rng.range(20, 200)));
    }
    (resets, reset_errs)
}

/// Every child's report, summed, and the children that failed.
fn collect_reports(kids: Vec<Child>, notes: &mut Notes) -> (Counts, Vec<String>) {
    let total = Counts::default();
    let mut failures = Vec::new();
    for (k, c) in kids.into_iter().enumerate() {
        match c.wait() {
            Ok(line) => {
                let (counts, surv) = line.rsplit_once(" survivors=").unwrap_or((&line, "?"));
                match parse_counts(counts) {
                    Some(v) => total.add(&v),
                    None => failures.push(format!("process {k}: unreadable report {line:?}")),
                }
                notes.add(format!("process {k}: {surv} plans survived and checked"));
            }
            Err(m) => failures.push(format!("process {k}: {m}")),
        }
    }
    (total, failures)
}

/// Every file closed: usage back to where it was, and no plan of an exited
/// process (`pids`) still listed in debugfs.
fn nothing_left(watch: &[Device], before: &[(u64, u64)], devs: &[u32], pids: &[i32]) -> TestResult {
    for (d, b) in watch.iter().zip(before) {
        let u = usage(d)?;
        ensure(u.device() == *b, || {
            format!(
                "{}: used {:#x} chunks {} after every process exited, before {:#x} {}",
                d.path().display(),
                u.used,
                u.chunks,
                b.0,
                b.1
            )
        })?;
    }
    for &i in devs {
        if let Ok(text) = DevDebugFs::new(i).read_text("plans") {
            for l in text.lines() {
                let pid = l
                    .split_whitespace()
                    .next()
                    .and_then(|p| p.parse::<i32>().ok());
                ensure(!pid.is_some_and(|p| pids.contains(&p)), || {
                    format!("debugfs plans still lists {l:?} of an exited process")
                })?;
            }
        }
    }
    Ok(())
}

/// The test: processes on both devices, resets from the parent meanwhile.
pub fn processes_and_threads_on_both_devices(notes: &mut Notes) -> TestResult {
    let cfg = *LOAD.get_or_init(Load::default);
    let first = device_index();
    let devs: Vec<u32> = [first, first + 1]
        .into_iter()
        .filter(|&i| Device::open(i).is_ok())
        .collect();
    ensure(!devs.is_empty(), || "no device".into())?;
    let watch: Vec<Device> = devs
        .iter()
        .map(|&i| Device::open(i).ctx("open"))
        .collect::<Result<_, _>>()?;
    let before: Vec<(u64, u64)> = watch
        .iter()
        .map(|d| usage(d).map(|u| u.device()))
        .collect::<Result<_, _>>()?;

    let deadline = Instant::now() + Duration::from_secs(cfg.seconds);
    let mut kids: Vec<Child> = Vec::new();
    for k in 0..cfg.procs {
        let devs2 = devs.clone();
        let child = spawn_child(move || process(k, &devs2, cfg.seed, deadline))?;
        kids.push(child);
    }
    let pids: Vec<i32> = kids.iter().map(|c| c.pid).collect();
    // Resets in the middle of it all.
    let (resets, reset_errs) = reset_while_running(&kids, &watch, cfg.seed);
    let (total, failures) = collect_reports(kids, notes);
    ensure(reset_errs.is_empty(), || reset_errs.join("\n"))?;
    if !failures.is_empty() {
        return fail(failures.join("\n"));
    }
    nothing_left(&watch, &before, &devs, &pids)?;
    notes.add(format!(
        "{} processes x 5 threads on {} devices for {} s, {resets} resets: {}",
        cfg.procs,
        devs.len(),
        cfg.seconds,
        total.line()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_round_trip() {
        let c = Counts::default();
        c.add(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(
            parse_counts(&c.line()),
            Some([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        );
        assert_eq!(parse_counts("loads=1"), None);
    }
}
