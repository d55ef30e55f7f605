//! A KTAP runner: one `nhbm_uapi` suite nested in a one-test top level, each
//! case run in isolation (a panic is reported as a failure of that case).

use std::cell::RefCell;
use std::fmt::Debug;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use nhbm::io_errno_name;

/// Why a case did not pass.
#[derive(Debug)]
pub enum Fail {
    Fail(String),
    Skip(String),
}

pub type TestResult = Result<(), Fail>;

pub fn fail<T>(msg: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Fail(msg.into()))
}

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
    let want = nhbm::errno_name(errno);
    match r {
        Ok(v) => fail(format!("{what}: succeeded ({v:x?}), want {want}")),
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        Err(e) => fail(format!("{what}: got {}, want {want}", io_errno_name(&e))),
    }
}

/// `?` on an io::Result with the name of the operation in the failure.
pub trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, Fail>;
}

impl<T> Ctx<T> for io::Result<T> {
    fn ctx(self, what: &str) -> Result<T, Fail> {
        self.map_err(|e| Fail::Fail(format!("{what}: {} ({e})", io_errno_name(&e))))
    }
}

impl<T> Ctx<T> for Result<T, nhbm::PlanError> {
    fn ctx(self, what: &str) -> Result<T, Fail> {
        self.map_err(|e| Fail::Fail(format!("{what}: {e}")))
    }
}

pub struct Case {
    pub name: String,
    pub run: Box<dyn Fn() -> TestResult>,
}

impl Case {
    pub fn new(name: impl Into<String>, run: impl Fn() -> TestResult + 'static) -> Self {
        Case {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

thread_local! {
    static PANIC_MSG: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Writes one line and flushes it, so the serial console shows progress.
fn out(w: &mut dyn Write, line: &str) {
    let _ = writeln!(w, "{line}");
    let _ = w.flush();
}

fn diag(w: &mut dyn Write, indent: &str, text: &str) {
    for l in text.lines() {
        out(w, &format!("{indent}# {l}"));
    }
}

/// Runs `cases` as the subtest `suite` and prints KTAP on stdout. Returns
/// whether all cases passed or were skipped.
pub fn run(suite: &str, cases: &[Case]) -> bool {
    run_to(&mut io::stdout().lock(), suite, cases)
}

/// Like [`run`], writing the KTAP to `w`.
pub fn run_to(w: &mut dyn Write, suite: &str, cases: &[Case]) -> bool {
    panic::set_hook(Box::new(|info| {
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
    let t0 = Instant::now();
    out(w, "KTAP version 1");
    out(w, "1..1");
    out(w, "    KTAP version 1");
    out(w, &format!("    # Subtest: {suite}"));
    out(w, &format!("    1..{}", cases.len()));
    let mut all_ok = true;
    for (i, c) in cases.iter().enumerate() {
        let t = Instant::now();
        let r = panic::catch_unwind(AssertUnwindSafe(|| (c.run)()));
        let r = r.unwrap_or_else(|_| {
            let msg = PANIC_MSG
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "panic".into());
            Err(Fail::Fail(msg))
        });
        let n = i + 1;
        match r {
            Ok(()) => out(w, &format!("    ok {n} {}", c.name)),
            Err(Fail::Skip(why)) => out(w, &format!("    ok {n} {} # SKIP {why}", c.name)),
            Err(Fail::Fail(why)) => {
                all_ok = false;
                out(w, &format!("    not ok {n} {}", c.name));
                diag(w, "    ", &why);
            }
        }
        let ms = t.elapsed().as_millis();
        if ms >= 2000 {
            diag(w, "    ", &format!("{} took {ms} ms", c.name));
        }
    }
    let total = t0.elapsed().as_millis();
    diag(
        w,
        "    ",
        &format!("{suite}: {} cases in {total} ms", cases.len()),
    );
    out(
        w,
        &format!("{} 1 {suite}", if all_ok { "ok" } else { "not ok" }),
    );
    let _ = panic::take_hook();
    all_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_the_nested_ktap_shape() {
        let cases = [
            Case::new("passes", || Ok(())),
            Case::new("fails", || fail("first line\nsecond line")),
            Case::new("skips", || skip("no second channel")),
            Case::new("panics", || panic!("boom")),
        ];
        let mut buf = Vec::new();
        assert!(!run_to(&mut buf, "suite_x", &cases));
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[..11],
            &[
                "KTAP version 1",
                "1..1",
                "    KTAP version 1",
                "    # Subtest: suite_x",
                "    1..4",
                "    ok 1 passes",
                "    not ok 2 fails",
                "    # first line",
                "    # second line",
                "    ok 3 skips # SKIP no second channel",
                "    not ok 4 panics",
            ]
        );
        assert!(
            lines[11].starts_with("    # panic: boom at "),
            "{}",
            lines[11]
        );
        assert!(lines[12].starts_with("    # suite_x: 4 cases in "));
        assert_eq!(lines[13], "not ok 1 suite_x");
        assert_eq!(lines.len(), 14);
    }

    #[test]
    fn all_passing_closes_with_ok() {
        let mut buf = Vec::new();
        assert!(run_to(&mut buf, "s", &[Case::new("a", || Ok(()))]));
        assert!(String::from_utf8(buf).unwrap().ends_with("ok 1 s\n"));
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
