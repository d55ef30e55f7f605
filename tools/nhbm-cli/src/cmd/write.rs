//! `nhbm write`: stage a plan, write bytes into a variable (MEM_WRITE, or
//! through an mmap of it with `--mmap`) and read them back with MEM_READ.

use anyhow::{anyhow, Context, Result};

use crate::args::WriteArgs;
use crate::cmd::load::stage_quietly;
use crate::device::{num_arg, Session};
use crate::fmt;

/// Stages the plan `w` names and writes into its variable.
pub fn run(s: &mut Session, w: &WriteArgs) -> Result<()> {
    let id = stage_quietly(s, &w.var)?;
    write(s, id, &w.var.var, &w.var.rest_args(), w.mmap)
}

/// Writes the hex bytes of `rest` (`OFFSET HEX`) into `var` of plan `id`,
/// through an mmap of the variable when `mmap` is set, and checks with
/// MEM_READ that they read back equal.
pub fn write(s: &Session, id: u32, var: &str, rest: &[&str], mmap: bool) -> Result<()> {
    let v = s.var(id, var)?;
    let off = num_arg(rest.first(), "offset")?.context("write: offset and hex bytes needed")?;
    let hex = rest.get(1).context("write: hex bytes needed")?;
    let data = unhex(hex)?;
    let what = format!("[{off:#x}, +{:#x})", data.len());
    if mmap {
        let mut m = s.io(&format!("mmap {var}"), s.dev.map(id, v))?;
        let at = usize::try_from(off).unwrap_or(usize::MAX);
        s.io(&format!("store {var} {what}"), m.write(at, &data))?;
    } else {
        s.io(
            &format!("MEM_WRITE {var} {what}"),
            s.dev.mem_write(id, v, off, &data),
        )?;
    }
    let mut back = vec![0u8; data.len()];
    s.io("MEM_READ", s.dev.mem_read(id, v, off, &mut back))?;
    if back != data {
        return Err(anyhow!("write: var {v} reads back differently"));
    }
    if !s.json {
        println!(
            "wrote {} to plan {id} var {v} at {off:#x}{} (read back equal)",
            fmt::bytes(data.len() as u64),
            if mmap { " through mmap" } else { "" }
        );
    }
    Ok(())
}

/// The bytes an even number of hex digits (after an optional `0x`) spell.
fn unhex(s: &str) -> Result<Vec<u8>> {
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(anyhow!("{s:?} is not an even number of hex digits"));
    }
    Ok((0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_arguments() {
        assert_eq!(unhex("0xdeadBEEF").unwrap(), vec![0xde, 0xad, 0xbe, 0xef]);
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }
}
