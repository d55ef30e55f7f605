/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * neuron_hbm: userspace interface of the AWS Neuron HBM module.
 *
 * A runtime process stages a static memory plan (mem_ref records) once with
 * NHBM_IOC_PLAN_LOAD; every variable is then placed at a fixed device physical
 * address, and NHBM_IOC_RESOLVE turns (variable, offset) into that address plus
 * the offset. See Documentation/uapi.rst for the errno of every ioctl.
 *
 * Every structure is a multiple of 8 bytes; reserved fields must be zero.
 */
#ifndef _UAPI_LINUX_NEURON_HBM_H
#define _UAPI_LINUX_NEURON_HBM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define NHBM_ABI_VERSION 2

/* Ioctl magic, free in Documentation/userspace-api/ioctl/ioctl-number.rst. */
#define NHBM_IOC_MAGIC 0xBB

#define NHBM_MAX_CHANNELS 4
#define NHBM_MAX_REGIONS 4
/* Most NeuronCores of one device (nhbm_device_info.nr_cores is at most this). */
#define NHBM_MAX_CORES 8

/* Unstaged sentinel: device PA 0 is a legal address, so "none" is all ones. */
#define NHBM_PA_UNSTAGED 0xFFFFFFFFFFFFFFFFULL

/* PLAN_LOAD channel: the HBM channel with the most free space. */
#define NHBM_CHANNEL_ANY 0xFFFFFFFFU

/* Largest nmem a plan may carry (E2BIG beyond). */
#define NHBM_MAX_PLAN_RECORDS (1U << 20)
/* Largest count of a MR_LIST / MR_PTR_TABLE (E2BIG beyond). */
#define NHBM_MAX_LIST_COUNT (1U << 20)
/* Largest count of one RESOLVE_BATCH (E2BIG beyond). */
#define NHBM_MAX_BATCH (1U << 16)
/* Largest alignment a record may ask for: 1 GiB. */
#define NHBM_MAX_ALIGNMENT (1ULL << 30)
/* Live plans of one open file (E2BIG beyond). */
#define NHBM_MAX_PLANS_PER_FILE 4096U
/*
 * Kept for source compatibility only: no device-wide count is enforced any
 * more (one tenant could fill it for all); a plan's kernel memory is charged
 * to its loader's memory cgroup instead.
 */
#define NHBM_MAX_PLANS_PER_DEVICE 65536U
/* Longest chain of plans reaching each other through MR_REMOTE (E2BIG beyond). */
#define NHBM_MAX_REMOTE_DEPTH 8U

/* Device generations (nhbm_device_info.arch). */
enum nhbm_arch {
	NHBM_ARCH_V2 = 2, /* Trn1 / Inf2 */
	NHBM_ARCH_V3 = 3, /* Trn2 */
	NHBM_ARCH_V4 = 4, /* Trn3 */
};

/*
 * kbin_mr_type_t: the kind of a mem_ref record, with the numbers of the
 * runtime's own enum, so that a record of the real toolchain means the same
 * thing here.
 */
enum nhbm_mr_type {
	NHBM_MR_INVALID = 0,
	NHBM_MR_SB = 1,
	NHBM_MR_BUFFER_STAGED = 2,
	NHBM_MR_BUFFER = 3,
	NHBM_MR_TMP_BUF = 4,
	NHBM_MR_INPUT = 5,
	NHBM_MR_OUTPUT = 6,
	NHBM_MR_PTR = 7,
	NHBM_MR_VIRTUAL_TMP_BUF = 8,
	NHBM_MR_LIST = 9,
	NHBM_MR_PTR_TABLE = 10,
	NHBM_MR_REMOTE = 11,
};

/* kbin_backing_buf_t: the scratchpad behind a MR_VIRTUAL_TMP_BUF. */
enum nhbm_backing {
	NHBM_BACKING_LOCAL = 0,
	NHBM_BACKING_SHARED = 1,
	NHBM_BACKING_SHARDED = 2, /* core vtmp.nc_id's shard of the shared one */
	NHBM_BACKING_MAIN = 3,    /* a buffer of its own, placed at load */
};

/* Reset kinds (nhbm_reset.type). */
enum nhbm_reset_type {
	NHBM_RESET_DEVICE = 1,
	NHBM_RESET_TPB = 2,
};

