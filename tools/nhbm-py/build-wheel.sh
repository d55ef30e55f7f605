#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the Python package `nhbm` (tools/nhbm-py) as one abi3 wheel (CPython
# 3.9 and later, Linux x86_64) with maturin, into OUTDIR (`make wheel`:
# build/wheel). maturin comes from a venv under the cache
# ($NHBM_CACHE/python-venv, made once with pinned maturin and pytest from
# the package index pip is configured with); the build runs in its own
# target directory ($NHBM_CACHE/cargo-target-py), so it never waits for the
# shared one. Documentation/python.rst lists what it needs.
#
#   tools/nhbm-py/build-wheel.sh OUTDIR
#
# NHBM_PYTHON: the interpreter the venv is made from (default Debian's
# /usr/bin/python3). Prints the wheel's path last.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${1:?usage: build-wheel.sh OUTDIR}"
NHBM_CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
VENV="$NHBM_CACHE/python-venv"
TARGET="$NHBM_CACHE/cargo-target-py"
# What the venv is made with and what goes into it; changing a pin remakes it.
PYTHON="${NHBM_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
PINS="maturin==1.16.0 pytest==9.2.0"

# python3-venv (ensurepip) on Debian.
"$REPO/tools/setup.sh" --packages
# The userspace environment: rustup's cargo, libclang for nhbm's bindgen.
# shellcheck source=../testing/cargo-env.sh
. "$REPO/tools/testing/cargo-env.sh"

# One venv per cache; another run waits while it is made or updated.
mkdir -p "$NHBM_CACHE"
exec 7>"$VENV.lock"
flock 7
stamp="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])') $PINS"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.nhbm-pins" 2>/dev/null)" != "$stamp" ]; then
	echo "build-wheel: making the venv $VENV ($PINS)" >&2
	rm -rf "$VENV"
	"$PYTHON" -m venv "$VENV"
	# shellcheck disable=SC2086
	"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $PINS
	echo "$stamp" >"$VENV/.nhbm-pins"
fi

# One build in this target directory at a time (cargo locks it too, but the
# wheel directory is ours to empty).
exec 6>"$TARGET.lock"
flock 6
mkdir -p "$TARGET" "$OUT"
rm -f "$OUT"/nhbm-*.whl
(cd "$HERE" && CARGO_TARGET_DIR="$TARGET" "$VENV/bin/maturin" build --release --locked \
	--interpreter "$VENV/bin/python" --compatibility linux --out "$OUT")
wheel="$(ls "$OUT"/nhbm-*-abi3-*.whl)"
echo "$wheel"
