/*
 * Unit tests for src/launch/supervise.c over the local hal: real ranks (sh -c),
 * our stdout/stderr captured in files. Exit codes as launch.h states them (first
 * failure, signals, --timeout, a signal to meshrun), whole and tagged lines,
 * stdin to every rank, to rank 0 or to none.
 */
#include "common/compat.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "hal/hal.h"
#include "hal/replay.h"
#include "launch/supervise.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define MAXR 4

struct job {
	size_t n;
	const char *script[MAXR];   /* sh -c SCRIPT per rank */
	bool tag;
	enum mr_stdin_mode mode;
	int64_t timeout_ms;
	const char *input;          /* our stdin (NULL: /dev/null) */
	bool raise_term;            /* meshrun gets SIGTERM once the ranks run */
	struct mr_replay *replay;   /* run over the replay hal (it takes rp), not local */
	const char *host[MAXR];     /* per rank (NULL: localhost) */
	/* results */
	int code;
	int64_t ms;
	char out[8192], err[8192];
};

static void slurp(int fd, char *buf, size_t cap)
{
	ssize_t n;

	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	n = mr_read_full(fd, buf, cap - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
}

static int tmpfile_fd(void)
{
	char path[] = "/tmp/test_supervise.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

/* Run the job under the supervisor with fds 0, 1 and 2 redirected. */
static void run_job(struct job *j)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;
	struct mr_sup sup;
	int out = tmpfile_fd(), errf = tmpfile_fd(), in;
	int saved[3] = { dup(0), dup(1), dup(2) };
	int64_t t0 = mr_now_ms();

	if (j->input) {
		in = tmpfile_fd();
		assert_int_equal(mr_write_full(in, j->input, strlen(j->input)), 0);
		assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	} else {
		in = open("/dev/null", O_RDONLY);
	}
	if (j->replay)
		assert_int_equal(mr_hal_new_replay(&hal, j->replay, NULL, &err), 0);
	else
		assert_int_equal(mr_hal_new_local(&hal, NULL, &err), 0);
	fflush(stdout);
	fflush(stderr);
	dup2(in, 0);
	dup2(out, 1);
	dup2(errf, 2);
	mr_log_set_color(0);
	if (mr_sup_init(&sup, hal, j->n, j->tag, j->mode, j->timeout_ms, &err) < 0)
		goto restore;
	for (size_t r = 0; r < j->n; r++) {
		char *argv[] = { "sh", "-c", (char *)j->script[r], NULL };
		struct mr_spawn sp = { .host = j->host[r] ? j->host[r] : "localhost", .argv = argv };

		if (mr_sup_start(&sup, r, &sp, &err) < 0) {
			mr_sup_abort(&sup);
			break;
		}
	}
	if (j->raise_term) {
		mr_sleep_ms(200); /* the ranks are running */
		raise(SIGTERM);   /* caught: it only writes to the self-pipe */
	}
	j->code = mr_sup_wait(&sup);
	mr_sup_release(&sup);
restore:
	fflush(stdout);
	fflush(stderr);
	for (int fd = 0; fd < 3; fd++) {
		dup2(saved[fd], fd);
		close(saved[fd]);
	}
	mr_hal_free(hal);
	j->ms = mr_now_ms() - t0;
	assert_string_equal(err.msg, "");
	slurp(out, j->out, sizeof(j->out));
	slurp(errf, j->err, sizeof(j->err));
	close(out);
	close(errf);
	close(in);
}

static void test_all_exit_zero(void **state)
{
	struct job j = { .n = 3, .script = { "echo r0", "echo r1", "true" } };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 0);
	assert_non_null(strstr(j.out, "r0\n"));
	assert_non_null(strstr(j.out, "r1\n"));
	assert_string_equal(j.err, "");
}

/* The first failure decides the code; the others are stopped, and said so. */
static void test_first_failure_stops_the_rest(void **state)
{
	/* the timeout only bounds a broken supervisor (124 in 10 s, not a hang) */
	struct job j = { .n = 3, .script = { "exec sleep 30", "exit 3", "exec sleep 30" },
			 .timeout_ms = 10000 };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 3);
	assert_true(j.ms < MR_SUP_GRACE_MS + 2000); /* TERM ended them, no wait for KILL */
	assert_non_null(strstr(j.err, "[WARN] rank 1 (localhost) failed: stopping the other 2 ranks"));
	assert_non_null(strstr(j.err, "[ERROR] rank 1 (localhost): exit status 3"));
	assert_non_null(strstr(j.err, "[WARN] rank 0 (localhost): stopped by meshrun (signal 15)"));
	assert_non_null(strstr(j.err, "[WARN] rank 2 (localhost): stopped by meshrun (signal 15)"));
}

