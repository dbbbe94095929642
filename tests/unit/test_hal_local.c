/* Unit tests for src/hal/local.c (and hal.c): real fork/exec on this machine. */
#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/timeutil.h"
#include "hal/hal.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

static struct mr_hal *new_local(const struct mr_hal_opts *opts)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;

	assert_int_equal(mr_hal_new_local(&hal, opts, &err), 0);
	assert_non_null(hal);
	assert_string_equal(mr_hal_name(hal), "local");
	return hal;
}

/* Run one command through a fresh hal and return its result (release it). */
static void run1(struct mr_hal_cmd *c, char *const *argv, int timeout_ms)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;

	memset(c, 0, sizeof(*c));
	c->host = "localhost";
	c->argv = argv;
	c->timeout_ms = timeout_ms;
	assert_int_equal(mr_hal_run(hal, c, 1, &err), 0);
	mr_hal_free(hal);
}

/* A process is gone when it no longer exists or is a zombie nobody reaps yet
 * (an orphan reparented to an init that reaps lazily). Waits up to 5 s. */
static bool pid_gone(pid_t pid)
{
	for (int i = 0; i < 500; i++) {
		char path[64], stat[512];
		int fd;
		ssize_t n;
		const char *rp;

		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return true;
		n = mr_read_full(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (n > 0) {
			stat[n] = '\0';
			rp = strrchr(stat, ')');
			if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
				return true;
		}
		mr_sleep_ms(10);
	}
	return false;
}

static pid_t parse_pid(const char *s)
{
	uint64_t v = 0;
	char tmp[32];
	size_t n = strcspn(s, " \n");

	assert_true(n > 0 && n < sizeof(tmp));
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	assert_int_equal(mr_parse_u64(tmp, 1, INT_MAX, &v), 0);
	return (pid_t)v;
}

/* --- run --- */

static void test_exit_status(void **state)
{
	struct mr_hal_cmd c;
	char d[128];

	(void)state;
	run1(&c, ARGV("true"), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.signal, 0);
	assert_true(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_hal_cmd_describe(&c, d, sizeof(d)), "exit status 0");
	mr_hal_cmd_release(&c);

	run1(&c, ARGV("sh", "-c", "exit 3"), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.status, 3);
	assert_false(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_hal_cmd_describe(&c, d, sizeof(d)), "exit status 3");
	mr_hal_cmd_release(&c);

	run1(&c, ARGV("false"), 0);
	assert_int_equal(c.status, 1);
	mr_hal_cmd_release(&c);
}

static void test_signal_reported(void **state)
{
	struct mr_hal_cmd c;
	char d[128];

	(void)state;
	run1(&c, ARGV("sh", "-c", "kill -KILL $$"), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.signal, SIGKILL);
	assert_int_equal(c.status, 0);
	assert_false(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_hal_cmd_describe(&c, d, sizeof(d)), "killed by signal 9 (Killed)");
	mr_hal_cmd_release(&c);

	/* a signal the parent ignores is reset to default in the child */
	signal(SIGUSR1, SIG_IGN);
	run1(&c, ARGV("sh", "-c", "kill -USR1 $$; exit 5"), 0);
	signal(SIGUSR1, SIG_DFL);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.signal, SIGUSR1);
	mr_hal_cmd_release(&c);
}

static void test_exec_failure(void **state)
{
	struct mr_hal_cmd c;
	char d[256];

	(void)state;
	run1(&c, ARGV("no-such-program-meshrun", "x"), 0);
	assert_int_equal(c.hal_rc, MESHRUN_E_EXEC);
	assert_string_equal(c.err.msg, "exec 'no-such-program-meshrun' failed: No such file or directory");
	assert_string_equal(mr_hal_cmd_describe(&c, d, sizeof(d)), c.err.msg);
	assert_int_equal(c.status, 0);
	mr_hal_cmd_release(&c);

	/* with a path the error comes back from the child through the pipe */
	run1(&c, ARGV("/nonexistent/meshrun-prog"), 0);
	assert_int_equal(c.hal_rc, MESHRUN_E_EXEC);
	assert_string_equal(c.err.msg, "exec '/nonexistent/meshrun-prog' failed: No such file or directory");
	mr_hal_cmd_release(&c);

	run1(&c, ARGV("/etc/passwd"), 0); /* not executable */
	assert_int_equal(c.hal_rc, MESHRUN_E_EXEC);
	assert_string_equal(c.err.msg, "exec '/etc/passwd' failed: Permission denied");
	mr_hal_cmd_release(&c);
}

