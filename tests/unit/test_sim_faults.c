/*
 * test_sim_faults.c - the arguments of meshsim's cable faults (sim/faults.h)
 * and, as root, `meshsim fault` refusing bad ones with exit 2 (usage) or 1 (no
 * such host/cable) before it touches anything: a cluster whose state.json
 * exists but whose namespaces do not, so any tc/nft/ip call would fail loudly.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "sim/cmd.h"
#include "sim/faults.h"
#include "sim/net.h"
#include "sim/state.h"

static void test_rate(void **state)
{
	static const struct { const char *in; uint64_t bps; const char *fmt; } good[] = {
		{ "40gbit", 40000000000ULL, "40gbit" }, { "40Gbit", 40000000000ULL, "40gbit" },
		{ "2.5gbit", 2500000000ULL, "2500mbit" }, { "100mbit", 100000000ULL, "100mbit" },
		{ "1kbit", 1000, "1kbit" }, { "10tbit", 10000000000000ULL, "10tbit" },
		{ "1.544mbit", 1544000, "1544kbit" }, { "off", 0, "0bit" }, { "0", 0, "0bit" },
	};
	static const char *const bad[] = {
		"", "40", "gbit", "40 gbit", "40gb", "40gbps", "40Gb/s", "-1gbit", "1.2.3gbit",
		"0.5bit", "999bit", "11tbit", "99999999999999999999gbit", "1.0001kbit", "40gbit;",
		"$(reboot)", ".5gbit", "5.gbit", "0gbit",
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		uint64_t v = 1;
		assert_int_equal(mr_sim_parse_rate(good[i].in, &v, &err), 0);
		assert_true(v == good[i].bps);
		mr_sim_fmt_rate(v, buf, sizeof(buf));
		assert_string_equal(buf, good[i].fmt);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		uint64_t v = 7;
		assert_int_equal(mr_sim_parse_rate(bad[i], &v, &err), MESHRUN_E_USAGE);
		assert_true(v == 7);
		assert_non_null(strstr(err.msg, "expected a rate"));
	}
}

static void test_pct(void **state)
{
	static const struct { const char *in; unsigned v; const char *fmt; } good[] = {
		{ "0", 0, "0%" }, { "5", 500, "5%" }, { "0.5%", 50, "0.5%" }, { "12.25", 1225, "12.25%" },
		{ "100%", 10000, "100%" }, { "0.01", 1, "0.01%" },
	};
	static const char *const bad[] = {
		"", "%", "101", "100.01", "-1", "5%%", "0.001", "five", "5 %", "1e1", "5;x",
	};
	char buf[16];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		unsigned v = 99999;
		assert_int_equal(mr_sim_parse_pct(good[i].in, &v, &err), 0);
		assert_int_equal(v, good[i].v);
		mr_sim_fmt_pct(v, buf, sizeof(buf));
		assert_string_equal(buf, good[i].fmt);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		unsigned v = 0;
		assert_int_equal(mr_sim_parse_pct(bad[i], &v, &err), MESHRUN_E_USAGE);
		assert_non_null(strstr(err.msg, "percentage"));
	}
}

static void test_period(void **state)
{
	static const struct { const char *in; int64_t ms; } good[] = {
		{ "2s", 2000 }, { "500ms", 500 }, { "100ms", 100 }, { "1", 1000 }, { "off", 0 },
		{ "0", 0 }, { "60m", 3600000 },
	};
	static const char *const bad[] = { "", "99ms", "10ms", "2h", "61m", "-1s", "soon", "1s;x" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int64_t v = -1;
		assert_int_equal(mr_sim_parse_period(good[i].in, &v, &err), 0);
		assert_int_equal(v, good[i].ms);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int64_t v = 0;
		assert_int_equal(mr_sim_parse_period(bad[i], &v, &err), MESHRUN_E_USAGE);
		assert_non_null(strstr(err.msg, "period"));
	}
}

static void test_partition(void **state)
{
	static const char *const bad[] = {
		"h1,h2", "|h2", "h1|", "h1||h2", "h1|h2|h3", "h1,,h2|h3", "h1|h1", "h1,h2|h3,h2",
		"h1;reboot|h2", "$(x)|h2", "-h1|h2", "h1 |h2", "h1|h2\n", "",
	};
	struct mr_strvec a = MR_STRVEC_INIT, b = MR_STRVEC_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_sim_parse_partition("m1,m2|m3,m4", &a, &b, &err), 0);
	assert_int_equal(a.nr, 2);
	assert_int_equal(b.nr, 2);
	assert_string_equal(a.v[1], "m2");
	assert_string_equal(b.v[0], "m3");
	mr_strvec_release(&a);
	mr_strvec_release(&b);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		assert_int_equal(mr_sim_parse_partition(bad[i], &a, &b, &e), MESHRUN_E_USAGE);
		assert_non_null(strstr(e.msg, bad[i]));
		mr_strvec_release(&a);
		mr_strvec_release(&b);
	}
}

/* `meshsim fault --name NAME ARGS...`'s exit code. */
static int fault(const char *name, const char *w, const char *x, const char *y)
{
	char *argv[] = { "fault", "--name", (char *)name, (char *)w, (char *)x, (char *)y, NULL };
	int argc = 4 + (x != NULL) + (y != NULL);

	argv[argc] = NULL;
	return mr_sim_cmd_fault(argc, argv);
}

