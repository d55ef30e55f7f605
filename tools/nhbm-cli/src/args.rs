//! The command line of `nhbm`, declared with clap.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use nhbm::cli::{num, DeviceArg, DeviceNode};
use nhbm::uapi::CHANNEL_ANY;
use nhbm_planner::MemoryPlannerType;

use crate::error::EXIT_STATUS_HELP;

/// What `nhbm --help` says about plan files.
const PLAN_FILES_HELP: &str = "PLAN is a blob (as `plan` writes) or its JSON form. A file named \
                               *.hbmN.* loads on channel N unless --channel says otherwise.";

/// Plan, stage, resolve and inspect neuron_hbm devices.
#[derive(Parser, Debug)]
#[command(
    name = "nhbm",
    version,
    after_help = format!("{PLAN_FILES_HELP}\n\n{EXIT_STATUS_HELP}"),
)]
pub struct Cli {
    /// `-d N|PATH`: the device
    #[command(flatten)]
    pub device: DeviceArg,
    /// Print JSON instead of tables
    #[arg(short = 'j', long, global = true)]
    pub json: bool,
    /// The subcommand
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// What `nhbm` does.
#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Device geometry (DEVICE_INFO)
    Info,
    /// Pool usage per channel x region, with bars
    Stats,
    /// Every device node: address, arch, state, HBM size and use, and the
    /// processes holding it (-d N: that device only)
    Ls,
    /// The facts of `ls` every INTERVAL, as JSON lines or Prometheus's
    /// text format
    Monitor(MonitorArgs),
    /// A live view of the devices and the processes holding them, most HBM
    /// first; q quits
    Top {
        /// Seconds between refreshes
        #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = interval)]
        interval: f64,
    },
    /// Plan a model: arenas, high-water mark vs the liveness lower bound;
    /// writes PREFIX.hbmN.plan (or .plan.json), one per memory, for device
    /// -d N's channels and pools or an arch's module defaults (default v2)
    Plan(PlanArgs),
    /// Check a plan against the kernel's rules
    Validate {
        /// The plan file
        plan: String,
    },
    /// Stage a plan and show where each variable landed
    #[command(alias = "stage")]
    Load {
        /// The plan file
        plan: String,
        #[command(flatten)]
        channel: ChannelArg,
        /// Read every payload back
        #[arg(long)]
        verify: bool,
        /// Keep the plan loaded until stdin ends
        #[arg(long)]
        hold: bool,
    },
    /// Stage PLAN, resolve VAR (name or var_id) [OFFSET [SIZE]]
    Resolve(VarArgs),
    /// Stage PLAN, hex dump of VAR [OFFSET [LEN]]
    Read(VarArgs),
    /// Stage PLAN, write bytes to VAR (OFFSET HEX), read them back
    Write(WriteArgs),
    /// Which open file owns which NeuronCores
    Cores,
    /// Reset the device (or NeuronCores, claimed first for the reset)
    Reset {
        /// Reset only the NeuronCores of this map
        #[arg(long, value_name = "NC_MAP", value_parser = num::<u32>)]
        tpb: Option<u32>,
    },
    /// Run commands from FILE (or stdin) against one open file; `help`
    /// inside lists them
    Session {
        /// The script ("-" or none: stdin)
        file: Option<String>,
    },
    /// Plan the example models with each planner, stage them, check the
    /// uploaded bytes, unload, and show the pools back at their start
    Demo {
        /// The device (as -d)
        device: Option<DeviceNode>,
        /// Where the example models are (default: next to this program)
        model_dir: Option<String>,
    },
    /// Print a completion script for SHELL on stdout
    #[command(hide = true)]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout
    #[command(hide = true)]
    Manpage,
}

/// The options of `plan`.
#[derive(clap::Args, Debug, Default)]
pub struct PlanArgs {
    /// The model: a description (JSON), an ONNX model (*.onnx), or buffers
    /// in MiniMalloc's CSV format (`id,lower,upper,size`)
    pub model: PathBuf,
    /// The planner: exact, hill_climb, greedy_by_size or greedy [default:
    /// exact, which searches within --budget from hill_climb's packing]
    #[arg(long)]
    pub planner: Option<MemoryPlannerType>,
    /// Run every planner and compare them; the plans written are --planner's
    #[arg(long)]
    pub compare: bool,
    /// Planner iterations
    #[arg(long, value_parser = num::<u32>)]
    pub iterations: Option<u32>,
    /// Planner seed
    #[arg(long, value_parser = num::<u64>)]
    pub seed: Option<u64>,
    /// Iterations without progress before the planner stops
    #[arg(long, value_parser = num::<u32>)]
    pub max_stall: Option<u32>,
    /// The exact planner's budget in search nodes, over every memory: the
    /// same model, seed and budget give the same plan on any machine
    /// [default: the model's planner_options.node_budget, else 20000]
    #[arg(long, value_name = "NODES", value_parser = num::<u64>)]
    pub budget: Option<u64>,
    /// Wall-clock cap on the planner in milliseconds (hill_climb and exact,
    /// every stage), a safety net: a search it cuts short depends on the
    /// machine [default: the model's planner_options.time_budget_ms, else
    /// 10000]
    #[arg(long, value_name = "MS", value_parser = num::<u64>, alias = "time-budget")]
    pub time_limit: Option<u64>,
    /// Also write a picture of the placement (SVG): time across, offset up,
    /// one rectangle per scratch tensor, per memory
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// The shape of an ONNX graph input with symbolic dimensions (repeat
    /// for several inputs)
    #[cfg(feature = "onnx")]
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,...")]
    pub input_shapes: Vec<nhbm_onnx::InputShape>,
    /// Prefix of the files written (default: the model's name)
    #[arg(short = 'o', long = "output", value_name = "PREFIX")]
    pub output: Option<String>,
    /// Write blobs or their JSON form
    #[arg(long, value_enum, default_value = "blob")]
    pub format: PlanFormat,
    /// Plan for an arch's defaults instead of a device
    #[arg(long, value_name = "v2|v3|v4", conflicts_with = "device")]
    pub arch: Option<String>,
}

