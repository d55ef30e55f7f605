#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Prints the project's version: `[workspace.package] version` in
# tools/Cargo.toml, the one place it is kept (Documentation/packaging.rst).
# Fails when there is none.
set -eu
v=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' \
	"$(dirname "$0")/Cargo.toml")
if [ -z "$v" ]; then
	echo "version.sh: no [workspace.package] version in tools/Cargo.toml" >&2
	exit 1
fi
echo "$v"
