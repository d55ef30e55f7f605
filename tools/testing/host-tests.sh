#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Run the userspace workspace's own tests (library, plan format, planner,
# CLI, the guest tests' library) on the host, and the planner's timed and
# heavy tests in a release build. The whole cargo output goes to
# the log given as the first argument, closed by a line "cargo-test-exit: N";
# ktap_summary.py reads it and counts these tests with the guest's in one
# closing line.
#
#   tools/testing/host-tests.sh build/host-tests.log
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LOG="${1:?usage: host-tests.sh LOG}"

"$REPO/tools/setup.sh" --packages
# shellcheck source=cargo-env.sh
. "$HERE/cargo-env.sh"
# Held while the tests build and run (see cargo-env.sh).
cargo_lock

mkdir -p "$(dirname "$LOG")"
echo "host-tests: cargo test --workspace, log in ${LOG#"$REPO"/}" >&2
t0=$SECONDS
(cd "$CARGO_TOOLS" && cargo test --workspace --locked --no-fail-fast --target-dir "$CARGO_TARGET") >"$LOG" 2>&1
rc=$?
# The planner's timed tests (a 100,000-tensor model within a 2 s limit,
# compilers' traces within the default 10 s, training steps and pipeline
# schedules within 2 s, pinwheels, 10,000 tensors of every shape, and
# hill_climb on all its held-out instances) only
# mean something in an optimized build, and
# its search of MiniMalloc's challenging set takes minutes in a debug one:
# the debug run above ignores them, a release build of their test files
# runs them.
(cd "$CARGO_TOOLS" && cargo test --release --locked -p nhbm-planner --test scale --test minimalloc --test traces --test schedules --test pinwheel --test heldout --target-dir "$CARGO_TARGET") >>"$LOG" 2>&1 || {
	[ "$rc" -ne 0 ] || rc=1
}
echo "cargo-test-exit: $rc" >>"$LOG"
echo "host-tests: finished in $((SECONDS - t0))s (exit $rc)" >&2