static void test_stdin_roundtrip(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c = { 0 };
	size_t n = (size_t)1 << 20;
	unsigned char *data = malloc(n);

	(void)state;
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 131 + (i >> 10));
	c.argv = ARGV("cat");
	c.stdin_data = data;
	c.stdin_len = n;
	assert_int_equal(mr_hal_run(hal, &c, 1, &err), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.status, 0);
	assert_int_equal(c.out.len, n);
	assert_memory_equal(c.out.p, data, n);
	assert_int_equal(c.errout.len, 0);
	mr_hal_cmd_release(&c);

	/* no stdin data: EOF at once */
	memset(&c, 0, sizeof(c));
	c.argv = ARGV("cat");
	assert_int_equal(mr_hal_run(hal, &c, 1, &err), 0);
	assert_true(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_buf_cstr(&c.out), ""); /* shows the bytes if any */
	mr_hal_cmd_release(&c);

	/* a command that does not read its stdin: no SIGPIPE, no hang */
	memset(&c, 0, sizeof(c));
	c.argv = ARGV("true");
	c.stdin_data = data;
	c.stdin_len = n;
	assert_int_equal(mr_hal_run(hal, &c, 1, &err), 0);
	assert_true(mr_hal_cmd_ok(&c));
	mr_hal_cmd_release(&c);
	free(data);
	mr_hal_free(hal);
}

static void test_stdout_stderr_separate(void **state)
{
	struct mr_hal_cmd c;

	(void)state;
	run1(&c, ARGV("sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 4"), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.status, 4);
	assert_string_equal(mr_buf_cstr(&c.out), "out1\nout2\n");
	assert_string_equal(mr_buf_cstr(&c.errout), "err1\nerr2\n");
	mr_hal_cmd_release(&c);
}

static void test_output_capped(void **state)
{
	struct mr_hal_opts o = { .max_output = 1000 };
	struct mr_hal *hal = new_local(&o);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c = { 0 };

	(void)state;
	c.argv = ARGV("head", "-c", "300000", "/dev/zero");
	assert_int_equal(mr_hal_run(hal, &c, 1, &err), 0);
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.signal, 0); /* kept reading past the cap: no SIGPIPE */
	assert_int_equal(c.status, 0);
	assert_int_equal(c.out.len, 1000);
	mr_hal_cmd_release(&c);
	mr_hal_free(hal);
}

static void test_timeout_kills_group(void **state)
{
	struct mr_hal_cmd c;
	pid_t sh, gchild;
	const char *sp;

	(void)state;
	/* sh prints its pid and its background child's pid, then waits forever */
	run1(&c, ARGV("sh", "-c", "sleep 100 & echo $$ $!; wait"), 300);
	assert_int_equal(c.hal_rc, MESHRUN_E_TIMEOUT);
	assert_non_null(strstr(c.err.msg, "timed out after 300 ms"));
	assert_non_null(strstr(c.err.msg, "sleep 100"));
	assert_non_null(strstr(c.err.msg, "'localhost'"));
	sh = parse_pid(mr_buf_cstr(&c.out));
	sp = strchr(mr_buf_cstr(&c.out), ' ');
	assert_non_null(sp);
	gchild = parse_pid(sp + 1);
	assert_true(pid_gone(sh));
	assert_true(pid_gone(gchild));
	mr_hal_cmd_release(&c);

	/* TERM ignored by the whole group: the hal follows up with KILL */
	run1(&c, ARGV("sh", "-c", "trap '' TERM; sleep 100 & echo $$ $!; wait; wait"), 200);
	assert_int_equal(c.hal_rc, MESHRUN_E_TIMEOUT);
	sh = parse_pid(mr_buf_cstr(&c.out));
	gchild = parse_pid(strchr(mr_buf_cstr(&c.out), ' ') + 1);
	assert_true(pid_gone(sh));
	assert_true(pid_gone(gchild));
	mr_hal_cmd_release(&c);

	/* the leader dies of TERM at once, its child ignores TERM: the group is
	 * still killed before the leader is reaped */
	run1(&c, ARGV("sh", "-c", "sh -c \"trap '' TERM; sleep 100; exit 0\" & echo $$ $!; wait"), 200);
	assert_int_equal(c.hal_rc, MESHRUN_E_TIMEOUT);
	sh = parse_pid(mr_buf_cstr(&c.out));
	gchild = parse_pid(strchr(mr_buf_cstr(&c.out), ' ') + 1);
	assert_true(pid_gone(sh));
	assert_true(pid_gone(gchild));
	mr_hal_cmd_release(&c);
}

