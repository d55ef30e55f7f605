// SPDX-License-Identifier: GPL-2.0-only
/*
 * Mappings of a device node's file into processes. The kernel crate maps
 * pages only at mmap time and has no vm_operations, no write-combining page
 * protection and no revocation of a file range; these few calls give them.
 * Every mapping is filled by its fault handler, page by page, so that a
 * range taken away (unmap_mapping_range) faults again and can be refused.
 *
 * Each open file gets an address space of its own (an anonymous inode of a
 * pseudo filesystem, as DRM gives each device one): its mappings are linked
 * there and nowhere else, so taking a range away from one file walks that
 * file's mappings only, never those other files (other tenants) made, and
 * their number is bounded per file.
 */
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>
#include <linux/slab.h>

#include "helpers.h"

/* The address space of one open file, and how many mappings it has. */
struct nhbm_space {
	struct inode *inode;
	atomic_t maps;
};

/* The pseudo filesystem the files' inodes live on, mounted while any does. */
#define NHBM_FS_MAGIC 0x6e68626d
static struct vfsmount *nhbm_fs_mnt;
static int nhbm_fs_cnt;

static int nhbm_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, NHBM_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type nhbm_fs_type = {
	.name = "neuron_hbm",
	.owner = THIS_MODULE,
	.init_fs_context = nhbm_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

/* The space of the file a mapping maps (set by nhbm_space_new at open). */
static struct nhbm_space *nhbm_vma_space(struct vm_area_struct *vma)
{
	return vma->vm_file->f_mapping->host->i_private;
}

static vm_fault_t nhbm_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	nhbm_fault_fn fault = vma->vm_private_data;
	int err;

	/* The file outlives its mappings: each holds a reference on it. */
	err = fault(vma->vm_file->private_data, vmf->pgoff, vmf);
	if (err == -ENOMEM)
		return VM_FAULT_OOM;
	return err ? VM_FAULT_SIGBUS : VM_FAULT_NOPAGE;
}

/* A copy of a mapping: by fork, by a split, by mremap's move. */
static void nhbm_vm_open(struct vm_area_struct *vma)
{
	atomic_inc(&nhbm_vma_space(vma)->maps);
}

static void nhbm_vm_close(struct vm_area_struct *vma)
{
	atomic_dec(&nhbm_vma_space(vma)->maps);
}

/* A split adds a mapping: refused at the file's limit, as mmap is. */
static int nhbm_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	if (atomic_read(&nhbm_vma_space(vma)->maps) >= NHBM_MAPS_PER_FILE)
		return -ENOMEM;
	return 0;
}

static const struct vm_operations_struct nhbm_vm_ops = {
	.open = nhbm_vm_open,
	.close = nhbm_vm_close,
	.may_split = nhbm_vm_may_split,
	.fault = nhbm_vm_fault,
};

int nhbm_vma_setup(struct vm_area_struct *vma, bool io, nhbm_fault_fn fault)
{
	/*
	 * Counted from here: the vm_operations set below uncount it when it
	 * goes (also when mmap fails after this returns). A fork copies a
	 * mapping whatever the count (open cannot refuse): the forking
	 * process pays for its copies, and no new one is made past the limit.
	 */
	if (atomic_inc_return(&nhbm_vma_space(vma)->maps) > NHBM_MAPS_PER_FILE) {
		atomic_dec(&nhbm_vma_space(vma)->maps);
		return -ENOMEM;
	}
	/*
	 * Never grown by mremap (the range was checked at mmap), never in a
	 * core dump (device memory), filled only by the fault handler: BAR
	 * pages as raw PFNs, write-combining as the module maps BAR4; the
	 * simulated device's pages as normal pages.
	 */
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP |
			  (io ? VM_IO | VM_PFNMAP : VM_MIXEDMAP));
	if (io)
		vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
	/* Copied with the mapping when it is split or forked. */
	vma->vm_private_data = fault;
	vma->vm_ops = &nhbm_vm_ops;
	return 0;
}

