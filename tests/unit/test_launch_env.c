/*
 * Unit tests for src/launch/env.c: the per-backend environment built from
 * MLX-format hostfiles equals what mlx.launch sets (values taken from
 * python/mlx/_distributed_utils/launch.py), and bad input is rejected naming
 * the field.
 */
#include "common/compat.h"
#include "launch/env.h"
#include "launch/extern.h"
#include "common/err.h"

#include <setjmp.h>
#include <cmocka.h>

static struct mr_hostfile *hf_parse(const char *text)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = NULL;

	if (mr_hostfile_parse(text, strlen(text), "hosts.json", &hf, &err) < 0)
		fail_msg("parse: %s", err.msg);
	return hf;
}

static struct mr_launch_env_opts opts_for(enum mr_backend b)
{
	struct mr_launch_env_opts o = { 0 };

	o.backend = b;
	o.starting_port = 32323;
	o.connections_per_ip = 1;
	o.nccl_port = 12345;
	o.repeat = 1;
	o.job_token = "tok";
	return o;
}

/* The full environment of one rank as "K=V;K=V;...". */
static char *rank_env(const struct mr_launch_env *e, size_t rank, const char *dir)
{
	struct mr_strvec v = MR_STRVEC_INIT;
	struct mr_buf b = MR_BUF_INIT;

	assert_int_equal(mr_launch_env_for_rank(e, rank, dir, &v), 0);
	for (size_t i = 0; i < v.nr; i++)
		mr_buf_printf(&b, "%s%s", i ? ";" : "", v.v[i]);
	mr_strvec_release(&v);
	return mr_buf_detach(&b, NULL);
}

static void check_rank_env(const struct mr_launch_env *e, size_t rank, const char *dir,
			   const char *want)
{
	char *got = rank_env(e, rank, dir);

	assert_string_equal(got, want);
	free(got);
}

static const char two_ips[] =
	"[{\"ssh\": \"m1\", \"ips\": [\"10.0.0.1\", \"10.0.1.1\"]},\n"
	" {\"ssh\": \"m2\", \"ips\": [\"10.0.0.2\", \"10.0.1.2\"]},\n"
	" {\"ssh\": \"m3\", \"ips\": [\"10.0.0.3\"]}]\n";

static void test_ring_ports_per_ip_and_connection(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(two_ips);
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_RING);
	struct mr_launch_env e;

	(void)state;
	o.starting_port = 5000;
	o.connections_per_ip = 2;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nranks, 3);
	assert_int_equal(e.nfiles, 1);
	assert_string_equal(e.files[0].var, "MLX_HOSTFILE");
	assert_string_equal(e.files[0].content,
			    "[[\"10.0.0.1:5000\", \"10.0.0.1:5001\", \"10.0.1.1:5002\", \"10.0.1.1:5003\"], "
			    "[\"10.0.0.2:5004\", \"10.0.0.2:5005\", \"10.0.1.2:5006\", \"10.0.1.2:5007\"], "
			    "[\"10.0.0.3:5008\", \"10.0.0.3:5009\"]]\n");
	check_rank_env(&e, 0, "/tmp/j", "MLX_HOSTFILE=/tmp/j/hostfile.json;MLX_RANK=0;MESHRUN_JOB_TOKEN=tok");
	check_rank_env(&e, 2, "/tmp/j", "MLX_HOSTFILE=/tmp/j/hostfile.json;MLX_RANK=2;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);
}

static void test_ring_default_ports_verbose_and_user_env(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(
		"{\"backend\": \"ring\", \"envs\": [\"A=1\"], \"hosts\": ["
		"{\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]},"
		"{\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]}]}");
	struct mr_strvec user = MR_STRVEC_INIT;
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_RING);
	struct mr_launch_env e;

	(void)state;
	mr_strvec_push(&user, "A=1");
	mr_strvec_push(&user, "B=x y=z");
	mr_strvec_push(&user, "A=2"); /* a later --env replaces an earlier one */
	mr_strvec_push(&user, "EMPTY");
	o.user_env = &user;
	o.verbose = true;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_string_equal(e.files[0].content, "[[\"127.0.0.1:32323\"], [\"127.0.0.1:32324\"]]\n");
	check_rank_env(&e, 1, "/d",
		       "A=2;B=x y=z;EMPTY=;MLX_RING_VERBOSE=1;MLX_HOSTFILE=/d/hostfile.json;MLX_RANK=1;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_strvec_release(&user);
	mr_hostfile_free(hf);
}

