//! KTAP output in the shape of the project's other guest tests: a one-test top
//! level holding one `nhbm_*` subtest, result lines indented by four spaces,
//! `# ` diagnostics after them. Each case runs in isolation: a panic is
//! reported as a failure of that case.
//!
//! Nothing printed here may look like a kernel report (the harness scans the
//! serial log for them), so messages never say "BUG:" or "WARNING:".

use std::cell::{Cell, RefCell};
use std::fmt::Debug;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::Instant;

use nhbm::{errno_name, io_errno_name};

/// Why a case did not pass.
#[derive(Debug)]
pub enum Fail {
    /// The case failed; the message becomes its diagnostic.
    Fail(String),
    /// The case could not run here; the reason follows `# SKIP`.
    Skip(String),
}

impl Fail {
    /// The message, whether the case failed or was skipped.
    pub fn into_message(self) -> String {
        match self {
            Fail::Fail(m) | Fail::Skip(m) => m,
        }
    }
}

/// What a case returns.
pub type TestResult = Result<(), Fail>;

/// A failure with `msg`.
pub fn fail<T>(msg: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Fail(msg.into()))
}

/// A skip with the reason `msg`.
pub fn skip<T>(msg: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Skip(msg.into()))
}

/// Fails with a message unless `cond` holds.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> TestResult {
    if cond {
        Ok(())
    } else {
        fail(msg())
    }
}

/// Fails unless `got == want`, naming `what`.
pub fn ensure_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> TestResult {
    ensure(got == want, || {
        format!("{what}: got {got:x?}, want {want:x?}")
    })
}

/// Fails unless `r` is an error with `errno`.
pub fn ensure_errno<T: Debug>(what: &str, r: io::Result<T>, errno: i32) -> TestResult {
    let want = errno_name(errno);
    match r {
        Ok(v) => fail(format!("{what}: succeeded ({v:x?}), want {want}")),
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        Err(e) => fail(format!("{what}: got {}, want {want}", io_errno_name(&e))),
    }
}

/// `?` on an io::Result with the name of the operation in the failure.
pub trait Ctx<T> {
    /// The value, or a failure naming `what` and the error.
    fn ctx(self, what: &str) -> Result<T, Fail>;
}

impl<T> Ctx<T> for io::Result<T> {
    fn ctx(self, what: &str) -> Result<T, Fail> {
        self.map_err(|e| Fail::Fail(format!("{what}: {} ({e})", io_errno_name(&e))))
    }
}

impl<T> Ctx<T> for Result<T, nhbm::OpenError> {
    fn ctx(self, what: &str) -> Result<T, Fail> {
        self.map_err(|e| Fail::Fail(format!("{what}: {} ({e})", errno_name(e.errno()))))
    }
}

impl<T> Ctx<T> for Result<T, nhbm::PlanError> {
    fn ctx(self, what: &str) -> Result<T, Fail> {
        self.map_err(|e| Fail::Fail(format!("{what}: {e}")))
    }
}

/// Diagnostics a case reports along with its result (counts, timings).
#[derive(Debug, Default)]
pub struct Notes(pub Vec<String>);

impl Notes {
    /// Adds one diagnostic (several lines become several `# ` lines).
    pub fn add(&mut self, line: impl Into<String>) {
        self.0.push(line.into());
    }
}

/// One named test of a suite: a row of a case table.
#[derive(Clone, Copy)]
pub struct Case {
    /// The name on its result line.
    pub name: &'static str,
    /// The test itself; it may report diagnostics in its [`Notes`].
    pub run: fn(&mut Notes) -> TestResult,
}

impl Case {
    /// The case `name` that runs `run`.
    pub const fn new(name: &'static str, run: fn(&mut Notes) -> TestResult) -> Self {
        Case { name, run }
    }
}

/// The outcome of one test line.
#[derive(Debug)]
pub enum Outcome {
    /// `ok`.
    Pass,
    /// `ok ... # SKIP` with the reason.
    Skip(String),
    /// `not ok`, then the reason as diagnostics.
    Fail(String),
}

