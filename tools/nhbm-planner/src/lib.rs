//! Static memory planning for neuron_hbm.
//!
//! A model description ([`desc`]) names tensors and the operators that use
//! and define them. A planner ([`planner`]) places every tensor in an arena
//! of a device memory, reusing scratch space between tensors whose lifetimes
//! do not overlap. [`lower`] turns the resulting [`MemoryPlan`] into mem_ref
//! plans that `NHBM_IOC_PLAN_LOAD` stages.
//!
//! The default planner, exact, keeps the lowest of: greedy placements
//! (best fit and first fit in several orders, [`portfolio`]); for
//! memories of up to [`window::DIRECT_MAX`] tensors, a search
//! ([`exact`]) from hill_climb's packing; above that, a plan in windows
//! of time ([`window`]) and, where it is above the lower bound, iterated
//! greedy over the best greedy order ([`improve`]). MiniMalloc-format instances ([`minimalloc`]) and
//! generated ones ([`hard`], [`pinwheel`], [`llm`], [`schedules`]) test it.

pub mod bestfit;
pub mod desc;
pub mod exact;
pub mod hard;
pub mod improve;
pub mod llm;
pub mod lower;
pub mod minimalloc;
pub mod model;
pub mod orders;
pub mod pinwheel;
pub mod planner;
pub mod portfolio;
pub mod rng;
pub mod schedules;
mod search;
pub mod target;
pub mod window;

pub use desc::{synthetic_bytes, Model, ModelDesc, ModelError};
pub use exact::Stop;
pub use lower::{lower, var_ids, LoweredPlan};
pub use model::*;
pub use planner::{
    plan, plan_model, plan_with_outcome, plan_with_progress, ExactOutcome, PlanReport, PlannerError,
};
pub use target::{Target, TargetError};