static void test_ring_single_rank_gets_empty_hostfile(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse("[{\"ssh\": \"a\", \"ips\": [\"10.1.1.1\"]}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_RING);
	struct mr_launch_env e;

	(void)state;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	/* mlx.launch: json.dumps(...) if len > 1 else "", written with echo */
	assert_string_equal(e.files[0].content, "\n");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);
}

static void test_ring_errors(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse("[{\"ssh\": \"m1\", \"ips\": [\"10.0.0.1\"]}, {\"ssh\": \"m2\"}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_RING);
	struct mr_launch_env e;

	(void)state;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "host 'm2' (hosts[1]) has no 'ips'"));
	mr_hostfile_free(hf);

	mr_err_clear(&err);
	hf = hf_parse(two_ips);
	o.starting_port = 65533;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "past 65535 at host 'm2' (hosts[1])"));
	mr_hostfile_free(hf);
}

static const char jaccl_mesh[] =
	"{\"backend\": \"jaccl\", \"envs\": [], \"hosts\": [\n"
	" {\"ssh\": \"m1\", \"ips\": [\"192.168.1.1\"], \"rdma\": [null, \"rdma_en2\", [\"rdma_en3\", \"rdma_en4\"]]},\n"
	" {\"ssh\": \"m2\", \"ips\": [\"192.168.1.2\"], \"rdma\": [\"rdma_en2\", null, \"rdma_en3\"]},\n"
	" {\"ssh\": \"m3\", \"ips\": [\"192.168.1.3\"], \"rdma\": [[\"rdma_en3\", \"rdma_en4\"], \"rdma_en2\", null]}]}";

static void test_jaccl_mesh(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(jaccl_mesh);
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_JACCL);
	struct mr_launch_env e;

	(void)state;
	o.starting_port = 40000;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nfiles, 1);
	assert_string_equal(e.files[0].var, "MLX_IBV_DEVICES");
	assert_string_equal(e.files[0].content,
			    "[[null, \"rdma_en2\", [\"rdma_en3\", \"rdma_en4\"]], "
			    "[\"rdma_en2\", null, \"rdma_en3\"], "
			    "[[\"rdma_en3\", \"rdma_en4\"], \"rdma_en2\", null]]\n");
	check_rank_env(&e, 1, "/j",
		       "MLX_JACCL_COORDINATOR=192.168.1.1:40000;" /* no MLX_DISTRIBUTED_BACKEND (issue 15) */
		       "MLX_IBV_DEVICES=/j/ibv_devices.json;MLX_RANK=1;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);
}

