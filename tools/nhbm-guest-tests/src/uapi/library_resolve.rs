//! The library's in-process resolve against NHBM_IOC_RESOLVE: the same answer,
//! PA or errno, for every variable of every example plan.

use std::collections::HashMap;
use std::path::Path;

use crate::ktap::{ensure, fail, Ctx, Fail, TestResult};
use nhbm::uapi::CHANNEL_ANY;
use nhbm::{Device, LoadedPlan, Plan, Record, Resolver};
use nhbm_planner::{lower, plan_model, Model};

use crate::fixtures::{dev, every_local_kind, one_buffer, KIB};

/// Where the guest keeps the example model descriptions.
const MODELS: &str = "/tests";

/// (offset, size) pairs asked of a variable of `size` bytes: inside, at and
/// beyond both ends, overflowing, and a non-zero offset (refused for MR_PTR).
fn queries(size: u64) -> Vec<(u64, u64)> {
    vec![
        (0, 0),
        (0, size),
        (size, 0),
        (size.saturating_sub(1), 1),
        (0, size + 1),
        (size, 1),
        (1, 0),
        (size / 2, size - size / 2),
        (8, 8),
        (u64::MAX, 1),
        (1, u64::MAX),
        (u64::MAX, 0),
    ]
}

/// Every query of every variable (and of ids the plan lacks), library against kernel.
fn compare(d: &Device, name: &str, plan: &Plan, loaded: &LoadedPlan, r: &Resolver) -> TestResult {
    let mut ids: Vec<u32> = plan.records.iter().map(|rec| rec.var_id).collect();
    let max = ids.iter().copied().max().unwrap_or(0);
    let absent = [0, max + 1, max.wrapping_add(1000), u32::MAX];
    ids.extend(absent.iter().filter(|id| plan.record(**id).is_none()));
    for &id in &ids {
        let size = r.var_size(id).unwrap_or(4096);
        for (off, len) in queries(size) {
            let lib = r.resolve(id, off, len).map_err(|e| e.raw_os_error());
            let kern = d
                .resolve(loaded.plan_id, id, off, len)
                .map_err(|e| e.raw_os_error());
            ensure(lib == kern, || {
                format!("{name}: var {id} at {off} + {len}: library {lib:x?}, RESOLVE {kern:x?}")
            })?;
        }
    }
    Ok(())
}

/// Loads `plan`, builds its resolver (remote sizes from `resolvers`), compares
/// and keeps the resolver. Returns the plan id.
fn load(
    d: &Device,
    resolvers: &mut HashMap<u32, Resolver>,
    name: &str,
    plan: &Plan,
    channel: u32,
) -> Result<u32, Fail> {
    let loaded = d
        .plan_load(&plan.to_blob().ctx("build")?, channel)
        .ctx(&format!("PLAN_LOAD {name}"))?;
    let r = Resolver::new(plan, &loaded, |p, v| resolvers.get(&p)?.var_size(v))
        .ctx(&format!("library resolver of {name}"))?;
    compare(d, name, plan, &loaded, &r)?;
    resolvers.insert(loaded.plan_id, r);
    Ok(loaded.plan_id)
}

/// The example plans: the every-kind fixture, a plan of MR_REMOTE records
/// into it, and the planner's plans of every example model.
pub fn library_resolve_matches_kernel() -> TestResult {
    let d = dev()?;
    let mut rs: HashMap<u32, Resolver> = HashMap::new();
    let target = load(
        &d,
        &mut rs,
        "every_local_kind",
        &every_local_kind(8 * KIB),
        CHANNEL_ANY,
    )?;
    let remote = Plan::new(0, 0)
        .with(Record::buffer(1, 4 * KIB))
        .with(Record::remote(2, 0, target, 3))
        .with(Record::remote(3, 100, target, 3))
        .with(Record::remote(4, 0, target, 8))
        .with(Record::ptr(5, 2, 0))
        .with(Record::remote(6, 0, target, 13));
    load(&d, &mut rs, "remote", &remote, CHANNEL_ANY)?;
    let sparse = one_buffer(1 << 30, 4 * KIB).with(Record::buffer(7, 64));
    load(&d, &mut rs, "sparse_ids", &sparse, CHANNEL_ANY)?;

    let mut models = 0;
    let mut entries: Vec<_> = std::fs::read_dir(MODELS)
        .ctx(MODELS)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let Ok(model) = Model::load(Path::new(&path)) else {
            continue; // a plan in JSON form, not a model description
        };
        let mp = plan_model(&model).map_err(|e| format!("{}: {e}", path.display()));
        let mp = match mp {
            Ok(mp) => mp,
            Err(e) => return fail(e),
        };
        let lowered = match lower(&model, &mp) {
            Ok(l) => l,
            Err(e) => return fail(format!("{}: {e}", path.display())),
        };
        for l in lowered {
            let name = format!("{}.{}", model.name(), l.memory);
            load(&d, &mut rs, &name, &l.plan, l.channel())?;
        }
        models += 1;
    }
    ensure(models > 0, || format!("no example model in {MODELS}"))
}
