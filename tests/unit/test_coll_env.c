/* Unit tests for src/coll/env.c: MLX ring hostfiles and the rank variables. */
#include "common/compat.h"
#include "coll/env.h"

#include <setjmp.h>
#include <cmocka.h>

static int parse(const char *text, struct mr_ring_hosts *h, struct meshrun_err *err)
{
	return mr_ring_hosts_parse(text, strlen(text), "hosts.json", h, err);
}

static void test_mlx_format(void **state)
{
	struct mr_ring_hosts h;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	/* json.dump(hosts, f, indent=4) as mlx.launch writes it, 2 connections per ip */
	const char *text = "[\n    [\n        \"10.0.0.1:32323\",\n        \"10.0.0.1:32324\"\n    ],\n"
			   "    [\n        \"10.0.0.2:32323\",\n        \"10.0.0.2:32324\"\n    ],\n"
			   "    [\n        \"10.0.0.3:32323\",\n        \"10.0.0.3:32324\"\n    ]\n]";

	(void)state;
	assert_int_equal(parse(text, &h, &err), 0);
	assert_int_equal(h.nranks, 3);
	assert_int_equal(h.naddrs, 2);
	assert_string_equal(MR_RING_ADDR(&h, 2, 1)->text, "10.0.0.3:32324");
	assert_int_equal(MR_RING_ADDR(&h, 1, 0)->sa.ss_family, AF_INET);
	mr_ring_hosts_free(&h);
	/* compact, and IPv6 */
	assert_int_equal(parse("[[\"[::1]:5000\"],[\"127.0.0.1:5001\"]]", &h, &err), 0);
	assert_int_equal(MR_RING_ADDR(&h, 0, 0)->sa.ss_family, AF_INET6);
	mr_ring_hosts_free(&h);
}

static void test_flat_form(void **state)
{
	struct mr_ring_hosts h;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(parse("[\"10.0.0.1:5000\", \"10.0.0.2:5000\"]", &h, &err), 0);
	assert_int_equal(h.nranks, 2);
	assert_int_equal(h.naddrs, 1);
	assert_string_equal(MR_RING_ADDR(&h, 1, 0)->text, "10.0.0.2:5000");
	mr_ring_hosts_free(&h);
}

static void test_errors(void **state)
{
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "[[\"10.0.0.1:5000\"], [\"10.0.0.2\"]]", "hosts.json: [1][0]: bad address '10.0.0.2'" },
		{ "[[\"10.0.0.1:0\"]]", "port '0' is not in 1..65535" },
		{ "[[\"10.0.0.1:5000x\"]]", "port '5000x'" },
		{ "[[\"node1:5000\"]]", "'node1' is not a numeric IP address" },
		{ "[[\"10.0.0.1:1\", \"10.0.0.1:2\"], [\"10.0.0.2:1\"]]", "[1]: rank 1 has 1 addresses but rank 0 has 2" },
		{ "[[\"10.0.0.1:1\"], [5]]", "[1][0]: expected an \"ip:port\" string" },
		{ "[[\"10.0.0.1:1\"], {}]", "[1]: expected a list" },
		{ "[]", "expected a non-empty list" },
		{ "{\"hosts\": []}", "expected a non-empty list" },
		{ "[[\"10.0.0.1:1\"]", "malformed JSON" },
		{ "[[]]", "rank 0 has no addresses" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct mr_ring_hosts h = { 0, 0, NULL };
		struct meshrun_err err = MESHRUN_ERR_INIT;
		assert_true(parse(cases[i].text, &h, &err) < 0);
		if (!strstr(err.msg, cases[i].want))
			fail_msg("case %zu: '%s' does not contain '%s'", i, err.msg, cases[i].want);
		assert_true(strncmp(err.msg, "hosts.json", 10) == 0);
		assert_null(h.addrs);
	}
}

static void clear_env(void)
{
	unsetenv("MLX_RANK");
	unsetenv("SLURM_PROCID");
	unsetenv("SLURM_NTASKS");
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("OMPI_COMM_WORLD_SIZE");
}

static void test_env_rank(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rank = -1, size = -1;
	const char *which = NULL;

	(void)state;
	clear_env();
	assert_int_equal(mr_env_rank(&rank, &size, &which, &err), 0);
	setenv("OMPI_COMM_WORLD_RANK", "3", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	assert_int_equal(mr_env_rank(&rank, &size, &which, &err), 1);
	assert_int_equal(rank, 3);
	assert_int_equal(size, 4);
	assert_string_equal(which, "OMPI_COMM_WORLD_RANK");
	setenv("SLURM_PROCID", "1", 1); /* mpirun inside SLURM: Open MPI's rank wins */
	setenv("SLURM_NTASKS", "2", 1);
	assert_int_equal(mr_env_rank(&rank, &size, &which, &err), 1);
	assert_int_equal(rank, 3);
	assert_string_equal(which, "OMPI_COMM_WORLD_RANK");
	unsetenv("OMPI_COMM_WORLD_RANK"); /* started by srun */
	unsetenv("OMPI_COMM_WORLD_SIZE");
	assert_int_equal(mr_env_rank(&rank, &size, &which, &err), 1);
	assert_int_equal(rank, 1);
	assert_int_equal(size, 2);
	assert_string_equal(which, "SLURM_PROCID");
	setenv("MLX_RANK", "0", 1); /* MLX_RANK first, no size */
	assert_int_equal(mr_env_rank(&rank, &size, &which, &err), 1);
	assert_int_equal(rank, 0);
	assert_int_equal(size, -1);
	setenv("MLX_RANK", "x1", 1);
	assert_true(mr_env_rank(&rank, &size, &which, &err) < 0);
	assert_non_null(strstr(err.msg, "MLX_RANK='x1'"));
	clear_env();
	setenv("SLURM_PROCID", "2", 1);
	setenv("SLURM_NTASKS", "2", 1);
	memset(&err, 0, sizeof(err));
	assert_true(mr_env_rank(&rank, &size, &which, &err) < 0);
	assert_non_null(strstr(err.msg, "SLURM_PROCID=2 is not below SLURM_NTASKS=2"));
	clear_env();
}

static void test_env_timeout(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t ms;

	(void)state;
	unsetenv("MESHRUN_TIMEOUT");
	assert_int_equal(mr_env_timeout_ms(&ms, &err), 0);
	assert_int_equal(ms, MR_DEFAULT_TIMEOUT_MS);
	setenv("MESHRUN_TIMEOUT", "2.5", 1);
	assert_int_equal(mr_env_timeout_ms(&ms, &err), 0);
	assert_int_equal(ms, 2500);
	setenv("MESHRUN_TIMEOUT", "soon", 1);
	assert_true(mr_env_timeout_ms(&ms, &err) < 0);
	assert_non_null(strstr(err.msg, "MESHRUN_TIMEOUT='soon'"));
	unsetenv("MESHRUN_TIMEOUT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mlx_format),
		cmocka_unit_test(test_flat_form),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_env_rank),
		cmocka_unit_test(test_env_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
