// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copies between pinned user pages and an MMIO range (a BAR mapped
 * write-combining) with the CPU: the PCI path with the `dma` parameter off
 * moves a user piece in one copy, straight between the process's pages and
 * BAR4, where a kernel bounce buffer made two. The process may change its
 * pages under the copy, which a C copy tolerates (as copy_from_user does)
 * and a Rust reference does not.
 *
 * Each page's part is copied with 64-bit accesses on the aligned words of
 * the MMIO side, four a loop iteration as the Rust loops of wc_bar.rs,
 * loading and storing the memory side unaligned; the bytes before the
 * first and after the last whole word of each page's part one at a time
 * (none when the user buffer and the MMIO offset agree modulo 8).
 */
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/unaligned.h>

#include "helpers.h"

/* Bytes before the first 64-bit boundary of `at`, at most `n`. */
static size_t nhbm_head(unsigned long at, size_t n)
{
	return min_t(size_t, (8 - (at & 7)) & 7, n);
}

static void nhbm_mem_to_io(u8 __iomem *d, const u8 *s, size_t n)
{
	size_t i = nhbm_head((unsigned long)d, n);
	size_t j;

	for (j = 0; j < i; j++)
		__raw_writeb(s[j], d + j);
	for (; n - i >= 32; i += 32) {
		__raw_writeq(get_unaligned((const u64 *)(s + i)), d + i);
		__raw_writeq(get_unaligned((const u64 *)(s + i + 8)), d + i + 8);
		__raw_writeq(get_unaligned((const u64 *)(s + i + 16)), d + i + 16);
		__raw_writeq(get_unaligned((const u64 *)(s + i + 24)), d + i + 24);
	}
	for (; n - i >= 8; i += 8)
		__raw_writeq(get_unaligned((const u64 *)(s + i)), d + i);
	for (; i < n; i++)
		__raw_writeb(s[i], d + i);
}

static void nhbm_io_to_mem(u8 *d, const u8 __iomem *s, size_t n)
{
	size_t i = nhbm_head((unsigned long)s, n);
	size_t j;

	for (j = 0; j < i; j++)
		d[j] = __raw_readb(s + j);
	for (; n - i >= 32; i += 32) {
		put_unaligned(__raw_readq(s + i), (u64 *)(d + i));
		put_unaligned(__raw_readq(s + i + 8), (u64 *)(d + i + 8));
		put_unaligned(__raw_readq(s + i + 16), (u64 *)(d + i + 16));
		put_unaligned(__raw_readq(s + i + 24), (u64 *)(d + i + 24));
	}
	for (; n - i >= 8; i += 8)
		put_unaligned(__raw_readq(s + i), (u64 *)(d + i));
	for (; i < n; i++)
		d[i] = __raw_readb(s + i);
}

void nhbm_pages_to_io(struct page **pages, unsigned int offset, size_t len, void __iomem *dst)
{
	size_t at = offset, end = (size_t)offset + len;
	u8 __iomem *d = dst;

	while (at < end) {
		size_t in = at & ~PAGE_MASK;
		size_t n = min_t(size_t, PAGE_SIZE - in, end - at);
		const u8 *s = kmap_local_page(pages[at >> PAGE_SHIFT]);

		nhbm_mem_to_io(d, s + in, n);
		kunmap_local(s);
		at += n;
		d += n;
	}
}

void nhbm_io_to_pages(struct page **pages, unsigned int offset, size_t len,
		      const void __iomem *src)
{
	size_t at = offset, end = (size_t)offset + len;
	const u8 __iomem *s = src;

	while (at < end) {
		struct page *page = pages[at >> PAGE_SHIFT];
		size_t in = at & ~PAGE_MASK;
		size_t n = min_t(size_t, PAGE_SIZE - in, end - at);
		u8 *d = kmap_local_page(page);

		nhbm_io_to_mem(d + in, s, n);
		kunmap_local(d);
		/* The process reads these bytes through its own mapping. */
		flush_dcache_page(page);
		at += n;
		s += n;
	}
}
