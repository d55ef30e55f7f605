//! Failures of `nhbm`: their kind and exit status, a hint on what to do,
//! and how they are printed (a line on stderr, or a JSON object on stdout
//! under `--json`).
//!
//! Kinds are decided by errno (`nhbm::io_errno`, which also finds the errno
//! of a device open carried inside an `io::Error`) and by error
//! type, never by message text.

use std::fmt;
use std::io;
use std::process::ExitCode;

use nhbm::errno_name;
use serde_json::json;

/// The exit statuses of `nhbm`, as `nhbm --help` lists them.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  any other failure
  2  usage error: the command line is wrong
  3  no such device: the module is not loaded, or no device has that index
  4  permission denied on the device node
  5  invalid input: not a plan or model, an invalid one, or a model that
     cannot be planned within its memories
  6  the kernel refused a request (an ioctl failed; the errno is named)
With --json a failure is one JSON object on stdout:
  {\"error\": MESSAGE, \"errno\": \"ENOENT\" or null, \"exit_code\": N, \"hint\": TEXT or null}";

/// Why `nhbm` failed, as its exit status tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 1: any failure without a status of its own.
    Failure = 1,
    /// 2: the command line is wrong (clap's status).
    Usage = 2,
    /// 3: the device node does not exist.
    NoDevice = 3,
    /// 4: the device node may not be opened.
    Permission = 4,
    /// 5: a plan or model that is not one, is invalid, or does not fit.
    Invalid = 5,
    /// 6: the kernel refused an ioctl.
    Refused = 6,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// A failure with its kind, errno and what to do about it.
#[derive(Debug)]
pub struct Failure {
    /// Its exit status.
    pub exit: Exit,
    /// The errno behind it, if any.
    pub errno: Option<i32>,
    /// What failed.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// A failure of kind `exit`, without errno or hint.
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        Failure {
            exit,
            errno: None,
            message: message.into(),
            hint: None,
        }
    }

    /// An invalid plan or model, with the errno PLAN_LOAD would answer.
    pub fn invalid(message: impl Into<String>, errno: Option<i32>) -> Self {
        Failure {
            errno,
            ..Failure::new(Exit::Invalid, message)
        }
    }

    /// Opening the device node `path` failed with `errno` (`detail` says
    /// how when there is none): a missing node (the module is not loaded,
    /// or no such index) or a permission problem, each with what to do.
    pub fn open(path: &std::path::Path, errno: Option<i32>, detail: &dyn fmt::Display) -> Self {
        let (exit, hint) = match errno {
            Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => (
                Exit::NoDevice,
                Some(format!(
                    "{} does not exist: the neuron_hbm module is not loaded, or no device has \
                     that index. Load it with `sudo modprobe neuron_hbm` (or `sudo insmod \
                     neuron_hbm.ko` from the build tree); `ls /dev/neuron_hbm*` lists the devices",
                    path.display()
                )),
            ),
            Some(libc::EACCES | libc::EPERM) => (
                Exit::Permission,
                Some(format!(
                    "{} is mode 0660, group neuron: add yourself to the group with `sudo usermod \
                     -aG neuron $USER` and log in again (or run as root)",
                    path.display()
                )),
            ),
            _ => (Exit::Failure, None),
        };
        let message = match errno {
            Some(n) => format!(
                "cannot open {}: {}",
                path.display(),
                describe(&io::Error::from_raw_os_error(n))
            ),
            None => detail.to_string(),
        };
        Failure {
            exit,
            errno,
            message,
            hint,
        }
    }

    /// The kernel answered request `what` with `e`.
    pub fn refused(what: &str, e: &io::Error) -> Self {
        Failure {
            exit: Exit::Refused,
            errno: nhbm::io_errno(e),
            message: format!("{what}: {}", describe(e)),
            hint: None,
        }
    }
}

/// An I/O error as "ENOENT (No such file or directory)", or its text.
fn describe(e: &io::Error) -> String {
    match nhbm::io_errno(e) {
        Some(n) => format!("{} ({e})", errno_name(n)),
        None => e.to_string(),
    }
}

/// What a failure `e` is: its status, errno and hint, from the first
/// error in its chain that tells.
pub fn classify(e: &anyhow::Error) -> (Exit, Option<i32>, Option<&str>) {
    for c in e.chain() {
        if let Some(f) = c.downcast_ref::<Failure>() {
            return (f.exit, f.errno, f.hint.as_deref());
        }
        if let Some(p) = c.downcast_ref::<nhbm::PlanError>() {
            return (Exit::Invalid, Some(p.errno), None);
        }
        if c.is::<nhbm_planner::ModelError>()
            || c.is::<nhbm_planner::PlannerError>()
            || c.is::<nhbm_planner::TargetError>()
        {
            return (Exit::Invalid, None, None);
        }
        #[cfg(feature = "onnx")]
        if let Some(i) = c.downcast_ref::<nhbm_onnx::ImportError>() {
            return (Exit::Invalid, None, import_hint(i));
        }
        if let Some(io) = c.downcast_ref::<io::Error>() {
            return (Exit::Failure, nhbm::io_errno(io), None);
        }
    }
    (Exit::Failure, None, None)
}

