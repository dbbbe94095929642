/*
 * Unit tests for src/launch/extern.c: which launcher is picked (SLURM_JOB_ID,
 * --launcher, MESHRUN_LAUNCHER, the backend), the exact srun and mpirun command
 * lines and environments built, and when --mca mpi_yield_when_idle 1 is added.
 */
#include "common/compat.h"
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

/* v joined with '|' */
static char *joined(const struct mr_strvec *v)
{
	struct mr_buf b = MR_BUF_INIT;

	for (size_t i = 0; i < v->nr; i++)
		mr_buf_printf(&b, "%s%s", i ? "|" : "", v->v[i]);
	return mr_buf_detach(&b, NULL);
}

static void check_vec(const struct mr_strvec *v, const char *want)
{
	char *got = joined(v);

	assert_string_equal(got, want);
	free(got);
}

static void test_pick_launcher(void **state)
{
	static const struct {
		const char *opt, *env, *job;
		enum mr_backend b;
		int rc;
		enum mr_launcher want;
		const char *msg; /* part of the error */
	} cases[] = {
		{ NULL, NULL, NULL, MR_BACKEND_RING, 0, MR_LAUNCHER_MESHRUN, NULL },
		{ NULL, NULL, "", MR_BACKEND_RING, 0, MR_LAUNCHER_MESHRUN, NULL },
		{ NULL, NULL, "4242", MR_BACKEND_RING, 0, MR_LAUNCHER_SRUN, NULL },
		{ "auto", NULL, "4242", MR_BACKEND_RING, 0, MR_LAUNCHER_SRUN, NULL },
		{ "meshrun", NULL, "4242", MR_BACKEND_RING, 0, MR_LAUNCHER_MESHRUN, NULL },
		{ NULL, "meshrun", "4242", MR_BACKEND_RING, 0, MR_LAUNCHER_MESHRUN, NULL },
		{ "srun", "meshrun", NULL, MR_BACKEND_RING, 0, MR_LAUNCHER_SRUN, NULL },
		{ "mpirun", NULL, NULL, MR_BACKEND_RING, 0, MR_LAUNCHER_MPIRUN, NULL },
		{ NULL, NULL, NULL, MR_BACKEND_MPI, 0, MR_LAUNCHER_MPIRUN, NULL },
		{ NULL, NULL, "7", MR_BACKEND_MPI, 0, MR_LAUNCHER_MPIRUN, NULL },
		{ "srun", NULL, NULL, MR_BACKEND_MPI, 0, MR_LAUNCHER_SRUN, NULL },
		{ "meshrun", NULL, NULL, MR_BACKEND_MPI, MESHRUN_E_USAGE, 0, "mpi backend needs mpirun" },
		{ "pbs", NULL, NULL, MR_BACKEND_RING, MESHRUN_E_USAGE, 0, "--launcher 'pbs': unknown launcher" },
		{ NULL, "pbs", NULL, MR_BACKEND_RING, MESHRUN_E_USAGE, 0, "MESHRUN_LAUNCHER 'pbs'" },
		{ "mpirun", NULL, NULL, MR_BACKEND_NCCL, MESHRUN_E_USAGE, 0, "nccl backend needs MLX_RANK" },
		{ NULL, NULL, "1", MR_BACKEND_JACCL, MESHRUN_E_USAGE, 0, "--launcher meshrun starts ranks over ssh" },
		{ "srun", NULL, NULL, MR_BACKEND_JACCL_RING, MESHRUN_E_USAGE, 0, "jaccl-ring backend" },
		{ NULL, NULL, NULL, MR_BACKEND_NCCL, 0, MR_LAUNCHER_MESHRUN, NULL },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		enum mr_launcher l = (enum mr_launcher)99;
		int rc = mr_launch_pick_launcher(cases[i].opt, cases[i].env, cases[i].job, cases[i].b, &l, &err);

		if (rc != cases[i].rc)
			fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err.msg);
		if (rc == 0 && l != cases[i].want)
			fail_msg("case %zu: launcher %s, want %s", i, mr_launcher_name(l),
				 mr_launcher_name(cases[i].want));
		if (cases[i].msg && !strstr(err.msg, cases[i].msg))
			fail_msg("case %zu: message '%s' lacks '%s'", i, err.msg, cases[i].msg);
	}
}

