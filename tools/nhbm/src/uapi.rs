//! The UAPI of `include/uapi/linux/neuron_hbm.h`.
//!
//! The structures and constants are generated from the header at build time
//! (`build.rs`): `struct nhbm_mem_ref` is [`MemRef`], `NHBM_MR_LIST` is
//! [`MR_LIST`]. Each structure has bindgen's compile-time size and offset
//! checks and the zerocopy byte views (`as_bytes`, `read_from_bytes`), which
//! compile only for a structure without padding. What the header cannot say
//! to bindgen is written here: the ioctl request numbers (function-like
//! macros), the per-kind views of the record's union, and sums over
//! [`MemStats`].

use core::mem::size_of;

use zerocopy::{FromBytes, Immutable, IntoBytes};

mod generated {
    #![allow(non_camel_case_types, missing_docs, clippy::all)]

    /// The C types the header's `__u32`, `char`, ... stand for; `char` is a
    /// byte (the record's dtype), as in the kernel's mirror. The whole set
    /// of `<linux/types.h>`, whichever the header uses today.
    #[allow(dead_code)]
    mod ctypes {
        pub type c_char = u8;
        pub type c_schar = i8;
        pub type c_uchar = u8;
        pub type c_short = i16;
        pub type c_ushort = u16;
        pub type c_int = i32;
        pub type c_uint = u32;
        pub type c_longlong = i64;
        pub type c_ulonglong = u64;
    }

    /// `union nhbm_mem_ref_union`: the 16 bytes at +0x88 of a record, kept as
    /// raw words (a union has no byte view) and read per kind through
    /// [`super::UnionView`].
    #[repr(C)]
    #[derive(
        Clone,
        Copy,
        Debug,
        Default,
        PartialEq,
        Eq,
        zerocopy::FromBytes,
        zerocopy::IntoBytes,
        zerocopy::Immutable,
        zerocopy::KnownLayout,
    )]
    pub struct MemRefUnion {
        /// The union as two words in memory order.
        pub raw: [u64; 2],
    }

    include!(concat!(env!("OUT_DIR"), "/neuron_hbm.rs"));
}

pub use generated::{
    Backing, Cores, DeviceInfo, MapOffset, MemRef, MemRefUnion, MemStats, MemXfer, MrList, MrPtr,
    MrRemote, MrSb, MrType, MrVtmp, PlanExport, PlanHeader, PlanImport, PlanLoad, PlanUnload,
    PoolStats, Reset, ResetType, Resolve, ResolveBatch, ResolveQuery, ABI_VERSION, ARCH_V2,
    ARCH_V3, ARCH_V4, BACKING_LOCAL, BACKING_MAIN, BACKING_SHARDED, BACKING_SHARED, CHANNEL_ANY,
    IOC_MAGIC, MAX_ALIGNMENT, MAX_BATCH, MAX_CHANNELS, MAX_CORES, MAX_LIST_COUNT,
    MAX_PLANS_PER_DEVICE, MAX_PLANS_PER_FILE, MAX_PLAN_RECORDS, MAX_REGIONS, MAX_REMOTE_DEPTH,
    MR_BUFFER, MR_BUFFER_STAGED, MR_INPUT, MR_INVALID, MR_LIST, MR_OUTPUT, MR_PTR, MR_PTR_TABLE,
    MR_REMOTE, MR_SB, MR_TMP_BUF, MR_VIRTUAL_TMP_BUF, PA_UNSTAGED, RESET_DEVICE, RESET_TPB,
};

/// Size of `struct nhbm_plan_header`.
pub const PLAN_HEADER_SIZE: usize = size_of::<PlanHeader>();
/// Size of `struct nhbm_mem_ref`.
pub const MEM_REF_SIZE: usize = size_of::<MemRef>();
/// Capacity of `nhbm_mem_ref.dtype`, including the NUL.
pub const DTYPE_LEN: usize = array_len(|m| &m.dtype);
/// Capacity of `nhbm_mem_ref.shape`.
pub const MAX_NDIM: usize = array_len(|m| &m.shape);

/// The length of the array field `field` selects.
const fn array_len<T, const N: usize>(_field: fn(&MemRef) -> &[T; N]) -> usize {
    N
}

/// A per-kind view of the record's union ([`MrList`], [`MrPtr`], ...).
pub trait UnionView: FromBytes + IntoBytes + Immutable {}
impl UnionView for MrList {}
impl UnionView for MrPtr {}
impl UnionView for MrRemote {}
impl UnionView for MrVtmp {}
impl UnionView for MrSb {}

impl<V: UnionView> From<V> for MemRefUnion {
    fn from(v: V) -> Self {
        Self::read_from_bytes(v.as_bytes()).expect("every view is 16 bytes")
    }
}

