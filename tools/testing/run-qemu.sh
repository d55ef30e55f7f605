#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Boot the test kernel in QEMU (TCG) with neuron_hbm.ko and the userspace
# programs in a busybox initramfs, then summarise the KTAP it printed.
#
#   run-qemu.sh check|check-pci|demo|bench|bench-pci|bench-dma|distro|distro-host
#
# The *-pci modes and bench-dma boot QEMU 11 from the Debian 13 root
# (tools/debian13-root.sh) with emulated Neuron PCI functions
# (tools/nhbm-devmodel, vfio-user): a V2, a V3 and a V4 one for check-pci
# (instead of simulated devices), their firmware booting for a second so that
# the probe must wait for it; one V2 function beside a simulated device for
# bench-pci, one alone for bench-dma. NHBM_DEVMODEL names the device model
# binary.
# Mode distro is the check guest on another kernel: NHBM_KERNEL_IMAGE names its
# image and NHBM_KO the module built for it; NHBM_GUEST_EXTRA names a
# directory whose contents join the guest's root (the kernel's module tree,
# modprobe), and NHBM_QEMU_ARGS adds QEMU arguments (firmware);
# NHBM_QEMU_MACHINE names the *-pci modes' machine type (pc; q35 for an
# emulated IOMMU).
# Mode distro-host boots that kernel as a Neuron host with two emulated V2
# functions (guest/init-distro-host.sh; NHBM_GUEST_EXTRA brings udev, the
# rules and the neuron stand-in).
# The serial log is kept in build/qemu-<mode>.log.
set -euo pipefail

MODE="${1:-check}"
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="$REPO/build"
KDIR="${KDIR:?KDIR must point at the kernel build}"
TIMEOUT="${NHBM_QEMU_TIMEOUT:-900}"
MEM="${NHBM_QEMU_MEM:-512}"
ROOT="$BUILD/initramfs-$MODE"
LOG="$BUILD/qemu-$MODE.log"
GUEST="$MODE"
[ "$MODE" = distro ] && GUEST=check
KO="${NHBM_KO:-$REPO/neuron_hbm.ko}"
KERNEL_IMAGE="${NHBM_KERNEL_IMAGE:-$KDIR/arch/x86/boot/bzImage}"
# NHBM_HOST_LOG: a host-tests.sh log whose tests join the closing count.
HOST_ARGS="${NHBM_HOST_LOG:+--host $NHBM_HOST_LOG}"

# One run per mode and checkout: a second one would share its initramfs
# directory and log. It waits for the first.
mkdir -p "$BUILD"
exec 8>"$BUILD/qemu-$MODE.lock"
flock -n 8 || { echo "qemu: another $MODE run uses this checkout, waiting" >&2; flock 8; }

rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,dev,proc,sys,tmp,tests}
cp /bin/busybox "$ROOT/bin/busybox"
for app in sh mount insmod rmmod cat echo ls reboot sleep grep mkdir chmod chown \
	stat dmesg head tail wc date seq printf test true false cmp dd rm readlink mv \
	dirname sed; do
	ln -sf busybox "$ROOT/bin/$app"