static void test_jaccl_ring(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(
		"[{\"ssh\": \"a\", \"ips\": [\"10.0.0.1\"], \"rdma\": [null, \"rdma_en3\", null, \"rdma_en2\"]},"
		" {\"ssh\": \"b\", \"ips\": [\"10.0.0.2\"], \"rdma\": [\"rdma_en2\", null, \"rdma_en3\", null]},"
		" {\"ssh\": \"c\", \"ips\": [\"10.0.0.3\"], \"rdma\": [null, \"rdma_en2\", null, \"rdma_en3\"]},"
		" {\"ssh\": \"d\", \"ips\": [\"10.0.0.4\"], \"rdma\": [\"rdma_en3\", null, \"rdma_en2\", null]}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_JACCL_RING);
	struct mr_launch_env e;

	(void)state;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	check_rank_env(&e, 3, "/j",
		       "MLX_JACCL_COORDINATOR=10.0.0.1:32323;"
		       "MLX_JACCL_RING=1;MLX_IBV_DEVICES=/j/ibv_devices.json;MLX_RANK=3;MESHRUN_JOB_TOKEN=tok");
	assert_string_equal(e.files[0].content,
			    "[[null, \"rdma_en3\", null, \"rdma_en2\"], [\"rdma_en2\", null, \"rdma_en3\", null], "
			    "[null, \"rdma_en2\", null, \"rdma_en3\"], [\"rdma_en3\", null, \"rdma_en2\", null]]\n");
	mr_launch_env_release(&e);
	/* the same matrix is not a mesh: jaccl refuses it, naming host and column */
	mr_err_clear(&err);
	o.backend = MR_BACKEND_JACCL;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "malformed hostfile"));
	assert_non_null(strstr(err.msg, "host 0 ('a')"));
	assert_non_null(strstr(err.msg, "rdma[2]"));
	mr_hostfile_free(hf);
}

static void test_jaccl_malformed(void **state)
{
	static const struct {
		const char *text, *want1, *want2;
	} cases[] = {
		{ "[{\"ssh\": \"a\", \"ips\": [\"1.1.1.1\"], \"rdma\": [\"rdma_en2\", \"rdma_en2\"]},"
		  " {\"ssh\": \"b\", \"ips\": [\"1.1.1.2\"], \"rdma\": [\"rdma_en2\", null]}]",
		  "host 0 ('a')", "rdma[0]" },
		{ "[{\"ssh\": \"a\", \"ips\": [\"1.1.1.1\"], \"rdma\": [null, \"rdma_en2\"]},"
		  " {\"ssh\": \"b\", \"ips\": [\"1.1.1.2\"], \"rdma\": [\"rdma_en2\", null, null]}]",
		  "host 1 ('b')", "3 entries" },
		{ "[{\"ssh\": \"a\", \"ips\": [\"1.1.1.1\"], \"rdma\": [null, \"rdma_en2\"]},"
		  " {\"ssh\": \"b\", \"ips\": [\"1.1.1.2\"]}]",
		  "host 1 ('b')", "malformed hostfile" },
		{ "[{\"ssh\": \"a\", \"rdma\": [null, \"rdma_en2\"]},"
		  " {\"ssh\": \"b\", \"ips\": [\"1.1.1.2\"], \"rdma\": [\"rdma_en2\", null]}]",
		  "rank 0 needs an IP", "host 'a' (hosts[0]) has no 'ips'" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_hostfile *hf = hf_parse(cases[i].text);
		struct mr_launch_env_opts o = opts_for(MR_BACKEND_JACCL);
		struct mr_launch_env e;

		assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), MESHRUN_E_USAGE);
		if (!strstr(err.msg, cases[i].want1) || !strstr(err.msg, cases[i].want2))
			fail_msg("case %zu: '%s' lacks '%s' / '%s'", i, err.msg, cases[i].want1,
				 cases[i].want2);
		mr_hostfile_free(hf);
	}
}

static void test_nccl(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(
		"[{\"ssh\": \"g1\", \"ips\": [\"10.2.0.1\"]}, {\"ssh\": \"g1\", \"ips\": [\"10.2.0.1\"]},"
		" {\"ssh\": \"g2\", \"ips\": [\"10.2.0.2\"]}, {\"ssh\": \"g2\", \"ips\": [\"10.2.0.2\"]}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_NCCL);
	struct mr_launch_env e;

	(void)state;
	o.repeat = 2;
	o.verbose = true;
	o.nccl_port = 23456;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nfiles, 0);
	check_rank_env(&e, 0, NULL,
		       "NCCL_DEBUG=INFO;NCCL_HOST_IP=10.2.0.1;NCCL_PORT=23456;MLX_WORLD_SIZE=4;"
		       "CUDA_VISIBLE_DEVICES=0;MLX_RANK=0;MESHRUN_JOB_TOKEN=tok");
	check_rank_env(&e, 3, NULL,
		       "NCCL_DEBUG=INFO;NCCL_HOST_IP=10.2.0.1;NCCL_PORT=23456;MLX_WORLD_SIZE=4;"
		       "CUDA_VISIBLE_DEVICES=1;MLX_RANK=3;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);

	mr_err_clear(&err);
	hf = hf_parse("[{\"ssh\": \"g1\"}, {\"ssh\": \"g2\", \"ips\": [\"10.2.0.2\"]}]");
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "nccl backend: rank 0 needs an IP"));
	mr_hostfile_free(hf);
}