static void test_parallel(void **state)
{
	enum { N = 25 };
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c[N];
	char idx[N][16], code[N][16];
	char *argv[N][7];

	(void)state;
	memset(c, 0, sizeof(c));
	for (int i = 0; i < N; i++) {
		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		snprintf(code[i], sizeof(code[i]), "%d", i % 6);
		c[i].host = "localhost";
		argv[i][0] = "sh";
		argv[i][1] = "-c";
		argv[i][2] = "sleep 0.2; echo \"out $1\"; echo \"err $1\" >&2; exit $2";
		argv[i][3] = "sh";
		argv[i][4] = idx[i];
		argv[i][5] = code[i];
		argv[i][6] = NULL;
		c[i].argv = argv[i];
	}
	assert_int_equal(mr_hal_run(hal, c, N, &err), 0);
	for (int i = 0; i < N; i++) {
		char want[32];

		assert_int_equal(c[i].hal_rc, 0);
		assert_int_equal(c[i].status, i % 6);
		snprintf(want, sizeof(want), "out %d\n", i);
		assert_string_equal(mr_buf_cstr(&c[i].out), want);
		snprintf(want, sizeof(want), "err %d\n", i);
		assert_string_equal(mr_buf_cstr(&c[i].errout), want);
		mr_hal_cmd_release(&c[i]);
	}
	mr_hal_free(hal);
}

static void test_parallel_limited(void **state)
{
	/* more commands than max_parallel: all still run, each gets its result;
	 * at no time do more than 3 run (they count themselves in a folder) */
	enum { N = 10 };
	struct mr_hal_opts o = { .max_parallel = 3 };
	struct mr_hal *hal = new_local(&o);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c[N];
	char dir[] = "/tmp/mr-hal-test-XXXXXX";
	char script[512];
	char *argv[] = { "sh", "-c", script, NULL };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(script, sizeof(script),
		 "touch %s/$$; n=$(ls %s | wc -l); sleep 0.1; rm %s/$$; echo $n", dir, dir, dir);
	memset(c, 0, sizeof(c));
	for (int i = 0; i < N; i++)
		c[i].argv = argv;
	assert_int_equal(mr_hal_run(hal, c, N, &err), 0);
	assert_int_equal(rmdir(dir), 0); /* before any assertion can leave it behind */
	for (int i = 0; i < N; i++) {
		uint64_t n = 0;
		char *nl;

		assert_true(mr_hal_cmd_ok(&c[i]));
		nl = strchr(c[i].out.p, '\n');
		assert_non_null(nl);
		*nl = '\0';
		assert_int_equal(mr_parse_u64(c[i].out.p, 1, 100, &n), 0);
		assert_true(n <= 3);
		mr_hal_cmd_release(&c[i]);
	}
	mr_hal_free(hal);
}

static void test_run_bad_input(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c[2];

	(void)state;
	memset(c, 0, sizeof(c));
	c[0].host = "h1";
	c[0].argv = ARGV("true");
	c[1].host = "h2";
	c[1].argv = (char *const[]){ NULL };
	assert_int_equal(mr_hal_run(hal, c, 2, &err), 0);
	assert_true(mr_hal_cmd_ok(&c[0]));
	assert_int_equal(c[1].hal_rc, MESHRUN_E_INVAL);
	assert_string_equal(c[1].err.msg, "empty command for host 'h2'");
	mr_hal_cmd_release(&c[0]);
	mr_hal_cmd_release(&c[1]);
	mr_hal_free(hal);
}

/* --- spawn --- */

struct events {
	struct mr_buf out, err;
	int exits, hal_rc, status, sig;
	struct mr_proc *p;
	bool release_in_exit;
};

static void on_out(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	struct events *e = ctx;

	assert_ptr_equal(p, e->p);
	assert_int_equal(mr_buf_append(&e->out, data, len), 0);
}

static void on_err(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	struct events *e = ctx;

	assert_int_equal(mr_buf_append(&e->err, data, len), 0);
}

static void ev_exit(struct mr_proc *p, int hal_rc, int status, int sig,
		    const struct meshrun_err *err, void *ctx)
{
	struct events *e = ctx;

	e->exits++;
	e->hal_rc = hal_rc;
	e->status = status;
	e->sig = sig;
	if (e->release_in_exit)
		mr_proc_release(p); /* deferred until the poll returns */
}

