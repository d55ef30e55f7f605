# SPDX-License-Identifier: GPL-2.0
#
# neuron_hbm: out-of-tree Rust kernel module for AWS Neuron HBM.
#
#   make            build neuron_hbm.ko (against the cached test kernel or KDIR=)
#   make setup      install the toolchain and build the test kernel (idempotent)
#   make check      host userspace tests, then module + KUnit + guest tests in QEMU;
#                   prints "N passed, N failed"
#   make demo       boot the module on a simulated device and show what it does
#   make lint       rustfmt check + clippy build
#   make clean

ifneq ($(KERNELRELEASE),)
include $(src)/Kbuild
else

REPO       := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
NHBM_CACHE ?= /var/cache/neuron_hbm
BUILD      := $(REPO)/build
SETUP      := $(REPO)/tools/setup.sh
BINDGEN    := $(NHBM_CACHE)/bindgen-0.73.2/bin/bindgen
KMAKE_ARGS ?= LLVM=-19 RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc \
              BINDGEN=$(BINDGEN) LIBCLANG_PATH=/usr/lib/llvm-19/lib

# KDIR: a user's own Rust-enabled kernel build; otherwise the cached test kernel
# (built by `make setup` on first use).
ifeq ($(KDIR),)
KDIR_AUTO  = $(shell NHBM_CACHE=$(NHBM_CACHE) $(SETUP) --kdir)
else
KDIR_AUTO  = $(KDIR)
endif

# The debug kernel (KASAN, lockdep, kmemleak, fault injection) for check-debug.
KDIR_DEBUG = $(shell VARIANT=debug NHBM_CACHE=$(NHBM_CACHE) $(SETUP) --kdir)

.PHONY: all module setup check check-debug demo bench lint fmt clean userspace dkms-install

all: module

setup:
	@NHBM_CACHE=$(NHBM_CACHE) $(SETUP)

module:
	@$(MAKE) -C $(KDIR_AUTO) M=$(REPO) $(KMAKE_ARGS) modules

userspace:
	@$(REPO)/tools/testing/build-userspace.sh

# The userspace workspace's own tests run on the host first; the closing line
# counts them with the guest's.
check: module userspace
	@$(REPO)/tools/testing/host-tests.sh $(BUILD)/host-tests.log
	@NHBM_HOST_LOG=$(BUILD)/host-tests.log NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) \
		$(REPO)/tools/testing/run-qemu.sh check

# The whole suite on the debug kernel, with a long fuzz run and a kmemleak
# scan at the end; any report fails it. Rebuilds the module for that kernel.
check-debug: userspace
	@$(MAKE) -C $(KDIR_DEBUG) M=$(REPO) $(KMAKE_ARGS) modules
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_DEBUG) NHBM_QEMU_MEM=1536 NHBM_QEMU_TIMEOUT=3000 \
		NHBM_QEMU_APPEND="nhbm_debug=1" $(REPO)/tools/testing/run-qemu.sh check

# The demo prints a progress line per step; the build output goes to
# build/demo-build.log and the guest's boot and KUnit log to build/qemu-demo.log.
demo:
	@NHBM_CACHE=$(NHBM_CACHE) $(SETUP)
	@mkdir -p $(BUILD)
	@echo "demo: building neuron_hbm.ko and the userspace tools (log: build/demo-build.log)"
	@{ $(MAKE) --no-print-directory module && $(MAKE) --no-print-directory userspace; } \
		>$(BUILD)/demo-build.log 2>&1 || { tail -30 $(BUILD)/demo-build.log; exit 1; }
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) $(REPO)/tools/testing/run-qemu.sh demo

bench: module userspace
	@NHBM_CACHE=$(NHBM_CACHE) KDIR=$(KDIR_AUTO) NHBM_QEMU_APPEND="kunit.enable=0" \
		$(REPO)/tools/testing/run-qemu.sh bench

# rustfmt with the kernel's own configuration, following the crate's modules.
RUSTFMT_CFG = $(firstword $(wildcard $(KDIR_AUTO)/source/.rustfmt.toml $(KDIR_AUTO)/.rustfmt.toml))
RUSTFMT     = rustfmt --edition 2021 --config-path $(RUSTFMT_CFG) $(REPO)/rust/neuron_hbm.rs

lint:
	@$(RUSTFMT) --check
	@$(MAKE) -C $(KDIR_AUTO) M=$(REPO) $(KMAKE_ARGS) CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver modules
	@$(REPO)/tools/testing/rustdoc.sh $(BUILD)/rustdoc
	@cd $(REPO)/tools && cargo fmt --check && cargo clippy --quiet --all-targets -- -Dwarnings
	@echo "lint: clean"

fmt:
	@$(RUSTFMT)

dkms-install:
	@$(REPO)/tools/dkms-install.sh

clean:
	@rm -rf $(BUILD) $(REPO)/Module.symvers $(REPO)/modules.order
	@find $(REPO) -path $(REPO)/tools/target -prune -o \( -name '*.o' -o -name '*.ko' \
		-o -name '*.mod' -o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.rmeta' \) -print \
		| grep -v '^$(REPO)/tools/target$$' | xargs rm -f

endif
