#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make bench` second guest (QEMU 11): one simulated device and one emulated
# Neuron PCI function side by side; MEM_WRITE into each, and the function's
# transfers and scrub against a copy into its own BAR4, mapped through sysfs
# (nhbm-bench finds the function's resource4_wc). Those figures price the
# module's CPU path through BAR4 against the same loops run from user space,
# so the module moves bytes with the CPU (dma=0); the DMA figures have a
# guest of their own (init-bench-dma.sh).
. /common.sh

hand_neuron_functions
insmod /neuron_hbm.ko sim_devices=1 sim_arch=2 dma=0
settle_console
sim= pci=
for n in 0 1; do
	case "$(cat /sys/class/misc/neuron_hbm$n/simulated 2>/dev/null)" in
	1) sim=/dev/neuron_hbm$n ;;
	0) pci=/dev/neuron_hbm$n ;;
	esac
done
rc=1
if [ -n "$sim" ] && [ -n "$pci" ]; then
	/tests/nhbm-bench "$sim" --pci-write "$pci"
	rc=$?
else
	for f in pci_mem_write pci_write_vs_bar_copy pci_read_vs_bar_copy pci_scrub_vs_memset; do
		echo "bench: $f: error (no simulated device ($sim) or PCI function ($pci)) FAIL"
	done
fi
echo "NHBM-BENCH-EXIT $rc"
rmmod neuron_hbm
finish
