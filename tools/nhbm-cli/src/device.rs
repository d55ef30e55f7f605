//! One open device file: its DEVICE_INFO and the plans loaded through it.
//!
//! Plans belong to the open file that loaded them, so every command that
//! stages a plan does its work through one `Session`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use nhbm::cli::parse_num;
use nhbm::uapi::DeviceInfo;
use nhbm::{Device, Plan};

use crate::error::Failure;

/// An open device file and what was loaded through it.
pub struct Session {
    /// The open device.
    pub dev: Device,
    /// The device node it was opened as.
    pub path: PathBuf,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Stage without listing where each variable landed.
    pub quiet: bool,
    /// The device's DEVICE_INFO, read at open.
    pub info: DeviceInfo,
    /// The plans loaded here, by plan id.
    pub plans: HashMap<u32, Plan>,
    /// The plan loaded (or imported) most recently (`last` in a session).
    pub last: Option<u32>,
    /// The sockets this session serves exported plans on.
    pub served: Vec<Served>,
}

/// A socket a session serves an exported plan on (`export`), removed when
/// the session ends.
pub struct Served {
    /// Where the socket is bound.
    pub path: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Session {
    /// Opens the device node at `path` and reads its DEVICE_INFO.
    pub fn open(path: &Path, json: bool) -> Result<Session> {
        let dev = open_device(path)?;
        let info = dev
            .device_info()
            .map_err(|e| Failure::refused("DEVICE_INFO", &e))?;
        Ok(Session {
            dev,
            path: path.to_path_buf(),
            json,
            quiet: false,
            info,
            plans: HashMap::new(),
            last: None,
            served: Vec::new(),
        })
    }

    /// An ioctl's result, its failure named `what` and by errno.
    pub fn io<T>(&self, what: &str, r: std::io::Result<T>) -> Result<T> {
        r.map_err(|e| Failure::refused(what, &e).into())
    }

    /// The var_id that `v` names in plan `id`: a number, or a record's name.
    pub fn var(&self, id: u32, v: &str) -> Result<u32> {
        if let Some(n) = parse_num::<u32>(v) {
            return Ok(n);
        }
        let plan = self
            .plans
            .get(&id)
            .ok_or_else(|| anyhow!("plan {id} was not loaded here"))?;
        plan.records
            .iter()
            .find(|r| r.name.as_deref() == Some(v))
            .map(|r| r.var_id)
            .ok_or_else(|| anyhow!("plan {id} has no variable named {v:?}"))
    }

    /// The size of variable `var` of plan `id`, where the plan was loaded here.
    pub fn var_size(&self, id: u32, var: u32) -> Option<u64> {
        self.plans.get(&id)?.record(var).map(|r| r.size)
    }
}

/// Opens the device node at `path`; a failure says why by errno (a
/// missing node, a permission problem) and what to do.
pub fn open_device(path: &Path) -> Result<Device, Failure> {
    Device::open_path(path).map_err(|e| Failure::open(path, e.raw_os_error(), &e))
}

/// The optional numeric operand `s`, called `what` in its error.
pub fn num_arg(s: Option<&&str>, what: &str) -> Result<Option<u64>> {
    s.map(|v| parse_num(v).ok_or_else(|| anyhow!("{what}: {v:?} is not a number")))
        .transpose()
}