/// The options of `monitor`.
#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// Seconds between samples
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = interval)]
    pub interval: f64,
    /// Stop after N samples [default: never]
    #[arg(long, value_name = "N", value_parser = num::<u64>)]
    pub count: Option<u64>,
    /// Print Prometheus's text exposition format instead of JSON lines, an
    /// empty line after each sample
    #[arg(long)]
    pub prometheus: bool,
    /// Serve the Prometheus text at http://ADDR/metrics (a loopback
    /// address: 127.0.0.1:9464, [::1]:9464; port 0 picks one), a fresh
    /// sample per scrape, instead of printing
    #[arg(
        long,
        value_name = "ADDR",
        requires = "prometheus",
        conflicts_with = "count"
    )]
    pub listen: Option<std::net::SocketAddr>,
}

/// How `plan` writes its plans.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlanFormat {
    /// The blob PLAN_LOAD takes
    #[default]
    Blob,
    /// The JSON form of the plan
    Json,
}

/// `--channel N|any`.
#[derive(clap::Args, Debug, Default)]
pub struct ChannelArg {
    /// HBM channel to load on, or "any" (default: the file name's *.hbmN.*)
    #[arg(long = "channel", value_name = "N|any", value_parser = channel)]
    pub channel: Option<u32>,
}

/// The operands of `resolve`, `read` and `write`.
#[derive(clap::Args, Debug)]
pub struct VarArgs {
    /// The plan file
    pub plan: String,
    /// The variable: its name or var_id
    pub var: String,
    /// OFFSET, then SIZE / LEN / HEX
    pub rest: Vec<String>,
    /// `--channel N|any`
    #[command(flatten)]
    pub channel: ChannelArg,
}

/// The operands of `write`.
#[derive(clap::Args, Debug)]
pub struct WriteArgs {
    /// PLAN VAR OFFSET HEX
    #[command(flatten)]
    pub var: VarArgs,
    /// Store through an mmap of the variable instead of MEM_WRITE
    #[arg(long)]
    pub mmap: bool,
}

impl VarArgs {
    /// The operands after VAR.
    pub fn rest_args(&self) -> Vec<&str> {
        self.rest.iter().map(String::as_str).collect()
    }
}

/// A positive number of seconds, at most a day.
fn interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86400.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds in (0, 86400]")),
    }
}

