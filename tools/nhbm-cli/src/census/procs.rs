//! The processes holding a device: every `/proc/PID/fd` link to a device
//! node, that file's fdinfo, the process's maps of the node, its user,
//! command and pid namespace. A process whose files the caller may not
//! read (another user's, without root) is counted as hidden.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use super::facts::{DeviceCensus, Holder};
use super::fdinfo;

/// What one pass over `/proc` found.
pub struct Scan {
    /// Processes whose open files could not be read.
    pub hidden: u32,
    /// (device index, holder) for every process holding a device.
    holders: Vec<(u32, Holder)>,
}

impl Scan {
    /// The holders of device `index`, each with `channels` channels.
    pub fn holders_of(&self, index: u32, channels: usize) -> Vec<Holder> {
        self.holders
            .iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, h)| {
                let mut h = h.clone();
                h.hbm_bytes.resize(channels.max(h.hbm_bytes.len()), 0);
                h
            })
            .collect()
    }
}

/// Looks at every process for open files of `devices`' nodes.
pub fn scan(devices: &[DeviceCensus]) -> Scan {
    let mut s = Scan {
        hidden: 0,
        holders: Vec::new(),
    };
    let own_ns = fs::read_link("/proc/self/ns/pid").ok();
    let Ok(entries) = fs::read_dir("/proc") else {
        return s;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let proc_dir = e.path();
        match held(&proc_dir, devices) {
            Ok(files) => {
                for (index, usage) in files {
                    if let Some(h) = holder(&proc_dir, pid, &devices[index], &usage, &own_ns) {
                        s.holders.push((devices[index].index, h));
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::PermissionDenied && !is_kernel_thread(&proc_dir) => {
                s.hidden += 1;
            }
            Err(_) => {}
        }
    }
    s
}

/// A process's open files of each device (by position in `devices`): the
/// fdinfo of each file, duplicates (one drm-client-id) once.
fn held(
    proc_dir: &Path,
    devices: &[DeviceCensus],
) -> std::io::Result<BTreeMap<usize, Vec<fdinfo::FileUsage>>> {
    let mut out: BTreeMap<usize, Vec<fdinfo::FileUsage>> = BTreeMap::new();
    let mut clients = HashSet::new();
    for fd in fs::read_dir(proc_dir.join("fd"))?.flatten() {
        let Ok(target) = fs::read_link(fd.path()) else {
            continue;
        };
        let Some(i) = devices.iter().position(|d| d.node == target) else {
            continue;
        };
        let info = fs::read_to_string(proc_dir.join("fdinfo").join(fd.file_name()));
        let Some(usage) = info.ok().as_deref().and_then(fdinfo::parse) else {
            continue;
        };
        if clients.insert(usage.client_id) {
            out.entry(i).or_default().push(usage);
        }
    }
    Ok(out)
}

/// The holder that process `pid` is of device `d`, through `files`.
fn holder(
    proc_dir: &Path,
    pid: u32,
    d: &DeviceCensus,
    files: &[fdinfo::FileUsage],
    own_ns: &Option<std::path::PathBuf>,
) -> Option<Holder> {
    let status = fs::read_to_string(proc_dir.join("status")).ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())?;
    let command = fs::read_to_string(proc_dir.join("comm")).ok()?;
    let ns = fs::read_link(proc_dir.join("ns/pid")).ok();
    let mut hbm_bytes: Vec<u64> = Vec::new();
    for f in files {
        if hbm_bytes.len() < f.hbm_bytes.len() {
            hbm_bytes.resize(f.hbm_bytes.len(), 0);
        }
        for (sum, b) in hbm_bytes.iter_mut().zip(&f.hbm_bytes) {
            *sum += b;
        }
    }
    Some(Holder {
        pid,
        command: command.trim_end().to_string(),
        uid,
        user: uzers::get_user_by_uid(uid).map(|u| u.name().to_string_lossy().into_owned()),
        pid_namespace: ns.filter(|n| Some(n) != own_ns.as_ref()).and_then(|n| {
            let s = n.to_str()?;
            s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        }),
        files: files.len() as u32,
        hbm_bytes,
        plans: None,
        mapped_bytes: mapped(proc_dir, &d.node),
    })
}

/// Bytes of `node` mapped into the process (`/proc/PID/maps`).
fn mapped(proc_dir: &Path, node: &Path) -> u64 {
    let Ok(maps) = fs::read_to_string(proc_dir.join("maps")) else {
        return 0;
    };
    let node = node.to_string_lossy();
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            (f.nth(4)? == node).then_some(())?;
            let (a, b) = range.split_once('-')?;
            let len = u64::from_str_radix(b, 16).ok()? - u64::from_str_radix(a, 16).ok()?;
            Some(len)
        })
        .sum()
}

/// Whether `proc_dir` is a kernel thread's, which hold no files.
fn is_kernel_thread(proc_dir: &Path) -> bool {
    fs::read_to_string(proc_dir.join("status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.replace(char::is_whitespace, "") == "Kthread:1")
    })
}