static void test_env_names(void **state)
{
	static const struct {
		const char *kv;
		int rc;
		const char *want; /* value stored, or a piece of the error */
	} cases[] = {
		{ "A=1", 0, "A=1" },
		{ "_x9=a=b", 0, "_x9=a=b" },
		{ "NOVALUE", 0, "NOVALUE=" },
		{ "9A=1", MESHRUN_E_USAGE, "invalid variable name '9A'" },
		{ "A-B=1", MESHRUN_E_USAGE, "invalid variable name 'A-B'" },
		{ "=1", MESHRUN_E_USAGE, "invalid variable name ''" },
		{ "A B=1", MESHRUN_E_USAGE, "--env 'A B=1'" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_strvec v = MR_STRVEC_INIT;
		int rc = mr_launch_env_add(&v, cases[i].kv, "--env", &err);

		assert_int_equal(rc, cases[i].rc);
		if (!rc)
			assert_string_equal(v.v[0], cases[i].want);
		else if (!strstr(err.msg, cases[i].want))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].want);
		mr_strvec_release(&v);
	}
}

static void test_mpi(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(
		"[{\"ssh\": \"b\"}, {\"ssh\": \"a\"}, {\"ssh\": \"b\"}, {\"ssh\": \"c\"}, {\"ssh\": \"a\"}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_MPI);
	struct mr_strvec mpi_args = MR_STRVEC_INIT, argv = MR_STRVEC_INIT;
	struct mr_buf hosts = MR_BUF_INIT, joined = MR_BUF_INIT;
	struct mr_strvec user = MR_STRVEC_INIT;
	struct mr_launch_env e;
	char *cmd[] = { "/bin/prog", "a b", NULL };

	(void)state;
	mr_strvec_push(&user, "X=1");
	o.user_env = &user;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	/* no MLX_RANK (mpirun numbers the ranks), no token (nothing reads it: issue 15) */
	check_rank_env(&e, 2, NULL, "X=1");
	assert_int_equal(mr_launch_mpi_hostfile(hf, &hosts), 0);
	assert_string_equal(mr_buf_cstr(&hosts), "b slots=2\na slots=2\nc slots=1\n");

	mr_strvec_push(&mpi_args, "--mca btl self,tcp");
	mr_strvec_push(&mpi_args, "--bind-to 'no ne' \"q\\\"x\" back\\ slash");
	assert_int_equal(mr_launch_mpi_argv("/usr/bin/mpirun", true, "/tmp/hf", "/w", &e.common, &mpi_args,
					    cmd, &argv, &err), 0);
	for (size_t i = 0; i < argv.nr; i++)
		mr_buf_printf(&joined, "%s<%s>", i ? " " : "", argv.v[i]);
	assert_string_equal(mr_buf_cstr(&joined),
			    "</usr/bin/mpirun> <--output> <:raw> <--hostfile> </tmp/hf> <-cwd> </w> "
			    "<-x> <X=1> <--mca> <btl> <self,tcp> "
			    "<--bind-to> <no ne> <q\"x> <back slash> <--> </bin/prog> <a b>");
	/* Open MPI 4 has no "--output :raw" */
	mr_strvec_release(&argv);
	mr_buf_reset(&joined);
	assert_int_equal(mr_launch_mpi_argv("mpirun", false, "/h", NULL, NULL, NULL, cmd, &argv, &err), 0);
	for (size_t i = 0; i < argv.nr; i++)
		mr_buf_printf(&joined, "%s<%s>", i ? " " : "", argv.v[i]);
	assert_string_equal(mr_buf_cstr(&joined), "<mpirun> <--hostfile> </h> <--> </bin/prog> <a b>");
	mr_launch_env_release(&e);
	mr_strvec_release(&mpi_args);
	mr_strvec_release(&argv);
	mr_strvec_release(&user);
	mr_buf_release(&hosts);
	mr_buf_release(&joined);
	mr_hostfile_free(hf);
}

/* --mpi-impl meshrun: ring's variables with the hostfile as MESHRUN_HOSTFILE (so
 * MLX's init("any") does not take its own ring) and MLX_MPI_LIBNAME, which the
 * user's env may set instead (issue 18) */
static void test_mpi_meshrun_impl(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(
		"[{\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]},"
		"{\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]}]");
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_MPI);
	struct mr_strvec user = MR_STRVEC_INIT;
	struct mr_launch_env e;

	(void)state;
	o.mpi_libname = "/p/lib/libmeshrun-mpi.so";
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_string_equal(e.files[0].content, "[[\"127.0.0.1:32323\"], [\"127.0.0.1:32324\"]]\n");
	check_rank_env(&e, 1, "/d",
		       "MLX_MPI_LIBNAME=/p/lib/libmeshrun-mpi.so;MESHRUN_HOSTFILE=/d/hostfile.json;MLX_RANK=1;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);

	mr_strvec_push(&user, "MLX_MPI_LIBNAME=/mine.so");
	o.user_env = &user;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	check_rank_env(&e, 0, "/d",
		       "MLX_MPI_LIBNAME=/mine.so;MESHRUN_HOSTFILE=/d/hostfile.json;MLX_RANK=0;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_strvec_release(&user);
	mr_hostfile_free(hf);
}

static void test_shlex_errors(void **state)
{
	static const char *const bad[] = { "a 'b", "\"x", "tail\\" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_strvec v = MR_STRVEC_INIT;

		assert_int_equal(mr_launch_shlex_split(bad[i], &v, &err), MESHRUN_E_USAGE);
		assert_non_null(strstr(err.msg, bad[i]));
		mr_strvec_release(&v);
	}
}

/* meshconfig's full-mesh hostfile: ring order, mesh_ips rows (h1-h3 double-cabled). */
static const char mesh3[] =
	"{\"backend\": \"ring\", \"envs\": [], \"hosts\": [\n"
	" {\"ssh\": \"h1\", \"ips\": [\"192.168.0.1\"], \"rdma\": [],\n"
	"  \"mesh_ips\": [null, [\"192.168.0.1\"], [\"192.168.0.5\", \"192.168.0.9\"]]},\n"
	" {\"ssh\": \"h2\", \"ips\": [\"192.168.0.2\"], \"rdma\": [],\n"
	"  \"mesh_ips\": [[\"192.168.0.2\"], null, [\"192.168.0.13\"]]},\n"
	" {\"ssh\": \"h3\", \"ips\": [\"192.168.0.14\"], \"rdma\": [],\n"
	"  \"mesh_ips\": [[\"192.168.0.6\", \"192.168.0.10\"], [\"192.168.0.14\"], null]}]}";

static void test_mesh(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(mesh3);
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_MESH);
	struct mr_launch_env e;
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hostfile_check_mesh(hf, &err), 0);
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nfiles, 2);
	assert_string_equal(e.files[0].var, "MESHRUN_MESH_HOSTFILE");
	assert_string_equal(e.files[0].content,
			    "[[null, [\"192.168.0.1:32323\"], [\"192.168.0.5:32323\", \"192.168.0.9:32323\"]], "
			    "[[\"192.168.0.2:32324\"], null, [\"192.168.0.13:32324\"]], "
			    "[[\"192.168.0.6:32325\", \"192.168.0.10:32325\"], [\"192.168.0.14:32325\"], null]]\n");
	assert_string_equal(e.files[1].var, "MLX_HOSTFILE"); /* the ring's too */
	check_rank_env(&e, 2, "/j",
		       "MESHRUN_MESH_HOSTFILE=/j/mesh.json;MLX_HOSTFILE=/j/hostfile.json;MLX_RANK=2;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	/* written back as read, mesh_ips after rdma */
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	assert_non_null(strstr(mr_buf_cstr(&b), "\"rdma\": [],\n            \"mesh_ips\": [\n                null,\n                [\n"));
	mr_buf_release(&b);
	mr_hostfile_free(hf);

	/* the two ends of h1-h3 disagree: refused, naming both */
	char *bad = strdup(mesh3);
	char *p = strstr(bad, ", \"192.168.0.9\"");
	memmove(p, p + strlen(", \"192.168.0.9\""), strlen(p + strlen(", \"192.168.0.9\"")) + 1);
	hf = hf_parse(bad);
	assert_true(mr_launch_env_build(hf, &o, &e, &err) < 0);
	assert_int_equal(err.code, MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "host 0 ('h1') mesh_ips[2] lists 1 address(es) but host 2 ('h3') mesh_ips[0] lists 2"));
	mr_hostfile_free(hf);
	free(bad);
	/* no mesh_ips: the mesh cannot run */
	hf = hf_parse(two_ips);
	mr_err_clear(&err);
	assert_true(mr_hostfile_check_mesh(hf, &err) < 0);
	assert_non_null(strstr(err.msg, "host 0 ('m1'): mesh_ips has 0 entries, expected 3"));
	mr_hostfile_free(hf);
}

