# SPDX-License-Identifier: GPL-2.0-only
#
# Sourced by the setup scripts: debian_mirror prints the Debian mirror this
# machine's apt configuration already uses (never hard-coded in the repository).

debian_mirror() {
	local uri
	uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
		2>/dev/null | grep -v -- '-security' | grep -oE 'https?://[^ ]+/debian/?' | head -1)
	[ -n "$uri" ] || { echo "no Debian mirror found in the apt configuration" >&2; exit 1; }
	echo "${uri%/}"
}
