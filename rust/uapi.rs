// SPDX-License-Identifier: GPL-2.0-only

//! The UAPI of include/uapi/linux/neuron_hbm.h, mirrored with compile-time
//! size and offset checks so that the kernel and userspace cannot disagree.

use crate::abstractions::plain::plain_struct;
use core::mem::{offset_of, size_of};
use kernel::ioctl::{_IOR, _IOW, _IOWR};

/// `NHBM_ABI_VERSION`.
pub(crate) const ABI_VERSION: u32 = 2;
/// `NHBM_IOC_MAGIC`.
pub(crate) const IOC_MAGIC: u32 = 0xBB;
/// `NHBM_PA_UNSTAGED`: device PA 0 is legal, so "not placed" is all ones.
pub(crate) const PA_UNSTAGED: u64 = u64::MAX;
/// `NHBM_CHANNEL_ANY`.
pub(crate) const CHANNEL_ANY: u32 = 0xFFFF_FFFF;
/// `NHBM_MAX_PLAN_RECORDS`.
pub(crate) const MAX_PLAN_RECORDS: u32 = 1 << 20;
/// `NHBM_MAX_LIST_COUNT`.
pub(crate) const MAX_LIST_COUNT: u32 = 1 << 20;
/// `NHBM_MAX_BATCH`.
pub(crate) const MAX_BATCH: u32 = 1 << 16;
/// `NHBM_MAX_ALIGNMENT`.
pub(crate) const MAX_ALIGNMENT: u64 = 1 << 30;
/// `NHBM_MAX_PLANS_PER_FILE`.
pub(crate) const MAX_PLANS_PER_FILE: u32 = 4096;
/// `NHBM_MAX_REMOTE_DEPTH`.
pub(crate) const MAX_REMOTE_DEPTH: u32 = 8;

// `enum nhbm_mr_type`: the numbers of the runtime's `kbin_mr_type_t`.
/// `NHBM_MR_INVALID`: never a valid record.
pub(crate) const MR_INVALID: u32 = 0;
/// `NHBM_MR_SB`: window of a NeuronCore's State Buffer.
pub(crate) const MR_SB: u32 = 1;
/// `NHBM_MR_BUFFER_STAGED`: constant staged from the host.
pub(crate) const MR_BUFFER_STAGED: u32 = 2;
/// `NHBM_MR_BUFFER`: weights or persistent data.
pub(crate) const MR_BUFFER: u32 = 3;
/// `NHBM_MR_TMP_BUF`: temporary buffer.
pub(crate) const MR_TMP_BUF: u32 = 4;
/// `NHBM_MR_INPUT`: graph input.
pub(crate) const MR_INPUT: u32 = 5;
/// `NHBM_MR_OUTPUT`: graph output.
pub(crate) const MR_OUTPUT: u32 = 6;
/// `NHBM_MR_PTR`: alias of another variable.
pub(crate) const MR_PTR: u32 = 7;
/// `NHBM_MR_VIRTUAL_TMP_BUF`: window of a scratchpad.
pub(crate) const MR_VIRTUAL_TMP_BUF: u32 = 8;
/// `NHBM_MR_LIST`: table of variable addresses.
pub(crate) const MR_LIST: u32 = 9;
/// `NHBM_MR_PTR_TABLE`: table of list-table addresses.
pub(crate) const MR_PTR_TABLE: u32 = 10;
/// `NHBM_MR_REMOTE`: variable of another plan.
pub(crate) const MR_REMOTE: u32 = 11;

plain_struct! {
    /// `struct nhbm_plan_header`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct PlanHeader {
        pub(crate) local_scratchpad_size: u64,
        pub(crate) shared_scratchpad_size: u64,
        pub(crate) nmem: u32,
        pub(crate) rsvd: u32,
    }
}

plain_struct! {
    /// `struct nhbm_mem_ref`; the 16-byte union is kept as raw words and decoded
    /// per kind by the parser.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct MemRef {
        pub(crate) mr_type: u32,
        pub(crate) flags: u32,
        pub(crate) name_off: u64,
        pub(crate) size: u64,
        pub(crate) alignment: u64,
        pub(crate) var_id: u32,
        pub(crate) dtype: [u8; 16],
        pub(crate) ndim: u32,
        pub(crate) shape: [u64; 8],
        pub(crate) data_off: u64,
        pub(crate) data_len: u64,
        pub(crate) u: [u64; 2],
    }
}

plain_struct! {
    /// `struct nhbm_device_info`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct DeviceInfo {
        pub(crate) abi_version: u32,
        pub(crate) arch: u32,
        pub(crate) pci_vendor: u32,
        pub(crate) pci_device: u32,
        pub(crate) simulated: u32,
        pub(crate) nr_channels: u32,
        pub(crate) regions_per_channel: u32,
        pub(crate) nr_cores: u32,
        pub(crate) sbuf_size: u64,
        pub(crate) min_alloc_size: u64,
        pub(crate) bar0_size: u64,
        pub(crate) bar4_size: u64,
        pub(crate) channel_base: [u64; 4],
        pub(crate) channel_size: [u64; 4],
    }
}

plain_struct! {
    /// `struct nhbm_plan_load`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct PlanLoad {
        pub(crate) blob: u64,
        pub(crate) blob_len: u64,
        pub(crate) addrs: u64,
        pub(crate) channel: u32,
        pub(crate) flags: u32,
        pub(crate) plan_id: u32,
        pub(crate) rsvd: u32,
        pub(crate) local_scratchpad_pa: u64,
        pub(crate) shared_scratchpad_pa: u64,
        pub(crate) bytes_allocated: u64,
    }
}

plain_struct! {
    /// `struct nhbm_plan_unload`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct PlanUnload {
        pub(crate) plan_id: u32,
        pub(crate) rsvd: u32,
    }
}

