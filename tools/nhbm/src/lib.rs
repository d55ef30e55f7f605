//! Userspace side of neuron_hbm: the UAPI of `include/uapi/linux/neuron_hbm.h`,
//! safe wrappers for its ioctls, and the mem_ref plan blob (builder, parser
//! with the kernel's validation rules, JSON form).

pub mod blob;
#[cfg(feature = "cli")]
pub mod cli;
pub mod device;
pub mod error;
pub mod plan;
pub mod resolve;
pub mod uapi;
pub mod validate;

pub use blob::RawPlan;
pub use device::{device_path, Device, LoadedPlan};
pub use error::{errno_name, io_errno_name, PlanError};
pub use plan::{Backing, Kind, Plan, Record};
pub use resolve::Resolver;
pub use validate::{validate, Limits};
