// SPDX-License-Identifier: GPL-2.0-only
/*
 * Out-of-line wrappers for the genalloc helpers that are static inline in
 * <linux/genalloc.h> (Rust can only call real symbols).
 */
#include <linux/genalloc.h>

#include "helpers.h"

int nhbm_gen_pool_add_virt(struct gen_pool *pool, unsigned long va, phys_addr_t pa, size_t size)
{
	return gen_pool_add_virt(pool, va, pa, size, -1);
}

unsigned long nhbm_gen_pool_alloc_align(struct gen_pool *pool, size_t size, int align)
{
	struct genpool_data_align data = { .align = align };

	return gen_pool_alloc_algo(pool, size, gen_pool_first_fit_align, &data);
}

/*
 * Top-down first fit, a genpool_algo_t: the start of the highest run of nr
 * free bits of map, or size when there is none. A window [end - nr, end)
 * holding a busy bit moves down to end at the lowest busy bit it holds, so
 * each step skips a busy bit and the bits above it. The whole map is
 * searched every time: when another allocation took the bits first,
 * genalloc calls again with start at the failed place, and a top-down search
 * must not stop there, or it would miss the room below.
 */
static unsigned long nhbm_last_fit(unsigned long *map, unsigned long size, unsigned long start,
				   unsigned int nr, void *data, struct gen_pool *pool,
				   unsigned long start_addr)
{
	unsigned long end = size;

	while (end >= nr) {
		unsigned long busy = find_next_bit(map, end, end - nr);

		if (busy >= end)
			return end - nr;
		end = busy;
	}
	return size;
}

unsigned long nhbm_gen_pool_alloc_top(struct gen_pool *pool, size_t size)
{
	return gen_pool_alloc_algo(pool, size, nhbm_last_fit, NULL);
}

void nhbm_gen_pool_free(struct gen_pool *pool, unsigned long va, size_t size)
{
	gen_pool_free(pool, va, size);
}

