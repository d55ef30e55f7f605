//! Errors of the plan format, each carrying the errno the kernel answers.

use std::fmt;

/// Name of an errno value ("EINVAL"), or its number when unknown here.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        0 => "OK",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSPC => "ENOSPC",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EPROTO => "EPROTO",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// The errno of an I/O error: its OS error number, or the errno of the
/// [`OpenError`](crate::OpenError) it carries.
pub fn io_errno(e: &std::io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()?
            .downcast_ref::<crate::OpenError>()
            .map(crate::OpenError::errno)
    })
}

/// Name of the errno of an I/O error ("ENOENT"), or its text when it has none.
pub fn io_errno_name(e: &std::io::Error) -> String {
    match io_errno(e) {
        Some(n) => errno_name(n),
        None => e.to_string(),
    }
}

/// A plan that the kernel would refuse, with the errno it would answer, the
/// offending record (index and var_id) when there is one, and the rule broken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    /// The errno PLAN_LOAD would answer.
    pub errno: i32,
    /// Index of the offending record, when there is one.
    pub record: Option<usize>,
    /// var_id of the offending record, when there is one.
    pub var_id: Option<u32>,
    /// The rule broken, in words.
    pub rule: String,
}

impl PlanError {
    /// An error about the plan as a whole.
    pub fn new(errno: i32, rule: impl Into<String>) -> Self {
        PlanError {
            errno,
            record: None,
            var_id: None,
            rule: rule.into(),
        }
    }
    /// An error about record `record` (var_id `var_id`).
    pub fn at(errno: i32, record: usize, var_id: u32, rule: impl Into<String>) -> Self {
        PlanError {
            errno,
            record: Some(record),
            var_id: Some(var_id),
            rule: rule.into(),
        }
    }
    /// An EINVAL about the plan as a whole.
    pub fn einval(rule: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, rule)
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.record, self.var_id) {
            (Some(i), Some(v)) => write!(f, "record {i} (var_id {v}): ")?,
            (Some(i), None) => write!(f, "record {i}: ")?,
            _ => {}
        }
        write!(f, "{} ({})", self.rule, errno_name(self.errno))
    }
}

impl std::error::Error for PlanError {}

impl From<PlanError> for std::io::Error {
    fn from(e: PlanError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}
