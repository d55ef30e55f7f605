#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Register neuron_hbm with DKMS from a checkout, for the running kernel (or
# KVER=...), after checking up front that the kernel can build a Rust module
# at all. On Debian the package does this (make deb, Documentation/packaging.rst).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
KVER="${KVER:-$(uname -r)}"
# Where dkms.conf builds: the Rust metadata tools/prepare-kernel.sh prepares
# (dkms.conf's PRE_BUILD) for a distribution kernel, else the kernel's own
# build directory. The checks below look at either.
KBUILD="/var/cache/neuron_hbm/kbuild/$KVER"
[ -f "$KBUILD/rust/libkernel.rmeta" ] || KBUILD="/lib/modules/$KVER/build"
# The project's version is kept in one place, the userspace workspace.
VERSION=$("$REPO/tools/version.sh")
SRC="/usr/src/neuron_hbm-$VERSION"

die() { echo "dkms-install: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
command -v dkms >/dev/null || die "dkms is not installed (apt-get install dkms)"
[ -d "$KBUILD" ] || die "no kernel headers for $KVER at $KBUILD (Debian: apt-get install linux-headers-$KVER)"
conf="$KBUILD/include/config/auto.conf"
[ -f "$conf" ] || die "$KBUILD has no include/config/auto.conf: not a configured kernel tree"
grep -q '^CONFIG_RUST=y' "$conf" || die "kernel $KVER is built without CONFIG_RUST=y: it cannot load Rust modules"
grep -q '^CONFIG_GENERIC_ALLOCATOR=y' "$conf" || die "kernel $KVER lacks CONFIG_GENERIC_ALLOCATOR (genalloc)"

rm -rf "$SRC"
mkdir -p "$SRC"
cp -r "$REPO/Kbuild" "$REPO/Makefile" "$REPO/rust" "$REPO/include" "$SRC/"
sed "s/#MODULE_VERSION#/$VERSION/" "$REPO/dkms.conf" >"$SRC/dkms.conf"
install -D -m 0755 "$REPO/tools/prepare-kernel.sh" "$SRC/tools/prepare-kernel.sh"
find "$SRC" \( -name '*.o' -o -name '*.ko' -o -name '.*.cmd' -o -name '*.mod*' \) -delete
# A previous registration of this version is replaced by these sources.
dkms remove -m neuron_hbm -v "$VERSION" --all >/dev/null 2>&1 || true
dkms add -m neuron_hbm -v "$VERSION"
dkms build -m neuron_hbm -v "$VERSION" -k "$KVER"
dkms install -m neuron_hbm -v "$VERSION" -k "$KVER"
if [ -d /etc/udev/rules.d ]; then
	install -m 0644 "$REPO/tools/udev/60-neuron-hbm.rules" /etc/udev/rules.d/
	# The command the rule runs, and administrators with it.
	install -m 0755 "$REPO/tools/udev/neuron-hbm-bind" /usr/sbin/
	install -D -m 0644 "$REPO/tools/udev/neuron-hbm-bind.8" /usr/share/man/man8/neuron-hbm-bind.8
	getent group neuron >/dev/null || groupadd --system neuron
	udevadm control --reload 2>/dev/null || true
fi
echo "dkms-install: neuron_hbm $VERSION installed for $KVER"
