//! nhbm: plan, stage, resolve and inspect neuron_hbm devices.
//!
//! Plans belong to the open file that loaded them and are freed when it is
//! closed, so every command that stages a plan (load, resolve, read, write)
//! does its work within one run; `session` runs a script of commands against
//! one open file.

mod args;
mod demo;
mod fmt;

use std::collections::HashMap;

use anyhow::{anyhow, Context};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nhbm::uapi::*;
use nhbm::validate::{backing_name, mr_type_name};
use nhbm::{io_errno_name, Device, Kind, Limits, LoadedPlan, Plan};
use nhbm_planner::planner::memory_lower_bounds;
use nhbm_planner::{
    lower, plan_with_outcome, var_ids, ExactOutcome, MemoryPlan, MemoryPlannerType, Model,
    PlanReport, PlannerError, PlannerOptions, Target,
};
use serde_json::{json, Value};

use args::{Cli, Cmd, PlanArgs, PlanFormat, VarArgs};
use clap::Parser;
use nhbm::cli::{parse_num, DeviceArg};

/// A failure: one line, naming what failed.
type R<T> = anyhow::Result<T>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nhbm: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> R<()> {
    let json = cli.json;
    let mut s = match &cli.cmd {
        Cmd::Plan(p) => return cmd_plan(p, &cli.device, json),
        Cmd::Validate { plan } => return cmd_validate(plan, &cli.device, json),
        // `demo DEVICE` names the device positionally.
        Cmd::Demo {
            device: Some(d), ..
        } => Session::open(&d.path, json)?,
        _ => Session::open(&cli.device.node().path, json)?,
    };
    match cli.cmd {
        Cmd::Info => s.info(),
        Cmd::Stats => s.stats(),
        Cmd::Reset { tpb } => s.reset(tpb),
        Cmd::Load {
            plan,
            channel,
            verify,
            hold,
        } => {
            let id = s.load(&plan, channel.channel, verify)?;
            if hold {
                eprintln!("nhbm: plan {id} stays loaded until stdin closes");
                let mut line = String::new();
                while std::io::stdin().read_line(&mut line)? > 0 {
                    line.clear();
                }
            }
            Ok(())
        }
        Cmd::Resolve(v) => {
            let id = s.stage_quietly(&v)?;
            s.resolve(id, &v.var, &v.rest_args())
        }
        Cmd::Read(v) => {
            let id = s.stage_quietly(&v)?;
            s.read(id, &v.var, &v.rest_args())
        }
        Cmd::Write(v) => {
            let id = s.stage_quietly(&v)?;
            s.write(id, &v.var, &v.rest_args())
        }
        Cmd::Session { file } => {
            let input: Box<dyn BufRead> = match file.as_deref() {
                Some(f) if f != "-" => Box::new(std::io::BufReader::new(
                    std::fs::File::open(f).map_err(|e| anyhow!("{f}: {e}"))?,
                )),
                _ => Box::new(std::io::stdin().lock()),
            };
            s.script(input)
        }
        Cmd::Demo { model_dir, .. } => demo::run(&mut s, model_dir.as_deref()),
        Cmd::Plan(_) | Cmd::Validate { .. } => unreachable!("handled above"),
    }
}

// ---- planning ----

