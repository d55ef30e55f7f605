//! `nhbm-stress-test` (suite `nhbm_stress`): isolation between open files,
//! fault injection over every injection point of a load, a transfer, an
//! unload and a close, and several processes and threads on both devices
//! at once.
//!
//!   nhbm-stress-test [-d N] [--seconds T] [--procs P] [--seed S] [--list] [NAME...]
//!
//! The cases are the `pub fn`s of the modules below, run in the order these
//! are declared (see the crate's documentation): isolation, fault
//! injection, then the load.

mod isolation;
mod tenancy;

mod mapping;
mod revocation;

mod faults;

mod concurrency;

mod child;

use nhbm::cli::num;

pub use concurrency::{set_load, Load};
pub use tenancy::owners_reset_their_own_cores;

use crate::ktap::Case;
use crate::suite::{device_opens, CaseArgs, Suite};

/// The suite `nhbm_stress`.
pub const SUITE: Suite = Suite {
    name: "nhbm_stress",
    unit: "tests",
    cases: include!(concat!(env!("OUT_DIR"), "/stress_cases.rs")),
    ready: device_opens,
};

/// The command line of nhbm-stress-test.
#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "nhbm-stress-test",
    about = "Isolation, fault injection (debugfs fail_nth) and concurrency tests of \
             /dev/neuron_hbmN and N+1 (default N = 0), printed as KTAP (suite nhbm_stress)"
)]
pub struct Args {
    /// The device, `--list` and the case filters.
    #[command(flatten)]
    pub cases: CaseArgs,
    /// Length of the concurrency phase
    #[arg(short = 't', long, default_value_t = Load::default().seconds, value_parser = num::<u64>)]
    pub seconds: u64,
    /// Processes of the concurrency phase (1..64)
    #[arg(long, default_value_t = Load::default().procs, value_parser = num::<usize>)]
    pub procs: usize,
    /// The seed
    #[arg(long, default_value_t = Load::default().seed, value_parser = num::<u64>)]
    pub seed: u64,
}

impl Args {
    /// The knobs of the concurrency test.
    pub fn load(&self) -> Load {
        Load {
            seconds: self.seconds,
            procs: self.procs,
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        use clap::Parser;
        let parse =
            |v: &[&str]| Args::try_parse_from(std::iter::once("stress").chain(v.iter().copied()));
        let d = parse(&[]).unwrap();
        assert_eq!((d.seconds, d.procs, d.seed), (20, 4, 0x5354_5245_5353));
        assert_eq!(d.cases.device.index().unwrap(), 0);
        let a = parse(&["--seconds", "5", "--procs", "2", "-d", "1", "fault"]).unwrap();
        assert_eq!(
            (a.seconds, a.procs, a.cases.device.index().unwrap()),
            (5, 2, 1)
        );
        assert_eq!(a.cases.filters, vec!["fault".to_string()]);
        assert!(parse(&["--nope"]).is_err());
    }

    #[test]
    fn the_load_runs_last() {
        let names: Vec<&str> = SUITE.cases.iter().map(|c| c.name).collect();
        assert_eq!(names[0], "device_nodes_are_mode_0660");
        assert_eq!(
            names.last().unwrap(),
            &"processes_and_threads_on_both_devices"
        );
    }
}
