#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make deb: the source package of neuron_hbm and the Debian packages built
# from it alone, into build/deb/:
#
#   neuron-hbm_VERSION.dsc, .tar.xz   the source package (3.0 native)
#   neuron-hbm-dkms    the module's source under DKMS, the udev rule, the group
#   neuron-hbm-tools   nhbm, with its man page and shell completions
#   libnhbm1           libnhbm.so.1
#   libnhbm-dev        nhbm.h, the UAPI header, libnhbm.a, nhbm.pc
#
# 1. The source tree: the checkout's files the packages need, the whole
#    userspace workspace, debian/changelog written from the one version
#    (tools/version.sh), and vendor/: every crate of Cargo.lock
#    (tools/vendor-crates.py), so that the build needs no network.
# 2. A clean Debian 13 build root: debootstrap minbase, build-essential and
#    the Build-Depends of debian/control (tools/debian13-root.sh --name
#    --satisfy), made once per set of Build-Depends and cached as
#    $NHBM_CACHE/debian13-build-HASH. Every build runs in a throwaway
#    overlay of it, so each starts from the same clean state.
# 3. In that overlay, with no network: dpkg-source -b makes the source
#    package, dpkg-source -x unpacks it afresh, and dpkg-buildpackage builds
#    every binary package from what it unpacked.
# 4. Lintian, in the Debian 13 root tools/debian13-root.sh makes, on the
#    source and binary packages: it must report no error; its tags are kept
#    in build/deb/lintian.txt.
#
# When build/deb/ holds the packages of the same source tree built in the
# same root (build/deb/source.id), they stay and nothing is built.
# Documentation/packaging.rst.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
OUT="$REPO/build/deb"
# Where the overlay of the build root keeps its changes (the build's tree
# and results), and the directory of the build inside the root.
RUN="$CACHE/debian13-build.run"
WORK=/build
# Inside the lintian root.
LINT=/usr/local/src/neuron-hbm-lintian

say() { echo "build-deb: $*" >&2; }
die() { say "$*"; exit 1; }

VERSION=$("$REPO/tools/version.sh")
PKG="neuron-hbm-$VERSION"

# build_depends: debian/control's Build-Depends, on one line.
build_depends() {
	sed -n '/^Build-Depends:/,/^[^ ]/{s/^Build-Depends://;/^[^ ]/d;p}' "$REPO/debian/control" |
		tr -s ' \n' ' ' | sed 's/^ //;s/ $//'
}

# source_tree DIR: the package's source tree in DIR.
source_tree() {
	local dir="$1" date
	mkdir -p "$dir"
	# The tree as the checkout has it (tracked or new, not ignored).
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard -- Kbuild Makefile \
		dkms.conf rust include debian tools LICENSES README.md |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		xargs -0 cp --parents -t "$dir")
	# debian/changelog, from the one version. Its date is the commit's, so
	# that the same tree gives the same packages.
	date=$(git -C "$REPO" log -1 --format=%cD 2>/dev/null || date -R)
	cat >"$dir/debian/changelog" <<-EOF
	neuron-hbm ($VERSION) unstable; urgency=medium

	  * Packages of neuron_hbm $VERSION, built from its tree by make deb.

	 -- $(sed -n 's/^Maintainer: //p' "$REPO/debian/control")  $date
	EOF
	say "vendoring the crates of tools/Cargo.lock"
	python3 "$HERE/vendor-crates.py" "$REPO/tools" "$dir/vendor" >/dev/null
}

# build_root: the clean build root for the current Build-Depends; older
# ones (other Build-Depends) are removed.
build_root() {
	local deps hash name old
	deps=$(build_depends)
	hash=$(printf '%s\n' "$deps" | sha256sum | cut -c1-12)
	name="debian13-build-$hash"
	for old in "$CACHE"/debian13-build-*; do
		[ "$old" = "$CACHE/$name" ] || [ ! -d "$old" ] || [ "$old" = "$RUN" ] || rm -rf "$old"
	done
	NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" --name "$name" --satisfy \
		build-essential "$deps" >/dev/null
	echo "$name"
}

