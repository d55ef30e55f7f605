//! `nhbm demo`: the whole chain on a device, from model to resolved address.
//!
//! Plans every example model with each planner, stages the model's own plan,
//! shows where everything landed and the pool usage, resolves and reads back
//! a few variables (checking the uploaded bytes), unloads, and checks that the
//! pools are back at their starting usage.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use nhbm_planner::{lower, plan as run_planner, MemoryPlannerType, Model, PlanReport, Target};

use crate::cmd::load::load_plan;
use crate::cmd::{info, stats};
use crate::device::Session;
use crate::fmt;

const PLANNERS: [MemoryPlannerType; 3] = [
    MemoryPlannerType::Greedy,
    MemoryPlannerType::GreedyBySize,
    MemoryPlannerType::HillClimb,
];

fn section(title: &str) {
    println!();
    println!("== {title}");
}

/// Example models next to the executable (the guest's /tests), or in `dir`.
fn find_models(dir: Option<&str>) -> Result<(PathBuf, Vec<PathBuf>)> {
    let dir = match dir {
        Some(d) => PathBuf::from(d),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
            .context("cannot tell where the example models are; name their directory")?,
    };
    let mut models: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| anyhow!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| Model::load(p).is_ok())
        .collect();
    models.sort();
    if models.is_empty() {
        return Err(anyhow!(
            "no model descriptions (*.json) in {}",
            dir.display()
        ));
    }
    Ok((dir, models))
}

/// Runs the demo on `s` with the example models in `dir` (default: next
/// to this program).
pub fn run(s: &mut Session, dir: Option<&str>) -> Result<()> {
    let (dir, models) = find_models(dir)?;
    section("device");
    info::run(s)?;
    section("pools at the start");
    stats::run(s)?;
    let start = s.io("MEM_STATS", s.dev.mem_stats())?;

    // Plans are made for this device: its channels, pools and minimum
    // allocation, so that what the planner says PLAN_LOAD allocates is what
    // it allocates.
    let target = Target::from_device(&s.dev.path().display().to_string(), &s.info, &start);
    for path in &models {
        let model = Model::load_for(path, target.clone())?;
        section(&format!(
            "model {} ({})",
            model.name(),
            path.strip_prefix(&dir).unwrap_or(path).display()
        ));
        compare_planners(&model)?;
        stage_and_unload(s, &model)?;
    }

    section("pools at the end");
    stats::run(s)?;
    let end = s.io("MEM_STATS", s.dev.mem_stats())?;
    if (end.total_used(), end.total_chunks()) != (start.total_used(), start.total_chunks()) {
        return Err(anyhow!(
            "the pools did not return to their starting usage: {} in {} chunks, started at {} in {} chunks",
            end.total_used(),
            end.total_chunks(),
            start.total_used(),
            start.total_chunks()
        ));
    }
    println!(
        "pools back at their starting usage ({} used)",
        fmt::bytes(end.total_used())
    );
    Ok(())
}

/// Describes `model` and plans it with each planner: scratch against the
/// liveness lower bound, and time.
fn compare_planners(model: &Model) -> Result<()> {
    if let Some(d) = &model.desc.description {
        println!("{d}");
    }
    println!(
        "{} tensors, {} operators; scratch liveness lower bound {}",
        model.tensors.len(),
        model.desc.operators.len(),
        fmt::bytes(model.liveness_lower_bound())
    );
    let mut rows = Vec::new();
    for kind in PLANNERS {
        let t0 = Instant::now();
        let mp = run_planner(model, kind, &model.desc.planner_options)
            .map_err(|e| anyhow!("{kind}: {e}"))?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let r = PlanReport::new(model, kind, &mp);
        rows.push(vec![
            kind.to_string(),
            fmt::bytes(r.scratch_high_water_mark),
            format!("{:+.1}%", r.overhead_percent),
            format!("{ms:.1} ms"),
            if kind == model.desc.planner {
                "<- staged".into()
            } else {
                String::new()
            },
        ]);
    }
    print!(
        "{}",
        fmt::table(
            &["planner", "scratch", "vs bound", "time", ""],
            &rows,
            &[1, 2, 3]
        )
    );
    Ok(())
}

/// Stages the model's own plan, checks that PLAN_LOAD allocated what the
/// planner said, shows some variables, and unloads.
fn stage_and_unload(s: &mut Session, model: &Model) -> Result<()> {
    let mp = run_planner(model, model.desc.planner, &model.desc.planner_options)?;
    let lowered = lower(model, &mp)?;
    let report = PlanReport::new(model, model.desc.planner, &mp);
    let mut ids = Vec::new();
    for l in &lowered {
        println!();
        let label = format!("{}.{}", model.name(), l.memory);
        let loaded = load_plan(s, l.plan.clone(), &label, l.channel(), true)?;
        let predicted = report.device_bytes.get(&l.memory).copied();
        if predicted != Some(loaded.bytes_allocated) {
            return Err(anyhow!(
                "{label}: PLAN_LOAD allocated {} bytes, the planner said {predicted:?}",
                loaded.bytes_allocated
            ));
        }
        println!(
            "{label}: {} allocated, as the planner said",
            fmt::bytes(loaded.bytes_allocated)
        );
        ids.push((loaded.plan_id, l));
    }
    println!();
    stats::run(s)?;
    println!();
    for (id, l) in &ids {
        show_some_variables(s, *id, &l.plan)?;
    }
    for (id, _) in &ids {
        s.io(&format!("PLAN_UNLOAD {id}"), s.dev.plan_unload(*id))?;
        s.plans.remove(id);
        println!("plan {id} unloaded");
    }
    Ok(())
}

/// Resolves one variable of each kind the plan has, and reads back the
/// start of a constant next to the bytes it was uploaded with.
fn show_some_variables(s: &Session, id: u32, plan: &nhbm::Plan) -> Result<()> {
    let mut seen = Vec::new();
    for r in &plan.records {
        let tag = std::mem::discriminant(&r.kind);
        if seen.contains(&tag) {
            continue;
        }
        seen.push(tag);
        let name = r.name.clone().unwrap_or_else(|| r.var_id.to_string());
        let base = s.io(
            &format!("RESOLVE {name}"),
            s.dev.resolve(id, r.var_id, 0, 0),
        )?;
        // Every byte of every variable resolves, views included: the first,
        // the middle and the last.
        for off in [0, r.size / 2, r.size - 1] {
            let a = s.io(
                &format!("RESOLVE {name} + {off:#x}"),
                s.dev.resolve(id, r.var_id, off, 1),
            )?;
            if a != base + off {
                return Err(anyhow!(
                    "RESOLVE {name} + {off:#x} gave {a:#x}, not base {base:#x} + offset"
                ));
            }
            println!("resolve plan {id} {name:<18} + {off:#9x} -> {a:#014x}");
        }
    }
    if let Some(c) = plan.records.iter().find(|r| !r.data.is_empty()) {
        let n = c.data.len().min(32);
        let mut buf = vec![0u8; n];
        s.io("MEM_READ", s.dev.mem_read(id, c.var_id, 0, &mut buf))?;
        let name = c.name.as_deref().unwrap_or("-");
        println!("read back the first {n} bytes of {name} (uploaded at load):");
        print!("{}", fmt::hexdump(&buf, 0));
        if buf != c.data[..n] {
            return Err(anyhow!(
                "{name}: the bytes read back differ from the payload"
            ));
        }
    }
    Ok(())
}
