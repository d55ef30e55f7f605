//! Mirror of `include/uapi/linux/neuron_hbm.h`.
//!
//! Every structure is `#[repr(C)]` with the header's field order and widths; the
//! sizes and field offsets are checked at compile time at the bottom of this
//! file, so a layout drift from the C header fails the build.

use core::mem::{offset_of, size_of};

/// `NHBM_ABI_VERSION`.
pub const ABI_VERSION: u32 = 2;
/// `NHBM_IOC_MAGIC`.
pub const IOC_MAGIC: u32 = 0xBB;
/// `NHBM_MAX_CHANNELS`.
pub const MAX_CHANNELS: usize = 4;
/// `NHBM_MAX_REGIONS`.
pub const MAX_REGIONS: usize = 4;
/// `NHBM_PA_UNSTAGED`: device PA 0 is legal, so "none" is all ones.
pub const PA_UNSTAGED: u64 = 0xFFFF_FFFF_FFFF_FFFF;
/// `NHBM_CHANNEL_ANY`: the HBM channel with the most free space.
pub const CHANNEL_ANY: u32 = 0xFFFF_FFFF;
/// `NHBM_MAX_PLAN_RECORDS`: largest nmem (E2BIG beyond).
pub const MAX_PLAN_RECORDS: u32 = 1 << 20;
/// `NHBM_MAX_LIST_COUNT`: largest MR_LIST / MR_PTR_TABLE count (E2BIG beyond).
pub const MAX_LIST_COUNT: u32 = 1 << 20;
/// `NHBM_MAX_BATCH`: largest RESOLVE_BATCH count (E2BIG beyond).
pub const MAX_BATCH: u32 = 1 << 16;
/// `NHBM_MAX_ALIGNMENT`: largest alignment a record may ask for (1 GiB).
pub const MAX_ALIGNMENT: u64 = 1 << 30;
/// `NHBM_MAX_PLANS_PER_FILE`: live plans of one open file (E2BIG beyond).
pub const MAX_PLANS_PER_FILE: u32 = 4096;
/// `NHBM_MAX_PLANS_PER_DEVICE`: live plans of one device (ENOSPC beyond).
pub const MAX_PLANS_PER_DEVICE: u32 = 65536;
/// `NHBM_MAX_REMOTE_DEPTH`: longest chain of plans reaching each other through
/// MR_REMOTE (E2BIG beyond).
pub const MAX_REMOTE_DEPTH: u32 = 8;

/// Size of `struct nhbm_plan_header`.
pub const PLAN_HEADER_SIZE: usize = 24;
/// Size of `struct nhbm_mem_ref`.
pub const MEM_REF_SIZE: usize = 152;
/// Capacity of `nhbm_mem_ref.dtype`, including the NUL.
pub const DTYPE_LEN: usize = 16;
/// Capacity of `nhbm_mem_ref.shape`.
pub const MAX_NDIM: usize = 8;

/// `enum nhbm_arch`.
pub const ARCH_V2: u32 = 2;
pub const ARCH_V3: u32 = 3;
pub const ARCH_V4: u32 = 4;

/// `enum nhbm_reset_type`.
pub const RESET_DEVICE: u32 = 1;
pub const RESET_TPB: u32 = 2;

/// `enum nhbm_mr_type`: the numbers of the runtime's `kbin_mr_type_t`.
pub const MR_INVALID: u32 = 0;
pub const MR_SB: u32 = 1;
pub const MR_BUFFER_STAGED: u32 = 2;
pub const MR_BUFFER: u32 = 3;
pub const MR_TMP_BUF: u32 = 4;
pub const MR_INPUT: u32 = 5;
pub const MR_OUTPUT: u32 = 6;
pub const MR_PTR: u32 = 7;
pub const MR_VIRTUAL_TMP_BUF: u32 = 8;
pub const MR_LIST: u32 = 9;
pub const MR_PTR_TABLE: u32 = 10;
pub const MR_REMOTE: u32 = 11;

