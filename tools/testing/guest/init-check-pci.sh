#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `make check-pci` guest: no simulated device. The module binds the two
# emulated Neuron PCI functions (tools/nhbm-devmodel behind QEMU's vfio-user
# client) through its PCI driver; the KUnit suites run at insmod, then the
# PCI suite and every userspace test program run against the PCI-backed
# nodes. The removal test (last) asks the host to device_del function 1.
. /common.sh
export NHBM_BACKEND=pci

echo "nhbm: PCI functions 1d0f:7164:"
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor)" = 0x1d0f ] && echo "nhbm:   ${d##*/} $(cat $d/device)"
done
echo "nhbm: insmod neuron_hbm.ko (no simulated devices)"
insmod /neuron_hbm.ko || echo "not ok 1 nhbm_insmod"
run_tests
rmmod neuron_hbm || echo "not ok 1 nhbm_rmmod"
finish
