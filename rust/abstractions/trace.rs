// SPDX-License-Identifier: GPL-2.0-only

//! The module's trace events, under `events/neuron_hbm/` in tracefs, for
//! perf, trace-cmd, bpftrace or tracefs itself: plan loads and unloads,
//! resets and transfers (Documentation/uapi.rst lists the fields).
//!
//! Rust cannot define a trace event: `nhbm_trace.h` does, and
//! `nhbm_trace.c` makes each one a real symbol, and for each event
//! that carries a time one that says whether it is enabled: a [`Timer`]
//! reads the clock only then, so a disabled event costs a call that tests
//! its static key.

use crate::abstractions::helpers::*;
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

/// The start of a traced operation, taken on the monotonic clock only if
/// its event was enabled then; an event is fired only with a start.
pub(crate) struct Timer(Option<Instant<Monotonic>>);

impl Timer {
    fn start(enabled: bool) -> Self {
        Self(enabled.then(Instant::now))
    }

    /// Nanoseconds since the start, if there was one.
    fn ns(&self) -> Option<u64> {
        self.0
            .as_ref()
            .map(|t| t.elapsed().as_nanos().max(0) as u64)
    }
}

/// 0 or the negative errno of `res`, as the events carry results.
fn result<T>(res: &Result<T>) -> i32 {
    res.as_ref().err().map_or(0, |e| e.to_errno())
}

/// Starts timing a PLAN_LOAD for [`plan_load`].
pub(crate) fn plan_load_timer() -> Timer {
    // SAFETY: The wrapper only tests the event's static key.
    Timer::start(unsafe { nhbm_trace_plan_load_enabled() })
}

/// Event `nhbm_plan_load`: device `dev` loaded plan `plan_id` of `records`
/// mem_ref records holding `bytes` of HBM, started at `t`.
pub(crate) fn plan_load(t: &Timer, dev: u32, plan_id: u32, records: usize, bytes: u64) {
    if let Some(ns) = t.ns() {
        // SAFETY: The wrapper takes its arguments by value and may be
        // called from any context a tracepoint may fire in.
        unsafe { nhbm_trace_plan_load(dev, plan_id, records as u32, bytes, ns) };
    }
}

/// Starts timing a PLAN_UNLOAD for [`plan_unload`].
pub(crate) fn plan_unload_timer() -> Timer {
    // SAFETY: The wrapper only tests the event's static key.
    Timer::start(unsafe { nhbm_trace_plan_unload_enabled() })
}

/// Event `nhbm_plan_unload`: device `dev` unloaded plan `plan_id` of
/// `records` records and gave back `bytes` of HBM, started at `t`.
pub(crate) fn plan_unload(t: &Timer, dev: u32, plan_id: u32, records: usize, bytes: u64) {
    if let Some(ns) = t.ns() {
        // SAFETY: As in `plan_load`.
        unsafe { nhbm_trace_plan_unload(dev, plan_id, records as u32, bytes, ns) };
    }
}

/// Event `nhbm_reset_begin`: the reset worker of device `dev` starts a
/// reset of `kind` with mailbox map `map`. Returns the timer of
/// [`reset_end`].
pub(crate) fn reset_begin(dev: u32, kind: u32, map: u32) -> Timer {
    // SAFETY: As in `plan_load`.
    unsafe { nhbm_trace_reset_begin(dev, kind, map) };
    // SAFETY: The wrapper only tests the event's static key.
    Timer::start(unsafe { nhbm_trace_reset_end_enabled() })
}

/// What a reset handshake did, for [`reset_end`].
pub(crate) struct ResetCounts {
    /// Polls of the request register for the firmware's take.
    pub(crate) polls: u32,
    /// Requests written again after the first.
    pub(crate) resends: u32,
    /// Looks at the firmware status for the reset's completion.
    pub(crate) looks: u32,
}

/// Event `nhbm_reset_end`: the reset of `kind` that [`reset_begin`]
/// started on device `dev` ended with `res` after `counts`.
pub(crate) fn reset_end(t: &Timer, dev: u32, kind: u32, res: &Result, counts: ResetCounts) {
    if let Some(ns) = t.ns() {
        let c = counts;
        // SAFETY: As in `plan_load`.
        unsafe { nhbm_trace_reset_end(dev, kind, result(res), c.polls, c.resends, c.looks, ns) };
    }
}

/// Starts timing a MEM_WRITE or MEM_READ for [`mem_xfer`].
pub(crate) fn mem_xfer_timer() -> Timer {
    // SAFETY: The wrapper only tests the event's static key.
    Timer::start(unsafe { nhbm_trace_mem_xfer_enabled() })
}

/// Event `nhbm_mem_xfer`: a transfer of `bytes` to (`write`) or from
/// variable `var_id` of plan `plan_id` on device `dev`, started at `t`,
/// ended with `res`.
pub(crate) fn mem_xfer(
    t: &Timer,
    dev: u32,
    (plan_id, var_id): (u32, u32),
    write: bool,
    bytes: u64,
    res: &Result,
) {
    if let Some(ns) = t.ns() {
        // SAFETY: As in `plan_load`.
        unsafe { nhbm_trace_mem_xfer(dev, plan_id, var_id, write, bytes, result(res), ns) };
    }
}

/// Event `nhbm_map_fault`: a fault at file page `pgoff` of a mapping of
/// device `dev` mapped `pages` pages and ended with `res`.
pub(crate) fn map_fault(dev: u32, pgoff: u64, pages: u32, res: &Result) {
    // SAFETY: As in `plan_load`.
    unsafe { nhbm_trace_map_fault(dev, pgoff, pages, result(res)) };
}
