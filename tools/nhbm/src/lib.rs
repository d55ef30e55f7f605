//! Userspace side of neuron_hbm: the UAPI of `include/uapi/linux/neuron_hbm.h`,
//! safe wrappers for its ioctls, and the mem_ref plan blob (builder, parser
//! with the kernel's validation rules, JSON form).
//!
//! A runtime opens a device, stages a plan once, and from then on resolves
//! addresses and moves bytes:
//!
//! ```no_run
//! use nhbm::{uapi::CHANNEL_ANY, Device, Plan, Record, Resolver};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Checks that the module speaks this library's UAPI version.
//!     let dev = Device::open(0)?;
//!     let plan = Plan::new(0, 0)
//!         .with(Record::input(1, 4096))
//!         .with(Record::output(2, 4096));
//!     // Unloaded when `loaded` is dropped.
//!     let loaded = dev.load(&plan.to_blob()?, CHANNEL_ANY)?;
//!     let pa = loaded.resolve(1, 256, 16)?;
//!     // The same answer without a system call.
//!     let resolver = Resolver::new(&plan, loaded.loaded(), |_, _| None)?;
//!     assert_eq!(resolver.resolve(1, 256, 16)?, pa);
//!     loaded.write(1, 0, &[7u8; 4096])?;
//!     let mut back = vec![0u8; 4096];
//!     loaded.read(1, 0, &mut back)?;
//!     assert!(back.iter().all(|&b| b == 7));
//!     Ok(())
//! }
//! ```

#![deny(missing_docs)]

pub mod blob;
#[cfg(feature = "cli")]
pub mod cli;
pub mod device;
pub mod error;
pub mod plan;
pub mod resolve;
pub mod share;
pub mod uapi;
pub mod validate;

pub use blob::RawPlan;
pub use device::{
    device_path, CoreOwners, Device, Imported, LoadedPlan, Mapping, OpenError, OpenErrorKind,
    PlanHandle, ReadMapping,
};
pub use error::{errno_name, io_errno, io_errno_name, PlanError};
pub use plan::{Backing, Kind, Plan, Record};
pub use resolve::Resolver;
pub use validate::{validate, Limits};
