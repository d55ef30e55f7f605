#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make check` guest: load the module (its KUnit suites run at insmod), run every
# userspace test program, unload the module, power off. With nhbm_debug=1 on
# the kernel command line (make check-debug) the fuzzer runs long and a
# kmemleak scan closes the run.
. /common.sh

debug=0
grep -q "nhbm_debug=1" /proc/cmdline && debug=1
[ "$debug" = 1 ] && export NHBM_FUZZ_CASES=100000

echo "nhbm: kernel $(cat /proc/sys/kernel/osrelease): $(cat /proc/version)"
# A guest given the kernel's module tree (make check-distro: the DKMS install
# of a Debian package) loads the module with modprobe from where DKMS put it;
# the others insmod the module built for the test kernel.
load_module() {
	if [ -d "/lib/modules/$(uname -r)/updates/dkms" ]; then
		echo "nhbm: modprobe neuron_hbm sim_devices=2 ($(/sbin/modprobe -n -v neuron_hbm 2>&1))"
		/sbin/modprobe neuron_hbm sim_devices=2 sim_arch=2
	else
		echo "nhbm: insmod neuron_hbm.ko sim_devices=2"
		insmod /neuron_hbm.ko sim_devices=2 sim_arch=2
	fi
}
# The module may taint the kernel only as out-of-tree (O) and, on a kernel
# that signs its modules, unsigned (E); signed with a key the kernel trusts
# (nhbm_signed=1 on the command line), only as out-of-tree.
allowed=OE
grep -q "nhbm_signed=1" /proc/cmdline && allowed=O
if load_module; then
	settle_console
	taint=$(cat /sys/module/neuron_hbm/taint)
	echo "nhbm: neuron_hbm taints the kernel with '$taint'"
	case "$taint" in
	*[!$allowed]*) echo "not ok 1 nhbm_module_taint # '$taint' is more than $allowed" ;;
	*) echo "ok 1 nhbm_module_taint" ;;
	esac
else
	echo "nhbm: loading the module failed; the kernel said:"
	dmesg | tail -n 5
	echo "not ok 1 nhbm_insmod"
fi
run_tests
rmmod neuron_hbm || echo "not ok 1 nhbm_rmmod"
[ "$debug" = 1 ] && kmemleak_scan
finish
