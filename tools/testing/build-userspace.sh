#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the userspace programs that run in the test guest (statically linked:
# the guest is a busybox initramfs without a libc) and copy them, with the
# example models, into build/userspace/, which the QEMU harness copies into
# the guest's /tests/.
#
#   tools/testing/build-userspace.sh
#
# Works from a fresh clone: the Debian packages come from tools/setup.sh
# --packages (libclang, for the bindings generated from the UAPI header), and
# cargo fetches the crates named in tools/Cargo.lock.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
TOOLS="$REPO/tools"
OUT="$REPO/build/userspace"
TARGET=x86_64-unknown-linux-gnu
BINS=(nhbm-uapi-test nhbm nhbm-onnx-gen nhbm-bench nhbm-fuzz-test nhbm-stress-test nhbm-unplug-test nhbm-pci-test nhbm-monitor-test)

t0=$SECONDS

"$TOOLS/setup.sh" --packages
# shellcheck source=cargo-env.sh
. "$HERE/cargo-env.sh"
if ! command -v cargo >/dev/null 2>&1; then
	echo "build-userspace: cargo not found (install rustup's stable toolchain)" >&2
	exit 1
fi

# Held until the binaries are copied out (see cargo-env.sh).
cargo_lock
if [ -x "$CARGO_TARGET/$TARGET/release/nhbm" ]; then
	echo "build-userspace: cargo build --release --target $TARGET (static)" >&2
else
	echo "build-userspace: cargo build --release --target $TARGET (static; about 8 minutes from nothing on 2 cores)" >&2
fi
# --workspace: the guest programs and the benchmarks are not default members.
(
	cd "$CARGO_TOOLS"
	RUSTFLAGS="-C target-feature=+crt-static" \
		cargo build --release --locked --workspace --target "$TARGET" --target-dir "$CARGO_TARGET" \
		$(printf -- '--bin %s ' "${BINS[@]}")
)

mkdir -p "$OUT"
for bin in "${BINS[@]}"; do
	src="$CARGO_TARGET/$TARGET/release/$bin"
	[ -x "$src" ] || { echo "build-userspace: $src was not built" >&2; exit 1; }
	install -m 0755 "$src" "$OUT/$bin"
done
cargo_unlock
# libnhbm's KTAP suite: its C client, built against the installed library as
# a runtime would be: libnhbm.a, the headers and nhbm.pc staged under
# build/libnhbm-stage, the client linked statically through pkg-config.
STAGE="$REPO/build/libnhbm-stage"
rm -rf "$STAGE"
DESTDIR="$STAGE" PREFIX=/usr/local "$TOOLS/libnhbm/install.sh" --static --target "$TARGET"
# glibc's linker notes on getaddrinfo and getpwuid_r (in the Rust runtime,
# never called here) are kept out of the way.
# shellcheck disable=SC2046
gcc -std=c11 -O2 -Wall -Wextra -Werror -static -o "$OUT/nhbm-libnhbm-test" \
	"$TOOLS/libnhbm/examples/nhbm-client.c" \
	$(PKG_CONFIG_SYSROOT_DIR="$STAGE" PKG_CONFIG_LIBDIR="$STAGE/usr/local/lib/pkgconfig" \
		pkg-config --static --cflags --libs nhbm) 2>"$STAGE/link.log" ||
	{ cat "$STAGE/link.log" >&2; exit 1; }
# Test scripts that drive the programs in the guest.
install -m 0755 "$TOOLS/nhbm-cli/guest/nhbm-cli-test" "$OUT/nhbm-cli-test"
# Example models (and the constant data they name) for the demo and CLI tests.
if [ -d "$TOOLS/examples" ]; then
	find "$TOOLS/examples" -maxdepth 1 -type f \( -name '*.json' -o -name '*.bin' \) \
		-exec install -m 0644 {} "$OUT/" \;
fi

echo "build-userspace: ${#BINS[@]} programs in ${OUT#"$REPO"/}/ in $((SECONDS - t0))s" >&2
