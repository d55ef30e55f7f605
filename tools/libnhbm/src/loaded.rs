//! Loaded plans: PLAN_LOAD and PLAN_UNLOAD, and the per-plan ioctls
//! (RESOLVE, RESOLVE_BATCH, MEM_WRITE, MEM_READ).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use nhbm::uapi::{MemXfer, ResolveBatch, ResolveQuery, IOC_RESOLVE_BATCH};
use nhbm::{Device, LoadedPlan};

use crate::device::nhbm_device;
use crate::error::{call, call_void, Error};
use crate::plan::nhbm_plan;
use crate::ptr::{handle, into_handle, out, take_handle, user_buf, user_ptr};

/// A plan staged on a device by nhbm_load(), or imported read-only by
/// nhbm_import(); nhbm_unload() unloads and frees it, nhbm_loaded_free()
/// frees it only. It keeps its device open.
pub struct nhbm_loaded {
    /// The device the plan is staged on.
    pub(crate) dev: Arc<Device>,
    /// What PLAN_LOAD reported (for an import: its id and bytes).
    pub(crate) plan: LoadedPlan,
    /// The blob that was loaded (shared with its nhbm_plan, not copied):
    /// what identifies the plan to nhbm_resolver_new(); empty for an
    /// import.
    pub(crate) blob: Arc<Vec<u8>>,
}

/// What PLAN_LOAD reported about a loaded plan (nhbm_loaded_info()).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nhbm_load_info {
    /// The plan's id on its device.
    pub plan_id: u32,
    /// Records in the plan: the length of `addrs`.
    pub nmem: u32,
    /// Device PA of the local scratchpad, NHBM_PA_UNSTAGED if none.
    pub local_scratchpad_pa: u64,
    /// Device PA of the shared scratchpad, NHBM_PA_UNSTAGED if none.
    pub shared_scratchpad_pa: u64,
    /// Device bytes the plan took from the pools.
    pub bytes_allocated: u64,
    /// Each record's device PA, in record order; owned by the handle, valid
    /// until it is freed (nhbm_unload() or nhbm_loaded_free()).
    pub addrs: *const u64,
}

/// NHBM_IOC_PLAN_LOAD of `plan` on `dev`, on HBM channel `channel` (or
/// NHBM_CHANNEL_ANY); the loaded plan's handle is stored in `*loaded`.
/// Returns 0 or the kernel's negative errno (the rules and their errnos are
/// nhbm_plan_validate()'s). The handle keeps the plan's blob (shared, not
/// copied) until it is freed, also when `plan` is freed first.
///
/// # Safety
/// `dev` and `plan` are NULL or live handles; `loaded` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_load(
    dev: *const nhbm_device,
    plan: *const nhbm_plan,
    channel: u32,
    loaded: *mut *mut nhbm_loaded,
) -> c_int {
    call(|| {
        // SAFETY: `dev` and `plan` are NULL or live handles, `loaded` NULL or
        // writable.
        let (dev, plan, loaded) = unsafe {
            (
                handle(dev, "dev")?,
                handle(plan, "plan")?,
                out(loaded, "loaded")?,
            )
        };
        let staged = dev
            .dev
            .plan_load(&plan.blob, channel)
            .map_err(|e| Error::io("PLAN_LOAD", &e))?;
        let l = into_handle(nhbm_loaded {
            dev: Arc::clone(&dev.dev),
            plan: staged,
            blob: Arc::clone(&plan.blob),
        });
        // SAFETY: the call's inputs are handles, no C buffer.
        unsafe { loaded.set(l) };
        Ok(0)
    })
}

/// What PLAN_LOAD reported about `loaded`, into `*info`.
///
/// # Safety
/// `loaded` is NULL or a live handle; `info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_loaded_info(
    loaded: *const nhbm_loaded,
    info: *mut nhbm_load_info,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle, `info` NULL or writable.
        let (l, info) = unsafe { (handle(loaded, "loaded")?, out(info, "info")?) };
        let p = &l.plan;
        let i = nhbm_load_info {
            plan_id: p.plan_id,
            // PLAN_LOAD refuses more than NHBM_MAX_PLAN_RECORDS records.
            nmem: u32::try_from(p.addrs.len()).map_err(|_| Error::inval("nmem"))?,
            local_scratchpad_pa: p.local_scratchpad_pa,
            shared_scratchpad_pa: p.shared_scratchpad_pa,
            bytes_allocated: p.bytes_allocated,
            addrs: p.addrs.as_ptr(),
        };
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { info.set(i) };
        Ok(0)
    })
}

