# SPDX-License-Identifier: GPL-2.0-only
#
# neuron_hbm: out-of-tree Rust kernel module for AWS Neuron HBM.
#
#   make            build neuron_hbm.ko (against the cached test kernel or KDIR=)
#   make setup      install the toolchain and build the test kernel (idempotent)
#   make check      host userspace tests, then module + KUnit + guest tests in QEMU
#                   on simulated devices, then check-pci; prints "N passed, N failed"
#                   for each guest run
#   make check-pci  the guest suites on two emulated Neuron PCI functions (QEMU 11)
#   make check-distro  the same guest tests on Debian 13's own 7.3 kernel (module
#                   built as a Debian 13 host builds it, KDIR and DKMS)
#   make demo       boot the module on a simulated device and show what it does
#   make bench      the benchmarks (Documentation/benchmarks.rst), on a copy of
#                   the module built with them; the module hosts load has none
#   make lint       import cycles, layer order, unsafe confinement (rust/) and
#                   function length, rustfmt check + clippy build; the crates'
#                   licenses in debian/copyright allowed and up to date
#   make python-check  build the Python package's wheel and run its pytest suite
#   make wheel      the Python package's abi3 wheel, in build/wheel/ (pip install it)
#   make install-lib  build and install libnhbm, the C library, its headers and
#                   manual pages (DESTDIR=, PREFIX=, LIBDIR=)
#   make deb        the source package and the Debian packages built from it
#                   (DKMS module, nhbm, libnhbm) in a clean root, in build/deb/
#   make header     regenerate libnhbm's committed C header with cbindgen
#   make clean

# Kbuild reads ./Kbuild, never this file; $(src) is set only there.
ifneq ($(src),)
include $(src)/Kbuild
else

REPO       := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
NHBM_CACHE ?= /var/cache/neuron_hbm
BUILD      := $(REPO)/build
SETUP      := $(REPO)/tools/setup.sh
BINDGEN    := $(NHBM_CACHE)/bindgen-0.73.2/bin/bindgen

# KDIR: a user's own Rust-enabled kernel build; otherwise the cached test kernel
# (built by `make setup` on first use). KMAKE_ARGS carries the kernel's own
# make variables: for the test kernel its clang, rustc and bindgen; for KDIR=
# the C compiler its configuration names (CONFIG_CC_VERSION_TEXT of a gcc
# build, LLVM=1 for a clang build), with rustc and bindgen from PATH.
TEST_KMAKE := LLVM=-19 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc \
              BINDGEN=$(BINDGEN) LIBCLANG_PATH=/usr/lib/llvm-19/lib
ifeq ($(KDIR),)
KDIR_AUTO  = $(shell NHBM_CACHE=$(NHBM_CACHE) $(SETUP) --kdir)
KMAKE_ARGS ?= $(TEST_KMAKE)
else
KDIR_AUTO  = $(KDIR)
KDIR_CC    := $(shell sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*\) .*/\1/p' $(KDIR)/.config 2>/dev/null)
ifneq ($(shell grep -sx CONFIG_CC_IS_CLANG=y $(KDIR)/.config),)
KMAKE_ARGS ?= LLVM=1
else ifneq ($(KDIR_CC),)
KMAKE_ARGS ?= CC=$(KDIR_CC)
endif
endif

# The debug kernel (KASAN, lockdep, kmemleak, fault injection) for check-debug.
KDIR_DEBUG = $(shell VARIANT=debug NHBM_CACHE=$(NHBM_CACHE) $(SETUP) --kdir)

.PHONY: all module setup check check-pci devmodel check-debug check-distro demo bench bench-module lint fmt clean userspace dkms-install python-check \
	wheel install-lib header deb

all: module

setup:
	@NHBM_CACHE=$(NHBM_CACHE) $(SETUP)

module:
	@$(MAKE) -C $(KDIR_AUTO) M=$(REPO) $(KMAKE_ARGS) modules

userspace:
	@$(REPO)/tools/testing/build-userspace.sh

# On the host first: libnhbm's header, install and link checks
# (Documentation/libnhbm.rst), the Python package's wheel and tests
# (Documentation/python.rst) and the userspace workspace's own tests, which
# the closing line of the simulated run counts with the guest's. Then the
# guest suites on simulated devices and on emulated PCI functions; either
# run failing fails the check.
check: module userspace devmodel
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/testing/libnhbm-check.sh
	@NHBM_CACHE=$(NHBM_CACHE) NHBM_CLI=$(BUILD)/userspace/nhbm \
		$(REPO)/tools/testing/python-tests.sh $(BUILD)/python-tests.log
	@$(REPO)/tools/testing/host-tests.sh $(BUILD)/host-tests.log
	@NHBM_HOST_LOG=$(BUILD)/host-tests.log NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) \
		$(REPO)/tools/testing/run-qemu.sh check; \
	sim=$$?; \
	NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) \
		NHBM_DEVMODEL=$(BUILD)/nhbm-devmodel \
		$(REPO)/tools/testing/run-qemu.sh check-pci; \
	pci=$$?; \
	[ $$sim = 0 ] && [ $$pci = 0 ]

