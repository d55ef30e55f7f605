//! The module's trace events (`events/neuron_hbm/` in tracefs): a load, a
//! write, a read, a mapping's fault, an unload and a device reset each
//! leave their event, in that order, with the fields the calls imply.

use std::collections::HashMap;

use nhbm::uapi::*;
use nhbm::{Device, LoadedPlan, Plan, Record};

use crate::fixtures::*;
use crate::ktap::*;
use crate::sys::{tracefs_file, tracefs_write, TRACEFS};

/// The guest's page size, and so the unit of mmap offsets.
const PAGE: u64 = 4096;

/// The reset handshake sleeps this long before each poll of the firmware
/// (`poll_ms` of every arch, rust/arch.rs).
const RESET_POLL_NS: u64 = 100_000_000;

/// One event of the trace: its name and its `key=value` fields.
struct Event {
    name: String,
    fields: HashMap<String, String>,
}

impl Event {
    /// Field `key`, failing when the event lacks it.
    fn field(&self, key: &str) -> Result<&str, Fail> {
        match self.fields.get(key) {
            Some(v) => Ok(v),
            None => fail(format!("{}: no field {key}", self.name)),
        }
    }

    /// Numeric field `key`.
    fn num(&self, key: &str) -> Result<u64, Fail> {
        let v = self.field(key)?;
        v.parse()
            .or_else(|_| fail(format!("{}: {key}={v} is not a number", self.name)))
    }

    /// Checks that field `key` reads `want`.
    fn expect(&self, key: &str, want: impl ToString) -> TestResult {
        ensure_eq(
            &format!("{} {key}", self.name),
            self.field(key)?,
            want.to_string().as_str(),
        )
    }

    /// Checks that the event took some time and returns it.
    fn took(&self) -> Result<u64, Fail> {
        let ns = self.num("ns")?;
        ensure(ns > 0, || format!("{}: ns=0", self.name))?;
        Ok(ns)
    }
}

/// The neuron_hbm events of a `trace` file, in order.
fn events(trace: &str) -> Vec<Event> {
    trace
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            // "<task>-<pid> [cpu] <flags> <time>: <event>: <fields>"
            let (_, rest) = l.split_once(": nhbm_")?;
            let (name, fields) = rest.split_once(": ")?;
            let fields = fields
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Some(Event {
                name: format!("nhbm_{name}"),
                fields,
            })
        })
        .collect()
}

/// With the neuron_hbm events enabled, a PLAN_LOAD of three buffers, a
/// MEM_WRITE and a MEM_READ of the second, a read of its second page
/// through a mapping, a PLAN_UNLOAD and a device RESET give exactly these
/// events, in order, each naming the device: the fault its file page, the
/// pages it mapped and success; the
/// load and the unload the plan id PLAN_LOAD returned, its three records
/// and the bytes it allocated; the transfers the plan, the variable, their
/// direction, their length and success; the reset its kind and, at its
/// end, success, no re-sent request, and polls and looks of the firmware
/// that its time covers (every poll follows a 100 ms sleep). Skipped on a
/// kernel without trace events; a kernel with them must list the module's.
pub fn trace_events_report_loads_transfers_and_resets(notes: &mut Notes) -> TestResult {
    let Some(events_dir) = tracefs_file("events") else {
        return skip("the kernel has no trace events (tracefs/events)");
    };
    let ours = format!("{events_dir}/neuron_hbm");
    ensure(std::path::Path::new(&ours).is_dir(), || {
        format!("{ours} is missing: the module's events are not registered")
    })?;
    let d = dev()?;
    let index = device_index();
    let plan = Plan::new(0, 0)
        .with(Record::buffer(1, 8 * KIB))
        .with(Record::buffer(2, 64 * KIB))
        .with(Record::buffer(3, 4 * KIB));
    let blob = plan.to_blob().ctx("build")?;
    let data = pattern(24 * KIB, 91);
    let traced = traced_calls(&d, &ours, &blob, &data);
    // Off again whatever happened.
    let _ = std::fs::write(format!("{ours}/enable"), "0");
    let (loaded, offset, trace) = traced?;
    let evs = events(&trace);
    check_names_and_device(&evs, index)?;
    let id = loaded.plan_id;
    let bytes = loaded.bytes_allocated;
    ensure(bytes >= 76 * KIB, || format!("bytes_allocated {bytes}"))?;
    let [load, write, read, fault, unload, begin, end] = &evs[..] else {
        unreachable!("seven events, checked above");
    };
    check_fault(fault, offset, &d)?;
    for (e, what) in [(load, "load"), (unload, "unload")] {
        e.expect("plan", id)?;
        e.expect("records", 3)?;
        e.expect("bytes", bytes)?;
        notes.add(format!("{what} {} ns", e.took()?));
    }
    for (e, dir) in [(write, "write"), (read, "read")] {
        e.expect("plan", id)?;
        e.expect("var", 2)?;
        e.expect("dir", dir)?;
        e.expect("bytes", data.len())?;
        e.expect("result", 0)?;
        notes.add(format!("{dir} of {} bytes {} ns", data.len(), e.took()?));
    }
    check_reset(begin, end, notes)
}

