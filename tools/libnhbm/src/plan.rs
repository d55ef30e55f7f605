//! Plans: a blob read from a file or from memory, and its offline
//! validation against a device or an arch.

use std::ffi::{c_char, c_int, c_void};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use nhbm::uapi::{MAX_PLAN_RECORDS, MEM_REF_SIZE, PLAN_HEADER_SIZE};
use nhbm::{validate, Limits, PlanError};

use crate::device::nhbm_device;
use crate::error::{call, call_void, Error, Result};
use crate::ptr::{bytes, c_path, cstr, handle, into_handle, out, out_opt, take_handle, Out};

/// A plan blob (`struct nhbm_plan_header` and its records), as read: it is
/// checked only by nhbm_plan_validate*() and by the kernel at nhbm_load().
pub struct nhbm_plan {
    /// The blob's bytes, shared with the plans loaded from it.
    pub(crate) blob: Arc<Vec<u8>>,
}

/// The largest file nhbm_plan_from_file() reads: a header,
/// NHBM_MAX_PLAN_RECORDS records and a 4 GiB data area. The kernel bounds
/// the records, not the data area (payloads, names, lists).
const PLAN_FILE_MAX: u64 =
    (PLAN_HEADER_SIZE + MAX_PLAN_RECORDS as usize * MEM_REF_SIZE) as u64 + (4 << 30);

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
///
/// # Safety
/// As [`Out::set`].
unsafe fn made(blob: Arc<Vec<u8>>, plan: Out<*mut nhbm_plan>) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe { plan.set(into_handle(nhbm_plan { blob })) };
    0
}

/// The file at `path`, if it holds at most `max` bytes (`E2BIG` beyond,
/// read no further).
fn read_at_most(path: &Path, max: u64) -> Result<Vec<u8>> {
    let what = path.display().to_string();
    let too_big = || {
        Error::new(
            libc::E2BIG,
            format!("{what}: more than {max} bytes, larger than any plan"),
        )
    };
    let f = File::open(path).map_err(|e| Error::io(&what, &e))?;
    // A regular file says its size: refuse it before reading.
    let size = f.metadata().map_or(0, |m| m.len());
    if size > max {
        return Err(too_big());
    }
    let mut blob = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(max.saturating_add(1))
        .read_to_end(&mut blob)
        .map_err(|e| Error::io(&what, &e))?;
    if blob.len() as u64 > max {
        return Err(too_big());
    }
    Ok(blob)
}

/// Reads the plan blob in the file at `path` into a new plan, stored in
/// `*plan`. The blob is not checked here. A file of more than 4454350872
/// bytes (a header, NHBM_MAX_PLAN_RECORDS records and a 4 GiB data area)
/// is -E2BIG, and is read no further; nhbm_plan_from_memory() takes a blob
/// of any size.
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
        let blob = read_at_most(path, PLAN_FILE_MAX)?;
        // SAFETY: `path` is not used after the file is read.
        Ok(unsafe { made(Arc::new(blob), plan) })
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
        let copy = Arc::new(blob.to_vec());
        // SAFETY: `blob` is not used after it is copied.
        Ok(unsafe { made(copy, plan) })
    })
}

/// Frees a plan (NULL is ignored). Plans loaded from it stay loaded (their
/// handles keep its blob).
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

/// Validates `blob` with `limits` (or fails with their error) and, when
/// `err` is given, writes where it failed there: the offending record, or
/// none (-1, -1) on success and for an error of no record.
///
/// # Safety
/// As [`Out::set`] (`blob` is a plan's own, not a C input).
unsafe fn check(
    blob: &[u8],
    limits: Result<Limits>,
    err: Option<Out<nhbm_plan_error>>,
) -> Result<c_int> {
    let (at, r) = match limits.map(|l| validate(blob, &l)) {
        Ok(Ok(_)) => (nhbm_plan_error::NONE, Ok(0)),
        Ok(Err(e)) => (nhbm_plan_error::of(&e), Err(Error::from(&e))),
        Err(e) => (nhbm_plan_error::NONE, Err(e)),
    };
    if let Some(err) = err {
        // SAFETY: forwarded to the caller.
        unsafe { err.set(at) };
    }
    r
}

