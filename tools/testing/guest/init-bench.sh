#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make bench` guest: in-kernel benchmarks at load, then the userspace ones
# (the planner figures run on the host).
. /common.sh

# The host judges the run by the `bench:` lines (a figure ending in FAIL) and
# by nhbm-bench's exit status, printed as NHBM-BENCH-EXIT.
# This is the module built with its benchmarks (NHBM_BENCH=1): they run at load.
insmod /neuron_hbm.ko sim_devices=1 sim_arch=2
settle_console
if [ -x /tests/nhbm-bench ]; then
	/tests/nhbm-bench /dev/neuron_hbm0 --no-planner
	echo "NHBM-BENCH-EXIT $?"
else
	echo "bench: nhbm-bench: error (not in the guest's /tests) FAIL"
fi
rmmod neuron_hbm
finish