/* Plan blob header, at offset 0 of the blob (24 bytes). */
struct nhbm_plan_header {
	__u64 local_scratchpad_size;
	__u64 shared_scratchpad_size;
	__u32 nmem;
	__u32 rsvd;
};

/* The per-kind views of union nhbm_mem_ref_union. */

/* MR_LIST, MR_PTR_TABLE */
struct nhbm_mr_list {
	__u32 count;
	__u32 rsvd;
	__u64 ids_off; /* count __u32 var ids, a blob offset;
			* the format: a pointer to them */
};

/* MR_PTR */
struct nhbm_mr_ptr {
	__u32 target_var_id;
	__u32 rsvd;
	__u64 rsvd2;
};

/* MR_REMOTE */
struct nhbm_mr_remote {
	__u32 remote_var_id;
	__u32 remote_plan_id; /* a plan of the same open file;
			       * the format: a relative subgraph id */
	__u64 rsvd;
};

/* MR_VIRTUAL_TMP_BUF */
struct nhbm_mr_vtmp {
	__u64 offset;  /* into the scratchpad or shard; 0 for MAIN */
	__u32 backing; /* enum nhbm_backing */
	__u32 nc_id;   /* SHARDED: the NeuronCore whose shard; else 0 */
};

/* MR_SB */
struct nhbm_mr_sb {
	__u32 nc_id;
	__u32 rsvd;
	__u64 offset;
};

/* The 16-byte union at the end of struct nhbm_mem_ref, one view per kind. */
union nhbm_mem_ref_union {
	struct nhbm_mr_list list;     /* MR_LIST, MR_PTR_TABLE */
	struct nhbm_mr_ptr ptr;       /* MR_PTR */
	struct nhbm_mr_remote remote; /* MR_REMOTE */
	struct nhbm_mr_vtmp vtmp;     /* MR_VIRTUAL_TMP_BUF */
	struct nhbm_mr_sb sb;         /* MR_SB */
	__u64 raw[2];                 /* all zero for the other kinds */
};

/*
 * One mem_ref record (152 bytes); offsets are from the start of the blob.
 *
 * The layout is the runtime's on-disk kbin_mem_ref, field for field, except
 * where the format holds a pointer (an address in the process that wrote
 * it, which cannot cross into the kernel: here a blob offset instead) or
 * padding (here a field of its own). At the left, each field's offset; where
 * the format differs, what it holds there:
 */
struct nhbm_mem_ref {
	__u32 mr_type;   /* +0x00 enum nhbm_mr_type */
	__u32 flags;     /* +0x04 0; the format pads */
	__u64 name_off;  /* +0x08 NUL-terminated name in the blob, 0 = none;
			  *       the format: char *name */
	__u64 size;      /* +0x10 bytes */
	__u64 alignment; /* +0x18 power of two, 0 = pool minimum */
	__u32 var_id;    /* +0x20 unique in the plan */
	char dtype[16];  /* +0x24 at most 15 characters + NUL */
	__u32 ndim;      /* +0x34 0..8; the format pads (its shape has no
			  *       count, and a dimension may be 0) */
	__u64 shape[8];  /* +0x38 entries past ndim are 0 */
	__u64 data_off;  /* +0x78 payload to upload at load, a blob offset;
			  *       the format: the debug-metadata pointer
			  *       (device-print prefix and pipe id, which
			  *       nothing here consumes) */
	__u64 data_len;  /* +0x80 0 = allocate only; <= size, the rest is
			  *       zeroed; the format: the payload pointer (its
			  *       payload is always size bytes) */
	union nhbm_mem_ref_union u; /* +0x88 the format's 16-byte union, per kind */
};

/* NHBM_IOC_DEVICE_INFO */
struct nhbm_device_info {
	__u32 abi_version;
	__u32 arch;           /* enum nhbm_arch */
	__u32 pci_vendor;
	__u32 pci_device;
	__u32 simulated;      /* 1 for a simulated device */
	__u32 nr_channels;
	__u32 regions_per_channel;
	__u32 nr_cores;       /* NeuronCores */
	__u64 sbuf_size;      /* per core */
	__u64 min_alloc_size;
	__u64 bar0_size;
	__u64 bar4_size;
	__u64 channel_base[NHBM_MAX_CHANNELS];
	__u64 channel_size[NHBM_MAX_CHANNELS];
};

