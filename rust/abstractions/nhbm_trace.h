/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The module's trace events, under events/neuron_hbm/ in tracefs. Rust
 * cannot define them: nhbm_trace.c creates them and makes each a real
 * symbol, nhbm_trace_<event>(), and each event that carries a time also
 * nhbm_trace_<event>_enabled() (declared in helpers.h), which
 * trace.rs calls. Every event carries the device index N of
 * /dev/neuron_hbmN; times are nanoseconds of the monotonic clock.
 * Documentation/uapi.rst lists the fields.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM neuron_hbm

/*
 * define_trace.h includes this file again by name: from the directory that
 * nhbm_trace.c's compiler flags add to the search path (Kbuild). The
 * directory of define_trace.h is searched first, so the name must not be
 * one of include/trace/'s (trace_events.h is).
 */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE nhbm_trace

#if !defined(NEURON_HBM_NHBM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define NEURON_HBM_NHBM_TRACE_H

#include <linux/tracepoint.h>

/* Reset kinds as RESET names them (include/uapi/linux/neuron_hbm.h). */
#define nhbm_show_reset_type(type) \
	__print_symbolic(type, { 1, "device" }, { 2, "tpb" })

/* A plan loaded (PLAN_LOAD) or unloaded (PLAN_UNLOAD). */
DECLARE_EVENT_CLASS(nhbm_plan,
	TP_PROTO(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns),
	TP_ARGS(dev, plan_id, records, bytes, ns),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, plan_id)
		__field(u32, records)
		__field(u64, bytes)
		__field(u64, ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->plan_id = plan_id;
		__entry->records = records;
		__entry->bytes = bytes;
		__entry->ns = ns;
	),
	TP_printk("dev=%u plan=%u records=%u bytes=%llu ns=%llu",
		  __entry->dev, __entry->plan_id, __entry->records,
		  __entry->bytes, __entry->ns)
);

DEFINE_EVENT(nhbm_plan, nhbm_plan_load,
	TP_PROTO(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns),
	TP_ARGS(dev, plan_id, records, bytes, ns));

DEFINE_EVENT(nhbm_plan, nhbm_plan_unload,
	TP_PROTO(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns),
	TP_ARGS(dev, plan_id, records, bytes, ns));

/* The reset worker starts a firmware reset handshake. */
TRACE_EVENT(nhbm_reset_begin,
	TP_PROTO(u32 dev, u32 type, u32 map),
	TP_ARGS(dev, type, map),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, type)
		__field(u32, map)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->type = type;
		__entry->map = map;
	),
	TP_printk("dev=%u type=%s map=%#x", __entry->dev,
		  nhbm_show_reset_type(__entry->type), __entry->map)
);

/* The handshake ended: 0 or -errno, and what it took. */
TRACE_EVENT(nhbm_reset_end,
	TP_PROTO(u32 dev, u32 type, s32 result, u32 polls, u32 resends, u32 looks, u64 ns),
	TP_ARGS(dev, type, result, polls, resends, looks, ns),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, type)
		__field(s32, result)
		__field(u32, polls)
		__field(u32, resends)
		__field(u32, looks)
		__field(u64, ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->type = type;
		__entry->result = result;
		__entry->polls = polls;
		__entry->resends = resends;
		__entry->looks = looks;
		__entry->ns = ns;
	),
	TP_printk("dev=%u type=%s result=%d polls=%u resends=%u looks=%u ns=%llu",
		  __entry->dev, nhbm_show_reset_type(__entry->type),
		  __entry->result, __entry->polls, __entry->resends,
		  __entry->looks, __entry->ns)
);

/* A MEM_WRITE (write 1) or MEM_READ (write 0) through BAR4. */
TRACE_EVENT(nhbm_mem_xfer,
	TP_PROTO(u32 dev, u32 plan_id, u32 var_id, bool write, u64 bytes, s32 result, u64 ns),
	TP_ARGS(dev, plan_id, var_id, write, bytes, result, ns),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, plan_id)
		__field(u32, var_id)
		__field(bool, write)
		__field(u64, bytes)
		__field(s32, result)
		__field(u64, ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->plan_id = plan_id;
		__entry->var_id = var_id;
		__entry->write = write;
		__entry->bytes = bytes;
		__entry->result = result;
		__entry->ns = ns;
	),
	TP_printk("dev=%u plan=%u var=%u dir=%s bytes=%llu result=%d ns=%llu",
		  __entry->dev, __entry->plan_id, __entry->var_id,
		  __entry->write ? "write" : "read", __entry->bytes,
		  __entry->result, __entry->ns)
);

/*
 * A fault in a process's mapping of a variable: file page pgoff (the
 * variable's device address >> PAGE_SHIFT, plus the page), the pages it
 * mapped (up to 16 on a BAR), and its result (an error: SIGBUS).
 */
TRACE_EVENT(nhbm_map_fault,
	TP_PROTO(u32 dev, u64 pgoff, u32 pages, s32 result),
	TP_ARGS(dev, pgoff, pages, result),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u64, pgoff)
		__field(u32, pages)
		__field(s32, result)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->pgoff = pgoff;
		__entry->pages = pages;
		__entry->result = result;
	),
	TP_printk("dev=%u pgoff=%#llx pages=%u result=%d", __entry->dev,
		  __entry->pgoff, __entry->pages, __entry->result)
);

#endif /* NEURON_HBM_NHBM_TRACE_H */

/* Outside the guard: this is what expands the events above. */
#include <trace/define_trace.h>