/// NHBM_IOC_PLAN_UNLOAD, then frees the handle. When the kernel refuses
/// (-EBUSY while a MR_REMOTE record of another loaded plan points into this
/// one), the plan stays loaded and the handle valid: unload that plan first
/// and call again, or release the handle with nhbm_loaded_free(). NULL is
/// ignored: 0, nhbm_last_error() left as it was.
///
/// # Safety
/// `loaded` is NULL or a handle of nhbm_load() or nhbm_import() not freed
/// before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_unload(loaded: *mut nhbm_loaded) -> c_int {
    call(|| {
        if loaded.is_null() {
            return Ok(0);
        }
        // SAFETY: `loaded` is a live handle.
        let l = unsafe { handle(loaded, "loaded") }?;
        l.dev
            .plan_unload(l.plan.plan_id)
            .map_err(|e| Error::io("PLAN_UNLOAD", &e))?;
        // SAFETY: `loaded` is a live handle, given back once, here where its
        // plan is gone; `l` is not used after.
        drop(unsafe { take_handle(loaded) });
        Ok(0)
    })
}

/// Frees a loaded plan's handle without unloading the plan (NULL is
/// ignored), after nhbm_unload() failed for instance. The plan stays loaded
/// until its device file is closed: when the last handle holding the device
/// (its nhbm_device and the nhbm_loaded of every plan loaded through it) is
/// released.
///
/// # Safety
/// `loaded` is NULL or a handle of nhbm_load() or nhbm_import() not freed
/// before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_loaded_free(loaded: *mut nhbm_loaded) {
    // SAFETY: `loaded` is NULL or a live handle, given back once.
    call_void(|| drop(unsafe { take_handle(loaded) }));
}

/// NHBM_IOC_RESOLVE: the device PA of `[offset, offset + size)` of variable
/// `var_id` into `*pa`. -ENOENT for an unknown variable, -EINVAL for a range
/// outside it.
///
/// # Safety
/// `loaded` is NULL or a live handle; `pa` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_resolve(
    loaded: *const nhbm_loaded,
    var_id: u32,
    offset: u64,
    size: u64,
    pa: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle, `pa` NULL or writable.
        let (l, pa) = unsafe { (handle(loaded, "loaded")?, out(pa, "pa")?) };
        let addr = l
            .dev
            .resolve(l.plan.plan_id, var_id, offset, size)
            .map_err(|e| Error::io(&format!("RESOLVE of var {var_id}"), &e))?;
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { pa.set(addr) };
        Ok(0)
    })
}

/// NHBM_IOC_RESOLVE_BATCH: answers the `count` queries at `queries` in
/// place (each its own `status` and `addr`). Returns 0 when the batch was
/// answered (each query may still have failed), or a negative errno for the
/// whole batch (-E2BIG past NHBM_MAX_BATCH, -EFAULT for a bad buffer).
///
/// # Safety
/// `loaded` is NULL or a live handle; `queries` is NULL or `count` queries
/// no other thread touches during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_resolve_batch(
    loaded: *const nhbm_loaded,
    queries: *mut ResolveQuery,
    count: usize,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle.
        let l = unsafe { handle(loaded, "loaded") }?;
        let queries = user_ptr(queries.cast_const().cast(), "queries")?;
        let count = u32::try_from(count)
            .map_err(|_| Error::new(libc::E2BIG, format!("{count} queries in one batch")))?;
        let mut arg = ResolveBatch {
            plan_id: l.plan.plan_id,
            count,
            queries,
        };
        // SAFETY: `arg` is the request's argument; the kernel reads and
        // writes the caller's queries itself (EFAULT if they are not there).
        unsafe { l.dev.ioctl_raw(IOC_RESOLVE_BATCH, (&raw mut arg).cast()) }
            .map_err(|e| Error::io("RESOLVE_BATCH", &e))?;
        Ok(0)
    })
}

/// MEM_WRITE (`write`) or MEM_READ of `len` bytes at `buf`.
fn xfer(
    l: &nhbm_loaded,
    write: bool,
    var_id: u32,
    offset: u64,
    buf: *const c_void,
    len: usize,
) -> crate::error::Result<c_int> {
    let what = if write { "MEM_WRITE" } else { "MEM_READ" };
    let (buf, len) = user_buf(buf, len, "buf")?;
    let mut arg = MemXfer {
        plan_id: l.plan.plan_id,
        var_id,
        offset,
        len,
        buf,
    };
    // SAFETY: `arg` is the request's argument; the kernel copies the
    // caller's buffer itself (EFAULT if it is not there).
    unsafe { l.dev.mem_xfer_raw(write, &mut arg) }
        .map_err(|e| Error::io(&format!("{what} of var {var_id}"), &e))?;
    Ok(0)
}

