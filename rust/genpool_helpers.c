// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for the genalloc helpers that are static inline in
 * <linux/genalloc.h> (Rust can only call real symbols), plus the leak reclaim
 * that lets a pool with live chunks be destroyed without gen_pool_destroy()'s
 * BUG_ON.
 */
#include <linux/bitmap.h>
#include <linux/genalloc.h>
#include <linux/list.h>

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

unsigned long nhbm_gen_pool_alloc_fixed(struct gen_pool *pool, size_t size, unsigned long offset)
{
	struct genpool_data_fixed data = { .offset = offset };

	return gen_pool_alloc_algo(pool, size, gen_pool_fixed_alloc, &data);
}

void nhbm_gen_pool_free(struct gen_pool *pool, unsigned long va, size_t size)
{
	gen_pool_free(pool, va, size);
}

/*
 * Mark every chunk of @pool free again and return how many bytes were still
 * allocated. Only for a pool that nobody else uses any more (its destructor).
 */
size_t nhbm_gen_pool_reclaim(struct gen_pool *pool)
{
	struct gen_pool_chunk *chunk;
	size_t leaked = 0;

	list_for_each_entry(chunk, &pool->chunks, next_chunk) {
		size_t size = chunk->end_addr - chunk->start_addr + 1;
		unsigned long nbits = size >> pool->min_alloc_order;

		leaked += size - atomic_long_read(&chunk->avail);
		bitmap_clear(chunk->bits, 0, nbits);
		atomic_long_set(&chunk->avail, size);
	}
	return leaked;
}
