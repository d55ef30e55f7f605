#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Fails when a Rust file of the tree imports from a file that imports it,
directly or around a circle.

Each crate (the module's rust/ and every crate of tools/) is read as files:
a file's edges are the files its `crate::` and `super::` paths name (in `use`
trees, grouped or not, and in expressions). So are the children a file names
by relative paths; declaring a child (`mod x;`) is not an edge. The crate
root, which declares every module (and, in the kernel module, the `module!`
parameters the others read), is not a target.

    import-cycles.py CRATE_SRC_DIR...
"""
import os
import re
import sys

COMMENT = re.compile(r"//[^\n]*")
PATH_START = re.compile(r"\b(crate|super)::(?:super::)*")


def module_of(root, path):
    """The module path (a tuple) of the file `path` of the crate at `root`."""
    rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "lib", "main") or rel == ["neuron_hbm"]:
        rel = rel[:-1]
    return tuple(rel)


def inline_mods(text):
    """The (start, end) offsets of every inline `mod name { .. }` block."""
    out = []
    for m in re.finditer(r"\bmod\s+[A-Za-z_][A-Za-z0-9_]*\s*\{", text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        out.append((m.start(), i))
    return out


def skip_ws(text, i):
    while i < len(text) and text[i] in " \t\n":
        i += 1
    return i


def expand(text, i):
    """Expands the use tree at text[i] (after `crate::`/`super::`) into every
    path it names, as lists of segments; returns them and where it ends."""
    i = skip_ws(text, i)
    if text.startswith("{", i):
        out, i = [], i + 1
        while True:
            i = skip_ws(text, i)
            if text.startswith("}", i):
                return out, i + 1
            subs, i = expand(text, i)
            out += subs
            i = skip_ws(text, i)
            if text.startswith(",", i):
                i += 1
            elif not text.startswith("}", i):
                return out, i
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|\*", text[i:])
    if not m:
        return [[]], i
    seg, i = m.group(0), i + m.end()
    if text.startswith("::", i):
        subs, i = expand(text, i + 2)
        return [[seg] + s for s in subs], i
    return [[seg]], i


def without_tests(text):
    """`text` without its test modules (`#[kunit_tests(..)]`, `#[cfg(test)]`)."""
    blocks = inline_mods(text)
    for a, b in reversed(blocks):
        attrs = text[max(0, a - 200) : a].rstrip().rsplit("\n", 1)[-1]
        if "kunit_tests" in attrs or "cfg(test)" in attrs:
            text = text[:a] + text[b + 1 :]
    return text


def edges(root, tests=True):
    """The files of the crate at `root` and the files each imports from;
    `tests=False` leaves the test modules out."""
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith(".rs") and not n.endswith("_generated.rs"):
                p = os.path.join(d, n)
                files[module_of(root, p)] = p
    graph = {m: set() for m in files}
    for mod, path in files.items():
        text = COMMENT.sub("", open(path, encoding="utf-8").read())
        if not tests:
            text = without_tests(text)
        blocks = inline_mods(text)
        for m in PATH_START.finditer(text):
            if m.group(1) == "crate":
                base = []
            else:
                # `super` of an inline `mod tests { .. }` is the file itself.
                depth = sum(1 for a, b in blocks if a < m.start() < b)
                base = list(mod) + ["<inline>"] * depth
                base = base[: -m.group(0).count("super")]
                base = [b for b in base if b != "<inline>"]
            for seg in expand(text, m.end())[0]:
                full = base + seg
                # The longest prefix that is a file of the crate.
                for k in range(len(full), 0, -1):
                    if tuple(full[:k]) in files:
                        target = tuple(full[:k])
                        if target != mod:
                            graph[mod].add(target)
                        break
        # A parent naming its child's items by a relative path.
        for child in files:
            if len(child) == len(mod) + 1 and child[: len(mod)] == mod:
                if re.search(r"(?<![:\w])(?:self::)?%s::" % child[-1], text):
                    graph[mod].add(child)
    return graph


def cycles(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    sys.setrecursionlimit(10000)
    bad = 0
    for root in sys.argv[1:]:
        graph = edges(root)
        for comp in cycles(graph):
            bad += 1
            names = sorted("::".join(m) or "(root)" for m in comp)
            print(f"import cycle in {root}: " + " <-> ".join(names))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
