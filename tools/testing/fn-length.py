#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Fails when a Rust function is longer than 60 lines, tests included.

A function runs from the line of its `fn` to the line of its closing brace,
both counted; its doc comments and attributes are not. The body is found by
matching braces from the first `{` after the `fn` (skipping comments,
strings and character literals), so rustfmt's layout is all it assumes.
Declarations without a body (`fn f();` in traits and `extern` blocks) are
skipped.

    fn-length.py [--skip PATH]... DIR_OR_FILE...
"""
import os
import re
import sys

LIMIT = 60
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s+\"[^\"]*\")\s+)*fn\s+(\w+)")


def code_only(text):
    """`text` with comments, strings and char literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\.|\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime or label
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_fns(path):
    """(line, name, length) of every function of `path` over LIMIT lines."""
    code = code_only(open(path, encoding="utf-8").read())
    lines = code.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for no, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        i = starts[no] + m.end()
        # The body's opening brace, unless a `;` ends a declaration first.
        depth_paren = 0
        while i < len(code):
            ch = code[i]
            if ch in "([":
                depth_paren += 1
            elif ch in ")]":
                depth_paren -= 1
            elif ch == ";" and depth_paren == 0:
                i = -1
                break
            elif ch == "{" and depth_paren == 0:
                break
            i += 1
        if i < 0 or i >= len(code):
            continue
        depth = 0
        while i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        end_line = code.count("\n", 0, i)
        length = end_line - no + 1
        if length > LIMIT:
            out.append((no + 1, m.group(1), length))
    return out


def files(arg, skip):
    if os.path.isfile(arg):
        yield arg
        return
    for d, dirs, names in os.walk(arg):
        dirs[:] = sorted(x for x in dirs if x != "target")
        for n in sorted(names):
            p = os.path.join(d, n)
            if n.endswith(".rs") and not n.endswith("_generated.rs") and p not in skip:
                yield p


def main():
    args, skip = sys.argv[1:], set()
    while args and args[0] == "--skip":
        skip.add(args[1])
        args = args[2:]
    bad = 0
    for arg in args:
        for path in files(arg, skip):
            for line, name, length in long_fns(path):
                bad += 1
                print(f"{path}:{line}: fn {name} is {length} lines (at most {LIMIT})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
