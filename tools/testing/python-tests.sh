#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the Python package `nhbm` (tools/nhbm-py: pyo3, an abi3 wheel) with
# maturin, install it into a venv under the cache, and run its pytest suite.
# The venv ($NHBM_CACHE/python-venv) is made once, with pinned maturin and
# pytest from the package index pip is configured with; the wheel builds in
# its own target directory ($NHBM_CACHE/cargo-target-py), so it never waits
# for the shared one. The whole output goes to the log given as the first
# argument, closed by "python-tests-exit: N" and the summary line
# "python-tests: N passed, N failed" (also printed); the exit status is
# non-zero when a step or a test fails.
#
#   tools/testing/python-tests.sh build/python-tests.log
#
# NHBM_PYTHON: the interpreter the venv is made from (default Debian's
# /usr/bin/python3). NHBM_CLI: an `nhbm` command built from this tree, to
# compare the blobs with what `nhbm plan` writes (skipped without it).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LOG="${1:?usage: python-tests.sh LOG}"
NHBM_CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
VENV="$NHBM_CACHE/python-venv"
TARGET="$NHBM_CACHE/cargo-target-py"
WHEELS="$TARGET/wheels"
CRATE="$REPO/tools/nhbm-py"
# What the venv is made with and what goes into it; changing a pin remakes it.
PYTHON="${NHBM_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
PINS="maturin==1.16.0 pytest==9.2.0"

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

# python3-venv (ensurepip) on Debian.
"$REPO/tools/setup.sh" --packages >>"$LOG" 2>&1 || fail "setup.sh --packages" $?
# The userspace environment: rustup's cargo, libclang for nhbm's bindgen.
# shellcheck source=cargo-env.sh
. "$HERE/cargo-env.sh"

# One venv per cache; another run waits while it is made or updated.
mkdir -p "$NHBM_CACHE"
exec 7>"$VENV.lock"
flock 7
stamp="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') $PINS"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.nhbm-pins" 2>/dev/null)" != "$stamp" ]; then
	say "making the venv $VENV ($PINS)"
	rm -rf "$VENV"
	"$PYTHON" -m venv "$VENV" >>"$LOG" 2>&1 || fail "python3 -m venv" $?
	# shellcheck disable=SC2086
	"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $PINS >>"$LOG" 2>&1 ||
		fail "pip install $PINS" $?
	echo "$stamp" >"$VENV/.nhbm-pins"
fi

# One build in this target directory at a time (cargo locks it too, but the
# wheel directory is ours to empty).
exec 6>"$TARGET.lock"
flock 6
mkdir -p "$TARGET"
rm -rf "$WHEELS"
say "maturin build --release (target ${TARGET})"
tb=$SECONDS
(cd "$CRATE" && CARGO_TARGET_DIR="$TARGET" "$VENV/bin/maturin" build --release --locked \
	--interpreter "$VENV/bin/python" --compatibility linux --out "$WHEELS") >>"$LOG" 2>&1 ||
	fail "maturin build" $?
say "wheel built in $((SECONDS - tb))s: $(cd "$WHEELS" && ls -- *.whl)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
	"$WHEELS"/*.whl >>"$LOG" 2>&1 || fail "pip install the wheel" $?

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
