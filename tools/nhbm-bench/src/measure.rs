//! Timing with `CLOCK_MONOTONIC` (`std::time::Instant`).
//!
//! The test guest's clocksource can be as coarse as one jiffy (4 ms at
//! HZ=250: TCG marks the TSC unstable), so nothing short is ever timed alone:
//! operations are repeated in blocks that last many clock ticks, and a figure
//! takes the median over several blocks.

use std::io;
use std::time::{Duration, Instant};

/// Nanoseconds `f` takes.
pub fn time_ns<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t0 = Instant::now();
    let out = f();
    (out, t0.elapsed().as_nanos() as f64)
}

/// Nanoseconds `f` takes, with its error passed on.
pub fn try_time_ns(f: impl FnOnce() -> io::Result<()>) -> io::Result<f64> {
    let (r, ns) = time_ns(f);
    r.map(|()| ns)
}

/// The median (the mean of the two middle values for an even count).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Shortest time a calibration probe must take before it is trusted: four
/// ticks of a 250 Hz jiffy clock.
const PROBE_MIN: Duration = Duration::from_millis(16);

/// How many repetitions of an operation fill `block`: `run(n)` performs `n`
/// of them. Grows `n` by 4x until a probe lasts [`PROBE_MIN`], then scales.
pub fn calibrate(block: Duration, mut run: impl FnMut(u64) -> io::Result<()>) -> io::Result<u64> {
    let mut n = 1u64;
    loop {
        let ns = try_time_ns(|| run(n))?;
        if ns >= PROBE_MIN.as_nanos() as f64 || n >= 1 << 30 {
            return Ok(scale(block, ns, n));
        }
        n *= 4;
    }
}

/// Operations that fill `block` when `n` of them took `ns` nanoseconds (at least 1).
fn scale(block: Duration, ns: f64, n: u64) -> u64 {
    let want = block.as_nanos() as f64 / ns.max(1.0) * n as f64;
    (want.ceil() as u64).max(1)
}

/// Per-operation nanoseconds of one block of `n` operations.
pub fn per_op_ns(n: u64, run: impl FnOnce(u64) -> io::Result<()>) -> io::Result<f64> {
    Ok(try_time_ns(|| run(n))? / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn scale_fills_the_block() {
        // 64 operations in 16 ms: 150 ms holds 600 of them.
        assert_eq!(scale(Duration::from_millis(150), 16e6, 64), 600);
        assert_eq!(scale(Duration::from_millis(150), 0.0, 1), 150_000_000);
        assert_eq!(scale(Duration::from_millis(1), 1e9, 1), 1);
    }

    #[test]
    fn calibrate_grows_until_the_probe_is_long_enough() {
        // Each operation sleeps at least 1 ms: probes of 1, 4, 16... operations
        // until one lasts PROBE_MIN, which 16 of them always do; the block
        // then holds at most 160 of them.
        let mut probes = Vec::new();
        let n = calibrate(Duration::from_millis(160), |n| {
            probes.push(n);
            std::thread::sleep(Duration::from_millis(n));
            Ok(())
        })
        .unwrap();
        assert!(
            probes.iter().enumerate().all(|(i, &p)| p == 1 << (2 * i)),
            "{probes:?}"
        );
        assert!(*probes.last().unwrap() <= 16, "{probes:?}");
        assert!((1..=160).contains(&n), "n = {n}");
    }
}