static void test_slurm_hosts_and_srun_argv(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse("[{\"ssh\": \"n1\", \"ips\": [\"10.0.0.1\"]},"
					  " {\"ssh\": \"n1\", \"ips\": [\"10.0.0.1\"]},"
					  " {\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]},"
					  " {\"ssh\": \"n2\", \"ips\": [\"10.0.0.2\"]},"
					  " {\"ssh\": \"localhost\", \"ips\": [\"127.0.0.1\"]}]");
	struct mr_buf nodes = MR_BUF_INIT, lines = MR_BUF_INIT;
	struct mr_strvec argv = MR_STRVEC_INIT;
	char *cmd[] = { "/bin/prog", "a b", "--x", NULL };

	(void)state;
	assert_int_equal(mr_launch_slurm_hosts(hf, "me", &nodes, &lines), 0);
	assert_string_equal(mr_buf_cstr(&nodes), "n1,me,n2");
	assert_string_equal(mr_buf_cstr(&lines), "n1\nn1\nme\nn2\nme\n");
	assert_int_equal(mr_launch_srun_argv("/usr/bin/srun", hf->nhosts, mr_buf_cstr(&nodes), "/work",
					     cmd, &argv, &err), 0);
	check_vec(&argv, "/usr/bin/srun|--ntasks=5|--nodelist=n1,me,n2|--distribution=arbitrary|"
			 "--kill-on-bad-exit=1|--export=ALL|--chdir=/work|--|/bin/prog|a b|--x");
	mr_strvec_release(&argv);
	assert_int_equal(mr_launch_srun_argv("srun", 2, "me", NULL, cmd, &argv, &err), 0);
	check_vec(&argv, "srun|--ntasks=2|--nodelist=me|--distribution=arbitrary|"
			 "--kill-on-bad-exit=1|--export=ALL|--|/bin/prog|a b|--x");
	mr_strvec_release(&argv);
	mr_buf_release(&nodes);
	mr_buf_release(&lines);
	mr_hostfile_free(hf);
}

/* The ring job's environment under an external launcher: no MLX_RANK, the file's path, the
 * token; and mpirun's command line is the mpi backend's, with -x for each. */
static void test_extern_env_and_mpirun_argv(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = hf_parse("[{\"ssh\": \"h1\", \"ips\": [\"10.0.0.1\"]},"
					  " {\"ssh\": \"h2\", \"ips\": [\"10.0.0.2\"]}]");
	struct mr_launch_env_opts eo = { 0 };
	struct mr_strvec user = MR_STRVEC_INIT, env = MR_STRVEC_INIT, argv = MR_STRVEC_INIT;
	struct mr_strvec margs = MR_STRVEC_INIT;
	struct mr_launch_env e;
	char *cmd[] = { "prog", NULL };

	(void)state;
	assert_int_equal(mr_strvec_push(&user, "A=x,y"), 0);
	eo.backend = MR_BACKEND_RING;
	eo.starting_port = 5000;
	eo.connections_per_ip = 1;
	eo.repeat = 1;
	eo.job_token = "tok";
	eo.user_env = &user;
	assert_int_equal(mr_launch_env_build(hf, &eo, &e, &err), 0);
	assert_int_equal(mr_launch_extern_env(&e, "/shared/.meshrun.X", "tok", &env), 0);
	check_vec(&env, "A=x,y|MLX_HOSTFILE=/shared/.meshrun.X/hostfile.json|MESHRUN_JOB_TOKEN=tok");
	assert_null(mr_strvec_getenv(&env, "MLX_RANK"));
	assert_int_equal(mr_strvec_push(&margs, "--mca btl self,tcp"), 0);
	assert_int_equal(mr_launch_mpi_argv("mpirun", false, "/tmp/hf", NULL, &env, &margs, cmd,
					    &argv, &err), 0);
	check_vec(&argv, "mpirun|--hostfile|/tmp/hf|-x|A=x,y|-x|MLX_HOSTFILE=/shared/.meshrun.X/hostfile.json|"
			 "-x|MESHRUN_JOB_TOKEN=tok|--mca|btl|self,tcp|--|prog");
	/* files but no directory: refused */
	mr_strvec_release(&env);
	errno = 0;
	assert_int_equal(mr_launch_extern_env(&e, NULL, "tok", &env), -1);
	assert_int_equal(errno, EINVAL);
	mr_strvec_release(&env);
	mr_strvec_release(&argv);
	mr_strvec_release(&margs);
	mr_strvec_release(&user);
	mr_launch_env_release(&e);
	mr_hostfile_free(hf);
}

