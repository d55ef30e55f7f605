// SPDX-License-Identifier: GPL-2.0-only
/*
 * User pages for a device's DMA engine to read or write: pinned with
 * pin_user_pages_fast() (FOLL_WRITE when the device writes them) and
 * mapped page by page with the DMA API, as the reference driver's
 * zero-copy path does (aws-neuron-driver 2.24.7.0, neuron_dma.c:906-1266),
 * but through dma_map_page() rather than page_to_phys(), so that an IOMMU
 * translates what the engine is given.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>

#include "helpers.h"

long nhbm_pin_user(unsigned long uaddr, unsigned long nr, bool device_writes,
		   struct page **pages)
{
	long got = pin_user_pages_fast(uaddr & PAGE_MASK, nr, device_writes ? FOLL_WRITE : 0,
				       pages);

	if (got < 0)
		return got;
	if (got != nr) {
		unpin_user_pages(pages, got);
		return -EFAULT;
	}
	return got;
}

void nhbm_unpin_user(struct page **pages, unsigned long nr, bool dirty)
{
	unpin_user_pages_dirty_lock(pages, nr, dirty);
}

static enum dma_data_direction nhbm_dir(bool device_writes)
{
	return device_writes ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
}

void nhbm_dma_unmap_pages(struct device *dev, const u64 *addrs, const u32 *lens,
			  unsigned long nr, bool device_writes)
{
	unsigned long i;

	for (i = 0; i < nr; i++)
		dma_unmap_page(dev, addrs[i], lens[i], nhbm_dir(device_writes));
}

int nhbm_dma_map_pages(struct device *dev, struct page *const *pages, const u32 *offs,
		       const u32 *lens, unsigned long nr, bool device_writes, u64 *addrs)
{
	unsigned long i;

	for (i = 0; i < nr; i++) {
		dma_addr_t a = dma_map_page(dev, pages[i], offs[i], lens[i],
					    nhbm_dir(device_writes));

		if (dma_mapping_error(dev, a)) {
			nhbm_dma_unmap_pages(dev, addrs, lens, i, device_writes);
			return -ENOMEM;
		}
		addrs[i] = a;
	}
	return 0;
}
