//! `/dev/neuron_hbmN` and a safe wrapper for every ioctl.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
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

/// Why a device node could not be opened.
#[derive(Debug)]
pub enum OpenErrorKind {
    /// open(2) or the DEVICE_INFO ioctl failed.
    Io(io::Error),
    /// The module speaks another version of the UAPI than this library.
    Abi {
        /// The module's `abi_version`.
        module: u32,
    },
}

/// A device node that could not be opened, with its path.
#[derive(Debug)]
pub struct OpenError {
    /// The node that was opened.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: OpenErrorKind,
}

impl OpenError {
    /// The errno of the failure: open(2)'s or the ioctl's, `EPROTO` for an
    /// ABI mismatch.
    pub fn errno(&self) -> i32 {
        match &self.kind {
            OpenErrorKind::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            OpenErrorKind::Abi { .. } => libc::EPROTO,
        }
    }

    /// The OS error number of an I/O failure (`None` for an ABI mismatch),
    /// as [`io::Error::raw_os_error`].
    pub fn raw_os_error(&self) -> Option<i32> {
        match &self.kind {
            OpenErrorKind::Io(e) => e.raw_os_error(),
            OpenErrorKind::Abi { .. } => None,
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            OpenErrorKind::Io(e) => write!(f, "cannot open {path}: {e}"),
            OpenErrorKind::Abi { module } => write!(
                f,
                "{path}: the module speaks UAPI version {module}, this library {ABI_VERSION}"
            ),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            OpenErrorKind::Io(e) => Some(e),
            OpenErrorKind::Abi { .. } => None,
        }
    }
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> Self {
        let kind = match &e.kind {
            OpenErrorKind::Io(io) => io.kind(),
            OpenErrorKind::Abi { .. } => io::ErrorKind::Unsupported,
        };
        io::Error::new(kind, e)
    }
}

/// One open file of a neuron_hbm device. Plans loaded through it belong to it
/// and are freed when it is dropped.
#[derive(Debug)]
pub struct Device {
    file: File,
    path: PathBuf,
}

/// The open file's descriptor (to read its `/proc/self/fdinfo` entry, say).
impl AsFd for Device {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Device {
    /// Opens `/dev/neuron_hbm<index>` for reading and writing, as
    /// [`Device::open_path`].
    pub fn open(index: u32) -> Result<Device, OpenError> {
        Self::open_path(device_path(index))
    }

    /// Opens the device node at `path` for reading and writing and checks
    /// that the module speaks this library's UAPI version ([`ABI_VERSION`]).
    pub fn open_path(path: impl AsRef<Path>) -> Result<Device, OpenError> {
        Self::open_path_unchecked(path)?.checked()
    }

    /// `self` when the module speaks this library's UAPI version, the
    /// error [`Device::open_path`] and [`Device::from_fd`] return otherwise.
    fn checked(self) -> Result<Device, OpenError> {
        let err = |kind| OpenError {
            path: self.path.clone(),
            kind,
        };
        let info = self.device_info().map_err(|e| err(OpenErrorKind::Io(e)))?;
        if info.abi_version != ABI_VERSION {
            return Err(err(OpenErrorKind::Abi {
                module: info.abi_version,
            }));
        }
        Ok(self)
    }

    /// Opens the device node at `path` without asking the module anything:
    /// for tools that probe a node whose ioctls may fail (a device being
    /// removed, a module of another version).
    pub fn open_path_unchecked(path: impl AsRef<Path>) -> Result<Device, OpenError> {
        let path = path.as_ref().to_path_buf();
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => Ok(Device { file, path }),
            Err(e) => Err(OpenError {
                path,
                kind: OpenErrorKind::Io(e),
            }),
        }
    }

    /// Takes over `fd`, an open file of a neuron_hbm device (one passed by
    /// another process over a Unix socket, say), and checks its UAPI version
    /// as [`Device::open_path`] does. The device is closed with the `Device`;
    /// [`Device::path`] is the file `/proc/self/fd/N` names, or that link
    /// when it cannot be read.
    pub fn from_fd(fd: OwnedFd) -> Result<Device, OpenError> {
        let link = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let path = std::fs::read_link(&link).unwrap_or(link);
        Device {
            file: File::from(fd),
            path,
        }
        .checked()
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

    /// Stages `blob` on `channel` (or [`CHANNEL_ANY`]) as [`Device::plan_load`]
    /// does, and returns a handle that unloads the plan when dropped.
    pub fn load(&self, blob: &[u8], channel: u32) -> io::Result<PlanHandle<'_>> {
        let plan = self.plan_load(blob, channel)?;
        Ok(PlanHandle { dev: self, plan })
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
        self.reset_ioctl(IOC_RESET, type_, nc_map)
    }

