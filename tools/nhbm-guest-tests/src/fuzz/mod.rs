//! The ioctl fuzzer: seeded and deterministic, bounded in cases and time.
//!
//! Case `i` of seed `s` draws everything from `Rng::for_case(s, i)` and runs
//! category `i % 8`, so any case replays on its own (`--only i`). After every
//! case the device's pool usage (and the file's own bytes, chunks and plans)
//! must be exactly the baseline, and every refusal must carry a documented
//! errno.

mod cases;
mod env;
pub(crate) mod gen;
mod mutate;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use clap::Parser;
use nhbm::cli::{num, parse_num, BadDevice, DeviceArg};
use nhbm::uapi::CHANNEL_ANY;
use nhbm::{errno_name, Device};

use crate::fixtures::{one_buffer, Usage};
use crate::ktap::{catch, Fail, Ktap, Outcome};
use crate::rng::Rng;
use crate::sys::documented;
use cases::{CaseOut, Oracle};
use env::Env;

/// Default seed of `make check` runs.
const DEFAULT_SEED: u64 = 0x6e68_626d_2d66_757a;
/// Default case count (overridden by `NHBM_FUZZ_CASES`).
const DEFAULT_CASES: u64 = 3000;
/// Default time bound in seconds.
const DEFAULT_SECONDS: u64 = 60;

/// Plans one open file may hold (uapi.rst).
const PLANS_PER_FILE: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Config {
    cases: u64,
    seed: u64,
    seconds: u64,
    /// Run only this case (replay).
    only: Option<u64>,
    device: u32,
    /// Print every case.
    verbose: bool,
    /// Skip the plans-per-file limit (4096 loads).
    quick: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cases: DEFAULT_CASES,
            seed: DEFAULT_SEED,
            seconds: DEFAULT_SECONDS,
            only: None,
            device: 0,
            verbose: false,
            quick: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    ValidPlans,
    BitFlips,
    FieldEdges,
    Truncation,
    References,
    HugeCounts,
    IoctlNumbers,
    FaultingPointers,
}

const CATEGORIES: [Category; 8] = [
    Category::ValidPlans,
    Category::BitFlips,
    Category::FieldEdges,
    Category::Truncation,
    Category::References,
    Category::HugeCounts,
    Category::IoctlNumbers,
    Category::FaultingPointers,
];

impl Category {
    fn name(self) -> &'static str {
        match self {
            Category::ValidPlans => "valid_plans_load_resolve_and_unload",
            Category::BitFlips => "bit_flipped_plans",
            Category::FieldEdges => "plan_fields_at_edge_values",
            Category::Truncation => "truncated_and_overlong_blobs",
            Category::References => "cycles_and_remote_references",
            Category::HugeCounts => "huge_counts_and_sizes",
            Category::IoctlNumbers => "random_ioctl_numbers_and_sizes",
            Category::FaultingPointers => "faulting_user_pointers",
        }
    }

    /// The category of case `i`.
    fn of_case(i: u64) -> Category {
        CATEGORIES[(i % CATEGORIES.len() as u64) as usize]
    }

    fn run(self, env: &mut Env, rng: &mut Rng) -> CaseOut {
        match self {
            Category::ValidPlans => cases::valid_plans(env, rng),
            Category::BitFlips => cases::bit_flips(env, rng),
            Category::FieldEdges => cases::field_edges(env, rng),
            Category::Truncation => cases::truncation(env, rng),
            Category::References => cases::references(env, rng),
            Category::HugeCounts => cases::huge_counts(env, rng),
            Category::IoctlNumbers => cases::ioctl_numbers(env, rng),
            Category::FaultingPointers => cases::faulting_pointers(env, rng),
        }
    }
}

/// Counts of one category, or of the validator comparison.
#[derive(Debug, Default)]
struct Stats {
    cases: u64,
    succeeded: u64,
    loads_ok: u64,
    rejected: u64,
    by_errno: BTreeMap<i32, u64>,
    failed: u64,
    first_failures: Vec<String>,
    slowest: Duration,
    slowest_case: u64,
    /// Time of all its cases together.
    total: Duration,
}

const KEEP_FAILURES: usize = 6;

impl Stats {
    fn failure(&mut self, msg: String) {
        self.failed += 1;
        if self.first_failures.len() < KEEP_FAILURES {
            self.first_failures.push(msg);
        }
    }

