/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The C side of neuron_hbm as Rust sees it. Every C file of the module
 * includes this header, and bindgen turns it into the Rust declarations of
 * helpers.rs at build time, so that the C compiler checks the
 * definitions and rustc the calls against the same prototypes.
 */
#ifndef NEURON_HBM_HELPERS_H
#define NEURON_HBM_HELPERS_H

#include <linux/genalloc.h>
#ifndef __BINDGEN__
#include <linux/miscdevice.h>
#endif
#include <linux/types.h>

/* genalloc's static inlines as real symbols (genpool_helpers.c). */
int nhbm_gen_pool_add_virt(struct gen_pool *pool, unsigned long va, phys_addr_t pa, size_t size);
unsigned long nhbm_gen_pool_alloc_align(struct gen_pool *pool, size_t size, int align);
unsigned long nhbm_gen_pool_alloc_algo(struct gen_pool *pool, size_t size, genpool_algo_t algo,
				       void *data);
void nhbm_gen_pool_free(struct gen_pool *pool, unsigned long va, size_t size);

/* Scheduler macros and inlines as real symbols (sched.c). */
void nhbm_cond_resched(void);
bool nhbm_fatal_signal_pending(void);
pid_t nhbm_current_tgid(void);

/*
 * The module's reset workqueue (sched.c): alloc_workqueue() is a variadic
 * macro, out of reach of Rust.
 */
struct workqueue_struct;
struct workqueue_struct *nhbm_reset_wq_alloc(void);
void nhbm_reset_wq_destroy(struct workqueue_struct *wq);

/*
 * The module's trace events (nhbm_trace.c, nhbm_trace.h): event nhbm_<name>
 * fired by nhbm_trace_<name>(); nhbm_trace_<name>_enabled() for the events
 * that carry a time, measured only while they are on.
 */
bool nhbm_trace_plan_load_enabled(void);
void nhbm_trace_plan_load(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns);
bool nhbm_trace_plan_unload_enabled(void);
void nhbm_trace_plan_unload(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns);
void nhbm_trace_reset_begin(u32 dev, u32 type, u32 map);
bool nhbm_trace_reset_end_enabled(void);
void nhbm_trace_reset_end(u32 dev, u32 type, s32 result, u32 polls, u32 resends, u32 looks,
			  u64 ns);
bool nhbm_trace_mem_xfer_enabled(void);
void nhbm_trace_mem_xfer(u32 dev, u32 plan_id, u32 var_id, bool write, u64 bytes, s32 result,
			 u64 ns);
void nhbm_trace_map_fault(u32 dev, u64 pgoff, u32 pages, s32 result);

/*
 * A copy from user memory with non-temporal stores where the architecture
 * has them (user_copy.c); returns the bytes not copied.
 */
unsigned long nhbm_copy_from_user_nontemporal(void *to, const void __user *from,
					      unsigned long n);

/*
 * Whether a PCI function's driver_override is set (pci_helpers.c): the
 * driver binds only the functions an administrator handed it.
 */
struct pci_dev;
bool nhbm_pci_driver_override_set(struct pci_dev *pdev);

/* The device-memory cgroup controller (dmem_helpers.c). */
struct dmem_cgroup_region;
struct dmem_cgroup_pool_state;
int nhbm_dmem_register(u64 size, const char *name, struct dmem_cgroup_region **out);
void nhbm_dmem_unregister(struct dmem_cgroup_region *region);
int nhbm_dmem_try_charge(struct dmem_cgroup_region *region, u64 size,
			 struct dmem_cgroup_pool_state **pool);
void nhbm_dmem_uncharge(struct dmem_cgroup_pool_state *pool, u64 size);

/* The reference driver's per-allocation path, for the allocator benchmark. */
struct nhbm_ref_pool;
struct nhbm_ref_chunk;
struct nhbm_ref_pool *nhbm_ref_pool_create(int min_order, u64 pa, u64 size);
void nhbm_ref_pool_destroy(struct nhbm_ref_pool *p);
int nhbm_ref_alloc(struct nhbm_ref_pool *p, u64 size, u64 align, struct nhbm_ref_chunk **out);
void nhbm_ref_free(struct nhbm_ref_chunk *mc);

/*
 * Mappings of a device node's file (vma_helpers.c): the vm_operations whose
 * fault handler calls the Rust function a mapping was set up with, the flags
 * and page protection a mapping gets, page-table insertion from that
 * handler, each open file's own address space, the revocation of a file
 * range from every process that maps it, and the page calls the simulated
 * device's mappable pages need.
 */
