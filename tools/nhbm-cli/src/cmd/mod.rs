//! The subcommands of `nhbm`, one module each.

pub mod cores;
pub mod demo;
pub mod generate;
pub mod info;
pub mod load;
pub mod ls;
pub mod monitor;
pub mod plan;
pub mod read;
pub mod reset;
pub mod resolve;
pub mod session;
pub mod share;
pub mod stats;
pub mod top;
pub mod validate;
pub mod write;
