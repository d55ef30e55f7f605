#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The planner figures of `make bench`, on the host (Documentation/
# benchmarks.rst): `nhbm-bench --no-device` over the example models, and the
# exact planner side by side with MiniMalloc (google/minimalloc, Apache-2.0),
# the published solver for the same problem, on the same instances with the
# same wall-clock budget.
#
#   tools/testing/bench-planner.sh
#
# Prints nhbm-bench's `bench: NAME: VALUE (...) target OP T PASS|FAIL` lines
# and exits non-zero when a figure fails.
#
# MiniMalloc is a peer, not part of this tree: its sources are taken from
# NHBM_MINIMALLOC_SRC (default: shared/peers/minimalloc next to the
# checkout, else the copy of them the cache kept), whose build-debian13.sh builds it in a Debian 13 root against
# that release's abseil (Debian 12's is too old). The root is
# tools/debian13-root.sh's; the binary is cached in
# $NHBM_CACHE/minimalloc-<hash of the sources and of the root's abseil> and
# runs on the host through the root's dynamic loader and libraries. Without
# the sources, or without the root, the two comparison figures fail and say
# why; the other planner figures still run.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
TOOLS="$REPO/tools"
NHBM_CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
PEER_FIGURES=(planner_vs_minimalloc planner_vs_minimalloc_bound)

say() { echo "bench-planner: $*" >&2; }

# minimalloc: sets MINIMALLOC to a program that runs MiniMalloc on the host,
# building it first unless the cache has it; on failure sets WHY.
MINIMALLOC=
WHY=
minimalloc() {
	local src="${NHBM_MINIMALLOC_SRC:-$REPO/../shared/peers/minimalloc}"
	# The cache keeps a copy of the sources last used, for checkouts (a
	# fresh clone elsewhere) that have none beside them.
	local kept="$NHBM_CACHE/minimalloc-src"
	if [ -f "$src/build-debian13.sh" ]; then
		src="$(cd "$src" && pwd)"
		if ! diff -rq "$src" "$kept" >/dev/null 2>&1; then
			rm -rf "$kept.tmp"
			cp -r "$src" "$kept.tmp"
			rm -rf "$kept"
			mv "$kept.tmp" "$kept"
		fi
	elif [ -f "$kept/build-debian13.sh" ]; then
		src="$kept"
	else
		WHY="no MiniMalloc sources at $src (set NHBM_MINIMALLOC_SRC)"
		return 1
	fi
	local root
	if ! root=$("$TOOLS/debian13-root.sh" g++ cmake libabsl-dev); then
		WHY="no Debian 13 root to build MiniMalloc in (tools/debian13-root.sh)"
		return 1
	fi
	local absl key dir
	absl=$(chroot "$root" dpkg-query -W -f='${Version}' libabsl-dev)
	key=$({
		(cd "$src" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
		echo "libabsl-dev $absl"
	} | sha256sum | cut -c1-12)
	dir="$NHBM_CACHE/minimalloc-$key"
	exec 7>"$dir.lock"
	flock 7
	if [ ! -x "$dir/minimalloc" ]; then
		say "building MiniMalloc from $src in $root (about 2 minutes)"
		local work="/tmp/nhbm-minimalloc-$$"
		rm -rf "$root$work"
		mkdir -p "$root$work"
		cp -r "$src" "$root$work/src"
		if ! "$TOOLS/debian13-root.sh" --run sh "$work/src/build-debian13.sh" "$work/out" >/dev/null; then
			rm -rf "$root$work"
			WHY="MiniMalloc's build failed"
			return 1
		fi
		rm -rf "$dir"
		mkdir -p "$dir"
		install -m 0755 "$root$work/out/build/minimalloc" "$dir/minimalloc"
		rm -rf "$root$work"
	fi
	cat >"$dir/run" <<-EOF
	#!/bin/sh
	exec "$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu" "$dir/minimalloc" "\$@"
	EOF
	chmod 0755 "$dir/run"
	exec 7>&-
	MINIMALLOC="$dir/run"
}

# nhbm-bench for the host, from the shared target directory.
# shellcheck source=cargo-env.sh
. "$HERE/cargo-env.sh"
cargo_lock
(
	cd "$CARGO_TOOLS"
	cargo build --release --locked -p nhbm-bench --target-dir "$CARGO_TARGET"
)
mkdir -p "$NHBM_CACHE/bench-planner"
install -m 0755 "$CARGO_TARGET/release/nhbm-bench" "$NHBM_CACHE/bench-planner/nhbm-bench"
cargo_unlock
BENCH="$NHBM_CACHE/bench-planner/nhbm-bench"

rc=0
if minimalloc; then
	"$BENCH" --no-device --models "$TOOLS/examples" --minimalloc "$MINIMALLOC" || rc=1
else
	"$BENCH" --no-device --models "$TOOLS/examples" || rc=1
	for f in "${PEER_FIGURES[@]}"; do
		echo "bench: $f: error ($WHY) FAIL"
	done
	rc=1
fi
exit "$rc"
