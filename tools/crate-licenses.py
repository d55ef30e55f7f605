#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The crates of the userspace workspace in debian/copyright.

The source package carries every crate of tools/Cargo.lock in vendor/
(tools/vendor-crates.py), and nhbm and libnhbm link many of them
statically. debian/copyright therefore ends with a generated part: one Files
paragraph per crate (vendor/NAME-VERSION/*: its authors, its license
expression, and whether it is linked into nhbm or libnhbm), then a License
paragraph for every license those name. Everything before the first
`Files: vendor/` paragraph is written by hand and kept as it is.

    crate-licenses.py --write TOOLS_DIR COPYRIGHT   regenerate the crates' part
    crate-licenses.py --check TOOLS_DIR COPYRIGHT   fail when a crate's license
        is not among ALLOWED, or when COPYRIGHT's crates' part is not what
        --write would make (`make lint` runs this)

Needs cargo and the crates' sources in its cache (cargo metadata fetches
them); asks no registry when they are there.
"""
import json
import os
import re
import subprocess
import sys

# The licenses a crate may be used under: permissive ones, which allow
# linking into the MIT-or-Apache-2.0 nhbm and libnhbm and shipping them in
# binary form. A license expression passes when one of its OR choices is
# made of these only.
ALLOWED = {
    "MIT", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "BSD-2-Clause",
    "BSD-3-Clause", "ISC", "Zlib", "Unlicense", "Unicode-3.0", "BSL-1.0",
    "0BSD", "CC0-1.0", "BlueOak-1.0.0",
}
TRIPLE = "x86_64-unknown-linux-gnu"
# Licenses whose text Debian systems carry.
COMMON = {"Apache-2.0": "Apache-2.0", "LGPL-2.1-or-later": "LGPL-2.1",
          "GPL-2.0-only": "GPL-2", "MPL-2.0": "MPL-2.0", "CC0-1.0": "CC0-1.0"}
# Where a crate keeps a license's text, for the others.
TEXT_FILES = {
    "MIT": ["LICENSE-MIT"], "Unlicense": ["UNLICENSE"], "Unicode-3.0": ["LICENSE-UNICODE"],
    "BSD-2-Clause": ["LICENSE-BSD"], "BSD-3-Clause": ["LICENSE-BSD-3-Clause", "LICENSE-BSD"],
    "Apache-2.0 WITH LLVM-exception": ["LICENSE-Apache-2.0_WITH_LLVM-exception"],
}
LINKED = {"nhbm-cli": "nhbm", "libnhbm": "libnhbm.so.1 and libnhbm.a"}


def cargo(tools, *args):
    r = subprocess.run(["cargo", *args], cwd=tools, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"crate-licenses: cargo {' '.join(args)} failed:\n{r.stderr}")
    return r.stdout


def parse(expr):
    """An SPDX expression as a tree: ("or"|"and", [children]) or a license
    id (with its exception, "X WITH Y"). The old "A/B" form is OR."""
    toks = re.findall(r"\(|\)|[^\s()]+", expr.replace("/", " OR "))
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def factor():
        if peek() == "(":
            take()
            e = ors()
            take()
            return e
        lic = take()
        if peek() == "WITH":
            take()
            lic += " WITH " + take()
        return lic

    def chain(op, sub):
        parts = [sub()]
        while peek() == op:
            take()
            parts.append(sub())
        return parts[0] if len(parts) == 1 else (op.lower(), parts)

    def ands():
        return chain("AND", factor)

    def ors():
        return chain("OR", ands)

    return ors()


def ids(tree):
    if isinstance(tree, str):
        return {tree}
    return set().union(*(ids(c) for c in tree[1]))


def allowed(tree):
    if isinstance(tree, str):
        return tree in ALLOWED
    ok = [allowed(c) for c in tree[1]]
    return any(ok) if tree[0] == "or" else all(ok)


def dep5_name(lic):
    """DEP-5 spells an exception "X with Y exception"."""
    base, _, exc = lic.partition(" WITH ")
    return f"{base} with {exc.removesuffix('-exception')} exception" if exc else base


def dep5(tree):
    """DEP-5's License syntax: lower-case or/and, no parentheses; an OR
    inside an AND is set off by a comma, which binds loosest."""
    if isinstance(tree, str):
        return dep5_name(tree)
    op, kids = tree
    if op == "or":
        return " or ".join(dep5(k) for k in kids)
    ors = [dep5(k) for k in kids if isinstance(k, tuple) and k[0] == "or"]
    rest = [dep5(k) for k in kids if not (isinstance(k, tuple) and k[0] == "or")]
    return ", and ".join(ors + ([" and ".join(rest)] if rest else []))


def linked(tools):
    """name -> the shipped binaries a crate is linked into (proc-macros and
    build scripts are not)."""
    out = {}
    for pkg, binary in LINKED.items():
        tree = cargo(tools, "tree", "--locked", "--offline", "-p", pkg, "-e", "normal,no-proc-macro",
                     "--target", TRIPLE, "--prefix", "none", "-f", "{p}")
        for line in tree.splitlines():
            name, ver = line.split()[:2]
            users = out.setdefault(f"{name}-{ver[1:]}", [])
            if binary not in users:
                users.append(binary)
    return out


def license_text(lic, crates):
    """The text for lic's License paragraph, as DEP-5 lines."""
    base, _, exc = lic.partition(" WITH ")
    if base in COMMON:
        ref = [f" On Debian systems, the full text of {base} can be found in",
               f" /usr/share/common-licenses/{COMMON[base]}."]
        # Only the exception's own text beside it: Debian's copyright files
        # do not repeat a license common-licenses has.
        return ref + ([" ."] + exception_text(lic, exc, crates) if exc else [])
    for p in crates:
        d = os.path.dirname(p["manifest_path"])
        names = TEXT_FILES.get(lic, []) + (["LICENSE"] if p["license"] == lic else [])
        for n in names:
            path = os.path.join(d, n)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    lines = f.read().strip("\n").splitlines()
                return dep5_text(lines)
    dirs = ", ".join(f"vendor/{p['name']}-{p['version']}/" for p in crates)
    return [f" The text is in the crate's own files: {dirs}."]


def exception_text(lic, exc, crates):
    """The exception's part of a crate's "LICENSE WITH EXCEPTION" file."""
    for p in crates:
        for n in TEXT_FILES.get(lic, []):
            path = os.path.join(os.path.dirname(p["manifest_path"]), n)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
                start = next((i for i, x in enumerate(lines) if exc.split("-")[0] in x
                              and "Exception" in x), None)
                if start is not None:
                    return dep5_text(lines[start:])
    return [f" The text of {exc} is in the crate's own files."]


def dep5_text(lines):
    """A license file as a DEP-5 text block, without the copyright lines of
    the crate it was taken from (they are the crate's, not the license's)."""
    out = []
    for x in lines:
        if re.match(r"\s*(Copyright\b|All rights reserved)", x):
            continue
        x = f" {x.rstrip()}" if x.strip() else " ."
        if not (x == " ." and (not out or out[-1] == " .")):
            out.append(x)
    return out[:-1] if out and out[-1] == " ." else out


def generate(tools):
    meta = json.loads(cargo(tools, "metadata", "--locked", "--format-version", "1"))
    crates = sorted((p for p in meta["packages"] if p["source"]),
                    key=lambda p: (p["name"], p["version"]))
    into = linked(tools)
    paras, used, bad = [], set(), []
    for p in crates:
        key = f"{p['name']}-{p['version']}"
        tree = parse(p["license"] or "")
        if not p["license"] or not allowed(tree):
            bad.append(f"{key}: {p['license']}")
        used |= ids(tree) if p["license"] else set()
        authors = p["authors"] or [f"the {p['name']} authors"]
        where = " and ".join(into[key]) if key in into else None
        paras.append("\n".join(
            [f"Files: vendor/{key}/*", "Copyright: " + "\n           ".join(authors),
             f"License: {dep5(tree)}",
             f"Comment: crate {p['name']} {p['version']}, {p['license']}; "
             + (f"linked into {where}" if where else "not linked into the packaged binaries")]))
    for lic in sorted(used):
        holders = [p for p in crates if lic in ids(parse(p["license"]))]
        paras.append("\n".join([f"License: {dep5_name(lic)}"] + license_text(lic, holders)))
    return "\n\n".join(paras) + "\n", bad


def split(path):
    """COPYRIGHT's hand-written part and its crates' part."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    i = text.find("\nFiles: vendor/")
    return (text, "") if i < 0 else (text[:i + 1], text[i + 1:])


def main():
    mode, tools, path = sys.argv[1:4]
    made, bad = generate(tools)
    head, crates = split(path)
    for b in bad:
        print(f"crate-licenses: not an allowed license: {b}", file=sys.stderr)
    if mode == "--write":
        with open(path, "w", encoding="utf-8") as f:
            f.write(head.rstrip("\n") + "\n\n" + made)
    elif crates != made:
        print(f"crate-licenses: {path} does not list the crates of Cargo.lock as they are: "
              f"tools/crate-licenses.py --write tools {path}", file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
