//! The in-process resolver: RESOLVE's answers without a system call.

use std::ffi::c_int;

use nhbm::{Plan, Resolver};

use crate::error::{call, call_void, Error};
use crate::loaded::nhbm_loaded;
use crate::plan::nhbm_plan;
use crate::ptr::{handle, into_handle, out, take_handle};

/// Resolves the variables of one loaded plan in process, with the kernel's
/// rules and errnos; it holds a copy of the addresses and needs neither the
/// plan nor the loaded handle afterwards.
pub struct nhbm_resolver {
    /// The lookup table.
    pub(crate) r: Resolver,
}

/// A resolver for `plan` as `loaded` placed it, stored in `*resolver`.
///
/// Returns 0; -EINVAL when `plan` is not the plan `loaded` was loaded from
/// (another blob, even of as many records) or a pointer is NULL; -ENOENT
/// when a MR_REMOTE record has size 0 (its size is the remote variable's,
/// which only the kernel knows: use nhbm_resolve() for such a plan).
///
/// # Safety
/// `plan` and `loaded` are NULL or live handles; `resolver` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_resolver_new(
    plan: *const nhbm_plan,
    loaded: *const nhbm_loaded,
    resolver: *mut *mut nhbm_resolver,
) -> c_int {
    call(|| {
        // SAFETY: `plan` and `loaded` are NULL or live handles, `resolver`
        // NULL or writable.
        let (plan, loaded, resolver) = unsafe {
            (
                handle(plan, "plan")?,
                handle(loaded, "loaded")?,
                out(resolver, "resolver")?,
            )
        };
        if plan.blob != loaded.blob {
            let id = loaded.plan.plan_id;
            return Err(Error::inval(format!(
                "plan is not the one loaded as plan {id}"
            )));
        }
        let p = Plan::from_blob(&plan.blob).map_err(|e| Error::from(&e))?;
        let r = Resolver::new(&p, &loaded.plan, |_, _| None)
            .map_err(|e| Error::io("resolver of a plan and its load", &e))?;
        // SAFETY: the call's inputs are handles, no C buffer.
        unsafe { resolver.set(into_handle(nhbm_resolver { r })) };
        Ok(0)
    })
}

/// The device PA of `[offset, offset + size)` of variable `var_id` into
/// `*pa`, as nhbm_resolve() answers it (errnos included), without a system
/// call: a lookup, a bounds check and an add.
///
/// # Safety
/// `resolver` is NULL or a live handle; `pa` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_resolver_resolve(
    resolver: *const nhbm_resolver,
    var_id: u32,
    offset: u64,
    size: u64,
    pa: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: `resolver` is NULL or a live handle, `pa` NULL or writable.
        let (r, pa) = unsafe { (handle(resolver, "resolver")?, out(pa, "pa")?) };
        let addr = r.r.resolve(var_id, offset, size).map_err(|e| {
            Error::io(
                &format!("resolve of var {var_id} at {offset:#x}+{size:#x}"),
                &e,
            )
        })?;
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { pa.set(addr) };
        Ok(0)
    })
}

