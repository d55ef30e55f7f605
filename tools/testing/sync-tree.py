#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Makes DST hold the userspace build's sources of the checkout SRC: tools/
(without its target directory), include/, rust/*.rs and README.md (which
host tests read). A file whose content is unchanged is not touched, so its
time stays that of the last build and cargo sees nothing to redo; files gone
from SRC go from DST.

    sync-tree.py SRC DST
"""
import os
import shutil
import sys


def wanted(src):
    """The relative paths of the files to mirror."""
    out = {"README.md"}
    for top, keep in (("tools", None), ("include", None), ("rust", ".rs")):
        for d, dirs, files in os.walk(os.path.join(src, top)):
            rel_d = os.path.relpath(d, src)
            if rel_d == os.path.join("tools", "target"):
                dirs[:] = []
                continue
            dirs[:] = [x for x in dirs if not (rel_d == "tools" and x == "target")]
            for f in files:
                if keep is None or f.endswith(keep):
                    out.add(os.path.join(rel_d, f))
    return out


def same(a, b):
    if not os.path.exists(b) or os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()


def main():
    src, dst = sys.argv[1], sys.argv[2]
    files = wanted(src)
    for rel in files:
        s, d = os.path.join(src, rel), os.path.join(dst, rel)
        if not same(s, d):
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copyfile(s, d)
            shutil.copymode(s, d)
    for top in ("tools", "include", "rust"):
        for d, dirs, names in os.walk(os.path.join(dst, top)):
            for f in names:
                rel = os.path.relpath(os.path.join(d, f), dst)
                if rel not in files:
                    os.remove(os.path.join(d, f))


if __name__ == "__main__":
    main()
