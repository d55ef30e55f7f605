#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Host checks of libnhbm, the C library (tools/libnhbm):
# - `make install-lib` into a scratch DESTDIR installs libnhbm.so.X.Y.Z
#   (SONAME libnhbm.so.1) with its libnhbm.so.1 and libnhbm.so links,
#   libnhbm.a, <nhbm/nhbm.h> and <nhbm/neuron_hbm.h> (nothing in
#   include/linux), a manual page per call and a valid nhbm.pc of the
#   crate's version;
# - the library exports only the nhbm_* functions the header declares, each
#   with the symbol version of its node in nhbm.map and of its line in
#   debian/libnhbm1.symbols (objdump -T, readelf -V);
# - the installed header compiles through pkg-config as strict C11 and as
#   C++17, warnings as errors; the manual pages format without warnings;
# - the C client builds against the installed library through pkg-config,
#   dynamically and with -static, and the dynamic one runs;
# - a program built against libnhbm 1.0 (tools/libnhbm/tests/abi-1.0) runs
#   against this library, and one that needs 1.1 is refused by a 1.0 one.
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
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$LIB/Cargo.toml" | head -n 1)"

# The installed files.
stage="$work/stage"
DESTDIR="$stage" PREFIX=/usr "$LIB/install.sh"
libdir="$stage/usr/lib"
so="$libdir/libnhbm.so.$version"
[ -f "$so" ] && [ -f "$libdir/libnhbm.a" ] || fail "libnhbm.so.$version or libnhbm.a missing"
[ "$(readlink "$libdir/libnhbm.so.1")" = "libnhbm.so.$version" ] || fail "libnhbm.so.1 is no link to libnhbm.so.$version"
[ "$(readlink "$libdir/libnhbm.so")" = libnhbm.so.1 ] || fail "libnhbm.so is no link to libnhbm.so.1"
[ -f "$stage/usr/include/nhbm/nhbm.h" ] && [ -f "$stage/usr/include/nhbm/neuron_hbm.h" ] || fail "headers missing"
[ ! -e "$stage/usr/include/linux" ] || fail "something was installed into include/linux"
grep -q 'Library soname: \[libnhbm.so.1\]' <<<"$(readelf -d "$so")" || fail "SONAME is not libnhbm.so.1"

# What it exports, and with which symbol versions.
others="$(nm -D --defined-only "$so" | awk '$3 !~ /^(nhbm_|NHBM_[0-9.]+$)/')"
[ -z "$others" ] || fail "libnhbm.so exports more than nhbm_*: $others"
header="$stage/usr/include/nhbm/nhbm.h"
declared="$(grep -o '^[a-z].*[ *]nhbm_[a-z_]*(' "$header" | grep -o 'nhbm_[a-z_]*' | sort)"
# objdump -T: "ADDR g DF .text SIZE VERSION NAME" for a defined function.
exported="$(objdump -T "$so" | awk '$4 == ".text" && $7 ~ /^nhbm_/ { print $7, $6 }' | sort)"
[ "$(cut -d' ' -f1 <<<"$exported")" = "$declared" ] ||
	fail "exported and declared differ: $(diff <(cut -d' ' -f1 <<<"$exported") - <<<"$declared" | grep '^[<>]' | tr '\n' ' ')"
# Each node's global names, from the version script.
mapped="$(sed 's|/\*.*||; s|^ \*.*||' "$LIB/nhbm.map" | awk '
	/^NHBM_[0-9.]+ *\{/ { node = $1; global = 1; next }
	/local:/ { global = 0 } /^\}/ { node = "" }
	node != "" && global && /^[ \t]+nhbm_[a-z_]+;/ { sub(/;/, "", $1); print $1, node }' | sort)"
[ "$exported" = "$mapped" ] || fail "symbol versions differ from nhbm.map: $(diff <(echo "$exported") - <<<"$mapped" | grep '^[<>]' | tr '\n' ' ')"
symbols="$(sed -n 's/^ \(nhbm_[a-z_]*\)@\(NHBM_[0-9.]*\) .*/\1 \2/p' "$REPO/debian/libnhbm1.symbols" | sort)"
[ "$exported" = "$symbols" ] ||
	fail "debian/libnhbm1.symbols differs: $(diff <(echo "$exported") - <<<"$symbols" | grep '^[<>]' | tr '\n' ' ')"
nodes="$(awk '{ print $2 }' <<<"$exported" | sort -u | tr '\n' ' ')"
verdef="$(readelf -V "$so")"
for node in $nodes; do
	grep -q "Name: $node\$" <<<"$verdef" || fail "readelf -V: no version definition $node"
	grep -q " ${node}@${node} " "$REPO/debian/libnhbm1.symbols" || fail "debian/libnhbm1.symbols lacks $node@$node"
