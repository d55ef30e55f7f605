//! Devices: open, close, DEVICE_INFO, MEM_STATS, RESET (and its start
//! and wait) and CORES.

use std::ffi::{c_char, c_int};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use nhbm::uapi::{Cores, DeviceInfo, MemStats};
use nhbm::Device;

use crate::error::{call, call_void, Error};
use crate::ptr::{c_path, handle, into_handle, out, out_opt, take_handle, Out};

/// An open neuron_hbm device (`/dev/neuron_hbmN`). Plans loaded through it
/// keep it open until their handles are freed.
pub struct nhbm_device {
    /// Shared with the plans loaded through it.
    pub(crate) dev: Arc<Device>,
}

/// Hands an opened device to C.
///
/// # Safety
/// As [`Out::set`].
unsafe fn opened(dev: Device, out_dev: Out<*mut nhbm_device>) -> c_int {
    // SAFETY: forwarded to the caller.
    unsafe { out_dev.set(into_handle(nhbm_device { dev: Arc::new(dev) })) };
    0
}

/// Opens `/dev/neuron_hbm<index>` and stores its handle in `*dev`.
///
/// Returns 0, -EPROTO when the module speaks another UAPI version than the
/// library (nhbm_abi_version()), or the errno of open(2) or DEVICE_INFO.
///
/// # Safety
/// `dev` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_open(index: u32, dev: *mut *mut nhbm_device) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or writable (the contract above).
        let out_dev = unsafe { out(dev, "dev") }?;
        let opened_dev = Device::open(index)?;
        // SAFETY: the call has no C input.
        Ok(unsafe { opened(opened_dev, out_dev) })
    })
}

/// Opens the device node at `path` (as nhbm_device_open()) and stores its
/// handle in `*dev`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `dev` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_open_path(
    path: *const c_char,
    dev: *mut *mut nhbm_device,
) -> c_int {
    call(|| {
        // SAFETY: `path` is NULL or a string, `dev` NULL or writable.
        let (path, out_dev) = unsafe { (c_path(path, "path")?, out(dev, "dev")?) };
        let opened_dev = Device::open_path(path)?;
        // SAFETY: `path` is not used after the device is open.
        Ok(unsafe { opened(opened_dev, out_dev) })
    })
}

/// Makes a device handle of `fd`, an open file of a neuron_hbm device (one
/// received over a Unix socket with SCM_RIGHTS, say), and stores it in
/// `*dev`. The file is duplicated (F_DUPFD_CLOEXEC), not adopted: the
/// caller keeps `fd` and closes it when it likes; the handle's own
/// descriptor is closed by nhbm_device_close() once no loaded plan holds it.
/// Both descriptors name the same open file, and plans belong to the open
/// file: a plan loaded through either is that file's.
///
/// Returns 0, -EBADF for a negative or closed `fd`, -EPROTO when the module
/// speaks another UAPI version than the library, or the errno of DEVICE_INFO
/// (-ENOTTY for a file that is no neuron_hbm device).
///
/// # Safety
/// `dev` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_from_fd(fd: c_int, dev: *mut *mut nhbm_device) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or writable (the contract above).
        let out_dev = unsafe { out(dev, "dev") }?;
        if fd < 0 {
            return Err(Error::new(libc::EBADF, format!("fd {fd} is negative")));
        }
        // SAFETY: borrowed for the duplication only; a closed `fd` makes
        // fcntl fail with EBADF, it is never used otherwise.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| Error::io(&format!("dup of fd {fd}"), &e))?;
        let opened_dev = Device::from_fd(owned)?;
        // SAFETY: the call has no C input.
        Ok(unsafe { opened(opened_dev, out_dev) })
    })
}

/// The handle's file descriptor (for poll(2), fstat(2), or to pass the
/// device to another process), or -EINVAL when `dev` is NULL. It stays the
/// handle's: do not close it; it is valid while the handle, or a plan
/// loaded through it, is.
///
/// # Safety
/// `dev` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_fd(dev: *const nhbm_device) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle.
        let dev = unsafe { handle(dev, "dev") }?;
        Ok(dev.dev.as_raw_fd())
    })
}

