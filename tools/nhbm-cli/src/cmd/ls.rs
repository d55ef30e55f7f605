//! `nhbm ls`: every device node with its address, arch, state, HBM size
//! and use, and the processes holding it, as AWS's `neuron-ls` lists them.

use anyhow::Result;

use crate::census::{self, Census, DeviceCensus};
use crate::fmt;

/// Lists the devices (device `only`, when named) once.
pub fn run(only: Option<u32>, json: bool) -> Result<()> {
    let c = census::take().only(only);
    if json {
        println!("{}", serde_json::to_string(&c)?);
    } else {
        print!("{}", text(&c));
    }
    Ok(())
}

/// The table `ls` prints, then what could not be seen.
pub fn text(c: &Census) -> String {
    let rows: Vec<Vec<String>> = c.devices.iter().map(row).collect();
    let mut out = fmt::table(
        &[
            "device",
            "address",
            "arch",
            "state",
            "hbm used",
            "hbm total",
            "processes",
        ],
        &rows,
        &[4, 5],
    );
    if c.devices.is_empty() {
        out.push_str("no neuron_hbm device (is the module loaded? modprobe neuron_hbm)\n");
    }
    for note in c.unseen() {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// One device's row.
fn row(d: &DeviceCensus) -> Vec<String> {
    let (used, exact) = d.used_bytes();
    let procs: Vec<String> = d
        .processes
        .iter()
        .map(|p| {
            let user = p.user.clone().unwrap_or_else(|| p.uid.to_string());
            format!("{} {} ({user})", p.pid, p.command)
        })
        .collect();
    vec![
        d.name(),
        d.address(),
        format!("v{}", d.arch),
        d.state.as_str().to_string(),
        format!("{}{}", if exact { "" } else { ">= " }, fmt::bytes(used)),
        d.total_bytes().map_or_else(|| "?".to_string(), fmt::bytes),
        if procs.is_empty() {
            "-".to_string()
        } else {
            procs.join(", ")
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::sample;

    #[test]
    fn each_device_has_a_row_with_its_holders() {
        let t = text(&sample::census());
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("device       address       arch  state"),
            "{t}"
        );
        assert!(
            lines[1].starts_with("neuron_hbm0  sim:0         v2    ready"),
            "{t}"
        );
        assert!(lines[1].contains("52.0 MiB   32.0 GiB"), "{t}");
        assert!(
            lines[1].ends_with("4242 tenant \"a\" (alice), 4343 tenant-b (1001)"),
            "{t}"
        );
        assert!(
            lines[2].starts_with("neuron_hbm1  0000:00:1e.0  v3    no_access"),
            "{t}"
        );
        assert!(lines[2].ends_with("?  -"), "{t}");
        assert!(t.contains("note: 3 processes of other users"), "{t}");
    }
}
