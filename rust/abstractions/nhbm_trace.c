// SPDX-License-Identifier: GPL-2.0-only
/*
 * Creates the module's trace events (nhbm_trace.h) and gives them to
 * Rust as real symbols: trace_<event>() and trace_<event>_enabled() are
 * static inlines over the event's static key, out of reach of Rust. A
 * disabled event costs its caller one call that tests the key.
 */
#include "helpers.h"

#define CREATE_TRACE_POINTS
#include "nhbm_trace.h"

/*
 * nhbm_trace_<name>(proto) fires event nhbm_<name> with args, and
 * nhbm_trace_<name>_enabled() says whether the event is on, for an event
 * whose caller measures a time only then. A new event is its TRACE_EVENT
 * in nhbm_trace.h, a line or two here, their prototypes in helpers.h and
 * a safe wrapper in trace.rs.
 */
#define NHBM_TRACE_EVENT(name, proto, args)	\
	void nhbm_trace_##name(proto)		\
	{					\
		trace_nhbm_##name(args);	\
	}
#define NHBM_TRACE_ENABLED(name)			\
	bool nhbm_trace_##name##_enabled(void)		\
	{						\
		return trace_nhbm_##name##_enabled();	\
	}

NHBM_TRACE_EVENT(plan_load,
		 PARAMS(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns),
		 PARAMS(dev, plan_id, records, bytes, ns))
NHBM_TRACE_ENABLED(plan_load)
NHBM_TRACE_EVENT(plan_unload,
		 PARAMS(u32 dev, u32 plan_id, u32 records, u64 bytes, u64 ns),
		 PARAMS(dev, plan_id, records, bytes, ns))
NHBM_TRACE_ENABLED(plan_unload)
NHBM_TRACE_EVENT(reset_begin,
		 PARAMS(u32 dev, u32 type, u32 map),
		 PARAMS(dev, type, map))
NHBM_TRACE_EVENT(reset_end,
		 PARAMS(u32 dev, u32 type, s32 result, u32 polls, u32 resends, u32 looks, u64 ns),
		 PARAMS(dev, type, result, polls, resends, looks, ns))
NHBM_TRACE_ENABLED(reset_end)
NHBM_TRACE_EVENT(mem_xfer,
		 PARAMS(u32 dev, u32 plan_id, u32 var_id, bool write, u64 bytes, s32 result,
			u64 ns),
		 PARAMS(dev, plan_id, var_id, write, bytes, result, ns))
NHBM_TRACE_ENABLED(mem_xfer)
NHBM_TRACE_EVENT(map_fault,
		 PARAMS(u32 dev, u64 pgoff, u32 pages, s32 result),
		 PARAMS(dev, pgoff, pages, result))
