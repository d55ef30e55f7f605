#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Prepare the Rust build metadata a distribution kernel's headers lack.
#
#   tools/prepare-kernel.sh [RELEASE]      (default: the running kernel)
#
# Debian's linux-headers-RELEASE has the kernel's .config, Module.symvers and
# C headers, but no rust/*.rmeta and no libmacros.so, so no Rust module can be
# built against it. This script unpacks the matching linux-source-X.Y, gives
# it the headers' .config, and runs olddefconfig, prepare and modules_prepare
# with the kernel's own C compiler (taken from CONFIG_CC_VERSION_TEXT) and
# KERNELRELEASE=RELEASE, then copies the headers' Module.symvers in. rustc and
# bindgen on PATH must be the ones the kernel was built with (Debian 13:
# packages rustc and bindgen from trixie).
#
# The result lives in $NHBM_CACHE/kbuild/RELEASE-KEY (NHBM_CACHE defaults to
# /var/cache/neuron_hbm; KEY is a hash of everything it depends on) with a
# link $NHBM_CACHE/kbuild/RELEASE to it, which dkms.conf builds against. A
# kernel whose own build directory (/lib/modules/RELEASE/build) already has
# the metadata, as a kernel built from source with CONFIG_RUST=y has, is
# linked there instead. Prints the directory to pass as KDIR=. Idempotent: a
# second run only prints it. dkms.conf runs it as its PRE_BUILD step; what is
# missing makes it fail with the apt command that installs it.
set -euo pipefail

REL="${1:-$(uname -r)}"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
HDR="/usr/src/linux-headers-$REL"
RUSTC="${RUSTC:-rustc}"
BINDGEN="${BINDGEN:-bindgen}"

say() { echo "prepare-kernel: $*" >&2; }
die() { say "$*"; exit 1; }
# need CMD PACKAGE: CMD must be on PATH; PACKAGE is what installs it.
need() { command -v "$1" >/dev/null || die "$1 is not installed: apt install $2"; }

base="$CACHE/kbuild"
own="/lib/modules/$REL/build"
if [ -f "$own/rust/libkernel.rmeta" ] && [ -f "$own/Module.symvers" ]; then
	mkdir -p "$base"
	ln -sfn "$(readlink -f "$own")" "$base/$REL"
	echo "$base/$REL"
	exit 0
fi

[ -f "$HDR/.config" ] || die "no $HDR/.config: apt install linux-headers-$REL"
[ -f "$HDR/Module.symvers" ] || die "no $HDR/Module.symvers"
grep -qx 'CONFIG_RUST=y' "$HDR/.config" || die "$REL is built without CONFIG_RUST=y"

# The kernel's compilers, from its own configuration.
want_cc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$HDR/.config")
want_rustc=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT="\(.*\)"$/\1/p' "$HDR/.config")
grep -qx 'CONFIG_CC_IS_GCC=y' "$HDR/.config" ||
	die "$REL is not built with gcc; build against its own build tree instead"
CC="${want_cc%% *}"
# x86_64-linux-gnu-gcc-14 comes with gcc-14.
cc_pkg=$(echo "$CC" | sed -n 's/^\(.*-\)\{0,1\}gcc-\([0-9][0-9]*\)$/gcc-\2/p')
need "$CC" "${cc_pkg:-the compiler named by CONFIG_CC_VERSION_TEXT ($want_cc)}"
have_cc=$("$CC" --version | head -1)
[ "$have_cc" = "$want_cc" ] || die "$CC is '$have_cc', the kernel was built with '$want_cc'"
# The kernel's Rust metadata can only be made by the rustc that built the
# kernel: Debian's kernels are built with the rustc of their own release
# (for a backports kernel, the release it backports to).
need "$RUSTC" "rustc rust-src"
have_rustc=$("$RUSTC" --version)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ "$have_rustc" = "$want_rustc" ] ||
	die "$RUSTC is '$have_rustc', the kernel was built with '$want_rustc' (the Rust metadata depends on it): apt install rustc${codename:+/$codename} rust-src${codename:+/$codename}"