static struct mr_proc *spawn(struct mr_hal *hal, struct events *e, char *const *argv,
			     char *const *env, const char *cwd)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_spawn sp = { 0 };
	struct mr_proc *p = NULL;

	memset(e, 0, sizeof(*e));
	sp.host = "localhost";
	sp.argv = argv;
	sp.env = env;
	sp.cwd = cwd;
	sp.events = (struct mr_proc_events){ e, on_out, on_err, ev_exit };
	sp.user = e;
	assert_int_equal(mr_hal_spawn(hal, &sp, &p, &err), 0);
	assert_non_null(p);
	assert_ptr_equal(mr_proc_user(p), e);
	assert_string_equal(mr_proc_host(p), "localhost");
	e->p = p;
	return p;
}

static void poll_until(struct mr_hal *hal, bool (*done)(struct events *), struct events *e)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t until = mr_now_ms() + 10000;

	while (!done(e)) {
		assert_true(mr_now_ms() < until);
		assert_true(mr_hal_poll(hal, 1000, &err) >= 0);
	}
}

static bool exited(struct events *e)
{
	return e->exits > 0;
}

static bool has_line(struct events *e)
{
	return e->out.len && memchr(e->out.p, '\n', e->out.len);
}

static void events_release(struct events *e)
{
	mr_buf_release(&e->out);
	mr_buf_release(&e->err);
}

static void test_spawn_stdin_events(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct events e;
	struct mr_proc *p;

	(void)state;
	p = spawn(hal, &e, ARGV("cat"), NULL, NULL);
	assert_false(mr_proc_exited(p));
	assert_int_equal(mr_proc_write(p, "hello\n", 6, &err), 0);
	assert_int_equal(mr_proc_write(p, "", 0, &err), 0);
	poll_until(hal, has_line, &e);
	assert_string_equal(mr_buf_cstr(&e.out), "hello\n");
	assert_int_equal(mr_proc_write(p, "world\n", 6, &err), 0);
	assert_int_equal(mr_proc_close_stdin(p, &err), 0);
	assert_int_equal(mr_proc_write(p, "late", 4, &err), MESHRUN_E_INVAL);
	assert_non_null(strstr(err.msg, "stdin already closed"));
	poll_until(hal, exited, &e);
	assert_true(mr_proc_exited(p));
	assert_int_equal(e.exits, 1);
	assert_int_equal(e.hal_rc, 0);
	assert_int_equal(e.status, 0);
	assert_int_equal(e.sig, 0);
	assert_string_equal(mr_buf_cstr(&e.out), "hello\nworld\n");
	/* nothing left to wait for: poll(-1) returns at once with 0 running */
	assert_int_equal(mr_hal_poll(hal, -1, &err), 0);
	assert_int_equal(e.exits, 1);
	mr_proc_release(p);
	events_release(&e);

	p = spawn(hal, &e, ARGV("sh", "-c", "echo o; echo e >&2; exit 7"), NULL, NULL);
	poll_until(hal, exited, &e);
	assert_int_equal(e.status, 7);
	assert_string_equal(mr_buf_cstr(&e.out), "o\n");
	assert_string_equal(mr_buf_cstr(&e.err), "e\n");
	mr_proc_release(p);
	events_release(&e);

	/* large stdin through cat while reading its output */
	{
		size_t n = (size_t)512 << 10;
		char *data = malloc(n);

		assert_non_null(data);
		for (size_t i = 0; i < n; i++)
			data[i] = (char)('a' + i % 26);
		p = spawn(hal, &e, ARGV("cat"), NULL, NULL);
		assert_int_equal(mr_proc_write(p, data, n, &err), 0);
		assert_int_equal(mr_proc_close_stdin(p, &err), 0);
		e.release_in_exit = true; /* released by the hal once that poll returns */
		poll_until(hal, exited, &e);
		assert_int_equal(e.status, 0);
		assert_int_equal(e.out.len, n);
		assert_memory_equal(e.out.p, data, n);
		free(data);
		events_release(&e);
	}
	mr_hal_free(hal);
}