static void test_backend_names(void **state)
{
	(void)state;
	assert_int_equal(mr_backend_parse("mesh"), MR_BACKEND_MESH);
	assert_int_equal(mr_backend_parse("ring"), MR_BACKEND_RING);
	assert_int_equal(mr_backend_parse("jaccl"), MR_BACKEND_JACCL);
	assert_int_equal(mr_backend_parse("jaccl-ring"), MR_BACKEND_JACCL_RING);
	assert_int_equal(mr_backend_parse("nccl"), MR_BACKEND_NCCL);
	assert_int_equal(mr_backend_parse("mpi"), MR_BACKEND_MPI);
	assert_int_equal(mr_backend_parse("Ring"), -1);
	assert_int_equal(mr_backend_parse(""), -1);
	assert_string_equal(mr_backend_name(MR_BACKEND_JACCL_RING), "jaccl-ring");
}

/* --mpi-impl meshrun on hostfiles with more than IPs (issue 18): the shim's
 * libmeshrun picks the mesh on a full mesh, jaccl where the rdma matrix is
 * complete (under the JACCL_* names: MLX_* would let MLX's own backends take
 * them), the ring otherwise; MLX_HOSTFILE is never set */
static void test_mpi_meshrun_impl_backends(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse(mesh3);
	struct mr_launch_env_opts o = opts_for(MR_BACKEND_MPI);
	struct mr_launch_env e;

	(void)state;
	o.mpi_libname = "/p/lib/libmeshrun-mpi.so";
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nfiles, 2);
	assert_string_equal(e.files[0].var, "MESHRUN_MESH_HOSTFILE");
	assert_string_equal(e.files[0].content,
			    "[[null, [\"192.168.0.1:32323\"], [\"192.168.0.5:32323\", \"192.168.0.9:32323\"]], "
			    "[[\"192.168.0.2:32324\"], null, [\"192.168.0.13:32324\"]], "
			    "[[\"192.168.0.6:32325\", \"192.168.0.10:32325\"], [\"192.168.0.14:32325\"], null]]\n");
	check_rank_env(&e, 2, "/j",
		       "MLX_MPI_LIBNAME=/p/lib/libmeshrun-mpi.so;MESHRUN_MESH_HOSTFILE=/j/mesh.json;"
		       "MESHRUN_HOSTFILE=/j/hostfile.json;MLX_RANK=2;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);

	/* a complete rdma matrix: jaccl, and no ring file (libmeshrun would take the ring first) */
	hf = hf_parse("[{\"ssh\": \"a\", \"ips\": [\"10.0.0.1\"], \"rdma\": [null, \"rdma_en2\", \"rdma_en3\"]},"
		      " {\"ssh\": \"b\", \"ips\": [\"10.0.0.2\"], \"rdma\": [\"rdma_en2\", null, \"rdma_en3\"]},"
		      " {\"ssh\": \"c\", \"ips\": [\"10.0.0.3\"], \"rdma\": [\"rdma_en2\", \"rdma_en3\", null]}]");
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	assert_int_equal(e.nfiles, 1);
	assert_string_equal(e.files[0].content,
			    "[[null, \"rdma_en2\", \"rdma_en3\"], [\"rdma_en2\", null, \"rdma_en3\"], "
			    "[\"rdma_en2\", \"rdma_en3\", null]]\n");
	check_rank_env(&e, 1, "/j",
		       "MLX_MPI_LIBNAME=/p/lib/libmeshrun-mpi.so;JACCL_COORDINATOR=10.0.0.1:32323;"
		       "JACCL_IBV_DEVICES=/j/ibv_devices.json;MLX_RANK=1;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);

	/* only the ring's neighbours cabled: jaccl's ring */
	hf = hf_parse("[{\"ssh\": \"a\", \"ips\": [\"10.0.0.1\"], \"rdma\": [null, \"rdma_en3\", null, \"rdma_en2\"]},"
		      " {\"ssh\": \"b\", \"ips\": [\"10.0.0.2\"], \"rdma\": [\"rdma_en2\", null, \"rdma_en3\", null]},"
		      " {\"ssh\": \"c\", \"ips\": [\"10.0.0.3\"], \"rdma\": [null, \"rdma_en2\", null, \"rdma_en3\"]},"
		      " {\"ssh\": \"d\", \"ips\": [\"10.0.0.4\"], \"rdma\": [\"rdma_en3\", null, \"rdma_en2\", null]}]");
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	check_rank_env(&e, 3, "/j",
		       "MLX_MPI_LIBNAME=/p/lib/libmeshrun-mpi.so;JACCL_COORDINATOR=10.0.0.1:32323;JACCL_RING=1;"
		       "JACCL_IBV_DEVICES=/j/ibv_devices.json;MLX_RANK=3;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);

	/* rdma rows with a hole (neither mesh nor ring): the ring over the IPs */
	hf = hf_parse("[{\"ssh\": \"a\", \"ips\": [\"10.0.0.1\"], \"rdma\": [null, null]},"
		      " {\"ssh\": \"b\", \"ips\": [\"10.0.0.2\"], \"rdma\": [\"rdma_en2\", null]}]");
	o.verbose = true;
	assert_int_equal(mr_launch_env_build(hf, &o, &e, &err), 0);
	check_rank_env(&e, 0, "/j",
		       "MLX_MPI_LIBNAME=/p/lib/libmeshrun-mpi.so;MLX_RING_VERBOSE=1;"
		       "MESHRUN_HOSTFILE=/j/hostfile.json;MLX_RANK=0;MESHRUN_JOB_TOKEN=tok");
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_ports_per_ip_and_connection),
		cmocka_unit_test(test_ring_default_ports_verbose_and_user_env),
		cmocka_unit_test(test_ring_single_rank_gets_empty_hostfile),
		cmocka_unit_test(test_ring_errors),
		cmocka_unit_test(test_jaccl_mesh),
		cmocka_unit_test(test_jaccl_ring),
		cmocka_unit_test(test_jaccl_malformed),
		cmocka_unit_test(test_nccl),
		cmocka_unit_test(test_env_names),
		cmocka_unit_test(test_mpi),
		cmocka_unit_test(test_mpi_meshrun_impl),
		cmocka_unit_test(test_mpi_meshrun_impl_backends),
		cmocka_unit_test(test_shlex_errors),
		cmocka_unit_test(test_mesh),
		cmocka_unit_test(test_backend_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
