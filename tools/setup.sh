#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Idempotent toolchain + test-kernel setup for neuron_hbm.
#
#   tools/setup.sh            install everything that is missing, build the
#                             test kernel if its cache entry does not exist
#   tools/setup.sh --kdir     print the cached kernel build directory and exit
#   tools/setup.sh --packages install the missing Debian packages only (what
#                             the userspace build needs: libclang for bindgen)
#   VARIANT=debug ...         use the debug config fragment (KASAN, lockdep, ...)
#
# Everything heavy lives outside the checkout, under $NHBM_CACHE
# (default /var/cache/neuron_hbm), so a fresh clone reuses it.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
VARIANT="${VARIANT:-test}"
KVER_PKG="linux-source-7.3"
BINDGEN_VERSION="0.73.2"
BINDGEN="$CACHE/bindgen-$BINDGEN_VERSION/bin/bindgen"
LLVM_SUFFIX="-19"
APT_PACKAGES=(rustc-web rust-web-src rust-web-clippy clang-19 libclang-19-dev lld-19
	llvm-19 bc bison flex libelf-dev libssl-dev cpio kmod busybox-static
	qemu-system-x86 make gcc python3 python3-venv xz-utils linux-libc-dev
	libc6-dev g++ pkg-config)

QUIET_KDIR=0
[ "${1:-}" = "--kdir" ] && QUIET_KDIR=1
PACKAGES_ONLY=0
[ "${1:-}" = "--packages" ] && PACKAGES_ONLY=1

# Progress goes to stderr in every mode: with --kdir only stdout (the path)
# is an answer, and a cold first run must say what it is doing.
say() { echo "setup: $*" >&2; }

# step NAME CMD...: run a step and report its duration.
step() {
	local name="$1"; shift
	local t0=$SECONDS
	say "$name ..."
	"$@"
	say "$name done in $((SECONDS - t0))s"
}

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "setup: '$1' needs root (apt); run 'sudo make setup' once" >&2
		exit 1
	fi
}

missing_packages() {
	local p
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
			echo "$p"
	done
}

install_packages() {
	need_root "apt-get install"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# shellcheck source=tools/debian-mirror.sh
. "$HERE/debian-mirror.sh"

fetch_kernel_source() {
	need_root "apt-get download"
	local list=/etc/apt/sources.list.d/neuron-hbm-trixie-backports.sources
	if [ ! -f "$list" ]; then
		cat >"$list" <<EOF
# Added by neuron_hbm tools/setup.sh: only for linux-source-7.3.
# Backports are never installed automatically, so nothing else is upgraded.
Types: deb
URIs: $(debian_mirror)
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
		apt-get update -qq
	fi
	local dl="$CACHE/download"
	mkdir -p "$dl"
	(cd "$dl" && ls ${KVER_PKG}_*.deb >/dev/null 2>&1 || apt-get download -qq "$KVER_PKG")
	local deb
	deb=$(ls "$dl"/${KVER_PKG}_*.deb | head -1)
	rm -rf "$dl/x"
	dpkg-deb -x "$deb" "$dl/x"
	mkdir -p "$CACHE/src.tmp"
	tar -C "$CACHE/src.tmp" -xf "$dl/x/usr/src/$KVER_PKG.tar.xz"
	rm -rf "$dl/x" "$CACHE/src"
	mv "$CACHE/src.tmp/$KVER_PKG" "$CACHE/src"
	rmdir "$CACHE/src.tmp"
}

install_bindgen() {
	cargo install --quiet --locked bindgen-cli --version "$BINDGEN_VERSION" \
		--root "$CACHE/bindgen-$BINDGEN_VERSION"
}

KMAKE=()
kmake_args() {
	KMAKE=(LLVM="$LLVM_SUFFIX" RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
		BINDGEN="$BINDGEN" LIBCLANG_PATH=/usr/lib/llvm-19/lib)
}

FRAGMENTS=("$REPO/tools/testing/kernel.config")
[ "$VARIANT" = debug ] && FRAGMENTS+=("$REPO/tools/testing/kernel-debug.config")

kernel_dir() {
	local srcver key
	srcver=$(make -s -C "$CACHE/src" kernelversion 2>/dev/null)
	key=$( {
		echo "$srcver"
		cat "${FRAGMENTS[@]}"
		/usr/bin/rustc --version
		clang$LLVM_SUFFIX --version | head -1
		echo "bindgen $BINDGEN_VERSION"
	} | sha256sum | cut -c1-12)
	echo "$CACHE/kernel-$srcver-$VARIANT-$key"
}

# The build happens in place (its Makefiles record their absolute path); the
# stamp file written last marks it complete.
build_kernel() {
	local out="$1"
	rm -rf "$out"
	mkdir -p "$out"
	kmake_args
	make -s -C "$CACHE/src" O="$out" "${KMAKE[@]}" tinyconfig
	"$CACHE/src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
		"${FRAGMENTS[@]}" >/dev/null
	make -s -C "$CACHE/src" O="$out" "${KMAKE[@]}" olddefconfig
	# Every option the fragments ask for must have survived olddefconfig.
	local line bad=0
	[ "${#FRAGMENTS[@]}" -gt 0 ] || { echo "setup: no config fragment" >&2; exit 1; }
	while read -r line; do
		case "$line" in
		CONFIG_*=*) grep -qx "$line" "$out/.config" || { echo "setup: not set: $line" >&2; bad=1; } ;;
		"# CONFIG_"*" is not set") grep -q "^${line#\# }" "$out/.config" ||
			grep -qx "$line" "$out/.config" || true ;;
		esac
	done < <(cat "${FRAGMENTS[@]}")
	[ "$bad" = 0 ] || exit 1
	make -C "$CACHE/src" O="$out" "${KMAKE[@]}" -j"$(($(nproc) + 1))" >"$out/build.log" 2>&1 ||
		{ tail -40 "$out/build.log" >&2; exit 1; }
	touch "$out/.nhbm-complete"
}

