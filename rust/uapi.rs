// SPDX-License-Identifier: GPL-2.0-only

//! The UAPI of include/uapi/linux/neuron_hbm.h, by the names the module
//! uses: its types and constants come from the header itself, through
//! bindgen ([`crate::abstractions::uapi_types`]), so that the kernel and
//! userspace read one ABI; the ioctl numbers, which are macros bindgen
//! cannot expand, are built here from the same structs.

use crate::abstractions::uapi_types as c;
use kernel::ioctl::{_IOR, _IOW, _IOWR};

/// `NHBM_ABI_VERSION`.
pub(crate) const ABI_VERSION: u32 = c::NHBM_ABI_VERSION;
/// `NHBM_IOC_MAGIC`.
pub(crate) const IOC_MAGIC: u32 = c::NHBM_IOC_MAGIC;
/// `NHBM_PA_UNSTAGED`: device PA 0 is legal, so "not placed" is all ones.
// bindgen reads the all-ones literal as the `i32` -1, which widens to all ones.
pub(crate) const PA_UNSTAGED: u64 = c::NHBM_PA_UNSTAGED as u64;
/// `NHBM_CHANNEL_ANY`.
pub(crate) const CHANNEL_ANY: u32 = c::NHBM_CHANNEL_ANY;
/// `NHBM_MAX_PLAN_RECORDS`.
pub(crate) const MAX_PLAN_RECORDS: u32 = c::NHBM_MAX_PLAN_RECORDS;
/// `NHBM_MAX_LIST_COUNT`.
pub(crate) const MAX_LIST_COUNT: u32 = c::NHBM_MAX_LIST_COUNT;
/// `NHBM_MAX_BATCH`.
pub(crate) const MAX_BATCH: u32 = c::NHBM_MAX_BATCH;
/// `NHBM_MAX_ALIGNMENT`.
pub(crate) const MAX_ALIGNMENT: u64 = c::NHBM_MAX_ALIGNMENT as u64;
/// `NHBM_MAX_PLANS_PER_FILE`.
pub(crate) const MAX_PLANS_PER_FILE: u32 = c::NHBM_MAX_PLANS_PER_FILE;
/// `NHBM_MAX_REMOTE_DEPTH`.
pub(crate) const MAX_REMOTE_DEPTH: u32 = c::NHBM_MAX_REMOTE_DEPTH;

// `enum nhbm_mr_type`: the numbers of the runtime's `kbin_mr_type_t`.
/// `NHBM_MR_INVALID`: never a valid record.
pub(crate) const MR_INVALID: u32 = c::NHBM_MR_INVALID;
/// `NHBM_MR_SB`: window of a NeuronCore's State Buffer.
pub(crate) const MR_SB: u32 = c::NHBM_MR_SB;
/// `NHBM_MR_BUFFER_STAGED`: constant staged from the host.
pub(crate) const MR_BUFFER_STAGED: u32 = c::NHBM_MR_BUFFER_STAGED;
/// `NHBM_MR_BUFFER`: weights or persistent data.
pub(crate) const MR_BUFFER: u32 = c::NHBM_MR_BUFFER;
/// `NHBM_MR_TMP_BUF`: temporary buffer.
pub(crate) const MR_TMP_BUF: u32 = c::NHBM_MR_TMP_BUF;
/// `NHBM_MR_INPUT`: graph input.
pub(crate) const MR_INPUT: u32 = c::NHBM_MR_INPUT;
/// `NHBM_MR_OUTPUT`: graph output.
pub(crate) const MR_OUTPUT: u32 = c::NHBM_MR_OUTPUT;
/// `NHBM_MR_PTR`: alias of another variable.
pub(crate) const MR_PTR: u32 = c::NHBM_MR_PTR;
/// `NHBM_MR_VIRTUAL_TMP_BUF`: window of a scratchpad.
pub(crate) const MR_VIRTUAL_TMP_BUF: u32 = c::NHBM_MR_VIRTUAL_TMP_BUF;
/// `NHBM_MR_LIST`: table of variable addresses.
pub(crate) const MR_LIST: u32 = c::NHBM_MR_LIST;
/// `NHBM_MR_PTR_TABLE`: table of list-table addresses.
pub(crate) const MR_PTR_TABLE: u32 = c::NHBM_MR_PTR_TABLE;
/// `NHBM_MR_REMOTE`: variable of another plan.
pub(crate) const MR_REMOTE: u32 = c::NHBM_MR_REMOTE;

