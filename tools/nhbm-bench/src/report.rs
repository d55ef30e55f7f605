//! One line per figure: `bench: <name>: <value> (<what A> <A> / <what B> <B>)
//! target <op> <t> <PASS|FAIL>`, and the verdict behind it.

use std::fmt;

use crate::measure::Ratios;

/// How a figure is compared with its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The figure must not exceed the target.
    AtMost,
    /// The figure must reach the target.
    AtLeast,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::AtMost => "<=",
            Op::AtLeast => ">=",
        })
    }
}

/// One raw measurement behind a figure: what it is and its value as text.
#[derive(Clone, Debug, PartialEq)]
pub struct Raw {
    pub what: String,
    pub value: String,
}

impl Raw {
    pub fn new(what: impl Into<String>, value: impl Into<String>) -> Self {
        Raw {
            what: what.into(),
            value: value.into(),
        }
    }
}

/// A measured figure: `value` is `a` relative to `b`, judged against a target.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub a: Raw,
    pub b: Raw,
    pub op: Op,
    pub target: f64,
    /// Overrides the comparison of `value` with `target` when the verdict is
    /// decided on exact integers (planner high-water marks).
    pub verdict: Option<bool>,
    /// Smallest and largest ratio of the repetitions `value` is the median
    /// of, and how many there were.
    pub spread: Option<(f64, f64, usize)>,
}

impl Figure {
    pub fn new(name: impl Into<String>, value: f64, a: Raw, b: Raw, op: Op, target: f64) -> Self {
        Figure {
            name: name.into(),
            value,
            a,
            b,
            op,
            target,
            verdict: None,
            spread: None,
        }
    }

    /// The median of `ratios` against `target`, with their spread.
    pub fn of_ratios(
        name: impl Into<String>,
        ratios: &Ratios,
        a: Raw,
        b: Raw,
        op: Op,
        target: f64,
    ) -> Self {
        let (lo, hi) = ratios.min_max();
        Figure {
            spread: Some((lo, hi, ratios.len())),
            ..Figure::new(name, ratios.median(), a, b, op, target)
        }
    }

    /// Decides the verdict from something more exact than the printed value.
    pub fn with_verdict(mut self, pass: bool) -> Self {
        self.verdict = Some(pass);
        self
    }

    pub fn pass(&self) -> bool {
        if let Some(v) = self.verdict {
            return v;
        }
        if !self.value.is_finite() {
            return false;
        }
        match self.op {
            Op::AtMost => self.value <= self.target,
            Op::AtLeast => self.value >= self.target,
        }
    }

    /// The printed line.
    pub fn line(&self) -> String {
        let spread = match self.spread {
            Some((lo, hi, n)) => format!(" spread {lo:.3}-{hi:.3} of {n}"),
            None => String::new(),
        };
        format!(
            "bench: {}: {:.3} ({} {} / {} {}){spread} target {} {:.3} {}",
            self.name,
            self.value,
            self.a.what,
            self.a.value,
            self.b.what,
            self.b.value,
            self.op,
            self.target,
            if self.pass() { "PASS" } else { "FAIL" }
        )
    }
}

/// The line of a figure that could not be measured: always a failure.
pub fn error_line(name: &str, msg: &str) -> String {
    format!("bench: {name}: error ({msg}) FAIL")
}

/// A figure name made of lowercase letters, digits and underscores.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_the_documented_shape() {
        let f = Figure::new(
            "resolve",
            1.0625,
            Raw::new("RESOLVE median ns", "850.0"),
            Raw::new("DEVICE_INFO median ns", "800.0"),
            Op::AtMost,
            1.25,
        );
        assert_eq!(
            f.line(),
            "bench: resolve: 1.062 (RESOLVE median ns 850.0 / DEVICE_INFO median ns 800.0) \
             target <= 1.250 PASS"
        );
        let g = Figure {
            op: Op::AtLeast,
            target: 2.0,
            ..f.clone()
        };
        assert!(g.line().ends_with("target >= 2.000 FAIL"));
        let r = Ratios(vec![1.1, 0.9, 1.0, 1.2, 0.95]);
        let h = Figure::of_ratios(
            "x",
            &r,
            Raw::new("a", "1"),
            Raw::new("b", "1"),
            Op::AtMost,
            1.25,
        );
        assert_eq!(h.value, 1.0);
        assert_eq!(
            h.line(),
            "bench: x: 1.000 (a 1 / b 1) spread 0.900-1.200 of 5 target <= 1.250 PASS"
        );
    }

    #[test]
    fn nan_fails_and_verdict_overrides() {
        let f = Figure::new(
            "x",
            f64::NAN,
            Raw::new("a", "0"),
            Raw::new("b", "0"),
            Op::AtMost,
            1.0,
        );
        assert!(!f.pass());
        assert!(f.clone().with_verdict(true).pass());
        let g = Figure { value: 1.0, ..f };
        assert!(g.pass(), "the bound itself passes");
        assert!(!g.with_verdict(false).pass());
    }

    #[test]
    fn names_are_sanitized() {
        assert_eq!(sanitize("Small-CNN.v2"), "small_cnn_v2");
        assert_eq!(
            error_line("resolve", "ENOENT"),
            "bench: resolve: error (ENOENT) FAIL"
        );
    }
}
