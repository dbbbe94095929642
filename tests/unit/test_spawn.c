/*
 * Unit tests for src/common/spawn.c: the one fork/exec (exec errors reported,
 * fds placed and closed, process groups and sessions) and the one PATH search.
 */
#include "common/compat.h"
#include "common/fdio.h"
#include "common/spawn.h"

#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run argv with stdout into a pipe; returns its exit status, output in out. */
static int run(struct mr_spawn_opts *so, char *out, size_t n)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int p[2], st;
	ssize_t got;
	pid_t pid;

	assert_int_equal(mr_pipe_cloexec(p), 0);
	so->fds[0] = -1;
	so->fds[1] = p[1];
	so->fds[2] = -1;
	assert_int_equal(mr_spawn_child(so, &pid, &err), 0);
	close(p[1]);
	got = mr_read_full(p[0], out, n - 1);
	assert_true(got >= 0);
	out[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_which(void **state)
{
	char dir[] = "/tmp/mr-which-XXXXXX", path[64];
	char *w;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/prog", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644); /* not executable yet */
	assert_true(fd >= 0);
	close(fd);
	assert_null(mr_which("prog", dir));
	assert_int_equal(errno, EACCES);
	chmod(path, 0755);
	w = mr_which("prog", "/nonexistent::") ; /* empty entries: the cwd, not dir */
	assert_null(w);
	w = mr_which("prog", "/nonexistent:/x");
	assert_null(w);
	assert_int_equal(errno, ENOENT);
	{
		char search[128];

		snprintf(search, sizeof(search), "/nonexistent:%s", dir);
		w = mr_which("prog", search);
		assert_non_null(w);
		assert_string_equal(w, path);
		free(w);
	}
	w = mr_which("./a/b", NULL); /* with a '/': as given, as execvp does */
	assert_string_equal(w, "./a/b");
	free(w);
	assert_null(mr_which("", NULL));
	unlink(path);
	rmdir(dir);
}

static void test_exec_errors(void **state)
{
	char *argv[] = { "no-such-program-mr", NULL };
	char *sh[] = { "sh", "-c", "pwd", NULL };
	struct mr_spawn_opts so = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	pid_t pid = 0;

	(void)state;
	so.argv = argv;
	so.fds[0] = so.fds[1] = so.fds[2] = -1;
	assert_int_equal(mr_spawn_child(&so, &pid, &err), MESHRUN_E_EXEC);
	assert_int_equal(err.sys_errno, ENOENT);
	assert_non_null(strstr(err.msg, "exec 'no-such-program-mr' failed"));

	so.argv = sh;
	so.cwd = "/no/such/dir";
	so.what = "'pwd' in a test";
	err = (struct meshrun_err)MESHRUN_ERR_INIT;
	assert_int_equal(mr_spawn_child(&so, &pid, &err), MESHRUN_E_EXEC);
	assert_int_equal(err.sys_errno, ENOENT);
	assert_non_null(strstr(err.msg, "chdir to '/no/such/dir' for 'pwd' in a test failed"));
}

static void test_fds_groups_env(void **state)
{
	char *pgid[] = { "sh", "-c", "ps -o pgid= -o sid= -p $$; ls /proc/self/fd 2>/dev/null | wc -l", NULL };
	char *env_argv[] = { "sh", "-c", "printf %s \"$MR_SPAWN_T\"; pwd", NULL };
	char *envp[] = { "MR_SPAWN_T=hello", "PATH=/usr/bin:/bin", NULL };
	struct mr_spawn_opts so = { 0 };
	char out[256];
	long pg = 0, sid = 0, nfd = 0;
	int keep;

	(void)state;
	/* an inherited fd (not close-on-exec) survives without CLOSE_FDS, not with it */
	keep = open("/dev/null", O_RDONLY);
	assert_true(keep >= 3);
	so.argv = pgid;
	so.flags = MR_SPAWN_SETPGID;
	assert_int_equal(run(&so, out, sizeof(out)), 0);
	assert_int_equal(sscanf(out, "%ld %ld %ld", &pg, &sid, &nfd), 3);
	assert_int_not_equal(pg, (long)getpgrp()); /* a group of its own */
	assert_int_equal(sid, (long)getsid(0));
	if (nfd > 0) /* where /proc exists: 0..2, the listing's own fd, and `keep` */
		assert_true(nfd >= 5);
	so.flags = MR_SPAWN_SETSID | MR_SPAWN_CLOSE_FDS;
	assert_int_equal(run(&so, out, sizeof(out)), 0);
	assert_int_equal(sscanf(out, "%ld %ld %ld", &pg, &sid, &nfd), 3);
	assert_int_equal(pg, sid);                   /* leads a session */
	assert_int_not_equal(sid, (long)getsid(0));
	if (nfd > 0)
		assert_int_equal(nfd, 4);            /* 0..2 and the listing's own */
	close(keep);

	memset(&so, 0, sizeof(so));
	so.argv = env_argv;
	so.envp = envp;
	so.cwd = "/";
	assert_int_equal(run(&so, out, sizeof(out)), 0);
	assert_string_equal(out, "hello/\n");
}

/* Read fd (non-blocking) until EOF into buf. */
static void read_all(int fd, char *buf, size_t n)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		assert_true(poll(&p, 1, 5000) > 0);
		r = read(fd, buf + got, n - 1 - got);
		if (r == 0)
			break;
		if (r < 0 && errno == EAGAIN)
			continue;
		assert_true(r > 0);
		got += (size_t)r;
	}
	buf[got] = '\0';
}

/* mr_spawn_piped: the parent's ends come back non-blocking and close-on-exec;
 * stdin a socketpair, or empty (EOF at once, no fd) */
static void test_piped(void **state)
{
	char *argv[] = { "sh", "-c", "cat; echo err >&2", NULL };
	struct mr_spawn_opts so = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	char out[64], errout[64];
	int fds[3], st = 0;
	pid_t pid;

	(void)state;
	so.argv = argv;
	assert_int_equal(mr_spawn_piped(&so, true, &pid, fds, &err), 0);
	for (int i = 0; i < 3; i++) {
		assert_true(fds[i] > 2);
		assert_true(fcntl(fds[i], F_GETFL) & O_NONBLOCK);
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
	}
	assert_int_equal(write(fds[0], "hi\n", 3), 3);
	close(fds[0]);
	read_all(fds[1], out, sizeof(out));
	read_all(fds[2], errout, sizeof(errout));
	assert_string_equal(out, "hi\n");
	assert_string_equal(errout, "err\n");
	close(fds[1]);
	close(fds[2]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	assert_int_equal(mr_spawn_piped(&so, false, &pid, fds, &err), 0);
	assert_int_equal(fds[0], -1);
	read_all(fds[1], out, sizeof(out));
	assert_string_equal(out, ""); /* cat saw EOF at once */
	read_all(fds[2], errout, sizeof(errout));
	close(fds[1]);
	close(fds[2]);
	assert_int_equal(waitpid(pid, &st, 0), pid);

	/* a program that is not there: an error naming it, nothing left open */
	argv[0] = "mr-no-such-program";
	assert_int_equal(mr_spawn_piped(&so, true, &pid, fds, &err), MESHRUN_E_EXEC);
	assert_int_equal(fds[0], -1);
	assert_int_equal(fds[1], -1);
	assert_non_null(strstr(err.msg, "mr-no-such-program"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_which),
		cmocka_unit_test(test_exec_errors),
		cmocka_unit_test(test_fds_groups_env),
		cmocka_unit_test(test_piped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
