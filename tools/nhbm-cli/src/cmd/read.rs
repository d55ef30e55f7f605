//! `nhbm read`: stage a plan and hex dump part of a variable (MEM_READ).

use anyhow::Result;
use serde_json::json;

use crate::args::VarArgs;
use crate::cmd::load::stage_quietly;
use crate::device::{num_arg, Session};
use crate::fmt;

/// Stages the plan `v` names and dumps its variable.
pub fn run(s: &mut Session, v: &VarArgs) -> Result<()> {
    let id = stage_quietly(s, v)?;
    read(s, id, &v.var, &v.rest_args())
}

/// Dumps `var` of plan `id` at `[OFFSET [LEN]]` from `rest` (default: up
/// to 256 bytes from the offset).
pub fn read(s: &Session, id: u32, var: &str, rest: &[&str]) -> Result<()> {
    let v = s.var(id, var)?;
    let off = num_arg(rest.first(), "offset")?.unwrap_or(0);
    let default_len = s
        .var_size(id, v)
        .map_or(256, |sz| sz.saturating_sub(off).min(256));
    let len = num_arg(rest.get(1), "length")?.unwrap_or(default_len);
    let mut buf = vec![0u8; len as usize];
    s.io(
        &format!("MEM_READ {var} [{off:#x}, +{len:#x})"),
        s.dev.mem_read(id, v, off, &mut buf),
    )?;
    if s.json {
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