static void test_killed_by_signal(void **state)
{
	struct job j = { .n = 2, .script = { "kill -9 $$", "exec sleep 30" } };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 128 + SIGKILL);
	assert_non_null(strstr(j.err, "rank 0 (localhost): killed by signal 9"));
}

/* A rank that ignores TERM gets KILL after the grace period. */
static void test_kill_after_grace(void **state)
{
	struct job j = { .n = 2, .script = { "sleep 0.3; exit 1", /* after rank 1's trap */
					     "trap '' TERM; while :; do sleep 0.1; done" },
			 .timeout_ms = 10000 };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 1);
	assert_non_null(strstr(j.err, "[WARN] rank 1 (localhost): stopped by meshrun (signal 9)"));
	assert_true(j.ms >= MR_SUP_GRACE_MS);
	assert_true(j.ms < MR_SUP_GRACE_MS + 3000);
}

static void test_timeout(void **state)
{
	struct job j = { .n = 3, .script = { "exec sleep 30", "exit 0", "exec sleep 30" }, .timeout_ms = 300 };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 124);
	assert_true(j.ms < 2500);
	/* it names the ranks that had not finished, not rank 1, which had */
	assert_non_null(strstr(j.err, "--timeout: the job ran past its time limit with rank 0 (localhost), rank 2 (localhost) still running"));
}

static void test_signal_to_meshrun(void **state)
{
	struct job j = { .n = 2, .script = { "exec sleep 30", "exec sleep 30" }, .raise_term = true };

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 128 + SIGTERM);
	assert_true(j.ms < 2500);
	assert_non_null(strstr(j.err, "stopping every rank"));
}

/*
 * A rank whose connection is lost (the hal says MESHRUN_E_NOEXIT, as the ssh
 * backend does when the session dies): exit 255, never 0 even though no rank
 * reported a failing status; the error names the rank and host; the other rank
 * is stopped. Over the replay hal, so no sshd and no root are needed.
 */
static void test_lost_connection(void **state)
{
	struct mr_replay *rp = NULL;

	(void)state;
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "*", 0, NULL, NULL, 30000, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h2", "*", 0, "half a line", NULL, 100, MESHRUN_E_NOEXIT), 0);
	struct job j = { .n = 2, .replay = rp, .host = { "h1", "h2" }, .script = { "a", "b" } };
	run_job(&j);
	assert_int_equal(j.code, 255);
	assert_true(j.ms < 2500);
	assert_non_null(strstr(j.err, "[ERROR] rank 1 (h2): command 'sh -c b' on 'h2': no exit status received"));
	assert_non_null(strstr(j.err, "rank 0 (h1): stopped by meshrun (signal 15)"));
	assert_non_null(strstr(j.out, "half a line\n"));
}

/* Tagged output: every line whole and prefixed, the unterminated tail ended. */
static void test_tagged_lines(void **state)
{
	struct job j = {
		.n = 2,
		.tag = true,
		.script = { "printf 'a'; sleep 0.1; printf 'b\\nc'", "printf 'x\\n' >&2" },
	};

	(void)state;
	run_job(&j);
	assert_int_equal(j.code, 0);
	assert_string_equal(j.out, "[rank 0 localhost] ab\n[rank 0 localhost] c\n");
	assert_string_equal(j.err, "[rank 1 localhost] x\n");
}

/* stdin: all ranks, rank 0 only, or none (EOF at once); EOF reaches every rank. */
static void test_stdin_modes(void **state)
{
	static const struct {
		enum mr_stdin_mode mode;
		const char *want;
	} cases[] = {
		{ MR_STDIN_ALL, "[rank 0 localhost] in\n[rank 1 localhost] in\n" },
		{ MR_STDIN_RANK0, "[rank 0 localhost] in\n" },
		{ MR_STDIN_NONE, "" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		/* cat ends only at EOF: a rank never told EOF runs into the timeout (124) */
		struct job j = { .n = 2, .tag = true, .mode = cases[i].mode, .input = "in\n",
				 .script = { "cat", "sleep 0.2; cat" }, .timeout_ms = 5000 };

		run_job(&j);
		assert_int_equal(j.code, 0);
		assert_string_equal(j.out, cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_exit_zero),
		cmocka_unit_test(test_first_failure_stops_the_rest),
		cmocka_unit_test(test_killed_by_signal),
		cmocka_unit_test(test_kill_after_grace),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_signal_to_meshrun),
		cmocka_unit_test(test_lost_connection),
		cmocka_unit_test(test_tagged_lines),
		cmocka_unit_test(test_stdin_modes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
