// SPDX-License-Identifier: MIT OR Apache-2.0
// The header compiles as C++17 from where it is installed, through
// pkg-config, and its declarations are usable from C++
// (tools/testing/libnhbm-check.sh, -fsyntax-only).
#include <nhbm/nhbm.h>

#include <cstddef>
#include <cstdint>

static_assert(sizeof(nhbm_load_info) == 40, "nhbm_load_info layout");
static_assert(sizeof(nhbm_plan_error) == 16, "nhbm_plan_error layout");
static_assert(!NHBM_CHECK_VERSION(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR), "own version");

int main()
{
	nhbm_device *dev = nullptr;
	nhbm_loaded *loaded = nullptr;
	nhbm_load_info info{};
	std::uint64_t pa = 0;
	struct nhbm_resolve_query q{};
	// Like stat(), these share their names with functions: C++ too
	// needs the `struct`.
	struct nhbm_device_info dinfo{};
	struct nhbm_mem_stats stats{};
	if (nhbm_device_open(0, &dev) != 0)
		return nhbm_abi_version() == NHBM_ABI_VERSION ? 1 : 2;
	(void)nhbm_device_info(dev, &dinfo);
	(void)nhbm_mem_stats(dev, &stats);
	(void)nhbm_loaded_info(loaded, &info);
	(void)nhbm_resolve(loaded, 1, 0, 0, &pa);
	(void)nhbm_resolve_batch(loaded, &q, 1);
	void *addr = nullptr;
	std::size_t len = 0;
	if (nhbm_map(loaded, 1, &addr, &len) == 0)
		(void)nhbm_unmap(addr, len);
	(void)nhbm_device_fd(dev);
	nhbm_device_close(dev);
	return 0;
}
