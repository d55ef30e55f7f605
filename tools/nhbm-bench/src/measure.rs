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
    calibrate_probe(block, |n| try_time_ns(|| run(n)))
}

/// [`calibrate`] with the probe's duration in nanoseconds given by `probe(n)`.
fn calibrate_probe(
    block: Duration,
    mut probe: impl FnMut(u64) -> io::Result<f64>,
) -> io::Result<u64> {
    let mut n = 1u64;
    loop {
        let ns = probe(n)?;
        if ns >= PROBE_MIN.as_nanos() as f64 || n >= 1 << 30 {
            let want = block.as_nanos() as f64 / ns.max(1.0) * n as f64;
            return Ok((want.ceil() as u64).max(1));
        }
        n *= 4;
    }
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
    fn calibrate_fills_the_block() {
        // Operations of 100 us each: probes of 1, 4, ... 256 operations; the
        // 256-operation probe (25.6 ms) is the first to last PROBE_MIN.
        let mut probes = Vec::new();
        let n = calibrate_probe(Duration::from_millis(40), |n| {
            probes.push(n);
            Ok(n as f64 * 100_000.0)
        })
        .unwrap();
        assert_eq!(probes, [1, 4, 16, 64, 256]);
        assert_eq!(n, 400);
    }

    #[test]
    fn calibrate_passes_errors_on() {
        let r = calibrate(Duration::from_millis(40), |_| Err(io::Error::other("gone")));
        assert_eq!(r.unwrap_err().to_string(), "gone");
    }
}
