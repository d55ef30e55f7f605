#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make demo` guest: load the module on a simulated device and show what it does.
# The host prints what lies between the two demo markers; the kernel's own
# messages (the module's KUnit suites run at insmod) are kept off the console
# meanwhile and dumped after the second marker, so the log holds them too.
. /common.sh

dmesg -n 1
echo "NHBM-DEMO-BEGIN"
echo "== insmod neuron_hbm.ko sim_devices=1 sim_arch=2"
insmod /neuron_hbm.ko sim_devices=1 sim_arch=2
ls -l /dev/neuron_hbm* 2>/dev/null
d=/sys/class/misc/neuron_hbm0
echo "sysfs: arch $(cat $d/arch), simulated $(cat $d/simulated), channels $(cat $d/channels), regions $(cat $d/regions)"
if [ -x /tests/nhbm ]; then
	/tests/nhbm demo /dev/neuron_hbm0
fi
echo "== debugfs: /sys/kernel/debug/neuron_hbm0/pools (ch region start end total used peak live small_start small_end small_free)"
cat /sys/kernel/debug/neuron_hbm0/pools
rmmod neuron_hbm
echo "NHBM-DEMO-END"
dmesg -n 7
dmesg
finish