    /// `cases=.. ok=.. loads_ok=.. rejected=.. by errno: EINVAL=.. ...`
    fn summary(&self) -> String {
        let by: Vec<String> = self
            .by_errno
            .iter()
            .map(|(&e, n)| format!("{}={n}", errno_name(e)))
            .collect();
        format!(
            "cases={} ok={} loads_ok={} rejected={} by errno: {}",
            self.cases,
            self.succeeded,
            self.loads_ok,
            self.rejected,
            if by.is_empty() {
                "-".into()
            } else {
                by.join(" ")
            }
        )
    }
}

/// The validator comparison's counts.
#[derive(Debug, Default)]
struct OracleStats {
    compared: u64,
    agree: u64,
    kernel_accepts: Stats,
    kernel_refuses: u64,
    refuse_examples: Vec<String>,
    errno_differs: u64,
    differ_examples: Vec<String>,
}

/// Everything one run found.
#[derive(Debug, Default)]
struct Report {
    per_category: Vec<Stats>,
    oracle: OracleStats,
    ran: u64,
    elapsed: Duration,
    stopped_by_time: bool,
}

/// Runs one case and checks what every case must leave behind.
fn one_case(env: &mut Env, seed: u64, i: u64) -> (Category, CaseOut, Duration) {
    let cat = Category::of_case(i);
    let mut rng = Rng::for_case(seed, i);
    let t = Instant::now();
    let mut out = match catch(|| Ok(cat.run(env, &mut rng))) {
        Ok(o) => o,
        Err(Fail::Fail(m) | Fail::Skip(m)) => {
            let mut o = CaseOut::default();
            o.failures.push(m);
            o
        }
    };
    if let Some(e) = out.errno {
        if !documented(e) {
            out.failures
                .push(format!("undocumented errno {}", errno_name(e)));
        }
    }
    let before = out.failures.len();
    env.check_baseline(&mut out.failures);
    if out.failures.len() > before {
        // Do not let one leftover fail every later case.
        env.recover();
    }
    (cat, out, t.elapsed())
}

fn record(report: &mut Report, seed: u64, i: u64, cat: Category, out: CaseOut, took: Duration) {
    let k = CATEGORIES.iter().position(|&c| c == cat).unwrap();
    let st = &mut report.per_category[k];
    st.cases += 1;
    match out.errno {
        None => {
            st.succeeded += 1;
            st.loads_ok += u64::from(out.loaded);
        }
        Some(e) => {
            st.rejected += 1;
            *st.by_errno.entry(e).or_default() += 1;
        }
    }
    st.total += took;
    if took > st.slowest {
        st.slowest = took;
        st.slowest_case = i;
    }
    if !out.failures.is_empty() {
        st.failure(format!(
            "case {i} (seed {seed:#x}): {}: {}",
            out.what,
            out.failures.join("; ")
        ));
    }
    let o = &mut report.oracle;
    match out.oracle {
        Oracle::None => {}
        Oracle::Agree => {
            o.compared += 1;
            o.agree += 1;
        }
        Oracle::KernelAccepts(rule) => {
            o.compared += 1;
            o.kernel_accepts.failure(format!(
                "case {i} (seed {seed:#x}): {}: the kernel accepted a blob the format rejects: {rule}",
                out.what
            ));
        }
        Oracle::KernelRefuses(errno) => {
            o.compared += 1;
            o.kernel_refuses += 1;
            if o.refuse_examples.len() < 3 {
                o.refuse_examples
                    .push(format!("case {i}: {}: kernel {errno}", out.what));
            }
        }
        Oracle::ErrnoDiffers(d) => {
            o.compared += 1;
            o.errno_differs += 1;
            if o.differ_examples.len() < 3 {
                o.differ_examples
                    .push(format!("case {i}: {}: {d}", out.what));
            }
        }
    }
}

