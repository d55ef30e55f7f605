//! Mappings: a variable of a loaded plan mapped into the process
//! (NHBM_IOC_MAP_OFFSET, then `mmap(2)` of the device file).

use std::ffi::{c_int, c_void};

use crate::error::{call, Error};
use crate::loaded::nhbm_loaded;
use crate::ptr::{handle, out};

/// Maps variable `var_id` of `loaded` into the process, shared and
/// read-write, through the device file that loaded it: the address into
/// `*addr`, the mapped bytes (the variable rounded up to whole pages) into
/// `*len`. Release it with nhbm_unmap(addr, len); the handle may be freed
/// first.
///
/// Returns 0, or -EINVAL for a variable that cannot be mapped (SB, PTR,
/// VIRTUAL_TMP_BUF, REMOTE, size 0, not page-aligned), -ENOENT for an
/// unknown one, or the errno of MAP_OFFSET or mmap(2). After an unload, a
/// device reset or the device's removal, an access to the mapping gets
/// SIGBUS (Documentation/uapi.rst, MAP_OFFSET).
///
/// # Safety
/// `loaded` is NULL or a live handle; `addr` and `len` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_map(
    loaded: *const nhbm_loaded,
    var_id: u32,
    addr: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: `loaded` is NULL or a live handle, `addr` and `len` NULL or
        // writable.
        let (l, addr, len) = unsafe {
            (
                handle(loaded, "loaded")?,
                out(addr, "addr")?,
                out(len, "len")?,
            )
        };
        let m = l
            .dev
            .map(l.plan.plan_id, var_id)
            .map_err(|e| Error::io("map", &e))?;
        let (a, n) = m.into_raw();
        // SAFETY: the call's only input is a handle, no C buffer.
        unsafe {
            addr.set(a.cast());
            len.set(n);
        }
        Ok(0)
    })
}

/// Unmaps a mapping of nhbm_map(): `addr` and `len` as it stored them.
/// Returns 0, -EINVAL when `addr` is NULL, or the errno of munmap(2).
///
/// # Safety
/// `addr` and `len` are those of one nhbm_map() not unmapped before; no
/// pointer into the mapping is used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nhbm_unmap(addr: *mut c_void, len: usize) -> c_int {
    call(|| {
        if addr.is_null() {
            return Err(Error::inval("addr is NULL"));
        }
        // SAFETY: by the caller's guarantee, a mapping nhbm_map() made.
        if unsafe { libc::munmap(addr, len) } != 0 {
            return Err(Error::io("munmap", &std::io::Error::last_os_error()));
        }
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::last_message as last;
    use crate::loaded::tests::fake_loaded;
    use std::ptr;

    #[test]
    fn null_arguments_are_einval() {
        let l = fake_loaded(b"blob", vec![0]);
        let (mut a, mut n) = (ptr::null_mut(), 0usize);
        // SAFETY: NULL or valid pointers only.
        unsafe {
            assert_eq!(nhbm_map(ptr::null(), 1, &mut a, &mut n), -libc::EINVAL);
            assert_eq!(nhbm_map(&l, 1, ptr::null_mut(), &mut n), -libc::EINVAL);
            assert_eq!(nhbm_map(&l, 1, &mut a, ptr::null_mut()), -libc::EINVAL);
            assert_eq!(last(), "len is NULL");
            assert_eq!(nhbm_unmap(ptr::null_mut(), 4096), -libc::EINVAL);
            // Not a device: MAP_OFFSET is refused, nothing is stored.
            assert_eq!(nhbm_map(&l, 1, &mut a, &mut n), -libc::ENOTTY);
            assert!(last().starts_with("map: "), "{}", last());
        }
        assert!(a.is_null() && n == 0);
    }

    #[test]
    fn unmap_reports_munmap_errors() {
        // An address that is not page-aligned: munmap answers EINVAL.
        // SAFETY: munmap refuses it before touching anything.
        let rc = unsafe { nhbm_unmap(std::ptr::NonNull::<u8>::dangling().as_ptr().cast(), 4096) };
        assert_eq!(rc, -libc::EINVAL);
        assert!(last().starts_with("munmap"), "{}", last());
    }
}
