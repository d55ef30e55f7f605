//! A tenant: a child process (this program again, with `--tenant`) that
//! opens a device, loads a one-input plan on a channel, maps the input if
//! asked, reports what it holds, and keeps it until its stdin ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use nhbm::{Device, Plan, Record};

use crate::ktap::{fail, Fail};

/// The parent's handle of a running tenant.
pub struct Tenant {
    /// The tenant's pid.
    pub pid: u32,
    /// The channel its plan is on.
    pub channel: usize,
    /// HBM bytes its file holds (MEM_STATS' own_bytes).
    pub own_bytes: u64,
    /// Bytes of the device it has mapped.
    pub mapped_bytes: u64,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Tenant {
    /// Starts `exe --tenant DEVICE CHANNEL SIZE MAP` and waits until it
    /// holds its plan.
    pub fn spawn(
        exe: &Path,
        device: u32,
        channel: usize,
        size: u64,
        map: bool,
    ) -> Result<Tenant, Fail> {
        let args = [
            device.to_string(),
            channel.to_string(),
            size.to_string(),
            u8::from(map).to_string(),
        ];
        let mut child = Command::new(exe)
            .arg("--tenant")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Fail::Fail(format!("starting a tenant: {e}")))?;
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| Fail::Fail(format!("tenant: {e}")))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let stdin = child.stdin.take();
        match (line.starts_with("ready "), f.as_slice()) {
            (true, &[own_bytes, mapped_bytes]) => Ok(Tenant {
                pid: child.id(),
                channel,
                own_bytes,
                mapped_bytes,
                child,
                stdin,
            }),
            _ => fail(format!("tenant on channel {channel} said {line:?}")),
        }
    }

    /// Ends the tenant (its stdin closes) and waits for it to exit.
    pub fn exit(&mut self) -> Result<(), Fail> {
        drop(self.stdin.take());
        match self.child.wait() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => fail(format!("tenant {} exited with {s}", self.pid)),
            Err(e) => fail(format!("waiting for tenant {}: {e}", self.pid)),
        }
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.exit();
        }
    }
}

/// The tenant's side: `args` are DEVICE CHANNEL SIZE MAP. Prints `ready
/// OWN_BYTES MAPPED_BYTES`, then holds until stdin ends.
pub fn main(args: &[String]) -> Result<(), String> {
    let n = |i: usize| -> Result<u64, String> {
        args.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("tenant: bad arguments {args:?}"))
    };
    let d = Device::open(n(0)? as u32).map_err(|e| e.to_string())?;
    let blob = Plan::new(0, 0)
        .with(Record::input(1, n(2)?))
        .to_blob()
        .map_err(|e| e.to_string())?;
    let plan = d
        .load(&blob, n(1)? as u32)
        .map_err(|e| format!("PLAN_LOAD: {e}"))?;
    let mapping = if n(3)? == 1 {
        Some(plan.map(1).map_err(|e| format!("map: {e}"))?)
    } else {
        None
    };
    let own = d
        .mem_stats()
        .map_err(|e| format!("MEM_STATS: {e}"))?
        .own_bytes;
    let mapped = mapping.as_ref().map_or(0, |m| m.len());
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {own} {mapped}")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    Ok(())
}