# ready KDIR: everything is installed and KDIR's kernel is built.
ready() {
	[ -z "$(missing_packages)" ] && command -v cargo >/dev/null && [ -x "$BINDGEN" ] &&
		[ -f "$CACHE/src/Makefile" ] && [ -f "$1/.nhbm-complete" ]
}

main() {
	local miss kdir
	if [ "$PACKAGES_ONLY" = 1 ]; then
		[ -z "$(missing_packages)" ] && return 0
		mkdir -p "$CACHE"
		exec 9>"$CACHE/.setup-install.lock"
		flock 9
		miss=$(missing_packages)
		# shellcheck disable=SC2086
		[ -z "$miss" ] || step "installing Debian packages: $(echo $miss)" install_packages $miss
		return 0
	fi
	mkdir -p "$CACHE"
	# The common case, a warm cache, takes no lock: callers building against
	# one kernel never wait for a build of another.
	if [ -f "$CACHE/src/Makefile" ]; then
		kdir=$(kernel_dir)
		if ready "$kdir"; then
			if [ "$QUIET_KDIR" = 1 ]; then echo "$kdir"; else say "kernel ready: $kdir"; fi
			return 0
		fi
	fi
	# Installing is one at a time: a second caller waits, then finds it done.
	exec 9>"$CACHE/.setup-install.lock"
	flock 9
	miss=$(missing_packages)
	# shellcheck disable=SC2086
	[ -z "$miss" ] || step "installing Debian packages (a few minutes): $(echo $miss)" install_packages $miss
	command -v cargo >/dev/null || { echo "setup: cargo (rustup) is needed for bindgen and the tools" >&2; exit 1; }
	[ -x "$BINDGEN" ] || step "building bindgen-cli $BINDGEN_VERSION (about 2 minutes)" install_bindgen
	[ -f "$CACHE/src/Makefile" ] || step "fetching and unpacking $KVER_PKG (about a minute)" fetch_kernel_source
	exec 9>&-
	# One build per kernel configuration at a time; builds of different
	# configurations do not wait for each other.
	kdir=$(kernel_dir)
	exec 9>"$kdir.lock"
	flock 9
	if [ ! -f "$kdir/.nhbm-complete" ]; then
		step "building the $VARIANT kernel in $kdir (about 8 minutes on 2 cores)" build_kernel "$kdir"
	fi
	if [ "$QUIET_KDIR" = 1 ]; then echo "$kdir"; else say "kernel ready: $kdir"; fi
}

main
