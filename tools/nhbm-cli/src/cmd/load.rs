//! `nhbm load` (alias `stage`): stage a plan and show where each variable
//! landed; the staging the other commands that take a plan file share.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nhbm::uapi::{DeviceInfo, CHANNEL_ANY, PA_UNSTAGED};
use nhbm::validate::{backing_name, mr_type_name};
use nhbm::{Backing, Kind, Limits, LoadedPlan, Plan};
use serde_json::{json, Value};

use crate::args::VarArgs;
use crate::cmd::validate::read_plan;
use crate::device::Session;
use crate::error::Failure;
use crate::fmt;

/// Stages the plan file `plan`; with `hold`, keeps it loaded until stdin
/// closes.
pub fn run(
    s: &mut Session,
    plan: &str,
    channel: Option<u32>,
    verify: bool,
    hold: bool,
) -> Result<()> {
    let id = load(s, plan, channel, verify)?;
    if hold {
        eprintln!("nhbm: plan {id} stays loaded until stdin closes");
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line)? > 0 {
            line.clear();
        }
    }
    Ok(())
}

/// Stages the plan of `resolve`, `read` or `write` without a listing.
pub fn stage_quietly(s: &mut Session, v: &VarArgs) -> Result<u32> {
    s.quiet = true;
    let id = load(s, &v.plan, v.channel.channel, false);
    s.quiet = false;
    id
}

/// Stages a plan file on `channel` (default: the file name's); returns its
/// plan id.
pub fn load(s: &mut Session, path: &str, channel: Option<u32>, verify: bool) -> Result<u32> {
    let limits = Limits::from_device_info(&s.info);
    let plan = read_plan(path, &limits)?;
    let channel = channel
        .or_else(|| channel_from_name(path))
        .unwrap_or(CHANNEL_ANY);
    Ok(load_plan(s, plan, path, channel, verify)?.plan_id)
}

/// Stages `plan` (named `label` in messages) on `channel`; returns what
/// PLAN_LOAD answered.
pub fn load_plan(
    s: &mut Session,
    plan: Plan,
    label: &str,
    channel: u32,
    verify: bool,
) -> Result<LoadedPlan> {
    let limits = Limits::from_device_info(&s.info);
    let blob = plan
        .to_blob_for(&limits)
        .map_err(|e| Failure::invalid(format!("{label}: {e}"), Some(e.errno)))?;
    let payload: u64 = plan.records.iter().map(|r| r.data.len() as u64).sum();
    let t0 = Instant::now();
    let loaded = with_progress(payload, || s.dev.plan_load(&blob, channel));
    let loaded = s.io(&format!("PLAN_LOAD {label}"), loaded)?;
    let took = t0.elapsed();
    let id = loaded.plan_id;
    if !s.quiet {
        let staged = Staged {
            plan: &plan,
            loaded: &loaded,
            channel,
            payload,
            took,
        };
        show_loaded(s, label, &staged);
    }
    if verify {
        self::verify(s, id, &plan)?;
    }
    s.plans.insert(id, plan);
    s.last = Some(id);
    Ok(loaded)
}