/// `enum nhbm_backing` (`kbin_backing_buf_t`).
pub const BACKING_LOCAL: u32 = 0;
pub const BACKING_SHARED: u32 = 1;
pub const BACKING_SHARDED: u32 = 2;
pub const BACKING_MAIN: u32 = 3;

/// `struct nhbm_plan_header`: offset 0 of a plan blob.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanHeader {
    pub local_scratchpad_size: u64,
    pub shared_scratchpad_size: u64,
    pub nmem: u32,
    pub rsvd: u32,
}

/// `u.list` of `struct nhbm_mem_ref` (MR_LIST, MR_PTR_TABLE).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrList {
    pub count: u32,
    pub rsvd: u32,
    pub ids_off: u64,
}

/// `u.ptr` of `struct nhbm_mem_ref` (MR_PTR).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrPtr {
    pub target_var_id: u32,
    pub rsvd: u32,
    pub rsvd2: u64,
}

/// `u.remote` of `struct nhbm_mem_ref` (MR_REMOTE).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrRemote {
    pub remote_var_id: u32,
    pub remote_plan_id: u32,
    pub rsvd: u64,
}

/// `u.vtmp` of `struct nhbm_mem_ref` (MR_VIRTUAL_TMP_BUF).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrVtmp {
    pub offset: u64,
    pub backing: u32,
    pub rsvd: u32,
}

/// `u.sb` of `struct nhbm_mem_ref` (MR_SB).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrSb {
    pub nc_id: u32,
    pub rsvd: u32,
    pub offset: u64,
}

/// The 16-byte union at +136 of `struct nhbm_mem_ref`.
///
/// Every variant is plain integers, so any bit pattern is valid for every
/// variant; the safe accessors on [`MemRef`] read it through `raw`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union MemRefUnion {
    pub list: MrList,
    pub ptr: MrPtr,
    pub remote: MrRemote,
    pub vtmp: MrVtmp,
    pub sb: MrSb,
    pub raw: [u64; 2],
}

impl Default for MemRefUnion {
    fn default() -> Self {
        MemRefUnion { raw: [0; 2] }
    }
}

impl core::fmt::Debug for MemRefUnion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#x?}", self.raw())
    }
}

impl PartialEq for MemRefUnion {
    fn eq(&self, other: &Self) -> bool {
        self.raw() == other.raw()
    }
}
impl Eq for MemRefUnion {}

impl MemRefUnion {
    /// The union as two little-endian-in-memory words.
    pub fn raw(&self) -> [u64; 2] {
        // SAFETY: every variant is 16 bytes of plain integers; any bit pattern
        // is a valid `[u64; 2]`.
        unsafe { self.raw }
    }
    /// The union as bytes, in memory order.
    pub fn bytes(&self) -> [u8; 16] {
        let r = self.raw();
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&r[0].to_ne_bytes());
        out[8..].copy_from_slice(&r[1].to_ne_bytes());
        out
    }
    pub fn list(&self) -> MrList {
        // SAFETY: plain integers, see `raw`.
        unsafe { self.list }
    }
    pub fn ptr(&self) -> MrPtr {
        // SAFETY: plain integers, see `raw`.
        unsafe { self.ptr }
    }
    pub fn remote(&self) -> MrRemote {
        // SAFETY: plain integers, see `raw`.
        unsafe { self.remote }
    }
    pub fn vtmp(&self) -> MrVtmp {
        // SAFETY: plain integers, see `raw`.
        unsafe { self.vtmp }
    }
    pub fn sb(&self) -> MrSb {
        // SAFETY: plain integers, see `raw`.
        unsafe { self.sb }
    }
}

/// `struct nhbm_mem_ref`: one 152-byte plan record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemRef {
    pub mr_type: u32,
    pub flags: u32,
    pub name_off: u64,
    pub size: u64,
    pub alignment: u64,
    pub var_id: u32,
    pub dtype: [u8; DTYPE_LEN],
    pub ndim: u32,
    pub shape: [u64; MAX_NDIM],
    pub data_off: u64,
    pub data_len: u64,
    pub u: MemRefUnion,
}

