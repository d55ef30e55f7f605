//! nhbm: plan, stage, resolve and inspect neuron_hbm devices.
//!
//! Plans belong to the open file that loaded them and are freed when it is
//! closed, so every command that stages a plan (load, resolve, read, write)
//! does its work within one run; `session` runs a script of commands against
//! one open file.
//!
//! This file only dispatches: each subcommand is a module of [`cmd`];
//! failures and their exit statuses are [`error`]'s.

#![warn(clippy::too_many_lines)]

mod args;
mod census;
mod cmd;
mod device;
mod error;
mod fmt;
mod metrics_server;
mod progress;
mod prometheus;
mod sniff;
mod svg;
mod top_view;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Cmd};
use device::Session;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return error::usage(&e, &args),
    };
    let json = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => error::report(&e, json),
    }
}

/// Runs the subcommand `cli` names; all but `plan`, `validate`, the
/// generators and the host-wide views (`ls`, `monitor`, `top`) on the
/// device, opened first.
fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    let mut s = match &cli.cmd {
        Cmd::Plan(p) => return cmd::plan::run(p, &cli.device, json),
        Cmd::Validate { plan } => return cmd::validate::run(plan, &cli.device, json),
        Cmd::Completions { shell } => {
            return cmd::generate::completions(*shell, &mut std::io::stdout())
        }
        Cmd::Manpage => return cmd::generate::manpage(&mut std::io::stdout()),
        Cmd::Ls => return cmd::ls::run(cli.device.device.as_ref().and_then(|d| d.index), json),
        Cmd::Monitor(m) => {
            return cmd::monitor::run(m, cli.device.device.as_ref().and_then(|d| d.index))
        }
        Cmd::Top { interval } => {
            return cmd::top::run(*interval, cli.device.device.as_ref().and_then(|d| d.index))
        }
        // `demo DEVICE` names the device positionally.
        Cmd::Demo {
            device: Some(d), ..
        } => Session::open(&d.path, json)?,
        _ => Session::open(&cli.device.node().path, json)?,
    };
    match cli.cmd {
        Cmd::Info => cmd::info::run(&s),
        Cmd::Stats => cmd::stats::run(&s),
        Cmd::Cores => cmd::cores::run(&s),
        Cmd::Reset { tpb } => cmd::reset::run(&s, tpb),
        Cmd::Load {
            plan,
            channel,
            verify,
            hold,
        } => cmd::load::run(&mut s, &plan, channel.channel, verify, hold),
        Cmd::Resolve(v) => cmd::resolve::run(&mut s, &v),
        Cmd::Read(v) => cmd::read::run(&mut s, &v),
        Cmd::Write(w) => cmd::write::run(&mut s, &w),
        Cmd::Session { file } => cmd::session::run(&mut s, file.as_deref()),
        Cmd::Demo { model_dir, .. } => cmd::demo::run(&mut s, model_dir.as_deref()),
        Cmd::Plan(_)
        | Cmd::Validate { .. }
        | Cmd::Completions { .. }
        | Cmd::Manpage
        | Cmd::Ls
        | Cmd::Monitor(_)
        | Cmd::Top { .. } => {
            unreachable!("handled above")
        }
    }
}
