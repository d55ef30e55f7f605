#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# make check-distro: build neuron_hbm for Debian 13's own 7.3 backports kernel
# as a Debian 13 host would, with DKMS too, and run the guest test suites on
# that kernel's unmodified vmlinuz in QEMU.
#
# 1. A Debian 13 build root (tools/debian13-root.sh) with the packages a
#    Debian 13 user installs (the kernel image as linux-binary-RELEASE, which
#    is linux-image-RELEASE without the boot loader and initramfs hooks).
# 2. In it, tools/prepare-kernel.sh prepares the Rust metadata the headers
#    lack (cached under the root's /var/cache/neuron_hbm/kbuild).
# 3. In it, `make KDIR=...` builds the module (warnings are errors), and
#    `dkms build` and `dkms install` build and install it for that kernel.
# 4. The crate hashes the module refers to must be the ones in Debian's
#    Module.symvers, and both builds must carry the kernel's vermagic.
# 5. QEMU boots Debian's vmlinuz with the DKMS-installed module and the
#    userspace tests (tools/testing/run-qemu.sh distro); the module must load
#    and taint the kernel only as out-of-tree and unsigned.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
REL=7.3.4+deb13-amd64
SERIES=7.3
OUT="$REPO/build/distro"
# Inside the root.
SRC=/usr/local/src/neuron_hbm
PACKAGES=(linux-headers-$REL linux-source-$SERIES linux-binary-$REL rustc rust-src bindgen
	gcc-14 libclang-dev dkms make bc bison flex libelf-dev libssl-dev dwarves python3 cpio kmod
	xz-utils)

say() { echo "check-distro: $*" >&2; }
die() { say "$*"; exit 1; }
# step NAME CMD...: CMD, timed; a failure ends the check, also where a
# command substitution (which does not inherit set -e) runs the step.
step() {
	local name="$1" t0=$SECONDS; shift
	say "$name ..."
	"$@" || die "$name failed"
	say "$name done in $((SECONDS - t0))s"
}
in_root() { NHBM_CACHE="$CACHE" "$REPO/tools/debian13-root.sh" --run "$@"; }

T0=$SECONDS
mkdir -p "$OUT" "$CACHE"
# The root's copy of the sources and its DKMS state are shared by every
# checkout: one run at a time.
exec 7>"$CACHE/.check-distro.lock"
flock -n 7 || { say "another check-distro run uses the root, waiting"; flock 7; }
ROOT=$(step "Debian 13 build root" env NHBM_CACHE="$CACHE" "$REPO/tools/debian13-root.sh" \
	"${PACKAGES[@]}")

# The module's sources as the checkout has them (tracked or new, not ignored).
copy_sources() {
	rm -rf "$ROOT$SRC"
	mkdir -p "$ROOT$SRC"
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard -- Kbuild Makefile \
		dkms.conf rust include tools/prepare-kernel.sh tools/dkms-install.sh tools/udev |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		xargs -0 cp --parents -t "$ROOT$SRC")
}
step "copying the module sources into the root" copy_sources

KDIR=$(step "Rust metadata of $REL" in_root "$SRC/tools/prepare-kernel.sh" "$REL")
say "KDIR $KDIR (in the root)"

kdir_build() {
	in_root make -C "$SRC" KDIR="$KDIR" module >"$OUT/build.log" 2>&1 ||
		{ cat "$OUT/build.log" >&2; die "the module does not build against $REL"; }
	cp "$ROOT$SRC/neuron_hbm.ko" "$OUT/neuron_hbm-kdir.ko"
}
step "make KDIR=... module (gcc-14, rustc 1.85.1, -Dwarnings)" kdir_build

dkms_build() {
	in_root env KVER="$REL" "$SRC/tools/dkms-install.sh" >"$OUT/dkms.log" 2>&1 ||
		{ cat "$OUT/dkms.log" >&2; die "dkms build/install failed"; }
	# The module index, as linux-image-RELEASE's hooks keep it (DKMS leaves
	# it alone for a kernel whose own modules, linux-modules-RELEASE, are
	# not installed, as in the root).
	in_root depmod "$REL"
	local ko
	ko=$(in_root modinfo -k "$REL" -n neuron_hbm) || die "modinfo finds no neuron_hbm for $REL"
	say "DKMS installed $ko"
	case "$ko" in
	*/updates/dkms/*) ;;
	*) die "modinfo resolves neuron_hbm to $ko, not the DKMS copy" ;;
	esac
	case "$ko" in
	*.xz) xz -dc "$ROOT$ko" >"$OUT/neuron_hbm-dkms.ko" ;;
	*.zst) zstd -qdc "$ROOT$ko" >"$OUT/neuron_hbm-dkms.ko" ;;
	*) cp "$ROOT$ko" "$OUT/neuron_hbm-dkms.ko" ;;
	esac
}
step "dkms build + dkms install for $REL" dkms_build

# Both modules name this kernel, and every crate they link against carries the
# hash Debian's kernel was built with.
check_module() {
	local ko="$1" vm
	vm=$(modinfo -F vermagic "$ko")
	case "$vm" in
	"$REL "*) ;;
	*) die "$ko has vermagic '$vm', not $REL" ;;
	esac
	python3 - "$ko" "$ROOT$KDIR/Module.symvers" <<'EOF'
import re, subprocess, sys
ko, symvers = sys.argv[1:]
crate = re.compile(r"Cs([0-9A-Za-z]+)_(\d+)")

def crates(names):
    found = {}
    for name in names:
        for m in crate.finditer(name):
            n = int(m.group(2))
            ident = name[m.end():m.end() + n]
            found.setdefault(ident, set()).add(m.group(1))
    return found

undef = subprocess.run(["nm", "-u", ko], capture_output=True, text=True, check=True).stdout
used = crates(l.split()[-1] for l in undef.splitlines() if l.strip())
with open(symvers) as f:
    known = crates(l.split("\t")[1] for l in f if "\t" in l)
bad = [f"{c}: {sorted(h - known.get(c, set()))}" for c, h in used.items() if h - known.get(c, set())]
if not used or bad:
    sys.exit(f"check-distro: {ko}: crate hashes not in Debian's Module.symvers: {bad or 'none used'}")
print(f"check-distro: {ko.rsplit('/', 1)[-1]}: crate hashes as in Debian's Module.symvers: "
      + ", ".join(f"{c} Cs{' Cs'.join(sorted(h))}" for c, h in sorted(used.items())), file=sys.stderr)
EOF
}
check_module "$OUT/neuron_hbm-kdir.ko"
check_module "$OUT/neuron_hbm-dkms.ko"

VMLINUZ="$ROOT/usr/lib/modules/$REL/vmlinuz"
[ -f "$VMLINUZ" ] || die "no $VMLINUZ (package linux-binary-$REL)"
say "booting Debian's unmodified $REL vmlinuz with the DKMS-built module"
NHBM_CACHE="$CACHE" KDIR="$ROOT$KDIR" NHBM_KERNEL_IMAGE="$VMLINUZ" \
	NHBM_KO="$OUT/neuron_hbm-dkms.ko" NHBM_QEMU_MEM="${NHBM_QEMU_MEM:-1024}" \
	"$HERE/run-qemu.sh" distro || {
	# The kernel's own words when the module did not load.
	grep -a -A6 "insmod failed" "$REPO/build/qemu-distro.log" >&2 || true
	die "failed (serial log: build/qemu-distro.log)"
}
grep -a -m1 "^nhbm: kernel" "$REPO/build/qemu-distro.log" | tr -d '\r' >&2
say "passed in $((SECONDS - T0))s"
