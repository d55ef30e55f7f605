//! Who holds what on every neuron_hbm device: the facts `nhbm ls`,
//! `nhbm monitor` and `nhbm top` show, gathered without any privileged
//! ioctl. Devices come from sysfs and their own DEVICE_INFO and MEM_STATS
//! ([`devices`]); the processes holding them from `/proc/PID/fd`, their
//! fdinfo's drm-usage-stats keys and their maps ([`procs`]); the plans
//! each process loaded from debugfs, where the caller may read it
//! ([`debugfs`]). What the caller may not see is recorded in [`Seen`],
//! never an error.

mod debugfs;
mod devices;
mod facts;
mod fdinfo;
mod procs;

pub use facts::{Census, DeviceCensus, DeviceState, Holder, Seen};

/// Looks at every device and every process once.
pub fn take() -> Census {
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut seen = Seen::default();
    let mut devices = devices::list(&mut seen);
    // After the nodes were asked and closed, so that this program's own
    // files are not among the holders.
    let scan = procs::scan(&devices);
    seen.hidden_processes = scan.hidden;
    let plans = debugfs::plans_by_pid(&devices);
    seen.plans = plans.is_some();
    for d in &mut devices {
        let mut holders = scan.holders_of(d.index, d.channels.len());
        for h in &mut holders {
            h.plans = plans.as_ref().map(|p| p.count(d.index, h.pid));
        }
        holders.sort_by(|a, b| b.hbm_total().cmp(&a.hbm_total()).then(a.pid.cmp(&b.pid)));
        d.processes = holders;
    }
    Census {
        timestamp,
        devices,
        seen,
    }
}

#[cfg(test)]
pub mod sample;