    /// NHBM_IOC_RESET_START: asks for a reset and returns at once (0 once
    /// asked for); `EBUSY` while this file's last one has not ended.
    pub fn reset_start(&self, type_: u32, nc_map: u32) -> io::Result<i32> {
        self.reset_ioctl(IOC_RESET_START, type_, nc_map)
    }

    /// Request `req` (RESET or RESET_START) of a `type_` reset of
    /// `nc_map`: the status the kernel writes back.
    fn reset_ioctl(&self, req: u32, type_: u32, nc_map: u32) -> io::Result<i32> {
        let mut arg = Reset {
            type_,
            nc_map,
            status: 0,
            rsvd: 0,
        };
        self.ioctl(req, &mut arg)?;
        Ok(arg.status)
    }

    /// NHBM_IOC_RESET_WAIT: waits for this file's last RESET_START and
    /// returns its type and core map; the reset's failure is the error
    /// (`ENOENT` when the file started none).
    pub fn reset_wait(&self) -> io::Result<(u32, u32)> {
        let mut arg = Reset::default();
        self.ioctl(IOC_RESET_WAIT, &mut arg)?;
        Ok((arg.type_, arg.nc_map))
    }
}

/// Who owns the NeuronCores of a device, as NHBM_IOC_CORES answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreOwners {
    /// The cores this open file owns (one bit per core).
    pub owned: u32,
    /// The cores other open files own.
    pub taken: u32,
    /// Per core, the owner's process id in the caller's pid namespace
    /// (0: none, or not visible there).
    pub owner_pid: [u32; MAX_CORES],
}

impl Device {
    /// NHBM_IOC_CORES: gives up the cores of `release` (this file's), then
    /// claims those of `claim`, all or nothing (`EBUSY` when another file
    /// owns one); 0 and 0 only asks. Closing the file releases its cores.
    pub fn cores(&self, claim: u32, release: u32) -> io::Result<CoreOwners> {
        let mut arg = Cores {
            claim,
            release,
            ..Cores::default()
        };
        self.ioctl(IOC_CORES, &mut arg)?;
        Ok(CoreOwners {
            owned: arg.owned,
            taken: arg.taken,
            owner_pid: arg.owner_pid,
        })
    }
}

/// What NHBM_IOC_PLAN_IMPORT reports about a plan it listed in this file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// The plan's id in this file, for RESOLVE, MEM_READ, MAP_OFFSET and
    /// PLAN_UNLOAD (which drops the import).
    pub plan_id: u32,
    /// The plan's variables (with the var ids its blob gave them).
    pub nr_vars: u32,
    /// Device bytes the plan holds, charged to the file that exported it.
    pub bytes: u64,
}

impl Device {
    /// NHBM_IOC_PLAN_EXPORT: a dma-buf (close-on-exec) of plan `plan_id`,
    /// one loaded through this file, through which an open file of the same
    /// device in another process imports it read-only
    /// ([`Device::plan_import`]); pass it on over a Unix socket. The plan's
    /// memory stays until it is unloaded here and no dma-buf or import of it
    /// is left. `EACCES` for a plan that is itself an import, `EIO` after a
    /// device reset.
    pub fn plan_export(&self, plan_id: u32) -> io::Result<OwnedFd> {
        let mut arg = PlanExport {
            plan_id,
            ..PlanExport::default()
        };
        self.ioctl(IOC_PLAN_EXPORT, &mut arg)?;
        // SAFETY: the kernel installed `arg.fd` in this process for the
        // caller alone; nothing else owns or closes it.
        Ok(unsafe { OwnedFd::from_raw_fd(arg.fd) })
    }

