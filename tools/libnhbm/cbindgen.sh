#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Print the path of the pinned cbindgen, installing it on first use under
# the cache (never inside the checkout):
#
#   tools/libnhbm/cbindgen.sh      # prints .../cbindgen-<version>/bin/cbindgen
set -euo pipefail

VERSION=0.29.2
ROOT="${NHBM_CACHE:-/var/cache/neuron_hbm}/cbindgen-$VERSION"
BIN="$ROOT/bin/cbindgen"

command -v cargo >/dev/null 2>&1 || PATH="$HOME/.cargo/bin:$PATH"
if [ ! -x "$BIN" ]; then
	mkdir -p "$ROOT"
	exec 9>"$ROOT.lock"
	flock 9
	if [ ! -x "$BIN" ]; then
		echo "cbindgen: cargo install cbindgen $VERSION (about 2 minutes, once)" >&2
		# Its own target directory: the shared one is held by other builds.
		CARGO_TARGET_DIR="$ROOT/build" cargo install cbindgen --locked --version "$VERSION" \
			--root "$ROOT" >&2
		rm -rf "$ROOT/build"
	fi
fi
echo "$BIN"
