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

unsigned long nhbm_gen_pool_alloc_algo(struct gen_pool *pool, size_t size, genpool_algo_t algo,
				       void *data)
{
	return gen_pool_alloc_algo(pool, size, algo, data);
}

void nhbm_gen_pool_free(struct gen_pool *pool, unsigned long va, size_t size)
{
	gen_pool_free(pool, va, size);
}

