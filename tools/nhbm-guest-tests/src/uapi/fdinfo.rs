//! `/proc/self/fdinfo/<fd>` of an open file: the drm-usage-stats keys that
//! gputop, nvtop and qmassa read (Documentation/uapi.rst, "fdinfo").

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nhbm::{Device, Plan, Record};

use crate::fixtures::*;
use crate::ktap::*;

/// The keys and values of `fd`'s fdinfo; a key printed twice fails.
fn fdinfo(fd: &impl AsFd) -> Result<HashMap<String, String>, Fail> {
    let path = format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd());
    let text = std::fs::read_to_string(&path).ctx(&format!("read {path}"))?;
    let mut keys = HashMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            return fail(format!("{path}: line {line:?} has no ':'"));
        };
        if keys.insert(k.to_string(), v.trim().to_string()).is_some() {
            return fail(format!("{path}: key {k} printed twice"));
        }
    }
    Ok(keys)
}

/// The value of `key`, failing when it is missing.
fn key<'a>(keys: &'a HashMap<String, String>, key: &str) -> Result<&'a str, Fail> {
    match keys.get(key) {
        Some(v) => Ok(v),
        None => fail(format!("no {key} in {keys:?}")),
    }
}

/// A drm-usage-stats size (`N`, `N KiB` or `N MiB`) in bytes.
fn bytes(keys: &HashMap<String, String>, name: &str) -> Result<u64, Fail> {
    let v = key(keys, name)?;
    let (n, unit) = v.split_once(' ').unwrap_or((v, ""));
    let scale = match unit {
        "" => 1,
        "KiB" => KIB,
        "MiB" => MIB,
        _ => return fail(format!("{name}: unit of {v:?}")),
    };
    match n.parse::<u64>() {
        Ok(n) => Ok(n * scale),
        Err(_) => fail(format!("{name}: {v:?} is not a size")),
    }
}

/// `drm-client-id` of `fd`.
fn client_id(fd: &impl AsFd) -> Result<u64, Fail> {
    let keys = fdinfo(fd)?;
    let v = key(&keys, "drm-client-id")?;
    v.parse()
        .or_else(|_| fail(format!("drm-client-id {v:?} is not a u64")))
}

/// What fdinfo must show of each channel of a file of `d`: total and
/// resident, equal (device memory is always resident), and no more channels
/// than the device has.
pub(super) fn per_channel(d: &Device, nr_channels: usize) -> Result<Vec<u64>, Fail> {
    let keys = fdinfo(d)?;
    let mut v = Vec::new();
    for ch in 0..nr_channels {
        let total = bytes(&keys, &format!("drm-total-hbm{ch}"))?;
        let resident = bytes(&keys, &format!("drm-resident-hbm{ch}"))?;
        ensure_eq(&format!("drm-resident-hbm{ch}"), resident, total)?;
        v.push(total);
    }
    ensure(
        !keys.contains_key(&format!("drm-total-hbm{nr_channels}")),
        || format!("a channel past the device's {nr_channels}: {keys:?}"),
    )?;
    Ok(v)
}

/// Every file names the driver and a client id of its own, which a
/// duplicated descriptor shares and a later file never reuses; a PCI
/// function's files name its slot (as its dmem regions do), a simulated
/// device's have no `drm-pdev`.
pub fn fdinfo_names_the_driver_and_each_file() -> TestResult {
    let a = dev()?;
    let b = dev()?;
    let keys = fdinfo(&a)?;
    ensure_eq("drm-driver", key(&keys, "drm-driver")?, "neuron_hbm")?;
    let (ia, ib) = (client_id(&a)?, client_id(&b)?);
    ensure(ia != ib, || format!("two files share drm-client-id {ia}"))?;
    ensure_eq("drm-client-id read again", client_id(&a)?, ia)?;
    let dup: OwnedFd = a.as_fd().try_clone_to_owned().ctx("dup")?;
    ensure_eq("drm-client-id of a dup", client_id(&dup)?, ia)?;
    drop(b);
    let c = dev()?;
    let ic = client_id(&c)?;
    ensure(ic != ia && ic != ib, || {
        format!("a new file got drm-client-id {ic}, given before ({ia}, {ib})")
    })?;
    let slot = std::fs::read_link(format!(
        "/sys/class/misc/neuron_hbm{}/device",
        device_index()
    ))
    .ok()
    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    match (expected_simulated(), slot) {
        (1, _) => ensure(!keys.contains_key("drm-pdev"), || {
            format!("a simulated device shows drm-pdev: {keys:?}")
        }),
        (_, Some(slot)) => ensure_eq("drm-pdev", key(&keys, "drm-pdev")?, slot.as_str()),
        (_, None) => fail("the PCI device's node has no device link in sysfs"),
    }
}

/// A file shows the HBM its own plans hold, per channel, as PLAN_LOAD
/// reported it, and 0 again once they are unloaded; another file of the
/// same device shows none of it.
pub fn fdinfo_counts_the_files_plans_per_channel() -> TestResult {
    let d = dev()?;
    let other = dev()?;
    let nr = info(&d)?.nr_channels as usize;
    ensure_eq("a fresh file", per_channel(&d, nr)?, vec![0; nr])?;
    // A scratchpad and a buffer: the plan's bytes are both, rounded.
    let small = Plan::new(64 * KIB, 0).with(Record::buffer(1, 100_000));
    let p = d
        .plan_load(&small.to_blob().ctx("build")?, 0)
        .ctx("PLAN_LOAD on channel 0")?;
    let q = d
        .plan_load(&one_buffer(1, 3 * MIB).to_blob().ctx("build")?, 0)
        .ctx("second PLAN_LOAD on channel 0")?;
    let last = nr - 1;
    let r = d
        .plan_load(
            &one_buffer(1, 5 * MIB + 4 * KIB).to_blob().ctx("build")?,
            last as u32,
        )
        .ctx("PLAN_LOAD on the last channel")?;
    let mut want = vec![0; nr];
    want[0] += p.bytes_allocated + q.bytes_allocated;
    want[last] += r.bytes_allocated;
    ensure_eq("with three plans", per_channel(&d, nr)?, want.clone())?;
    ensure_eq(
        "the sum against MEM_STATS own_bytes",
        want.iter().sum::<u64>(),
        usage(&d)?.own_bytes,
    )?;
    ensure_eq("another file", per_channel(&other, nr)?, vec![0; nr])?;
    d.plan_unload(q.plan_id).ctx("PLAN_UNLOAD")?;
    want[0] -= q.bytes_allocated;
    ensure_eq("after one unload", per_channel(&d, nr)?, want)?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    d.plan_unload(r.plan_id).ctx("PLAN_UNLOAD")?;
    ensure_eq("after every unload", per_channel(&d, nr)?, vec![0; nr])
}