int nhbm_vmf_insert(struct vm_fault *vmf, unsigned long pgoff, unsigned long pfn)
{
	struct vm_area_struct *vma = vmf->vma;
	unsigned long addr;
	vm_fault_t ret;

	if (pgoff < vma->vm_pgoff || pgoff - vma->vm_pgoff >= vma_pages(vma))
		return -ERANGE;
	addr = vma->vm_start + ((pgoff - vma->vm_pgoff) << PAGE_SHIFT);
	if (!(vma->vm_flags & VM_PFNMAP)) {
		/*
		 * A page of system memory, mapped with a reference of its own
		 * (vmf_insert_mixed() would map it as a bare PFN where the
		 * architecture has special PTEs, and the page's owner could
		 * not tell it is mapped). VM_MIXEDMAP allows this from a
		 * fault handler; -EBUSY: another thread mapped it first.
		 */
		int err = vm_insert_page(vma, addr, pfn_to_page(pfn));

		return err == -EBUSY ? 0 : err;
	}
	ret = vmf_insert_pfn(vma, addr, pfn);
	if (ret == VM_FAULT_NOPAGE)
		return 0;
	return ret == VM_FAULT_OOM ? -ENOMEM : -EFAULT;
}

int nhbm_space_new(struct file *file, struct nhbm_space **out)
{
	struct nhbm_space *space;
	struct inode *inode;
	int err;

	space = kzalloc(sizeof(*space), GFP_KERNEL_ACCOUNT);
	if (!space)
		return -ENOMEM;
	err = simple_pin_fs(&nhbm_fs_type, &nhbm_fs_mnt, &nhbm_fs_cnt);
	if (err) {
		kfree(space);
		return err;
	}
	inode = alloc_anon_inode(nhbm_fs_mnt->mnt_sb);
	if (IS_ERR(inode)) {
		simple_release_fs(&nhbm_fs_mnt, &nhbm_fs_cnt);
		kfree(space);
		return PTR_ERR(inode);
	}
	inode->i_private = space;
	space->inode = inode;
	/* Before any mmap of the file: its mappings are linked there. */
	file->f_mapping = inode->i_mapping;
	*out = space;
	return 0;
}

void nhbm_space_put(struct nhbm_space *space)
{
	iput(space->inode);
	simple_release_fs(&nhbm_fs_mnt, &nhbm_fs_cnt);
	kfree(space);
}

void nhbm_space_unmap(struct nhbm_space *space, u64 off, u64 len)
{
	/* Shared mappings only (mmap refuses private ones): no COW copies. */
	unmap_mapping_range(space->inode->i_mapping, off, len, 0);
}

unsigned long nhbm_page_pfn(struct page *page)
{
	return page_to_pfn(page);
}

void *nhbm_page_address(struct page *page)
{
	return page_address(page);
}

void nhbm_page_get(struct page *page)
{
	get_page(page);
}

void nhbm_page_put(struct page *page)
{
	put_page(page);
}

/*
 * 2^order pages in one allocation, not zeroed, charged to the caller's
 * memory cgroup and split into pages of their own (each freed by its last
 * put_page): the first, the rest after it in the memory map; NULL when the
 * allocator has no such block free. It never reclaims or compacts for one
 * (that would cost more than the pages one at a time), nor warns.
 */
struct page *nhbm_alloc_split_pages(unsigned int order)
{
	struct page *page = alloc_pages((GFP_KERNEL_ACCOUNT | __GFP_NOWARN) & ~__GFP_RECLAIM, order);

	if (page)
		split_page(page, order);
	return page;
}

/* Page `n` of a block whose first page is `first`. */
struct page *nhbm_page_at(struct page *first, unsigned long n)
{
	return first + n;
}

bool nhbm_page_shared(struct page *page)
{
	/* The owner's reference, and any other: a mapping's or a pin's. */
	return page_count(page) > 1;
}