    /// NHBM_IOC_PLAN_IMPORT: lists the plan of `fd`, a dma-buf of
    /// [`Device::plan_export`] on the same device, in this file as a
    /// read-only plan with an id of its own: RESOLVE, RESOLVE_BATCH,
    /// MEM_READ, MAP_OFFSET and read-only mappings work on it, MEM_WRITE and
    /// [`Device::map`] (read-write) are `EACCES`. No device memory is
    /// allocated or copied. `EINVAL` for a file that is no dma-buf of
    /// neuron_hbm, `EXDEV` for one of another device, `E2BIG` when this
    /// file's plan table is full.
    pub fn plan_import(&self, fd: BorrowedFd<'_>) -> io::Result<Imported> {
        let mut arg = PlanImport {
            fd: fd.as_raw_fd(),
            ..PlanImport::default()
        };
        self.ioctl(IOC_PLAN_IMPORT, &mut arg)?;
        Ok(Imported {
            plan_id: arg.plan_id,
            nr_vars: arg.nr_vars,
            bytes: arg.bytes,
        })
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl Device {
    /// NHBM_IOC_MAP_OFFSET: the mmap offset and mappable size of a
    /// variable of one of this file's plans.
    pub fn map_offset(&self, plan_id: u32, var_id: u32) -> io::Result<(u64, u64)> {
        let mut arg = MapOffset {
            plan_id,
            var_id,
            ..MapOffset::default()
        };
        self.ioctl(IOC_MAP_OFFSET, &mut arg)?;
        Ok((arg.offset, arg.size))
    }

    /// Maps a variable of one of this file's plans into the process
    /// (MAP_OFFSET, then a shared, read-write `mmap` of all of it).
    pub fn map(&self, plan_id: u32, var_id: u32) -> io::Result<Mapping> {
        self.map_with(plan_id, var_id, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps a variable as [`Device::map`] does, read-only: the way to map a
    /// variable of an imported plan (a writable mapping of one is refused
    /// with `EACCES`).
    pub fn map_read_only(&self, plan_id: u32, var_id: u32) -> io::Result<ReadMapping> {
        self.map_with(plan_id, var_id, libc::PROT_READ)
            .map(|inner| ReadMapping { inner })
    }

    /// MAP_OFFSET, then a shared `mmap` of all of the variable with `prot`.
    fn map_with(&self, plan_id: u32, var_id: u32, prot: i32) -> io::Result<Mapping> {
        let (offset, len) = self.map_offset(plan_id, var_id)?;
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a new mapping at an address of the kernel's choosing; it
        // touches no memory of ours.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                self.as_raw_fd(),
                offset,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }
}

/// A variable mapped read-only by [`Device::map_read_only`], unmapped when
/// dropped: it derefs to the mapped bytes (`&[u8]`) and copies them out
/// with [`ReadMapping::read`], as [`Mapping`] does, and cannot be written.
#[derive(Debug)]
pub struct ReadMapping {
    inner: Mapping,
}

impl ReadMapping {
    /// The first byte of the mapping.
    pub fn as_ptr(&self) -> *const u8 {
        self.inner.as_ptr()
    }

    /// Copies the mapping at `offset` into `buf` (`EINVAL` past its end).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, buf)
    }
}

impl std::ops::Deref for ReadMapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.inner
    }
}

/// A variable mapped into the process by [`Device::map`], unmapped when
/// dropped. It derefs to the mapped bytes (`&[u8]`, and `&mut [u8]` through
/// a `&mut Mapping`), as a memory-mapped file does; [`Mapping::read`] and
/// [`Mapping::write`] copy with a bounds check. Its bytes are the device's:
/// like any shared mapping they may change under the caller (another
/// process, a transfer), and after an unload, a device reset or the
/// device's removal any access gets `SIGBUS`.
#[derive(Debug)]
pub struct Mapping {
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, usable from any thread.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` only reads (`Deref`, `read`); writes need `&mut`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// The first byte of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    /// Gives up the mapping without unmapping it: its address and length,
    /// for `munmap(2)` by the caller (the C library's `nhbm_unmap`).
    pub fn into_raw(self) -> (*mut u8, usize) {
        let this = std::mem::ManuallyDrop::new(self);
        (this.addr, this.len)
    }

    fn check(&self, offset: usize, len: usize) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Copies `buf` to the mapping at `offset` (`EINVAL` past its end).
    pub fn write(&mut self, offset: usize, buf: &[u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        self[offset..offset + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    /// Copies the mapping at `offset` into `buf` (`EINVAL` past its end).
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        buf.copy_from_slice(&self[offset..offset + buf.len()]);
        Ok(())
    }
}

impl Deref for Mapping {
    type Target = [u8];

    /// The mapped bytes: the variable, rounded up to whole pages.
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` bytes at `addr` stay mapped until drop.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }
}

