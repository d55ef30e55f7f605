#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# A Debian 13 (trixie) build root, for building and testing against Debian's
# own kernel from a host that cannot install Debian 13 binaries itself.
#
#   tools/debian13-root.sh [PKG | PKG/trixie-backports ...]
#
# Makes $NHBM_CACHE/debian13 (NHBM_CACHE defaults to /var/cache/neuron_hbm)
# with debootstrap (minbase) from the Debian mirror this machine already uses,
# with trixie-backports as a second apt suite, installs every PKG that is not
# installed yet, from backports where it has the package (the 7.3 kernel
# lives there; the /trixie-backports suffix only says so), the compilers
# from trixie, and prints the root's path on stdout. Idempotent; concurrent
# callers wait for each other.
#
#   tools/debian13-root.sh --run CMD [ARG...]
#
# runs CMD inside the root (as root, /proc, /sys and /dev mounted in a private
# mount namespace that disappears with it) after making sure the root exists.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
ROOT="$CACHE/debian13"
SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# shellcheck source=tools/debian-mirror.sh
. "$HERE/debian-mirror.sh"

say() { echo "debian13-root: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	say "needs root (debootstrap, chroot)"
	exit 1
fi

# in_root DIR CMD...: CMD inside DIR with the kernel file systems mounted in a
# private mount namespace, so nothing stays mounted when it ends.
in_root() {
	local dir="$1"; shift
	unshare --mount --propagation private /bin/sh -ec '
		r=$1; shift
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		exec chroot "$r" "$@"' sh "$dir" \
		/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

bootstrap() {
	local tmp="$ROOT.tmp" mirror
	mirror=$(debian_mirror)
	if ! command -v debootstrap >/dev/null; then
		say "installing debootstrap on the host"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			debootstrap >/dev/null
	fi
	say "debootstrap $SUITE (minbase) from $mirror into $ROOT (about 2 minutes)"
	rm -rf "$tmp"
	debootstrap --variant=minbase --keyring="$KEYRING" "$SUITE" "$tmp" "$mirror" \
		>"$CACHE/debian13-debootstrap.log" 2>&1 ||
		{ tail -20 "$CACHE/debian13-debootstrap.log" >&2; exit 1; }
	rm -f "$tmp/etc/apt/sources.list"
	cat >"$tmp/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-backports
Components: main
Signed-By: $KEYRING
EOF
	# Package scripts must not start services in the root.
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	mv "$tmp" "$ROOT"
}

# missing PKG...: the packages (suite suffix dropped) not installed in the root.
missing() {
	local p name
	for p in "$@"; do
		name="${p%%/*}"
		chroot "$ROOT" dpkg-query -W -f='${Status}\n' "$name" 2>/dev/null |
			grep -q "install ok installed" || echo "$p"
	done
}

main() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.debian13.lock"
	flock 9
	[ -f "$ROOT/usr/sbin/policy-rc.d" ] || bootstrap
	cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"

	# Debian's 7.3 kernel is built with trixie's rustc and gcc: the
	# compilers never come from backports (which has a newer rustc), even
	# with -t.
	cat >"$ROOT/etc/apt/preferences.d/compilers-from-trixie" <<-PREF
	Package: rustc rust-src libstd-rust-* cargo gcc-14* cpp-14* libgcc-14-dev
	Pin: release n=$SUITE
	Pin-Priority: 995
	PREF

	local miss
	mapfile -t miss < <(missing "$@")
	[ "${#miss[@]}" -gt 0 ] || return 0
	say "installing into the root: ${miss[*]}"
	# An earlier run cut short may have left packages unpacked, not set up.
	in_root "$ROOT" dpkg --configure -a >&2
	in_root "$ROOT" apt-get update -qq >&2
	# One suite order for every call, whatever was installed before: a
	# library one call took from backports (QEMU's) would otherwise block the
	# -dev package or the tool another call wants from trixie.
	in_root "$ROOT" apt-get install -y -qq --no-install-recommends \
		-t "$SUITE-backports" "${miss[@]%/"$SUITE-backports"}" \
		>"$CACHE/debian13-apt.log" 2>&1 || { tail -30 "$CACHE/debian13-apt.log" >&2; exit 1; }
	local still
	still=$(missing "${miss[@]}")
	[ -z "$still" ] || { say "not installed: $still"; exit 1; }
}

if [ "${1:-}" = "--run" ]; then
	shift
	(main)
	exec 9>&-
	in_root "$ROOT" "$@"
else
	main "$@"
	echo "$ROOT"
fi
