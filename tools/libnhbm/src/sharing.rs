//! Plans shared between processes: NHBM_IOC_PLAN_EXPORT makes a dma-buf
//! of a loaded plan, NHBM_IOC_PLAN_IMPORT lists it, read-only, in another
//! open file of the same device.

use std::ffi::c_int;
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::sync::Arc;

use nhbm::uapi::{PlanImport, PA_UNSTAGED};
use nhbm::LoadedPlan;

use crate::device::nhbm_device;
use crate::error::{call, Error};
use crate::loaded::nhbm_loaded;
use crate::ptr::{handle, into_handle, out, out_opt};

/// NHBM_IOC_PLAN_EXPORT: a dma-buf of `loaded` into `*fd`, through which
/// another process with the same device open imports the plan read-only
/// (nhbm_import()); pass it over a Unix socket with SCM_RIGHTS. The
/// descriptor is the caller's, close-on-exec: close it once it is passed
/// on. The plan's device memory stays until it is unloaded here and no
/// descriptor or import of it is left, whichever is later.
///
/// Returns 0, -EACCES when `loaded` is itself an import, -EIO after a
/// device reset, -EMFILE when the process has no free descriptor.
///
/// # Safety
/// `loaded` is NULL or a live handle; `fd` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_export(loaded: *const nhbm_loaded, fd: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle, `fd` NULL or writable.
        let (l, fd) = unsafe { (handle(loaded, "loaded")?, out(fd, "fd")?) };
        let buf = l
            .dev
            .plan_export(l.plan.plan_id)
            .map_err(|e| Error::io("PLAN_EXPORT", &e))?;
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { fd.set(buf.into_raw_fd()) };
        Ok(0)
    })
}

/// NHBM_IOC_PLAN_IMPORT: the plan of `fd`, a dma-buf of nhbm_export() on
/// the same device (from another process, say), as a read-only plan of
/// `dev` with an id of its own; its handle is stored in `*loaded`, the
/// ioctl's answer (the plan's id here, its number of variables, the device
/// bytes it holds) in `*info` (NULL: not wanted). The caller keeps `fd`.
/// No device memory is allocated or copied: the memory stays charged to
/// the exporter.
///
/// nhbm_resolve(), nhbm_resolve_batch() and nhbm_mem_read() work on the
/// handle; nhbm_mem_write() and nhbm_map(), which maps read-write, are
/// -EACCES, and so is nhbm_export(). nhbm_loaded_info() reports no record
/// (`nmem` 0), no scratchpad and the plan's bytes as `bytes_allocated`;
/// the handle serves no nhbm_resolver_new(). nhbm_unload() drops the
/// import, and the exporter's plan stays.
///
/// Returns 0, -EBADF when `fd` is no open descriptor, -EINVAL when it is no
/// dma-buf of neuron_hbm, -EXDEV for one of another device, -E2BIG when
/// `dev` holds NHBM_MAX_PLANS_PER_FILE plans, -EIO after a device reset.
///
/// # Safety
/// `dev` is NULL or a live handle; `loaded` is NULL or writable; `info` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_import(
    dev: *const nhbm_device,
    fd: c_int,
    loaded: *mut *mut nhbm_loaded,
    info: *mut PlanImport,
) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle, `loaded` NULL or writable,
        // `info` NULL or writable.
        let (dev, loaded, info) =
            unsafe { (handle(dev, "dev")?, out(loaded, "loaded")?, out_opt(info)) };
        if fd < 0 {
            return Err(Error::new(libc::EBADF, format!("fd {fd} is negative")));
        }
        // SAFETY: borrowed for the ioctl only, which fails with EBADF for a
        // closed `fd`; it is never used otherwise.
        let buf = unsafe { BorrowedFd::borrow_raw(fd) };
        let i = dev
            .dev
            .plan_import(buf)
            .map_err(|e| Error::io(&format!("PLAN_IMPORT of fd {fd}"), &e))?;
        let l = into_handle(nhbm_loaded {
            dev: Arc::clone(&dev.dev),
            plan: LoadedPlan {
                plan_id: i.plan_id,
                local_scratchpad_pa: PA_UNSTAGED,
                shared_scratchpad_pa: PA_UNSTAGED,
                bytes_allocated: i.bytes,
                addrs: Vec::new(),
            },
            blob: Arc::default(),
        });
        let answer = PlanImport {
            fd,
            flags: 0,
            plan_id: i.plan_id,
            nr_vars: i.nr_vars,
            bytes: i.bytes,
        };
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe {
            loaded.set(l);
            if let Some(info) = info {
                info.set(answer);
            }
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::last_message as last;
    use crate::loaded::tests::fake_loaded;
    use nhbm::Device;
    use std::os::fd::AsRawFd;
    use std::ptr;

    #[test]
    fn null_arguments_are_einval() {
        let l = fake_loaded(b"blob", vec![0]);
        let dev = nhbm_device {
            dev: Arc::new(Device::open_path_unchecked("/dev/null").unwrap()),
        };
        let (mut fd, mut h) = (-1, ptr::null_mut());
        // SAFETY: NULL or valid pointers only.
        unsafe {
            assert_eq!(nhbm_export(ptr::null(), &mut fd), -libc::EINVAL);
            assert_eq!(nhbm_export(&l, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last(), "fd is NULL");
            assert_eq!(
                nhbm_import(ptr::null(), 0, &mut h, ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(
                nhbm_import(&dev, 0, ptr::null_mut(), ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(last(), "loaded is NULL");
        }
        assert!(fd == -1 && h.is_null());
    }

    #[test]
    fn refusals_store_nothing() {
        let l = fake_loaded(b"blob", vec![0]);
        let dev = nhbm_device {
            dev: Arc::new(Device::open_path_unchecked("/dev/null").unwrap()),
        };
        let buf = std::fs::File::open("/dev/null").unwrap();
        let (mut fd, mut h) = (-1, ptr::null_mut());
        let mut info = PlanImport::default();
        // SAFETY: a live handle and writable outputs; the fds are integers.
        unsafe {
            // Not a device: the ioctls are refused.
            assert_eq!(nhbm_export(&l, &mut fd), -libc::ENOTTY);
            assert!(last().starts_with("PLAN_EXPORT: "), "{}", last());
            assert_eq!(nhbm_import(&dev, -1, &mut h, &mut info), -libc::EBADF);
            assert_eq!(
                nhbm_import(&dev, buf.as_raw_fd(), &mut h, &mut info),
                -libc::ENOTTY
            );
            assert!(last().starts_with("PLAN_IMPORT of fd "), "{}", last());
        }
        assert!(fd == -1 && h.is_null());
        assert_eq!(info, PlanImport::default());
        assert_eq!(Arc::strong_count(&dev.dev), 1);
    }
}