# The commands of step 3, run as root inside the overlay.
BUILD_CMDS="set -e
cd $WORK
dpkg-source -b $PKG
rm -rf $PKG
dpkg-source -x neuron-hbm_$VERSION.dsc
cd $PKG
dpkg-buildpackage -b -uc -us"

# tree_id DIR: the names, modes and contents of the files under DIR, hashed.
tree_id() {
	(cd "$1" && {
		find . -type f -printf '%m %p\n' | LC_ALL=C sort
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
	}) | sha256sum | cut -c1-64
}

main() {
	mkdir -p "$CACHE" "$OUT"
	# One package build at a time.
	exec 7>"$CACHE/.build-deb.lock"
	flock 7
	local root id
	root=$(build_root)
	rm -rf "$RUN"
	say "the source tree"
	source_tree "$RUN/upper$WORK/$PKG"
	# The same source in the same root builds the same packages: those of
	# the last build stay when nothing changed (make check-distro after
	# make deb, for instance).
	id="$root $(tree_id "$RUN/upper$WORK/$PKG")"
	if [ "$(cat "$OUT/source.id" 2>/dev/null)" = "$id" ] && [ -f "$OUT/lintian.txt" ] &&
		ls "$OUT"/*.deb "$OUT"/*.dsc >/dev/null 2>&1; then
		say "build/deb/ holds the packages of this source tree already"
		return 0
	fi
	rm -f "$OUT/source.id"

	say "dpkg-source and dpkg-buildpackage in a fresh copy of $root, offline"
	local log="$OUT/dpkg-buildpackage.log"
	NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" --name "$root" --overlay "$RUN" --offline \
		--run sh -c "$BUILD_CMDS" >"$log" 2>&1 ||
		{ tail -40 "$log" >&2; die "dpkg-buildpackage failed (log: ${log#"$REPO"/})"; }

	rm -f "$OUT"/*.deb "$OUT"/*.dsc "$OUT"/*.tar.* "$OUT"/*.changes "$OUT"/*.buildinfo
	local b="$RUN/upper$WORK"
	cp "$b"/*.deb "$b"/*.dsc "$b"/*.tar.* "$b"/*.changes "$b"/*.buildinfo "$OUT/"
	lint
	echo "$id" >"$OUT/source.id"
	say "$(cd "$OUT" && ls ./*.dsc ./*.deb | tr '\n' ' ')in build/deb/ (source package" \
		"$(du -ch "$OUT"/*.tar.* | tail -1 | cut -f1); lintian: $(grep -c '^[EWI]:' "$OUT/lintian.txt" || true) tags, none an error)"
}

# lint: lintian on the source package and the binary packages, in the
# Debian 13 root; an error fails.
lint() {
	local root lrc
	root=$(NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" lintian)
	rm -rf "${root:?}$LINT"
	mkdir -p "$root$LINT"
	cp "$OUT"/*.deb "$OUT"/*.dsc "$OUT"/*.tar.* "$OUT"/*.changes "$OUT"/*.buildinfo "$root$LINT/"
	set +e
	NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" --run sh -c "cd $LINT && lintian --info \
		--display-info --fail-on error ./*.dsc ./*.changes" >"$OUT/lintian.txt" 2>&1
	lrc=$?
	set -e
	grep -E '^[EWIPX]: ' "$OUT/lintian.txt" >&2 || true
	if [ "$lrc" != 0 ]; then
		# What lintian said besides its tags (a file it skipped, say).
		grep -vE '^(N:|[EWIPX]: |running with root)' "$OUT/lintian.txt" >&2 || true
		die "lintian reports errors (build/deb/lintian.txt)"
	fi
}

main
