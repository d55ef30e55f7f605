//! `/dev/neuron_hbmN` and a safe wrapper for every ioctl.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use zerocopy::{FromBytes, IntoBytes};

use crate::uapi::*;

/// The device node of device `index`.
pub fn device_path(index: u32) -> PathBuf {
    PathBuf::from(format!("/dev/neuron_hbm{index}"))
}

/// What PLAN_LOAD reports about a staged plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadedPlan {
    /// The id of the staged plan, for RESOLVE, MEM_READ and the rest.
    pub plan_id: u32,
    /// Device PA of the local scratchpad (`PA_UNSTAGED` when it has none).
    pub local_scratchpad_pa: u64,
    /// Device PA of the shared scratchpad (`PA_UNSTAGED` when it has none).
    pub shared_scratchpad_pa: u64,
    /// Device bytes the plan took from the pools.
    pub bytes_allocated: u64,
    /// Each record's device PA, in record order.
    pub addrs: Vec<u64>,
}

/// One open file of a neuron_hbm device. Plans loaded through it belong to it
/// and are freed when it is dropped.
#[derive(Debug)]
pub struct Device {
    file: File,
    path: PathBuf,
}

impl Device {
    /// Opens `/dev/neuron_hbm<index>` for reading and writing.
    pub fn open(index: u32) -> io::Result<Device> {
        Self::open_path(device_path(index))
    }

