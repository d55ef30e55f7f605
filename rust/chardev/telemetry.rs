// SPDX-License-Identifier: GPL-2.0-only

//! Per-device debugfs: `/sys/kernel/debug/neuron_hbm<N>/`.
//!
//! - `pools`: per channel x region `ch region start end total used peak live`,
//!   then the small pool's `start end free` (`- - -` when the region has none)
//!   (the numbers of `NHBM_IOC_MEM_STATS`);
//! - `plans`: per live plan `pid plan_id vars bytes kmem` (`pid`: the
//!   loading process, as the initial pid namespace numbers it);
//! - `chunks`: every chunk of a live plan `ch region pa size`, plan by
//!   plan in the order they were loaded;
//! - `kmem`: `plans <n> vars <n> bytes <n>`, kernel memory of plan bookkeeping;
//! - `fail_nth` (rw), `fail_points` (ro): fault injection, see [`crate::device::fault`];
//! - `unplug` (wo): writing 1 simulates surprise removal of a simulated device;
//! - `state`: `ready`, `resetting`, `unknown` (the last device reset
//!   failed) or `removed`.

use crate::{device::tree_batch::walk, device::Device};
use core::fmt::{self, Formatter};
use kernel::{
    debugfs::{Dir, File},
    prelude::*,
    sync::Arc,
    uaccess::UserSliceReader,
};

/// The debugfs directory of one device and its files.
#[pin_data]
pub(crate) struct Telemetry {
    #[pin]
    pools: File<Arc<Device>>,
    #[pin]
    plans: File<Arc<Device>>,
    #[pin]
    chunks: File<Arc<Device>>,
    #[pin]
    kmem: File<Arc<Device>>,
    #[pin]
    fail_nth: File<Arc<Device>>,
    #[pin]
    fail_points: File<Arc<Device>>,
    #[pin]
    unplug: File<Arc<Device>>,
    #[pin]
    state: File<Arc<Device>>,
    dir: Dir,
}

impl Telemetry {
    /// Creates `/sys/kernel/debug/<name>/` for `dev`.
    pub(crate) fn new<'a>(name: &'a CStr, dev: &'a Arc<Device>) -> impl PinInit<Self, Error> + 'a {
        let dir = Dir::new(name);
        try_pin_init!(Self {
            pools <- dir.read_callback_file(c"pools", dev.clone(), &show_pools),
            plans <- dir.read_callback_file(c"plans", dev.clone(), &show_plans),
            chunks <- dir.read_callback_file(c"chunks", dev.clone(), &show_chunks),
            kmem <- dir.read_callback_file(c"kmem", dev.clone(), &show_kmem),
            fail_nth <- dir.read_write_callback_file(
                c"fail_nth",
                dev.clone(),
                &show_fail_nth,
                &set_fail_nth
            ),
            fail_points <- dir.read_callback_file(c"fail_points", dev.clone(), &show_fail_points),
            unplug <- dir.write_callback_file(c"unplug", dev.clone(), &set_unplug),
            state <- dir.read_callback_file(c"state", dev.clone(), &show_state),
            dir,
        })
    }
}

fn show_pools(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    let geo = dev.grid.geometry();
    for ch in 0..dev.info.nr_channels {
        for r in 0..geo.regions {
            let (Ok(s), Ok((start, end))) = (dev.grid.stats(ch, r), dev.grid.pool_range(ch, r))
            else {
                continue;
            };
            write!(
                f,
                "{} {} {:#x} {:#x} {} {} {} {}",
                ch, r, start, end, s.total, s.used, s.peak, s.live_chunks
            )?;
            // The small pool: its range and free bytes ("- - -" if none).
            match dev.grid.small_pool(ch, r) {
                Ok(Some((s_start, s_end, free))) => {
                    writeln!(f, " {:#x} {:#x} {}", s_start, s_end, free)?
                }
                _ => writeln!(f, " - - -")?,
            }
        }
    }
    Ok(())
}

fn show_plans(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    walk(
        0,
        |key| dev.plans_from(key),
        |p| {
            writeln!(
                f,
                "{} {} {} {} {}",
                p.pid, p.plan_id, p.vars, p.bytes, p.kmem
            )
        },
    )
}

fn show_chunks(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    walk(
        (0, 0),
        |at| dev.chunks_from(at),
        |c| writeln!(f, "{} {} {:#x} {}", c.channel, c.region, c.pa, c.size),
    )
}

fn show_kmem(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    let (mut count, mut vars, mut bytes) = (0u64, 0u64, 0u64);
    walk(
        0,
        |key| dev.plans_from(key),
        |p| {
            count += 1;
            vars += u64::from(p.vars);
            bytes += p.kmem;
            Ok(())
        },
    )?;
    writeln!(f, "plans {} vars {} bytes {}", count, vars, bytes)
}

fn show_state(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", dev.reset_state())
}

fn show_fail_nth(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", dev.fault.remaining())
}

fn show_fail_points(dev: &Arc<Device>, f: &mut Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", dev.fault.passed())
}

/// Reads a small decimal number written to a debugfs file.
fn read_number(r: &mut UserSliceReader) -> Result<u64> {
    let mut buf = [0u8; 24];
    let n = r.len().min(buf.len());
    r.read_slice(&mut buf[..n])?;
    let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
    text.trim().parse::<u64>().map_err(|_| EINVAL)
}

fn set_fail_nth(dev: &Arc<Device>, r: &mut UserSliceReader) -> Result {
    let n = u32::try_from(read_number(r)?).map_err(|_| EINVAL)?;
    dev.fault.arm(n)
}

fn set_unplug(dev: &Arc<Device>, r: &mut UserSliceReader) -> Result {
    if read_number(r)? != 1 {
        return Err(EINVAL);
    }
    let sim = dev.sim().ok_or(EOPNOTSUPP)?;
    pr_info!("neuron_hbm{}: simulated surprise removal\n", dev.index);
    sim.unplug();
    // As a PCI function's unbind does: no process keeps a page of it.
    dev.revoke_mappings();
    Ok(())
}
