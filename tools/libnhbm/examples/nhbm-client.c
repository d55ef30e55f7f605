// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * nhbm-client: a C program on libnhbm, and the library's KTAP suite in the
 * test guest (as /tests/nhbm-libnhbm-test).
 *
 *   nhbm-client [DEVICE_NODE [SUITE]]   (default /dev/neuron_hbm0, nhbm_libnhbm)
 *
 * Checks the library's version, builds a three-record plan by hand,
 * validates it offline, loads it, resolves through RESOLVE, RESOLVE_BATCH
 * and the in-process resolver (all three must agree, errors included; no
 * resolver is made of another plan), writes and reads back a variable, maps
 * one (what MEM_WRITE put the mapping shows, what is stored through it
 * MEM_READ reads), exports the plan and imports it read-only through a
 * second open file, passes the device's fd over a Unix socket to a child
 * that loads and resolves through it, reads MEM_STATS, unloads (a failed
 * unload fails the run), checks that RESET refuses an unknown type
 * without resetting, and checks that corrupt plans fail offline with
 * the errno and record the kernel then answers.
 *
 * Build against the installed library:
 *   cc -static nhbm-client.c $(pkg-config --static --cflags --libs nhbm)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nhbm/nhbm.h>

#define VAR_IN 1
#define VAR_OUT 2
#define VAR_PTR 3
#define IN_SIZE 4096
#define OUT_SIZE 8192

/* A plan blob: the header, then the records (no names, lists or payloads). */
struct blob {
	struct nhbm_plan_header h;
	struct nhbm_mem_ref r[3];
};

static const char *node = "/dev/neuron_hbm0";
static nhbm_device *dev;
static nhbm_plan *plan;
static nhbm_loaded *loaded;
static struct nhbm_load_info info;
static struct nhbm_device_info dinfo;
static char diag[512];

/* Sets the diagnostic of a failing case and returns -1. */
static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(diag, sizeof(diag), fmt, ap);
	va_end(ap);
	return -1;
}

/* Fails with the library's message unless rc is 0. */
static int check(int rc, const char *what)
{
	if (rc == 0)
		return 0;
	return fail("%s: %d (%s)", what, rc, nhbm_last_error());
}

static void make_blob(struct blob *b)
{
	memset(b, 0, sizeof(*b));
	b->h.nmem = 3;
	b->r[0].mr_type = NHBM_MR_INPUT;
	b->r[0].var_id = VAR_IN;
	b->r[0].size = IN_SIZE;
	b->r[1].mr_type = NHBM_MR_OUTPUT;
	b->r[1].var_id = VAR_OUT;
	b->r[1].size = OUT_SIZE;
	b->r[2].mr_type = NHBM_MR_PTR;
	b->r[2].var_id = VAR_PTR;
	b->r[2].u.ptr.target_var_id = VAR_IN;
}

static int abi_version(void)
{
	if (nhbm_abi_version() != NHBM_ABI_VERSION)
		return fail("library speaks %u, header %u", nhbm_abi_version(), NHBM_ABI_VERSION);
	return 0;
}

static int check_version(void)
{
	if (nhbm_check_version(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR))
		return fail("library %s is older than header %d.%d: %s", nhbm_version(),
			    NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR, nhbm_last_error());
	if (nhbm_check_version(NHBM_VERSION_MAJOR, NHBM_VERSION_MINOR + 1) != -ENOTSUP)
		return fail("library %s claims %d.%d", nhbm_version(), NHBM_VERSION_MAJOR,
			    NHBM_VERSION_MINOR + 1);
	return 0;
}

static int open_missing_is_enoent(void)
{
	nhbm_device *d = NULL;
	int rc = nhbm_device_open_path("/dev/neuron_hbm_missing", &d);

	if (rc != -ENOENT || d)
		return fail("got %d, want %d", rc, -ENOENT);
	if (!*nhbm_last_error())
		return fail("no message");
	return 0;
}

static int open_device(void)
{
	if (check(nhbm_device_open_path(node, &dev), node))
		return -1;
	if (check(nhbm_device_info(dev, &dinfo), "device_info"))
		return -1;
	if (dinfo.abi_version != NHBM_ABI_VERSION)
		return fail("abi_version %u", dinfo.abi_version);
	return 0;
}

