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

/// Repetitions every timed figure takes at least: it is the median of that
/// many ratios, each of two measurements made back to back (the tests hold
/// every figure to it).
#[cfg(test)]
pub const MIN_REPS: usize = 5;

/// The two sides of a comparison, measured `n` times each in ABBA order
/// (side A first in even repetitions, B first in odd ones), so that a drift
/// of the emulator's speed hits both.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairs {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

impl Pairs {
    /// Adds one repetition.
    pub fn push(&mut self, a: f64, b: f64) {
        self.a.push(a);
        self.b.push(b);
    }

    /// Median of side A.
    pub fn a_median(&self) -> f64 {
        median(&self.a)
    }

    /// Median of side B.
    pub fn b_median(&self) -> f64 {
        median(&self.b)
    }

    /// The ratio `a / b` of each repetition.
    pub fn ratios(&self) -> Ratios {
        Ratios(self.a.iter().zip(&self.b).map(|(a, b)| a / b).collect())
    }

    /// The ratio `b / a` of each repetition (for times of equal work, the
    /// bandwidth of A over that of B).
    pub fn inverse_ratios(&self) -> Ratios {
        Ratios(self.a.iter().zip(&self.b).map(|(a, b)| b / a).collect())
    }
}

/// The ratio of each repetition of a comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ratios(pub Vec<f64>);

impl Ratios {
    /// The figure: the median ratio.
    pub fn median(&self) -> f64 {
        median(&self.0)
    }

    /// The spread: smallest and largest ratio.
    pub fn min_max(&self) -> (f64, f64) {
        self.0
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                (lo.min(r), hi.max(r))
            })
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// `reps` repetitions of `a` and `b` in ABBA order; each closure returns
/// the value of one measurement.
pub fn interleave(
    reps: usize,
    mut a: impl FnMut() -> io::Result<f64>,
    mut b: impl FnMut() -> io::Result<f64>,
) -> io::Result<Pairs> {
    let mut p = Pairs::default();
    for r in 0..reps {
        let (x, y) = if r % 2 == 0 {
            let x = a()?;
            (x, b()?)
        } else {
            let y = b()?;
            (a()?, y)
        };
        p.push(x, y);
    }
    Ok(p)
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
    fn interleave_alternates_and_pairs() {
        let order = std::cell::RefCell::new(Vec::new());
        let p = interleave(
            4,
            || {
                order.borrow_mut().push('a');
                Ok(2.0)
            },
            || {
                order.borrow_mut().push('b');
                Ok(order.borrow().len() as f64)
            },
        )
        .unwrap();
        assert_eq!(order.into_inner(), ['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
        assert_eq!(p.b, [2.0, 3.0, 6.0, 7.0]);
        let r = p.ratios();
        assert_eq!(r.min_max(), (2.0 / 7.0, 1.0));
        assert_eq!(r.median(), (2.0 / 3.0 + 2.0 / 6.0) / 2.0);
        assert_eq!(p.inverse_ratios().0, [1.0, 1.5, 3.0, 3.5]);
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
