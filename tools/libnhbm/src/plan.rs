//! Plans: a blob read from a file or from memory, and its offline
//! validation against a device or an arch.

use std::ffi::{c_char, c_int, c_void};

use nhbm::{validate, Limits, PlanError};

use crate::device::nhbm_device;
use crate::error::{call, call_void, Error, Result};
use crate::ptr::{bytes, c_path, cstr, handle, into_handle, out, out_opt, take_handle, Out};

/// A plan blob (`struct nhbm_plan_header` and its records), as read: it is
/// checked only by nhbm_plan_validate*() and by the kernel at nhbm_load().
pub struct nhbm_plan {
    /// The blob's bytes.
    pub(crate) blob: Vec<u8>,
}

/// Where validation failed: the offending record, when there is one.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct nhbm_plan_error {
    /// Index of the offending record, -1 when the error is about the plan
    /// as a whole.
    pub record: i64,
    /// var_id of the offending record, -1 when there is none.
    pub var_id: i64,
}

impl nhbm_plan_error {
    /// No offending record.
    const NONE: nhbm_plan_error = nhbm_plan_error {
        record: -1,
        var_id: -1,
    };

    fn of(e: &PlanError) -> Self {
        nhbm_plan_error {
            record: e.record.map_or(-1, |r| r as i64),
            var_id: e.var_id.map_or(-1, i64::from),
        }
    }
}

/// Hands a plan to C.
fn made(blob: Vec<u8>, plan: Out<'_, *mut nhbm_plan>) -> c_int {
    plan.set(into_handle(nhbm_plan { blob }));
    0
}

/// Reads the plan blob in the file at `path` into a new plan, stored in
/// `*plan`. The blob is not checked here.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `plan` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_plan_from_file(
    path: *const c_char,
    plan: *mut *mut nhbm_plan,
) -> c_int {
    call(|| {
        // SAFETY: `path` is NULL or a string, `plan` NULL or writable.
        let (path, plan) = unsafe { (c_path(path, "path")?, out(plan, "plan")?) };
        let blob = std::fs::read(path).map_err(|e| Error::io(&path.display().to_string(), &e))?;
        Ok(made(blob, plan))
    })
}

/// Copies the `len` bytes of a plan blob at `blob` into a new plan, stored
/// in `*plan`. The blob is not checked here.
///
/// # Safety
/// `blob` is NULL or readable for `len` bytes; `plan` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_plan_from_memory(
    blob: *const c_void,
    len: usize,
    plan: *mut *mut nhbm_plan,
) -> c_int {
    call(|| {
        // SAFETY: `blob` is NULL or readable for `len` bytes, `plan` NULL or
        // writable.
        let (blob, plan) = unsafe { (bytes(blob, len, "blob")?, out(plan, "plan")?) };
        Ok(made(blob.to_vec(), plan))
    })
}

/// Frees a plan (NULL is ignored). Plans loaded from it stay loaded.
///
/// # Safety
/// `plan` is NULL or a handle of nhbm_plan_from_*() not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_plan_free(plan: *mut nhbm_plan) {
    // SAFETY: `plan` is NULL or a live handle, given back once.
    call_void(|| drop(unsafe { take_handle(plan) }));
}

/// The device-dependent limits of arch `name` (`EINVAL` for another name).
fn arch_limits(name: &str) -> Result<Limits> {
    Limits::for_arch_name(name)
        .ok_or_else(|| Error::inval(format!("unknown arch {name:?} (v2, v3 or v4)")))
}

/// Validates `blob` against `limits`, reporting where it failed in `err`.
fn check(blob: &[u8], limits: &Limits, err: Option<Out<'_, nhbm_plan_error>>) -> Result<c_int> {
    let r = validate(blob, limits);
    if let Some(err) = err {
        err.set(
            r.as_ref()
                .err()
                .map_or(nhbm_plan_error::NONE, nhbm_plan_error::of),
        );
    }
    r.map(|_| 0).map_err(|e| Error::from(&e))
}

/// Checks `plan` offline against every rule NHBM_IOC_PLAN_LOAD applies
/// before allocating, with the limits of device `dev` (DEVICE_INFO).
///
/// Returns 0, or the negative errno the kernel would answer, with the rule
/// in nhbm_last_error() and, when `err` is not NULL, the offending record in
/// `*err` (record and var_id -1 when none or on success).
///
/// # Safety
/// `plan` and `dev` are NULL or live handles; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_plan_validate(
    plan: *const nhbm_plan,
    dev: *const nhbm_device,
    err: *mut nhbm_plan_error,
) -> c_int {
    call(|| {
        // SAFETY: `plan` and `dev` are NULL or live handles, `err` NULL or
        // writable.
        let (plan, dev, err) =
            unsafe { (handle(plan, "plan")?, handle(dev, "dev")?, out_opt(err)) };
        let info = dev
            .dev
            .device_info()
            .map_err(|e| Error::io("DEVICE_INFO", &e))?;
        check(&plan.blob, &Limits::from_device_info(&info), err)
    })
}