/* NHBM_IOC_PLAN_LOAD */
struct nhbm_plan_load {
	__u64 blob;       /* user pointer to the plan blob */
	__u64 blob_len;
	__u64 addrs;      /* user pointer to nmem __u64 (record PAs), or 0 */
	__u32 channel;    /* HBM channel or NHBM_CHANNEL_ANY */
	__u32 flags;      /* 0 */
	__u32 plan_id;    /* out */
	__u32 rsvd;
	__u64 local_scratchpad_pa;  /* out, NHBM_PA_UNSTAGED if none */
	__u64 shared_scratchpad_pa; /* out, NHBM_PA_UNSTAGED if none */
	__u64 bytes_allocated;      /* out */
};

/* NHBM_IOC_PLAN_UNLOAD */
struct nhbm_plan_unload {
	__u32 plan_id;
	__u32 rsvd;
};

/* NHBM_IOC_RESOLVE */
struct nhbm_resolve {
	__u32 plan_id;
	__u32 var_id;
	__u64 offset;
	__u64 size;
	__u64 addr; /* out */
};

/* One query of NHBM_IOC_RESOLVE_BATCH, answered in place. */
struct nhbm_resolve_query {
	__u32 var_id;
	__s32 status; /* out: 0 or a negative errno */
	__u64 offset;
	__u64 size;
	__u64 addr;   /* out */
};

/* NHBM_IOC_RESOLVE_BATCH */
struct nhbm_resolve_batch {
	__u32 plan_id;
	__u32 count;   /* at most NHBM_MAX_BATCH */
	__u64 queries; /* user pointer to count struct nhbm_resolve_query */
};

/* NHBM_IOC_MEM_WRITE / NHBM_IOC_MEM_READ */
struct nhbm_mem_xfer {
	__u32 plan_id;
	__u32 var_id;
	__u64 offset;
	__u64 len;
	__u64 buf; /* user pointer */
};

/* Statistics of one channel x region pool. */
struct nhbm_pool_stats {
	__u64 total;
	__u64 used;
	__u64 peak;
	__u32 live_chunks;
	__u32 present; /* 1 if this channel x region exists */
};

/* NHBM_IOC_MEM_STATS */
struct nhbm_mem_stats {
	struct nhbm_pool_stats pools[NHBM_MAX_CHANNELS][NHBM_MAX_REGIONS];
	__u64 own_bytes;  /* bytes held by the caller's plans */
	__u32 own_chunks; /* chunks held by the caller's plans */
	__u32 own_plans;  /* plans loaded through this open file */
};

/* NHBM_IOC_RESET */
struct nhbm_reset {
	__u32 type;   /* enum nhbm_reset_type */
	__u32 nc_map; /* NeuronCores for NHBM_RESET_TPB */
	__s32 status; /* out: 0 or a negative errno */
	__u32 rsvd;
};

/*
 * NHBM_IOC_MAP_OFFSET: where to mmap() a variable of one of the caller's
 * plans. The variable must be one the plan allocates (not MR_SB, MR_PTR,
 * MR_VIRTUAL_TMP_BUF or MR_REMOTE) and start on a page; its last page is
 * mapped whole, which stays inside the plan's own allocation. Map it
 * MAP_SHARED through the same open file at `offset`, at most `size` bytes.
 */
struct nhbm_map_offset {
	__u32 plan_id;
	__u32 var_id;
	__u32 flags;   /* 0 */
	__u32 rsvd;
	__u64 offset;  /* out: the mmap() offset, a multiple of the page size */
	__u64 size;    /* out: bytes mappable, the variable rounded up to pages */
};

/*
 * NHBM_IOC_CORES: the NeuronCores an open file owns. `release` (cores this
 * file owns) is given up, then `claim` (cores no other file owns) taken,
 * all or nothing; 0 and 0 only asks. The owner of a core may TPB-reset it
 * beside other open files, and no other file may. Closing the file
 * releases its cores.
 */