done
cp "$KO" "$ROOT/neuron_hbm.ko"
if [ -d "$BUILD/userspace" ]; then
	cp "$BUILD"/userspace/* "$ROOT/tests/" 2>/dev/null || true
fi
if [ -n "${NHBM_GUEST_EXTRA:-}" ]; then
	cp -a "$NHBM_GUEST_EXTRA"/. "$ROOT/"
fi
cp "$HERE/guest/init-$GUEST.sh" "$ROOT/init"
cp "$HERE/guest/common.sh" "$ROOT/common.sh"
cp "$HERE"/guest/*-test "$ROOT/tests/"
chmod +x "$ROOT/init"
(cd "$ROOT" && find . | cpio -o -H newc --quiet | gzip -1) >"$BUILD/initramfs-$MODE.cpio.gz"

# QEMU's TCG emulates `rep movsb` one byte per iteration, yet `-cpu max`
# advertises ERMS/FSRM (fast byte-wise string copies). Without those two flags
# the guest kernel copies to and from user memory with `rep movsq`, eight bytes
# per iteration, as it does on any CPU whose `rep movsb` is slow.
QEMU_CPU="${NHBM_QEMU_CPU:-max,-erms,-fsrm}"
echo "qemu: booting ($MODE) in QEMU (TCG), serial log in ${LOG#$REPO/}" >&2
t0=$SECONDS
set +e
case "$MODE" in
*-pci | bench-dma | distro-host)
	functions=v2/1000,v3/1000,v4/1000
	[ "$MODE" = bench-pci ] || [ "$MODE" = bench-dma ] && functions=v2
	[ "$MODE" = distro-host ] && functions=v2/1000,v2
	D13="$("$REPO/tools/debian13-root.sh" qemu-system-x86/trixie-backports | tail -n 1)" || exit 1
	python3 "$HERE/qemu-pci.py" --root "$D13" --devmodel "${NHBM_DEVMODEL:?}" \
		--kernel "$KERNEL_IMAGE" --initrd "$BUILD/initramfs-$MODE.cpio.gz" \
		--log "$LOG" --mem "$MEM" --timeout "$TIMEOUT" --cpu "$QEMU_CPU" \
		--functions "$functions" --append "${NHBM_QEMU_APPEND:-}" --qemu-args "${NHBM_QEMU_ARGS:-}" \
		--machine "${NHBM_QEMU_MACHINE:-pc}"
	;;
*)
	timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 -m "$MEM" -smp 2 \
		-nographic -no-reboot -cpu "$QEMU_CPU" \
		-kernel "$KERNEL_IMAGE" -initrd "$BUILD/initramfs-$MODE.cpio.gz" \
		-append "console=ttyS0 panic=-1 oops=panic loglevel=7 ${NHBM_QEMU_APPEND:-}" \
		${NHBM_QEMU_ARGS:-} </dev/null >"$LOG" 2>&1
	;;
esac
rc=$?
set -e
echo "qemu: finished in $((SECONDS - t0))s (exit $rc)" >&2
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	echo "qemu: the guest did not finish within ${TIMEOUT}s" >&2
	python3 "$HERE/ktap_summary.py" --timeout $HOST_ARGS "$LOG" || true
	exit 1
fi
case "$MODE" in
check | check-pci | distro | distro-host) exec python3 "$HERE/ktap_summary.py" $HOST_ARGS "$LOG" ;;
bench | bench-pci | bench-dma)
	# One line per figure (the module's and nhbm-bench's), each ending in its
	# verdict; the whole log stays in $LOG. The run fails when a figure says
	# FAIL, nhbm-bench exits non-zero, the guest does not finish or the
	# kernel reports an Oops, BUG or WARNING.
	FIGURES="$BUILD/$MODE-figures.txt"
	sed -n 's/^\(neuron_hbm: \)\{0,1\}\(bench: .*\)$/\2/p' "$LOG" | tr -d '\r' >"$FIGURES"
	cat "$FIGURES"
	total=$(grep -cE ' (PASS|FAIL)$' "$FIGURES" || true)
	failed=$(grep -c ' FAIL$' "$FIGURES" || true)
	status=$(sed -n 's/^NHBM-BENCH-EXIT \([0-9]*\).*/\1/p' "$LOG" | tail -1)
	echo "$MODE: $total figures, $failed failed (nhbm-bench exit ${status:-missing})"
	rc=0
	grep -q NHBM-GUEST-DONE "$LOG" || { echo "$MODE: the guest did not finish" >&2; rc=1; }
	if grep -qE "Oops|BUG:|WARNING:|Kernel panic" "$LOG"; then
		echo "$MODE: kernel report in $LOG" >&2
		rc=1
	fi
	if [ "$failed" != 0 ] || [ "$total" = 0 ] || [ "${status:-1}" != 0 ]; then
		rc=1
	fi
	exit $rc
	;;
*)
	# The demo itself; the boot log and the KUnit output stay in $LOG.
	sed -n '/NHBM-DEMO-BEGIN/,/NHBM-DEMO-END/{/NHBM-DEMO-/d;p}' "$LOG" | tr -d '\r'
	echo "== the module's KUnit suites, run at insmod (full output in ${LOG#$REPO/}):"
	exec python3 "$HERE/ktap_summary.py" --brief "$LOG"
	;;
esac
