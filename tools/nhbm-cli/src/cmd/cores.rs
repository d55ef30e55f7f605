//! `nhbm cores`: which open file of the device owns which NeuronCores.

use anyhow::Result;
use serde_json::json;

use crate::device::Session;

/// Prints every core's owner: the process that claimed it (as this pid
/// namespace numbers it), none, or one not visible here.
pub fn run(s: &Session) -> Result<()> {
    let info = s.io("DEVICE_INFO", s.dev.device_info())?;
    let o = s.io("CORES", s.dev.cores(0, 0))?;
    let cores = (0..info.nr_cores as usize).map(|c| {
        let taken = o.taken & 1 << c != 0;
        let pid = o.owner_pid.get(c).copied().unwrap_or(0);
        (c, taken, pid)
    });
    if s.json {
        let list: Vec<_> = cores
            .map(|(c, taken, pid)| {
                json!({"core": c, "owned": taken, "pid": if pid != 0 { Some(pid) } else { None }})
            })
            .collect();
        println!("{}", json!({ "cores": list }));
        return Ok(());
    }
    println!("core  owner");
    for (c, taken, pid) in cores {
        let owner = match (taken, pid) {
            (false, _) => "-".to_string(),
            (true, 0) => "a process not visible here".to_string(),
            (true, p) => format!("pid {p}"),
        };
        println!("{c:>4}  {owner}");
    }
    Ok(())
}