/// Writes one subtest as KTAP, line by line, flushing each so the serial
/// console shows progress.
pub struct Ktap<'w> {
    w: &'w mut dyn Write,
    suite: String,
    unit: &'static str,
    next: usize,
    all_ok: bool,
    t0: Instant,
}

impl<'w> Ktap<'w> {
    /// Prints the headers of suite `suite` with `n` tests.
    pub fn begin(w: &'w mut dyn Write, suite: &str, n: usize) -> Self {
        let mut k = Ktap {
            w,
            suite: suite.to_string(),
            unit: "tests",
            next: 1,
            all_ok: true,
            t0: Instant::now(),
        };
        k.line("KTAP version 1");
        k.line("1..1");
        k.line("    KTAP version 1");
        k.line(&format!("    # Subtest: {suite}"));
        k.line(&format!("    1..{n}"));
        k
    }

    /// Names the tests `unit` (instead of "tests") in the closing count.
    pub fn counting(mut self, unit: &'static str) -> Self {
        self.unit = unit;
        self
    }

    fn line(&mut self, s: &str) {
        let _ = writeln!(self.w, "{s}");
        let _ = self.w.flush();
    }

    /// A `# ` diagnostic inside the subtest.
    pub fn diag(&mut self, text: &str) {
        for l in text.lines() {
            self.line(&format!("    # {l}"));
        }
    }

    /// The next test line, then its diagnostics.
    pub fn result(&mut self, name: &str, outcome: &Outcome, notes: &[String]) {
        let n = self.next;
        self.next += 1;
        match outcome {
            Outcome::Pass => self.line(&format!("    ok {n} {name}")),
            Outcome::Skip(why) => {
                let why = why.replace('\n', " ");
                self.line(&format!("    ok {n} {name} # SKIP {why}"))
            }
            Outcome::Fail(why) => {
                self.all_ok = false;
                self.line(&format!("    not ok {n} {name}"));
                self.diag(why);
            }
        }
        for note in notes {
            self.diag(note);
        }
    }

    /// Closes the subtest; returns whether every test passed or was skipped.
    pub fn end(mut self) -> bool {
        let ms = self.t0.elapsed().as_millis();
        let suite = self.suite.clone();
        let unit = self.unit;
        self.diag(&format!("{suite}: {} {unit} in {ms} ms", self.next - 1));
        let ok = if self.all_ok { "ok" } else { "not ok" };
        self.line(&format!("{ok} 1 {suite}"));
        self.all_ok
    }
}

thread_local! {
    /// Whether a panic on this thread is inside [`catch`].
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    /// The message of the last panic [`catch`] saw on this thread.
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once per process, a panic hook that records the message of a
/// panic inside [`catch`] and hands every other panic to the hook it
/// replaced. It is never removed, so tests on parallel threads cannot take
/// it away from each other.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !CAPTURING.with(Cell::get) {
                return previous(info);
            }
            let msg = match info.payload().downcast_ref::<&str>() {
                Some(s) => s.to_string(),
                None => info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_default(),
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            PANIC_MSG.with(|p| *p.borrow_mut() = Some(format!("panic: {msg}{at}")));
        }));
    });
}

/// Runs `f`, turning a panic into a failure with its message.
pub fn catch<T>(f: impl FnOnce() -> Result<T, Fail>) -> Result<T, Fail> {
    install_panic_hook();
    let outer = CAPTURING.with(|c| c.replace(true));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    CAPTURING.with(|c| c.set(outer));
    r.unwrap_or_else(|_| {
        let msg = PANIC_MSG
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "panic".into());
        Err(Fail::Fail(msg))
    })
}

