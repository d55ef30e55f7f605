//! The large case, last: a 12 GiB buffer on the simulated device's sparse
//! HBM stages, reads zeros at its end, and leaves nothing once unloaded.

use crate::fixtures::*;
use crate::ktap::*;

pub fn twelve_gib_buffer_stages_on_sparse_hbm() -> TestResult {
    let d = dev()?;
    let i = info(&d)?;
    let base = usage(&d)?;
    let size = 12 * GIB;
    if i.nr_channels < 2 || i.channel_size[1] < 16 * GIB {
        return skip("needs a second channel of 16 GiB");
    }
    if expected_simulated() == 0 {
        return skip(HOST_BACKED_BAR4);
    }
    let p = d
        .plan_load(&one_buffer(1, size).to_blob().ctx("build")?, 1)
        .ctx("PLAN_LOAD 12 GiB")?;
    ensure(in_hbm(&i, p.addrs[0], size), || {
        format!("12 GiB at {:#x}", p.addrs[0])
    })?;
    ensure_bytes(
        "last 4 KiB",
        &read(&d, p.plan_id, 1, size - 4096, 4096)?,
        &[0; 4096],
    )?;
    let data = pattern(4096, 12);
    d.mem_write(p.plan_id, 1, size - 4096, &data)
        .ctx("MEM_WRITE at the end")?;
    ensure_bytes(
        "last 4 KiB after write",
        &read(&d, p.plan_id, 1, size - 4096, 4096)?,
        &data,
    )?;
    d.plan_unload(p.plan_id).ctx("PLAN_UNLOAD")?;
    ensure_eq("MEM_STATS after unload", usage(&d)?, base)
}
