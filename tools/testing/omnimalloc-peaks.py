#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Pack MiniMalloc-format instances with omnimalloc's best fit and SuperMalloc.

The peers of the planner's `planner_vs_bestfit_traces` and
`planner_vs_supermalloc_traces` figures (nhbm-bench --omnimalloc):
omnimalloc (Apache-2.0) is installed from its package index into a venv by
bench-planner.sh, never copied into the tree. For each CSV given, prints
under the file's stem its liveness lower bound and the peak (bytes) of
`BestFitAllocator()` and of `SupermallocAllocator(timeout=10,
num_threads=1)`, as one JSON object.

    omnimalloc-peaks.py FILE.csv...
"""
import json
import sys
from pathlib import Path

from omnimalloc.allocators.best_fit import BestFitAllocator
from omnimalloc.allocators.supermalloc import SupermallocAllocator
from omnimalloc.io import load_allocation

# SuperMalloc's wall-clock budget, seconds: the planner's default limit.
TIMEOUT = 10


def peak(placed):
    """The top of the placed buffers."""
    return max(a.offset + a.size for a in placed)


def lower_bound(allocs):
    """The most bytes live at once (lifetimes half-open)."""
    events = sorted([(a.start, 1, a.size) for a in allocs] + [(a.end, 0, a.size) for a in allocs])
    live = best = 0
    for _, starts, size in events:
        live += size if starts else -size
        best = max(best, live)
    return best


def main(paths):
    out = {}
    for path in paths:
        allocs = tuple(load_allocation(path).allocations)
        out[Path(path).stem] = {
            "lower_bound": lower_bound(allocs),
            "best_fit": peak(BestFitAllocator().allocate(allocs)),
            "supermalloc": peak(SupermallocAllocator(timeout=TIMEOUT, num_threads=1).allocate(allocs)),
        }
        print(f"omnimalloc-peaks: {path}: {out[Path(path).stem]}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
