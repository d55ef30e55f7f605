//! `nhbm validate`: check a plan file against the kernel's rules.

use anyhow::{anyhow, Result};
use nhbm::cli::DeviceArg;
use nhbm::{Device, Limits, Plan, PlanError};
use serde_json::json;

use crate::error::Failure;
use crate::fmt;
use crate::sniff::{self, Content};

/// Checks the plan file at `path`; with the device at hand, against its
/// SBUF size and core count too.
pub fn run(path: &str, device: &DeviceArg, json: bool) -> Result<()> {
    // With a device at hand, its SBUF size and core count are checked too.
    let limits = Device::open_path(device.node().path)
        .ok()
        .and_then(|d| d.device_info().ok())
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
/// `limits`. A file that is no plan at all (a model, text, ...) is named
/// for what it is.
pub fn read_plan(path: &str, limits: &Limits) -> Result<Plan> {
    let bytes = std::fs::read(path).map_err(|e| anyhow::Error::new(e).context(path.to_string()))?;
    let content = sniff::content(path, &bytes);
    if let Some(msg) = sniff::not_a_plan(path, &content) {
        return Err(Failure::invalid(msg, None).into());
    }
    let invalid = |e: PlanError| Failure::invalid(format!("{path}: {e}"), Some(e.errno));
    if content == Content::PlanJson {
        let text = String::from_utf8(bytes).map_err(|e| anyhow!("{path}: {e}"))?;
        let plan = Plan::from_json(&text)
            .map_err(|e| Failure::invalid(format!("{path}: {e}"), Some(libc::EINVAL)))?;
        plan.to_blob_for(limits).map_err(invalid)?;
        Ok(plan)
    } else {
        Ok(Plan::from_blob_for(&bytes, limits).map_err(invalid)?)
    }
}