    /// Opens the device node at `path` for reading and writing.
    pub fn open_path(path: impl AsRef<Path>) -> io::Result<Device> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        Ok(Device { file, path })
    }

    /// The device node this file was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Issues `request` with `arg` as its argument.
    ///
    /// # Safety
    /// `arg` must be what `request` expects: valid for reads and writes of the
    /// request's size, and every user pointer inside it valid for what the
    /// ioctl does with it (or deliberately invalid, to test EFAULT).
    pub unsafe fn ioctl_raw(&self, request: u32, arg: *mut libc::c_void) -> io::Result<i32> {
        // SAFETY: the caller vouches for `arg`; the fd is open for our lifetime.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), request as _, arg) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    /// An ioctl whose argument struct holds no user pointers; whatever bytes
    /// the kernel writes into it are a valid `T`.
    fn ioctl<T: FromBytes + IntoBytes>(&self, request: u32, arg: &mut T) -> io::Result<i32> {
        // SAFETY: `arg` is a live, exclusively borrowed T of the request's size
        // (the request numbers encode size_of::<T>()), with no pointers inside.
        unsafe { self.ioctl_raw(request, arg as *mut T as *mut libc::c_void) }
    }

    /// NHBM_IOC_DEVICE_INFO.
    pub fn device_info(&self) -> io::Result<DeviceInfo> {
        let mut info = DeviceInfo::default();
        self.ioctl(IOC_DEVICE_INFO, &mut info)?;
        Ok(info)
    }

    /// NHBM_IOC_PLAN_LOAD of `blob` on `channel` (or [`CHANNEL_ANY`]),
    /// collecting the record PAs.
    pub fn plan_load(&self, blob: &[u8], channel: u32) -> io::Result<LoadedPlan> {
        let nmem = PlanHeader::decode(blob).map_or(0, |h| h.nmem as usize);
        // Never hand the kernel an addrs array shorter than the nmem it reads.
        let mut addrs = vec![PA_UNSTAGED; nmem.min(MAX_PLAN_RECORDS as usize)];
        let mut arg = PlanLoad {
            blob: blob.as_ptr() as u64,
            blob_len: blob.len() as u64,
            addrs: if addrs.is_empty() {
                0
            } else {
                addrs.as_mut_ptr() as u64
            },
            channel,
            ..Default::default()
        };
        // SAFETY: blob is readable for blob_len bytes, addrs writable for nmem
        // u64 (nmem beyond the maximum is refused before addrs is written).
        unsafe { self.plan_load_raw(&mut arg)? };
        Ok(LoadedPlan {
            plan_id: arg.plan_id,
            local_scratchpad_pa: arg.local_scratchpad_pa,
            shared_scratchpad_pa: arg.shared_scratchpad_pa,
            bytes_allocated: arg.bytes_allocated,
            addrs,
        })
    }

    /// NHBM_IOC_PLAN_LOAD with a caller-made argument.
    ///
    /// # Safety
    /// `arg.blob` must be readable for `arg.blob_len` bytes and `arg.addrs` 0 or
    /// writable for nmem u64, unless the call is meant to fault.
    pub unsafe fn plan_load_raw(&self, arg: &mut PlanLoad) -> io::Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.ioctl_raw(IOC_PLAN_LOAD, arg as *mut PlanLoad as *mut libc::c_void)? };
        Ok(())
    }

    /// NHBM_IOC_PLAN_UNLOAD.
    pub fn plan_unload(&self, plan_id: u32) -> io::Result<()> {
        self.ioctl(IOC_PLAN_UNLOAD, &mut PlanUnload { plan_id, rsvd: 0 })?;
        Ok(())
    }

    /// NHBM_IOC_RESOLVE: the device PA of `[offset, offset + size)` of a variable.
    pub fn resolve(&self, plan_id: u32, var_id: u32, offset: u64, size: u64) -> io::Result<u64> {
        let mut arg = Resolve {
            plan_id,
            var_id,
            offset,
            size,
            addr: 0,
        };
        self.ioctl(IOC_RESOLVE, &mut arg)?;
        Ok(arg.addr)
    }

    /// NHBM_IOC_RESOLVE_BATCH: every query answered in place (status, addr).
    pub fn resolve_batch(&self, plan_id: u32, queries: &mut [ResolveQuery]) -> io::Result<()> {
        let count =
            u32::try_from(queries.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
        let mut arg = ResolveBatch {
            plan_id,
            count,
            queries: queries.as_mut_ptr() as u64,
        };
        // SAFETY: `queries` is writable for `count` queries for the whole call.
        unsafe { self.ioctl_raw(IOC_RESOLVE_BATCH, &mut arg as *mut _ as *mut libc::c_void)? };
        Ok(())
    }

    /// NHBM_IOC_MEM_WRITE: `buf` into a variable at `offset`.
    pub fn mem_write(&self, plan_id: u32, var_id: u32, offset: u64, buf: &[u8]) -> io::Result<()> {
        let mut arg = MemXfer {
            plan_id,
            var_id,
            offset,
            len: buf.len() as u64,
            buf: buf.as_ptr() as u64,
        };
        // SAFETY: `buf` is readable for `len` bytes for the whole call.
        unsafe { self.ioctl_raw(IOC_MEM_WRITE, &mut arg as *mut _ as *mut libc::c_void)? };
        Ok(())
    }

    /// NHBM_IOC_MEM_READ: a variable at `offset` into `buf`.
    pub fn mem_read(
        &self,
        plan_id: u32,
        var_id: u32,
        offset: u64,
        buf: &mut [u8],
    ) -> io::Result<()> {
        let mut arg = MemXfer {
            plan_id,
            var_id,
            offset,
            len: buf.len() as u64,
            buf: buf.as_mut_ptr() as u64,
        };
        // SAFETY: `buf` is writable for `len` bytes for the whole call.
        unsafe { self.ioctl_raw(IOC_MEM_READ, &mut arg as *mut _ as *mut libc::c_void)? };
        Ok(())
    }

    /// NHBM_IOC_MEM_WRITE / MEM_READ with a caller-made argument.
    ///
    /// # Safety
    /// `arg.buf` must be valid for `arg.len` bytes in the direction of the
    /// transfer, unless the call is meant to fault.
    pub unsafe fn mem_xfer_raw(&self, write: bool, arg: &mut MemXfer) -> io::Result<()> {
        let req = if write { IOC_MEM_WRITE } else { IOC_MEM_READ };
        // SAFETY: forwarded to the caller.
        unsafe { self.ioctl_raw(req, arg as *mut MemXfer as *mut libc::c_void)? };
        Ok(())
    }

    /// NHBM_IOC_MEM_STATS.
    pub fn mem_stats(&self) -> io::Result<MemStats> {
        let mut s = MemStats::default();
        self.ioctl(IOC_MEM_STATS, &mut s)?;
        Ok(s)
    }

    /// NHBM_IOC_RESET: returns the reset's status (0 or a negative errno).
    pub fn reset(&self, type_: u32, nc_map: u32) -> io::Result<i32> {
        let mut arg = Reset {
            type_,
            nc_map,
            status: 0,
            rsvd: 0,
        };
        self.ioctl(IOC_RESET, &mut arg)?;
        Ok(arg.status)
    }
}