/// Closes a device handle (NULL is ignored). Plans still loaded through it
/// stay loaded, and the device open, until their handles are freed
/// (nhbm_unload(), nhbm_loaded_free()).
///
/// # Safety
/// `dev` is NULL or a handle of nhbm_device_open*() not closed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_close(dev: *mut nhbm_device) {
    // SAFETY: `dev` is NULL or a live handle, given back once.
    call_void(|| drop(unsafe { take_handle(dev) }));
}

/// NHBM_IOC_DEVICE_INFO: the device's arch, geometry and limits into `*info`.
///
/// # Safety
/// `dev` is NULL or a live handle; `info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_device_info(dev: *const nhbm_device, info: *mut DeviceInfo) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle, `info` NULL or writable.
        let (dev, info) = unsafe { (handle(dev, "dev")?, out(info, "info")?) };
        let i = dev
            .dev
            .device_info()
            .map_err(|e| Error::io("DEVICE_INFO", &e))?;
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { info.set(i) };
        Ok(0)
    })
}

/// NHBM_IOC_MEM_STATS: every pool's usage and the caller's own into `*stats`.
///
/// # Safety
/// `dev` is NULL or a live handle; `stats` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_mem_stats(dev: *const nhbm_device, stats: *mut MemStats) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle, `stats` NULL or writable.
        let (dev, stats) = unsafe { (handle(dev, "dev")?, out(stats, "stats")?) };
        let s = dev
            .dev
            .mem_stats()
            .map_err(|e| Error::io("MEM_STATS", &e))?;
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe { stats.set(s) };
        Ok(0)
    })
}

/// NHBM_IOC_RESET of `type` (enum nhbm_reset_type; `nc_map` the cores of a
/// NHBM_RESET_TPB). Returns 0 when the reset completed, otherwise a negative
/// errno: the ioctl's, or the reset's own status.
///
/// # Safety
/// `dev` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_reset(dev: *const nhbm_device, r#type: u32, nc_map: u32) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle.
        let dev = unsafe { handle(dev, "dev") }?;
        let status = dev
            .dev
            .reset(r#type, nc_map)
            .map_err(|e| Error::io("RESET", &e))?;
        if status < 0 {
            return Err(Error::io(
                "RESET status",
                &std::io::Error::from_raw_os_error(-status),
            ));
        }
        Ok(0)
    })
}

/// NHBM_IOC_RESET_START: asks for a reset as nhbm_reset() does and returns
/// at once, so that a runtime can start resets on all its devices and then
/// wait for each (nhbm_reset_wait()). Returns 0 once it is asked for,
/// -EBUSY while this handle's last one has not ended, or the errno that
/// refused it (-EPERM, -EINVAL, ...).
///
/// # Safety
/// `dev` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_reset_start(
    dev: *const nhbm_device,
    r#type: u32,
    nc_map: u32,
) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle.
        let dev = unsafe { handle(dev, "dev") }?;
        dev.dev
            .reset_start(r#type, nc_map)
            .map_err(|e| Error::io("RESET_START", &e))?;
        Ok(0)
    })
}

/// NHBM_IOC_RESET_WAIT: waits for this handle's last nhbm_reset_start() to
/// end; any thread may wait, and waiting again gives the same answer.
/// Returns 0 when the reset completed, its negative errno when it failed,
/// -ENOENT when the handle started none, -EINTR when a fatal signal ended
/// the wait (the reset goes on).
///
/// # Safety
/// `dev` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_reset_wait(dev: *const nhbm_device) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle.
        let dev = unsafe { handle(dev, "dev") }?;
        dev.dev
            .reset_wait()
            .map_err(|e| Error::io("RESET_WAIT", &e))?;
        Ok(0)
    })
}

