//! The command line of `nhbm`, declared with clap.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use nhbm::cli::{num, DeviceArg, DeviceNode};
use nhbm::uapi::CHANNEL_ANY;
use nhbm_planner::MemoryPlannerType;

/// Plan, stage, resolve and inspect neuron_hbm devices.
#[derive(Parser, Debug)]
#[command(
    name = "nhbm",
    after_help = "PLAN is a blob (as `plan` writes) or its JSON form. A file named *.hbmN.* \
                  loads on channel N unless --channel says otherwise."
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
    Write(VarArgs),
    /// Reset the device (or NeuronCores)
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
}

/// The options of `plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The model: a description (JSON) or an ONNX model (*.onnx)
    pub model: PathBuf,
    /// The planner (default: the model's own choice)
    #[arg(long)]
    pub planner: Option<MemoryPlannerType>,
    /// Planner iterations
    #[arg(long, value_parser = num::<u32>)]
    pub iterations: Option<u32>,
    /// Planner seed
    #[arg(long, value_parser = num::<u64>)]
    pub seed: Option<u64>,
    /// Iterations without progress before the planner stops
    #[arg(long, value_parser = num::<u32>)]
    pub max_stall: Option<u32>,
    /// The exact planner's time budget in milliseconds (default 10000)
    #[arg(long, value_name = "MS", value_parser = num::<u64>)]
    pub time_budget: Option<u64>,
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

/// How `plan` writes its plans.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanFormat {
    /// The blob PLAN_LOAD takes
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

impl VarArgs {
    /// The operands after VAR.
    pub fn rest_args(&self) -> Vec<&str> {
        self.rest.iter().map(String::as_str).collect()
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
        let Cmd::Write(v) = c.cmd else { panic!() };
        assert_eq!((v.var.as_str(), v.rest.len()), ("fc1.out", 2));
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
    fn bad_command_lines_are_refused() {
        assert!(cli(&[]).is_err());
        assert!(cli(&["load", "p", "--bogus"]).is_err());
        assert!(cli(&["plan", "m.json", "-d", "0", "--arch", "v3"]).is_err());
        assert!(cli(&["plan", "m.json", "--seed"]).is_err());
        assert!(cli(&["plan", "m.json", "--format", "xml"]).is_err());
        assert!(cli(&["load", "p", "--channel", "two"]).is_err());
    }
}
