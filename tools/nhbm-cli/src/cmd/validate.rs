//! `nhbm validate`: check a plan file against the kernel's rules.

use anyhow::{anyhow, Result};
use nhbm::cli::DeviceArg;
use nhbm::{Device, Limits, Plan};
use serde_json::json;

use crate::fmt;

/// Checks the plan file at `path`; with the device at hand, against its
/// SBUF size and core count too.
pub fn run(path: &str, device: &DeviceArg, json: bool) -> Result<()> {
    // With a device at hand, its SBUF size and core count are checked too.
    let limits = Device::open_path(device.node().path)
        .map_err(std::io::Error::from)
        .and_then(|d| d.device_info())
        .map(|i| Limits::from_device_info(&i))
        .unwrap_or_default();
    let plan = read_plan(path, &limits)?;
    let size = plan.to_blob()?.len();
    if json {
        println!(
            "{}",
            json!({"file": path, "valid": true, "records": plan.records.len(), "blob_bytes": size})
        );
    } else {
        println!(
            "{path}: valid, {} records, {} as a blob",
            plan.records.len(),
            fmt::bytes(size as u64)
        );
    }
    Ok(())
}

/// The plan in the file at `path`, a blob or its JSON form, checked against
/// `limits`.
pub fn read_plan(path: &str, limits: &Limits) -> Result<Plan> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{path}: {e}"))?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        let text = String::from_utf8(bytes).map_err(|e| anyhow!("{path}: {e}"))?;
        let plan = Plan::from_json(&text).map_err(|e| anyhow!("{path}: {e}"))?;
        plan.to_blob_for(limits)
            .map_err(|e| anyhow!("{path}: {e}"))?;
        Ok(plan)
    } else {
        Plan::from_blob_for(&bytes, limits).map_err(|e| anyhow!("{path}: {e}"))
    }
}
