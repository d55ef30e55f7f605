//! The cases of `nhbm_monitor`, in the order they run: the last one ends
//! tenant b.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nhbm::Device;
use serde_json::Value;

use super::world::{fdinfo_hbm, Case, World, DEVICE};
use crate::ktap::{ensure, ensure_eq, fail, Fail, Notes, TestResult};
use crate::pty;

/// Every case, in order.
pub const CASES: &[Case] = &[
    (
        "ls_lists_both_tenants_as_mem_stats_and_fdinfo_say",
        ls_lists_both_tenants,
    ),
    (
        "monitor_lines_match_mem_stats_and_fdinfo",
        monitor_lines_match,
    ),
    (
        "prometheus_text_parses_line_by_line",
        prometheus_text_parses,
    ),
    (
        "top_draws_both_tenants_on_an_80x24_terminal",
        top_on_a_terminal,
    ),
    (
        "top_off_a_terminal_prints_one_plain_frame",
        top_off_a_terminal,
    ),
    (
        "an_unprivileged_user_is_told_what_it_cannot_see",
        unprivileged,
    ),
    (
        "a_session_serves_a_plan_that_another_imports_read_only",
        session_shares_a_plan,
    ),
    ("a_tenant_exit_shows_within_one_interval", tenant_exit_shows),
];

/// MEM_STATS' used bytes per channel of the device, through a file that
/// is closed again before `nhbm` looks.
fn used_per_channel() -> Result<Vec<u64>, Fail> {
    let d = Device::open(DEVICE).map_err(|e| Fail::Fail(format!("open: {e}")))?;
    let s = d
        .mem_stats()
        .map_err(|e| Fail::Fail(format!("MEM_STATS: {e}")))?;
    let n = d
        .device_info()
        .map_err(|e| Fail::Fail(format!("DEVICE_INFO: {e}")))?
        .nr_channels as usize;
    Ok((0..n)
        .map(|c| s.pools[c].iter().map(|p| p.used).sum())
        .collect())
}

/// The device `DEVICE` of a census.
fn device(census: &Value) -> Result<&Value, Fail> {
    census["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["index"] == DEVICE))
        .ok_or_else(|| Fail::Fail(format!("no device {DEVICE} in {census}")))
}

/// The holder `pid` of a device of a census, if listed.
fn holder(dev: &Value, pid: u32) -> Option<&Value> {
    dev["processes"]
        .as_array()?
        .iter()
        .find(|p| p["pid"] == pid)
}

/// A census shows both tenants with their fdinfo's HBM, their mapping and
/// one plan each, and the device's usage as MEM_STATS says.
fn check_census(w: &World, census: &Value, used: &[u64]) -> TestResult {
    let dev = device(census)?;
    ensure_eq("state", dev["state"].as_str(), Some("ready"))?;
    for (c, &u) in used.iter().enumerate() {
        ensure_eq(
            &format!("hbm{c} used"),
            dev["channels"][c]["used_bytes"].as_u64(),
            Some(u),
        )?;
    }
    for t in [&w.a, &w.b] {
        let h =
            holder(dev, t.pid).ok_or_else(|| Fail::Fail(format!("pid {} not in {dev}", t.pid)))?;
        for c in 0..used.len() {
            let want = if c == t.channel { t.own_bytes } else { 0 };
            ensure_eq(
                &format!("pid {} hbm{c}", t.pid),
                h["hbm_bytes"][c].as_u64(),
                Some(want),
            )?;
            ensure_eq(
                &format!("pid {} fdinfo hbm{c}", t.pid),
                fdinfo_hbm(t.pid, c)?,
                want,
            )?;
        }
        ensure_eq(
            "mapped_bytes",
            h["mapped_bytes"].as_u64(),
            Some(t.mapped_bytes),
        )?;
        let plans =
            std::fs::read_to_string("/sys/kernel/debug/neuron_hbm0/plans").unwrap_or_default();
        ensure(h["plans"].as_u64() == Some(1), || {
            format!(
                "pid {}: plans {} where debugfs says\n{plans}",
                t.pid, h["plans"]
            )
        })?;
        ensure_eq("files", h["files"].as_u64(), Some(1))?;
    }
    // Most HBM first: a's 4 MiB before b's 2 MiB.
    let pids: Vec<u64> = dev["processes"].as_array().map_or(Vec::new(), |p| {
        p.iter().filter_map(|p| p["pid"].as_u64()).collect()
    });
    ensure(pids == [u64::from(w.a.pid), u64::from(w.b.pid)], || {
        format!("holders {pids:?}")
    })
}

fn ls_lists_both_tenants(w: &mut World, notes: &mut Notes) -> TestResult {
    ensure(w.a.mapped_bytes > 0 && w.a.own_bytes >= 4 << 20, || {
        "tenant a holds too little".into()
    })?;
    let used = used_per_channel()?;
    check_census(w, &w.json(&["ls", "--json"])?, &used)?;
    let text = w.nhbm(&["ls"], None)?;
    notes.add(text.clone());
    for t in [&w.a, &w.b] {
        let want = format!("{} nhbm-monitor-te (0)", t.pid);
        ensure(text.contains(&want), || format!("{want:?} not in\n{text}"))?;
    }
    ensure(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("neuron_hbm0 ")),
        || text.clone(),
    )
}

