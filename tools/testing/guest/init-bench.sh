#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `make bench` guest: in-kernel benchmarks at load, then the userspace ones.
. /common.sh

insmod /neuron_hbm.ko sim_devices=1 sim_arch=v2 bench=1
if [ -x /tests/nhbm-bench ]; then
	/tests/nhbm-bench /dev/neuron_hbm0
fi
rmmod neuron_hbm
finish