/// Reads back every payload of plan `id` and compares it with the plan's
/// bytes.
pub fn verify(s: &Session, id: u32, plan: &Plan) -> Result<()> {
    let mut checked = 0u64;
    for r in plan.records.iter().filter(|r| !r.data.is_empty()) {
        let mut buf = vec![0u8; r.data.len()];
        s.io(
            &format!("MEM_READ var {}", r.var_id),
            s.dev.mem_read(id, r.var_id, 0, &mut buf),
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
    if !s.json && checked > 0 {
        println!("verified {} of payload in plan {id}", fmt::bytes(checked));
    }
    Ok(())
}

/// A plan just staged: what PLAN_LOAD answered and what it took.
struct Staged<'a> {
    plan: &'a Plan,
    loaded: &'a LoadedPlan,
    channel: u32,
    payload: u64,
    took: Duration,
}

/// Lists where each variable of the plan staged from `path` landed.
fn show_loaded(s: &Session, path: &str, st: &Staged) {
    let (plan, l) = (st.plan, st.loaded);
    if s.json {
        let recs: Vec<Value> = plan
            .records
            .iter()
            .zip(&l.addrs)
            .map(|(r, &a)| json!({"var_id": r.var_id, "name": r.name, "type": mr_type_name(r.mr_type()), "size": r.size, "addr": a}))
            .collect();
        println!(
            "{}",
            json!({"file": path, "plan_id": l.plan_id, "channel": st.channel, "bytes_allocated": l.bytes_allocated,
                   "local_scratchpad_pa": l.local_scratchpad_pa, "shared_scratchpad_pa": l.shared_scratchpad_pa,
                   "payload_bytes": st.payload, "load_ms": st.took.as_secs_f64() * 1e3, "records": recs})
        );
        return;
    }
    println!(
        "plan {} from {path}: {} records, {} allocated, {} uploaded in {:.1} ms",
        l.plan_id,
        plan.records.len(),
        fmt::bytes(l.bytes_allocated),
        fmt::bytes(st.payload),
        st.took.as_secs_f64() * 1e3
    );
    println!(
        "  local scratchpad {} ({})  shared scratchpad {} ({})",
        pa(l.local_scratchpad_pa),
        fmt::bytes(plan.local_scratchpad_size),
        pa(l.shared_scratchpad_pa),
        fmt::bytes(plan.shared_scratchpad_size)
    );
    print_records(&s.info, plan, l);
}

/// The table of the staged plan's variables: kind, size, address, memory.
fn print_records(info: &DeviceInfo, plan: &Plan, l: &LoadedPlan) {
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
                chan(info, a),
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

/// A physical address, or `-` for none.
fn pa(a: u64) -> String {
    if a == PA_UNSTAGED {
        "-".to_string()
    } else {
        format!("{a:#014x}")
    }
}

/// The HBM channel address `a` lies in, or `-`.
fn chan(info: &DeviceInfo, a: u64) -> String {
    (0..info.nr_channels as usize)
        .find(|&c| a >= info.channel_base[c] && a - info.channel_base[c] < info.channel_size[c])
        .map_or("-".to_string(), |c| format!("hbm{c}"))
}

/// What a record's kind adds to its type in the listing.
fn kind_detail(k: &Kind) -> String {
    match k {
        Kind::VirtualTmpBuf {
            backing: Backing::Main,
            ..
        } => "main".to_string(),
        Kind::VirtualTmpBuf {
            offset,
            backing: Backing::Sharded(nc),
        } => format!("sharded nc{nc} +{offset:#x}"),
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

/// The channel a plan file's name asks for: `*.hbmN.*`.
fn channel_from_name(path: &str) -> Option<u32> {
    let name = Path::new(path).file_name()?.to_str()?;
    name.split('.')
        .find_map(|part| part.strip_prefix("hbm")?.parse().ok())
}

/// Runs `f`; while it runs longer than a moment on a terminal with a large
/// payload, shows an elapsed-time indicator on stderr.
fn with_progress<T>(payload: u64, f: impl FnOnce() -> T) -> T {
    if payload < (64 << 20) || !std::io::stderr().is_terminal() {
        return f();
    }
    let done = Arc::new(AtomicBool::new(false));
    let ticker = spawn_ticker(payload, done.clone());
    let r = f();
    done.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    r
}

/// The thread that redraws the upload indicator until `done` is set.
fn spawn_ticker(payload: u64, done: Arc<AtomicBool>) -> JoinHandle<()> {
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let spin = ['|', '/', '-', '\\'];
        let mut k = 0;
        while !done.load(Ordering::Relaxed) {
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
    })
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
    fn scratch_windows_name_their_backing() {
        let vtmp = |backing, offset| Kind::VirtualTmpBuf { offset, backing };
        assert_eq!(kind_detail(&vtmp(Backing::Local, 16)), "local +0x10");
        assert_eq!(
            kind_detail(&vtmp(Backing::Sharded(3), 16)),
            "sharded nc3 +0x10"
        );
        assert_eq!(kind_detail(&vtmp(Backing::Main, 0)), "main");
    }
}
