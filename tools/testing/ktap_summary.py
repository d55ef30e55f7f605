#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Summarise the KTAP a neuron_hbm guest printed on its serial console.

Reads the QEMU serial log, prints one line per leaf test (suite.test: ok/FAIL/skip)
and a closing line "N passed, N failed[, N skipped]". Exits non-zero when a test
failed, when no KTAP was found, when a suite of ours reported other than the
number of results its plan line ("1..N") announced or never closed, when the
guest did not reach its end marker, or when the kernel printed an Oops, BUG,
WARNING, panic, KASAN or kmemleak report.

With --show the whole log is printed first; with --brief only the errors and
the closing line are. With --host LOG it also counts the userspace tests that host-tests.sh ran
(cargo's "test NAME ... ok|FAILED|ignored" lines, named host.<binary>.NAME);
a cargo run that failed without naming a failed test counts as one failure.
"""
import re
import sys

DONE_MARKER = "NHBM-GUEST-DONE"
# Suites of this project: the module's KUnit suites and the guest programs'.
OUR_SUITES = ("neuron_hbm", "nhbm")
# KTAP: "<result> <number> <description> [# [<directive>] [<diagnostic>]]";
# the directive, if any, is the first word after the "#".
RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+) ([^#]*?)\s*(#\s*(\S*).*)?$")
SUBTEST = re.compile(r"^(\s*)# Subtest: (\S+)")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)\s*$")
CRASH = re.compile(
    r"(Oops[:\s]|BUG:|kernel BUG at|WARNING:|Kernel panic|general protection fault|"
    r"KASAN:|UBSAN:|unreferenced object 0x|INFO: possible .*lock|"
    r"INFO: task .* blocked|Call Trace:)"
)
# printk prefixes such as "[    1.234567] " are not part of KTAP.
PREFIX = re.compile(r"^\[\s*\d+\.\d+\]\s?")


def parse(lines):
    """Leaves, kernel reports, whether the end marker came, and count problems.

    A subtest of ours that announced a plan ("1..N") must close with exactly
    N results: a program that stops halfway, or prints fewer or more cases
    than it planned, is reported here.
    """
    stack = []  # open subtests: [indent, suite name, plan or None, results seen]
    leaves = []
    crashes = []
    count_problems = []
    done = False

    def close(entry, closed):
        indent, suite, plan, seen = entry
        full = ".".join([s[1] for s in stack] + [suite])
        if not full.startswith(OUR_SUITES):
            return
        if not closed:
            count_problems.append(f"suite {full}: never closed ({seen} of {plan} results)")
        elif plan is not None and seen != plan:
            count_problems.append(f"suite {full}: planned 1..{plan}, reported {seen} results")

    for raw in lines:
        line = PREFIX.sub("", raw.rstrip("\r\n"))
        if DONE_MARKER in line:
            done = True
        if CRASH.search(line):
            crashes.append(line.strip())
        m = SUBTEST.match(line)
        if m:
            indent = len(m.group(1))
            # A subtest at this depth or above that never closed.
            while stack and stack[-1][0] >= indent:
                entry = stack.pop()
                close(entry, False)
            stack.append([indent, m.group(2), None, 0])
            continue
        m = PLAN.match(line)
        if m:
            if stack and stack[-1][0] == len(m.group(1)) and stack[-1][2] is None:
                stack[-1][2] = int(m.group(2))
            continue
        m = RESULT.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        if stack and stack[-1][0] > indent:
            entry = stack.pop()  # the result that closes a subtest
            close(entry, True)
            if stack and stack[-1][0] == indent:
                stack[-1][3] += 1
            continue
        if stack and stack[-1][0] == indent:
            stack[-1][3] += 1
        name = m.group(4).strip()
        full = ".".join([s[1] for s in stack] + [name])
        if not full.startswith(OUR_SUITES):
            continue  # the kernel's own built-in suites
        status = "skip" if m.group(6) == "SKIP" else ("ok" if m.group(2) == "ok" else "FAIL")
        leaves.append((full, status))
    while stack:
        close(stack.pop(), False)
    return leaves, crashes, done, count_problems


CARGO_RUNNING = re.compile(r"^\s*(?:Running .*?\(.*?deps/([A-Za-z0-9_]+?)-[0-9a-f]+\)|Doc-tests (\S+))")
CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)")
CARGO_EXIT = re.compile(r"^cargo-test-exit: (\d+)")


def parse_host(lines):
    """Leaves and problems of a host-tests.sh log."""
    binary = "?"
    leaves = []
    rc = None
    for line in lines:
        m = CARGO_RUNNING.match(line)
        if m:
            binary = m.group(1) or (m.group(2) + "-doc")
            # Tests run again in a release build are leaves of their own.
            if "/release/deps/" in line:
                binary += "-release"
            continue
        m = CARGO_TEST.match(line)
        if m:
            status = {"ok": "ok", "FAILED": "FAIL", "ignored": "skip"}[m.group(2)]
            leaves.append((f"host.{binary}.{m.group(1)}", status))
            continue
        m = CARGO_EXIT.match(line)
        if m:
            rc = int(m.group(1))
    problems = []
    if rc is None:
        problems.append("host tests: the log has no cargo exit status")
    elif rc != 0 and not any(s == "FAIL" for _, s in leaves):
        problems.append(f"host tests: cargo test exited {rc} (see the log)")
    elif not leaves:
        problems.append("host tests: no test ran")
    return leaves, problems


def main():
    args = sys.argv[1:]
    show = "--show" in args
    brief = "--brief" in args
    timed_out = "--timeout" in args
    host_log = None
    if "--host" in args:
        i = args.index("--host")
        host_log = args[i + 1]
        del args[i : i + 2]
    path = [a for a in args if not a.startswith("--")][0]
    with open(path, errors="replace") as f:
        lines = f.readlines()
    if show:
        for line in lines:
            sys.stdout.write(line)
    leaves, crashes, done, count_problems = parse(lines)
    guest_ran = bool(leaves)
    host_problems = []
    if host_log:
        with open(host_log, errors="replace") as f:
            host_leaves, host_problems = parse_host(f.readlines())
        leaves = host_leaves + leaves
    passed = sum(1 for _, s in leaves if s == "ok")
    failed = sum(1 for _, s in leaves if s == "FAIL")
    skipped = sum(1 for _, s in leaves if s == "skip")
    if not show and not brief:
        for name, status in leaves:
            print(f"{status:>4}  {name}")
    problems = list(host_problems)
    if not guest_ran:
        problems.append("no KTAP results found in the guest log")
    if not done or timed_out:
        problems.append("the guest did not reach its end marker")
    problems.extend(count_problems)
    for c in crashes[:20]:
        problems.append(f"kernel report: {c}")
    for p in problems:
        print(f"error: {p}")
    # A guest problem counts as a failed check of its own.
    failed += len(problems)
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if (failed or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
