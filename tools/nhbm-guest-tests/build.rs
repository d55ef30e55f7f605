//! Generates the case table of each case-table suite, so that a case is
//! registered by being written.
//!
//! The cases of the suite in `src/<dir>/` are the `pub fn`s at the top level
//! of `src/<dir>/mod.rs` and of the modules it declares (`mod x;`), in that
//! order and then in source order, whose signature is
//! `pub fn name() -> TestResult` or `pub fn name(notes: &mut Notes) -> TestResult`.
//! Any other `pub fn` returning `TestResult` there stops the build: a helper
//! that returns `TestResult` is not `pub`. A case written without `pub` is
//! dead code, which `make lint` refuses. Two cases of one suite may not share
//! a name.
//!
//! The table is `$OUT_DIR/<dir>_cases.rs`, an expression of type
//! `&[Case]` that the suite's `mod.rs` includes.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The directories under `src/` that hold a case-table suite.
const SUITES: [&str; 3] = ["uapi", "pci", "stress"];

/// One case: the module path of its function, its name, and whether it
/// takes the `&mut Notes`.
struct Found {
    module: String,
    name: String,
    takes_notes: bool,
}

/// The names declared by `mod x;` lines at the top level of `text`.
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// The text inside the parentheses that open `s`, and what follows them.
fn split_params(s: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// The signature of the `pub fn` whose text after `pub fn ` is `rest`, on
/// line `i` of `lines`: everything up to the brace that opens the body.
fn signature(lines: &[&str], i: usize, rest: &str) -> String {
    let mut sig = rest.trim().to_string();
    let mut j = i;
    while !sig.contains('{') && j + 1 < lines.len() {
        j += 1;
        sig.push(' ');
        sig.push_str(lines[j].trim());
    }
    sig.split('{').next().unwrap_or_default().to_string()
}

/// Whether the case `name` (at `at`) with parameters `params` takes the
/// `&mut Notes`; an error for any other parameter list.
fn case_takes_notes(params: &str, name: &str, at: &str) -> Result<bool, String> {
    let params: Vec<&str> = params
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    match params.as_slice() {
        [] => Ok(false),
        [p] if p
            .split_once(':')
            .is_some_and(|(_, t)| t.trim() == "&mut Notes") =>
        {
            Ok(true)
        }
        _ => Err(format!(
            "{at}: pub fn {name}({}) returns TestResult: a case takes () or \
             (&mut Notes); a helper is not pub",
            params.join(", ")
        )),
    }
}

/// The cases among the top-level `pub fn`s of `text` (module `module`, read
/// from `file`).
fn cases_in(text: &str, module: &str, file: &Path) -> Result<Vec<Found>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("pub fn ") else {
            continue;
        };
        // The signature runs to the brace that opens the body.
        let sig = signature(&lines, i, rest);
        let at = format!("{}:{}", file.display(), i + 1);
        let name_end = sig.find(['(', '<']).ok_or(format!("{at}: no parameters"))?;
        let name = sig[..name_end].trim();
        let Some((params, after)) = split_params(&sig[name_end..]) else {
            // Generic: never a case, but a case's return type is refused.
            if sig.contains("-> TestResult") {
                return Err(format!(
                    "{at}: pub fn {name} returns TestResult but is generic"
                ));
            }
            continue;
        };
        let ret = after.trim().strip_prefix("->").unwrap_or("").trim();
        if !ret.starts_with("TestResult") {
            continue;
        }
        let takes_notes = case_takes_notes(params, name, &at)?;
        if ret != "TestResult" {
            return Err(format!(
                "{at}: pub fn {name} -> {ret}: a case returns TestResult"
            ));
        }
        found.push(Found {
            module: module.to_string(),
            name: name.to_string(),
            takes_notes,
        });
    }
    Ok(found)
}

/// Every case of the suite in `dir` (`src/<suite>`), in run order.
fn scan(dir: &Path, suite: &str) -> Result<Vec<Found>, String> {
    let read = |p: &Path| fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let root = dir.join("mod.rs");
    let text = read(&root)?;
    let top = format!("crate::{suite}");
    let mut all = cases_in(&text, &top, &root)?;
    for m in declared_modules(&text) {
        let file = dir.join(format!("{m}.rs"));
        all.extend(cases_in(&read(&file)?, &format!("{top}::{m}"), &file)?);
    }
    let mut names = HashSet::new();
    for f in &all {
        if !names.insert(f.name.as_str()) {
            return Err(format!("suite {suite}: two cases named {}", f.name));
        }
    }
    if all.is_empty() {
        return Err(format!("suite {suite}: no case in {}", dir.display()));
    }
    Ok(all)
}

/// The table as a Rust expression.
fn table(suite: &str, cases: &[Found]) -> String {
    let mut s = format!("// Generated by build.rs from src/{suite}/; do not edit.\n&[\n");
    for c in cases {
        let path = format!("{}::{}", c.module, c.name);
        let run = if c.takes_notes {
            path
        } else {
            format!("|_| {path}()")
        };
        let _ = writeln!(s, "    Case::new({:?}, {run}),", c.name);
    }
    s.push_str("]\n");
    s
}

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    for suite in SUITES {
        let dir = Path::new("src").join(suite);
        println!("cargo:rerun-if-changed={}", dir.display());
        let cases = scan(&dir, suite).unwrap_or_else(|e| panic!("case table: {e}"));
        let file = out.join(format!("{suite}_cases.rs"));
        fs::write(&file, table(suite, &cases))
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}