/// The traced calls left exactly their seven events, in order, each naming
/// device `index`.
fn check_names_and_device(evs: &[Event], index: u32) -> TestResult {
    let names: Vec<&str> = evs.iter().map(|e| e.name.as_str()).collect();
    ensure_eq(
        "events",
        names.as_slice(),
        &[
            "nhbm_plan_load",
            "nhbm_mem_xfer",
            "nhbm_mem_xfer",
            "nhbm_map_fault",
            "nhbm_plan_unload",
            "nhbm_reset_begin",
            "nhbm_reset_end",
        ],
    )?;
    for e in evs {
        e.expect("dev", index)?;
    }
    Ok(())
}

/// With the neuron_hbm events (`ours`) enabled: loads `blob`, writes `data`
/// 4 KiB into its var 2 and reads it back, reads a word of the var's second
/// page through a mapping, unloads the plan and resets the device. Returns
/// the loaded plan, the var's mmap offset and the trace. Leaves the events
/// enabled on failure.
fn traced_calls(
    d: &Device,
    ours: &str,
    blob: &[u8],
    data: &[u8],
) -> Result<(LoadedPlan, u64, String), Fail> {
    tracefs_write(&format!("{TRACEFS}/tracing_on"), "1")?;
    tracefs_write(&format!("{TRACEFS}/trace"), "")?;
    tracefs_write(&format!("{ours}/enable"), "1")?;
    let loaded = d.plan_load(blob, 0).ctx("PLAN_LOAD")?;
    d.mem_write(loaded.plan_id, 2, 4 * KIB, data)
        .ctx("MEM_WRITE")?;
    let back = read(d, loaded.plan_id, 2, 4 * KIB, data.len() as u64)?;
    ensure_bytes("MEM_READ after MEM_WRITE", &back, data)?;
    let (offset, _) = d.map_offset(loaded.plan_id, 2).ctx("MAP_OFFSET")?;
    let m = d.map(loaded.plan_id, 2).ctx("map")?;
    let mut word = [0u8; 8];
    m.read(PAGE as usize, &mut word)
        .ctx("read through the mapping")?;
    ensure_bytes("a word through the mapping", &word, &data[..8])?;
    drop(m);
    d.plan_unload(loaded.plan_id).ctx("PLAN_UNLOAD")?;
    ensure_eq("RESET status", d.reset(RESET_DEVICE, 0).ctx("RESET")?, 0)?;
    tracefs_write(&format!("{ours}/enable"), "0")?;
    let trace = std::fs::read_to_string(format!("{TRACEFS}/trace")).ctx("trace")?;
    Ok((loaded, offset, trace))
}

/// The mapping's fault event: the word at 4 KiB into the mapping of the
/// var at mmap `offset` is in its second page, and from there `d` maps one
/// page on a simulated device, the variable's other 15 on a BAR.
fn check_fault(fault: &Event, offset: u64, d: &Device) -> TestResult {
    fault.expect("pgoff", format!("{:#x}", offset / PAGE + 1))?;
    let simulated = info(d)?.simulated != 0;
    fault.expect("pages", if simulated { 1 } else { 15 })?;
    fault.expect("result", 0)
}

/// The device reset's events: its kind, and at its end success, no
/// re-sent request, and polls and looks of the firmware that its time
/// covers (every poll follows a 100 ms sleep).
fn check_reset(begin: &Event, end: &Event, notes: &mut Notes) -> TestResult {
    begin.expect("type", "device")?;
    begin.expect("map", "0x0")?;
    end.expect("type", "device")?;
    end.expect("result", 0)?;
    end.expect("resends", 0)?;
    let (polls, looks, ns) = (end.num("polls")?, end.num("looks")?, end.took()?);
    ensure(polls >= 1 && looks >= 1, || {
        format!("reset: polls={polls} looks={looks}, want at least one of each")
    })?;
    ensure(ns >= polls * RESET_POLL_NS, || {
        format!("reset: {ns} ns for {polls} polls 100 ms apart")
    })?;
    notes.add(format!("reset: {polls} polls, {looks} looks, {ns} ns"));
    Ok(())
}
