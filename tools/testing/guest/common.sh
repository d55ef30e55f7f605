# SPDX-License-Identifier: GPL-2.0-only
# Shared setup of the neuron_hbm test guest (sourced by /init).
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
# Pseudo-terminals, for the programs tested on one (nhbm top).
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
# cgroup2, where the kernel has it (memory and dmem controller tests).
[ -d /sys/fs/cgroup ] && mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /tmp

# settle_console: wait until the kernel has printed its log to the console.
# The 8250 console prints from its own thread (pr/ttyS0), after printk()
# returns: what insmod's KUnit suites logged may still be going out when the
# next command writes to the same serial line, and the two then interleave
# mid-line. Waits (at most 30 s) until that thread has been asleep at two
# polls in a row, which it is only with nothing left to print.
settle_console() {
	local p pid= quiet=0 n=0
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = pr/ttyS0 ] && pid=${p#/proc/}
	done
	[ -n "$pid" ] || return 0
	while [ "$quiet" -lt 2 ] && [ "$n" -lt 600 ]; do
		# Field 3 of stat is the state; the comm has no space in it.
		set -- $(cat "/proc/$pid/stat")
		if [ "$3" = S ]; then quiet=$((quiet + 1)); else quiet=0; fi
		n=$((n + 1))
		sleep 0.05
	done
	[ "$n" -gt 2 ] && echo "nhbm: waited $((n * 50)) ms for the kernel's console output"
	return 0
}

# hand_neuron_functions: hand every Neuron PCI function to neuron_hbm
# through its driver_override, which the driver binds only when asked (or
# with claim_all=1; Documentation/packaging.rst).
hand_neuron_functions() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor")" = 0x1d0f ] && echo neuron_hbm >"$d/driver_override"
	done
	return 0
}

# run_tests: every /tests/*-test program in turn; each prints its own KTAP.
run_tests() {
	for t in /tests/*-test; do
		[ -x "$t" ] || continue
		echo "nhbm: running ${t#/tests/}"
		"$t" || echo "nhbm: ${t#/tests/} exited with $?"
	done
}

# kmemleak_scan: two scans (an object is reported once it stayed unreferenced
# across a scan) and what they found, on a kernel with kmemleak; the host
# fails the run on any "unreferenced object" line.
kmemleak_scan() {
	[ -e /sys/kernel/debug/kmemleak ] || return 0
	echo "nhbm: kmemleak scan"
	echo scan >/sys/kernel/debug/kmemleak
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak
}

# finish: mark the end of the run for the host and power off.
finish() {
	echo "NHBM-GUEST-DONE"
	reboot -f
}
