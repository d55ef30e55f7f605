//! `nhbm reset`: reset the device, or only some of its NeuronCores.

use anyhow::{anyhow, Result};
use nhbm::uapi::{RESET_DEVICE, RESET_TPB};
use serde_json::json;

use crate::device::Session;

/// Resets the whole device, or the NeuronCores of map `tpb`, claimed
/// first (CORES) so that the reset is allowed beside other open files;
/// `EBUSY` when another file owns one of them. The claim ends with the
/// command.
pub fn run(s: &Session, tpb: Option<u32>) -> Result<()> {
    let (ty, map) = match tpb {
        Some(m) => (RESET_TPB, m),
        None => (RESET_DEVICE, 0),
    };
    if ty == RESET_TPB {
        s.io("CORES (claiming the cores to reset)", s.dev.cores(map, 0))?;
    }
    let status = s.io("RESET", s.dev.reset(ty, map))?;
    if status != 0 {
        return Err(anyhow!(
            "RESET: the device reported {}",
            nhbm::errno_name(-status)
        ));
    }
    if s.json {
        println!(
            "{}",
            json!({"reset": if tpb.is_some() { "tpb" } else { "device" }, "status": status})
        );
    } else {
        println!("reset done");
    }
    Ok(())
}
