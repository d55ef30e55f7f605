//! `nhbm stats`: pool usage per channel x region (MEM_STATS), with bars.

use anyhow::Result;
use nhbm::uapi::MemStats;
use serde_json::{json, Value};

use crate::device::Session;
use crate::fmt;

/// Prints the device's pool usage and this open file's share of it.
pub fn run(s: &Session) -> Result<()> {
    let st = s.io("MEM_STATS", s.dev.mem_stats())?;
    if s.json {
        print_json(&st);
    } else {
        print_text(&st);
    }
    Ok(())
}

fn print_json(s: &MemStats) {
    let pools: Vec<Value> = s
        .present_pools()
        .map(|(c, r, p)| json!({"channel": c, "region": r, "total": p.total, "used": p.used, "peak": p.peak, "live_chunks": p.live_chunks}))
        .collect();
    println!(
        "{}",
        json!({"pools": pools, "used": s.total_used(), "live_chunks": s.total_chunks(),
               "own_bytes": s.own_bytes, "own_chunks": s.own_chunks, "own_plans": s.own_plans})
    );
}

fn print_text(s: &MemStats) {
    let rows: Vec<Vec<String>> = s
        .present_pools()
        .map(|(c, r, p)| {
            let pct = if p.total == 0 {
                0.0
            } else {
                p.used as f64 * 100.0 / p.total as f64
            };
            vec![
                format!("hbm{c}.{r}"),
                fmt::bar(p.used, p.total, 30),
                format!("{pct:.1}%"),
                fmt::bytes(p.used),
                fmt::bytes(p.total),
                fmt::bytes(p.peak),
                p.live_chunks.to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        fmt::table(
            &["pool", "usage", "used%", "used", "total", "peak", "chunks"],
            &rows,
            &[2, 3, 4, 5, 6]
        )
    );
    println!(
        "total used {} in {} chunks; this file: {} plans, {} in {} chunks",
        fmt::bytes(s.total_used()),
        s.total_chunks(),
        s.own_plans,
        fmt::bytes(s.own_bytes),
        s.own_chunks
    );
}
