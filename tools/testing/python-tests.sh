#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the Python package `nhbm` (tools/nhbm-py: pyo3, an abi3 wheel) with
# tools/nhbm-py/build-wheel.sh, install it into that script's venv under the
# cache, and run its pytest suite. The whole output goes to the log given as
# the first argument, closed by "python-tests-exit: N" and the summary line
# "python-tests: N passed, N failed" (also printed); the exit status is
# non-zero when a step or a test fails.
#
#   tools/testing/python-tests.sh build/python-tests.log
#
# NHBM_PYTHON: the interpreter the venv is made from (default Debian's
# /usr/bin/python3). NHBM_CLI: the `nhbm` command the blobs are compared
# with (default build/userspace/nhbm, which `make userspace` builds).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LOG="${1:?usage: python-tests.sh LOG}"
NHBM_CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
VENV="$NHBM_CACHE/python-venv"
TARGET="$NHBM_CACHE/cargo-target-py"
# This checkout's own: the target directory is shared by every checkout.
WHEELS="$REPO/build/python-wheel"
CRATE="$REPO/tools/nhbm-py"

mkdir -p "$(dirname "$LOG")"
LOG="$(cd "$(dirname "$LOG")" && pwd)/$(basename "$LOG")"
: >"$LOG"
t0=$SECONDS
say() { echo "python-tests: $*" >&2; echo "python-tests: $*" >>"$LOG"; }
fail() {
	say "$1 failed (exit $2) after $((SECONDS - t0))s; log in ${LOG#"$REPO"/}"
	tail -25 "$LOG" >&2
	echo "python-tests-exit: $2" >>"$LOG"
	echo "python-tests: 0 passed, 1 failed" | tee -a "$LOG"
	exit "$2"
}

# The wheel (tools/nhbm-py/build-wheel.sh: the venv with maturin and pytest,
# then maturin build in its own target directory).
say "maturin build --release (target ${TARGET})"
tb=$SECONDS
NHBM_CACHE="$NHBM_CACHE" "$CRATE/build-wheel.sh" "$WHEELS" >>"$LOG" 2>&1 || fail "build-wheel.sh" $?
wheel="$(tail -n 1 "$LOG")"
say "wheel built in $((SECONDS - tb))s: $(basename "$wheel")"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
	"$wheel" >>"$LOG" 2>&1 || fail "pip install the wheel" $?

# The tests import the installed package, not the sources next to them.
say "pytest tools/nhbm-py/tests"
(cd "$CRATE/tests" && "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rfE .) >>"$LOG" 2>&1
rc=$?
echo "python-tests-exit: $rc" >>"$LOG"
# pytest's summary ("3 failed, 49 passed in 4.1s") as a closing line
# "python-tests: N passed, N failed"; errors count as failures.
last="$(grep -E '([0-9]+ (passed|failed|errors?)|no tests ran)(,| in [0-9.]+s)' "$LOG" | tail -1)"
count() { echo "$last" | grep -oE "[0-9]+ $1" | grep -oE '^[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(($(count failed) + $(count error)))
skipped=$(count skipped)
[ "$rc" = 0 ] || [ "$failed" -gt 0 ] || failed=1
say "finished in $((SECONDS - t0))s (exit $rc)"
closing="python-tests: $passed passed, $failed failed"
[ "$skipped" = 0 ] || closing="$closing, $skipped skipped"
echo "$closing" | tee -a "$LOG"
exit "$rc"
