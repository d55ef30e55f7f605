#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Fails when a crate of the userspace workspace declares a rust-version
(MSRV) older than a crate it builds on with its default features: its
dependencies (normal and build, for every target, as Cargo.lock pins them)
and the workspace crates it uses. An optional dependency counts only where
the default features turn it on (a crate's comment says what a feature
needs beyond that).

Clippy's incompatible_msrv lint (on in `make lint` through -Dwarnings)
checks the other half: no standard-library API newer than the declared
rust-version. No older toolchain is needed for either.

    msrv-check.py TOOLS_DIR
"""
import json
import subprocess
import sys


def version(v):
    """"1.82" or "1.82.0" as a comparable tuple; None for no rust-version."""
    if not v:
        return None
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    tools = sys.argv[1]
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=tools,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}

    def optional_off(pkg, dep_pkg):
        """Whether `dep_pkg` is an optional dependency of `pkg` that its
        default features do not turn on."""
        name = packages[dep_pkg]["name"]
        entries = [d for d in pkg["dependencies"] if d["name"] == name]
        if not entries or not all(d["optional"] for d in entries):
            return False
        key = entries[0].get("rename") or name
        on, todo = set(), ["default"]
        while todo:
            for f in pkg["features"].get(todo.pop(), []):
                if f not in on:
                    on.add(f)
                    todo.append(f)
        return not ({key, f"dep:{key}"} & on or any(f.startswith(f"{key}/") for f in on))

    def closure(root):
        """Every package `root` builds on with its default features (not
        dev-dependencies)."""
        seen, todo = set(), [root]
        while todo:
            pkg = todo.pop()
            for dep in nodes[pkg]["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if kinds <= {"dev"} or dep["pkg"] in seen:
                    continue
                if optional_off(packages[pkg], dep["pkg"]):
                    continue
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
        return seen

    bad = 0
    for member in meta["workspace_members"]:
        pkg = packages[member]
        declared = version(pkg.get("rust_version"))
        if declared is None:
            print(f"msrv: {pkg['name']} declares no rust-version")
            bad += 1
            continue
        for dep in sorted(closure(member), key=lambda d: packages[d]["name"]):
            need = version(packages[dep].get("rust_version"))
            if need and need > declared:
                print(
                    f"msrv: {pkg['name']} declares rust-version {pkg['rust_version']} "
                    f"but {packages[dep]['name']} {packages[dep]['version']} needs "
                    f"{packages[dep]['rust_version']}"
                )
                bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
