#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Fails when the kernel module's folders break their layering
(Documentation/design.rst, "The tree"):

- a file imports from a folder above its own (the order is LAYERS, top
  first; files of one folder import each other freely, and the crate root,
  which declares every module, is no target: see import-cycles.py). Test
  modules are left out: a test may build its fixture from a layer above,
  such as the simulated device that answers the firmware handshake;
- a file lies in no folder of LAYERS (a new folder needs its place here);
- `unsafe` or `extern "C"` appears outside abstractions/.

A folder's front file (hw.rs for hw/) belongs to its folder.

    layers.py RUST_DIR
"""
import importlib.util
import os
import re
import sys

# Top first: a file may import from its own folder and from those below it.
LAYERS = [
    ("pci",),  # the PCI driver and its BAR path
    ("chardev",),  # the file-facing surface: node, ioctl, mmap, debugfs
    ("plan",),  # mem_ref plans: parse and stage
    ("uapi",),  # the UAPI header's names, read by the surface and the plans
    ("device",),  # one device: backend, grid, reset, transfers, index
    ("sim",),  # the simulated device and its page store
    ("hw",),  # registers, device-access interface, firmware handshake
    ("pool",),  # the HBM pool grid
    ("arch",),  # per-generation constants and address math
    ("abstractions",),  # kernel abstractions and their C helpers
]
UNSAFE_HOME = "abstractions"
UNSAFE = re.compile(r'\bunsafe\b|\bextern\s+"C"')
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def load_cycles():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "import_cycles", os.path.join(here, "import-cycles.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rank_of(module):
    """The index in LAYERS of a module path, None for the crate root."""
    if not module:
        return None
    for i, names in enumerate(LAYERS):
        if module[0] in names:
            return i
    return -1


def direction(graph):
    """Messages for files outside LAYERS and imports going up."""
    out = []
    for mod in sorted(graph):
        rank = rank_of(mod)
        if rank == -1:
            out.append(f"{'::'.join(mod)}: in no layer of layers.py")
            continue
        for target in sorted(graph[mod]):
            t = rank_of(target)
            if rank is not None and t is not None and 0 <= t < rank:
                out.append(
                    f"{'::'.join(mod)} ({mod[0]}/) imports {'::'.join(target)}"
                    f" ({target[0]}/, a layer above)"
                )
    return out


def blank(m):
    """A string literal emptied, but for the ABI name of `extern "C"`."""
    return m.group(0) if m.group(0) == '"C"' else '""'


def confinement(root, ic):
    """Messages for `unsafe` and `extern "C"` outside abstractions/."""
    out = []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith(".rs") or n.endswith("_generated.rs"):
                continue
            path = os.path.join(d, n)
            mod = ic.module_of(root, path)
            if mod and mod[0] == UNSAFE_HOME:
                continue
            text = open(path, encoding="utf-8").read()
            for lineno, line in enumerate(text.split("\n"), 1):
                code = ic.COMMENT.sub("", STRING.sub(blank, line))
                if UNSAFE.search(code):
                    rel = os.path.relpath(path, root)
                    out.append(f"{rel}:{lineno}: unsafe code outside {UNSAFE_HOME}/")
    return out


def main():
    root = sys.argv[1]
    ic = load_cycles()
    bad = direction(ic.edges(root, tests=False)) + confinement(root, ic)
    for msg in bad:
        print(f"layers: {msg}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
