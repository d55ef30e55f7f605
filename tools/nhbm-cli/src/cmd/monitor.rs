//! `nhbm monitor`: the facts of `nhbm ls` every interval, as one JSON
//! object a line or in Prometheus's text exposition format, for metric
//! collectors (or served over HTTP, [`crate::metrics_server`]).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::args::MonitorArgs;
use crate::census;
use crate::metrics_server;
use crate::prometheus;

/// Prints a sample every `a.interval` seconds, `a.count` times or until
/// stdout is closed; or serves them with `--listen`.
pub fn run(a: &MonitorArgs, only: Option<u32>) -> Result<()> {
    if let Some(addr) = a.listen {
        return metrics_server::serve(addr, only);
    }
    let interval = Duration::from_secs_f64(a.interval);
    let mut out = std::io::stdout().lock();
    let mut next = Instant::now();
    let mut n = 0;
    while a.count.is_none_or(|c| n < c) {
        let c = census::take().only(only);
        let written = if a.prometheus {
            writeln!(out, "{}", prometheus::render(&c))
        } else {
            writeln!(out, "{}", serde_json::to_string(&c)?)
        };
        if written.and_then(|()| out.flush()).is_err() {
            // The reader went away (`| head`): done.
            return Ok(());
        }
        n += 1;
        next += interval;
        if a.count.is_none_or(|c| n < c) {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
    Ok(())
}
