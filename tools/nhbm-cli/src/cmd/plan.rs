//! `nhbm plan`: plan a model for a device or an arch with one planner (or
//! compare them all), and write one plan file per memory.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use nhbm::cli::DeviceArg;
use nhbm_planner::planner::memory_lower_bounds;
use nhbm_planner::{
    lower, minimalloc, plan_with_progress, var_ids, ExactOutcome, LoweredPlan, MemoryPlan,
    MemoryPlannerType, MemoryType, Model, ModelError, PlanReport, PlannerError, PlannerOptions,
    Target,
};
use serde_json::{json, Value};

use crate::args::{PlanArgs, PlanFormat};
use crate::device::open_device;
use crate::error::Failure;
use crate::{fmt, progress, svg};

/// The planners `--compare` runs, in the order it lists them.
const ALL_PLANNERS: [MemoryPlannerType; 4] = [
    MemoryPlannerType::Greedy,
    MemoryPlannerType::GreedyBySize,
    MemoryPlannerType::HillClimb,
    MemoryPlannerType::Exact,
];

/// The planner `plan` runs without --planner: exact within its node
/// budget, which starts from hill_climb's packing and keeps it when the
/// budget runs out first.
pub const DEFAULT_PLANNER: MemoryPlannerType = MemoryPlannerType::Exact;

/// One plan file written: its name, memory, bytes and record count.
struct Written {
    file: String,
    memory: MemoryType,
    bytes: usize,
    records: usize,
}

/// Plans the model `a` names with the planner it asks for (every planner
/// with `--compare`), writes that planner's plans, and reports on them.
pub fn run(a: &PlanArgs, device: &DeviceArg, json: bool) -> Result<()> {
    let path = a.model.display();
    let target = plan_target(a, device)?;
    let model = load_model(a, target)?;
    let kind = a.planner.unwrap_or(DEFAULT_PLANNER);
    let opts = options(a, &model);
    let kinds = if a.compare {
        &ALL_PLANNERS[..]
    } else {
        std::slice::from_ref(&kind)
    };
    let runs: Vec<PlannerRun> = kinds
        .iter()
        .map(|&k| run_planner(&model, k, &opts))
        .collect();
    let chosen = runs
        .iter()
        .find(|r| r.kind == kind)
        .expect("the chosen planner runs");
    let mp = match &chosen.result {
        Ok((mp, _)) => mp.clone(),
        Err(e) => return Err(anyhow::Error::new(e.clone()).context(path.to_string())),
    };
    let elapsed = chosen.took;
    let report = PlanReport::new(&model, kind, &mp);
    let lowered = lower(&model, &mp).map_err(|e| anyhow!("{path}: {e}"))?;
    let prefix = a.output.clone().unwrap_or_else(|| model.name().to_string());
    let written = write_plans(&lowered, &prefix, a.format)?;
    if let Some(f) = &a.svg {
        std::fs::write(f, svg::placement(&model, &mp)).with_context(|| f.display().to_string())?;
    }
    if json {
        print_json(&model, &report, &mp, &written, elapsed, &runs);
        return Ok(());
    }
    print_summary(&model, kind, elapsed, &report);
    println!();
    print_arenas(&report);
    println!();
    print_comparison(&runs);
    println!();
    print_tensors(&model, &mp);
    println!();
    print_written(&written, a.format, &report);
    if let Some(f) = &a.svg {
        println!("wrote {}: the placement", f.display());
    }
    Ok(())
}

/// The model's planner options with the command line's overrides.
fn options(a: &PlanArgs, model: &Model) -> PlannerOptions {
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
    if let Some(v) = a.budget {
        opts.node_budget = v;
    }
    if let Some(v) = a.time_limit {
        opts.time_budget_ms = v;
    }
    opts
}

/// Writes one file per lowered plan, `PREFIX.MEMORY.plan[.json]`.
fn write_plans(lowered: &[LoweredPlan], prefix: &str, format: PlanFormat) -> Result<Vec<Written>> {
    let mut written = Vec::new();
    for l in lowered {
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
        written.push(Written {
            file,
            memory: l.memory,
            bytes: bytes.len(),
            records: l.plan.records.len(),
        });
    }
    Ok(written)
}

