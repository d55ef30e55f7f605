#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build libnhbm (release) and install it under $DESTDIR$PREFIX (PREFIX
# defaults to /usr/local), as liburing and libdrm install theirs:
#   LIBDIR/libnhbm.so.X.Y.Z, LIBDIR/libnhbm.so.X -> it (the SONAME),
#   LIBDIR/libnhbm.so -> libnhbm.so.X, LIBDIR/libnhbm.a,
#   include/nhbm/nhbm.h and include/nhbm/neuron_hbm.h (the library's copy of
#   the UAPI header, which nhbm.h includes: nothing goes to include/linux),
#   share/man/man3/ (a page per call, libnhbm.3; tools/libnhbm/man.py),
#   LIBDIR/pkgconfig/nhbm.pc
# (`make install-lib`). LIBDIR defaults to $PREFIX/lib; a Debian multiarch
# system uses $PREFIX/lib/x86_64-linux-gnu (make deb does).
#
#   tools/libnhbm/install.sh [--static] [--target TRIPLE]
#
# The shared library is linked here from the Rust staticlib, with the
# symbol versions of nhbm.map (rustc's own cdylib link takes no version
# script of ours). --static builds and installs only libnhbm.a (no shared
# library), with the C runtime linked statically as the guest programs are
# (-C target-feature=+crt-static). It always builds for an explicit
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
# A copy to link from once the lock is released.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$out/libnhbm_c.a" "$tmp/libnhbm.a"
cargo_unlock

lib="$DESTDIR$LIBDIR"
inc="$DESTDIR$PREFIX/include/nhbm"
man="$DESTDIR$PREFIX/share/man/man3"
install -d "$lib/pkgconfig" "$inc" "$man"
install -m 0644 "$tmp/libnhbm.a" "$lib/libnhbm.a"
if [ "$static" = 0 ]; then
	# Every object of the archive, so that the version script, not the
	# archive's index, decides what is exported; -lgcc_s (gcc's default for
	# -shared) for the unwinder.
	# shellcheck disable=SC2086
	gcc -shared -o "$tmp/libnhbm.so.$VERSION" -Wl,-soname,"libnhbm.so.$MAJOR" \
		-Wl,--version-script="$HERE/nhbm.map" -Wl,--gc-sections -Wl,-z,relro,-z,now,-z,noexecstack \
		-Wl,--whole-archive "$tmp/libnhbm.a" -Wl,--no-whole-archive $LIBS_PRIVATE
	install -m 0755 "$tmp/libnhbm.so.$VERSION" "$lib/libnhbm.so.$VERSION"
	ln -sfn "libnhbm.so.$VERSION" "$lib/libnhbm.so.$MAJOR"
	ln -sfn "libnhbm.so.$MAJOR" "$lib/libnhbm.so"
fi
install -m 0644 "$HERE/include/nhbm/nhbm.h" "$inc/nhbm.h"
install -m 0644 "$REPO/include/uapi/linux/neuron_hbm.h" "$inc/neuron_hbm.h"
python3 "$HERE/man.py" "$HERE/include/nhbm/nhbm.h" "$HERE/nhbm.map" "$VERSION" "$man"
chmod 0644 "$man"/nhbm_*.3 "$man/libnhbm.3"
# The macro's page is the function's (a link, as Debian wants rather than .so).
ln -sfn nhbm_check_version.3 "$man/NHBM_CHECK_VERSION.3"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@VERSION@|$VERSION|" -e "s|@LIBS_PRIVATE@|$LIBS_PRIVATE|" \
	"$HERE/nhbm.pc.in" >"$lib/pkgconfig/nhbm.pc"
chmod 0644 "$lib/pkgconfig/nhbm.pc"
echo "install-lib: libnhbm $VERSION in $DESTDIR$PREFIX" >&2