fn monitor_lines_match(w: &mut World, _: &mut Notes) -> TestResult {
    let used = used_per_channel()?;
    let out = w.nhbm(
        &["monitor", "--count", "2", "--interval", "0.5", "-d", "0"],
        None,
    )?;
    let lines: Vec<&str> = out.lines().collect();
    ensure_eq("lines", lines.len(), 2)?;
    let mut stamps = Vec::new();
    for l in lines {
        let v: Value = serde_json::from_str(l).map_err(|e| Fail::Fail(format!("{e}: {l}")))?;
        check_census(w, &v, &used)?;
        ensure_eq(
            "devices shown with -d 0",
            v["devices"].as_array().map(Vec::len),
            Some(1),
        )?;
        stamps.push(v["timestamp"].as_f64().unwrap_or(0.0));
    }
    let gap = stamps[1] - stamps[0];
    ensure((0.4..2.0).contains(&gap), || {
        format!("samples {gap} s apart, not 0.5")
    })
}

fn prometheus_text_parses(w: &mut World, notes: &mut Notes) -> TestResult {
    let used = used_per_channel()?;
    let text = w.nhbm(&["monitor", "--prometheus", "--count", "1"], None)?;
    let mut samples = 0;
    for l in text.lines() {
        match prometheus_parse::LineInfo::parse(l) {
            prometheus_parse::LineInfo::Ignored => {
                return fail(format!("the parser ignores {l:?}"))
            }
            prometheus_parse::LineInfo::Sample { .. } => samples += 1,
            _ => {}
        }
    }
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| Fail::Fail(format!("parse: {e}")))?;
    ensure_eq("samples parsed", scrape.samples.len(), samples)?;
    notes.add(format!("{samples} samples"));
    let value = |metric: &str, labels: &[(&str, String)]| {
        scrape.samples.iter().find_map(|s| {
            let hit = s.metric == metric
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k) == Some(v.as_str()));
            match (&s.value, hit) {
                (prometheus_parse::Value::Gauge(v), true) => Some(*v as u64),
                _ => None,
            }
        })
    };
    let dev = ("device", "neuron_hbm0".to_string());
    for (c, &u) in used.iter().enumerate() {
        let got = value(
            "nhbm_hbm_used_bytes",
            &[dev.clone(), ("channel", format!("hbm{c}"))],
        );
        ensure_eq(&format!("nhbm_hbm_used_bytes hbm{c}"), got, Some(u))?;
    }
    for t in [&w.a, &w.b] {
        let who = [dev.clone(), ("pid", t.pid.to_string())];
        let mut l = who.to_vec();
        l.push(("channel", format!("hbm{}", t.channel)));
        ensure_eq(
            "nhbm_process_hbm_bytes",
            value("nhbm_process_hbm_bytes", &l),
            Some(t.own_bytes),
        )?;
        ensure_eq(
            "nhbm_process_mapped_bytes",
            value("nhbm_process_mapped_bytes", &who),
            Some(t.mapped_bytes),
        )?;
        ensure_eq(
            "nhbm_process_plans",
            value("nhbm_process_plans", &who),
            Some(1),
        )?;
    }
    Ok(())
}

/// `child`'s exit status once it exits, waiting at most `limit`.
fn exit_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

/// Feeds what `master` receives into `screen`, answering cursor position
/// queries as a terminal does, until `done` holds of the screen or `limit`
/// passes; whether it held.
fn pump(
    master: &mut std::fs::File,
    screen: &mut vt100::Parser,
    limit: Duration,
    mut done: impl FnMut(&vt100::Parser) -> bool,
) -> bool {
    let end = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    while Instant::now() < end && !done(screen) {
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(master),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for 100 ms.
        if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
            continue;
        }
        let n = match master.read(&mut buf) {
            Ok(n) if n > 0 => n,
            _ => break,
        };
        screen.process(&buf[..n]);
        for _ in buf[..n].windows(4).filter(|w| w == b"\x1b[6n") {
            let (row, col) = screen.screen().cursor_position();
            let _ = write!(master, "\x1b[{};{}R", row + 1, col + 1);
        }
    }
    done(screen)
}

