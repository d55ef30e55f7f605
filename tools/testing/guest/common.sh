# SPDX-License-Identifier: GPL-2.0-only
# Shared setup of the neuron_hbm test guest (sourced by /init).
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
# cgroup2, where the kernel has it (memory and dmem controller tests).
[ -d /sys/fs/cgroup ] && mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /tmp

# run_tests: every /tests/*-test program in turn; each prints its own KTAP.
run_tests() {
	for t in /tests/*-test; do
		[ -x "$t" ] || continue
		echo "nhbm: running ${t#/tests/}"
		"$t" || echo "nhbm: ${t#/tests/} exited with $?"
	done
}

# finish: mark the end of the run for the host and power off.
finish() {
	echo "NHBM-GUEST-DONE"
	reboot -f
}
