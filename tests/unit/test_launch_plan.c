/*
 * Unit tests for src/launch/opts.c (the option table) and src/launch/plan.c (the
 * job plan): parsing and its usage errors; hosts with -n, --hosts against
 * --hostfile, the backend from the options or the hostfile, the checked
 * environment, the command resolved as mlx.launch does, the job token.
 */
#include "common/compat.h"
#include "common/opt.h"
#include "launch/launch.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#ifdef __APPLE__
#define MESHRUN_MPI_SHIM_NAME_FOR_TEST "libmeshrun-mpi.dylib"
#else
#define MESHRUN_MPI_SHIM_NAME_FOR_TEST "libmeshrun-mpi.so"
#endif

#define ARGV(...) ((char *[]){ "meshrun", __VA_ARGS__, NULL })

static int argc_of(char **argv)
{
	int n = 0;

	while (argv[n])
		n++;
	return n;
}

/* Parse argv into o (initialised here); returns the parser's code. */
static int parse(char **argv, struct mr_launch_opts *o, struct meshrun_err *err)
{
	mr_launch_opts_init(o);
	*err = (struct meshrun_err)MESHRUN_ERR_INIT;
	return mr_launch_parse(argc_of(argv), argv, o, err);
}

static void test_parse(void **state)
{
	struct mr_launch_opts o;
	struct meshrun_err err;

	(void)state;
	assert_int_equal(parse(ARGV("--hosts", "a,b", "-n", "2", "--backend", "ring", "--stdin", "0",
				    "--env", "K=V", "--", "./prog", "--flag"), &o, &err), MR_OPT_OK);
	assert_string_equal(o.hosts, "a,b");
	assert_int_equal(o.repeat, 2);
	assert_string_equal(o.backend, "ring");
	assert_string_equal(o.stdin_mode, "0");
	assert_int_equal(o.envs.nr, 1);
	assert_int_equal(o.command.nr, 2);
	assert_string_equal(o.command.v[1], "--flag"); /* options after the command are its own */
	assert_int_equal(o.starting_port, 32323);       /* defaults */
	assert_true(o.verify_script);
	mr_launch_opts_release(&o);

	assert_int_equal(parse(ARGV("--help"), &o, &err), MR_OPT_HELP);
	mr_launch_opts_release(&o);
}