/// Runs `cases` in order as the subtest `suite`, printing KTAP to `w`; the
/// closing count calls them `unit`. Returns whether all of them passed or
/// were skipped.
pub fn run_counted(w: &mut dyn Write, suite: &str, unit: &'static str, cases: &[Case]) -> bool {
    let mut k = Ktap::begin(w, suite, cases.len()).counting(unit);
    for c in cases {
        let t = Instant::now();
        let mut notes = Notes::default();
        let r = catch(|| (c.run)(&mut notes));
        let outcome = match r {
            Ok(()) => Outcome::Pass,
            Err(Fail::Skip(why)) => Outcome::Skip(why),
            Err(Fail::Fail(why)) => Outcome::Fail(why),
        };
        let ms = t.elapsed().as_millis();
        if ms >= 2000 {
            notes.add(format!("{} took {ms} ms", c.name));
        }
        k.result(c.name, &outcome, &notes.0);
    }
    k.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_the_nested_ktap_shape() {
        let cases = [
            Case::new("passes", |n| {
                n.add("count=3");
                Ok(())
            }),
            Case::new("fails", |_| fail("first line\nsecond line")),
            Case::new("skips", |_| skip("debugfs file missing")),
            Case::new("panics", |_| panic!("boom")),
        ];
        let mut buf = Vec::new();
        assert!(!run_counted(&mut buf, "nhbm_x", "tests", &cases));
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[..12],
            &[
                "KTAP version 1",
                "1..1",
                "    KTAP version 1",
                "    # Subtest: nhbm_x",
                "    1..4",
                "    ok 1 passes",
                "    # count=3",
                "    not ok 2 fails",
                "    # first line",
                "    # second line",
                "    ok 3 skips # SKIP debugfs file missing",
                "    not ok 4 panics",
            ]
        );
        assert!(
            lines[12].starts_with("    # panic: boom at "),
            "{}",
            lines[12]
        );
        assert!(lines[13].starts_with("    # nhbm_x: 4 tests in "));
        assert_eq!(lines[14], "not ok 1 nhbm_x");
        assert_eq!(lines.len(), 15);
    }

    #[test]
    fn panic_messages_survive_parallel_suites() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..50 {
                        let mut buf = Vec::new();
                        run_counted(
                            &mut buf,
                            "p",
                            "tests",
                            &[Case::new("panics", |_| panic!("boom"))],
                        );
                        let text = String::from_utf8(buf).unwrap();
                        assert!(text.contains("    # panic: boom at "), "{text}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn closing_count_names_the_unit() {
        let cases = [
            Case::new("passes", |_| Ok(())),
            Case::new("skips", |_| skip("no second channel")),
        ];
        let mut buf = Vec::new();
        assert!(run_counted(&mut buf, "suite_x", "cases", &cases));
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[3..7],
            &[
                "    # Subtest: suite_x",
                "    1..2",
                "    ok 1 passes",
                "    ok 2 skips # SKIP no second channel",
            ]
        );
        assert!(lines[7].starts_with("    # suite_x: 2 cases in "));
        assert_eq!(lines[8], "ok 1 suite_x");
        assert_eq!(lines.len(), 9);
    }

    #[test]
    fn all_passing_closes_with_ok() {
        let mut buf = Vec::new();
        assert!(run_counted(
            &mut buf,
            "nhbm_s",
            "tests",
            &[Case::new("a", |_| Ok(()))]
        ));
        assert!(String::from_utf8(buf).unwrap().ends_with("ok 1 nhbm_s\n"));
    }

    #[test]
    fn errno_checks_name_both_errnos() {
        let r: io::Result<()> = Err(io::Error::from_raw_os_error(libc::EINVAL));
        ensure_errno("X", r, libc::EINVAL).unwrap();
        let r: io::Result<()> = Err(io::Error::from_raw_os_error(libc::ENOENT));
        match ensure_errno("X", r, libc::EINVAL) {
            Err(Fail::Fail(m)) => assert_eq!(m, "X: got ENOENT, want EINVAL"),
            other => panic!("{other:?}"),
        }
        match ensure_errno("X", Ok(5u32), libc::EBUSY) {
            Err(Fail::Fail(m)) => assert_eq!(m, "X: succeeded (5), want EBUSY"),
            other => panic!("{other:?}"),
        }
    }
}