done
grep -q 'Parent 1: NHBM_1.0' <<<"$verdef" || fail "readelf -V: NHBM_1.1 does not inherit NHBM_1.0"
grep -q 'Parent 1: NHBM_1.1' <<<"$verdef" || fail "readelf -V: NHBM_1.2 does not inherit NHBM_1.1"
grep -q 'Parent 1: NHBM_1.2' <<<"$verdef" || fail "readelf -V: NHBM_1.3 does not inherit NHBM_1.2"

export PKG_CONFIG_SYSROOT_DIR="$stage" PKG_CONFIG_LIBDIR="$libdir/pkgconfig"
pkg-config --validate nhbm || fail "nhbm.pc does not validate"
[ "$(pkg-config --modversion nhbm)" = "$version" ] || fail "nhbm.pc's Version is not $version"
read -ra cflags <<<"$(pkg-config --cflags nhbm)"

# The header, from where it is installed, as the compilers of its users see it.
gcc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only "${cflags[@]}" "$LIB/tests/header.c" ||
	fail "nhbm/nhbm.h does not compile as C11"
g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only "${cflags[@]}" "$LIB/tests/header.cpp" ||
	fail "nhbm/nhbm.h does not compile as C++17"

# The manual pages: one per declared call, formatted without a warning.
man3="$stage/usr/share/man/man3"
for f in $declared libnhbm NHBM_CHECK_VERSION; do
	[ -f "$man3/$f.3" ] || fail "no manual page $f.3"
	warn="$(cd "$man3/.." && groff -man -ww -z "man3/$f.3" 2>&1)"
	[ -z "$warn" ] || fail "$f.3: $warn"
done
page="$(MANWIDTH=100 man -M "$stage/usr/share/man" 3 nhbm_device_from_fd 2>/dev/null | col -b || true)"
grep -q 'symbol carries version NHBM_1.1' <<<"$page" || fail "man 3 nhbm_device_from_fd: no NHBM_1.1 in: $page"

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
deps="$(LD_LIBRARY_PATH="$libdir" ldd "$work/client")"
grep -q "libnhbm.so.1 => $libdir/libnhbm.so.1" <<<"$deps" || fail "the dynamic client does not load libnhbm.so.1"
grep -q 'NHBM_1.1' <<<"$(readelf -V "$work/client")" || fail "the client needs no NHBM_1.1"
# Without a device the client fails, but its device-less cases pass.
out="$(LD_LIBRARY_PATH="$libdir" "$work/client" /nonexistent/neuron_hbm0 || true)"
for t in "ok 1 abi_version" "ok 2 check_version" "ok 3 open_missing_is_enoent" "not ok 4 open_device"; do
	grep -qx "    $t" <<<"$out" || fail "client output lacks '$t': $out"
done

# libnhbm 1.0's programs: linked against a library that exports 1.0's
# functions unversioned, as 1.0's did (tests/abi-1.0/libnhbm.map), and
# built with 1.0's header.
abi="$LIB/tests/abi-1.0"
old="$work/1.0"
mkdir -p "$old"
gcc -shared -o "$old/libnhbm.so.1" -Wl,-soname,libnhbm.so.1 -Wl,--version-script="$abi/libnhbm.map" \
	-Wl,--whole-archive "$libdir/libnhbm.a" -Wl,--no-whole-archive -lutil -lrt -lpthread -lm -ldl
ln -s libnhbm.so.1 "$old/libnhbm.so"
[ -z "$(objdump -T "$old/libnhbm.so.1" | awk '$7 ~ /^nhbm_/ && $6 != "Base"')" ] ||
	fail "the 1.0 library's symbols are versioned"
gcc -std=c11 -Wall -Wextra -Werror -o "$work/offline-1.0" "$abi/offline.c" -I"$abi" -L"$old" -lnhbm
! grep -q NHBM_ <<<"$(readelf -V "$work/offline-1.0")" || fail "the 1.0 program needs symbol versions"
LD_LIBRARY_PATH="$old" "$work/offline-1.0" >/dev/null || fail "the 1.0 program fails against 1.0"
out="$(LD_BIND_NOW=1 LD_LIBRARY_PATH="$libdir" "$work/offline-1.0" 2>&1)" ||
	fail "the 1.0 program fails against libnhbm $version: $out"
grep -qx "abi-1.0: ok (libnhbm $version)" <<<"$out" || fail "the 1.0 program ran another library: $out"
# And the other way: a program that needs 1.1 does not start on 1.0 (which
# had no version nodes: the dynamic linker finds no nhbm_*@NHBM_1.1, 1.2 or
# 1.3).
out="$(LD_BIND_NOW=1 LD_LIBRARY_PATH="$old" "$work/client" 2>&1)" && fail "the client started against libnhbm 1.0"
grep -q "symbol lookup error: .*, version NHBM_1\.[123]" <<<"$out" || fail "the client on 1.0 failed otherwise: $out"

n="$(wc -l <<<"$declared")"
echo "libnhbm-check: install, $n nhbm_* symbols only (nodes ${nodes% }), headers (C11, C++17), man pages," \
	"pkg-config, client, 1.0 programs: ok"