static void test_mpi_yield(void **state)
{
	struct mr_hostfile *hf = hf_parse("[{\"ssh\": \"a\"}, {\"ssh\": \"a\"}, {\"ssh\": \"a\"},"
					  " {\"ssh\": \"b\"}]");
	struct mr_strvec args = MR_STRVEC_INIT;

	(void)state;
	assert_true(mr_launch_mpi_wants_yield(hf, 2, NULL, NULL));  /* 3 on 'a' > 2 cores */
	assert_false(mr_launch_mpi_wants_yield(hf, 3, NULL, NULL)); /* fits */
	assert_false(mr_launch_mpi_wants_yield(hf, 0, NULL, NULL)); /* unknown core count */
	assert_false(mr_launch_mpi_wants_yield(hf, 2, NULL, "0"));  /* OMPI_MCA_ variable set */
	assert_int_equal(mr_strvec_push(&args, "--oversubscribe"), 0);
	assert_true(mr_launch_mpi_wants_yield(hf, 2, &args, NULL));
	assert_int_equal(mr_strvec_push(&args, "--mca mpi_yield_when_idle 0"), 0);
	assert_false(mr_launch_mpi_wants_yield(hf, 2, &args, NULL)); /* the user's own */
	mr_strvec_release(&args);
	mr_hostfile_free(hf);
}

