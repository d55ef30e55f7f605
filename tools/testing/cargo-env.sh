# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
#
# The cargo environment of the userspace builds (sourced by
# build-userspace.sh, build-devmodel.sh, host-tests.sh and `make lint`).
#
# Every checkout builds into one target directory under NHBM_CACHE, from one
# copy of its sources there (cargo_tree): cargo names a workspace crate's
# outputs by the crate's path, so building from the same path lets a fresh
# clone reuse everything compiled before, its own crates included, and
# recompile only what changed (unchanged files keep their times in the
# copy). Cargo already serializes builds in one target directory; the lock
# taken by cargo_lock also covers the copy and what a caller does with the
# outputs (copy the binaries out, run the tests), so that another checkout
# cannot replace them in between. Compiler messages name the copy's paths.
# When the target directory grows past NHBM_CARGO_TARGET_MAX_GIB (24) it is
# emptied under the lock and the next build starts cold.

# Userspace is built by rustup's toolchain, not the kernel build's rustc.
unset RUSTC RUSTDOC RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER CARGO_TARGET_DIR
command -v cargo >/dev/null 2>&1 || PATH="$HOME/.cargo/bin:$PATH"
# bindgen (tools/nhbm/build.rs) loads the libclang that setup.sh installs.
export LIBCLANG_PATH="${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}"

NHBM_CACHE="${NHBM_CACHE:-/var/cache/neuron_hbm}"
CARGO_TARGET="$NHBM_CACHE/cargo-target"
# The checkout this file belongs to, and the copy of its sources builds use.
NHBM_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CARGO_TOOLS="$NHBM_CACHE/cargo-tree/tools"

# cargo_lock: holds the shared target directory (until the shell exits or
# cargo_unlock), emptying it first when it has grown too big, and brings
# the source copy at $CARGO_TOOLS up to this checkout.
cargo_lock() {
	mkdir -p "$CARGO_TARGET"
	exec 8>"$CARGO_TARGET.lock"
	flock 8
	local max_kib=$((${NHBM_CARGO_TARGET_MAX_GIB:-24} * 1024 * 1024))
	local kib
	kib=$(du -sk "$CARGO_TARGET" 2>/dev/null | cut -f1)
	if [ "${kib:-0}" -gt "$max_kib" ]; then
		echo "cargo-env: $CARGO_TARGET holds $((kib / 1024 / 1024)) GiB; emptied" >&2
		rm -rf "$CARGO_TARGET"
		mkdir -p "$CARGO_TARGET"
	fi
	python3 "$NHBM_REPO/tools/testing/sync-tree.py" "$NHBM_REPO" "$NHBM_CACHE/cargo-tree"
}

cargo_unlock() {
	exec 8>&-
}