/// Checks `plan` offline against every rule NHBM_IOC_PLAN_LOAD applies
/// before allocating, with the limits of device `dev` (DEVICE_INFO).
///
/// Returns 0, or the negative errno the kernel would answer (or that of
/// DEVICE_INFO), with the rule in nhbm_last_error(). When `err` is not NULL
/// and neither `plan` nor `dev` is, `*err` is always written: the offending
/// record, or record and var_id -1 when there is none (on success too).
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
        let limits = dev
            .dev
            .device_info()
            .map(|info| Limits::from_device_info(&info))
            .map_err(|e| Error::io("DEVICE_INFO", &e));
        // SAFETY: the call's inputs are handles, no C buffer.
        unsafe { check(&plan.blob, limits, err) }
    })
}

/// As nhbm_plan_validate(), with the limits of arch `arch` ("v2", "v3" or
/// "v4"; any other is -EINVAL) instead of a device. `*err` is written
/// when `err`, `plan` and `arch` are not NULL.
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
        let limits = arch_limits(&arch.to_string_lossy());
        // SAFETY: `arch` is not used after its limits are found.
        unsafe { check(&plan.blob, limits, err) }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::last_message as last;
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
    fn err_is_written_on_every_failure_past_the_null_checks() {
        let p = plan_of(
            &Plan::new(0, 0)
                .with(Record::input(1, 64))
                .to_blob()
                .unwrap(),
        );
        // An unknown arch, and a device whose DEVICE_INFO fails.
        let (rc, e) = validate_arch(p, c"v9");
        assert_eq!((rc, e), (-libc::EINVAL, nhbm_plan_error::NONE));
        let dev = nhbm_device {
            dev: Arc::new(nhbm::Device::open_path_unchecked("/dev/null").unwrap()),
        };
        let mut e = nhbm_plan_error {
            record: 99,
            var_id: 99,
        };
        // SAFETY: live handles, writable `e`; `p` freed once.
        unsafe {
            assert_eq!(nhbm_plan_validate(p, &dev, &mut e), -libc::ENOTTY);
            assert!(last().starts_with("DEVICE_INFO"), "{}", last());
            assert_eq!(e, nhbm_plan_error::NONE);
            nhbm_plan_free(p);
        }
    }

    #[test]
    fn outputs_may_lie_inside_inputs() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 64))
            .to_blob()
            .unwrap();
        // The blob in 8-byte words, so that a pointer may be stored at its
        // start: the handle overwrites the header's first word.
        let mut words = vec![0u64; blob.len().div_ceil(8)];
        let base = words.as_mut_ptr();
        // SAFETY: `base` is valid for `blob.len()` bytes (and more).
        unsafe { ptr::copy_nonoverlapping(blob.as_ptr(), base.cast(), blob.len()) };
        // SAFETY: `base` is readable for the blob and writable for a pointer.
        let rc = unsafe { nhbm_plan_from_memory(base.cast(), blob.len(), base.cast()) };
        assert_eq!(rc, 0);
        let p = words[0] as *mut nhbm_plan;
        // SAFETY: `p` is the plan just made.
        assert_eq!(unsafe { &*(*p).blob }, &blob[..]);
        // The arch name and the error record in the same 16 bytes.
        let mut buf = [0u64; 2];
        let at = buf.as_mut_ptr();
        // SAFETY: `at` is valid for 16 bytes.
        unsafe { ptr::copy_nonoverlapping(c"v2".as_ptr(), at.cast(), 3) };
        // SAFETY: `at` is a NUL-terminated string and writable for the
        // error record; `p` is live and freed once.
        unsafe {
            assert_eq!(nhbm_plan_validate_arch(p, at.cast(), at.cast()), 0);
            nhbm_plan_free(p);
        }
        assert_eq!(buf, [u64::MAX, u64::MAX]);
    }

    #[test]
    fn files_past_the_bound_are_e2big() {
        let path = std::env::temp_dir().join(format!("libnhbm-big-{}.plan", std::process::id()));
        std::fs::write(&path, [7u8; 100]).unwrap();
        assert_eq!(read_at_most(&path, 100).unwrap(), [7u8; 100]);
        // A regular file: refused by its size.
        let e = read_at_most(&path, 99).unwrap_err();
        assert_eq!(e.errno, libc::E2BIG);
        assert!(e.msg.contains("more than 99 bytes"), "{}", e.msg);
        std::fs::remove_file(&path).unwrap();
        // An endless one: read no further than the bound.
        let zero = Path::new("/dev/zero");
        assert_eq!(read_at_most(zero, 4096).unwrap_err().errno, libc::E2BIG);
        // The bound the documentation gives.
        assert_eq!(PLAN_FILE_MAX, 4_454_350_872);
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
            assert_eq!(*(*p).blob, *blob);
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
