// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copies between user memory and an MMIO range (a BAR mapped
 * write-combining) with the CPU: the PCI path with the `dma` parameter off
 * moves a user piece in one copy, straight between the process's memory
 * and BAR4, where a kernel bounce buffer made two: from user memory
 * through the fault-handling user accessors with page faults off (the
 * caller is inside an RCU read-side section; it faults a missing page in
 * outside it and goes on, as generic_perform_write() does), into it from
 * the pinned pages. The process may change its memory under the copy,
 * which a C copy tolerates (as copy_from_user does) and a Rust reference
 * does not.
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
#include <linux/pagemap.h>
#include <linux/uaccess.h>
#include <linux/unaligned.h>

#include "helpers.h"

/* Bytes before the first 64-bit boundary of `at`, at most `n`. */
static size_t nhbm_head(unsigned long at, size_t n)
{
	return min_t(size_t, (8 - (at & 7)) & 7, n);
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

size_t nhbm_user_to_io(void __iomem *dst, const void __user *src, size_t n)
{
	u8 __iomem *d = dst;
	const u8 __user *s = src;
	size_t head = nhbm_head((unsigned long)d, n);
	size_t i = 0;

	pagefault_disable();
	if (!user_read_access_begin(src, n))
		goto out;
	for (; i < head; i++) {
		u8 b;

		unsafe_get_user(b, s + i, end);
		__raw_writeb(b, d + i);
	}
	for (; n - i >= 32; i += 32) {
		u64 w0, w1, w2, w3;

		unsafe_get_user(w0, (const u64 __user *)(s + i), end);
		unsafe_get_user(w1, (const u64 __user *)(s + i + 8), end);
		unsafe_get_user(w2, (const u64 __user *)(s + i + 16), end);
		unsafe_get_user(w3, (const u64 __user *)(s + i + 24), end);
		__raw_writeq(w0, d + i);
		__raw_writeq(w1, d + i + 8);
		__raw_writeq(w2, d + i + 16);
		__raw_writeq(w3, d + i + 24);
	}
	for (; n - i >= 8; i += 8) {
		u64 w;

		unsafe_get_user(w, (const u64 __user *)(s + i), end);
		__raw_writeq(w, d + i);
	}
	for (; i < n; i++) {
		u8 b;

		unsafe_get_user(b, s + i, end);
		__raw_writeb(b, d + i);
	}
end:
	user_read_access_end();
out:
	pagefault_enable();
	return n - i;
}

size_t nhbm_fault_in_readable(const void __user *uaddr, size_t size)
{
	return fault_in_readable(uaddr, size);
}