static int validate_offline(void)
{
	struct blob b;
	struct nhbm_plan_error where = { .record = -2, .var_id = -2 };
	char arch[8];

	make_blob(&b);
	if (check(nhbm_plan_from_memory(&b, sizeof(b), &plan), "plan_from_memory"))
		return -1;
	if (check(nhbm_plan_validate(plan, dev, &where), "validate against the device"))
		return -1;
	if (where.record != -1 || where.var_id != -1)
		return fail("error record %lld on success", (long long)where.record);
	where.record = where.var_id = -2;
	snprintf(arch, sizeof(arch), "v%u", dinfo.arch);
	if (check(nhbm_plan_validate_arch(plan, arch, &where), arch))
		return -1;
	if (where.record != -1 || where.var_id != -1)
		return fail("error record %lld on success", (long long)where.record);
	return 0;
}

static int load(void)
{
	if (check(nhbm_load(dev, plan, NHBM_CHANNEL_ANY, &loaded), "load"))
		return -1;
	if (check(nhbm_loaded_info(loaded, &info), "loaded_info"))
		return -1;
	if (info.nmem != 3)
		return fail("nmem %u", info.nmem);
	if (info.addrs[0] == NHBM_PA_UNSTAGED || info.addrs[2] != info.addrs[0])
		return fail("addrs %#llx %#llx", (unsigned long long)info.addrs[0],
			    (unsigned long long)info.addrs[2]);
	return 0;
}

/* The queries of the three resolve paths: hits, an unknown id, a range past the end. */
static const struct {
	uint32_t var_id;
	uint64_t offset, size;
	int errno_;
} queries[] = {
	{ VAR_IN, 256, 16, 0 },
	{ VAR_IN, IN_SIZE - 1, 1, 0 },
	{ VAR_OUT, 0, OUT_SIZE, 0 },
	{ VAR_PTR, 0, IN_SIZE, 0 },
	{ VAR_PTR, 8, 8, EINVAL },
	{ VAR_IN, IN_SIZE - 1, 2, EINVAL },
	{ 99, 0, 0, ENOENT },
};
#define NQ (sizeof(queries) / sizeof(queries[0]))
static int ioctl_rc[NQ];
static uint64_t ioctl_pa[NQ];

static int resolve_ioctl(void)
{
	for (size_t i = 0; i < NQ; i++) {
		ioctl_rc[i] = nhbm_resolve(loaded, queries[i].var_id, queries[i].offset,
					   queries[i].size, &ioctl_pa[i]);
		if (ioctl_rc[i] != -queries[i].errno_)
			return fail("query %zu: got %d, want %d (%s)", i, ioctl_rc[i],
				    -queries[i].errno_, nhbm_last_error());
	}
	if (ioctl_pa[0] != info.addrs[0] + 256 || ioctl_pa[2] != info.addrs[1])
		return fail("PAs do not match the load's addrs");
	return 0;
}

static int resolve_batch_agrees(void)
{
	struct nhbm_resolve_query q[NQ];

	memset(q, 0, sizeof(q));
	for (size_t i = 0; i < NQ; i++) {
		q[i].var_id = queries[i].var_id;
		q[i].offset = queries[i].offset;
		q[i].size = queries[i].size;
	}
	if (check(nhbm_resolve_batch(loaded, q, NQ), "resolve_batch"))
		return -1;
	for (size_t i = 0; i < NQ; i++) {
		if (q[i].status != ioctl_rc[i] || (!q[i].status && q[i].addr != ioctl_pa[i]))
			return fail("query %zu: batch %d %#llx, RESOLVE %d %#llx", i, q[i].status,
				    (unsigned long long)q[i].addr, ioctl_rc[i],
				    (unsigned long long)ioctl_pa[i]);
	}
	return 0;
}

/* A plan of as many records that is not the loaded one: no resolver. */
static int resolver_refuses_another_plan(void)
{
	struct blob b;
	nhbm_plan *other = NULL;
	nhbm_resolver *r = NULL;
	int rc;

	make_blob(&b);
	b.r[0].size = 2 * IN_SIZE;
	if (check(nhbm_plan_from_memory(&b, sizeof(b), &other), "plan_from_memory"))
		return -1;
	rc = nhbm_resolver_new(other, loaded, &r);
	nhbm_plan_free(other);
	if (r) {
		nhbm_resolver_free(r);
		return fail("a resolver of another plan was made (%d)", rc);
	}
	if (rc != -EINVAL)
		return fail("resolver of another plan: got %d, want %d", rc, -EINVAL);
	return 0;
}

