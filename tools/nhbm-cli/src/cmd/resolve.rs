//! `nhbm resolve`: stage a plan and resolve a variable (at an offset) to
//! its physical address.

use anyhow::Result;
use serde_json::json;

use crate::args::VarArgs;
use crate::cmd::load::stage_quietly;
use crate::device::{num_arg, Session};

/// Stages the plan `v` names and resolves its variable.
pub fn run(s: &mut Session, v: &VarArgs) -> Result<()> {
    let id = stage_quietly(s, v)?;
    resolve(s, id, &v.var, &v.rest_args())
}

/// Resolves `var` of plan `id` at `[OFFSET [SIZE]]` from `rest`.
pub fn resolve(s: &Session, id: u32, var: &str, rest: &[&str]) -> Result<()> {
    let v = s.var(id, var)?;
    let off = num_arg(rest.first(), "offset")?.unwrap_or(0);
    let size = num_arg(rest.get(1), "size")?.unwrap_or(0);
    let addr = s.io(
        &format!("RESOLVE {var} [{off:#x}, +{size:#x})"),
        s.dev.resolve(id, v, off, size),
    )?;
    if s.json {
        println!(
            "{}",
            json!({"plan_id": id, "var_id": v, "offset": off, "size": size, "addr": addr})
        );
    } else {
        println!("plan {id} var {v} ({var}) + {off:#x} -> {addr:#014x}");
    }
    Ok(())
}
