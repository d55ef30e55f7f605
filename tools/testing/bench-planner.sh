#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# The planner figures of `make bench`, on the host (Documentation/
# benchmarks.rst): `nhbm-bench --no-device` over the example models, and the
# exact planner side by side with MiniMalloc (google/minimalloc, Apache-2.0),
# the published solver for the same problem, on the same instances with the
# same wall-clock budget, and the default planner on compilers' traces side
# by side with omnimalloc's best fit and SuperMalloc.
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
	# The peer's build script edits its CMakeLists.txt with python3.
	if ! root=$("$TOOLS/debian13-root.sh" g++ cmake libabsl-dev python3); then
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

# omnimalloc (Apache-2.0), the peer of the trace figures: installed from the
# package index pip is configured with into a venv under the cache (made
# once per pin, as tools/nhbm-py/build-wheel.sh makes its own), and run on
# the traces by omnimalloc-peaks.py. Sets PEAKS to its JSON; on failure
# sets WHY_OMNI, and the two figures that need it fail and say so.
OMNI_PIN="omnimalloc==1.0.0"
PEAKS=
WHY_OMNI=
omnimalloc_peaks() {
	local venv="$NHBM_CACHE/omnimalloc-venv" python stamp
	python="${NHBM_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}"
	exec 8>"$venv.lock"
	flock 8
	stamp="$("$python" -c 'import sys; print(sys.version.split()[0])') $OMNI_PIN"
	if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.nhbm-pins" 2>/dev/null)" != "$stamp" ]; then
		say "making the venv $venv ($OMNI_PIN)"
		rm -rf "$venv"
		if ! "$python" -m venv "$venv" ||
			! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$OMNI_PIN" >&2; then
			WHY_OMNI="could not install $OMNI_PIN into $venv"
			exec 8>&-
			return 1
		fi
		echo "$stamp" >"$venv/.nhbm-pins"
	fi
	exec 8>&-
	PEAKS="$NHBM_CACHE/bench-planner/omnimalloc-peaks.json"
	say "omnimalloc's best fit and SuperMalloc (10 s) on the traces (some 3 minutes)"
	if ! "$venv/bin/python" "$HERE/omnimalloc-peaks.py" \
		"$TOOLS"/nhbm-planner/tests/idealloc-traces/*.csv >"$PEAKS"; then
		WHY_OMNI="omnimalloc-peaks.py failed"
		PEAKS=
		return 1
	fi
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

OMNI=()
if omnimalloc_peaks; then
	OMNI=(--omnimalloc "$PEAKS")
else
	say "$WHY_OMNI"
fi

rc=0
if minimalloc; then
	"$BENCH" --no-device --models "$TOOLS/examples" --minimalloc "$MINIMALLOC" "${OMNI[@]}" || rc=1
else
	"$BENCH" --no-device --models "$TOOLS/examples" "${OMNI[@]}" || rc=1
	for f in "${PEER_FIGURES[@]}"; do
		echo "bench: $f: error ($WHY) FAIL"
	done
	rc=1
fi
exit "$rc"