static int resolver_agrees(void)
{
	nhbm_resolver *r = NULL;
	int ret = 0;

	if (check(nhbm_resolver_new(plan, loaded, &r), "resolver_new"))
		return -1;
	for (size_t i = 0; i < NQ && !ret; i++) {
		uint64_t pa = 0;
		int rc = nhbm_resolver_resolve(r, queries[i].var_id, queries[i].offset,
					       queries[i].size, &pa);

		if (rc != ioctl_rc[i] || (!rc && pa != ioctl_pa[i]))
			ret = fail("query %zu: resolver %d %#llx, RESOLVE %d %#llx", i, rc,
				   (unsigned long long)pa, ioctl_rc[i],
				   (unsigned long long)ioctl_pa[i]);
	}
	nhbm_resolver_free(r);
	return ret ? ret : resolver_refuses_another_plan();
}

static int write_read_round_trip(void)
{
	static unsigned char out[IN_SIZE], back[IN_SIZE];

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (unsigned char)(i * 7 + 3);
	if (check(nhbm_mem_write(loaded, VAR_IN, 0, out, sizeof(out)), "mem_write"))
		return -1;
	if (check(nhbm_mem_read(loaded, VAR_IN, 0, back, sizeof(back)), "mem_read"))
		return -1;
	if (memcmp(out, back, sizeof(out)))
		return fail("read back differs");
	if (nhbm_mem_read(loaded, VAR_IN, 1, back, sizeof(back)) != -EINVAL)
		return fail("a read past the end did not fail with EINVAL");
	return 0;
}

/* MEM_WRITE shows through a mapping, and a store through it reads back. */
static int map_shares_the_variable(void)
{
	static const char word[] = "through the map";
	unsigned char back[sizeof(word)];
	unsigned char *m = NULL;
	void *addr = NULL;
	size_t len = 0;
	int rc;

	if (check(nhbm_map(loaded, VAR_OUT, &addr, &len), "map"))
		return -1;
	m = addr;
	if (len < OUT_SIZE || len % 4096)
		rc = fail("mapped %zu bytes of %d", len, OUT_SIZE);
	else if (check(nhbm_mem_write(loaded, VAR_OUT, 100, "abc", 3), "mem_write"))
		rc = -1;
	else if (memcmp(m + 100, "abc", 3))
		rc = fail("MEM_WRITE does not show in the mapping");
	else {
		memcpy(m + OUT_SIZE - sizeof(word), word, sizeof(word));
		rc = check(nhbm_mem_read(loaded, VAR_OUT, OUT_SIZE - sizeof(word), back,
					 sizeof(back)), "mem_read");
		if (!rc && memcmp(back, word, sizeof(word)))
			rc = fail("MEM_READ does not see the store through the mapping");
	}
	if (check(nhbm_unmap(addr, len), "unmap"))
		return -1;
	if (!rc && nhbm_map(loaded, VAR_PTR, &addr, &len) != -EINVAL)
		return fail("a PTR record was mapped");
	return rc;
}

/*
 * The import `l` of the loaded plan (`imp`: what PLAN_IMPORT answered for
 * `fd`): the same addresses and bytes, read-only.
 */
