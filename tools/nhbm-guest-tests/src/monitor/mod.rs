//! `nhbm-monitor-test` (suite `nhbm_monitor`): `nhbm ls`, `nhbm monitor`
//! and `nhbm top` while two tenants, child processes of this program, hold
//! plans on `/dev/neuron_hbm0`: one on channel 0 with its input mapped,
//! one on channel 1. Their figures must equal MEM_STATS and the tenants'
//! fdinfo, the Prometheus text must parse line by line, `nhbm top` must
//! draw both on an 80x24 pseudo-terminal, an unprivileged user must be told
//! what it cannot see, and a tenant's exit must show within one interval.
//!
//!   nhbm-monitor-test

mod cases;
mod world;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::ktap::{catch, Fail, Ktap, Notes, Outcome};
use crate::tenant::Tenant;
use world::{Case, World, DEVICE};

/// The suite's name in KTAP.
const SUITE: &str = "nhbm_monitor";

/// Runs `cases` against `w` as the KTAP suite.
fn run(w: &mut World, cases: &[Case]) -> bool {
    let mut out = std::io::stdout().lock();
    let mut k = Ktap::begin(&mut out, SUITE, cases.len());
    for (name, case) in cases {
        let t = Instant::now();
        let mut notes = Notes::default();
        let outcome = match catch(|| case(w, &mut notes)) {
            Ok(()) => Outcome::Pass,
            Err(Fail::Skip(why)) => Outcome::Skip(why),
            Err(Fail::Fail(why)) => Outcome::Fail(why),
        };
        notes.add(format!("{name} took {} ms", t.elapsed().as_millis()));
        k.result(name, &outcome, &notes.0);
    }
    k.end()
}

/// The program: `--tenant ...` is a tenant's side; otherwise the suite,
/// exit status 0 when every case passed.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--as") {
        println!("{}", crate::as_user::main(&args[2..]));
        return 1;
    }
    if args.get(1).map(String::as_str) == Some("--tenant") {
        return match crate::tenant::main(&args[2..]) {
            Ok(()) => 0,
            Err(e) => {
                println!("tenant failed: {e}");
                1
            }
        };
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(&args[0]));
    let nhbm = exe.parent().unwrap_or(Path::new(".")).join("nhbm");
    let world = Tenant::spawn(&exe, DEVICE, 0, 4 << 20, true)
        .and_then(|a| Ok((a, Tenant::spawn(&exe, DEVICE, 1, 2 << 20, false)?)));
    let mut w = match world {
        Ok((a, b)) => World { exe, nhbm, a, b },
        Err(e) => {
            let mut out = std::io::stdout().lock();
            let mut k = Ktap::begin(&mut out, SUITE, 1);
            k.result(
                "two_tenants_hold_plans",
                &Outcome::Fail(e.into_message()),
                &[],
            );
            k.end();
            return 1;
        }
    };
    i32::from(!run(&mut w, cases::CASES))
}
