#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build libnhbm (release) and install it under $DESTDIR$PREFIX (PREFIX
# defaults to /usr/local): LIBDIR/libnhbm.so.1, LIBDIR/libnhbm.so ->
# libnhbm.so.1, LIBDIR/libnhbm.a, include/nhbm.h, include/linux/neuron_hbm.h
# (the UAPI header nhbm.h includes) and LIBDIR/pkgconfig/nhbm.pc (`make
# install-lib`). LIBDIR defaults to $PREFIX/lib; a Debian multiarch system
# uses $PREFIX/lib/x86_64-linux-gnu (make deb does).
#
#   tools/libnhbm/install.sh [--static] [--target TRIPLE]
#
# --static builds and installs only libnhbm.a, with the C runtime linked
# statically as the guest programs are (-C target-feature=+crt-static,
# which cannot make a shared library). It always builds for an explicit
# target, the host's by default: with --target, RUSTFLAGS reach only that
# target's crates, not the build scripts and proc-macros built for the host
# (which cannot be linked with crt-static). Builds run in the shared cargo
# target directory under its lock (tools/testing/cargo-env.sh).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PREFIX="${PREFIX:-/usr/local}"
LIBDIR="${LIBDIR:-$PREFIX/lib}"
DESTDIR="${DESTDIR:-}"
static=0
target=
while [ $# -gt 0 ]; do
	case "$1" in
	--static) static=1 ;;
	--target) target="$2"; shift ;;
	*) echo "usage: $0 [--static] [--target TRIPLE]" >&2; exit 2 ;;
	esac
	shift
done
# The Version of nhbm.pc is the crate's: Cargo.toml is the one place.
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$HERE/Cargo.toml" | head -n 1)"
MAJOR="${VERSION%%.*}"
# What the Rust staticlib needs beyond libc (`cargo rustc -p libnhbm
# --crate-type staticlib -- --print native-static-libs`), less -lgcc_s:
# gcc and g++ link the unwinder themselves (libgcc_s, or libgcc_eh with
# -static, which has no libgcc_s).
LIBS_PRIVATE="-lutil -lrt -lpthread -lm -ldl"

# shellcheck source=../testing/cargo-env.sh
. "$REPO/tools/testing/cargo-env.sh"
if [ "$static" = 1 ] && [ -z "$target" ]; then
	target="$(rustc -vV | sed -n 's/^host: //p')"
	[ -n "$target" ] || { echo "$0: cannot tell the host's target triple" >&2; exit 1; }
fi
cargo_lock
out="$CARGO_TARGET/${target:+$target/}release"
(
	cd "$CARGO_TOOLS"
	if [ "$static" = 1 ]; then
		RUSTFLAGS="-C target-feature=+crt-static" cargo rustc --quiet --release --locked \
			-p libnhbm --lib --crate-type staticlib ${target:+--target "$target"} \
			--target-dir "$CARGO_TARGET"
	else
		cargo build --quiet --release --locked -p libnhbm ${target:+--target "$target"} \
			--target-dir "$CARGO_TARGET"
	fi
)

lib="$DESTDIR$LIBDIR"
inc="$DESTDIR$PREFIX/include"
install -d "$lib/pkgconfig" "$inc/linux"
install -m 0644 "$out/libnhbm_c.a" "$lib/libnhbm.a"
if [ "$static" = 0 ]; then
	install -m 0755 "$out/libnhbm_c.so" "$lib/libnhbm.so.$MAJOR"
	ln -sfn "libnhbm.so.$MAJOR" "$lib/libnhbm.so"
fi
cargo_unlock
install -m 0644 "$HERE/include/nhbm.h" "$inc/nhbm.h"
install -m 0644 "$REPO/include/uapi/linux/neuron_hbm.h" "$inc/linux/neuron_hbm.h"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@VERSION@|$VERSION|" -e "s|@LIBS_PRIVATE@|$LIBS_PRIVATE|" \
	"$HERE/nhbm.pc.in" >"$lib/pkgconfig/nhbm.pc"
chmod 0644 "$lib/pkgconfig/nhbm.pc"
echo "install-lib: libnhbm $VERSION in $DESTDIR$PREFIX" >&2
