//! `nhbm session`: a script of commands, one per line, against one open
//! file, so that plans stay loaded from one line to the next.

use std::io::{BufRead, Write};

use anyhow::{anyhow, Context, Result};
use nhbm::cli::parse_num;
use nhbm::uapi::CHANNEL_ANY;
use serde_json::json;

use crate::cmd::{info, load, read, reset, resolve, share, stats, write};
use crate::device::Session;

const HELP: &str = "session commands: info | stats | reset | load FILE [CHANNEL|any] | load-verify FILE [CHANNEL] |\n  \
                    unload ID | resolve ID VAR [OFF [SIZE]] | read ID VAR [OFF [LEN]] | write ID VAR OFF HEX |\n  \
                    verify ID | export ID SOCKET | import SOCKET | echo TEXT\n  \
                    (ID may be `last`, the plan loaded or imported most recently)";

/// Runs the script in `file` ("-" or none: stdin).
pub fn run(s: &mut Session, file: Option<&str>) -> Result<()> {
    let input: Box<dyn BufRead> = match file {
        Some(f) if f != "-" => Box::new(std::io::BufReader::new(
            std::fs::File::open(f).map_err(|e| anyhow!("{f}: {e}"))?,
        )),
        _ => Box::new(std::io::stdin().lock()),
    };
    script(s, input)
}

/// Runs one command per line; stops at the first failure.
fn script(s: &mut Session, input: Box<dyn BufRead>) -> Result<()> {
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
        if !s.json {
            println!("> {}", words.join(" "));
        }
        command(s, cmd, rest).with_context(|| format!("line {}", n + 1))?;
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

/// Runs one session command `cmd` with its operands `rest`.
fn command(s: &mut Session, cmd: &str, rest: &[&str]) -> Result<()> {
    match cmd {
        "info" => info::run(s),
        "stats" => stats::run(s),
        "reset" => reset::run(s, None),
        "load" | "stage" | "load-verify" => load_command(s, cmd, rest),
        "unload" => {
            let id = plan_id(s.last, cmd, rest.first())?;
            s.io(&format!("PLAN_UNLOAD {id}"), s.dev.plan_unload(id))?;
            s.plans.remove(&id);
            if !s.json {
                println!("plan {id} unloaded");
            }
            Ok(())
        }
        "resolve" | "read" | "write" => {
            let id = plan_id(s.last, cmd, rest.first())?;
            let var = rest
                .get(1)
                .ok_or_else(|| anyhow!("{cmd}: which variable?"))?;
            match cmd {
                "resolve" => resolve::resolve(s, id, var, &rest[2..]),
                "read" => read::read(s, id, var, &rest[2..]),
                _ => write::write(s, id, var, &rest[2..], false),
            }
        }
        "verify" => {
            let id = plan_id(s.last, cmd, rest.first())?;
            let plan = s
                .plans
                .get(&id)
                .ok_or_else(|| anyhow!("plan {id} was not loaded here"))?;
            load::verify(s, id, plan)
        }
        "export" => {
            let id = plan_id(s.last, cmd, rest.first())?;
            let socket = rest
                .get(1)
                .ok_or_else(|| anyhow!("export: which socket?"))?;
            share::export(s, id, socket)
        }
        "import" => {
            let socket = rest
                .first()
                .ok_or_else(|| anyhow!("import: which socket?"))?;
            share::import(s, socket)
        }
        "echo" => {
            println!("{}", rest.join(" "));
            Ok(())
        }
        "help" => {
            println!("{HELP}");
            Ok(())
        }
        _ => Err(anyhow!("unknown session command {cmd:?} (try help)")),
    }
}

/// `load FILE [CHANNEL|any]`, `stage ...` and `load-verify ...`.
fn load_command(s: &mut Session, cmd: &str, rest: &[&str]) -> Result<()> {
    let file = rest.first().context("load: which plan file?")?;
    let ch = match rest.get(1) {
        None => None,
        Some(&"any") => Some(CHANNEL_ANY),
        Some(c) => Some(parse_num(c).ok_or_else(|| anyhow!("load: bad channel {c:?}"))?),
    };
    let id = load::load(s, file, ch, cmd == "load-verify")?;
    if s.json {
        println!("{}", json!({"loaded": file, "plan_id": id}));
    }
    Ok(())
}

/// The plan id operand of `cmd`: a number, or `last` for the plan `last`
/// names.
fn plan_id(last: Option<u32>, cmd: &str, s: Option<&&str>) -> Result<u32> {
    match s {
        Some(&"last") => last.ok_or_else(|| anyhow!("{cmd}: no plan loaded yet")),
        _ => s
            .and_then(|v| parse_num(v))
            .ok_or_else(|| anyhow!("{cmd}: a plan id (or last) is needed")),
    }
}
