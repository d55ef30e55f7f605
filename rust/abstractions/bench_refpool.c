// SPDX-License-Identifier: GPL-2.0-only
/*
 * The allocator benchmark's peer: the work the reference C driver
 * (aws-neuron-driver, neuron_mempool.c mc_alloc()/mc_free()) does per
 * device-memory allocation, written anew for this module. Per allocation:
 * kmalloc and clear a chunk record; under the device-wide mutex, allocate
 * from the region's gen_pool (first fit, aligned when the alignment exceeds
 * a page, else a DMA-style allocation that also looks up the physical
 * address), account the region's and the device's usage, fill in the
 * record, link it into its lifespan list, insert it into the PA-keyed
 * rbtree under its rwlock, and update two usage counters (total, last
 * delta, peak) and the calling process's usage. Freeing undoes all of it
 * and kfree()s the record. The reference's host-memory path and its
 * small-pool fallback are not taken by device allocations of a pool without
 * a small pool, so they are left out.
 *
 * Only the allocator benchmark (rust/pool/bench.rs) uses this.
 */
#include <linux/genalloc.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

#include "helpers.h"

/* The reference tags pool VAs with bit 63 so that device PA 0 is not 0. */
#define REF_DEVMEM_TAG (1ULL << 63)
#define REF_CHUNK_MAGIC 0x4e48424d
#define REF_PROCESS_SLOTS 16
#define REF_COUNTERS 4

struct nhbm_ref_counter {
	u64 total;
	u64 present;
	u64 peak;
};

struct nhbm_ref_process {
	pid_t pid;
	u64 device_used;
};

/* One device's books: the reference's mempool_set with one device pool. */
struct nhbm_ref_pool {
	struct mutex lock;
	rwlock_t rblock;
	struct rb_root root;
	struct list_head lifespan;
	struct gen_pool *gen_pool;
	u64 allocated_size;
	u64 device_mem_size;
	struct nhbm_ref_counter counters[REF_COUNTERS];
	struct nhbm_ref_process processes[REF_PROCESS_SLOTS];
};

/* The reference's mem_chunk, with the fields its device path fills in. */
struct nhbm_ref_chunk {
	struct rb_node node;
	struct list_head lifespan_list;
	struct nhbm_ref_pool *pool;
	struct gen_pool *gen_pool;
	void *va;
	phys_addr_t pa;
	u64 size;
	u32 magic;
	u32 channel;
	u32 region;
	u32 nc_id;
	pid_t pid;
	int ref_count;
	int alloc_type;
	void *caller_pc;
};

struct nhbm_ref_pool *nhbm_ref_pool_create(int min_order, u64 pa, u64 size)
{
	struct nhbm_ref_pool *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	mutex_init(&p->lock);
	rwlock_init(&p->rblock);
	p->root = RB_ROOT;
	INIT_LIST_HEAD(&p->lifespan);
	p->gen_pool = gen_pool_create(min_order, -1);
	if (!p->gen_pool)
		goto fail;
	if (gen_pool_add_virt(p->gen_pool, pa | REF_DEVMEM_TAG, pa, size, -1))
		goto fail_pool;
	/* The calling process is attached, in the first slot the search visits. */
	p->processes[0].pid = task_tgid_nr(current);
	return p;
fail_pool:
	gen_pool_destroy(p->gen_pool);
fail:
	kfree(p);
	return NULL;
}

void nhbm_ref_pool_destroy(struct nhbm_ref_pool *p)
{
	WARN_ON(!RB_EMPTY_ROOT(&p->root));
	gen_pool_destroy(p->gen_pool);
	kfree(p);
}

static struct nhbm_ref_process *ref_process(struct nhbm_ref_pool *p)
{
	pid_t pid = task_tgid_nr(current);
	int i;

	for (i = 0; i < REF_PROCESS_SLOTS; i++)
		if (p->processes[i].pid == pid)
			return &p->processes[i];
	return NULL;
}

static void ref_counter_add(struct nhbm_ref_counter *c, u64 delta)
{
	c->total += delta;
	c->present = delta;
	if (c->total > c->peak)
		c->peak = c->total;
}

static void ref_counter_sub(struct nhbm_ref_counter *c, u64 delta)
{
	c->total -= delta;
	c->present = delta;
}