struct nhbm_cores {
	__u32 claim;
	__u32 release;
	__u32 owned; /* out: the cores this file owns */
	__u32 taken; /* out: the cores other open files own */
	__u32 owner_pid[NHBM_MAX_CORES]; /* out: per core, the process that
					  * claimed it as the caller's pid
					  * namespace numbers it; 0 if none
					  * or not visible there */
};
/*
 * NHBM_IOC_PLAN_EXPORT: a dma-buf for a plan this file loaded, through which
 * other processes of the same device import it read-only
 * (NHBM_IOC_PLAN_IMPORT). The buffer holds the plan's memory (charged to the
 * exporter as before) until the plan is unloaded here and no buffer or
 * import of it is left, whichever is later.
 */
struct nhbm_plan_export {
	__u32 plan_id;
	__u32 flags; /* 0: read-only, the only kind today */
	__s32 fd;    /* out: the dma-buf, close-on-exec */
	__u32 rsvd;
};

/*
 * NHBM_IOC_PLAN_IMPORT: lists the plan of a dma-buf from NHBM_IOC_PLAN_EXPORT
 * in this file's table, read-only: RESOLVE, RESOLVE_BATCH, MEM_READ,
 * MAP_OFFSET and read-only mmap work on `plan_id` as on a plan loaded here,
 * MEM_WRITE and writable mappings are refused (EACCES), and so are they for
 * the MR_REMOTE records of this file's plans that name it. PLAN_UNLOAD drops
 * the import. No device memory is allocated or copied.
 */
struct nhbm_plan_import {
	__s32 fd;      /* a dma-buf of NHBM_IOC_PLAN_EXPORT, of the same device */
	__u32 flags;   /* 0 */
	__u32 plan_id; /* out: its id in this file */
	__u32 nr_vars; /* out: the plan's variables (var ids as its blob gave) */
	__u64 bytes;   /* out: device memory the plan holds, the exporter's */
};

#define NHBM_IOC_DEVICE_INFO   _IOR(NHBM_IOC_MAGIC, 0x00, struct nhbm_device_info)
#define NHBM_IOC_PLAN_LOAD     _IOWR(NHBM_IOC_MAGIC, 0x01, struct nhbm_plan_load)
#define NHBM_IOC_PLAN_UNLOAD   _IOW(NHBM_IOC_MAGIC, 0x02, struct nhbm_plan_unload)
#define NHBM_IOC_RESOLVE       _IOWR(NHBM_IOC_MAGIC, 0x03, struct nhbm_resolve)
#define NHBM_IOC_RESOLVE_BATCH _IOW(NHBM_IOC_MAGIC, 0x04, struct nhbm_resolve_batch)
#define NHBM_IOC_MEM_WRITE     _IOW(NHBM_IOC_MAGIC, 0x05, struct nhbm_mem_xfer)
#define NHBM_IOC_MEM_READ      _IOW(NHBM_IOC_MAGIC, 0x06, struct nhbm_mem_xfer)
#define NHBM_IOC_MEM_STATS     _IOR(NHBM_IOC_MAGIC, 0x07, struct nhbm_mem_stats)
#define NHBM_IOC_RESET         _IOWR(NHBM_IOC_MAGIC, 0x08, struct nhbm_reset)
#define NHBM_IOC_MAP_OFFSET    _IOWR(NHBM_IOC_MAGIC, 0x09, struct nhbm_map_offset)
#define NHBM_IOC_CORES         _IOWR(NHBM_IOC_MAGIC, 0x0a, struct nhbm_cores)
/*
 * NHBM_IOC_RESET_START asks for a reset as NHBM_IOC_RESET does and returns
 * at once (status 0: asked for); one at a time per open file. Then
 * NHBM_IOC_RESET_WAIT (type and nc_map 0 on input) waits for it and gives
 * its type, nc_map and status.
 */
#define NHBM_IOC_RESET_START   _IOWR(NHBM_IOC_MAGIC, 0x0b, struct nhbm_reset)
#define NHBM_IOC_RESET_WAIT    _IOWR(NHBM_IOC_MAGIC, 0x0c, struct nhbm_reset)
#define NHBM_IOC_PLAN_EXPORT   _IOWR(NHBM_IOC_MAGIC, 0x0d, struct nhbm_plan_export)
#define NHBM_IOC_PLAN_IMPORT   _IOWR(NHBM_IOC_MAGIC, 0x0e, struct nhbm_plan_import)

#endif /* _UAPI_LINUX_NEURON_HBM_H */
