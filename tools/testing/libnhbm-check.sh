#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Host checks of libnhbm, the C library (tools/libnhbm):
# - its header compiles as strict C11 and as C++17, warnings as errors;
# - `make install-lib` into a scratch DESTDIR installs libnhbm.so.1 (SONAME
#   libnhbm.so.1) exporting only nhbm_* symbols, the libnhbm.so symlink,
#   libnhbm.a, the headers and a valid nhbm.pc of the crate's version;
# - the C client builds against the installed library through pkg-config,
#   dynamically and with -static, and the dynamic one runs.
#
#   tools/testing/libnhbm-check.sh
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
LIB="$REPO/tools/libnhbm"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() {
	echo "libnhbm-check: $*" >&2
	exit 1
}

# The header, as the compilers of its users see it.
inc=(-I"$LIB/include" -I"$REPO/include/uapi")
gcc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only "${inc[@]}" "$LIB/tests/header.c" ||
	fail "nhbm.h does not compile as C11"
g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only "${inc[@]}" "$LIB/tests/header.cpp" ||
	fail "nhbm.h does not compile as C++17"

# The installed library.
stage="$work/stage"
DESTDIR="$stage" PREFIX=/usr "$LIB/install.sh"
so="$stage/usr/lib/libnhbm.so.1"
[ -f "$so" ] && [ -f "$stage/usr/lib/libnhbm.a" ] || fail "libnhbm.so.1 or libnhbm.a missing"
[ "$(readlink "$stage/usr/lib/libnhbm.so")" = libnhbm.so.1 ] || fail "libnhbm.so is no symlink to libnhbm.so.1"
[ -f "$stage/usr/include/nhbm.h" ] && [ -f "$stage/usr/include/linux/neuron_hbm.h" ] || fail "headers missing"
dynamic="$(readelf -d "$so")"
grep -q 'Library soname: \[libnhbm.so.1\]' <<<"$dynamic" || fail "SONAME is not libnhbm.so.1"
others="$(nm -D --defined-only "$so" | awk '$3 !~ /^nhbm_/')"
[ -z "$others" ] || fail "libnhbm.so.1 exports more than nhbm_*: $others"
exported="$(nm -D --defined-only "$so" | grep -c ' T nhbm_')"
declared="$(grep -c '^[a-z].*[ *]nhbm_[a-z_]*(' "$LIB/include/nhbm.h")"
[ "$exported" = "$declared" ] || fail "$exported functions exported, $declared declared in nhbm.h"

export PKG_CONFIG_SYSROOT_DIR="$stage" PKG_CONFIG_LIBDIR="$stage/usr/lib/pkgconfig"
pkg-config --validate nhbm || fail "nhbm.pc does not validate"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$LIB/Cargo.toml" | head -n 1)"
[ "$(pkg-config --modversion nhbm)" = "$version" ] || fail "nhbm.pc's Version is not $version"

# The client, against the installed library only.
client="$LIB/examples/nhbm-client.c"
# shellcheck disable=SC2046
gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$work/client" "$client" $(pkg-config --cflags --libs nhbm) ||
	fail "the client does not link against libnhbm.so"
# shellcheck disable=SC2046
gcc -std=c11 -O2 -Wall -Wextra -Werror -static -o "$work/client-static" "$client" \
	$(pkg-config --static --cflags --libs nhbm) 2>"$work/static.log" ||
	{ cat "$work/static.log" >&2; fail "the client does not link statically against libnhbm.a"; }
# (ldd's whole output first: grep -q stops reading at the match, and under
# pipefail ldd's SIGPIPE would fail the check.)
deps="$(LD_LIBRARY_PATH="$stage/usr/lib" ldd "$work/client")"
grep -q "libnhbm.so.1 => $so" <<<"$deps" || fail "the dynamic client does not load libnhbm.so.1"
# Without a device the client fails, but its device-less cases pass.
out="$(LD_LIBRARY_PATH="$stage/usr/lib" "$work/client" /nonexistent/neuron_hbm0 || true)"
for t in "ok 1 abi_version" "ok 2 open_missing_is_enoent" "not ok 3 open_device"; do
	grep -qx "    $t" <<<"$out" || fail "client output lacks '$t': $out"
done
echo "libnhbm-check: header (C11, C++17), install, $exported nhbm_* symbols only, pkg-config and client: ok"
