#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make bench` third guest (QEMU 11): the emulated Neuron PCI function alone,
# the module loaded with its DMA engine on (the default), for the DMA
# figures. A guest of its own: the engine moves a descriptor pair per
# physically contiguous run of the user buffer's pages, so what the figures
# measure depends on how the guest's memory was laid out by what ran before
# in it; a freshly booted guest lays a new buffer out the same way in every
# run (see Documentation/benchmarks.rst).
. /common.sh

hand_neuron_functions
insmod /neuron_hbm.ko
settle_console
rc=1
if [ "$(cat /sys/class/misc/neuron_hbm0/simulated 2>/dev/null)" = 0 ]; then
	/tests/nhbm-bench --pci-dma /dev/neuron_hbm0
	rc=$?
else
	for f in pci_model_staging pci_dma_write_vs_bar_copy pci_dma_read_vs_bar_copy pci_dma_cpu_per_byte; do
		echo "bench: $f: error (no PCI function) FAIL"
	done
fi
echo "NHBM-BENCH-EXIT $rc"
rmmod neuron_hbm
finish