static void test_parse_errors(void **state)
{
	const struct {
		char **argv;
		const char *msg;
	} cases[] = {
		{ ARGV("--hosts", "a"), "no command given" },
		{ ARGV("-n", "0", "true"), "" },
		{ ARGV("--starting-port", "70000", "true"), "" },
		{ ARGV("--backend", "gloo", "true"), "" },
		{ ARGV("--no-such-flag", "true"), "" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct mr_launch_opts o;
		struct meshrun_err err;

		assert_int_equal(parse(cases[i].argv, &o, &err), MESHRUN_E_USAGE);
		assert_true(err.msg[0]);
		assert_non_null(strstr(err.msg, cases[i].msg));
		mr_launch_opts_release(&o);
	}
}

/* Plan argv (parsed); asserts rc and, on failure, that the message holds msg. */
static void plan_of(char **argv, struct mr_launch_opts *o, struct mr_launch_plan *p, int rc,
		    const char *msg)
{
	struct meshrun_err err;

	assert_int_equal(parse(argv, o, &err), MR_OPT_OK);
	if (mr_launch_plan(o, p, &err) != rc)
		fail_msg("plan: expected %d, got '%s' (%d)", rc, err.msg, err.code);
	if (rc < 0) {
		if (!strstr(err.msg, msg))
			fail_msg("'%s' does not say '%s'", err.msg, msg);
		mr_launch_opts_release(o);
	}
}

static void done(struct mr_launch_opts *o, struct mr_launch_plan *p)
{
	mr_launch_plan_release(p);
	mr_launch_opts_release(o);
}

static bool is_hex32(const char *s)
{
	return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

/* A file under a fresh temporary folder; returns its path (static buffer). */
static const char *write_file(const char *name, const char *text, mode_t mode)
{
	static char dir[64], path[PATH_MAX];
	FILE *f;

	if (!dir[0] || access(dir, F_OK) != 0) { /* a test may have removed it */
		snprintf(dir, sizeof(dir), "/tmp/test_launch_plan.XXXXXX");
		assert_non_null(mkdtemp(dir));
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void test_plan_hosts(void **state)
{
	struct mr_launch_opts o, o2;
	struct mr_launch_plan p, q;
	static const char *const want[] = { "10.9.0.1", "10.9.0.1", "10.9.0.2", "10.9.0.2" };

	(void)state;
	unsetenv("SLURM_JOB_ID");
	unsetenv("MESHRUN_LAUNCHER");
	plan_of(ARGV("--hosts", "10.9.0.1,10.9.0.2", "-n", "2", "--backend", "ring", "sh", "-c", "exit 0"),
		&o, &p, 0, NULL);
	assert_int_equal(p.hf->nhosts, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(p.hf->hosts[i].ssh, want[i]);
	assert_false(p.all_local);
	assert_int_equal(p.backend, MR_BACKEND_RING);
	assert_int_equal(p.launcher, MR_LAUNCHER_MESHRUN);
	assert_int_equal(p.stdin_mode, MR_STDIN_ALL);
	/* found on PATH: an absolute path; the rest as given */
	assert_int_equal(p.argv.nr, 3);
	assert_true(p.argv.v[0][0] == '/' && strstr(p.argv.v[0], "/sh"));
	assert_string_equal(p.argv.v[2], "exit 0");
	assert_true(is_hex32(p.token));
	assert_int_equal(p.env.nranks, 4);
	assert_string_equal(p.env.per_rank[3].v[0], "MLX_RANK=3");
	done(&o, &p);

	/* the default host is this machine; every job gets its own token */
	plan_of(ARGV("--backend", "ring", "--stdin", "none", "no-such-command-here"), &o, &p, 0, NULL);
	plan_of(ARGV("--backend", "ring", "no-such-command-here"), &o2, &q, 0, NULL);
	assert_int_equal(p.hf->nhosts, 1);
	assert_true(p.all_local);
	assert_int_equal(p.stdin_mode, MR_STDIN_NONE);
	assert_string_equal(p.argv.v[0], "no-such-command-here"); /* the hosts' check decides */
	assert_string_not_equal(p.token, q.token);
	done(&o2, &q);
	done(&o, &p);

	/* --hosts with --hostfile: the hostfile wins, as in mlx.launch (issue 15) */
	{
		char hf1[PATH_MAX];

		snprintf(hf1, sizeof(hf1), "%s",
			 write_file("one.json", "[{\"ssh\": \"h9\", \"ips\": [\"10.0.0.9\"]}]", 0644));
		plan_of(ARGV("--hosts", "a,b", "--hostfile", hf1, "--backend", "ring", "true"), &o, &p, 0, NULL);
		assert_int_equal(p.hf->nhosts, 1);
		assert_string_equal(p.hf->hosts[0].ssh, "h9");
		done(&o, &p);
		unlink(hf1);
	}
	plan_of(ARGV("--hosts", "a,,b", "true"), &o, &p, MESHRUN_E_USAGE, "--hosts");
	plan_of(ARGV("--env", "1X=2", "true"), &o, &p, MESHRUN_E_USAGE, "--env");
}

/* --mpi-impl meshrun: meshrun starts the ranks, libmeshrun-mpi found next to
 * the meshrun that runs (<prefix>/bin/meshrun -> <prefix>/lib/) (issue 18) */
static void test_plan_mpi_impl(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char prefix[] = "/tmp/test_launch_plan_shim.XXXXXX", path[PATH_MAX + 64];

	(void)state;
	unsetenv("SLURM_JOB_ID");
	unsetenv("MESHRUN_LAUNCHER");
	assert_non_null(mkdtemp(prefix));
	snprintf(path, sizeof(path), "%s/bin", prefix);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/lib", prefix);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/lib/%s", prefix, MESHRUN_MPI_SHIM_NAME_FOR_TEST);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	char self[PATH_MAX + 64];
	snprintf(self, sizeof(self), "%s/bin/meshrun", prefix);

	plan_of(ARGV("-n", "2", "--backend", "mpi", "--mpi-impl", "meshrun", "true"), &o, &p, 0, NULL);
	assert_int_equal(p.launcher, MR_LAUNCHER_MESHRUN);
	assert_non_null(strstr(p.mpi_libname, MESHRUN_MPI_SHIM_NAME_FOR_TEST)); /* argv[0] "meshrun": not ours */
	done(&o, &p);
	assert_int_equal(parse(ARGV("-n", "2", "--backend", "mpi", "--mpi-impl", "meshrun", "true"), &o,
			       &(struct meshrun_err)MESHRUN_ERR_INIT), MR_OPT_OK);
	o.self = self; /* realpath needs the program itself: make it */
	f = fopen(self, "w");
	assert_non_null(f);
	fclose(f);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	assert_int_equal(mr_launch_plan(&o, &p, &err), 0);
	assert_string_equal(p.mpi_libname, path);
	done(&o, &p);

	plan_of(ARGV("--backend", "ring", "--mpi-impl", "meshrun", "true"), &o, &p, MESHRUN_E_USAGE,
		"--mpi-impl meshrun: only with --backend mpi");
	plan_of(ARGV("--backend", "mpi", "--mpi-impl", "meshrun", "--launcher", "mpirun", "true"), &o, &p,
		MESHRUN_E_USAGE, "mpirun cannot start");
	/* Open MPI (the default) still goes to mpirun */
	plan_of(ARGV("--backend", "mpi", "true"), &o, &p, 0, NULL);
	assert_int_equal(p.launcher, MR_LAUNCHER_MPIRUN);
	assert_string_equal(p.mpi_libname, "");
	done(&o, &p);
	unlink(self);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lib", prefix);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/bin", prefix);
	rmdir(path);
	rmdir(prefix);
}

static void test_plan_hostfile(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char hf[PATH_MAX], bad[PATH_MAX];

	(void)state;
	unsetenv("SLURM_JOB_ID");
	unsetenv("MESHRUN_LAUNCHER");
	snprintf(hf, sizeof(hf), "%s",
		 write_file("ring.json",
			    "{\"backend\": \"ring\", \"envs\": [\"A=1\", \"B=1\"], \"hosts\": "
			    "[{\"ssh\": \"h1\", \"ips\": [\"10.0.0.1\"]}, {\"ssh\": \"h2\", \"ips\": [\"10.0.0.2\"]}]}",
			    0644));
	/* the hostfile's backend and envs, then --env (a later name replaces an earlier one) */
	plan_of(ARGV("--hostfile", hf, "--env", "B=2", "true"), &o, &p, 0, NULL);
	assert_int_equal(p.backend, MR_BACKEND_RING);
	assert_int_equal(p.hf->nhosts, 2);
	assert_int_equal(p.envs.nr, 2);
	assert_string_equal(p.envs.v[0], "A=1");
	assert_string_equal(p.envs.v[1], "B=2");
	done(&o, &p);

	snprintf(bad, sizeof(bad), "%s",
		 write_file("bad.json", "{\"backend\": \"gloo\", \"hosts\": [{\"ssh\": \"h1\", \"ips\": []}]}",
			    0644));
	plan_of(ARGV("--hostfile", bad, "true"), &o, &p, MESHRUN_E_USAGE, "backend: unknown backend 'gloo'");
	plan_of(ARGV("--hostfile", "/nonexistent/h.json", "true"), &o, &p, MESHRUN_E_USAGE, "/nonexistent/h.json");
	unlink(hf);
	unlink(bad);
}

/* A first word naming a .py or a non-executable file runs with the Python. */
static void test_plan_python(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char py[PATH_MAX], data[PATH_MAX], exe[PATH_MAX];

	(void)state;
	snprintf(py, sizeof(py), "%s", write_file("train.py", "print(1)\n", 0755));
	snprintf(data, sizeof(data), "%s", write_file("job", "print(2)\n", 0644));
	snprintf(exe, sizeof(exe), "%s", write_file("run.sh", "#!/bin/sh\n", 0755));

	plan_of(ARGV("--backend", "ring", "--python", "/opt/py/bin/python3", py, "--lr", "1"), &o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 4);
	assert_string_equal(p.argv.v[0], "/opt/py/bin/python3");
	assert_string_equal(p.argv.v[1], py);
	assert_string_equal(p.argv.v[3], "1");
	done(&o, &p);

	plan_of(ARGV("--backend", "ring", "--python", "/opt/py/bin/python3", data), &o, &p, 0, NULL);
	assert_string_equal(p.argv.v[0], "/opt/py/bin/python3");
	done(&o, &p);

	plan_of(ARGV("--backend", "ring", exe), &o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 1);
	assert_string_equal(p.argv.v[0], exe); /* executable: runs itself */
	done(&o, &p);

	/* MLX 0.32: --python goes in front of every command, executable or not */
	plan_of(ARGV("--backend", "ring", "--python", "/opt/py/bin/python3", exe, "x"), &o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 3);
	assert_string_equal(p.argv.v[0], "/opt/py/bin/python3");
	assert_string_equal(p.argv.v[1], exe);
	done(&o, &p);
	plan_of(ARGV("--backend", "ring", "--python", "/bin/echo", "-n", "1", "--", "true"), &o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 2);
	assert_string_equal(p.argv.v[0], "/bin/echo");
	assert_string_equal(p.argv.v[1], "true"); /* as given: an argument of the Python */
	done(&o, &p);
	plan_of(ARGV("--backend", "ring", "--python", "/opt/py/bin/python3", "--", "-m", "pkg.train"),
		&o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 3);
	assert_string_equal(p.argv.v[1], "-m");
	done(&o, &p);

	unlink(py);
	unlink(data);
	unlink(exe);
	*strrchr(exe, '/') = '\0';
	rmdir(exe);
}

/* A non-executable file that is no .py runs with python3, said; a #! naming
 * another interpreter is refused instead (an `echo hi` script would end in a
 * Python SyntaxError) (issue 37) */
static void test_plan_not_executable(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char sh[PATH_MAX], bare[PATH_MAX];

	(void)state;
	snprintf(sh, sizeof(sh), "%s", write_file("hi.sh", "#!/bin/sh\necho hi\n", 0644));
	snprintf(bare, sizeof(bare), "%s", write_file("job2", "print(2)\n", 0644));
	plan_of(ARGV("--backend", "ring", sh), &o, &p, MESHRUN_E_USAGE, "names no Python");
	plan_of(ARGV("--backend", "ring", bare), &o, &p, 0, NULL);
	assert_int_equal(p.argv.nr, 2);
	assert_non_null(strstr(p.argv.v[0], "python")); /* MLX 0.31's rule, kept */
	done(&o, &p);
	unlink(sh);
	unlink(bare);
}

static const char *env_of(const struct mr_launch_plan *p, const char *name)
{
	return mr_strvec_getenv(&p->envs, name);
}

/* meshrun's own MESHRUN_* settings go to every rank (local ones inherit them
 * anyway, remote ones did not), but not the per-job ones of an outer job;
 * the hostfile's envs and --env win; --env needs NAME=VALUE (issue 37) */
static void test_plan_env_inherit(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char hf[PATH_MAX];

	(void)state;
	setenv("MESHRUN_TIMEOUT", "7", 1);
	setenv("MESHRUN_RING_SNDBUF", "1M", 1);
	setenv("MESHRUN_JOB_TOKEN", "stale", 1);
	setenv("MESHRUN_MESH_HOSTFILE", "/tmp/outer.json", 1);
	plan_of(ARGV("-n", "2", "--backend", "ring", "true"), &o, &p, 0, NULL);
	assert_string_equal(env_of(&p, "MESHRUN_TIMEOUT"), "7");
	assert_string_equal(env_of(&p, "MESHRUN_RING_SNDBUF"), "1M");
	assert_null(env_of(&p, "MESHRUN_JOB_TOKEN"));
	assert_null(env_of(&p, "MESHRUN_MESH_HOSTFILE"));
	done(&o, &p);
	plan_of(ARGV("-n", "2", "--backend", "ring", "--env", "MESHRUN_TIMEOUT=9", "true"), &o, &p, 0, NULL);
	assert_string_equal(env_of(&p, "MESHRUN_TIMEOUT"), "9");
	done(&o, &p);
	snprintf(hf, sizeof(hf), "%s",
		 write_file("envs.json", "{\"envs\": [\"MESHRUN_TIMEOUT=8\"], \"hosts\": [{\"ssh\": \"127.0.0.1\", \"ips\": [\"127.0.0.1\"]}]}", 0644));
	plan_of(ARGV("--hostfile", hf, "--backend", "ring", "true"), &o, &p, 0, NULL);
	assert_string_equal(env_of(&p, "MESHRUN_TIMEOUT"), "8");
	done(&o, &p);
	unlink(hf);
	unsetenv("MESHRUN_TIMEOUT");
	unsetenv("MESHRUN_RING_SNDBUF");
	unsetenv("MESHRUN_JOB_TOKEN");
	unsetenv("MESHRUN_MESH_HOSTFILE");
	assert_true(mr_launch_env_inherited("MESHRUN_MESH_SCHEDULE=ring"));
	assert_false(mr_launch_env_inherited("MESHRUN_HOSTFILE=/x"));
	assert_false(mr_launch_env_inherited("MLX_RANK=3"));
	assert_false(mr_launch_env_inherited("MESHRUN_X")); /* no '=': not from an environment */
	assert_false(mr_launch_env_inherited("MESHRUN_A-B=1")); /* no shell name: skipped, no error */

	plan_of(ARGV("--env", "NOEQ", "true"), &o, &p, MESHRUN_E_USAGE, "expected NAME=VALUE ('NOEQ=' for an empty value)");
	plan_of(ARGV("--env", "EMPTY=", "-n", "1", "true"), &o, &p, 0, NULL);
	assert_string_equal(env_of(&p, "EMPTY"), "");
	done(&o, &p);
}

/* --hosts with ssh names: the ring's address is the one ssh reaches the name
 * at (ssh_config's HostName), else its address here; a name that resolves to
 * nothing never refuses the job (it keeps its name) (issue 37) */
static void test_plan_addresses(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;
	char cfg[PATH_MAX];

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s",
		 write_file("ssh_config", "Host m1\n  HostName 10.77.0.1\nHost m2\n  HostName 10.77.0.2\n"
					  "Host far\n  HostName nowhere.invalid\n", 0644));
	plan_of(ARGV("--ssh-config", cfg, "--hosts", "m1,root@m2", "-n", "2", "--backend", "ring", "true"), &o, &p,
		0, NULL);
	assert_int_equal(p.hf->nhosts, 4);
	assert_string_equal(p.hf->hosts[0].ips.v[0], "10.77.0.1");
	assert_string_equal(p.hf->hosts[1].ips.v[0], "10.77.0.1");
	assert_string_equal(p.hf->hosts[3].ips.v[0], "10.77.0.2");
	assert_non_null(strstr(p.env.files[0].content, "\"10.77.0.2:32326\""));
	done(&o, &p);

	/* not resolvable here: its network name goes into the ring's file, the plan stands */
	plan_of(ARGV("--ssh-config", cfg, "--hosts", "far,m1", "--backend", "ring", "true"), &o, &p, 0, NULL);
	assert_string_equal(p.hf->hosts[0].ips.v[0], "nowhere.invalid");
	done(&o, &p);

	/* every host this machine: the loopback address, no ssh_config read */
	plan_of(ARGV("--ssh-config", "/nonexistent/cfg", "--hosts", "localhost", "-n", "2", "--backend", "ring", "true"),
		&o, &p, 0, NULL);
	assert_true(p.all_local);
	assert_string_equal(p.hf->hosts[1].ips.v[0], "127.0.0.1");
	done(&o, &p);
	unlink(cfg);
}

/* --print-python: the interpreter's own sys.executable, and how it was chosen */
static void test_print_python(void **state)
{
	struct mr_launch_opts o;
	struct meshrun_err err;
	char fake[PATH_MAX], out[512], how[512];
	FILE *fo, *fh;
	size_t n;

	(void)state;
	/* a stand-in for a pyenv shim: it runs "another" interpreter */
	snprintf(fake, sizeof(fake), "%s",
		 write_file("shim-python", "#!/bin/sh\necho /opt/real/bin/python3.12\n", 0755));
	assert_int_equal(parse(ARGV("--print-python", "--python", fake), &o, &err), MR_OPT_OK);
	fo = tmpfile();
	fh = tmpfile();
	assert_non_null(fo);
	assert_non_null(fh);
	assert_int_equal(mr_launch_print_python(&o, fo, fh), 0);
	rewind(fo);
	rewind(fh);
	n = fread(out, 1, sizeof(out) - 1, fo);
	out[n] = '\0';
	n = fread(how, 1, sizeof(how) - 1, fh);
	how[n] = '\0';
	assert_string_equal(out, "/opt/real/bin/python3.12\n");
	assert_non_null(strstr(how, "--python"));
	assert_non_null(strstr(how, fake));
	fclose(fo);
	fclose(fh);
	mr_launch_opts_release(&o);
	unlink(fake);
	*strrchr(fake, '/') = '\0';
	rmdir(fake);
}

/* COLUMNS/LINES from the terminal ($COLUMNS here) unless --env sets COLUMNS */
static void test_terminal_size(void **state)
{
	struct mr_launch_opts o;
	struct mr_launch_plan p;

	(void)state;
	setenv("COLUMNS", "132", 1);
	setenv("LINES", "43", 1);
	plan_of(ARGV("--backend", "ring", "true"), &o, &p, 0, NULL);
	assert_string_equal(mr_strvec_getenv(&p.envs, "COLUMNS"), "132");
	assert_string_equal(mr_strvec_getenv(&p.envs, "LINES"), "43");
	assert_string_equal(mr_strvec_getenv(&p.env.common, "COLUMNS"), "132");
	done(&o, &p);
	plan_of(ARGV("--backend", "ring", "--env", "COLUMNS=7", "true"), &o, &p, 0, NULL);
	assert_string_equal(mr_strvec_getenv(&p.envs, "COLUMNS"), "7");
	assert_null(mr_strvec_getenv(&p.envs, "LINES"));
	done(&o, &p);
	unsetenv("COLUMNS");
	unsetenv("LINES");
}

int main(void)
{
	unsetenv("COLUMNS"); /* the terminal's size goes into the plan's envs */
	unsetenv("LINES");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_plan_hosts),
		cmocka_unit_test(test_plan_mpi_impl),
		cmocka_unit_test(test_plan_hostfile),
		cmocka_unit_test(test_plan_python),
		cmocka_unit_test(test_plan_not_executable),
		cmocka_unit_test(test_plan_env_inherit),
		cmocka_unit_test(test_plan_addresses),
		cmocka_unit_test(test_print_python),
		cmocka_unit_test(test_terminal_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