/// `NHBM_BACKING_LOCAL`: the plan's local scratchpad.
pub(crate) const BACKING_LOCAL: u32 = c::NHBM_BACKING_LOCAL;
/// `NHBM_BACKING_SHARED`: the plan's shared scratchpad.
pub(crate) const BACKING_SHARED: u32 = c::NHBM_BACKING_SHARED;
/// `NHBM_BACKING_SHARDED`: one core's shard of the shared scratchpad.
pub(crate) const BACKING_SHARDED: u32 = c::NHBM_BACKING_SHARDED;
/// `NHBM_BACKING_MAIN`: a buffer of its own, placed at load.
pub(crate) const BACKING_MAIN: u32 = c::NHBM_BACKING_MAIN;

/// `struct nhbm_cores`.
pub(crate) use c::nhbm_cores as Cores;
/// `struct nhbm_device_info`.
pub(crate) use c::nhbm_device_info as DeviceInfo;
/// `struct nhbm_map_offset`.
pub(crate) use c::nhbm_map_offset as MapOffset;
/// `struct nhbm_mem_ref`.
pub(crate) use c::nhbm_mem_ref as MemRef;
/// `struct nhbm_mem_stats`.
pub(crate) use c::nhbm_mem_stats as MemStats;
/// `struct nhbm_mem_xfer`.
pub(crate) use c::nhbm_mem_xfer as MemXfer;
/// `struct nhbm_plan_export`.
pub(crate) use c::nhbm_plan_export as PlanExport;
/// `struct nhbm_plan_header`.
pub(crate) use c::nhbm_plan_header as PlanHeader;
/// `struct nhbm_plan_import`.
pub(crate) use c::nhbm_plan_import as PlanImport;
/// `struct nhbm_plan_load`.
pub(crate) use c::nhbm_plan_load as PlanLoad;
/// `struct nhbm_plan_unload`.
pub(crate) use c::nhbm_plan_unload as PlanUnload;
/// `struct nhbm_pool_stats`.
pub(crate) use c::nhbm_pool_stats as PoolStats;
/// `struct nhbm_reset`.
pub(crate) use c::nhbm_reset as Reset;
/// `struct nhbm_resolve`.
pub(crate) use c::nhbm_resolve as Resolve;
/// `struct nhbm_resolve_batch`.
pub(crate) use c::nhbm_resolve_batch as ResolveBatch;
/// `struct nhbm_resolve_query`.
pub(crate) use c::nhbm_resolve_query as ResolveQuery;

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
/// `NHBM_IOC_CORES`.
pub(crate) const IOC_CORES: u32 = _IOWR::<Cores>(IOC_MAGIC, 0x0a);
/// `NHBM_IOC_RESET_START`.
pub(crate) const IOC_RESET_START: u32 = _IOWR::<Reset>(IOC_MAGIC, 0x0b);
/// `NHBM_IOC_RESET_WAIT`.
pub(crate) const IOC_RESET_WAIT: u32 = _IOWR::<Reset>(IOC_MAGIC, 0x0c);
/// `NHBM_IOC_PLAN_EXPORT`.
pub(crate) const IOC_PLAN_EXPORT: u32 = _IOWR::<PlanExport>(IOC_MAGIC, 0x0d);
/// `NHBM_IOC_PLAN_IMPORT`.
pub(crate) const IOC_PLAN_IMPORT: u32 = _IOWR::<PlanImport>(IOC_MAGIC, 0x0e);
