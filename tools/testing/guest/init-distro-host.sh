#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# `make check-distro` host guest: Debian's kernel booted the way a Neuron
# host boots, with two emulated Neuron functions, a stand-in for AWS's
# neuron driver, AWS's documented udev rule and modules-load.d entry, and
# neuron_hbm's packages installed beside them. As systemd would: the
# modules modules-load.d names, and udevd with the coldplug of every device
# (which loads modules by alias and runs the rules). Boot 1 hands the first
# function to neuron_hbm with neuron-hbm-bind and runs the PCI suite and
# libnhbm's client on it; boot 2 (nhbm_boot=2, with the /etc/neuron-hbm of
# boot 1) finds the choice kept, then gives the function back.
# Documentation/packaging.rst, "On a host with AWS's Neuron driver".
. /common.sh
export NHBM_BACKEND=pci
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
boot=1
grep -q "nhbm_boot=2" /proc/cmdline && boot=2
n=0

# result NAME STATUS [DIAGNOSTIC]: one KTAP line.
result() {
	n=$((n + 1))
	if [ "$2" = 0 ]; then echo "ok $n nhbm_host_$1"; else echo "not ok $n nhbm_host_$1 # $3"; fi
}

# driver_of ADDRESS: the bound driver's name, "none" without one.
driver_of() {
	l=$(readlink "/sys/bus/pci/devices/$1/driver") || { echo none; return; }
	echo "${l##*/}"
}

# drivers: "A=driver B=driver" for the two functions.
drivers() { echo "$A=$(driver_of "$A") $B=$(driver_of "$B")"; }

# expect NAME WANT: the functions' drivers are WANT.
expect() {
	got=$(drivers)
	[ "$got" = "$2" ]
	result "$1" $? "drivers $got, want $2"
}

# nodes_locked NAME: every neuron_hbm node is 0660, group neuron, though
# AWS's rule says 0666 for "neuron*".
nodes_locked() {
	bad=
	for d in /dev/neuron_hbm*; do
		[ -e "$d" ] || { bad="no node"; break; }
		m=$(stat -c '%a %G' "$d")
		[ "$m" = "660 neuron" ] || bad="$bad $d:$m"
	done
	[ -z "$bad" ]
	result "$1" $? "$bad"
}

mkdir -p /run /etc/neuron-hbm
set -- $(for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor")" = 0x1d0f ] && echo "${d##*/}"
done)
A=$1 B=$2
echo "nhbm: boot $boot of kernel $(uname -r); Neuron functions $A $B"

# systemd-modules-load and udev's coldplug run side by side at boot, so
# either driver may load first. Boot 1 loads neuron_hbm first (udev's alias
# load won), boot 2 AWS's neuron first (modules-load.d won): neither order
# may decide who gets a function.
if [ "$boot" = 1 ]; then
	/sbin/modprobe neuron_hbm && echo "nhbm: neuron_hbm loaded first"
fi
# systemd-modules-load: the modules modules-load.d names (AWS's neuron).
for f in /etc/modules-load.d/*.conf; do
	grep -v '^#' "$f" | while read -r m; do
		[ -n "$m" ] && /sbin/modprobe "$m" && echo "nhbm: modules-load.d: $m"
	done
done
# systemd-udevd and systemd-udev-trigger's coldplug.
/usr/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --type=subsystems
udevadm trigger --action=add --type=devices
udevadm settle --timeout=120
settle_console
[ -d /sys/module/neuron_hbm ]
result "${boot}_neuron_hbm_loaded_by_alias" $? "udev did not load neuron_hbm"

if [ "$boot" = 1 ]; then
	expect 1_neuron_keeps_every_function "$A=neuron $B=neuron"
	neuron-hbm-bind "$A"
	result 1_bind_command $? "neuron-hbm-bind $A failed"
	udevadm settle --timeout=60
	expect 1_bind_moves_one_function "$A=neuron_hbm $B=neuron"
	nodes_locked 1_node_is_0660_group_neuron
	neuron-hbm-bind --list
	# The suites on the function handed over (node 0, the first function).
	# The PCI suite's other cases drive the device model through a mapping
	# of BAR0's resource file, which Debian's kernel (IO_STRICT_DEVMEM)
	# refuses for a BAR a driver holds; they run in make check-pci.
	/tests/nhbm-pci-test -d 0 bars_are bar4_is
	/tests/nhbm-uapi-test
	/tests/nhbm-libnhbm-test /dev/neuron_hbm0 nhbm_libnhbm_host
	# The host's disk: what boot 2 finds in /etc/neuron-hbm.
	sed 's/^/NHBM-STATE /' /etc/neuron-hbm/functions
else
	expect 2_choice_survives_a_reboot "$A=neuron_hbm $B=neuron"
	nodes_locked 2_node_is_0660_group_neuron
	neuron-hbm-bind --release "$A"
	result 2_release_command $? "neuron-hbm-bind --release $A failed"
	expect 2_release_gives_it_back "$A=neuron $B=neuron"
	! grep -q . /etc/neuron-hbm/functions
	result 2_release_is_recorded $? "$(cat /etc/neuron-hbm/functions)"
fi
finish
