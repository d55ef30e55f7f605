// SPDX-License-Identifier: MIT OR Apache-2.0
// The header compiles as strict C11 from where it is installed, through
// pkg-config (tools/testing/libnhbm-check.sh, -std=c11 -pedantic
// -fsyntax-only), and its version macros compare as documented.
#include <nhbm/nhbm.h>

#if NHBM_CHECK_VERSION(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR) || NHBM_CHECK_VERSION(1, 0)
#error "NHBM_CHECK_VERSION fails for the header's own version or 1.0"
#endif
#if !NHBM_CHECK_VERSION(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR + 1) || \
	!NHBM_CHECK_VERSION(NHBM_VERSION_MAJOR + 1, 0)
#error "NHBM_CHECK_VERSION passes for a newer version"
#endif

_Static_assert(sizeof(struct nhbm_load_info) == 40, "nhbm_load_info layout");
_Static_assert(sizeof(nhbm_plan_error) == 16, "nhbm_plan_error layout");

int main(void)
{
	nhbm_device *dev = NULL;
	struct nhbm_device_info info;

	void *addr = NULL;
	size_t len = 0;

	if (nhbm_check_version(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR) != 0)
		return 3;
	if (nhbm_device_open(0, &dev) != 0)
		return nhbm_abi_version() == NHBM_ABI_VERSION ? 1 : 2;
	(void)nhbm_device_info(dev, &info);
	(void)nhbm_device_from_fd(nhbm_device_fd(dev), &dev);
	if (nhbm_map(NULL, 1, &addr, &len) == 0)
		(void)nhbm_unmap(addr, len);
	nhbm_device_close(dev);
	return 0;
}