/// As nhbm_plan_validate(), with the limits of arch `arch` ("v2", "v3" or
/// "v4"; any other is -EINVAL) instead of a device.
///
/// # Safety
/// `plan` is NULL or a live handle; `arch` is NULL or a NUL-terminated
/// string; `err` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_plan_validate_arch(
    plan: *const nhbm_plan,
    arch: *const c_char,
    err: *mut nhbm_plan_error,
) -> c_int {
    call(|| {
        // SAFETY: `plan` is NULL or a live handle, `arch` NULL or a string,
        // `err` NULL or writable.
        let (plan, arch, err) =
            unsafe { (handle(plan, "plan")?, cstr(arch, "arch")?, out_opt(err)) };
        let limits = arch_limits(&arch.to_string_lossy())?;
        check(&plan.blob, &limits, err)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use nhbm::{Plan, Record};
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    use std::ptr;

    /// A plan handle over `blob`; free it with nhbm_plan_free.
    pub(crate) fn plan_of(blob: &[u8]) -> *mut nhbm_plan {
        let mut p = ptr::null_mut();
        // SAFETY: `blob` is readable for its length, `p` writable.
        let rc = unsafe { nhbm_plan_from_memory(blob.as_ptr().cast(), blob.len(), &mut p) };
        assert_eq!(rc, 0);
        p
    }

    fn last() -> String {
        // SAFETY: nhbm_last_error is a live NUL-terminated string.
        unsafe { CStr::from_ptr(crate::nhbm_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    fn validate_arch(p: *const nhbm_plan, arch: &CStr) -> (c_int, nhbm_plan_error) {
        let mut e = nhbm_plan_error {
            record: 99,
            var_id: 99,
        };
        // SAFETY: `p` is a live plan, `arch` a string, `e` writable.
        let rc = unsafe { nhbm_plan_validate_arch(p, arch.as_ptr(), &mut e) };
        (rc, e)
    }

    #[test]
    fn a_good_plan_validates_on_every_arch() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 4096))
            .with(Record::sb(2, 4096, 7, 0))
            .to_blob()
            .unwrap();
        let p = plan_of(&blob);
        assert_eq!(validate_arch(p, c"v3"), (0, nhbm_plan_error::NONE));
        assert_eq!(validate_arch(p, c"V4").0, 0);
        // Core 7 does not exist on V2.
        let (rc, e) = validate_arch(p, c"v2");
        assert_eq!(rc, -libc::EINVAL);
        assert_eq!(
            e,
            nhbm_plan_error {
                record: 1,
                var_id: 2
            }
        );
        assert!(last().contains("record 1 (var_id 2)"), "{}", last());
        assert_eq!(validate_arch(p, c"v9").0, -libc::EINVAL);
        assert!(last().contains("unknown arch"));
        // SAFETY: `p` is live; NULL err is allowed.
        let rc = unsafe { nhbm_plan_validate_arch(p, c"v3".as_ptr(), ptr::null_mut()) };
        assert_eq!(rc, 0);
        // SAFETY: `p` is live and freed once.
        unsafe { nhbm_plan_free(p) };
    }

    #[test]
    fn corrupt_blobs_fail_with_the_kernels_errno() {
        let good = Plan::new(0, 0)
            .with(Record::input(1, 4096))
            .to_blob()
            .unwrap();
        // Truncated header, nmem 0, and a record of type 0.
        let cases: [(Vec<u8>, i32, i64); 3] = [
            (good[..10].to_vec(), libc::EINVAL, -1),
            (
                {
                    let mut b = good.clone();
                    b[16..20].copy_from_slice(&0u32.to_le_bytes());
                    b
                },
                libc::EINVAL,
                -1,
            ),
            (
                {
                    let mut b = good.clone();
                    b[24..28].copy_from_slice(&0u32.to_le_bytes());
                    b
                },
                libc::EINVAL,
                0,
            ),
        ];
        for (blob, errno, record) in cases {
            let p = plan_of(&blob);
            let (rc, e) = validate_arch(p, c"v2");
            assert_eq!((rc, e.record), (-errno, record), "{}", last());
            // SAFETY: `p` is live and freed once.
            unsafe { nhbm_plan_free(p) };
        }
        // nmem past the maximum is E2BIG.
        let mut big = good.clone();
        big[16..20].copy_from_slice(&(2u32 << 20).to_le_bytes());
        let p = plan_of(&big);
        assert_eq!(validate_arch(p, c"v2").0, -libc::E2BIG);
        // SAFETY: `p` is live and freed once.
        unsafe { nhbm_plan_free(p) };
    }

    #[test]
    fn files_null_pointers_and_missing_files() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 64))
            .to_blob()
            .unwrap();
        let path = std::env::temp_dir().join(format!("libnhbm-test-{}.plan", std::process::id()));
        std::fs::write(&path, &blob).unwrap();
        let cpath = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        let mut p = ptr::null_mut();
        // SAFETY: valid strings, writable slots, live handles freed once.
        unsafe {
            assert_eq!(nhbm_plan_from_file(cpath.as_ptr(), &mut p), 0);
            assert_eq!((*p).blob, blob);
            nhbm_plan_free(p);
            std::fs::remove_file(&path).unwrap();
            assert_eq!(nhbm_plan_from_file(cpath.as_ptr(), &mut p), -libc::ENOENT);
            assert!(last().contains("No such file"), "{}", last());
            assert_eq!(nhbm_plan_from_file(ptr::null(), &mut p), -libc::EINVAL);
            assert_eq!(
                nhbm_plan_from_file(cpath.as_ptr(), ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(nhbm_plan_from_memory(ptr::null(), 0, &mut p), -libc::EINVAL);
            let rc = nhbm_plan_validate_arch(ptr::null(), c"v2".as_ptr(), ptr::null_mut());
            assert_eq!(rc, -libc::EINVAL);
            assert_eq!(last(), "plan is NULL");
            let q = plan_of(&blob);
            assert_eq!(
                nhbm_plan_validate_arch(q, ptr::null(), ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_plan_validate(q, ptr::null(), ptr::null_mut()),
                -libc::EINVAL
            );
            nhbm_plan_free(q);
            nhbm_plan_free(ptr::null_mut());
        }
    }
}