struct vm_area_struct;
struct vm_fault;
struct file;
struct page;
struct nhbm_space;
/* Mappings one open file may have at once, copies by split included. */
#define NHBM_MAPS_PER_FILE 32768
/* Fills file page `pgoff` of the faulting mapping of the file with `file_data`. */
typedef int (*nhbm_fault_fn)(void *file_data, unsigned long pgoff, struct vm_fault *vmf);
int nhbm_vma_setup(struct vm_area_struct *vma, bool io, nhbm_fault_fn fault);
int nhbm_vmf_insert(struct vm_fault *vmf, unsigned long pgoff, unsigned long pfn);
int nhbm_space_new(struct file *file, struct nhbm_space **out);
void nhbm_space_put(struct nhbm_space *space);
void nhbm_space_unmap(struct nhbm_space *space, u64 off, u64 len);
unsigned long nhbm_page_pfn(struct page *page);
void *nhbm_page_address(struct page *page);
bool nhbm_page_shared(struct page *page);
void nhbm_page_get(struct page *page);
void nhbm_page_put(struct page *page);
struct page *nhbm_alloc_split_pages(unsigned int order);
struct page *nhbm_page_at(struct page *first, unsigned long n);

/*
 * User pages for the DMA engine (user_dma.c): `nr` pages from the page of
 * `uaddr` pinned (all or none: the count, or a negative errno with none
 * held) and unpinned (marked dirty when the device wrote them); the `len`
 * bytes from `offset` in the first of them mapped for the device as a
 * scatter-gather table of segments of at most `max_segment` bytes (0 and
 * the table in `*sgt`, or a negative errno with nothing allocated or
 * mapped), and unmapped and freed.
 */
struct device;
struct sg_table;
long nhbm_pin_user(unsigned long uaddr, unsigned long nr, bool device_writes,
		   struct page **pages);
void nhbm_unpin_user(struct page **pages, unsigned long nr, bool dirty);
int nhbm_dma_map_user(struct device *dev, struct page **pages, unsigned long nr,
		      unsigned int offset, unsigned long len, unsigned int max_segment,
		      bool device_writes, struct sg_table **sgt);
void nhbm_dma_unmap_user(struct device *dev, struct sg_table *sgt, bool device_writes);

/*
 * The DMA segments of a mapped table, read a run at a time (user_dma.c):
 * the first segment and how many the table has; then up to `max`
 * addresses and lengths from `*sg` on (of `*left` still to read), both
 * moved past them, and how many were read.
 */
struct scatterlist;
void nhbm_dma_spans_start(struct sg_table *sgt, struct scatterlist **sg, unsigned int *left);
unsigned int nhbm_dma_spans(struct scatterlist **sg, unsigned int *left, u64 *addr, u32 *len,
			    unsigned int max);

/*
 * The `len` bytes from `offset` in the first of `pages` (pinned user pages)
 * copied with the CPU to the MMIO range at `dst`, or from the one at `src`
 * (user_mmio.c).
 */
/*
 * The `n` bytes of user memory at `src` copied with the CPU to the MMIO
 * range at `dst` with page faults off: the copy stops at the first byte
 * whose page is not present or not readable, and the bytes not copied are
 * returned. The bytes of `size` at `uaddr` not faulted in for reading
 * (fault_in_readable(), which may sleep) (user_mmio.c).
 */
size_t nhbm_user_to_io(void __iomem *dst, const void __user *src, size_t n);
size_t nhbm_fault_in_readable(const void __user *uaddr, size_t size);
void nhbm_io_to_pages(struct page **pages, unsigned int offset, size_t len,
		      const void __iomem *src);

/*
 * dma-bufs of the module's own (dma_buf.c). A buffer's payload starts with
 * the function that frees it, called once, when the buffer's last reference
 * goes, and the kind of value it carries (dma_buf.rs).
 */
struct dma_buf;
struct nhbm_dma_buf_payload {
	void (*release)(struct nhbm_dma_buf_payload *payload);
	u32 kind;
};
/*
 * A read-only dma-buf of `size` bytes owning `payload` (unless this fails);
 * `*out` is its file, whose one reference the caller now holds.
 */
int nhbm_dma_buf_export(struct nhbm_dma_buf_payload *payload, u64 size, struct file **out);
/* A reference on the dma-buf of `fd`: -EBADF, -EINVAL if not one of ours. */
int nhbm_dma_buf_get(int fd, struct dma_buf **out);
struct nhbm_dma_buf_payload *nhbm_dma_buf_payload(struct dma_buf *buf);
void nhbm_dma_buf_put(struct dma_buf *buf);

/* sysfs attributes of a device node (sysfs.c): which value each shows. */
enum nhbm_attr {
	NHBM_ATTR_ARCH = 0,
	NHBM_ATTR_SIMULATED = 1,
	NHBM_ATTR_CHANNELS = 2,
	NHBM_ATTR_REGIONS = 3,
	NHBM_ATTR_COUNT = 4,
};

/*
 * A device node: its misc device and the values its sysfs attributes show,
 * fixed at registration. The attributes reach the values from the misc
 * device, which is the node's drvdata. Rust mirrors the struct
 * (miscdev.rs, `RawNode`; bindgen would pull in every type the misc
 * device names) and a KUnit test checks the mirror against these figures.
 */
#ifndef __BINDGEN__
struct nhbm_misc_node {
	struct miscdevice misc;
	u64 attr_values[NHBM_ATTR_COUNT];
};
#endif
extern const size_t nhbm_misc_node_size;
extern const size_t nhbm_misc_node_attrs_offset;

struct attribute_group;
extern const struct attribute_group *nhbm_attr_groups[];

#endif