static void test_spawn_signal_group(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct events e;
	struct mr_proc *p;
	pid_t sh, gchild;

	(void)state;
	p = spawn(hal, &e, ARGV("sh", "-c", "sleep 100 & echo $$ $!; wait"), NULL, NULL);
	poll_until(hal, has_line, &e);
	sh = parse_pid(mr_buf_cstr(&e.out));
	gchild = parse_pid(strchr(mr_buf_cstr(&e.out), ' ') + 1);
	assert_int_equal(mr_proc_signal(p, SIGTERM, &err), 0);
	poll_until(hal, exited, &e);
	assert_int_equal(e.hal_rc, 0);
	assert_int_equal(e.sig, SIGTERM);
	assert_true(pid_gone(sh));
	assert_true(pid_gone(gchild)); /* the signal went to the whole group */
	assert_int_equal(mr_proc_signal(p, SIGTERM, &err), MESHRUN_E_INVAL);
	assert_int_equal(mr_proc_signal(p, 0, &err), MESHRUN_E_INVAL);
	mr_proc_release(p);
	events_release(&e);
	mr_hal_free(hal);
}

static void test_free_kills_everything(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct events e[3];
	pid_t pids[6];
	int np = 0;

	(void)state;
	/* a plain sleeper, one that ignores TERM (with a child that does too), and
	 * one whose child outlives it in the group */
	spawn(hal, &e[0], ARGV("sh", "-c", "echo $$; exec sleep 100"), NULL, NULL);
	spawn(hal, &e[1], ARGV("sh", "-c", "trap '' TERM; sleep 100 & echo $$ $!; wait; wait"), NULL, NULL);
	spawn(hal, &e[2], ARGV("sh", "-c", "sleep 100 & echo $$ $!; wait"), NULL, NULL);
	for (int i = 0; i < 3; i++) {
		const char *sp;

		poll_until(hal, has_line, &e[i]);
		pids[np++] = parse_pid(mr_buf_cstr(&e[i].out));
		sp = strchr(mr_buf_cstr(&e[i].out), ' ');
		if (sp)
			pids[np++] = parse_pid(sp + 1);
	}
	assert_int_equal(np, 5);
	for (int i = 0; i < np; i++)
		assert_int_equal(kill(pids[i], 0), 0);
	mr_hal_free(hal);
	for (int i = 0; i < np; i++)
		assert_true(pid_gone(pids[i]));
	/* the direct children were reaped by the hal: not even zombies are left */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(e[i].exits, 0); /* no callbacks from mr_hal_free */
		events_release(&e[i]);
	}
}

/* The watchdog removes registered directories when the hal goes (and, as the
 * launch tests show, when the process dies); bad paths are refused. */
static void test_remove_at_exit(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	char dir[] = "/tmp/meshrun-hal-rm.XXXXXX", sub[64];
	struct stat st;
	struct events e;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/x", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(mr_hal_remove_at_exit(hal, NULL, "relative/dir", &err), MESHRUN_E_INVAL);
	assert_non_null(strstr(err.msg, "'relative/dir' is not an absolute path or a file name"));
	mr_err_clear(&err);
	assert_int_equal(mr_hal_remove_at_exit(hal, NULL, "..", &err), MESHRUN_E_INVAL);
	mr_err_clear(&err);
	assert_int_equal(mr_hal_remove_at_exit(hal, NULL, "/tmp/a\nb", &err), MESHRUN_E_INVAL);
	mr_err_clear(&err);
	assert_int_equal(mr_hal_remove_at_exit(hal, "localhost", dir, &err), 0);
	/* a proc that is still running at free: killed first, then the directory goes */
	spawn(hal, &e, ARGV("sleep", "100"), NULL, NULL);
	assert_int_equal(stat(dir, &st), 0);
	mr_hal_free(hal);
	assert_int_equal(stat(dir, &st), -1);
	assert_int_equal(errno, ENOENT);
	/* the watchdog was reaped with the rest */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	events_release(&e);
}

static void test_release_running(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct events e;
	struct mr_proc *p;
	pid_t pid;

	(void)state;
	p = spawn(hal, &e, ARGV("sh", "-c", "echo $$; exec sleep 100"), NULL, NULL);
	poll_until(hal, has_line, &e);
	pid = parse_pid(mr_buf_cstr(&e.out));
	mr_proc_release(p);
	assert_true(pid_gone(pid));
	assert_int_equal(e.exits, 0);
	events_release(&e);
	mr_hal_free(hal);
}