impl DerefMut for Mapping {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` makes the slice the only one.
        unsafe { std::slice::from_raw_parts_mut(self.addr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping `Device::map` made, unmapped once.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// A plan staged through [`Device::load`]: every per-plan ioctl as a method,
/// and NHBM_IOC_PLAN_UNLOAD when it is dropped (or by [`PlanHandle::unload`],
/// which reports the kernel's answer).
#[derive(Debug)]
pub struct PlanHandle<'d> {
    dev: &'d Device,
    plan: LoadedPlan,
}

impl PlanHandle<'_> {
    /// The plan's id.
    pub fn id(&self) -> u32 {
        self.plan.plan_id
    }

    /// What PLAN_LOAD reported: the scratchpads, the bytes taken and every
    /// record's device PA.
    pub fn loaded(&self) -> &LoadedPlan {
        &self.plan
    }

    /// [`Device::resolve`] in this plan.
    pub fn resolve(&self, var_id: u32, offset: u64, size: u64) -> io::Result<u64> {
        self.dev.resolve(self.id(), var_id, offset, size)
    }

    /// [`Device::resolve_batch`] in this plan.
    pub fn resolve_batch(&self, queries: &mut [ResolveQuery]) -> io::Result<()> {
        self.dev.resolve_batch(self.id(), queries)
    }

    /// [`Device::mem_write`] into a variable of this plan.
    pub fn write(&self, var_id: u32, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.dev.mem_write(self.id(), var_id, offset, buf)
    }

    /// [`Device::mem_read`] from a variable of this plan.
    pub fn read(&self, var_id: u32, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.dev.mem_read(self.id(), var_id, offset, buf)
    }

    /// [`Device::map`] of a variable of this plan.
    pub fn map(&self, var_id: u32) -> io::Result<Mapping> {
        self.dev.map(self.id(), var_id)
    }

    /// [`Device::plan_export`] of this plan.
    pub fn export(&self) -> io::Result<OwnedFd> {
        self.dev.plan_export(self.id())
    }

    /// Unloads the plan now, with the kernel's answer (`EBUSY` while a
    /// REMOTE record of another plan pins it; the plan then stays loaded
    /// until the file is closed).
    pub fn unload(self) -> io::Result<()> {
        let dev = self.dev;
        let plan_id = self.keep().plan_id;
        dev.plan_unload(plan_id)
    }

    /// Gives up the handle and leaves the plan loaded until it is unloaded by
    /// id or the file is closed; returns what PLAN_LOAD reported.
    pub fn keep(self) -> LoadedPlan {
        let mut this = std::mem::ManuallyDrop::new(self);
        std::mem::take(&mut this.plan)
    }
}

impl Drop for PlanHandle<'_> {
    fn drop(&mut self) {
        // An unload refused here (a REMOTE pin) leaves the plan to the file's
        // close, which frees every plan of the file.
        let _ = self.dev.plan_unload(self.plan.plan_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_node_names_its_path_and_errno() {
        let e = Device::open_path("/nonexistent/neuron_hbm7").unwrap_err();
        assert_eq!(e.errno(), libc::ENOENT);
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert!(e
            .to_string()
            .starts_with("cannot open /nonexistent/neuron_hbm7: "));
        // Through io::Error the path stays, and the errno is still found.
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert_eq!(crate::io_errno(&io), Some(libc::ENOENT));
        assert!(io.to_string().contains("/nonexistent/neuron_hbm7"));
    }

    #[test]
    fn a_node_that_is_not_the_module_fails_the_version_check() {
        // /dev/null opens, but knows no DEVICE_INFO: the check refuses it.
        let e = Device::open_path("/dev/null").unwrap_err();
        assert_eq!(e.errno(), libc::ENOTTY);
        assert!(Device::open_path_unchecked("/dev/null").is_ok());
    }

    #[test]
    fn an_abi_mismatch_is_eproto() {
        let e = OpenError {
            path: device_path(3),
            kind: OpenErrorKind::Abi { module: 99 },
        };
        assert_eq!(e.errno(), libc::EPROTO);
        assert_eq!(e.raw_os_error(), None);
        assert_eq!(
            e.to_string(),
            format!(
                "/dev/neuron_hbm3: the module speaks UAPI version 99, this library {ABI_VERSION}"
            )
        );
        assert_eq!(crate::io_errno(&e.into()), Some(libc::EPROTO));
    }
}