/// Runs the cases of `cfg` on an opened environment.
fn fuzz(env: &mut Env, cfg: &Config, progress: &mut dyn FnMut(&str)) -> Report {
    let mut report = Report {
        per_category: CATEGORIES.iter().map(|_| Stats::default()).collect(),
        ..Default::default()
    };
    let t0 = Instant::now();
    let limit = Duration::from_secs(cfg.seconds);
    let range = match cfg.only {
        Some(i) => i..i + 1,
        None => 0..cfg.cases,
    };
    let mut last_note = Instant::now();
    for i in range {
        if cfg.only.is_none() && t0.elapsed() >= limit {
            report.stopped_by_time = true;
            break;
        }
        let (cat, out, took) = one_case(env, cfg.seed, i);
        if cfg.verbose || (cfg.only.is_some() && !out.failures.is_empty()) {
            progress(&format!(
                "case {i} {}: {} -> {} {}",
                cat.name(),
                out.what,
                out.errno.map_or("ok".into(), errno_name),
                out.failures.join("; ")
            ));
        }
        record(&mut report, cfg.seed, i, cat, out, took);
        report.ran += 1;
        if last_note.elapsed() >= Duration::from_secs(15) {
            last_note = Instant::now();
            progress(&format!(
                "progress: {} cases in {} s",
                report.ran,
                t0.elapsed().as_secs()
            ));
        }
    }
    report.elapsed = t0.elapsed();
    report
}

/// One file loads plans up to the per-file limit; the next load is E2BIG,
/// and closing the file returns every byte.
fn plans_per_file_limit(index: u32, notes: &mut Vec<String>) -> Result<(), String> {
    let watch = Device::open(index).map_err(|e| format!("open: {e}"))?;
    let before = Usage::of(&watch).map_err(|e| format!("MEM_STATS: {e}"))?;
    let t = Instant::now();
    fill_one_file(index)?;
    let after = Usage::of(&watch).map_err(|e| format!("MEM_STATS: {e}"))?;
    notes.push(format!(
        "{PLANS_PER_FILE} plans in one file, then E2BIG; closed in {} ms total",
        t.elapsed().as_millis()
    ));
    if after.device() != before.device() {
        return Err(format!(
            "device usage after close {:?}, before {:?}",
            after.device(),
            before.device()
        ));
    }
    Ok(())
}

/// Opens a file of its own, fills it to the plan limit and checks it is
/// full, then unloads one plan and loads one more; the file closes on
/// return.
fn fill_one_file(index: u32) -> Result<(), String> {
    let d = Device::open(index).map_err(|e| format!("open: {e}"))?;
    let blob = one_buffer(1, 1).to_blob().map_err(|e| e.to_string())?;
    let ids = load_to_the_limit(&d, &blob)?;
    check_full_file(&d, &ids)?;
    // Unloading one makes room for exactly one more.
    d.plan_unload(ids[PLANS_PER_FILE / 2])
        .map_err(|e| format!("PLAN_UNLOAD: {e}"))?;
    d.plan_load(&blob, CHANNEL_ANY)
        .map_err(|e| format!("load after an unload: {e}"))?;
    Ok(())
}

/// Loads `blob` PLANS_PER_FILE times on `d`, then once more, which must be
/// E2BIG. Returns the plan ids of the loads.
fn load_to_the_limit(d: &Device, blob: &[u8]) -> Result<Vec<u32>, String> {
    let mut ids = Vec::with_capacity(PLANS_PER_FILE);
    for k in 0..PLANS_PER_FILE {
        match d.plan_load(blob, CHANNEL_ANY) {
            Ok(p) => ids.push(p.plan_id),
            Err(e) => {
                return Err(format!(
                    "load {} of {PLANS_PER_FILE}: {}",
                    k + 1,
                    nhbm::io_errno_name(&e)
                ))
            }
        }
    }
    match d.plan_load(blob, CHANNEL_ANY) {
        Err(e) if e.raw_os_error() == Some(libc::E2BIG) => {}
        Err(e) => {
            return Err(format!(
                "load {}: {}, want E2BIG",
                PLANS_PER_FILE + 1,
                nhbm::io_errno_name(&e)
            ))
        }
        Ok(p) => {
            return Err(format!(
                "load {} succeeded (plan {})",
                PLANS_PER_FILE + 1,
                p.plan_id
            ))
        }
    }
    Ok(ids)
}