/* the "--mca plm_rsh_args '-F FILE'" that --ssh-config adds under mpirun */
static void test_mpi_ssh_arg(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec margs = MR_STRVEC_INIT, user = MR_STRVEC_INIT, argv = MR_STRVEC_INIT;
	char *cmd[] = { "prog", "-v", NULL };

	(void)state;
	/* nothing to pass: no file (every host local, or no --ssh-config), or empty */
	assert_int_equal(mr_launch_mpi_ssh_arg(NULL, NULL, false, NULL, NULL, &margs, &err), 0);
	assert_int_equal(mr_launch_mpi_ssh_arg("", NULL, false, NULL, NULL, &margs, &err), 0);
	assert_int_equal(margs.nr, 0);

	/* the file travels as one plm_rsh_args value, the command line as mpirun gets it */
	assert_int_equal(mr_launch_mpi_ssh_arg("/run/meshsim/c1/ssh_config", NULL, false, NULL, NULL, &margs, &err), 1);
	check_vec(&margs, "--mca plm_rsh_args '-F /run/meshsim/c1/ssh_config'");
	assert_int_equal(mr_strvec_push(&margs, "--mca btl tcp,self"), 0);
	assert_int_equal(mr_launch_mpi_argv("mpirun", false, "/tmp/hf", NULL, NULL, &margs, cmd, &argv, &err), 0);
	check_vec(&argv, "mpirun|--hostfile|/tmp/hf|--mca|plm_rsh_args|-F /run/meshsim/c1/ssh_config|"
			 "--mca|btl|tcp,self|--|prog|-v");
	mr_strvec_release(&margs);
	mr_strvec_release(&argv);

	/* a quote in the path survives the quoting and the split */
	assert_int_equal(mr_launch_mpi_ssh_arg("/tmp/it's/cfg", NULL, false, NULL, NULL, &margs, &err), 1);
	assert_int_equal(mr_launch_mpi_argv("mpirun", false, "/h", NULL, NULL, &margs, cmd, &argv, &err), 0);
	check_vec(&argv, "mpirun|--hostfile|/h|--mca|plm_rsh_args|-F /tmp/it's/cfg|--|prog|-v");
	mr_strvec_release(&margs);
	mr_strvec_release(&argv);

	/* the user's own plm_rsh_args (--mpi-arg or OMPI_MCA_plm_rsh_args) wins */
	assert_int_equal(mr_strvec_push(&user, "--oversubscribe"), 0);
	assert_int_equal(mr_launch_mpi_ssh_arg("cfg", NULL, false, &user, NULL, &margs, &err), 1);
	mr_strvec_release(&margs);
	assert_int_equal(mr_strvec_push(&user, "--mca plm_rsh_args '-p 2222'"), 0);
	assert_int_equal(mr_launch_mpi_ssh_arg("cfg", NULL, false, &user, NULL, &margs, &err), 0);
	assert_int_equal(mr_launch_mpi_ssh_arg("cfg", NULL, false, NULL, "-p 2222", &margs, &err), 0);
	assert_int_equal(margs.nr, 0);

	/* the host-key options travel too (issue 37), alone or with the file */
	assert_int_equal(mr_launch_mpi_ssh_arg(NULL, "/k/kh", true, NULL, NULL, &margs, &err), 1);
	assert_int_equal(mr_launch_mpi_ssh_arg("cfg", NULL, true, NULL, NULL, &margs, &err), 1);
	check_vec(&margs, "--mca plm_rsh_args '-o UserKnownHostsFile=/k/kh -o StrictHostKeyChecking=accept-new'|"
			  "--mca plm_rsh_args '-F cfg -o StrictHostKeyChecking=accept-new'");
	mr_strvec_release(&margs);
	assert_int_equal(mr_launch_mpi_ssh_arg(NULL, "/my kh", false, NULL, NULL, &margs, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "known_hosts file '/my kh'"));
	err = (struct meshrun_err)MESHRUN_ERR_INIT;

	/* Open MPI splits plm_rsh_args at whitespace: such a path is refused, named */
	assert_int_equal(mr_launch_mpi_ssh_arg("/tmp/my dir/cfg", NULL, false, NULL, NULL, &margs, &err), MESHRUN_E_USAGE);
	assert_non_null(strstr(err.msg, "'/tmp/my dir/cfg'"));
	assert_non_null(strstr(err.msg, "whitespace"));
	assert_int_equal(margs.nr, 0);
	mr_strvec_release(&user);
}

/* Open MPI as root: one line saying how to allow it, unless allowed (issue 15). */
static void test_mpi_root_refusal(void **state)
{
	const char *ompi = "mpirun (Open MPI) 4.1.4\n\nReport bugs to https://www.open-mpi.org/community/help/\n";
	struct mr_strvec args = MR_STRVEC_INIT;
	const char *m;

	(void)state;
	m = mr_launch_mpi_root_refusal(true, ompi, &args, NULL, NULL);
	assert_non_null(m);
	assert_non_null(strstr(m, "--mpi-arg --allow-run-as-root"));
	assert_non_null(strstr(m, "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"));
	assert_null(strchr(m, '\n'));
	assert_null(mr_launch_mpi_root_refusal(false, ompi, &args, NULL, NULL));
	assert_null(mr_launch_mpi_root_refusal(true, "HYDRA build details: (MPICH)", &args, NULL, NULL));
	assert_null(mr_launch_mpi_root_refusal(true, ompi, &args, "1", "1"));
	assert_non_null(mr_launch_mpi_root_refusal(true, ompi, &args, "1", NULL));
	assert_int_equal(mr_strvec_push(&args, "--oversubscribe --allow-run-as-root"), 0);
	assert_null(mr_launch_mpi_root_refusal(true, ompi, &args, NULL, NULL));
	mr_strvec_release(&args);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick_launcher),
		cmocka_unit_test(test_slurm_hosts_and_srun_argv),
		cmocka_unit_test(test_extern_env_and_mpirun_argv),
		cmocka_unit_test(test_mpi_root_refusal),
		cmocka_unit_test(test_mpi_yield),
		cmocka_unit_test(test_mpi_ssh_arg),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