plain_struct! {
    /// `struct nhbm_resolve`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct Resolve {
        pub(crate) plan_id: u32,
        pub(crate) var_id: u32,
        pub(crate) offset: u64,
        pub(crate) size: u64,
        pub(crate) addr: u64,
    }
}

plain_struct! {
    /// `struct nhbm_resolve_query`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct ResolveQuery {
        pub(crate) var_id: u32,
        pub(crate) status: i32,
        pub(crate) offset: u64,
        pub(crate) size: u64,
        pub(crate) addr: u64,
    }
}

plain_struct! {
    /// `struct nhbm_resolve_batch`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct ResolveBatch {
        pub(crate) plan_id: u32,
        pub(crate) count: u32,
        pub(crate) queries: u64,
    }
}

plain_struct! {
    /// `struct nhbm_mem_xfer`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct MemXfer {
        pub(crate) plan_id: u32,
        pub(crate) var_id: u32,
        pub(crate) offset: u64,
        pub(crate) len: u64,
        pub(crate) buf: u64,
    }
}

plain_struct! {
    /// `struct nhbm_pool_stats`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct PoolStats {
        pub(crate) total: u64,
        pub(crate) used: u64,
        pub(crate) peak: u64,
        pub(crate) live_chunks: u32,
        pub(crate) present: u32,
    }
}

plain_struct! {
    /// `struct nhbm_mem_stats`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct MemStats {
        pub(crate) pools: [[PoolStats; 4]; 4],
        pub(crate) own_bytes: u64,
        pub(crate) own_chunks: u32,
        pub(crate) own_plans: u32,
    }
}

plain_struct! {
    /// `struct nhbm_reset`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct Reset {
        pub(crate) r#type: u32,
        pub(crate) nc_map: u32,
        pub(crate) status: i32,
        pub(crate) rsvd: u32,
    }
}

plain_struct! {
    /// `struct nhbm_map_offset`.
    #[derive(Clone, Copy, Default, Debug)]
    pub(crate) struct MapOffset {
        pub(crate) plan_id: u32,
        pub(crate) var_id: u32,
        pub(crate) flags: u32,
        pub(crate) rsvd: u32,
        pub(crate) offset: u64,
        pub(crate) size: u64,
    }
}

const _: () = {
    assert!(size_of::<PlanHeader>() == 24);
    assert!(size_of::<MemRef>() == 152);
    assert!(offset_of!(MemRef, name_off) == 8);
    assert!(offset_of!(MemRef, size) == 16);
    assert!(offset_of!(MemRef, alignment) == 24);
    assert!(offset_of!(MemRef, var_id) == 32);
    assert!(offset_of!(MemRef, dtype) == 36);
    assert!(offset_of!(MemRef, ndim) == 52);
    assert!(offset_of!(MemRef, shape) == 56);
    assert!(offset_of!(MemRef, data_off) == 120);
    assert!(offset_of!(MemRef, data_len) == 128);
    assert!(offset_of!(MemRef, u) == 136);
    assert!(size_of::<DeviceInfo>() == 128);
    assert!(size_of::<PlanLoad>() == 64);
    assert!(offset_of!(PlanLoad, plan_id) == 32);
    assert!(offset_of!(PlanLoad, local_scratchpad_pa) == 40);
    assert!(size_of::<PlanUnload>() == 8);
    assert!(size_of::<Resolve>() == 32);
    assert!(size_of::<ResolveQuery>() == 32);
    assert!(size_of::<ResolveBatch>() == 16);
    assert!(size_of::<MemXfer>() == 32);
    assert!(size_of::<PoolStats>() == 32);
    assert!(size_of::<MemStats>() == 528);
    assert!(size_of::<Reset>() == 16);
    assert!(size_of::<MapOffset>() == 32);
};

/// `NHBM_IOC_DEVICE_INFO`.
pub(crate) const IOC_DEVICE_INFO: u32 = _IOR::<DeviceInfo>(IOC_MAGIC, 0x00);
/// `NHBM_IOC_PLAN_LOAD`.
pub(crate) const IOC_PLAN_LOAD: u32 = _IOWR::<PlanLoad>(IOC_MAGIC, 0x01);
/// `NHBM_IOC_PLAN_UNLOAD`.
pub(crate) const IOC_PLAN_UNLOAD: u32 = _IOW::<PlanUnload>(IOC_MAGIC, 0x02);
/// `NHBM_IOC_RESOLVE`.
pub(crate) const IOC_RESOLVE: u32 = _IOWR::<Resolve>(IOC_MAGIC, 0x03);
/// `NHBM_IOC_RESOLVE_BATCH`.
pub(crate) const IOC_RESOLVE_BATCH: u32 = _IOW::<ResolveBatch>(IOC_MAGIC, 0x04);
/// `NHBM_IOC_MEM_WRITE`.
pub(crate) const IOC_MEM_WRITE: u32 = _IOW::<MemXfer>(IOC_MAGIC, 0x05);
/// `NHBM_IOC_MEM_READ`.
pub(crate) const IOC_MEM_READ: u32 = _IOW::<MemXfer>(IOC_MAGIC, 0x06);
/// `NHBM_IOC_MEM_STATS`.
pub(crate) const IOC_MEM_STATS: u32 = _IOR::<MemStats>(IOC_MAGIC, 0x07);
/// `NHBM_IOC_RESET`.
pub(crate) const IOC_RESET: u32 = _IOWR::<Reset>(IOC_MAGIC, 0x08);
/// `NHBM_IOC_MAP_OFFSET`.
pub(crate) const IOC_MAP_OFFSET: u32 = _IOWR::<MapOffset>(IOC_MAGIC, 0x09);