static int import_is_read_only(nhbm_loaded *l, const struct nhbm_plan_import *imp, int fd)
{
	static const char word[] = "shared";
	unsigned char back[sizeof(word)];
	void *addr = NULL;
	size_t len = 0;
	uint64_t pa = 0;
	int again = -1, rc;

	if (imp->fd != fd || imp->nr_vars != 3 || imp->bytes != info.bytes_allocated)
		return fail("import: fd %d nr_vars %u bytes %llu", imp->fd, imp->nr_vars,
			    (unsigned long long)imp->bytes);
	if (check(nhbm_resolve(l, VAR_IN, 256, 16, &pa), "resolve in the import"))
		return -1;
	if (pa != ioctl_pa[0])
		return fail("the import resolves to %#llx, the plan to %#llx",
			    (unsigned long long)pa, (unsigned long long)ioctl_pa[0]);
	if (check(nhbm_mem_write(loaded, VAR_IN, 0, word, sizeof(word)), "mem_write") ||
	    check(nhbm_mem_read(l, VAR_IN, 0, back, sizeof(back)), "mem_read of the import"))
		return -1;
	if (memcmp(back, word, sizeof(word)))
		return fail("the import does not read what was written to the plan");
	rc = nhbm_mem_write(l, VAR_IN, 0, word, sizeof(word));
	if (rc != -EACCES)
		return fail("mem_write to the import: got %d, want %d", rc, -EACCES);
	rc = nhbm_map(l, VAR_OUT, &addr, &len);
	if (!rc)
		(void)nhbm_unmap(addr, len);
	if (rc != -EACCES)
		return fail("read-write map of the import: got %d, want %d", rc, -EACCES);
	rc = nhbm_export(l, &again);
	if (!rc)
		close(again);
	if (rc != -EACCES)
		return fail("export of the import: got %d, want %d", rc, -EACCES);
	return 0;
}

/*
 * 1.3: the loaded plan exported as a dma-buf and imported through a second
 * open file of the device; unloading the import leaves the plan.
 */
static int export_and_import_read_only(void)
{
	struct nhbm_plan_import imp;
	nhbm_device *d = NULL;
	nhbm_loaded *l = NULL;
	uint64_t pa = 0;
	int fd = -1, rc;

	memset(&imp, 0, sizeof(imp));
	if (check(nhbm_export(loaded, &fd), "export"))
		return -1;
	rc = check(nhbm_device_open_path(node, &d), node);
	if (!rc)
		rc = check(nhbm_import(d, fd, &l, &imp), "import");
	if (!rc)
		rc = import_is_read_only(l, &imp, fd);
	close(fd);
	if (l && check(nhbm_unload(l), "unload of the import")) {
		nhbm_loaded_free(l);
		rc = -1;
	}
	nhbm_device_close(d);
	if (!rc && check(nhbm_resolve(loaded, VAR_IN, 256, 16, &pa), "resolve after the import"))
		return -1;
	return rc;
}

/* Receives a descriptor over `sock` (SCM_RIGHTS); -1 on failure. */
static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			      .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	return fd;
}

static int send_fd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			      .msg_controllen = sizeof(ctl) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	memset(ctl, 0, sizeof(ctl));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(fd));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/*
 * The sandboxed worker: a device made of the received fd loads the plan and
 * resolves through it. Its exit code is the step that failed (0: none).
 */
static int worker(int fd)
{
	nhbm_device *d = NULL;
	nhbm_loaded *l = NULL;
	uint64_t pa = 0;

	if (fd < 0)
		return 2;
	if (nhbm_device_from_fd(fd, &d))
		return 3;
	if (close(fd) || nhbm_device_fd(d) < 0 || nhbm_device_fd(d) == fd)
		return 4;
	if (nhbm_load(d, plan, NHBM_CHANNEL_ANY, &l))
		return 5;
	if (nhbm_resolve(l, VAR_IN, 256, 16, &pa) || nhbm_resolve(l, 99, 0, 0, &pa) != -ENOENT)
		return 6;
	if (nhbm_resolve(l, VAR_IN, 0, IN_SIZE, &pa) || pa == NHBM_PA_UNSTAGED)
		return 7;
	if (nhbm_unload(l))
		return 8;
	nhbm_device_close(d);
	return 0;
}

/*
 * A broker's fd, passed over a Unix socket to a child that uses it. A
 * kernel without AF_UNIX (the tinyconfig test kernel) has no socketpair:
 * the child then takes the descriptor it inherited, and says so.
 */
