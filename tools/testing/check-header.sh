#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Fails when the committed libnhbm header (tools/libnhbm/include/nhbm/nhbm.h)
# differs from what cbindgen makes of the crate's sources now; `make header`
# rewrites it.
#
#   tools/testing/check-header.sh
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
LIB="$HERE/../libnhbm"
tmp="$(mktemp --suffix=.h)"
trap 'rm -f "$tmp"' EXIT

"$LIB/header.sh" "$tmp"
if ! diff -u --label committed/nhbm.h --label generated/nhbm.h "$LIB/include/nhbm/nhbm.h" "$tmp"; then
	echo "check-header: tools/libnhbm/include/nhbm/nhbm.h is stale: run 'make header'" >&2
	exit 1
fi
echo "check-header: tools/libnhbm/include/nhbm/nhbm.h is up to date"
