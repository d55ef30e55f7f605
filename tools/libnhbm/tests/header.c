// SPDX-License-Identifier: MIT OR Apache-2.0
// The header compiles as strict C11 (tools/testing/libnhbm-check.sh,
// -std=c11 -pedantic -fsyntax-only).
#include <nhbm.h>

_Static_assert(sizeof(struct nhbm_load_info) == 40, "nhbm_load_info layout");
_Static_assert(sizeof(nhbm_plan_error) == 16, "nhbm_plan_error layout");

int main(void)
{
	nhbm_device *dev = NULL;
	struct nhbm_device_info info;

	if (nhbm_device_open(0, &dev) != 0)
		return nhbm_abi_version() == NHBM_ABI_VERSION ? 1 : 2;
	(void)nhbm_device_info(dev, &info);
	nhbm_device_close(dev);
	return 0;
}
