#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make deb: the Debian packages of neuron_hbm, built with Debian 13's own
# tooling (debhelper, dh-dkms, lintian) in the Debian 13 root
# (tools/debian13-root.sh), into build/deb/:
#
#   neuron-hbm-dkms    the module's source under DKMS, the udev rule, the group
#   neuron-hbm-tools   nhbm, with its man page and shell completions
#   libnhbm1           libnhbm.so.1
#   libnhbm-dev        nhbm.h, the UAPI header, libnhbm.a, nhbm.pc
#
# The userspace programs need rustc 1.91, newer than Debian 13's, so they are
# built here first with the project's toolchain and staged, installed as
# they will be, under prebuilt/ of the package's source tree; debian/rules
# packages them from there. The version is the userspace workspace's
# (tools/Cargo.toml), the one place it is kept: debian/changelog is written
# from it. Lintian must report no error; its tags are kept in
# build/deb/lintian.txt. Documentation/packaging.rst.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
OUT="$REPO/build/deb"
# Inside the root.
WORK=/usr/local/src/neuron-hbm-deb
ROOT_PACKAGES=(build-essential debhelper dh-dkms lintian dpkg-dev)

say() { echo "build-deb: $*" >&2; }
die() { say "$*"; exit 1; }

VERSION=$("$REPO/tools/version.sh")
MULTIARCH=x86_64-linux-gnu

ROOT=$(NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" "${ROOT_PACKAGES[@]}")
# One package build in the root at a time.
exec 7>"$CACHE/.build-deb.lock"
flock 7
SRC="$ROOT$WORK/neuron-hbm-$VERSION"
rm -rf "$ROOT$WORK"
mkdir -p "$SRC"

# The tree as the checkout has it (tracked or new, not ignored).
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard -- Kbuild Makefile \
	dkms.conf rust include debian tools/prepare-kernel.sh tools/udev LICENSES README.md |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	xargs -0 cp --parents -t "$SRC")

# debian/changelog, from the one version. Its date is the commit's, so that
# the same tree gives the same packages.
date=$(git -C "$REPO" log -1 --format=%cD 2>/dev/null || date -R)
cat >"$SRC/debian/changelog" <<EOF
neuron-hbm ($VERSION) unstable; urgency=medium

  * Packages of neuron_hbm $VERSION, built from its tree by make deb.

 -- $(sed -n 's/^Maintainer: //p' "$REPO/debian/control")  $date
EOF

# The userspace programs, staged as installed.
say "building nhbm and libnhbm (release) with the project's toolchain"
stage="$SRC/prebuilt"
# shellcheck source=testing/cargo-env.sh
. "$HERE/testing/cargo-env.sh"
cargo_lock
(cd "$CARGO_TOOLS" && cargo build --quiet --release --locked -p nhbm-cli --bin nhbm \
	--target-dir "$CARGO_TARGET")
install -D -m 0755 "$CARGO_TARGET/release/nhbm" "$stage/usr/bin/nhbm"
cargo_unlock
DESTDIR="$stage" PREFIX=/usr LIBDIR="/usr/lib/$MULTIARCH" "$REPO/tools/libnhbm/install.sh"
nhbm="$stage/usr/bin/nhbm"
install -d "$stage/usr/share/man/man1" "$stage/usr/share/bash-completion/completions" \
	"$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
"$nhbm" manpage >"$stage/usr/share/man/man1/nhbm.1"
"$nhbm" completions bash >"$stage/usr/share/bash-completion/completions/nhbm"
"$nhbm" completions zsh >"$stage/usr/share/zsh/vendor-completions/_nhbm"
"$nhbm" completions fish >"$stage/usr/share/fish/vendor_completions.d/nhbm.fish"

in_root() { NHBM_CACHE="$CACHE" "$HERE/debian13-root.sh" --run "$@"; }
say "dpkg-buildpackage in the Debian 13 root"
mkdir -p "$OUT"
log="$OUT/dpkg-buildpackage.log"
in_root sh -c "cd $WORK/neuron-hbm-$VERSION && dpkg-buildpackage -b -uc -us" >"$log" 2>&1 ||
	{ tail -40 "$log" >&2; die "dpkg-buildpackage failed (log: ${log#"$REPO"/})"; }

# Lintian fails on an error; every tag it reports is kept.
changes="neuron-hbm_${VERSION}_amd64.changes"
set +e
in_root lintian --info --display-info --fail-on error "$WORK/$changes" >"$OUT/lintian.txt" 2>&1
lrc=$?
set -e
grep -E '^[EWIPX]: ' "$OUT/lintian.txt" >&2 || true
[ "$lrc" = 0 ] || die "lintian reports errors (build/deb/lintian.txt)"

rm -f "$OUT"/*.deb
cp "$ROOT$WORK"/*.deb "$ROOT$WORK/$changes" "$OUT/"
say "$(cd "$OUT" && ls ./*.deb | tr '\n' ' ')in build/deb/ (lintian: $(grep -c '^[EWI]:' "$OUT/lintian.txt" || true) tags, none an error)"