/// A file at the plan limit: MEM_STATS counts every plan, and the plan ids
/// `ids` are distinct and no larger than the loads allow.
fn check_full_file(d: &Device, ids: &[u32]) -> Result<(), String> {
    let u = Usage::of(d).map_err(|e| format!("MEM_STATS: {e}"))?;
    if u.own_plans as usize != PLANS_PER_FILE {
        return Err(format!("own_plans {} after the limit", u.own_plans));
    }
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != ids.len() {
        return Err("plan ids repeat".into());
    }
    if let Some(&max) = sorted.last() {
        if max as usize > PLANS_PER_FILE + 1 {
            return Err(format!("plan id {max} after {PLANS_PER_FILE} loads"));
        }
    }
    Ok(())
}

/// Unloads the anchors (no pin may be left over), closes every file, and
/// checks the device is back where it started.
fn teardown(env: Env) -> Result<String, String> {
    let mut msgs = Vec::new();
    for &a in &env.anchors {
        if let Err(e) = env.dev.plan_unload(a) {
            msgs.push(format!(
                "unloading anchor plan {a}: {} (a REMOTE pin left behind?)",
                nhbm::io_errno_name(&e)
            ));
        }
    }
    let index = env.index;
    let initial = env.initial;
    let loads = env.loads;
    drop(env);
    let watch = Device::open(index).map_err(|e| format!("open: {e}"))?;
    let u = Usage::of(&watch).map_err(|e| format!("MEM_STATS: {e}"))?;
    if u.device() != initial {
        msgs.push(format!(
            "device usage after every file closed: used {:#x} chunks {}, before the run: used {:#x} chunks {}",
            u.used, u.chunks, initial.0, initial.1
        ));
    }
    if msgs.is_empty() {
        Ok(format!(
            "{loads} loads on the fuzzed file; usage back to used {:#x} chunks {}",
            u.used, u.chunks
        ))
    } else {
        Err(msgs.join("\n"))
    }
}

/// The whole `nhbm_fuzz` suite: returns whether it passed.
fn run_suite(cfg: &Config, w: &mut dyn Write) -> bool {
    let n = CATEGORIES.len() + 3;
    let mut k = Ktap::begin(w, "nhbm_fuzz", n);
    k.diag(&format!(
        "seed={:#x} cases={} seconds={} device=/dev/neuron_hbm{}{}",
        cfg.seed,
        cfg.cases,
        cfg.seconds,
        cfg.device,
        cfg.only
            .map(|i| format!(" only case {i}"))
            .unwrap_or_default()
    ));
    report_plans_per_file_limit(&mut k, cfg);
    let mut env = match Env::open(cfg.device) {
        Ok(e) => e,
        Err(e) => {
            report_setup_failure(&mut k, cfg, &e);
            return k.end();
        }
    };
    let report = fuzz(&mut env, cfg, &mut |l| k.diag(l));
    let stop = if report.stopped_by_time {
        format!(" (stopped by the {} s bound)", cfg.seconds)
    } else {
        String::new()
    };
    k.diag(&format!(
        "{} cases in {} ms{stop}; replay one with: nhbm-fuzz-test --seed {:#x} --only N",
        report.ran,
        report.elapsed.as_millis(),
        cfg.seed
    ));
    report_categories(&mut k, &report.per_category);
    report_oracle(&mut k, &report.oracle);
    let r = catch(|| teardown(env).map_err(Fail::Fail));
    match r {
        Ok(note) => k.result("teardown_restores_usage", &Outcome::Pass, &[note]),
        Err(Fail::Fail(m) | Fail::Skip(m)) => {
            k.result("teardown_restores_usage", &Outcome::Fail(m), &[])
        }
    }
    k.end()
}

/// The per-file plan limit, on a file of its own (skipped in a replay or
/// a --quick run).
fn report_plans_per_file_limit(k: &mut Ktap<'_>, cfg: &Config) {
    let mut notes = Vec::new();
    if cfg.quick || cfg.only.is_some() {
        k.result(
            "plans_per_file_limit",
            &Outcome::Skip("not in a replay or --quick run".into()),
            &[],
        );
    } else {
        let r = catch(|| plans_per_file_limit(cfg.device, &mut notes).map_err(Fail::Fail));
        let o = match r {
            Ok(()) => Outcome::Pass,
            Err(Fail::Fail(m) | Fail::Skip(m)) => Outcome::Fail(m),
        };
        k.result("plans_per_file_limit", &o, &notes);
    }
}