fn cmd_plan(a: &PlanArgs, device: &DeviceArg, json: bool) -> R<()> {
    let path = a.model.display();
    let target = plan_target(a, device)?;
    let model = load_model(&a.model, target)?;
    let kind = a.planner.unwrap_or(model.desc.planner);
    let mut opts = model.desc.planner_options;
    if let Some(v) = a.iterations {
        opts.iterations = v;
    }
    if let Some(v) = a.seed {
        opts.seed = v;
    }
    if let Some(v) = a.max_stall {
        opts.max_stall_iterations = v;
    }
    if let Some(v) = a.time_budget {
        opts.time_budget_ms = v;
    }
    let runs = compare_planners(&model, &opts);
    let chosen = runs
        .iter()
        .find(|r| r.kind == kind)
        .expect("every planner runs");
    let mp = match &chosen.result {
        Ok((mp, _)) => mp.clone(),
        Err(e) => return Err(anyhow!("{path}: {e}")),
    };
    let elapsed = chosen.took;
    let report = PlanReport::new(&model, kind, &mp);
    let lowered = lower(&model, &mp).map_err(|e| anyhow!("{path}: {e}"))?;
    let format = a.format;
    let prefix = a.output.clone().unwrap_or_else(|| model.name().to_string());
    let mut written = Vec::new();
    for l in &lowered {
        let file = format!(
            "{prefix}.{}.plan{}",
            l.memory,
            if format == PlanFormat::Json {
                ".json"
            } else {
                ""
            }
        );
        let bytes = if format == PlanFormat::Json {
            l.plan.to_blob().map_err(|e| anyhow!("{file}: {e}"))?;
            l.plan.to_json().into_bytes()
        } else {
            l.plan.to_blob().map_err(|e| anyhow!("{file}: {e}"))?
        };
        std::fs::write(&file, &bytes).map_err(|e| anyhow!("{file}: {e}"))?;
        written.push((file, l.memory, bytes.len(), l.plan.records.len()));
    }

    if json {
        let files: Vec<Value> = written
            .iter()
            .map(|(f, m, n, r)| json!({"file": f, "memory": m, "channel": m.channel(), "bytes": n, "records": r, "device_bytes": report.device_bytes.get(m)}))
            .collect();
        let planners: Vec<Value> = runs.iter().map(|r| r.to_json()).collect();
        let out = json!({
            "model": model.name(), "report": report, "plan": mp, "files": files,
            "var_ids": var_ids(&model), "planning_ms": elapsed.as_secs_f64() * 1e3,
            "planners": planners,
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap());
        return Ok(());
    }
    println!(
        "model {}: {} tensors, {} operators; planner {kind} ({:.1} ms)",
        model.name(),
        model.tensors.len(),
        model.desc.operators.len(),
        elapsed.as_secs_f64() * 1e3
    );
    println!(
        "target {}: {} channels of {}, minimum allocation {}",
        model.target.name,
        model.target.channels(),
        fmt::bytes(model.target.channel_bytes(0)),
        fmt::bytes(model.target.min_alloc)
    );
    let over = report
        .scratch_high_water_mark
        .saturating_sub(report.liveness_lower_bound);
    println!(
        "scratch high-water mark {} vs liveness lower bound {}: {} above ({:.1}%)",
        fmt::bytes(report.scratch_high_water_mark),
        fmt::bytes(report.liveness_lower_bound),
        fmt::bytes(over),
        report.overhead_percent
    );
    println!();
    let rows: Vec<Vec<String>> = report
        .arenas
        .iter()
        .map(|u| {
            vec![
                format!("{:?}", u.role).to_lowercase(),
                u.memory.to_string(),
                u.source_memory.map_or("-".into(), |s| s.to_string()),
                if u.is_staged() {
                    "staged".into()
                } else {
                    "-".into()
                },
                u.total_size.to_string(),
                fmt::bytes(u.total_size),
                u.alignment.to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        fmt::table(
            &["arena", "memory", "source", "", "bytes", "size", "align"],
            &rows,
            &[4, 5, 6]
        )
    );
    println!();
    print_comparison(&runs);
    println!();
    let ids = var_ids(&model);
    let rows: Vec<Vec<String>> = model
        .tensors
        .iter()
        .map(|t| {
            let al = mp.get_allocation(t.id()).expect("planned");
            let b = al.binding.expect("bound");
            let life = t
                .lifetime
                .as_ref()
                .map_or("-".into(), |l| format!("{}..{}", l.start_op, l.end_op));
            let role = match (t.desc.io, &t.desc.alias_of) {
                (Some(io), _) => format!("{io:?}").to_lowercase(),
                (_, Some(base)) => format!("alias of {base}"),
                _ => format!("{:?}", b.role).to_lowercase(),
            };
            vec![
                ids[t.id()].to_string(),
                t.id().to_string(),
                role,
                al.memory.to_string(),
                format!("{:#x}", al.offset),
                al.size.to_string(),
                al.alignment.to_string(),
                life,
            ]
        })
        .collect();
    print!(
        "{}",
        fmt::table(
            &["var", "tensor", "role", "memory", "offset", "size", "align", "ops"],
            &rows,
            &[0, 4, 5, 6]
        )
    );
    println!();
    for (f, m, n, r) in &written {
        println!(
            "wrote {f}: {r} records, {} ({}), load on channel {}: allocates {}",
            fmt::bytes(*n as u64),
            if format == PlanFormat::Json {
                "json"
            } else {
                "blob"
            },
            m.channel().unwrap(),
            report
                .device_bytes
                .get(m)
                .map_or("-".into(), |&b| format!("{b} bytes ({})", fmt::bytes(b)))
        );
    }
    Ok(())
}

/// A model description (JSON), or an ONNX model (`*.onnx`), planned for
/// `target`.
fn load_model(path: &Path, target: Target) -> R<Model> {
    let model = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        #[cfg(feature = "onnx")]
        {
            nhbm_onnx::load(path)?
        }
        #[cfg(not(feature = "onnx"))]
        return Err(anyhow!(
            "{}: this nhbm is built without ONNX support",
            path.display()
        ));
    } else {
        Model::load(path)?
    };
    Ok(model.for_target(target)?)
}

/// One planner's run on the model being planned.
struct PlannerRun {
    kind: MemoryPlannerType,
    took: Duration,
    result: Result<(MemoryPlan, Vec<ExactOutcome>), PlannerError>,
    /// Per memory with scratch: (scratch arena bytes, its lower bound).
    memories: Vec<(nhbm_planner::MemoryType, u64, u64)>,
}

impl PlannerRun {
    /// Whether exact proved memory `m`'s arena smallest (None: not exact).
    fn optimal(&self, m: nhbm_planner::MemoryType) -> Option<bool> {
        let (_, outcomes) = self.result.as_ref().ok()?;
        outcomes.iter().find(|o| o.memory == m).map(|o| o.optimal)
    }

    fn to_json(&self) -> Value {
        let memories: Vec<Value> = self
            .memories
            .iter()
            .map(|&(m, hwm, lb)| {
                json!({"memory": m, "scratch_high_water_mark": hwm, "lower_bound": lb,
                       "proven_optimal": self.optimal(m)})
            })
            .collect();
        json!({
            "planner": self.kind, "ms": self.took.as_secs_f64() * 1e3,
            "error": self.result.as_ref().err().map(ToString::to_string), "memories": memories,
        })
    }
}

/// Runs every planner with `opts` (exact within its time budget).
fn compare_planners(model: &Model, opts: &PlannerOptions) -> Vec<PlannerRun> {
    [
        MemoryPlannerType::Greedy,
        MemoryPlannerType::GreedyBySize,
        MemoryPlannerType::HillClimb,
        MemoryPlannerType::Exact,
    ]
    .into_iter()
    .map(|kind| {
        let t0 = Instant::now();
        let result = plan_with_outcome(model, kind, opts);
        let took = t0.elapsed();
        let memories = match &result {
            Ok((mp, _)) => {
                let bounds = memory_lower_bounds(model, mp);
                mp.arena_usages
                    .iter()
                    .map(|(&m, a)| (m, a.total_size, bounds.get(&m).copied().unwrap_or(0)))
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        PlannerRun {
            kind,
            took,
            result,
            memories,
        }
    })
    .collect()
}

/// Per planner and memory: scratch arena vs its lower bound, and time.
fn print_comparison(runs: &[PlannerRun]) {
    let mut rows = Vec::new();
    for r in runs {
        let ms = format!("{:.1}", r.took.as_secs_f64() * 1e3);
        if let Err(e) = &r.result {
            rows.push(vec![
                r.kind.to_string(),
                "-".into(),
                e.to_string(),
                String::new(),
                String::new(),
                ms,
                String::new(),
            ]);
            continue;
        }
        for &(m, hwm, lb) in &r.memories {
            let ratio = if lb == 0 { 1.0 } else { hwm as f64 / lb as f64 };
            let proof = match r.optimal(m) {
                Some(true) => "proven optimal",
                Some(false) => "not proven",
                None => "",
            };
            rows.push(vec![
                r.kind.to_string(),
                m.to_string(),
                fmt::bytes(hwm),
                fmt::bytes(lb),
                format!("{ratio:.3}"),
                ms.clone(),
                proof.into(),
            ]);
        }
    }
    print!(
        "{}",
        fmt::table(
            &[
                "planner",
                "memory",
                "scratch",
                "lower bound",
                "ratio",
                "ms",
                ""
            ],
            &rows,
            &[4, 5]
        )
    );
}

/// The device `plan` plans for: `-d N` (its DEVICE_INFO and MEM_STATS),
/// `--arch NAME` (the arch table with the module's defaults), else V2.
fn plan_target(a: &PlanArgs, device: &DeviceArg) -> R<Target> {
    match (&device.device, &a.arch) {
        (Some(_), Some(_)) => Err(anyhow!("plan: -d and --arch exclude each other")),
        (Some(d), None) => {
            let path = &d.path;
            let dev = Device::open_path(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            let info = dev
                .device_info()
                .map_err(|e| anyhow!("{}: DEVICE_INFO: {e}", path.display()))?;
            let stats = dev
                .mem_stats()
                .map_err(|e| anyhow!("{}: MEM_STATS: {e}", path.display()))?;
            Ok(Target::from_device(
                &path.display().to_string(),
                &info,
                &stats,
            ))
        }
        (None, Some(arch)) => Ok(Target::for_arch_name(arch)?),
        (None, None) => Ok(Target::default()),
    }
}

fn read_plan(path: &str, limits: &Limits) -> R<Plan> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{path}: {e}"))?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        let text = String::from_utf8(bytes).map_err(|e| anyhow!("{path}: {e}"))?;
        let plan = Plan::from_json(&text).map_err(|e| anyhow!("{path}: {e}"))?;
        plan.to_blob_for(limits)
            .map_err(|e| anyhow!("{path}: {e}"))?;
        Ok(plan)
    } else {
        Plan::from_blob_for(&bytes, limits).map_err(|e| anyhow!("{path}: {e}"))
    }
}

fn cmd_validate(path: &str, device: &DeviceArg, json: bool) -> R<()> {
    // With a device at hand, its SBUF size and core count are checked too.
    let limits = Device::open_path(device.node().path)
        .and_then(|d| d.device_info())
        .map(|i| Limits::from_device_info(&i))
        .unwrap_or_default();
    let plan = read_plan(path, &limits)?;
    let size = plan.to_blob()?.len();
    if json {
        println!(
            "{}",
            json!({"file": path, "valid": true, "records": plan.records.len(), "blob_bytes": size})
        );
    } else {
        println!(
            "{path}: valid, {} records, {} as a blob",
            plan.records.len(),
            fmt::bytes(size as u64)
        );
    }
    Ok(())
}

/// The channel a plan file's name asks for: `*.hbmN.*`.
fn channel_from_name(path: &str) -> Option<u32> {
    let name = Path::new(path).file_name()?.to_str()?;
    name.split('.')
        .find_map(|part| part.strip_prefix("hbm")?.parse().ok())
}

// ---- device commands ----

struct Session {
    dev: Device,
    path: PathBuf,
    json: bool,
    quiet: bool,
    info: DeviceInfo,
    plans: HashMap<u32, Plan>,
    /// The plan loaded most recently (`last` in a session).
    last: Option<u32>,
}

fn kind_detail(k: &Kind) -> String {
    match k {
        Kind::VirtualTmpBuf { offset, backing } => {
            format!(
                "{} +{offset:#x}",
                backing_name(backing.to_raw()).to_lowercase()
            )
        }
        Kind::Ptr { target } => format!("-> {target}"),
        Kind::List { ids } | Kind::PtrTable { ids } => format!("{} ids", ids.len()),
        Kind::Sb { nc_id, offset } => format!("nc{nc_id} +{offset:#x}"),
        Kind::Remote {
            remote_var_id,
            remote_plan_id,
        } => format!("plan {remote_plan_id} var {remote_var_id}"),
        _ => String::new(),
    }
}

impl Session {
    fn open(path: &Path, json: bool) -> R<Session> {
        let dev = Device::open_path(path).map_err(|e| {
            anyhow!(
                "cannot open {}: {} ({e})",
                path.display(),
                io_errno_name(&e)
            )
        })?;
        let info = dev
            .device_info()
            .map_err(|e| anyhow!("DEVICE_INFO: {}", io_errno_name(&e)))?;
        Ok(Session {
            dev,
            path: path.to_path_buf(),
            json,
            quiet: false,
            info,
            plans: HashMap::new(),
            last: None,
        })
    }

    fn io<T>(&self, what: &str, r: std::io::Result<T>) -> R<T> {
        r.map_err(|e| anyhow!("{what}: {} ({e})", io_errno_name(&e)))
    }

    fn info(&self) -> R<()> {
        let i = &self.info;
        let n = (i.nr_channels as usize).min(MAX_CHANNELS);
        if self.json {
            println!(
                "{}",
                json!({
                    "device": self.path, "abi_version": i.abi_version, "arch": i.arch,
                    "pci_vendor": i.pci_vendor, "pci_device": i.pci_device, "simulated": i.simulated != 0,
                    "nr_channels": i.nr_channels, "regions_per_channel": i.regions_per_channel,
                    "nr_cores": i.nr_cores, "sbuf_size": i.sbuf_size, "min_alloc_size": i.min_alloc_size,
                    "bar0_size": i.bar0_size, "bar4_size": i.bar4_size,
                    "channel_base": &i.channel_base[..n], "channel_size": &i.channel_size[..n],
                })
            );
            return Ok(());
        }
        println!("{}: neuron_hbm ABI {}", self.path.display(), i.abi_version);
        println!(
            "  arch V{}  PCI {:04x}:{:04x}{}",
            i.arch,
            i.pci_vendor,
            i.pci_device,
            if i.simulated != 0 {
                "  (simulated)"
            } else {
                ""
            }
        );
        println!(
            "  NeuronCores {}  SBUF {} each",
            i.nr_cores,
            fmt::bytes(i.sbuf_size)
        );
        println!(
            "  BAR0 {}  BAR4 {}",
            fmt::bytes(i.bar0_size),
            fmt::bytes(i.bar4_size)
        );
        println!("  minimum allocation {}", fmt::bytes(i.min_alloc_size));
        println!(
            "  HBM: {} channels x {} regions",
            i.nr_channels, i.regions_per_channel
        );
        for c in 0..n {
            let (b, s) = (i.channel_base[c], i.channel_size[c]);
            println!(
                "    hbm{c}  {b:#014x} .. {:#014x}  {}",
                b + s,
                fmt::bytes(s)
            );
        }
        Ok(())
    }

    fn stats(&self) -> R<()> {
        let s = self.io("MEM_STATS", self.dev.mem_stats())?;
        if self.json {
            let pools: Vec<Value> = s
                .present_pools()
                .map(|(c, r, p)| json!({"channel": c, "region": r, "total": p.total, "used": p.used, "peak": p.peak, "live_chunks": p.live_chunks}))
                .collect();
            println!(
                "{}",
                json!({"pools": pools, "used": s.total_used(), "live_chunks": s.total_chunks(),
                       "own_bytes": s.own_bytes, "own_chunks": s.own_chunks, "own_plans": s.own_plans})
            );
            return Ok(());
        }
        let rows: Vec<Vec<String>> = s
            .present_pools()
            .map(|(c, r, p)| {
                let pct = if p.total == 0 {
                    0.0
                } else {
                    p.used as f64 * 100.0 / p.total as f64
                };
                vec![
                    format!("hbm{c}.{r}"),
                    fmt::bar(p.used, p.total, 30),
                    format!("{pct:.1}%"),
                    fmt::bytes(p.used),
                    fmt::bytes(p.total),
                    fmt::bytes(p.peak),
                    p.live_chunks.to_string(),
                ]
            })
            .collect();
        print!(
            "{}",
            fmt::table(
                &["pool", "usage", "used%", "used", "total", "peak", "chunks"],
                &rows,
                &[2, 3, 4, 5, 6]
            )
        );
        println!(
            "total used {} in {} chunks; this file: {} plans, {} in {} chunks",
            fmt::bytes(s.total_used()),
            s.total_chunks(),
            s.own_plans,
            fmt::bytes(s.own_bytes),
            s.own_chunks
        );
        Ok(())
    }

    fn reset(&self, tpb: Option<u32>) -> R<()> {
        let (ty, map) = match tpb {
            Some(m) => (RESET_TPB, m),
            None => (RESET_DEVICE, 0),
        };
        let status = self.io("RESET", self.dev.reset(ty, map))?;
        if status != 0 {
            return Err(anyhow!(
                "RESET: the device reported {}",
                nhbm::errno_name(-status)
            ));
        }
        if self.json {
            println!(
                "{}",
                json!({"reset": if tpb.is_some() { "tpb" } else { "device" }, "status": status})
            );
        } else {
            println!("reset done");
        }
        Ok(())
    }

    /// Stages a plan file; returns its plan id.
    /// Stages the plan of `resolve`, `read` or `write` without a listing.
    fn stage_quietly(&mut self, v: &VarArgs) -> R<u32> {
        self.quiet = true;
        let id = self.load(&v.plan, v.channel.channel, false);
        self.quiet = false;
        id
    }

    fn load(&mut self, path: &str, channel: Option<u32>, verify: bool) -> R<u32> {
        let limits = Limits::from_device_info(&self.info);
        let plan = read_plan(path, &limits)?;
        let channel = channel
            .or_else(|| channel_from_name(path))
            .unwrap_or(CHANNEL_ANY);
        Ok(self.load_plan(plan, path, channel, verify)?.plan_id)
    }

    /// Stages `plan` (named `label` in messages) on `channel`; returns what
    /// PLAN_LOAD answered.
    fn load_plan(&mut self, plan: Plan, label: &str, channel: u32, verify: bool) -> R<LoadedPlan> {
        let limits = Limits::from_device_info(&self.info);
        let blob = plan
            .to_blob_for(&limits)
            .map_err(|e| anyhow!("{label}: {e}"))?;
        let payload: u64 = plan.records.iter().map(|r| r.data.len() as u64).sum();
        let t0 = Instant::now();
        let loaded = with_progress(payload, || self.dev.plan_load(&blob, channel));
        let loaded = self.io(&format!("PLAN_LOAD {label}"), loaded)?;
        let took = t0.elapsed();
        let id = loaded.plan_id;
        if !self.quiet {
            self.show_loaded(label, &plan, &loaded, channel, payload, took);
        }
        if verify {
            self.verify(id, &plan, &loaded)?;
        }
        self.plans.insert(id, plan);
        self.last = Some(id);
        Ok(loaded)
    }

    fn show_loaded(
        &self,
        path: &str,
        plan: &Plan,
        l: &LoadedPlan,
        channel: u32,
        payload: u64,
        took: Duration,
    ) {
        let pa = |a: u64| {
            if a == PA_UNSTAGED {
                "-".to_string()
            } else {
                format!("{a:#014x}")
            }
        };
        let chan = |a: u64| {
            (0..self.info.nr_channels as usize)
                .find(|&c| {
                    a >= self.info.channel_base[c]
                        && a - self.info.channel_base[c] < self.info.channel_size[c]
                })
                .map_or("-".to_string(), |c| format!("hbm{c}"))
        };
        if self.json {
            let recs: Vec<Value> = plan
                .records
                .iter()
                .zip(&l.addrs)
                .map(|(r, &a)| json!({"var_id": r.var_id, "name": r.name, "type": mr_type_name(r.mr_type()), "size": r.size, "addr": a}))
                .collect();
            println!(
                "{}",
                json!({"file": path, "plan_id": l.plan_id, "channel": channel, "bytes_allocated": l.bytes_allocated,
                       "local_scratchpad_pa": l.local_scratchpad_pa, "shared_scratchpad_pa": l.shared_scratchpad_pa,
                       "payload_bytes": payload, "load_ms": took.as_secs_f64() * 1e3, "records": recs})
            );
            return;
        }
        println!(
            "plan {} from {path}: {} records, {} allocated, {} uploaded in {:.1} ms",
            l.plan_id,
            plan.records.len(),
            fmt::bytes(l.bytes_allocated),
            fmt::bytes(payload),
            took.as_secs_f64() * 1e3
        );
        println!(
            "  local scratchpad {} ({})  shared scratchpad {} ({})",
            pa(l.local_scratchpad_pa),
            fmt::bytes(plan.local_scratchpad_size),
            pa(l.shared_scratchpad_pa),
            fmt::bytes(plan.shared_scratchpad_size)
        );
        let rows: Vec<Vec<String>> = plan
            .records
            .iter()
            .zip(&l.addrs)
            .map(|(r, &a)| {
                vec![
                    r.var_id.to_string(),
                    r.name.clone().unwrap_or_default(),
                    mr_type_name(r.mr_type())
                        .trim_start_matches("MR_")
                        .to_string(),
                    kind_detail(&r.kind),
                    fmt::bytes(r.size),
                    pa(a),
                    chan(a),
                    if r.data.is_empty() {
                        String::new()
                    } else {
                        fmt::bytes(r.data.len() as u64)
                    },
                ]
            })
            .collect();
        print!(
            "{}",
            fmt::table(
                &["var", "name", "kind", "", "size", "address", "memory", "payload"],
                &rows,
                &[0, 4]
            )
        );
    }

    /// Reads back every payload and compares it with the plan's bytes.
    fn verify(&self, id: u32, plan: &Plan, _l: &LoadedPlan) -> R<()> {
        let mut checked = 0u64;
        for r in plan.records.iter().filter(|r| !r.data.is_empty()) {
            let mut buf = vec![0u8; r.data.len()];
            self.io(
                &format!("MEM_READ var {}", r.var_id),
                self.dev.mem_read(id, r.var_id, 0, &mut buf),
            )?;
            if let Some(k) = buf.iter().zip(&r.data).position(|(a, b)| a != b) {
                return Err(anyhow!(
                    "verify: var {} ({}) byte {k:#x} reads {:#04x}, uploaded {:#04x}",
                    r.var_id,
                    r.name.as_deref().unwrap_or("-"),
                    buf[k],
                    r.data[k]
                ));
            }
            checked += buf.len() as u64;
        }
        if !self.json && checked > 0 {
            println!("verified {} of payload in plan {id}", fmt::bytes(checked));
        }
        Ok(())
    }

    fn var(&self, id: u32, v: &str) -> R<u32> {
        if let Some(n) = parse_num::<u32>(v) {
            return Ok(n);
        }
        let plan = self
            .plans
            .get(&id)
            .ok_or_else(|| anyhow!("plan {id} was not loaded here"))?;
        plan.records
            .iter()
            .find(|r| r.name.as_deref() == Some(v))
            .map(|r| r.var_id)
            .ok_or_else(|| anyhow!("plan {id} has no variable named {v:?}"))
    }

    fn var_size(&self, id: u32, var: u32) -> Option<u64> {
        self.plans.get(&id)?.record(var).map(|r| r.size)
    }

    fn resolve(&self, id: u32, var: &str, rest: &[&str]) -> R<()> {
        let v = self.var(id, var)?;
        let off = num_arg(rest.first(), "offset")?.unwrap_or(0);
        let size = num_arg(rest.get(1), "size")?.unwrap_or(0);
        let addr = self.io(
            &format!("RESOLVE {var} [{off:#x}, +{size:#x})"),
            self.dev.resolve(id, v, off, size),
        )?;
        if self.json {
            println!(
                "{}",
                json!({"plan_id": id, "var_id": v, "offset": off, "size": size, "addr": addr})
            );
        } else {
            println!("plan {id} var {v} ({var}) + {off:#x} -> {addr:#014x}");
        }
        Ok(())
    }

    fn read(&self, id: u32, var: &str, rest: &[&str]) -> R<()> {
        let v = self.var(id, var)?;
        let off = num_arg(rest.first(), "offset")?.unwrap_or(0);
        let default_len = self
            .var_size(id, v)
            .map_or(256, |s| s.saturating_sub(off).min(256));
        let len = num_arg(rest.get(1), "length")?.unwrap_or(default_len);
        let mut buf = vec![0u8; len as usize];
        self.io(
            &format!("MEM_READ {var} [{off:#x}, +{len:#x})"),
            self.dev.mem_read(id, v, off, &mut buf),
        )?;
        if self.json {
            let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
            println!(
                "{}",
                json!({"plan_id": id, "var_id": v, "offset": off, "data_hex": hex})
            );
        } else {
            print!("{}", fmt::hexdump(&buf, off));
        }
        Ok(())
    }

    fn write(&self, id: u32, var: &str, rest: &[&str]) -> R<()> {
        let v = self.var(id, var)?;
        let off = num_arg(rest.first(), "offset")?.context("write: offset and hex bytes needed")?;
        let hex = rest.get(1).context("write: hex bytes needed")?;
        let data = unhex(hex)?;
        self.io(
            &format!("MEM_WRITE {var} [{off:#x}, +{:#x})", data.len()),
            self.dev.mem_write(id, v, off, &data),
        )?;
        let mut back = vec![0u8; data.len()];
        self.io("MEM_READ", self.dev.mem_read(id, v, off, &mut back))?;
        if back != data {
            return Err(anyhow!("write: var {v} reads back differently"));
        }
        if !self.json {
            println!(
                "wrote {} to plan {id} var {v} at {off:#x} (read back equal)",
                fmt::bytes(data.len() as u64)
            );
        }
        Ok(())
    }

    /// Runs one command per line; stops at the first failure.
    fn script(&mut self, input: Box<dyn BufRead>) -> R<()> {
        for (n, line) in input.lines().enumerate() {
            let line = line?;
            let words: Vec<&str> = line
                .split('#')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let Some((&cmd, rest)) = words.split_first() else {
                continue;
            };
            if !self.json {
                println!("> {}", words.join(" "));
            }
            self.session_command(cmd, rest)
                .map_err(|e| anyhow!("line {}: {e}", n + 1))?;
            let _ = std::io::stdout().flush();
        }
        Ok(())
    }

    fn session_command(&mut self, cmd: &str, rest: &[&str]) -> R<()> {
        let last = self.last;
        let plan_id = |s: Option<&&str>| -> R<u32> {
            match s {
                Some(&"last") => last.ok_or_else(|| anyhow!("{cmd}: no plan loaded yet")),
                _ => s
                    .and_then(|v| parse_num(v))
                    .ok_or_else(|| anyhow!("{cmd}: a plan id (or last) is needed")),
            }
        };
        match cmd {
            "info" => self.info(),
            "stats" => self.stats(),
            "reset" => self.reset(None),
            "load" | "stage" | "load-verify" => {
                let file = rest.first().context("load: which plan file?")?;
                let ch = match rest.get(1) {
                    None => None,
                    Some(&"any") => Some(CHANNEL_ANY),
                    Some(c) => {
                        Some(parse_num(c).ok_or_else(|| anyhow!("load: bad channel {c:?}"))?)
                    }
                };
                let id = self.load(file, ch, cmd == "load-verify")?;
                if self.json {
                    println!("{}", json!({"loaded": file, "plan_id": id}));
                }
                Ok(())
            }
            "unload" => {
                let id = plan_id(rest.first())?;
                self.io(&format!("PLAN_UNLOAD {id}"), self.dev.plan_unload(id))?;
                self.plans.remove(&id);
                if !self.json {
                    println!("plan {id} unloaded");
                }
                Ok(())
            }
            "resolve" | "read" | "write" => {
                let id = plan_id(rest.first())?;
                let var = rest
                    .get(1)
                    .ok_or_else(|| anyhow!("{cmd}: which variable?"))?;
                match cmd {
                    "resolve" => self.resolve(id, var, &rest[2..]),
                    "read" => self.read(id, var, &rest[2..]),
                    _ => self.write(id, var, &rest[2..]),
                }
            }
            "verify" => {
                let id = plan_id(rest.first())?;
                let plan = self
                    .plans
                    .get(&id)
                    .ok_or_else(|| anyhow!("plan {id} was not loaded here"))?;
                self.verify(id, plan, &LoadedPlan::default())
            }
            "echo" => {
                println!("{}", rest.join(" "));
                Ok(())
            }
            "help" => {
                println!(
                    "session commands: info | stats | reset | load FILE [CHANNEL|any] | load-verify FILE [CHANNEL] |\n  \
                     unload ID | resolve ID VAR [OFF [SIZE]] | read ID VAR [OFF [LEN]] | write ID VAR OFF HEX |\n  \
                     verify ID | echo TEXT   (ID may be `last`, the plan loaded most recently)"
                );
                Ok(())
            }
            _ => Err(anyhow!("unknown session command {cmd:?} (try help)")),
        }
    }
}

fn num_arg(s: Option<&&str>, what: &str) -> R<Option<u64>> {
    s.map(|v| parse_num(v).ok_or_else(|| anyhow!("{what}: {v:?} is not a number")))
        .transpose()
}

fn unhex(s: &str) -> R<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(anyhow!("{s:?} is not an even number of hex digits"));
    }
    Ok((0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect())
}

/// Runs `f`; while it runs longer than a moment on a terminal with a large
/// payload, shows an elapsed-time indicator on stderr.
fn with_progress<T>(payload: u64, f: impl FnOnce() -> T) -> T {
    if payload < (64 << 20) || !std::io::stderr().is_terminal() {
        return f();
    }
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let t0 = Instant::now();
    let ticker = std::thread::spawn(move || {
        let spin = ['|', '/', '-', '\\'];
        let mut k = 0;
        while !flag.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            eprint!(
                "\ruploading {} ... {} {:.1}s ",
                fmt::bytes(payload),
                spin[k % 4],
                t0.elapsed().as_secs_f64()
            );
            k += 1;
        }
        eprintln!(
            "\ruploaded {} in {:.1}s          ",
            fmt::bytes(payload),
            t0.elapsed().as_secs_f64()
        );
    });
    let r = f();
    done.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_comes_from_the_file_name() {
        assert_eq!(channel_from_name("out/small_cnn.hbm1.plan"), Some(1));
        assert_eq!(channel_from_name("t.hbm0.plan.json"), Some(0));
        assert_eq!(channel_from_name("hbm1/plan.bin"), None);
    }

    #[test]
    fn hex_arguments() {
        assert_eq!(unhex("0xdeadBEEF").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }
}