static void test_env_cwd(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_spawn sp = { 0 };
	struct mr_proc *p = NULL;
	struct events e;
	char dir[] = "/tmp/mr-hal-cwd-XXXXXX";
	char want[PATH_MAX + 64], *real;

	(void)state;
	setenv("MR_HAL_TEST_INHERITED", "kept", 1);
	setenv("MR_HAL_TEST_OVERRIDE", "old", 1);
	p = spawn(hal, &e, ARGV("sh", "-c", "echo \"$MR_HAL_TEST_INHERITED|$MR_HAL_TEST_OVERRIDE|$MR_NEW|${PATH:+path}\""),
		  ARGV("MR_HAL_TEST_OVERRIDE=new value", "MR_NEW=a=b"), NULL);
	poll_until(hal, exited, &e);
	assert_string_equal(mr_buf_cstr(&e.out), "kept|new value|a=b|path\n");
	mr_proc_release(p);
	events_release(&e);

	assert_non_null(mkdtemp(dir));
	real = realpath(dir, NULL);
	assert_non_null(real);
	p = spawn(hal, &e, ARGV("pwd"), NULL, dir);
	poll_until(hal, exited, &e);
	snprintf(want, sizeof(want), "%s\n", real);
	assert_string_equal(mr_buf_cstr(&e.out), want);
	mr_proc_release(p);
	events_release(&e);
	free(real);
	assert_int_equal(rmdir(dir), 0);

	/* a cwd that does not exist: the error names it */
	sp.argv = ARGV("pwd");
	sp.cwd = "/nonexistent-meshrun-dir";
	assert_int_equal(mr_hal_spawn(hal, &sp, &p, &err), MESHRUN_E_EXEC);
	assert_null(p);
	assert_string_equal(err.msg, "chdir to '/nonexistent-meshrun-dir' for 'pwd' on 'localhost' failed: No such file or directory");

	mr_err_clear(&err);
	sp.cwd = NULL;
	sp.argv = ARGV("no-such-program-meshrun");
	assert_int_equal(mr_hal_spawn(hal, &sp, &p, &err), MESHRUN_E_EXEC);
	assert_string_equal(err.msg, "exec 'no-such-program-meshrun' failed: No such file or directory");

	mr_err_clear(&err);
	sp.argv = ARGV("true");
	sp.env = ARGV("NOEQUALS");
	assert_int_equal(mr_hal_spawn(hal, &sp, &p, &err), MESHRUN_E_INVAL);
	assert_non_null(strstr(err.msg, "'NOEQUALS'"));
	mr_hal_free(hal);
	unsetenv("MR_HAL_TEST_INHERITED");
	unsetenv("MR_HAL_TEST_OVERRIDE");
}

static int watch_hits;

static void on_watch(int fd, void *ctx)
{
	char buf[16];

	assert_ptr_equal(ctx, &watch_hits);
	assert_true(read(fd, buf, sizeof(buf)) > 0);
	watch_hits++;
}

static void test_watch_fd(void **state)
{
	struct mr_hal *hal = new_local(NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int fds[2];

	(void)state;
	assert_int_equal(mr_pipe_cloexec(fds), 0);
	assert_int_equal(mr_hal_watch_fd(hal, fds[0], on_watch, &watch_hits), 0);
	assert_int_equal(mr_hal_poll(hal, 10, &err), 0); /* nothing readable: times out */
	assert_int_equal(watch_hits, 0);
	assert_int_equal(write(fds[1], "x", 1), 1);
	assert_int_equal(mr_hal_poll(hal, -1, &err), 0);
	assert_int_equal(watch_hits, 1);
	mr_hal_unwatch_fd(hal, fds[0]);
	assert_int_equal(write(fds[1], "y", 1), 1);
	assert_int_equal(mr_hal_poll(hal, -1, &err), 0); /* nothing watched: returns */
	assert_int_equal(watch_hits, 1);
	close(fds[0]);
	close(fds[1]);
	mr_hal_free(hal);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_signal_reported),
		cmocka_unit_test(test_exec_failure),
		cmocka_unit_test(test_stdin_roundtrip),
		cmocka_unit_test(test_stdout_stderr_separate),
		cmocka_unit_test(test_output_capped),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_parallel),
		cmocka_unit_test(test_parallel_limited),
		cmocka_unit_test(test_run_bad_input),
		cmocka_unit_test(test_spawn_stdin_events),
		cmocka_unit_test(test_spawn_signal_group),
		cmocka_unit_test(test_free_kills_everything),
		cmocka_unit_test(test_remove_at_exit),
		cmocka_unit_test(test_release_running),
		cmocka_unit_test(test_env_cwd),
		cmocka_unit_test(test_watch_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