static void ref_insert(struct rb_root *root, struct nhbm_ref_chunk *mc)
{
	struct rb_node **link = &root->rb_node, *parent = NULL;

	while (*link) {
		struct nhbm_ref_chunk *cur = rb_entry(*link, struct nhbm_ref_chunk, node);

		parent = *link;
		link = cur->pa > mc->pa ? &(*link)->rb_left : &(*link)->rb_right;
	}
	rb_link_node(&mc->node, parent, link);
	rb_insert_color(&mc->node, root);
}

/*
 * Allocates @size bytes (rounded up to a page) at a PA aligned to @align;
 * the chunk record is returned in @out. 0 or -ENOMEM/-EINVAL.
 */
int nhbm_ref_alloc(struct nhbm_ref_pool *p, u64 size, u64 align, struct nhbm_ref_chunk **out)
{
	struct nhbm_ref_process *proc;
	struct nhbm_ref_chunk *mc;
	int ret = 0;

	*out = NULL;
	if (size > S64_MAX)
		return -EINVAL;
	size = round_up(size, PAGE_SIZE);
	mc = kmalloc(sizeof(*mc), GFP_KERNEL);
	if (!mc)
		return -ENOMEM;
	memset(mc, 0, sizeof(*mc));

	mutex_lock(&p->lock);
	mc->gen_pool = p->gen_pool;
	if (align > PAGE_SIZE) {
		struct genpool_data_align data = { .align = align };

		if (align > INT_MAX) {
			ret = -EINVAL;
			goto out;
		}
		mc->va = (void *)gen_pool_alloc_algo(p->gen_pool, size, gen_pool_first_fit_align,
						     &data);
		mc->pa = gen_pool_virt_to_phys(p->gen_pool, (unsigned long)mc->va);
		if (!mc->va || (mc->pa & (align - 1))) {
			if (mc->va)
				gen_pool_free(p->gen_pool, (unsigned long)mc->va, size);
			ret = -ENOMEM;
			goto out;
		}
	} else {
		dma_addr_t dma;

		mc->va = gen_pool_dma_alloc(p->gen_pool, size, &dma);
		mc->pa = dma;
	}
	if (!mc->va) {
		ret = -ENOMEM;
		goto out;
	}
	p->allocated_size += size;

	mc->magic = REF_CHUNK_MAGIC;
	mc->pool = p;
	mc->size = size;
	mc->pid = task_tgid_nr(current);
	mc->ref_count = 1;
	mc->caller_pc = __builtin_return_address(0);
	list_add(&mc->lifespan_list, &p->lifespan);

	write_lock(&p->rblock);
	ref_insert(&p->root, mc);
	write_unlock(&p->rblock);

	p->device_mem_size += size;
	ref_counter_add(&p->counters[0], size);
	ref_counter_add(&p->counters[1 + mc->alloc_type % (REF_COUNTERS - 1)], size);
	proc = ref_process(p);
	if (proc)
		proc->device_used += size;
out:
	mutex_unlock(&p->lock);
	if (ret) {
		kfree(mc);
		return ret;
	}
	*out = mc;
	return 0;
}

/* Frees what nhbm_ref_alloc() returned. */
void nhbm_ref_free(struct nhbm_ref_chunk *mc)
{
	struct nhbm_ref_pool *p = mc->pool;
	struct nhbm_ref_process *proc;

	BUG_ON(mc->magic != REF_CHUNK_MAGIC);
	mutex_lock(&p->lock);
	if (--mc->ref_count > 0) {
		mutex_unlock(&p->lock);
		return;
	}
	write_lock(&p->rblock);
	rb_erase(&mc->node, &p->root);
	write_unlock(&p->rblock);
	ref_counter_sub(&p->counters[1 + mc->alloc_type % (REF_COUNTERS - 1)], mc->size);
	gen_pool_free(mc->gen_pool, (unsigned long)mc->va, mc->size);
	p->allocated_size -= mc->size;
	p->device_mem_size -= mc->size;
	ref_counter_sub(&p->counters[0], mc->size);
	proc = ref_process(p);
	if (proc)
		proc->device_used = proc->device_used > mc->size ? proc->device_used - mc->size : 0;
	list_del(&mc->lifespan_list);
	mc->magic = 0xdead;
	mutex_unlock(&p->lock);
	kfree(mc);
}
