#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# rustdoc for the module with warnings as errors (private items included),
# run with the exact flags kbuild compiled rust/neuron_hbm.o with.
#
#   tools/testing/rustdoc.sh OUTDIR
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$REPO/build/rustdoc}"
CMDFILE="$REPO/rust/.neuron_hbm.o.cmd"
[ -f "$CMDFILE" ] || { echo "rustdoc: build the module first (make)" >&2; exit 1; }

cmd=$(sed -n 's/^savedcmd_rust\/neuron_hbm.o := //p' "$CMDFILE")
# rustc -> rustdoc: drop what only a code generator takes.
doc=$(echo "$cmd" | sed -E -e 's#(^| )[^ ]*/(rustc|clippy-driver) #\1/usr/bin/rustdoc #' \
	-e 's/--emit=[^ ]*//g' -e 's/--out-dir [^ ]*//' -e 's/-Cembed-bitcode=n//' \
	-e 's/-Clto=n//' -e 's/-Zbinary_dep_depinfo=y//' -e 's/-Zfunction-sections=n//')
rm -rf "$OUT"
cd "$REPO"
eval "RUSTC_BOOTSTRAP=1 $doc --document-private-items -Drustdoc::all -o $OUT"
echo "rustdoc: clean, HTML in ${OUT#"$REPO"/}/neuron_hbm/index.html" >&2