impl MemRefUnion {
    /// The union as two words in memory order.
    pub fn raw(&self) -> [u64; 2] {
        self.raw
    }
    /// The union as bytes, in memory order.
    pub fn bytes(&self) -> [u8; 16] {
        zerocopy::transmute!(self.raw)
    }
    /// The view `V` of the union.
    pub fn view<V: UnionView>(&self) -> V {
        V::read_from_bytes(self.as_bytes()).expect("every view is 16 bytes")
    }
    /// `u.list` (MR_LIST, MR_PTR_TABLE).
    pub fn list(&self) -> MrList {
        self.view()
    }
    /// `u.ptr` (MR_PTR).
    pub fn ptr(&self) -> MrPtr {
        self.view()
    }
    /// `u.remote` (MR_REMOTE).
    pub fn remote(&self) -> MrRemote {
        self.view()
    }
    /// `u.vtmp` (MR_VIRTUAL_TMP_BUF).
    pub fn vtmp(&self) -> MrVtmp {
        self.view()
    }
    /// `u.sb` (MR_SB).
    pub fn sb(&self) -> MrSb {
        self.view()
    }
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

/// `NHBM_IOC_DEVICE_INFO`.
pub const IOC_DEVICE_INFO: u32 = ior::<DeviceInfo>(0x00);
/// `NHBM_IOC_PLAN_LOAD`.
pub const IOC_PLAN_LOAD: u32 = iowr::<PlanLoad>(0x01);
/// `NHBM_IOC_PLAN_UNLOAD`.
pub const IOC_PLAN_UNLOAD: u32 = iow::<PlanUnload>(0x02);
/// `NHBM_IOC_RESOLVE`.
pub const IOC_RESOLVE: u32 = iowr::<Resolve>(0x03);
/// `NHBM_IOC_RESOLVE_BATCH`.
pub const IOC_RESOLVE_BATCH: u32 = iow::<ResolveBatch>(0x04);
/// `NHBM_IOC_MEM_WRITE`.
pub const IOC_MEM_WRITE: u32 = iow::<MemXfer>(0x05);
/// `NHBM_IOC_MEM_READ`.
pub const IOC_MEM_READ: u32 = iow::<MemXfer>(0x06);
/// `NHBM_IOC_MEM_STATS`.
pub const IOC_MEM_STATS: u32 = ior::<MemStats>(0x07);
/// `NHBM_IOC_RESET`.
pub const IOC_RESET: u32 = iowr::<Reset>(0x08);
/// `NHBM_IOC_MAP_OFFSET`.
pub const IOC_MAP_OFFSET: u32 = iowr::<MapOffset>(0x09);
/// `NHBM_IOC_CORES`.
pub const IOC_CORES: u32 = iowr::<Cores>(0x0a);
/// `NHBM_IOC_RESET_START`.
pub const IOC_RESET_START: u32 = iowr::<Reset>(0x0b);
/// `NHBM_IOC_RESET_WAIT`.
pub const IOC_RESET_WAIT: u32 = iowr::<Reset>(0x0c);
/// `NHBM_IOC_PLAN_EXPORT`.
pub const IOC_PLAN_EXPORT: u32 = iowr::<PlanExport>(0x0d);
/// `NHBM_IOC_PLAN_IMPORT`.
pub const IOC_PLAN_IMPORT: u32 = iowr::<PlanImport>(0x0e);

#[cfg(test)]
mod tests {
    use super::*;

    /// Request numbers computed by hand from asm-generic/ioctl.h:
    /// dir << 30 | size << 16 | 0xBB << 8 | nr, with READ = 2, WRITE = 1.
    /// The sizes in them are the header's, through bindgen.
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
        assert_eq!(IOC_MAP_OFFSET, 0xC020_BB09); // RW, 32 bytes
        assert_eq!(IOC_CORES, 0xC030_BB0A); // RW, 48 bytes
        assert_eq!(IOC_RESET_START, 0xC010_BB0B); // RW, 16 bytes
        assert_eq!(IOC_RESET_WAIT, 0xC010_BB0C); // RW, 16 bytes
        assert_eq!(IOC_PLAN_EXPORT, 0xC010_BB0D); // RW, 16 bytes
        assert_eq!(IOC_PLAN_IMPORT, 0xC018_BB0E); // RW, 24 bytes
    }

    #[test]
    fn record_sizes_are_the_formats() {
        assert_eq!(PLAN_HEADER_SIZE, 24);
        assert_eq!(MEM_REF_SIZE, 152);
        assert_eq!(DTYPE_LEN, 16);
        assert_eq!(MAX_NDIM, 8);
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
    fn union_views_share_storage() {
        let u = MemRefUnion::from(MrVtmp {
            offset: 0x1122,
            backing: 1,
            nc_id: 0,
        });
        assert_eq!(u.raw(), [0x1122, 1]);
        assert_eq!(u.sb().nc_id, 0x1122);
        assert_eq!(u.list().ids_off, 1);
        assert_eq!(&u.bytes()[..2], &[0x22, 0x11]);
    }

    #[test]
    fn structs_as_bytes_round_trip() {
        let u = PlanUnload {
            plan_id: 7,
            rsvd: 9,
        };
        assert_eq!(u.as_bytes(), [7, 0, 0, 0, 9, 0, 0, 0]);
        assert_eq!(PlanUnload::read_from_bytes(u.as_bytes()), Ok(u));
        let mut r = MemRef {
            var_id: 3,
            ..Default::default()
        };
        r.dtype[..3].copy_from_slice(b"f32");
        let back = MemRef::read_from_bytes(r.as_bytes()).unwrap();
        assert_eq!(back, r);
        assert_eq!(&r.as_bytes()[36..39], b"f32");
    }
}
