#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Generate libnhbm's C header from the crate's sources with the pinned
# cbindgen (cbindgen.sh), by default into the committed
# tools/libnhbm/include/nhbm/nhbm.h (`make header`).
#
#   tools/libnhbm/header.sh [OUT]
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/include/nhbm/nhbm.h}"
CBINDGEN="$("$HERE/cbindgen.sh")"

# From the crate root file: cbindgen follows its modules without cargo.
"$CBINDGEN" --quiet --config "$HERE/cbindgen.toml" --output "$OUT" "$HERE/src/lib.rs"
