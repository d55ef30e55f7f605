#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Vendors every crate of the userspace workspace's Cargo.lock into DEST
(`cargo vendor --locked --versioned-dirs`, from cargo's local cache when it
has them all, else from the registry), for the source package that
tools/build-deb.sh makes: its build then needs no network.

Cargo resolves the whole lock even for one package, so every crate must be
there; but a crate that no workspace crate uses on TRIPLE (the Windows API
crates, about 130 MB of import libraries) is never compiled there, and is
cut down to a stub: its Cargo.toml, its .rs files emptied, nothing else, and
a checksum file that lists no file (so cargo checks only the package's
checksum against Cargo.lock). Prints the stubbed crates.

    vendor-crates.py TOOLS_DIR DEST [TRIPLE]

TRIPLE defaults to x86_64-unknown-linux-gnu.
"""
import json
import os
import shutil
import subprocess
import sys


def vendor(tools, dest):
    """cargo vendor into dest, offline first."""
    shutil.rmtree(dest, ignore_errors=True)
    base = ["cargo", "vendor", "--locked", "--versioned-dirs", "--quiet"]
    for extra in (["--offline"], []):
        r = subprocess.run(base + extra + [dest], cwd=tools, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode == 0:
            return
    sys.exit(f"vendor-crates: cargo vendor failed:\n{r.stderr}")


def used(tools, triple):
    """The directory names (NAME-VERSION) of the registry crates that a
    workspace crate reaches on triple, through any kind of dependency."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1",
         "--filter-platform", triple],
        cwd=tools, check=True, capture_output=True, text=True).stdout)
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    seen, todo = set(), list(meta["workspace_members"])
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(d["pkg"] for d in nodes[i]["deps"])
    return {f"{p['name']}-{p['version']}" for p in meta["packages"]
            if p["source"] and p["id"] in seen}


def stub(crate):
    """Keeps crate's Cargo.toml and empty .rs files (the paths its targets
    name), drops the rest, and lists no file in its checksum."""
    sums = os.path.join(crate, ".cargo-checksum.json")
    with open(sums) as f:
        package = json.load(f)["package"]
    for d, _, files in os.walk(crate):
        for name in files:
            path = os.path.join(d, name)
            if name.endswith(".rs"):
                open(path, "w").close()
            elif path not in (os.path.join(crate, "Cargo.toml"), sums):
                os.remove(path)
    with open(sums, "w") as f:
        json.dump({"files": {}, "package": package}, f)


def main():
    tools, dest = sys.argv[1], os.path.abspath(sys.argv[2])
    triple = sys.argv[3] if len(sys.argv) > 3 else "x86_64-unknown-linux-gnu"
    vendor(tools, dest)
    keep = used(tools, triple)
    for name in sorted(set(os.listdir(dest)) - keep):
        stub(os.path.join(dest, name))
        print(name)


if __name__ == "__main__":
    main()