fn channel(s: &str) -> Result<u32, nhbm::cli::BadNumber> {
    if s == "any" {
        Ok(CHANNEL_ANY)
    } else {
        num(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(v: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("nhbm").chain(v.iter().copied()))
    }

    #[test]
    fn the_command_lines_of_the_guest_tests_parse() {
        let c = cli(&["info", "--json", "-d", "1"]).unwrap();
        assert!(c.json);
        assert_eq!(c.device.index().unwrap(), 1);
        assert!(matches!(c.cmd, Cmd::Info));
        let c = cli(&["plan", "m.json", "--planner", "hill_climb", "-o", "out"]).unwrap();
        let Cmd::Plan(p) = c.cmd else { panic!() };
        assert_eq!(p.planner, Some(MemoryPlannerType::HillClimb));
        assert_eq!(p.output.as_deref(), Some("out"));
        assert_eq!(p.format, PlanFormat::Blob);
        let c = cli(&["plan", "m.json", "--format", "json", "--arch", "v3"]).unwrap();
        let Cmd::Plan(p) = c.cmd else { panic!() };
        assert_eq!(
            (p.format, p.arch.as_deref()),
            (PlanFormat::Json, Some("v3"))
        );
        let c = cli(&["stage", "p.plan", "--channel", "any", "--verify"]).unwrap();
        let Cmd::Load {
            channel, verify, ..
        } = c.cmd
        else {
            panic!()
        };
        assert_eq!((channel.channel, verify), (Some(CHANNEL_ANY), true));
        let c = cli(&["write", "p.json", "fc1.out", "8", "deadbeef"]).unwrap();
        let Cmd::Write(w) = c.cmd else { panic!() };
        assert!(!w.mmap);
        let v = w.var;
        assert_eq!((v.var.as_str(), v.rest.len()), ("fc1.out", 2));
        let c = cli(&["write", "--mmap", "p.json", "fc1.out", "8", "ab"]).unwrap();
        let Cmd::Write(w) = c.cmd else { panic!() };
        assert!(w.mmap);
        assert_eq!(w.var.rest_args(), ["8", "ab"]);
        let c = cli(&["reset", "--tpb", "0x3"]).unwrap();
        assert!(matches!(c.cmd, Cmd::Reset { tpb: Some(3) }));
        let c = cli(&["demo", "/dev/neuron_hbm0", "/tests"]).unwrap();
        let Cmd::Demo { device, model_dir } = c.cmd else {
            panic!()
        };
        assert_eq!(device.unwrap().index, Some(0));
        assert_eq!(model_dir.as_deref(), Some("/tests"));
    }

    #[test]
    fn plan_options_parse() {
        let c = cli(&[
            "plan",
            "m.json",
            "--budget",
            "50k",
            "--time-limit",
            "500",
            "--compare",
            "--svg",
            "p.svg",
        ])
        .unwrap();
        let Cmd::Plan(p) = c.cmd else { panic!() };
        assert_eq!(
            (p.budget, p.time_limit, p.compare),
            (Some(50 << 10), Some(500), true)
        );
        assert_eq!(p.svg, Some(PathBuf::from("p.svg")));
        assert_eq!(p.planner, None);
        // The old name of --time-limit still works.
        let c = cli(&["plan", "m.json", "--time-budget", "7"]).unwrap();
        let Cmd::Plan(p) = c.cmd else { panic!() };
        assert_eq!(p.time_limit, Some(7));
    }

    #[cfg(feature = "onnx")]
    #[test]
    fn input_shapes_repeat() {
        let c = cli(&[
            "plan",
            "m.onnx",
            "--input-shape",
            "x=2,3",
            "--input-shape",
            "y=4",
        ])
        .unwrap();
        let Cmd::Plan(p) = c.cmd else { panic!() };
        let got: Vec<String> = p.input_shapes.iter().map(ToString::to_string).collect();
        assert_eq!(got, ["x=2,3", "y=4"]);
        assert!(cli(&["plan", "m.onnx", "--input-shape", "x"]).is_err());
    }

    #[test]
    fn version_and_help() {
        let e = cli(&["--version"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
        assert!(e.to_string().contains(env!("CARGO_PKG_VERSION")));
        assert_eq!(
            cli(&["-V"]).unwrap_err().kind(),
            clap::error::ErrorKind::DisplayVersion
        );
        let help = cli(&["--help"]).unwrap_err().to_string();
        assert!(
            help.contains("Exit status:") && help.contains("5  invalid input"),
            "{help}"
        );
        // The generators are there, but not listed.
        assert!(
            !help.contains("completions") && !help.contains("manpage"),
            "{help}"
        );
        assert!(matches!(
            cli(&["completions", "bash"]).unwrap().cmd,
            Cmd::Completions { .. }
        ));
        assert!(cli(&["completions", "tcsh"]).is_err());
    }

    #[test]
    fn the_watching_commands_parse() {
        assert!(matches!(cli(&["ls", "--json"]).unwrap().cmd, Cmd::Ls));
        let c = cli(&[
            "monitor",
            "--interval",
            "0.5",
            "--count",
            "3",
            "--prometheus",
        ])
        .unwrap();
        let Cmd::Monitor(m) = c.cmd else { panic!() };
        assert_eq!((m.interval, m.count, m.prometheus), (0.5, Some(3), true));
        let Cmd::Monitor(m) = cli(&["monitor"]).unwrap().cmd else {
            panic!()
        };
        assert_eq!((m.interval, m.count, m.prometheus), (1.0, None, false));
        let c = cli(&["monitor", "--prometheus", "--listen", "127.0.0.1:9464"]).unwrap();
        let Cmd::Monitor(m) = c.cmd else { panic!() };
        assert_eq!(m.listen, Some("127.0.0.1:9464".parse().unwrap()));
        // Only Prometheus's text is served, and it is never counted.
        assert!(cli(&["monitor", "--listen", "127.0.0.1:9464"]).is_err());
        assert!(cli(&[
            "monitor",
            "--prometheus",
            "--listen",
            "[::1]:1",
            "--count",
            "1"
        ])
        .is_err());
        let c = cli(&["top", "--interval", "2"]).unwrap();
        assert!(matches!(c.cmd, Cmd::Top { interval } if interval == 2.0));
        for bad in ["0", "-1", "x", "1e9"] {
            assert!(cli(&["monitor", "--interval", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_command_lines_are_refused() {
        assert!(cli(&[]).is_err());
        assert!(cli(&["load", "p", "--bogus"]).is_err());
        assert!(cli(&["plan", "m.json", "-d", "0", "--arch", "v3"]).is_err());
        assert!(cli(&["plan", "m.json", "--seed"]).is_err());
        assert!(cli(&["plan", "m.json", "--format", "xml"]).is_err());
        assert!(cli(&["load", "p", "--channel", "two"]).is_err());
    }
}