fn top_on_a_terminal(w: &mut World, notes: &mut Notes) -> TestResult {
    let (master, slave) = pty::open(24, 80).map_err(|e| Fail::Fail(format!("openpty: {e}")))?;
    let dup = |f: &OwnedFd| f.try_clone().map_err(|e| Fail::Fail(format!("dup: {e}")));
    let mut child = Command::new(&w.nhbm)
        .args(["top", "--interval", "0.5"])
        .env("TERM", "xterm")
        .stdin(Stdio::from(dup(&slave)?))
        .stdout(Stdio::from(dup(&slave)?))
        .stderr(Stdio::from(slave))
        .spawn()
        .map_err(|e| Fail::Fail(format!("nhbm top: {e}")))?;
    let mut master = std::fs::File::from(master);
    let size = |n| std::num::NonZeroU16::new(n).expect("not zero");
    let mut screen = vt100::Parser::new(size(24), size(80), 0);
    let (a, b) = (
        format!(" {} nhbm-monitor-te", w.a.pid),
        format!(" {} nhbm-monitor-te", w.b.pid),
    );
    let both = pump(&mut master, &mut screen, Duration::from_secs(20), |p| {
        let s = p.screen().contents();
        s.contains(&a) && s.contains(&b)
    });
    // Read before quitting, which leaves the alternate screen.
    let row = (0..24u16).find(|&r| {
        screen
            .screen()
            .contents_between(r, 0, r, 80)
            .starts_with("  hbm0 [")
    });
    let colour = row
        .and_then(|r| screen.screen().cell(r, 7))
        .map(|c| c.fgcolor());
    let text = screen.screen().contents();
    let _ = master.write_all(b"q");
    pump(&mut master, &mut screen, Duration::from_secs(10), |_| {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    // The pump also ends when top closes the terminal, which may come
    // before its exit can be reaped (a slow kernel showed it).
    let exited = exit_within(&mut child, Duration::from_secs(10));
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    notes.add(format!("the screen:\n{text}"));
    if !exited.is_some_and(|s| s.success()) {
        notes.add(format!("then:\n{}", screen.screen().contents()));
    }
    ensure(both, || "both tenants' rows did not show".into())?;
    ensure(exited.is_some_and(|s| s.success()), || {
        format!("q did not end top with status 0: {exited:?}")
    })?;
    // a holds more, so its row is above b's; the bars are in colour.
    ensure(text.find(&a) < text.find(&b), || {
        "a's row is not above b's".into()
    })?;
    ensure(colour.is_some_and(|c| c != vt100::Color::Default), || {
        format!("hbm0's bar has no colour: {colour:?}")
    })
}

fn top_off_a_terminal(w: &mut World, notes: &mut Notes) -> TestResult {
    let text = w.nhbm(&["top"], None)?;
    notes.add(text.clone());
    ensure(!text.contains('\x1b'), || {
        "escape sequences off a terminal".into()
    })?;
    ensure(text.lines().all(|l| l.chars().count() <= 80), || {
        text.clone()
    })?;
    for t in [&w.a, &w.b] {
        let row = format!(" {} nhbm-monitor-te 0 ", t.pid);
        ensure(text.contains(&row), || format!("{row:?} not in\n{text}"))?;
    }
    Ok(())
}

fn unprivileged(w: &mut World, notes: &mut Notes) -> TestResult {
    const NOBODY: u32 = 65534;
    let text = w.nhbm(&["ls"], Some(NOBODY))?;
    notes.add(text.clone());
    for want in [
        "no_access",
        "note: ",
        "processes of other users could not be looked at",
        "only root reads",
    ] {
        ensure(text.contains(want), || format!("{want:?} not in\n{text}"))?;
    }
    ensure(!text.contains(&w.a.pid.to_string()), || {
        "another user's tenant shows".into()
    })?;
    let top = w.nhbm(&["top"], Some(NOBODY))?;
    ensure(top.contains("note: "), || top.clone())?;
    let out = w.nhbm(&["monitor", "--count", "1"], Some(NOBODY))?;
    let v: Value = serde_json::from_str(&out).map_err(|e| Fail::Fail(format!("{e}: {out}")))?;
    ensure(v["seen"]["hidden_processes"].as_u64() >= Some(2), || {
        format!("seen: {}", v["seen"])
    })?;
    ensure_eq(
        "device_usage",
        v["seen"]["device_usage"].as_bool(),
        Some(false),
    )
}

/// `nhbm session` in one process loads a plan and serves it (`export`),
/// and `nhbm --json session` in another imports it (`import`): it reads
/// the exporter's bytes and its `write` is refused with `EACCES`.
fn session_shares_a_plan(w: &mut World, notes: &mut Notes) -> TestResult {
    let dir = std::env::temp_dir();
    let (plan, sock) = (dir.join("nhbm-shared.plan"), dir.join("nhbm-shared.sock"));
    let blob = nhbm::Plan::new(0, 0)
        .with(nhbm::Record::buffer(1, 4096).data(b"shared weights".to_vec()))
        .to_blob()
        .map_err(|e| Fail::Fail(format!("build: {e}")))?;
    std::fs::write(&plan, blob).map_err(|e| Fail::Fail(format!("{}: {e}", plan.display())))?;
    let dev = DEVICE.to_string();
    let mut exporter = Command::new(&w.nhbm)
        .args(["-d", &dev, "session", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Fail::Fail(format!("nhbm session: {e}")))?;
    let mut input = exporter.stdin.take().expect("piped");
    let script = format!("load {}\nexport last {}\n", plan.display(), sock.display());
    let said = input
        .write_all(script.as_bytes())
        .map_err(|e| Fail::Fail(e.to_string()));
    let mut lines = BufReader::new(exporter.stdout.take().expect("piped")).lines();
    let served = said.and_then(|()| {
        lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains("exported"))
            .ok_or_else(|| Fail::Fail("the exporting session never served the plan".into()))
    });
    // Failures go to stderr without --json, which `nhbm` then reports.
    let importer = |then: &str, json: bool| -> Result<String, Fail> {
        let script = dir.join("nhbm-import.script");
        let text = format!("import {}\n{then}\n", sock.display());
        std::fs::write(&script, text).map_err(|e| Fail::Fail(e.to_string()))?;
        let path = script.to_string_lossy().into_owned();
        let args = ["--json", "-d", &dev, "session", &path];
        w.nhbm(&args[usize::from(!json)..], None)
    };
    let imported = served.map(|line| {
        notes.add(line);
        let read = importer("read last 1 0 14", true);
        (read, importer("write last 1 0 aa", false))
    });
    drop(input);
    let _ = exporter.wait();
    let (read, write) = imported?;
    let out = read?;
    notes.add(out.clone());
    let hex: String = b"shared weights"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    ensure(out.contains("\"imported\"") && out.contains(&hex), || {
        format!("the importing session said\n{out}")
    })?;
    match write {
        Err(Fail::Fail(m)) if m.contains("EACCES") => Ok(()),
        other => fail(format!("a write into the import: {other:?}")),
    }
}

/// Seconds since the epoch, as `monitor` stamps its samples.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn tenant_exit_shows(w: &mut World, notes: &mut Notes) -> TestResult {
    // Eight samples at most: a monitor that never shows the exit ends
    // the case instead of holding it.
    let mut m = Command::new(&w.nhbm)
        .args(["monitor", "--interval", "1", "--count", "8", "-d", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Fail::Fail(format!("nhbm monitor: {e}")))?;
    let mut lines = BufReader::new(m.stdout.take().expect("piped")).lines();
    let mut next = || -> Result<Value, Fail> {
        let l = lines
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| Fail::Fail("no sample taken after the exit".into()))?;
        serde_json::from_str(&l).map_err(|e| Fail::Fail(format!("{e}: {l}")))
    };
    let r = (|| {
        let first = next()?;
        ensure(holder(device(&first)?, w.b.pid).is_some(), || {
            "b missing before its exit".into()
        })?;
        let pid = w.b.pid;
        w.b.exit()?;
        let gone = now();
        let after = loop {
            let v = next()?;
            if v["timestamp"].as_f64().unwrap_or(0.0) > gone {
                break v;
            }
        };
        let late = after["timestamp"].as_f64().unwrap_or(0.0) - gone;
        notes.add(format!(
            "the first sample after the exit came {late:.2} s after it"
        ));
        ensure(holder(device(&after)?, pid).is_none(), || {
            format!("pid {pid} still listed")
        })?;
        // One interval, and a quarter second for the census itself and
        // the scheduling of a loaded guest.
        ensure(late <= 1.25, || {
            format!("{late:.2} s is more than one interval")
        })
    })();
    let _ = m.kill();
    let _ = m.wait();
    r
}