# The Python package (tools/nhbm-py): builds the wheel with maturin into a
# venv under NHBM_CACHE and runs its pytest suite; log in build/python-tests.log.
python-check:
	@NHBM_CACHE=$(NHBM_CACHE) NHBM_CLI=$(BUILD)/userspace/nhbm \
		$(REPO)/tools/testing/python-tests.sh $(BUILD)/python-tests.log

# The Python package's wheel (abi3: CPython 3.9 and later) in build/wheel/,
# for `pip install build/wheel/nhbm-*.whl` (Documentation/python.rst).
wheel:
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/nhbm-py/build-wheel.sh $(BUILD)/wheel

# The device model of a Neuron PCI function (a host program, not static).
devmodel:
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/testing/build-devmodel.sh

# The guest suites on emulated PCI functions instead of simulated devices:
# QEMU 11 from the Debian 13 root, the module bound through its PCI driver.
check-pci: module userspace devmodel
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) \
		NHBM_DEVMODEL=$(BUILD)/nhbm-devmodel \
		$(REPO)/tools/testing/run-qemu.sh check-pci

# The whole suite on the debug kernel, with a long fuzz run and a kmemleak
# scan at the end, then the PCI guest on the same kernel (its DMA path
# included), closed by a kmemleak scan too; any report fails it. Rebuilds
# the module for that kernel.
check-debug: userspace devmodel
	@$(MAKE) -C $(KDIR_DEBUG) M=$(REPO) $(TEST_KMAKE) modules
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_DEBUG) NHBM_QEMU_MEM=1536 NHBM_QEMU_TIMEOUT=3000 \
		NHBM_QEMU_APPEND="nhbm_debug=1" $(REPO)/tools/testing/run-qemu.sh check; \
	sim=$$?; \
	NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_DEBUG) NHBM_QEMU_MEM=1536 NHBM_QEMU_TIMEOUT=3000 \
		NHBM_QEMU_APPEND="nhbm_debug=1" NHBM_DEVMODEL=$(BUILD)/nhbm-devmodel \
		$(REPO)/tools/testing/run-qemu.sh check-pci; \
	pci=$$?; \
	[ $$sim = 0 ] && [ $$pci = 0 ]

# Debian 13's own 7.3 kernel: builds the module in a Debian 13 root (KDIR and
# DKMS) and runs the guest suites on Debian's unmodified vmlinuz.
check-distro: userspace devmodel
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/testing/check-distro.sh

# The demo prints a progress line per step; the build output goes to
# build/demo-build.log and the guest's boot and KUnit log to build/qemu-demo.log.
demo:
	@NHBM_CACHE=$(NHBM_CACHE) $(SETUP)
	@mkdir -p $(BUILD)
	@echo "demo: building neuron_hbm.ko and the userspace tools (log: build/demo-build.log)"
	@{ $(MAKE) --no-print-directory module && $(MAKE) --no-print-directory userspace; } \
		>$(BUILD)/demo-build.log 2>&1 || { tail -30 $(BUILD)/demo-build.log; exit 1; }
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) $(REPO)/tools/testing/run-qemu.sh demo

# The planner figures on the host, then three guests: the simulated device
# on the machine's QEMU, then an emulated PCI function on QEMU 11 (against a
# simulated device and against its own BAR4 mapping), then that function
# alone for the DMA figures, in a fresh guest. All four always run;
# the target fails when a figure of any misses its target (see
# Documentation/benchmarks.rst). The whole-model staging figure needs room
# for 3 x 256 MiB beside the kernel.
bench: module bench-module userspace devmodel
	@rc=0; \
	NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/testing/bench-planner.sh || rc=1; \
	NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) NHBM_QEMU_APPEND="kunit.enable=0" \
		NHBM_KO=$(BENCH_TREE)/neuron_hbm.ko \
		NHBM_QEMU_MEM=$${NHBM_QEMU_MEM:-1536} $(REPO)/tools/testing/run-qemu.sh bench || rc=1; \
	NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) NHBM_QEMU_APPEND="kunit.enable=0" \
		NHBM_DEVMODEL=$(BUILD)/nhbm-devmodel NHBM_QEMU_MEM=$${NHBM_QEMU_MEM:-1536} \
		$(REPO)/tools/testing/run-qemu.sh bench-pci || rc=1; \
	NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) NHBM_QEMU_APPEND="kunit.enable=0" \
		NHBM_DEVMODEL=$(BUILD)/nhbm-devmodel NHBM_QEMU_MEM=$${NHBM_QEMU_MEM:-1536} \
		$(REPO)/tools/testing/run-qemu.sh bench-dma || rc=1; \
	exit $$rc