/// NHBM_IOC_MEM_WRITE: the `len` bytes at `buf` into variable `var_id` at
/// `offset`. A `len` past SSIZE_MAX is -EOVERFLOW.
///
/// # Safety
/// `loaded` is NULL or a live handle; `buf` is NULL or readable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_mem_write(
    loaded: *const nhbm_loaded,
    var_id: u32,
    offset: u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle.
        let l = unsafe { handle(loaded, "loaded") }?;
        xfer(l, true, var_id, offset, buf, len)
    })
}

/// NHBM_IOC_MEM_READ: `len` bytes of variable `var_id` at `offset` into
/// `buf`. A `len` past SSIZE_MAX is -EOVERFLOW.
///
/// # Safety
/// `loaded` is NULL or a live handle; `buf` is NULL or writable for `len`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_mem_read(
    loaded: *const nhbm_loaded,
    var_id: u32,
    offset: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle.
        let l = unsafe { handle(loaded, "loaded") }?;
        xfer(l, false, var_id, offset, buf.cast_const(), len)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::last_message as last;
    use std::ptr;

    /// A loaded handle of `blob` as PLAN_LOAD would make it, without a
    /// device: the device is /dev/null, which answers every ioctl ENOTTY.
    pub(crate) fn fake_loaded(blob: &[u8], addrs: Vec<u64>) -> nhbm_loaded {
        let dev = Device::open_path_unchecked("/dev/null").unwrap();
        nhbm_loaded {
            dev: Arc::new(dev),
            plan: LoadedPlan {
                plan_id: 1,
                addrs,
                ..Default::default()
            },
            blob: Arc::new(blob.to_vec()),
        }
    }

    #[test]
    fn null_arguments_are_einval() {
        let mut q = ResolveQuery::default();
        let mut b = [0u8; 4];
        // SAFETY: NULL handles are refused before anything is read.
        unsafe {
            assert_eq!(
                nhbm_load(ptr::null(), ptr::null(), 0, ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_loaded_info(ptr::null(), ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_resolve(ptr::null(), 1, 0, 0, ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(nhbm_resolve_batch(ptr::null(), &mut q, 1), -libc::EINVAL);
            assert_eq!(
                nhbm_mem_write(ptr::null(), 1, 0, b.as_ptr().cast(), 4),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_mem_read(ptr::null(), 1, 0, b.as_mut_ptr().cast(), 4),
                -libc::EINVAL
            );
            nhbm_loaded_free(ptr::null_mut());
        }
    }

    #[test]
    fn unload_of_null_is_0_and_keeps_the_message() {
        crate::error::set_last("before");
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { nhbm_unload(ptr::null_mut()) }, 0);
        assert_eq!(last(), "before");
    }

    #[test]
    fn a_refused_unload_keeps_the_handle() {
        let dev = nhbm_device {
            dev: Arc::new(Device::open_path_unchecked("/dev/null").unwrap()),
        };
        let mut l = fake_loaded(b"blob", vec![7]);
        l.dev = Arc::clone(&dev.dev);
        let l = into_handle(l);
        let mut info = nhbm_load_info {
            plan_id: 0,
            nmem: 0,
            local_scratchpad_pa: 0,
            shared_scratchpad_pa: 0,
            bytes_allocated: 0,
            addrs: ptr::null(),
        };
        // SAFETY: `l` stays live until nhbm_loaded_free, `info` is writable.
        unsafe {
            assert_eq!(nhbm_unload(l), -libc::ENOTTY);
            assert!(last().starts_with("PLAN_UNLOAD"), "{}", last());
            assert_eq!(nhbm_loaded_info(l, &mut info), 0);
            assert_eq!((info.plan_id, info.nmem, *info.addrs), (1, 1, 7));
            assert_eq!(Arc::strong_count(&dev.dev), 2);
            nhbm_loaded_free(l);
        }
        assert_eq!(Arc::strong_count(&dev.dev), 1);
    }

    #[test]
    fn transfers_past_ssize_max_are_eoverflow() {
        let l = fake_loaded(b"blob", vec![0]);
        let mut b = [0u8; 4];
        let len = isize::MAX as usize + 1;
        // SAFETY: the length is refused before the kernel sees the buffer.
        unsafe {
            assert_eq!(
                nhbm_mem_write(&l, 1, 0, b.as_ptr().cast(), len),
                -libc::EOVERFLOW
            );
            assert_eq!(
                nhbm_mem_read(&l, 1, 0, b.as_mut_ptr().cast(), usize::MAX),
                -libc::EOVERFLOW
            );
            assert!(last().contains("too large"), "{}", last());
            // Within the bound, it reaches the device (/dev/null: ENOTTY).
            assert_eq!(
                nhbm_mem_read(&l, 1, 0, b.as_mut_ptr().cast(), 4),
                -libc::ENOTTY
            );
        }
    }
}
