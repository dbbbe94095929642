/*
 * test_sim_doctor.c - the shims meshsim adds for meshconfig doctor (sim/doctor.h),
 * run here with /bin/sh and no root: rdma_ctl's answer from the fixture,
 * ibv_devinfo in a Mac's layout (read back with the doctor's own parser, so the
 * two cannot drift apart), date with and without a clock offset; and which
 * `meshsim fault` kinds are the doctor's.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"
#include "sim/doctor.h"
#include "sim/live.h"

static char tmpdir[] = "/tmp/mr-sim-doctor.XXXXXX";

static const char ibv_fixture[] =
	"    device          \t   node GUID\n"
	"    ------          \t----------------\n"
	"    rdma_zz9        \t0000000000000101\n"
	"    rdma_zz8        \t0000000000000102\n";

static int sh(const char *cmd, struct mr_buf *out)
{
	char *full = xasprintf("PATH=%s/bin:$PATH; %s 2>&1", tmpdir, cmd);
	FILE *f = popen(full, "r");
	char buf[512];
	size_t n;
	int st;

	assert_non_null(f);
	mr_buf_reset(out);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		mr_buf_append(out, buf, n);
	st = pclose(f);
	free(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put(const char *rel, const char *text)
{
	char *p = xasprintf("%s/%s", tmpdir, rel);

	assert_int_equal(mr_write_file(p, text, strlen(text), 0644, NULL), 0);
	free(p);
}

static int setup(void **state)
{
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_non_null(mkdtemp(tmpdir));
	for (const char *d = "bin\0fixture\0live\0live/unplugged\0"; *d; d += strlen(d) + 1) {
		char *p = xasprintf("%s/%s", tmpdir, d);
		assert_int_equal(mkdir(p, 0755), 0);
		free(p);
	}
	for (size_t i = 0; mr_sim_doctor_shim_names[i]; i++) {
		char *p = xasprintf("%s/bin/%s", tmpdir, mr_sim_doctor_shim_names[i]);
		mr_buf_reset(&b);
		assert_int_equal(mr_sim_render_doctor_shim(mr_sim_doctor_shim_names[i], "h1", tmpdir, &b), 0);
		assert_int_equal(mr_write_file(p, b.p, b.len, 0755, NULL), 0);
		free(p);
	}
	mr_buf_release(&b);
	return 0;
}

static int teardown(void **state)
{
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);

	(void)state;
	assert_int_equal(system(cmd), 0);
	free(cmd);
	return 0;
}

static void test_render_refuses(void **state)
{
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_sim_render_doctor_shim("nosuch", "h1", tmpdir, &b), -1);
	assert_int_equal(mr_sim_render_doctor_shim("date", "h1", "/tmp/a b", &b), -1);
	assert_int_equal(mr_sim_render_doctor_shim("date", "h;1", tmpdir, &b), -1);
	mr_buf_release(&b);
}

/* rdma_ctl says enabled exactly where the fixture lists RDMA devices. */
static void test_rdma_ctl(void **state)
{
	struct mr_buf out = MR_BUF_INIT;

	(void)state;
	put("fixture/ibv_devices.txt", ibv_fixture);
	assert_int_equal(sh("rdma_ctl status", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "enabled\n");
	put("fixture/ibv_devices.txt", mr_sim_ibv_none);
	assert_int_equal(sh("rdma_ctl status", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "disabled\n");
	assert_int_equal(sh("rdma_ctl enable", &out), 1);
	assert_int_equal(sh("rdma_ctl bogus", &out), 64);
	mr_buf_release(&out);
}

/*
 * ibv_devinfo lists live/ibv_devices.txt's devices; their interfaces do not
 * exist here, so every port is down and there is no IPv4-mapped GID: what the
 * doctor reads from it must say so.
 */
static void test_ibv_devinfo(void **state)
{
	struct mr_buf out = MR_BUF_INIT;
	struct dr_dev devs[2];

	(void)state;
	put("live/ibv_devices.txt", mr_sim_ibv_none);
	assert_int_equal(sh("ibv_devinfo", &out), 0);
	assert_non_null(strstr(mr_buf_cstr(&out), "No IB devices found"));
	put("live/ibv_devices.txt", ibv_fixture);
	assert_int_equal(sh("ibv_devinfo -v", &out), 0);
	memset(devs, 0, sizeof(devs));
	snprintf(devs[0].name, sizeof(devs[0].name), "rdma_zz9");
	snprintf(devs[1].name, sizeof(devs[1].name), "rdma_zz8");
	assert_int_equal(dr_parse_devinfo(mr_buf_cstr(&out), devs, 2), 0);
	for (int i = 0; i < 2; i++) {
		assert_true(devs[i].described);
		assert_false(devs[i].active);
		assert_string_equal(devs[i].state, "PORT_DOWN (1)");
		assert_true(devs[i].gids_listed);
		assert_int_equal(devs[i].ngid, 1); /* the link-local one only */
		assert_false(devs[i].gids[0].v4);
	}
	assert_non_null(strstr(mr_buf_cstr(&out), "node_guid:\t\t\t0000:0000:0000:0101"));
	assert_int_equal(sh("ibv_devinfo -d rdma_zz8", &out), 0);
	assert_null(strstr(mr_buf_cstr(&out), "rdma_zz9"));
	assert_non_null(strstr(mr_buf_cstr(&out), "hca_id:\trdma_zz8"));
	assert_int_equal(sh("ibv_devinfo -x", &out), 1);
	mr_buf_release(&out);
}

static long date_s(struct mr_buf *out)
{
	assert_int_equal(sh("date +%s", out), 0);
	return strtol(mr_buf_cstr(out), NULL, 10);
}

static void test_date(void **state)
{
	struct mr_buf out = MR_BUF_INIT;
	long now = (long)time(NULL), d;

	(void)state;
	d = date_s(&out);
	assert_true(d >= now && d <= now + 5);
	put("clock_offset", "3600\n");
	d = date_s(&out);
	assert_true(d >= now + 3600 && d <= now + 3605);
	put("clock_offset", "-90\n");
	d = date_s(&out);
	assert_true(d >= now - 90 && d <= now - 85);
	put("clock_offset", "0\n");
	d = date_s(&out);
	assert_true(d >= now && d <= now + 5);
	mr_buf_release(&out);
}

static void test_fault_kinds(void **state)
{
	static const char *const ours[] = { "noipv4", "ipv4", "bridge", "unbridge", "mtu", "macos",
					    "rdma-nodev", "rdma-dev", "firewall", "clock", "diskfull",
					    "diskfree" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ours); i++) {
		assert_true(mr_sim_doctor_fault_kind(ours[i]));
		assert_non_null(strstr(MR_SIM_DOCTOR_FAULTS_HELP, ours[i]));
	}
	assert_false(mr_sim_doctor_fault_kind("unplug"));
	assert_false(mr_sim_doctor_fault_kind("mtu2"));
	assert_false(mr_sim_doctor_fault_kind(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_refuses),
		cmocka_unit_test(test_rdma_ctl),
		cmocka_unit_test(test_ibv_devinfo),
		cmocka_unit_test(test_date),
		cmocka_unit_test(test_fault_kinds),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