# The module with its in-kernel benchmarks (NHBM_BENCH=1, see Kbuild), built
# from a copy of the sources in build/bench-module so that the module hosts
# load (./neuron_hbm.ko) never contains them. Copies keep their times, so an
# unchanged tree is not rebuilt.
BENCH_TREE := $(BUILD)/bench-module
bench-module:
	@mkdir -p $(BENCH_TREE)
	@cd $(REPO) && find Kbuild rust include -type f \( -name Kbuild -o -name '*.rs' -o -name '*.c' \
		-o -name '*.h' \) ! -name '*_generated.rs' -exec cp -p --parents {} $(BENCH_TREE) \;
	@$(MAKE) -C $(KDIR_AUTO) M=$(BENCH_TREE) NHBM_BENCH=1 $(KMAKE_ARGS) modules

# rustfmt with the kernel's own configuration, following the crate's modules.
RUSTFMT_CFG = $(firstword $(wildcard $(KDIR_AUTO)/source/.rustfmt.toml $(KDIR_AUTO)/.rustfmt.toml))
RUSTFMT     = rustfmt --edition 2021 --config-path $(RUSTFMT_CFG) $(REPO)/rust/neuron_hbm.rs

lint:
	@python3 $(REPO)/tools/testing/import-cycles.py $(REPO)/rust $(wildcard $(REPO)/tools/*/src)
	@python3 $(REPO)/tools/testing/layers.py $(REPO)/rust
	@python3 $(REPO)/tools/testing/fn-length.py $(REPO)/rust $(REPO)/tools
	@$(RUSTFMT) --check
	@$(MAKE) -C $(KDIR_AUTO) M=$(REPO) $(KMAKE_ARGS) CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver modules
	@$(MAKE) --no-print-directory bench-module KMAKE_ARGS="$(KMAKE_ARGS) CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver"
	@$(REPO)/tools/testing/rustdoc.sh $(BUILD)/rustdoc
	@python3 $(REPO)/tools/testing/msrv-check.py $(REPO)/tools
	@python3 $(REPO)/tools/crate-licenses.py --check $(REPO)/tools $(REPO)/debian/copyright
	@cd $(REPO)/tools && cargo fmt --check && NHBM_CACHE=$(NHBM_CACHE) bash -c '. $(REPO)/tools/testing/cargo-env.sh && \
		cargo_lock && cargo clippy --quiet --workspace --all-targets --target-dir "$$CARGO_TARGET" -- -Dwarnings'
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/testing/check-header.sh
	@echo "lint: clean"

fmt:
	@$(RUSTFMT)

dkms-install:
	@$(REPO)/tools/dkms-install.sh

# libnhbm, the C library (tools/libnhbm, Documentation/libnhbm.rst): built
# and installed under $(DESTDIR)$(PREFIX): lib/libnhbm.so.X.Y.Z with its
# libnhbm.so.1 and libnhbm.so links, libnhbm.a, include/nhbm/nhbm.h,
# include/nhbm/neuron_hbm.h, share/man/man3/*.3, lib/pkgconfig/nhbm.pc
# (LIBDIR= puts the lib/ files elsewhere, e.g. $(PREFIX)/lib/x86_64-linux-gnu).
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
install-lib:
	@NHBM_CACHE=$(NHBM_CACHE) DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) LIBDIR=$(LIBDIR) \
		$(REPO)/tools/libnhbm/install.sh

# The source package (crates vendored) and the Debian packages built from it
# by dpkg-buildpackage in a clean Debian 13 root, offline, and checked by
# lintian: neuron-hbm-dkms, neuron-hbm-tools, libnhbm1 and libnhbm-dev in
# build/deb/ (Documentation/packaging.rst).
deb:
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/build-deb.sh

# Regenerates libnhbm's committed header (tools/libnhbm/include/nhbm/nhbm.h)
# with the pinned cbindgen; tools/testing/check-header.sh checks it.
header:
	@NHBM_CACHE=$(NHBM_CACHE) $(REPO)/tools/libnhbm/header.sh

clean:
	@rm -rf $(BUILD) $(REPO)/Module.symvers $(REPO)/modules.order
	@find $(REPO) -path $(REPO)/tools/target -prune -o \( -name '*.o' -o -name '*.ko' \
		-o -name '*.mod' -o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.rmeta' \) -print \
		| grep -v '^$(REPO)/tools/target$$' | xargs rm -f
	@rm -f $(REPO)/rust/abstractions/*_generated.rs $(REPO)/rust/abstractions/layout.s

endif
