#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the device model of a Neuron PCI function (a host program, see
# tools/nhbm-devmodel) and copy it to build/nhbm-devmodel, where `make
# check-pci` and `make bench` take it from.
#
#   tools/testing/build-devmodel.sh
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=cargo-env.sh
. "$HERE/cargo-env.sh"

# Held until the binary is copied out (see cargo-env.sh).
cargo_lock
(cd "$CARGO_TOOLS" && cargo build --release --locked --quiet -p nhbm-devmodel --target-dir "$CARGO_TARGET")
mkdir -p "$REPO/build"
install -m 0755 "$CARGO_TARGET/release/nhbm-devmodel" "$REPO/build/nhbm-devmodel"
