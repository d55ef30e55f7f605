//! The planner against the kernel: every example model, planned by every
//! planner for this device, loads with exactly the bytes the planner said,
//! and every byte of every variable (views included) resolves.

use std::path::PathBuf;

use nhbm_planner::{lower, plan, MemoryPlannerType, Model, PlanReport, Target};

use crate::fixtures::*;
use crate::ktap::*;

const PLANNERS: [MemoryPlannerType; 3] = [
    MemoryPlannerType::Greedy,
    MemoryPlannerType::GreedyBySize,
    MemoryPlannerType::HillClimb,
];

/// The example models, installed next to this program.
fn example_models() -> Result<Vec<PathBuf>, Fail> {
    let dir = std::env::current_exe()
        .ctx("current_exe")?
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ctx(&format!("read_dir {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    if v.is_empty() {
        return skip(format!("no example models in {}", dir.display()));
    }
    Ok(v)
}

pub fn planned_bytes_are_allocated_bytes() -> TestResult {
    let d = dev()?;
    let i = info(&d)?;
    let stats = d.mem_stats().ctx("MEM_STATS")?;
    let target = Target::from_device("device under test", &i, &stats);
    let mut loads = 0;
    for path in example_models()? {
        let name = path.display().to_string();
        let model = Model::load(&path)
            .and_then(|m| m.for_target(target.clone()))
            .map_err(|e| Fail::Fail(format!("{name}: {e}")))?;
        for kind in PLANNERS {
            let mp = plan(&model, kind, &model.desc.planner_options)
                .map_err(|e| Fail::Fail(format!("{name}: {kind}: {e}")))?;
            let report = PlanReport::new(&model, kind, &mp);
            let lowered = lower(&model, &mp).map_err(|e| Fail::Fail(format!("{name}: {e}")))?;
            for l in &lowered {
                let what = format!("{} {kind} {}", model.name(), l.memory);
                let blob = l.plan.to_blob().ctx(&what)?;
                let p = d
                    .plan_load(&blob, l.channel())
                    .ctx(&format!("PLAN_LOAD {what}"))?;
                ensure_eq(
                    &format!("{what}: bytes_allocated vs the planner's"),
                    Some(p.bytes_allocated),
                    report.device_bytes.get(&l.memory).copied(),
                )?;
                for r in &l.plan.records {
                    let last = d
                        .resolve(p.plan_id, r.var_id, r.size - 1, 1)
                        .ctx(&format!("{what}: RESOLVE last byte of var {}", r.var_id))?;
                    let first = d
                        .resolve(p.plan_id, r.var_id, 0, 0)
                        .ctx(&format!("{what}: RESOLVE var {}", r.var_id))?;
                    ensure_eq(
                        &format!("{what}: var {} at size - 1", r.var_id),
                        last,
                        first + r.size - 1,
                    )?;
                }
                d.plan_unload(p.plan_id)
                    .ctx(&format!("PLAN_UNLOAD {what}"))?;
                loads += 1;
            }
        }
    }
    ensure(loads >= 2 * PLANNERS.len(), || {
        format!("only {loads} plans loaded")
    })
}
