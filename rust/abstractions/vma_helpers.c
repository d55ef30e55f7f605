// SPDX-License-Identifier: GPL-2.0-only
/*
 * Mappings of a device node's file into processes. The kernel crate maps
 * pages only at mmap time and has no vm_operations, no write-combining page
 * protection and no revocation of a file range; these few calls give them.
 * Every mapping is filled by its fault handler, page by page, so that a
 * range taken away (unmap_mapping_range) faults again and can be refused.
 */
#include <linux/fs.h>
#include <linux/mm.h>

#include "helpers.h"

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

static const struct vm_operations_struct nhbm_vm_ops = {
	.fault = nhbm_vm_fault,
};

void nhbm_vma_setup(struct vm_area_struct *vma, bool io, nhbm_fault_fn fault)
{
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

struct address_space *nhbm_mapping_get(struct file *file)
{
	struct address_space *mapping = file->f_mapping;

	/* The open file holds the inode; this reference outlives it. */
	ihold(mapping->host);
	return mapping;
}

void nhbm_mapping_put(struct address_space *mapping)
{
	iput(mapping->host);
}

void nhbm_unmap_mapping(struct address_space *mapping, u64 off, u64 len)
{
	/* Shared mappings only (mmap refuses private ones): no COW copies. */
	unmap_mapping_range(mapping, off, len, 0);
}

unsigned long nhbm_page_pfn(struct page *page)
{
	return page_to_pfn(page);
}

void *nhbm_page_address(struct page *page)
{
	return page_address(page);
}

bool nhbm_page_shared(struct page *page)
{
	/* The owner's reference, and any other: a mapping's or a pin's. */
	return page_count(page) > 1;
}