/// The whole outcome as one JSON document.
fn print_json(
    model: &Model,
    report: &PlanReport,
    mp: &MemoryPlan,
    written: &[Written],
    elapsed: Duration,
    runs: &[PlannerRun],
) {
    let files: Vec<Value> = written
        .iter()
        .map(|w| {
            let (f, m, n, r) = (&w.file, &w.memory, w.bytes, w.records);
            json!({"file": f, "memory": m, "channel": m.channel(), "bytes": n, "records": r, "device_bytes": report.device_bytes.get(m)})
        })
        .collect();
    let planners: Vec<Value> = runs.iter().map(|r| r.to_json()).collect();
    let out = json!({
        "model": model.name(), "report": report, "plan": mp, "files": files,
        "var_ids": var_ids(model), "planning_ms": elapsed.as_secs_f64() * 1e3,
        "planners": planners,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

/// The model, the target, and the scratch high-water mark against the
/// liveness lower bound.
fn print_summary(model: &Model, kind: MemoryPlannerType, elapsed: Duration, report: &PlanReport) {
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
}

/// The table of arenas: role, memory, source, size and alignment.
fn print_arenas(report: &PlanReport) {
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
}

/// The table of tensors: var_id, role, where each landed, and lifetime.
fn print_tensors(model: &Model, mp: &MemoryPlan) {
    let ids = var_ids(model);
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
}

/// One line per file written, with what loading it allocates.
fn print_written(written: &[Written], format: PlanFormat, report: &PlanReport) {
    for w in written {
        println!(
            "wrote {}: {} records, {} ({}), load on channel {}: allocates {}",
            w.file,
            w.records,
            fmt::bytes(w.bytes as u64),
            if format == PlanFormat::Json {
                "json"
            } else {
                "blob"
            },
            w.memory.channel().unwrap(),
            report
                .device_bytes
                .get(&w.memory)
                .map_or("-".into(), |&b| format!("{b} bytes ({})", fmt::bytes(b)))
        );
    }
}

/// The model `a` names, a description (JSON), an ONNX model (`*.onnx`) or
/// an instance in MiniMalloc's CSV format, read and checked for `target`:
/// its memories must be channels of that device, whether it comes from
/// `--arch` or `-d`.
pub fn load_model(a: &PlanArgs, target: Target) -> Result<Model> {
    let path: &Path = &a.model;
    // A file that cannot be read is not an invalid model.
    std::fs::metadata(path).with_context(|| path.display().to_string())?;
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        #[cfg(feature = "onnx")]
        {
            let opts = nhbm_onnx::ImportOptions {
                input_shapes: a.input_shapes.clone(),
                target,
            };
            Ok(nhbm_onnx::load_with(path, &opts)?)
        }
        #[cfg(not(feature = "onnx"))]
        Err(Failure::invalid(
            format!(
                "{}: this nhbm is built without ONNX support",
                path.display()
            ),
            None,
        )
        .into())
    } else if first_line(path).is_some_and(|l| minimalloc::is_instance(&l)) {
        load_instance(path, target)
    } else {
        Ok(Model::load_for(path, target)?)
    }
}

/// The first line of the file at `path`, if it can be read as text.
fn first_line(path: &Path) -> Option<String> {
    let mut line = String::new();
    let f = std::fs::File::open(path).ok()?;
    std::io::BufRead::read_line(&mut std::io::BufReader::new(f), &mut line).ok()?;
    Some(line)
}

/// The buffers of the MiniMalloc-format file at `path` as a model of one
/// memory (`hbm0`) named after the file ([`minimalloc::read`]), for
/// `target`.
fn load_instance(path: &Path, target: Target) -> Result<Model> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let name = path
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy());
    let m = minimalloc::read(&name, &text)
        .and_then(|m| m.for_target(target).map_err(|e| e.0))
        .map_err(|e| ModelError(format!("{}: {e}", path.display())))?;
    Ok(m)
}

/// One planner's run on the model being planned.
struct PlannerRun {
    kind: MemoryPlannerType,
    took: Duration,
    result: Result<(MemoryPlan, Vec<ExactOutcome>), PlannerError>,
    /// Per memory with scratch: (scratch arena bytes, its lower bound).
    memories: Vec<(MemoryType, u64, u64)>,
}

impl PlannerRun {
    /// Whether exact proved memory `m`'s arena smallest (None: not exact).
    fn optimal(&self, m: MemoryType) -> Option<bool> {
        self.outcome(m).map(|o| o.optimal)
    }

    /// How exact's search ended in memory `m` (None: not exact).
    fn outcome(&self, m: MemoryType) -> Option<&ExactOutcome> {
        let (_, outcomes) = self.result.as_ref().ok()?;
        outcomes.iter().find(|o| o.memory == m)
    }