/// `struct nhbm_device_info` (NHBM_IOC_DEVICE_INFO).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    pub abi_version: u32,
    pub arch: u32,
    pub pci_vendor: u32,
    pub pci_device: u32,
    pub simulated: u32,
    pub nr_channels: u32,
    pub regions_per_channel: u32,
    pub nr_cores: u32,
    pub sbuf_size: u64,
    pub min_alloc_size: u64,
    pub bar0_size: u64,
    pub bar4_size: u64,
    pub channel_base: [u64; MAX_CHANNELS],
    pub channel_size: [u64; MAX_CHANNELS],
}

/// `struct nhbm_plan_load` (NHBM_IOC_PLAN_LOAD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanLoad {
    pub blob: u64,
    pub blob_len: u64,
    pub addrs: u64,
    pub channel: u32,
    pub flags: u32,
    pub plan_id: u32,
    pub rsvd: u32,
    pub local_scratchpad_pa: u64,
    pub shared_scratchpad_pa: u64,
    pub bytes_allocated: u64,
}

/// `struct nhbm_plan_unload` (NHBM_IOC_PLAN_UNLOAD).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanUnload {
    pub plan_id: u32,
    pub rsvd: u32,
}

/// `struct nhbm_resolve` (NHBM_IOC_RESOLVE).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resolve {
    pub plan_id: u32,
    pub var_id: u32,
    pub offset: u64,
    pub size: u64,
    pub addr: u64,
}

/// `struct nhbm_resolve_query`: one query of NHBM_IOC_RESOLVE_BATCH.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolveQuery {
    pub var_id: u32,
    pub status: i32,
    pub offset: u64,
    pub size: u64,
    pub addr: u64,
}

/// `struct nhbm_resolve_batch` (NHBM_IOC_RESOLVE_BATCH).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolveBatch {
    pub plan_id: u32,
    pub count: u32,
    pub queries: u64,
}

/// `struct nhbm_mem_xfer` (NHBM_IOC_MEM_WRITE / NHBM_IOC_MEM_READ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemXfer {
    pub plan_id: u32,
    pub var_id: u32,
    pub offset: u64,
    pub len: u64,
    pub buf: u64,
}

/// `struct nhbm_pool_stats`: one channel x region pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub total: u64,
    pub used: u64,
    pub peak: u64,
    pub live_chunks: u32,
    pub present: u32,
}

/// `struct nhbm_mem_stats` (NHBM_IOC_MEM_STATS).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    pub pools: [[PoolStats; MAX_REGIONS]; MAX_CHANNELS],
    pub own_bytes: u64,
    pub own_chunks: u32,
    pub own_plans: u32,
}

impl MemStats {
    /// Sum of `used` over every present pool.
    pub fn total_used(&self) -> u64 {
        self.present_pools().map(|(_, _, p)| p.used).sum()
    }
    /// Sum of `live_chunks` over every present pool.
    pub fn total_chunks(&self) -> u64 {
        self.present_pools()
            .map(|(_, _, p)| u64::from(p.live_chunks))
            .sum()
    }
    /// `(channel, region, stats)` of every present pool.
    pub fn present_pools(&self) -> impl Iterator<Item = (usize, usize, &PoolStats)> {
        self.pools.iter().enumerate().flat_map(|(c, regions)| {
            regions
                .iter()
                .enumerate()
                .filter(|(_, p)| p.present != 0)
                .map(move |(r, p)| (c, r, p))
        })
    }
}

/// `struct nhbm_reset` (NHBM_IOC_RESET).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reset {
    pub type_: u32,
    pub nc_map: u32,
    pub status: i32,
    pub rsvd: u32,
}

