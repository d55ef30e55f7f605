// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * A libnhbm 1.0 program: built against the 1.0 header (this directory) and
 * a 1.0 library, then run against the library of today
 * (tools/testing/libnhbm-check.sh). It binds every 1.0 function and runs
 * the calls that need no device; prints "abi-1.0: ok" or what failed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nhbm.h>

/* Every function of 1.0: each must resolve in the library run against. */
static void (*const all[])(void) = {
	(void (*)(void))nhbm_abi_version,      (void (*)(void))nhbm_device_close,
	(void (*)(void))nhbm_device_info,      (void (*)(void))nhbm_device_open,
	(void (*)(void))nhbm_device_open_path, (void (*)(void))nhbm_last_error,
	(void (*)(void))nhbm_load,	       (void (*)(void))nhbm_loaded_free,
	(void (*)(void))nhbm_loaded_info,      (void (*)(void))nhbm_mem_read,
	(void (*)(void))nhbm_mem_stats,	       (void (*)(void))nhbm_mem_write,
	(void (*)(void))nhbm_plan_free,	       (void (*)(void))nhbm_plan_from_file,
	(void (*)(void))nhbm_plan_from_memory, (void (*)(void))nhbm_plan_validate,
	(void (*)(void))nhbm_plan_validate_arch, (void (*)(void))nhbm_reset,
	(void (*)(void))nhbm_resolve,	       (void (*)(void))nhbm_resolve_batch,
	(void (*)(void))nhbm_resolver_free,    (void (*)(void))nhbm_resolver_new,
	(void (*)(void))nhbm_resolver_resolve, (void (*)(void))nhbm_unload,
	(void (*)(void))nhbm_version,
};

struct blob {
	struct nhbm_plan_header h;
	struct nhbm_mem_ref r[2];
};

static int failed(const char *what, int rc)
{
	printf("abi-1.0: %s: %d (%s)\n", what, rc, nhbm_last_error());
	return 1;
}

/* A two-record plan, valid or with a PTR to nothing (record 1). */
static int validate(int dangling, int want, long long want_record)
{
	struct blob b;
	struct nhbm_plan_error where = { -2, -2 };
	nhbm_plan *p = NULL;
	int rc;

	memset(&b, 0, sizeof(b));
	b.h.nmem = 2;
	b.r[0].mr_type = NHBM_MR_INPUT;
	b.r[0].var_id = 1;
	b.r[0].size = 4096;
	b.r[1].mr_type = NHBM_MR_PTR;
	b.r[1].var_id = 2;
	b.r[1].u.ptr.target_var_id = dangling ? 42 : 1;
	rc = nhbm_plan_from_memory(&b, sizeof(b), &p);
	if (rc)
		return failed("plan_from_memory", rc);
	rc = nhbm_plan_validate_arch(p, "v2", &where);
	nhbm_plan_free(p);
	if (rc != want || where.record != want_record) {
		printf("abi-1.0: record %lld, want %lld\n", (long long)where.record, want_record);
		return failed("plan_validate_arch", rc);
	}
	return 0;
}

int main(void)
{
	nhbm_device *dev = NULL;
	int rc;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!all[i])
			return failed("unbound function", (int)i);
	if (strncmp(nhbm_version(), "1.", 2))
		return failed(nhbm_version(), 0);
	if (nhbm_abi_version() != NHBM_ABI_VERSION)
		return failed("abi_version", (int)nhbm_abi_version());
	rc = nhbm_device_open_path("/nonexistent/neuron_hbm0", &dev);
	if (rc != -ENOENT || dev || !*nhbm_last_error())
		return failed("open_path of a missing node", rc);
	rc = nhbm_resolve(NULL, 1, 0, 0, NULL);
	if (rc != -EINVAL || strcmp(nhbm_last_error(), "loaded is NULL"))
		return failed("resolve(NULL)", rc);
	if (validate(0, 0, -1) || validate(1, -ENOENT, 1))
		return 1;
	printf("abi-1.0: ok (libnhbm %s)\n", nhbm_version());
	return 0;
}
