//! `nhbm-uapi-test` (suite `nhbm_uapi`): every neuron_hbm ioctl through the
//! real device nodes, with the module loaded as `sim_devices=2 sim_arch=2`
//! (the cross-device cases use the device under test and the next one).
//!
//!   nhbm-uapi-test [-d N] [--list] [NAME_SUBSTRING...]
//!
//! The cases are the `pub fn`s of the modules below, run in the order these
//! are declared (see the crate's documentation): what succeeds, what is
//! refused, limits and stalls, killed processes, then the 12 GiB plan.

use crate::ktap::Case;
use crate::suite::{device_opens, Suite};

mod backings;
mod cases;
pub use backings::sharded_and_main_scratch_load_resolve_and_move_bytes;
mod fdinfo;
mod library_resolve;
mod planner;
mod trace;

mod reject;

mod mapping;
mod sharing;
pub use sharing::imports_read_the_exporters_bytes_and_write_none;

mod charges;
pub use charges::small_aligned_buffers_take_their_own_pages;
mod limits;
mod uffd;

mod killed;

mod sparse;

/// The suite `nhbm_uapi`.
pub const SUITE: Suite = Suite {
    name: "nhbm_uapi",
    unit: "cases",
    cases: include!(concat!(env!("OUT_DIR"), "/uapi_cases.rs")),
    ready: device_opens,
};