// ---- ioctl request numbers (asm-generic/ioctl.h) ----

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)`.
pub const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    assert!(size < (1 << IOC_SIZEBITS));
    (dir << IOC_DIRSHIFT)
        | (ty << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}
/// `_IOR(type, nr, T)`.
pub const fn ior<T>(nr: u32) -> u32 {
    ioc(IOC_READ, IOC_MAGIC, nr, size_of::<T>())
}
/// `_IOW(type, nr, T)`.
pub const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, IOC_MAGIC, nr, size_of::<T>())
}
/// `_IOWR(type, nr, T)`.
pub const fn iowr<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, IOC_MAGIC, nr, size_of::<T>())
}

pub const IOC_DEVICE_INFO: u32 = ior::<DeviceInfo>(0x00);
pub const IOC_PLAN_LOAD: u32 = iowr::<PlanLoad>(0x01);
pub const IOC_PLAN_UNLOAD: u32 = iow::<PlanUnload>(0x02);
pub const IOC_RESOLVE: u32 = iowr::<Resolve>(0x03);
pub const IOC_RESOLVE_BATCH: u32 = iow::<ResolveBatch>(0x04);
pub const IOC_MEM_WRITE: u32 = iow::<MemXfer>(0x05);
pub const IOC_MEM_READ: u32 = iow::<MemXfer>(0x06);
pub const IOC_MEM_STATS: u32 = ior::<MemStats>(0x07);
pub const IOC_RESET: u32 = iowr::<Reset>(0x08);

// ---- layout checks against the C header ----

const _: () = assert!(size_of::<PlanHeader>() == PLAN_HEADER_SIZE);
const _: () = assert!(offset_of!(PlanHeader, local_scratchpad_size) == 0);
const _: () = assert!(offset_of!(PlanHeader, shared_scratchpad_size) == 8);
const _: () = assert!(offset_of!(PlanHeader, nmem) == 16);
const _: () = assert!(offset_of!(PlanHeader, rsvd) == 20);

const _: () = assert!(size_of::<MemRef>() == MEM_REF_SIZE);
const _: () = assert!(offset_of!(MemRef, mr_type) == 0);
const _: () = assert!(offset_of!(MemRef, flags) == 4);
const _: () = assert!(offset_of!(MemRef, name_off) == 8);
const _: () = assert!(offset_of!(MemRef, size) == 16);
const _: () = assert!(offset_of!(MemRef, alignment) == 24);
const _: () = assert!(offset_of!(MemRef, var_id) == 32);
const _: () = assert!(offset_of!(MemRef, dtype) == 36);
const _: () = assert!(offset_of!(MemRef, ndim) == 52);
const _: () = assert!(offset_of!(MemRef, shape) == 56);
const _: () = assert!(offset_of!(MemRef, data_off) == 120);
const _: () = assert!(offset_of!(MemRef, data_len) == 128);
const _: () = assert!(offset_of!(MemRef, u) == 136);
const _: () = assert!(size_of::<MemRefUnion>() == 16);
const _: () = assert!(offset_of!(MemRef, u.list.count) == 136);
const _: () = assert!(offset_of!(MemRef, u.list.rsvd) == 140);
const _: () = assert!(offset_of!(MemRef, u.list.ids_off) == 144);
const _: () = assert!(offset_of!(MemRef, u.ptr.target_var_id) == 136);
const _: () = assert!(offset_of!(MemRef, u.ptr.rsvd) == 140);
const _: () = assert!(offset_of!(MemRef, u.ptr.rsvd2) == 144);
const _: () = assert!(offset_of!(MemRef, u.remote.remote_var_id) == 136);
const _: () = assert!(offset_of!(MemRef, u.remote.remote_plan_id) == 140);
const _: () = assert!(offset_of!(MemRef, u.remote.rsvd) == 144);
const _: () = assert!(offset_of!(MemRef, u.vtmp.offset) == 136);
const _: () = assert!(offset_of!(MemRef, u.vtmp.backing) == 144);
const _: () = assert!(offset_of!(MemRef, u.vtmp.rsvd) == 148);
const _: () = assert!(offset_of!(MemRef, u.sb.nc_id) == 136);
const _: () = assert!(offset_of!(MemRef, u.sb.rsvd) == 140);
const _: () = assert!(offset_of!(MemRef, u.sb.offset) == 144);
const _: () = assert!(offset_of!(MemRef, u.raw) == 136);

const _: () = assert!(size_of::<DeviceInfo>() == 128);
const _: () = assert!(offset_of!(DeviceInfo, abi_version) == 0);
const _: () = assert!(offset_of!(DeviceInfo, arch) == 4);
const _: () = assert!(offset_of!(DeviceInfo, pci_vendor) == 8);
const _: () = assert!(offset_of!(DeviceInfo, pci_device) == 12);
const _: () = assert!(offset_of!(DeviceInfo, simulated) == 16);
const _: () = assert!(offset_of!(DeviceInfo, nr_channels) == 20);
const _: () = assert!(offset_of!(DeviceInfo, regions_per_channel) == 24);
const _: () = assert!(offset_of!(DeviceInfo, nr_cores) == 28);
const _: () = assert!(offset_of!(DeviceInfo, sbuf_size) == 32);
const _: () = assert!(offset_of!(DeviceInfo, min_alloc_size) == 40);
const _: () = assert!(offset_of!(DeviceInfo, bar0_size) == 48);
const _: () = assert!(offset_of!(DeviceInfo, bar4_size) == 56);
const _: () = assert!(offset_of!(DeviceInfo, channel_base) == 64);
const _: () = assert!(offset_of!(DeviceInfo, channel_size) == 96);

const _: () = assert!(size_of::<PlanLoad>() == 64);
const _: () = assert!(offset_of!(PlanLoad, blob) == 0);
const _: () = assert!(offset_of!(PlanLoad, blob_len) == 8);
const _: () = assert!(offset_of!(PlanLoad, addrs) == 16);
const _: () = assert!(offset_of!(PlanLoad, channel) == 24);
const _: () = assert!(offset_of!(PlanLoad, flags) == 28);
const _: () = assert!(offset_of!(PlanLoad, plan_id) == 32);
const _: () = assert!(offset_of!(PlanLoad, rsvd) == 36);
const _: () = assert!(offset_of!(PlanLoad, local_scratchpad_pa) == 40);
const _: () = assert!(offset_of!(PlanLoad, shared_scratchpad_pa) == 48);
const _: () = assert!(offset_of!(PlanLoad, bytes_allocated) == 56);

const _: () = assert!(size_of::<PlanUnload>() == 8);
const _: () = assert!(offset_of!(PlanUnload, plan_id) == 0);
const _: () = assert!(offset_of!(PlanUnload, rsvd) == 4);

const _: () = assert!(size_of::<Resolve>() == 32);
const _: () = assert!(offset_of!(Resolve, plan_id) == 0);
const _: () = assert!(offset_of!(Resolve, var_id) == 4);
const _: () = assert!(offset_of!(Resolve, offset) == 8);
const _: () = assert!(offset_of!(Resolve, size) == 16);
const _: () = assert!(offset_of!(Resolve, addr) == 24);

const _: () = assert!(size_of::<ResolveQuery>() == 32);
const _: () = assert!(offset_of!(ResolveQuery, var_id) == 0);
const _: () = assert!(offset_of!(ResolveQuery, status) == 4);
const _: () = assert!(offset_of!(ResolveQuery, offset) == 8);
const _: () = assert!(offset_of!(ResolveQuery, size) == 16);
const _: () = assert!(offset_of!(ResolveQuery, addr) == 24);

const _: () = assert!(size_of::<ResolveBatch>() == 16);
const _: () = assert!(offset_of!(ResolveBatch, plan_id) == 0);
const _: () = assert!(offset_of!(ResolveBatch, count) == 4);
const _: () = assert!(offset_of!(ResolveBatch, queries) == 8);

const _: () = assert!(size_of::<MemXfer>() == 32);
const _: () = assert!(offset_of!(MemXfer, plan_id) == 0);
const _: () = assert!(offset_of!(MemXfer, var_id) == 4);
const _: () = assert!(offset_of!(MemXfer, offset) == 8);
const _: () = assert!(offset_of!(MemXfer, len) == 16);
const _: () = assert!(offset_of!(MemXfer, buf) == 24);

const _: () = assert!(size_of::<PoolStats>() == 32);
const _: () = assert!(offset_of!(PoolStats, total) == 0);
const _: () = assert!(offset_of!(PoolStats, used) == 8);
const _: () = assert!(offset_of!(PoolStats, peak) == 16);
const _: () = assert!(offset_of!(PoolStats, live_chunks) == 24);
const _: () = assert!(offset_of!(PoolStats, present) == 28);

const _: () = assert!(size_of::<MemStats>() == 16 * 32 + 16);
const _: () = assert!(offset_of!(MemStats, pools) == 0);
const _: () = assert!(offset_of!(MemStats, own_bytes) == 512);
const _: () = assert!(offset_of!(MemStats, own_chunks) == 520);
const _: () = assert!(offset_of!(MemStats, own_plans) == 524);

const _: () = assert!(size_of::<Reset>() == 16);
const _: () = assert!(offset_of!(Reset, type_) == 0);
const _: () = assert!(offset_of!(Reset, nc_map) == 4);
const _: () = assert!(offset_of!(Reset, status) == 8);
const _: () = assert!(offset_of!(Reset, rsvd) == 12);

#[cfg(test)]
mod tests {
    use super::*;

    /// Request numbers computed by hand from asm-generic/ioctl.h:
    /// dir << 30 | size << 16 | 0xBB << 8 | nr, with READ = 2, WRITE = 1.
    #[test]
    fn ioctl_numbers_match_hand_computed_values() {
        assert_eq!(IOC_DEVICE_INFO, 0x8080_BB00); // R, 128 bytes
        assert_eq!(IOC_PLAN_LOAD, 0xC040_BB01); // RW, 64 bytes
        assert_eq!(IOC_PLAN_UNLOAD, 0x4008_BB02); // W, 8 bytes
        assert_eq!(IOC_RESOLVE, 0xC020_BB03); // RW, 32 bytes
        assert_eq!(IOC_RESOLVE_BATCH, 0x4010_BB04); // W, 16 bytes
        assert_eq!(IOC_MEM_WRITE, 0x4020_BB05); // W, 32 bytes
        assert_eq!(IOC_MEM_READ, 0x4020_BB06); // W, 32 bytes
        assert_eq!(IOC_MEM_STATS, 0x8210_BB07); // R, 528 bytes
        assert_eq!(IOC_RESET, 0xC010_BB08); // RW, 16 bytes
    }

    #[test]
    fn mem_stats_sums_only_present_pools() {
        let mut s = MemStats::default();
        s.pools[0][0] = PoolStats {
            total: 100,
            used: 10,
            peak: 10,
            live_chunks: 1,
            present: 1,
        };
        s.pools[1][2] = PoolStats {
            total: 100,
            used: 5,
            peak: 7,
            live_chunks: 2,
            present: 1,
        };
        s.pools[3][3] = PoolStats {
            total: 100,
            used: 99,
            peak: 99,
            live_chunks: 9,
            present: 0,
        };
        assert_eq!(s.total_used(), 15);
        assert_eq!(s.total_chunks(), 3);
        assert_eq!(s.present_pools().count(), 2);
    }

    #[test]
    fn union_accessors_share_storage() {
        let u = MemRefUnion {
            vtmp: MrVtmp {
                offset: 0x1122,
                backing: 1,
                rsvd: 0,
            },
        };
        assert_eq!(u.raw(), [0x1122, 1]);
        assert_eq!(u.sb().nc_id, 0x1122);
        assert_eq!(u.list().ids_off, 1);
    }
}