/// What to do about an ONNX model that does not import.
#[cfg(feature = "onnx")]
fn import_hint(e: &nhbm_onnx::ImportError) -> Option<&'static str> {
    match e {
        nhbm_onnx::ImportError::File { error, .. } => import_hint(error),
        nhbm_onnx::ImportError::DynamicShape { .. } => {
            Some("give graph inputs with symbolic dimensions a shape: --input-shape NAME=D0,D1,...")
        }
        _ => None,
    }
}

/// Prints the failure `e` (as JSON on stdout with `json`, else on stderr)
/// and returns its exit status.
pub fn report(e: &anyhow::Error, json: bool) -> ExitCode {
    let (exit, errno, hint) = classify(e);
    print(&format!("{e:#}"), exit.code(), errno, hint, json);
    ExitCode::from(exit.code())
}

/// A command line clap refused (or `--help`/`--version`, which it prints):
/// printed by clap, or as JSON when the command line asks for `--json`.
pub fn usage(e: &clap::Error, args: &[String]) -> ExitCode {
    let code = if e.use_stderr() {
        Exit::Usage.code()
    } else {
        0
    };
    let json = args.iter().any(|a| a == "--json" || a == "-j");
    if !e.use_stderr() || !json {
        let _ = e.print();
        return ExitCode::from(code);
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first);
    print(message, code, None, None, true);
    ExitCode::from(code)
}

fn print(message: &str, code: u8, errno: Option<i32>, hint: Option<&str>, json: bool) {
    if json {
        let v = json!({
            "error": message, "errno": errno.map(errno_name), "exit_code": code, "hint": hint,
        });
        println!("{v}");
    } else {
        eprintln!("nhbm: {message}");
        if let Some(h) = hint {
            eprintln!("nhbm: hint: {h}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn os(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    fn open(path: &str, errno: i32) -> Failure {
        Failure::open(Path::new(path), Some(errno), &"")
    }

    #[test]
    fn a_missing_device_says_how_to_load_the_module() {
        let f = open("/dev/neuron_hbm7", libc::ENOENT);
        assert_eq!((f.exit, f.errno), (Exit::NoDevice, Some(libc::ENOENT)));
        let h = f.hint.unwrap();
        assert!(
            h.contains("modprobe neuron_hbm") && h.contains("insmod neuron_hbm.ko"),
            "{h}"
        );
        assert!(
            h.contains("ls /dev/neuron_hbm*") && h.contains("/dev/neuron_hbm7"),
            "{h}"
        );
        assert!(f.message.contains("ENOENT"), "{}", f.message);
    }

    #[test]
    fn permission_denied_names_the_group() {
        let f = open("/dev/neuron_hbm0", libc::EACCES);
        assert_eq!(f.exit, Exit::Permission);
        let h = f.hint.unwrap();
        assert!(
            h.contains("0660") && h.contains("group neuron") && h.contains("usermod"),
            "{h}"
        );
        let other = open("/dev/neuron_hbm0", libc::EIO);
        assert_eq!((other.exit, other.hint), (Exit::Failure, None));
        let abi = Failure::open(Path::new("/dev/neuron_hbm0"), None, &"UAPI version 9");
        assert_eq!(
            (abi.exit, abi.message.as_str()),
            (Exit::Failure, "UAPI version 9")
        );
    }

    /// The kind comes from the error's type and errno, wherever it is in
    /// the chain, not from its text.
    #[test]
    fn failures_are_classified_through_their_context() {
        let e = anyhow::Error::new(Failure::refused("PLAN_LOAD p", &os(libc::ENOSPC)))
            .context("line 3");
        assert_eq!(classify(&e), (Exit::Refused, Some(libc::ENOSPC), None));
        let e = anyhow::Error::new(nhbm::PlanError::einval("nmem is 0")).context("p.plan");
        assert_eq!(classify(&e), (Exit::Invalid, Some(libc::EINVAL), None));
        let e = anyhow::Error::new(nhbm_planner::PlannerError("no room".into()));
        assert_eq!(classify(&e).0, Exit::Invalid);
        let e = anyhow::Error::new(os(libc::ENOENT)).context("device not found");
        assert_eq!(classify(&e), (Exit::Failure, Some(libc::ENOENT), None));
        assert_eq!(
            classify(&anyhow::anyhow!("no such device")).0,
            Exit::Failure
        );
    }

    #[test]
    fn exit_codes_are_distinct_and_listed_in_the_help() {
        let all = [
            Exit::Failure,
            Exit::Usage,
            Exit::NoDevice,
            Exit::Permission,
            Exit::Invalid,
            Exit::Refused,
        ];
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), all.len());
        assert_eq!(Exit::Usage.code(), 2);
        for c in codes {
            assert!(EXIT_STATUS_HELP.contains(&format!("\n  {c}  ")), "{c}");
        }
    }
}
