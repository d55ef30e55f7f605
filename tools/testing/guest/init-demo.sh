#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `make demo` guest: load the module on a simulated device and show what it does.
. /common.sh

echo "== insmod neuron_hbm.ko sim_devices=1 sim_arch=v2"
insmod /neuron_hbm.ko sim_devices=1 sim_arch=v2
ls -l /dev/neuron_hbm* 2>/dev/null
d=/sys/class/misc/neuron_hbm0
echo "sysfs: arch $(cat $d/arch), simulated $(cat $d/simulated), channels $(cat $d/channels), regions $(cat $d/regions)"
if [ -x /tests/nhbm ]; then
	/tests/nhbm demo /dev/neuron_hbm0
fi
echo "== debugfs: /sys/kernel/debug/neuron_hbm0/pools (ch region start end total used peak live)"
cat /sys/kernel/debug/neuron_hbm0/pools
rmmod neuron_hbm
finish
