//! A progress line on stderr for work that takes a while: shown only when
//! stderr is a terminal and the work goes over a second, with the count
//! (search nodes) the work keeps, and cleared when it ends.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long work runs before its progress line appears.
const DELAY: Duration = Duration::from_secs(1);

/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// Runs `f` with a counter it may add to; on a terminal, draws
/// "`label`: N nodes searched" on stderr while it runs past a second.
pub fn with_spinner<T>(label: &str, f: impl FnOnce(&AtomicU64) -> T) -> T {
    if std::io::stderr().is_terminal() {
        spin(label, &mut std::io::stderr(), DELAY, f)
    } else {
        f(&AtomicU64::new(0))
    }
}

/// [`with_spinner`] drawing on `out` after `delay`.
fn spin<T>(
    label: &str,
    out: &mut (dyn Write + Send),
    delay: Duration,
    f: impl FnOnce(&AtomicU64) -> T,
) -> T {
    let nodes = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut drawn = false;
            let spin = ['|', '/', '-', '\\'];
            let mut k = 0;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(TICK.min(delay.max(Duration::from_millis(1))));
                if done.load(Ordering::Relaxed) || t0.elapsed() < delay {
                    continue;
                }
                let n = nodes.load(Ordering::Relaxed);
                let secs = t0.elapsed().as_secs_f64();
                let _ = write!(
                    out,
                    "\r{label}: {n} nodes searched, {secs:.1}s {} ",
                    spin[k % 4]
                );
                let _ = out.flush();
                drawn = true;
                k += 1;
            }
            if drawn {
                let _ = write!(out, "\r\x1b[K");
                let _ = out.flush();
            }
        });
        let r = f(&nodes);
        done.store(true, Ordering::Relaxed);
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_work_shows_its_count_then_clears_the_line() {
        let mut out = Vec::new();
        let r = spin("planning m", &mut out, Duration::ZERO, |n| {
            n.store(1234, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(350));
            7
        });
        assert_eq!(r, 7);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\rplanning m: 1234 nodes searched"),
            "{text:?}"
        );
        assert!(text.ends_with("\r\x1b[K"), "{text:?}");
    }

    #[test]
    fn short_work_draws_nothing() {
        let mut out = Vec::new();
        let r = spin("planning m", &mut out, Duration::from_secs(60), |_| 3);
        assert_eq!((r, out.len()), (3, 0));
    }
}
