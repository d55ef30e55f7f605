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
#
# Options, before the rest:
#
#   --name NAME     the root $NHBM_CACHE/NAME instead of debian13: another
#                   root made the same way, with its own lock and logs (the
#                   packages' clean build root, tools/build-deb.sh)
#   --satisfy       the arguments are dependency strings (Build-Depends
#                   syntax, alternatives and versions allowed), installed
#                   with `apt-get satisfy` at the suites' own priorities:
#                   trixie first, backports only for what trixie cannot
#                   satisfy. Done once per root: a root that satisfied the
#                   same strings before is left alone.
#   --overlay DIR   (with --run) CMD sees a throwaway copy of the root: an
#                   overlay whose changes land in DIR/upper (which may hold
#                   files for CMD beforehand); the root itself stays as it was
#   --offline       (with --run) CMD runs in a network namespace of its own,
#                   with no interface up
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
NAME=debian13
SATISFY=0
OVERLAY=
OFFLINE=0
while [ $# -gt 0 ]; do
	case "$1" in
	--name) NAME="$2"; shift 2 ;;
	--satisfy) SATISFY=1; shift ;;
	--overlay) OVERLAY="$2"; shift 2 ;;
	--offline) OFFLINE=1; shift ;;
	*) break ;;
	esac
done
ROOT="$CACHE/$NAME"
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
# private mount namespace, so nothing stays mounted when it ends. With
# --overlay, DIR is the lower layer of an overlay mounted in that namespace;
# with --offline the namespace has no network either.
in_root() {
	local dir="$1"; shift
	local net=()
	[ "$OFFLINE" = 0 ] || net=(--net)
	[ -z "$OVERLAY" ] || mkdir -p "$OVERLAY/upper" "$OVERLAY/work" "$OVERLAY/merged"
	unshare --mount "${net[@]}" --propagation private /bin/sh -ec '
		r=$1; ov=$2; shift 2
		if [ -n "$ov" ]; then
			mount -t overlay overlay \
				-o "lowerdir=$r,upperdir=$ov/upper,workdir=$ov/work" "$ov/merged"
			r=$ov/merged
		fi
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		exec chroot "$r" "$@"' sh "$dir" "$OVERLAY" \
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
		>"$CACHE/$NAME-debootstrap.log" 2>&1 ||
		{ tail -20 "$CACHE/$NAME-debootstrap.log" >&2; exit 1; }
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

# satisfy DEP...: `apt-get satisfy` of the dependency strings, once: the
# strings a root satisfied are kept in it and not asked for again.
satisfy() {
	local stamp="$ROOT/var/lib/neuron-hbm-satisfied"
	[ "$(cat "$stamp" 2>/dev/null)" != "$(printf '%s\n' "$@")" ] || return 0
	say "installing into the root: $*"
	in_root "$ROOT" dpkg --configure -a >&2
	in_root "$ROOT" apt-get update -qq >&2
	in_root "$ROOT" apt-get satisfy -y -qq --no-install-recommends "$@" \
		>"$CACHE/$NAME-apt.log" 2>&1 || { tail -30 "$CACHE/$NAME-apt.log" >&2; exit 1; }
	# Nothing downloaded stays in the root that builds are copied from.
	in_root "$ROOT" apt-get clean >&2
	printf '%s\n' "$@" >"$stamp"
}

main() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.$NAME.lock"
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

	if [ "$SATISFY" = 1 ]; then
		satisfy "$@"
		return 0
	fi
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
		>"$CACHE/$NAME-apt.log" 2>&1 || { tail -30 "$CACHE/$NAME-apt.log" >&2; exit 1; }
	local still
	still=$(missing "${miss[@]}")
	[ -z "$still" ] || { say "not installed: $still"; exit 1; }
}

if [ "${1:-}" = "--run" ]; then
	shift
	# Making sure the root exists happens in the root itself, not the overlay.
	(OVERLAY='' OFFLINE=0 main)
	exec 9>&-
	in_root "$ROOT" "$@"
else
	main "$@"
	echo "$ROOT"
fi
