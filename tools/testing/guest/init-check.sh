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
echo "nhbm: insmod neuron_hbm.ko sim_devices=2"
if insmod /neuron_hbm.ko sim_devices=2 sim_arch=2; then
	# The module may taint the kernel only as out-of-tree (O) and, on a
	# kernel that signs its modules, unsigned (E).
	taint=$(cat /sys/module/neuron_hbm/taint)
	echo "nhbm: neuron_hbm taints the kernel with '$taint'"
	case "$taint" in
	*[!OE]*) echo "not ok 1 nhbm_module_taint # '$taint' is more than O and E" ;;
	*) echo "ok 1 nhbm_module_taint" ;;
	esac
else
	echo "nhbm: insmod failed; the kernel said:"
	dmesg | tail -n 5
	echo "not ok 1 nhbm_insmod"
fi
run_tests
rmmod neuron_hbm || echo "not ok 1 nhbm_rmmod"
if [ "$debug" = 1 ] && [ -e /sys/kernel/debug/kmemleak ]; then
	echo "nhbm: kmemleak scan"
	echo scan >/sys/kernel/debug/kmemleak
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak
fi
finish