static void test_fault_refusals(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_sim_state st = { 0 };
	struct mr_buf b = MR_BUF_INIT, fl = MR_BUF_INIT;
	char dir[64], *p;
	const char *name = "mstf";

	(void)state;
	if (geteuid() != 0)
		skip(); /* the command itself needs root; the parsers are tested above */
	snprintf(dir, sizeof(dir), "/tmp/mst-faults.XXXXXX");
	assert_non_null(mkdtemp(dir));
	setenv("MESHSIM_STATE_DIR", dir, 1);
	st.name = (char *)name;
	st.subnet = 9;
	st.fixture = "mesh:2";
	st.cluster = mr_sim_cluster_new();
	mr_sim_cluster_add_host(st.cluster, "h1");
	mr_sim_cluster_add_host(st.cluster, "h2");
	mr_sim_cluster_add_cable(st.cluster, 0, "en2", 1, "en2");
	assert_int_equal(mr_sim_state_emit(&st, &b), 0);
	p = xasprintf("%s/%s", dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
	p = xasprintf("%s/%s/state.json", dir, name);
	assert_int_equal(mr_write_file(p, b.p, b.len, 0644, &err), 0);
	free(p);

	/* usage: 2 */
	assert_int_equal(fault(name, "rate", "h1:en2", "fast"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "rate", "h1:en2", NULL), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "loss", "h1:en2", "101"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "loss", "h1:en2", "5;reboot"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "flap", "h1:en2", "1ms"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "flap", "h1", "1s"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "partition", "h1", NULL), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "partition", "h1|h2", "h3"), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "partition", "h1;x|h2", NULL), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "heal", "h1", NULL), MR_SIM_EXIT_USAGE);
	assert_int_equal(fault(name, "rate", NULL, NULL), MR_SIM_EXIT_USAGE);
	/* no such host or cable: 1 */
	assert_int_equal(fault(name, "rate", "h9:en2", "1gbit"), MR_SIM_EXIT_FAIL);
	assert_int_equal(fault(name, "rate", "h1:en7", "1gbit"), MR_SIM_EXIT_FAIL);
	assert_int_equal(fault(name, "loss", "h1:$(reboot)", "5"), MR_SIM_EXIT_FAIL);
	assert_int_equal(fault(name, "flap", "h1;x:en2", "1s"), MR_SIM_EXIT_FAIL);
	assert_int_equal(fault(name, "partition", "h1|h9", NULL), MR_SIM_EXIT_FAIL);
	/* clearing what is not there changes nothing and succeeds */
	assert_int_equal(fault(name, "rate", "h2:en2", "off"), 0);
	assert_int_equal(fault(name, "loss", "h1:en2", "0"), 0);
	assert_int_equal(fault(name, "flap", "h1:en2", "off"), 0);
	assert_int_equal(fault(name, "latency", "h1:en2", "0"), 0);
	assert_int_equal(fault(name, "heal", NULL, NULL), 0);
	assert_int_equal(fault(name, "partition", "off", NULL), 0);
	/* and nothing was recorded */
	p = xasprintf("%s/%s/faults", dir, name);
	if (mr_read_file(p, 4096, &fl, NULL) == 0)
		assert_int_equal(fl.len, 0);
	free(p);

	mr_sim_cluster_free(st.cluster);
	mr_buf_release(&b);
	mr_buf_release(&fl);
	assert_int_equal(mr_sim_rm_rf(dir), 0);
	unsetenv("MESHSIM_STATE_DIR");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_pct),
		cmocka_unit_test(test_period),
		cmocka_unit_test(test_partition),
		cmocka_unit_test(test_fault_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