/// NHBM_IOC_CORES: gives up the NeuronCores of `release` (this handle's),
/// then claims those of `claim`, all or nothing, and writes who owns what
/// to `*cores` (NULL: not wanted). The owner of a core may reset it
/// beside other tenants, and no other tenant may. Returns 0, -EBUSY when
/// another open file owns a claimed core, -EINVAL for a core the device
/// does not have or a released one this handle does not own. The cores
/// are released when the handle's file closes.
///
/// # Safety
/// `dev` is NULL or a live handle; `cores` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_cores(
    dev: *const nhbm_device,
    claim: u32,
    release: u32,
    cores: *mut Cores,
) -> c_int {
    call(|| {
        // SAFETY: `dev` is NULL or a live handle, `cores` NULL or writable.
        let (dev, cores) = unsafe { (handle(dev, "dev")?, out_opt(cores)) };
        let o = dev
            .dev
            .cores(claim, release)
            .map_err(|e| Error::io("CORES", &e))?;
        if let Some(out) = cores {
            let answer = Cores {
                claim,
                release,
                owned: o.owned,
                taken: o.taken,
                owner_pid: o.owner_pid,
            };
            // SAFETY: the call's only input is a handle, no C buffer.
            unsafe { out.set(answer) };
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn null_arguments_are_einval() {
        let mut d = ptr::null_mut();
        // SAFETY: NULL or valid pointers only.
        unsafe {
            assert_eq!(nhbm_device_open(0, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(nhbm_device_open_path(ptr::null(), &mut d), -libc::EINVAL);
            assert_eq!(
                nhbm_device_info(ptr::null(), ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(nhbm_mem_stats(ptr::null(), ptr::null_mut()), -libc::EINVAL);
            assert_eq!(nhbm_reset(ptr::null(), 1, 0), -libc::EINVAL);
            assert_eq!(nhbm_reset_start(ptr::null(), 1, 0), -libc::EINVAL);
            assert_eq!(nhbm_reset_wait(ptr::null()), -libc::EINVAL);
            assert_eq!(
                nhbm_cores(ptr::null(), 0, 0, ptr::null_mut()),
                -libc::EINVAL
            );
            assert_eq!(nhbm_device_from_fd(0, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(nhbm_device_fd(ptr::null()), -libc::EINVAL);
            nhbm_device_close(ptr::null_mut());
        }
        assert!(d.is_null());
    }

    #[test]
    fn from_fd_duplicates_and_checks_the_file() {
        let mut d = ptr::null_mut();
        let null = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: a writable handle slot; the fds are plain integers.
        unsafe {
            assert_eq!(nhbm_device_from_fd(-1, &mut d), -libc::EBADF);
            // Past any open descriptor: fcntl answers EBADF.
            assert_eq!(nhbm_device_from_fd(1 << 29, &mut d), -libc::EBADF);
            // Not a device: DEVICE_INFO is refused, and the duplicate closed.
            assert_eq!(nhbm_device_from_fd(null.as_raw_fd(), &mut d), -libc::ENOTTY);
        }
        assert!(d.is_null());
        // SAFETY: F_GETFD only reads the descriptor's flags.
        let flags = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_GETFD) };
        assert_ne!(flags, -1, "the caller's fd was closed");
    }

    #[test]
    fn fd_is_the_handles_own() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let dev = nhbm_device {
            dev: Arc::new(Device::open_path_unchecked("/dev/null").unwrap()),
        };
        // SAFETY: a live handle.
        let fd = unsafe { nhbm_device_fd(&dev) };
        assert_eq!(fd, dev.dev.as_raw_fd());
        assert_ne!(fd, file.as_raw_fd());
    }

    #[test]
    fn a_missing_node_is_enoent_and_not_a_device_is_enotty() {
        let mut d = ptr::null_mut();
        // SAFETY: valid strings and a writable handle slot.
        unsafe {
            let rc = nhbm_device_open_path(c"/nonexistent/neuron_hbm0".as_ptr(), &mut d);
            assert_eq!(rc, -libc::ENOENT);
            // /dev/null opens, but answers no DEVICE_INFO.
            assert_eq!(
                nhbm_device_open_path(c"/dev/null".as_ptr(), &mut d),
                -libc::ENOTTY
            );
        }
        assert!(d.is_null());
    }
}
