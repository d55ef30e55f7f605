#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make check-pci` guest: no simulated device. The module binds the three
# emulated Neuron PCI functions, V2, V3 and V4 (tools/nhbm-devmodel behind
# QEMU's vfio-user client), through its PCI driver; the KUnit suites run at
# insmod, then the PCI suite and libnhbm's client on the V3 and V4
# functions, then every userspace test program (the PCI suite and the
# client among them) on the V2 one, then the transfer cases again on V2
# with the module moving bytes with the CPU (dma=0). The removal test (last) asks the host
# to device_del function 1. With nhbm_debug=1 on the kernel command line
# (make check-debug) a kmemleak scan closes the run: pinned user pages and
# the queues' DMA memory come back.
. /common.sh
export NHBM_BACKEND=pci

echo "nhbm: Neuron PCI functions:"
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor)" = 0x1d0f ] && echo "nhbm:   ${d##*/} $(cat $d/device)"
done
echo "nhbm: insmod neuron_hbm.ko (no simulated devices)"
hand_neuron_functions
insmod /neuron_hbm.ko fault_injection=1 || echo "not ok 1 nhbm_insmod"
settle_console
for n in 1 2; do
	echo "nhbm: running nhbm-pci-test -d $n"
	/tests/nhbm-pci-test -d "$n" || echo "nhbm: nhbm-pci-test -d $n exited with $?"
	echo "nhbm: running nhbm-libnhbm-test on /dev/neuron_hbm$n"
	/tests/nhbm-libnhbm-test "/dev/neuron_hbm$n" "nhbm_libnhbm_v$((n + 2))" ||
		echo "nhbm: nhbm-libnhbm-test on /dev/neuron_hbm$n exited with $?"
done
run_tests
rmmod neuron_hbm || echo "not ok 1 nhbm_rmmod"
# The CPU path (dma=0: 64-bit copies through BAR4, no engine), on V2: the
# cases that move bytes whichever path runs them.
echo "nhbm: insmod neuron_hbm.ko dma=0"
insmod /neuron_hbm.ko dma=0 || echo "not ok 1 nhbm_insmod_dma0"
settle_console
NHBM_DMA=0 /tests/nhbm-pci-test -d 0 transfers_of_any_length mem_write_lands \
	mapped_variable two_tenants buffers_outside_user_memory transfers_wait_out \
	memory_that_cannot_be_pinned cpu_writes_pin_nothing ||
	echo "nhbm: nhbm-pci-test (dma=0) exited with $?"
rmmod neuron_hbm || echo "not ok 1 nhbm_rmmod_dma0"
grep -q "nhbm_debug=1" /proc/cmdline && kmemleak_scan
finish