static int fd_passed_to_a_child(void)
{
	int sv[2] = { -1, -1 }, status = 0, sock;
	pid_t pid;

	if (nhbm_device_fd(dev) < 0)
		return fail("device_fd: %d", nhbm_device_fd(dev));
	sock = !socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	if (!sock && errno != ENOSYS && errno != EAFNOSUPPORT)
		return fail("socketpair: %s", strerror(errno));
	if (!sock)
		printf("    # socketpair: %s: the child inherits the fd instead\n", strerror(errno));
	pid = fork();
	if (pid == 0)
		_exit(worker(sock ? recv_fd(sv[1]) : dup(nhbm_device_fd(dev))));
	if (sock)
		close(sv[1]);
	if (pid < 0 || (sock && send_fd(sv[0], nhbm_device_fd(dev)))) {
		if (sock)
			close(sv[0]);
		return fail("fork or sendmsg: %s", strerror(errno));
	}
	if (sock)
		close(sv[0]);
	if (waitpid(pid, &status, 0) != pid)
		return fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return fail("the child failed at step %d (status %#x)", WEXITSTATUS(status), status);
	return 0;
}

static int mem_stats_counts_the_plan(void)
{
	struct nhbm_mem_stats s;

	memset(&s, 0, sizeof(s));
	if (check(nhbm_mem_stats(dev, &s), "mem_stats"))
		return -1;
	if (s.own_plans != 1 || s.own_bytes < info.bytes_allocated)
		return fail("own_plans %u own_bytes %llu", s.own_plans,
			    (unsigned long long)s.own_bytes);
	return 0;
}

static int null_pointers_are_einval(void)
{
	uint64_t pa = 0;

	if (nhbm_resolve(NULL, VAR_IN, 0, 0, &pa) != -EINVAL ||
	    nhbm_resolve(loaded, VAR_IN, 0, 0, NULL) != -EINVAL)
		return fail("NULL did not give EINVAL");
	if (strcmp(nhbm_last_error(), "pa is NULL"))
		return fail("message '%s'", nhbm_last_error());
	return 0;
}

static int unload(void)
{
	struct nhbm_mem_stats s;

	memset(&s, 0, sizeof(s));
	/* A failed unload keeps the handle: main() tries again at the end. */
	if (check(nhbm_unload(loaded), "unload"))
		return -1;
	loaded = NULL;
	if (check(nhbm_mem_stats(dev, &s), "mem_stats"))
		return -1;
	if (s.own_plans != 0)
		return fail("own_plans %u after unload", s.own_plans);
	return 0;
}

static int reset_of_unknown_type_is_einval(void)
{
	int rc = nhbm_reset(dev, 99, 0);

	if (rc != -EINVAL)
		return fail("got %d (%s), want %d", rc, nhbm_last_error(), -EINVAL);
	return 0;
}

/*
 * 1.2: the handle claims core 0 (owned by this process), resets it with
 * nhbm_reset_start() then nhbm_reset_wait(), and gives it back.
 */
static int cores_and_a_started_reset(void)
{
	struct nhbm_cores c;
	int rc;

	if (check(nhbm_cores(dev, 1, 0, &c), "cores claim"))
		return -1;
	if (c.owned != 1 || c.owner_pid[0] != (uint32_t)getpid())
		return fail("owned %#x by pid %u, want core 0 by %d", c.owned, c.owner_pid[0],
			    (int)getpid());
	if (check(nhbm_reset_start(dev, NHBM_RESET_TPB, 1), "reset_start"))
		return -1;
	rc = nhbm_reset_wait(dev);
	if (rc)
		return fail("reset_wait: %d (%s)", rc, nhbm_last_error());
	if (check(nhbm_cores(dev, 0, 1, &c), "cores release"))
		return -1;
	if (c.owned)
		return fail("owned %#x after the release", c.owned);
	return 0;
}

/*
 * A corrupt blob: offline validation and the kernel answer the same errno,
 * and validation names the record.
 */
static int corrupt(const char *what, void (*spoil)(struct blob *), int errno_, long long record)
{
	struct blob b;
	struct nhbm_plan_error where = { .record = -2, .var_id = -2 };
	nhbm_plan *p = NULL;
	nhbm_loaded *l = NULL;
	int off, rc;

	make_blob(&b);
	spoil(&b);
	if (check(nhbm_plan_from_memory(&b, sizeof(b), &p), "plan_from_memory"))
		return -1;
	off = nhbm_plan_validate(p, dev, &where);
	rc = nhbm_load(dev, p, NHBM_CHANNEL_ANY, &l);
	nhbm_plan_free(p);
	if (l) {
		rc = nhbm_unload(l);
		if (rc) {
			fail("%s: the kernel loaded it, and unload failed: %d (%s)", what, rc,
			     nhbm_last_error());
			nhbm_loaded_free(l);
			return -1;
		}
		return fail("%s: the kernel loaded it", what);
	}
	if (off != -errno_ || rc != -errno_)
		return fail("%s: offline %d, kernel %d, want %d", what, off, rc, -errno_);
	if (where.record != record)
		return fail("%s: record %lld, want %lld", what, (long long)where.record, record);
	if (!*nhbm_last_error())
		return fail("%s: no message", what);
	return 0;
}