sysroot=$("$RUSTC" --print sysroot)
[ -d "$sysroot/lib/rustlib/src/rust/library/core" ] || die "the Rust standard library's sources are missing: apt install rust-src"
need "$BINDGEN" bindgen
[ -n "$(find /usr/lib /usr/lib64 -maxdepth 4 -name 'libclang*.so*' -print -quit 2>/dev/null)" ] ||
	die "bindgen finds no libclang: apt install libclang-dev"
for hdr in libelf.h:libelf-dev openssl/ssl.h:libssl-dev; do
	[ -f "/usr/include/${hdr%%:*}" ] || die "no /usr/include/${hdr%%:*}: apt install ${hdr#*:}"
done
for tool in make:make bison:bison flex:flex bc:bc pahole:dwarves python3:python3 xz:xz-utils; do
	need "${tool%%:*}" "${tool#*:}"
done

# The matching source: linux-source-X.Y ships a tarball of the same version.
ver="${REL%%[+-]*}"
series=$(echo "$ver" | cut -d. -f1,2)
tarball="/usr/src/linux-source-$series.tar.xz"
[ -f "$tarball" ] || die "no $tarball, the source the Rust metadata is built from: apt install linux-source-$series"

key=$( {
	echo "$REL"
	cat "$HDR/.config"
	sha256sum <"$HDR/Module.symvers"
	stat -c '%s %Y' "$tarball"
	echo "$have_cc"
	echo "$have_rustc"
	"$BINDGEN" --version
} | sha256sum | cut -c1-12)
dir="$base/$REL-$key"
out="$dir/build"

mkdir -p "$base"
exec 9>"$base/.$REL.lock"
flock 9
if [ ! -f "$dir/.nhbm-complete" ]; then
	t0=$SECONDS
	say "preparing the Rust metadata of $REL in $dir (about 5 minutes on 2 cores)"
	rm -rf "$dir"
	mkdir -p "$dir/src.tmp" "$out"
	tar -C "$dir/src.tmp" -xf "$tarball"
	mv "$dir/src.tmp/linux-source-$series" "$dir/source"
	rmdir "$dir/src.tmp"
	[ "$(make -s -C "$dir/source" kernelversion)" = "$ver" ] ||
		die "$tarball is not version $ver"
	cp "$HDR/.config" "$out/.config"
	kmake=(-C "$dir/source" O="$out" CC="$CC" HOSTCC="$CC" RUSTC="$RUSTC" BINDGEN="$BINDGEN"
		KERNELRELEASE="$REL")
	make -s "${kmake[@]}" olddefconfig
	# olddefconfig must keep the distribution's configuration as it is, but
	# for what it probes in the build host's OpenSSL (module signing tools,
	# which a module build does not use).
	cfg() { grep '^CONFIG_' "$1" | grep -v '^CONFIG_OPENSSL_' | sort; }
	if ! diff -q <(cfg "$HDR/.config") <(cfg "$out/.config") >/dev/null; then
		diff <(cfg "$HDR/.config") <(cfg "$out/.config") >&2 || true
		die "olddefconfig changed $REL's configuration (wrong compiler or source?)"
	fi
	make "${kmake[@]}" -j"$(nproc)" prepare modules_prepare >"$dir/build.log" 2>&1 ||
		{ tail -40 "$dir/build.log" >&2; die "prepare failed (log: $dir/build.log)"; }
	cp "$HDR/Module.symvers" "$out/Module.symvers"
	[ -f "$out/rust/libkernel.rmeta" ] || die "no rust/libkernel.rmeta after prepare"
	touch "$dir/.nhbm-complete"
	say "prepared in $((SECONDS - t0))s"
fi
ln -sfn "$REL-$key/build" "$base/$REL"
echo "$out"