/// Fails every remaining test with why the fuzzer could not set up.
fn report_setup_failure(k: &mut Ktap<'_>, cfg: &Config, e: &io::Error) {
    let why = format!(
        "cannot set up on /dev/neuron_hbm{}: {} ({e})",
        cfg.device,
        nhbm::io_errno_name(e)
    );
    for c in CATEGORIES {
        k.result(c.name(), &Outcome::Fail(why.clone()), &[]);
    }
    k.result(
        "kernel_accepts_only_valid_plans",
        &Outcome::Fail(why.clone()),
        &[],
    );
    k.result("teardown_restores_usage", &Outcome::Fail(why), &[]);
}

/// One test result per category: its counts, its time, its slowest case
/// and its first failures.
fn report_categories(k: &mut Ktap<'_>, per_category: &[Stats]) {
    for (c, st) in CATEGORIES.iter().zip(per_category) {
        let mut notes = vec![st.summary()];
        if st.cases > 0 {
            notes.push(format!(
                "all took {} ms, the slowest, case {}, {} ms",
                st.total.as_millis(),
                st.slowest_case,
                st.slowest.as_millis()
            ));
        }
        let o = if st.failed > 0 {
            let mut m = format!("{} of {} cases failed:", st.failed, st.cases);
            for f in &st.first_failures {
                m.push('\n');
                m.push_str(f);
            }
            Outcome::Fail(m)
        } else if st.cases == 0 {
            Outcome::Skip("no case of this category ran".into())
        } else {
            Outcome::Pass
        };
        k.result(c.name(), &o, &notes);
    }
}

/// The validator comparison's result: fails when the kernel accepted a
/// blob the format rejects.
fn report_oracle(k: &mut Ktap<'_>, o: &OracleStats) {
    let mut notes = vec![format!(
        "compared={} agree={} kernel_accepts_invalid={} kernel_refuses_valid={} errno_differs={}",
        o.compared, o.agree, o.kernel_accepts.failed, o.kernel_refuses, o.errno_differs
    )];
    notes.extend(o.refuse_examples.iter().map(|e| format!("refused: {e}")));
    notes.extend(o.differ_examples.iter().map(|e| format!("differs: {e}")));
    let outcome = if o.kernel_accepts.failed > 0 {
        Outcome::Fail(o.kernel_accepts.first_failures.join("\n"))
    } else {
        Outcome::Pass
    };
    k.result("kernel_accepts_only_valid_plans", &outcome, &notes);
}

/// Time per case the default time bound allows for long runs (a debug
/// kernel is many times slower than the plain one).
const MS_PER_CASE: u64 = 12;

/// The command line of nhbm-fuzz-test.
#[derive(clap::Parser, Debug, Default)]
#[command(
    name = "nhbm-fuzz-test",
    about = "Fuzzes the neuron_hbm ioctls of /dev/neuron_hbmN and prints KTAP (suite \
             nhbm_fuzz); stops after --cases cases or --seconds seconds, whichever comes first"
)]
struct FuzzArgs {
    #[command(flatten)]
    device: DeviceArg,
    /// Cases to run [default: $NHBM_FUZZ_CASES, else 3000]
    #[arg(short = 'n', long, value_parser = num::<u64>)]
    cases: Option<u64>,
    /// The seed [default: a fixed one]
    #[arg(short = 's', long, value_parser = num::<u64>)]
    seed: Option<u64>,
    /// Time bound [default: $NHBM_FUZZ_SECONDS, else 60 s, 12 ms a case for longer runs]
    #[arg(short = 't', long, value_parser = num::<u64>)]
    seconds: Option<u64>,
    /// Replay case I of the seed
    #[arg(long, value_name = "I", value_parser = num::<u64>)]
    only: Option<u64>,
    /// Print every case
    #[arg(short, long)]
    verbose: bool,
    /// Skip the plans-per-file limit (4096 loads)
    #[arg(long)]
    quick: bool,
}

