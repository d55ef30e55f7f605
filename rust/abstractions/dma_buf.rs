// SPDX-License-Identifier: GPL-2.0-only

//! dma-bufs of the module's own, over dma_buf.c: a value handed to other
//! processes as a file descriptor (passed over a Unix socket or inherited)
//! and taken back from one. Only the module reads what a buffer carries;
//! no device attaches to one and none is mapped through its own file.

use crate::abstractions::helpers;
use core::ptr::{null_mut, NonNull};
use kernel::{error::to_result, fs::File, prelude::*, sync::aref::ARef};

/// A value a dma-buf of this module's may carry.
pub(crate) trait Shared: Clone + Send + Sync + 'static {
    /// Tells a buffer carrying this type from one carrying any other: each
    /// implementor has its own.
    const KIND: u32;
}

/// What a buffer owns: the C header first (`repr(C)`), then the value.
#[repr(C)]
struct Payload<T> {
    head: helpers::nhbm_dma_buf_payload,
    value: T,
}

/// The release function of a buffer carrying a `T`.
///
/// # Safety
///
/// `head` is the head of a `Payload<T>` that [`export()`] gave its buffer,
/// passed once, when the buffer's last reference went.
unsafe extern "C" fn release<T: Shared>(head: *mut helpers::nhbm_dma_buf_payload) {
    // SAFETY: `head` is the first field of a `repr(C)` `Payload<T>`, so at
    // its address, which `export` leaked from a `KBox`; the buffer owned it
    // and gives it up now, once (the caller's contract).
    drop(unsafe { KBox::from_raw(head.cast::<Payload<T>>()) });
}

/// A new read-only dma-buf of `size` bytes carrying `value`, as its file,
/// not yet given a descriptor (`FileDescriptorReservation::fd_install`);
/// dropped, the file drops the buffer and `value` with it. The payload is
/// charged to the caller's memory cgroup.
pub(crate) fn export<T: Shared>(value: T, size: u64) -> Result<ARef<File>> {
    let payload = KBox::new(
        Payload {
            head: helpers::nhbm_dma_buf_payload {
                release: Some(release::<T>),
                kind: T::KIND,
            },
            value,
        },
        GFP_KERNEL_ACCOUNT,
    )?;
    let raw = KBox::into_raw(payload);
    let mut file = null_mut();
    // SAFETY: `raw` is a valid payload whose head is its first field, with
    // `release::<T>` as its release function; on success the buffer owns it.
    let res = to_result(unsafe { helpers::nhbm_dma_buf_export(raw.cast(), size, &mut file) });
    if let Err(e) = res {
        // SAFETY: the export failed, so the payload was not handed over:
        // `raw` is still the pointer `into_raw` gave, used nowhere else.
        drop(unsafe { KBox::from_raw(raw) });
        return Err(e);
    }
    let file = NonNull::new(file.cast::<File>()).ok_or(EINVAL)?;
    // SAFETY: on success `file` is the new buffer's file with one reference,
    // now the caller's (`nhbm_dma_buf_export`), and `File` is a transparent
    // wrapper of `struct file`; no process has the file yet, so no
    // `fdget_pos` holds it.
    Ok(unsafe { ARef::from_raw(file) })
}

/// A clone of the value that the dma-buf of descriptor `fd` carries:
/// `EBADF` for no open file, `EINVAL` for a file that is not a dma-buf of
/// this module's carrying a `T`.
pub(crate) fn import<T: Shared>(fd: i32) -> Result<T> {
    let mut buf = null_mut();
    // SAFETY: `buf` is a valid place for the result.
    to_result(unsafe { helpers::nhbm_dma_buf_get(fd, &mut buf) })?;
    // SAFETY: `buf` is a dma-buf of this module's, on which a reference was
    // just taken.
    let head = unsafe { helpers::nhbm_dma_buf_payload(buf) };
    // SAFETY: `head` is the head of the payload `export` gave the buffer,
    // alive while the reference is held; every payload has one.
    let res = if unsafe { (*head).kind } == T::KIND {
        // SAFETY: the kind says the payload is a `Payload<T>` (each `Shared`
        // type has its own), at `head` (its first field); it lives while
        // the reference is held, and the value is only read.
        Ok(unsafe { &(*head.cast::<Payload<T>>()).value }.clone())
    } else {
        Err(EINVAL)
    };
    // SAFETY: drops the reference taken above, not used after.
    unsafe { helpers::nhbm_dma_buf_put(buf) };
    res
}