/// Frees a resolver (NULL is ignored).
///
/// # Safety
/// `resolver` is NULL or a handle of nhbm_resolver_new() not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_resolver_free(resolver: *mut nhbm_resolver) {
    // SAFETY: `resolver` is NULL or a live handle, given back once.
    call_void(|| drop(unsafe { take_handle(resolver) }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaded::tests::fake_loaded as loaded;
    use crate::plan::{nhbm_plan_free, tests::plan_of};
    use nhbm::Record;
    use std::ffi::CStr;
    use std::ptr;

    fn resolve(r: *const nhbm_resolver, var: u32, off: u64, size: u64) -> Result<u64, c_int> {
        let mut pa = 0;
        // SAFETY: `r` is a live resolver, `pa` writable.
        match unsafe { nhbm_resolver_resolve(r, var, off, size, &mut pa) } {
            0 => Ok(pa),
            e => Err(e),
        }
    }

    #[test]
    fn resolves_with_the_kernels_rules() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 4096))
            .with(Record::output(2, 8192))
            .with(Record::ptr(3, 1, 0))
            .to_blob()
            .unwrap();
        let p = plan_of(&blob);
        let l = loaded(&blob, vec![0x10000, 0x20000, 0x10000]);
        let mut r = ptr::null_mut();
        // SAFETY: live plan and loaded handle, writable slot.
        assert_eq!(unsafe { nhbm_resolver_new(p, &l, &mut r) }, 0);
        // SAFETY: the plan is live and freed once; the resolver keeps no
        // reference to it.
        unsafe { nhbm_plan_free(p) };
        assert_eq!(resolve(r, 1, 4095, 1), Ok(0x10fff));
        assert_eq!(resolve(r, 2, 0, 8192), Ok(0x20000));
        assert_eq!(resolve(r, 3, 0, 4096), Ok(0x10000));
        assert_eq!(resolve(r, 3, 8, 8), Err(-libc::EINVAL));
        assert_eq!(resolve(r, 1, 4095, 2), Err(-libc::EINVAL));
        assert_eq!(resolve(r, 1, u64::MAX, 2), Err(-libc::EINVAL));
        assert_eq!(resolve(r, 9, 0, 0), Err(-libc::ENOENT));
        let mut pa = 0;
        // SAFETY: NULL arguments are refused; `r` is freed once.
        unsafe {
            assert_eq!(
                nhbm_resolver_resolve(r, 1, 0, 0, ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_resolver_resolve(ptr::null(), 1, 0, 0, &mut pa),
                -libc::EINVAL
            );
            nhbm_resolver_free(r);
            nhbm_resolver_free(ptr::null_mut());
        }
    }

    #[test]
    fn only_the_loaded_plan_is_resolved() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 64))
            .to_blob()
            .unwrap();
        // As many records, another size: its addresses would lie outside
        // the loaded plan.
        let other = Plan::new(0, 0)
            .with(Record::input(1, 1 << 20))
            .to_blob()
            .unwrap();
        let l = loaded(&blob, vec![0x1000]);
        let (p, same, q) = (plan_of(&blob), plan_of(&blob), plan_of(&other));
        let mut r = ptr::null_mut();
        // SAFETY: live handles, writable slot; each handle freed once.
        unsafe {
            assert_eq!(nhbm_resolver_new(q, &l, &mut r), -libc::EINVAL);
            let msg = CStr::from_ptr(crate::nhbm_last_error());
            assert_eq!(msg, c"plan is not the one loaded as plan 1");
            assert!(r.is_null());
            // Another handle of the same bytes is the same plan.
            for h in [p, same] {
                assert_eq!(nhbm_resolver_new(h, &l, &mut r), 0);
                assert_eq!(resolve(r, 1, 0, 64), Ok(0x1000));
                nhbm_resolver_free(r);
            }
            for h in [p, same, q] {
                nhbm_plan_free(h);
            }
        }
    }

    #[test]
    fn invalid_and_remote_plans_and_null_arguments_are_refused() {
        let blob = Plan::new(0, 0)
            .with(Record::input(1, 64))
            .to_blob()
            .unwrap();
        let remote_blob = Plan::new(0, 0)
            .with(Record::remote(5, 0, 1, 1))
            .to_blob()
            .unwrap();
        let mut r = ptr::null_mut();
        let p = plan_of(&blob);
        let bad = plan_of(&blob[..8]);
        let remote = plan_of(&remote_blob);
        // SAFETY: live handles, writable slot; each plan freed once.
        unsafe {
            assert_eq!(
                nhbm_resolver_new(bad, &loaded(&blob[..8], vec![1]), &mut r),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_resolver_new(remote, &loaded(&remote_blob, vec![1]), &mut r),
                -libc::ENOENT
            );
            assert_eq!(nhbm_resolver_new(p, ptr::null(), &mut r), -libc::EINVAL);
            assert_eq!(
                nhbm_resolver_new(p, &loaded(&blob, vec![1]), ptr::null_mut()),
                -libc::EINVAL
            );
            for h in [p, bad, remote] {
                nhbm_plan_free(h);
            }
        }
        assert!(r.is_null());
    }
}