    /// The run as JSON: planner, time, error, and per memory the scratch
    /// arena against its bound, and for exact the nodes searched and what
    /// stopped the search ("node_budget", "time_limit" or null).
    fn to_json(&self) -> Value {
        let memories: Vec<Value> = self
            .memories
            .iter()
            .map(|&(m, hwm, lb)| {
                let o = self.outcome(m);
                json!({"memory": m, "scratch_high_water_mark": hwm, "lower_bound": lb,
                       "proven_optimal": self.optimal(m), "nodes": o.map(|o| o.nodes),
                       "stopped": o.and_then(|o| o.stopped)})
            })
            .collect();
        json!({
            "planner": self.kind, "ms": self.took.as_secs_f64() * 1e3,
            "error": self.result.as_ref().err().map(ToString::to_string), "memories": memories,
        })
    }
}

/// Runs planner `kind` with `opts` (exact within its node budget), with a
/// progress line on a terminal when it takes a while.
fn run_planner(model: &Model, kind: MemoryPlannerType, opts: &PlannerOptions) -> PlannerRun {
    let t0 = Instant::now();
    let label = format!("planning {} with {kind}", model.name());
    let result = progress::with_spinner(&label, |nodes| {
        plan_with_progress(model, kind, opts, Some(nodes))
    });
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
            let proof = match r.outcome(m) {
                Some(o) if o.optimal => "proven optimal".to_string(),
                Some(o) => match o.stopped {
                    Some(why) => format!("not proven ({why} hit, {} nodes)", o.nodes),
                    None => format!("not proven ({} nodes)", o.nodes),
                },
                None => String::new(),
            };
            rows.push(vec![
                r.kind.to_string(),
                m.to_string(),
                fmt::bytes(hwm),
                fmt::bytes(lb),
                format!("{ratio:.3}"),
                ms.clone(),
                proof,
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
fn plan_target(a: &PlanArgs, device: &DeviceArg) -> Result<Target> {
    match (&device.device, &a.arch) {
        (Some(_), Some(_)) => Err(anyhow!("plan: -d and --arch exclude each other")),
        (Some(d), None) => {
            let path = &d.path;
            let dev = open_device(path)?;
            let what = |ioctl: &str| format!("{}: {ioctl}", path.display());
            let info = dev
                .device_info()
                .map_err(|e| Failure::refused(&what("DEVICE_INFO"), &e))?;
            let stats = dev
                .mem_stats()
                .map_err(|e| Failure::refused(&what("MEM_STATS"), &e))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::uapi::{DeviceInfo, MemStats, ARCH_V3};

    /// A model whose memories are V3's and V4's third and fourth channels.
    const HIGH_CHANNELS: &str = include_str!("../../tests/high_channels.json");

    fn model_file(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("nhbm-cli-plan-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("high.json");
        std::fs::write(&path, HIGH_CHANNELS).unwrap();
        path
    }

    /// What a V3 device with 2 regions of 12 GiB per channel reports.
    fn v3_device() -> (DeviceInfo, MemStats) {
        let info = DeviceInfo {
            arch: ARCH_V3,
            nr_channels: 4,
            regions_per_channel: 2,
            min_alloc_size: 4096,
            ..Default::default()
        };
        let mut stats = MemStats::default();
        for ch in &mut stats.pools[..4] {
            for pool in &mut ch[..2] {
                pool.present = 1;
                pool.total = 12 << 30;
            }
        }
        (info, stats)
    }

    /// The model is checked against the target chosen, never V2 first:
    /// `--arch v3`, `--arch v4` and a V3 device (`-d`) take hbm2 and hbm3.
    #[test]
    fn models_are_checked_against_the_chosen_target() {
        let path = model_file("target");
        let a = PlanArgs {
            model: path.clone(),
            ..Default::default()
        };
        let (info, stats) = v3_device();
        let targets = [
            Target::for_arch_name("v3").unwrap(),
            Target::for_arch_name("v4").unwrap(),
            Target::from_device("/dev/neuron_hbm1", &info, &stats),
        ];
        for target in targets {
            let name = target.name.clone();
            let m = load_model(&a, target).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(m.target.name, name);
            let names: Vec<MemoryType> = m.memories.iter().map(|c| c.name).collect();
            assert_eq!(names, [MemoryType::Hbm(2), MemoryType::Hbm(3)]);
            let r = run_planner(&m, DEFAULT_PLANNER, &PlannerOptions::default());
            let (mp, _) = r.result.unwrap();
            let planned: Vec<MemoryType> = mp.arena_usages.keys().copied().collect();
            assert_eq!(planned, [MemoryType::Hbm(2), MemoryType::Hbm(3)], "{name}");
        }
        let e = load_model(&a, Target::default()).unwrap_err();
        assert!(
            format!("{e:#}").contains("hbm2 is not a channel of v2"),
            "{e:#}"
        );
        assert_eq!(crate::error::classify(&e).0, crate::error::Exit::Invalid);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