/// A command line or environment the fuzzer cannot run with.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    /// An environment variable that should hold a number.
    #[error("{name}={value:?} is not a number")]
    Env { name: &'static str, value: String },
    /// A device given by a path other than /dev/neuron_hbmN.
    #[error("--device: {0}")]
    Device(#[from] BadDevice),
}

impl FuzzArgs {
    /// The run configuration. `env_cases` (`NHBM_FUZZ_CASES`) gives the
    /// default case count and `env_seconds` (`NHBM_FUZZ_SECONDS`) the default
    /// time bound; without either, the time bound grows with the case count
    /// (60 s, or 12 ms a case: 1200 s for 100000).
    fn config(
        &self,
        env_cases: Option<&str>,
        env_seconds: Option<&str>,
    ) -> Result<Config, ArgsError> {
        let env_num = |name: &'static str, v: Option<&str>| match v
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            None => Ok(None),
            Some(v) => parse_num(v).map(Some).ok_or(ArgsError::Env {
                name,
                value: v.to_string(),
            }),
        };
        let d = Config::default();
        let cases = match self.cases {
            Some(n) => n,
            None => env_num("NHBM_FUZZ_CASES", env_cases)?.unwrap_or(d.cases),
        };
        let seconds = match self.seconds {
            Some(t) => Some(t),
            None => env_num("NHBM_FUZZ_SECONDS", env_seconds)?,
        };
        Ok(Config {
            cases,
            seed: self.seed.unwrap_or(d.seed),
            seconds: seconds
                .unwrap_or_else(|| DEFAULT_SECONDS.max(cases.saturating_mul(MS_PER_CASE) / 1000)),
            only: self.only,
            device: self.device.index()?,
            verbose: self.verbose,
            quick: self.quick,
        })
    }
}

/// The program: exit status 0 when every test passed.
pub fn main() -> i32 {
    let env_cases = std::env::var("NHBM_FUZZ_CASES").ok();
    let env_seconds = std::env::var("NHBM_FUZZ_SECONDS").ok();
    let cfg = match FuzzArgs::parse().config(env_cases.as_deref(), env_seconds.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nhbm-fuzz-test: {e}");
            return 2;
        }
    };
    let ok = run_suite(&cfg, &mut io::stdout().lock());
    i32::from(!ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str], cases: Option<&str>, seconds: Option<&str>) -> Result<Config, String> {
        let a = FuzzArgs::try_parse_from(std::iter::once("fuzz").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        a.config(cases, seconds).map_err(|e| e.to_string())
    }

    #[test]
    fn arguments_and_environment() {
        let c = cfg(&[], None, None).unwrap();
        assert_eq!(c, Config::default());
        let c = cfg(&[], Some("100000"), None).unwrap();
        assert_eq!((c.cases, c.seconds), (100_000, 1200));
        let c = cfg(&[], Some("100000"), Some("90")).unwrap();
        assert_eq!((c.cases, c.seconds), (100_000, 90));
        let c = cfg(
            &["--cases", "7", "--seed", "0x10", "--seconds", "1200"],
            Some("5"),
            Some("3"),
        )
        .unwrap();
        assert_eq!((c.cases, c.seed, c.seconds), (7, 16, 1200));
        let c = cfg(&["--cases", "100000", "--seconds", "1200"], None, None).unwrap();
        assert_eq!((c.cases, c.seconds), (100_000, 1200));
        let c = cfg(&["-n", "5", "-d", "1", "-v", "--quick"], None, None).unwrap();
        assert_eq!((c.cases, c.device, c.verbose, c.quick), (5, 1, true, true));
        assert!(cfg(&["--cases"], None, None).is_err());
        assert!(cfg(&["--bogus"], None, None).is_err());
        assert!(cfg(&[], Some("lots"), None).is_err());
        assert!(cfg(&["-d", "/tmp/node"], None, None).is_err());
        assert_eq!(cfg(&["--only", "42"], None, None).unwrap().only, Some(42));
    }

    #[test]
    fn categories_rotate() {
        assert_eq!(Category::of_case(0), Category::ValidPlans);
        assert_eq!(Category::of_case(7), Category::FaultingPointers);
        assert_eq!(Category::of_case(8), Category::ValidPlans);
        let names: std::collections::HashSet<_> = CATEGORIES.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), CATEGORIES.len());
    }

    #[test]
    fn summary_lists_errnos_by_name() {
        let mut st = Stats {
            cases: 3,
            succeeded: 1,
            loads_ok: 1,
            rejected: 2,
            ..Default::default()
        };
        st.by_errno.insert(libc::EINVAL, 2);
        assert_eq!(
            st.summary(),
            "cases=3 ok=1 loads_ok=1 rejected=2 by errno: EINVAL=2"
        );
    }
}