static void bad_type(struct blob *b)
{
	b->r[1].mr_type = 0;
}

static void too_many(struct blob *b)
{
	b->h.nmem = NHBM_MAX_PLAN_RECORDS + 1;
}

static void dangling_ptr(struct blob *b)
{
	b->r[2].u.ptr.target_var_id = 42;
}

static int corrupt_plans_fail_alike(void)
{
	if (!dev)
		return fail("no device");
	return corrupt("mr_type 0", bad_type, EINVAL, 1) ||
	       corrupt("nmem past the maximum", too_many, E2BIG, -1) ||
	       corrupt("PTR to nothing", dangling_ptr, ENOENT, 2);
}

static const struct {
	const char *name;
	int (*run)(void);
	int needs_dev, needs_loaded;
} cases[] = {
	{ "abi_version", abi_version, 0, 0 },
	{ "check_version", check_version, 0, 0 },
	{ "open_missing_is_enoent", open_missing_is_enoent, 0, 0 },
	{ "open_device", open_device, 0, 0 },
	{ "validate_offline", validate_offline, 1, 0 },
	{ "load", load, 1, 0 },
	{ "resolve_ioctl", resolve_ioctl, 1, 1 },
	{ "resolve_batch_agrees", resolve_batch_agrees, 1, 1 },
	{ "resolver_agrees", resolver_agrees, 1, 1 },
	{ "write_read_round_trip", write_read_round_trip, 1, 1 },
	{ "map_shares_the_variable", map_shares_the_variable, 1, 1 },
	{ "export_and_import_read_only", export_and_import_read_only, 1, 1 },
	{ "fd_passed_to_a_child", fd_passed_to_a_child, 1, 1 },
	{ "mem_stats_counts_the_plan", mem_stats_counts_the_plan, 1, 1 },
	{ "null_pointers_are_einval", null_pointers_are_einval, 1, 1 },
	{ "unload", unload, 1, 1 },
	{ "reset_of_unknown_type_is_einval", reset_of_unknown_type_is_einval, 1, 0 },
	{ "cores_and_a_started_reset", cores_and_a_started_reset, 1, 0 },
	{ "corrupt_plans_fail_alike", corrupt_plans_fail_alike, 1, 0 },
};

int main(int argc, char **argv)
{
	size_t n = sizeof(cases) / sizeof(cases[0]);
	const char *suite = "nhbm_libnhbm";
	int fails = 0;

	if (argc > 1)
		node = argv[1];
	if (argc > 2)
		suite = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("KTAP version 1\n1..1\n");
	printf("    KTAP version 1\n    # Subtest: %s\n    1..%zu\n", suite, n);
	printf("    # libnhbm %s on %s\n", nhbm_version(), node);
	for (size_t i = 0; i < n; i++) {
		int rc;

		diag[0] = 0;
		if (cases[i].needs_dev && !dev)
			rc = fail("no device");
		else if (cases[i].needs_loaded && !loaded)
			rc = fail("no loaded plan");
		else
			rc = cases[i].run();
		printf("    %s %zu %s\n", rc ? "not ok" : "ok", i + 1, cases[i].name);
		if (rc) {
			printf("    # %s\n", diag);
			fails++;
		}
	}
	if (loaded) {
		int rc = nhbm_unload(loaded);

		if (rc) {
			printf("    # unload at exit: %d (%s)\n", rc, nhbm_last_error());
			nhbm_loaded_free(loaded);
			fails++;
		}
	}
	nhbm_plan_free(plan);
	nhbm_device_close(dev);
	printf("%s 1 %s\n", fails ? "not ok" : "ok", suite);
	return fails ? 1 : 0;
}
