#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `make check` guest: load the module (its KUnit suites run at insmod), run every
# userspace test program, unload the module, power off.
. /common.sh

echo "nhbm: insmod neuron_hbm.ko sim_devices=2"
insmod /neuron_hbm.ko sim_devices=2 sim_arch=v2 || echo "not ok 1 insmod_failed"
for t in /tests/*-test; do
	[ -x "$t" ] || continue
	echo "nhbm: running ${t#/tests/}"
	"$t" || echo "nhbm: ${t#/tests/} exited with $?"
done
rmmod neuron_hbm || echo "not ok 1 rmmod_failed"
finish
