/*
 * Unit tests for mr_hal_run_cb() (src/hal/hal.c and the backends): the callback
 * fires exactly once per command, with the command's final result, while the
 * batch runs (local: a command that waits for the callback of another one
 * finishes; replay: in the order of the scripted delays), also for commands that
 * fail validation, never start, or go to the routing backend's inner hals.
 */
#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "hal/hal.h"
#include "hal/replay.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })
#define MAXC 8

/* What the callback saw, per command index, and the order of the calls. */
struct seen {
	struct mr_hal_cmd *cmds;
	size_t n;
	int calls[MAXC];
	size_t order[MAXC], norder;
	int hal_rc[MAXC], status[MAXC], sig[MAXC];
	char out[MAXC][64];
	const char *touch_on;  /* when the command of this host is reported: create touch_path */
	char touch_path[64];
};

static void on_done(struct mr_hal_cmd *cmd, void *ctx)
{
	struct seen *s = ctx;
	size_t i = (size_t)(cmd - s->cmds);

	assert_true(i < s->n);
	s->calls[i]++;
	s->order[s->norder++] = i;
	s->hal_rc[i] = cmd->hal_rc;
	s->status[i] = cmd->status;
	s->sig[i] = cmd->signal;
	snprintf(s->out[i], sizeof(s->out[i]), "%s", mr_buf_cstr(&cmd->out));
	if (s->touch_on && cmd->host && !strcmp(cmd->host, s->touch_on)) {
		FILE *f = fopen(s->touch_path, "w");

		assert_non_null(f);
		fclose(f);
	}
}

/* Every command reported once, with what the caller finds after the return. */
static void check_final(const struct seen *s)
{
	assert_int_equal(s->norder, s->n);
	for (size_t i = 0; i < s->n; i++) {
		assert_int_equal(s->calls[i], 1);
		assert_int_equal(s->hal_rc[i], s->cmds[i].hal_rc);
		assert_int_equal(s->status[i], s->cmds[i].status);
		assert_int_equal(s->sig[i], s->cmds[i].signal);
		assert_string_equal(s->out[i], mr_buf_cstr(&s->cmds[i].out));
	}
}

static void release_all(struct mr_hal_cmd *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mr_hal_cmd_release(&c[i]);
}

static void test_local(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;
	struct mr_hal_cmd c[6] = { 0 };
	struct seen s = { .cmds = c, .n = 6, .touch_on = "127.0.0.1" };
	char dir[] = "/tmp/mr-runcb-XXXXXX";
	char *waiter[] = { "sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.01; done; echo waited",
			   s.touch_path, NULL };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(s.touch_path, sizeof(s.touch_path), "%s/go", dir);
	assert_int_equal(mr_hal_new_local(&hal, NULL, &err), 0);
	/* c[0] only ends once the callback of c[1] ran: callbacks come while the
	 * batch runs, not after it (else c[0] times out) */
	c[0].host = "localhost";
	c[0].argv = waiter;
	c[0].timeout_ms = 20000;
	c[1].host = "127.0.0.1";
	c[1].argv = ARGV("sh", "-c", "echo one");
	c[2].host = "localhost";
	c[2].argv = ARGV("sh", "-c", "exit 3");
	c[3].host = "localhost";
	c[3].argv = ARGV("sh", "-c", "kill -TERM $$");
	c[4].host = "localhost";
	c[4].argv = ARGV("/nonexistent/mr-runcb-prog");
	c[5].host = "localhost";
	c[5].argv = ARGV(NULL); /* fails validation in hal.c */
	assert_int_equal(mr_hal_run_cb(hal, c, 6, on_done, &s, &err), 0);
	check_final(&s);
	assert_int_equal(c[0].hal_rc, 0);
	assert_string_equal(mr_buf_cstr(&c[0].out), "waited\n");
	assert_string_equal(s.out[1], "one\n");
	assert_int_equal(s.status[2], 3);
	assert_int_equal(s.sig[3], SIGTERM);
	assert_true(s.hal_rc[4] < 0 || s.status[4] == 127);
	assert_int_equal(s.hal_rc[5], MESHRUN_E_INVAL);
	/* c[1] was reported before c[0] (c[0] waited for it) */
	for (size_t k = 0; k < s.norder && s.order[k] != 1; k++)
		assert_int_not_equal(s.order[k], 0);

	/* no callback: plain mr_hal_run still works on the same hal */
	release_all(c, 6);
	assert_int_equal(mr_hal_run(hal, &c[1], 1, &err), 0);
	assert_string_equal(mr_buf_cstr(&c[1].out), "one\n");
	release_all(c, 6);
	mr_hal_free(hal);
	unlink(s.touch_path);
	rmdir(dir);
}

/* The one call a callback may make (hal.h): mr_hal_remove_at_exit() of the
 * directory its command made. The local hal writes the watchdog's mark at once,
 * so the other command of the batch, which waits for the mark, finishes; the
 * watchdog removes the directory when the hal goes. */
struct guard {
	struct mr_hal *hal;
	struct mr_hal_cmd *maker;
	const char *dir;
	int rc;
};

static void guard_done(struct mr_hal_cmd *cmd, void *ctx)
{
	struct guard *g = ctx;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	if (cmd == g->maker)
		g->rc = mr_hal_remove_at_exit(g->hal, cmd->host, g->dir, &err);
}

static void test_remove_at_exit_in_callback(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c[2] = { 0 };
	char top[] = "/tmp/mr-runcb-XXXXXX", dir[64], mark[96];
	struct guard g = { .maker = &c[0], .dir = dir, .rc = -1 };
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(top));
	snprintf(dir, sizeof(dir), "%s/job", top);
	snprintf(mark, sizeof(mark), "%s/" MR_HAL_WATCHDOG_MARK, dir);
	assert_int_equal(mr_hal_new_local(&g.hal, NULL, &err), 0);
	c[0].host = "localhost";
	c[0].argv = ARGV("mkdir", dir);
	c[1].host = "localhost";
	c[1].argv = ARGV("sh", "-c", "i=0; while [ ! -s \"$0\" ]; do i=$((i+1)); [ $i -lt 1000 ] || exit 1; sleep 0.01; done; cat \"$0\"",
			 mark);
	c[1].timeout_ms = 20000;
	assert_int_equal(mr_hal_run_cb(g.hal, c, 2, guard_done, &g, &err), 0);
	assert_int_equal(g.rc, 0);
	assert_int_equal(c[0].status, 0);
	assert_int_equal(c[1].status, 0); /* the mark came while the batch ran */
	assert_non_null(strchr(mr_buf_cstr(&c[1].out), ' ')); /* "HOST PID" */
	release_all(c, 2);
	mr_hal_free(g.hal);
	for (int i = 0; i < 500 && stat(dir, &st) == 0; i++)
		usleep(10000); /* the watchdog removes it after its EOF */
	assert_int_not_equal(stat(dir, &st), 0);
	rmdir(top);
}

/* A callback may not start another run on the same hal. */
struct reenter {
	struct mr_hal *hal;
	int rc;
};

static void on_done_reenter(struct mr_hal_cmd *cmd, void *ctx)
{
	struct reenter *r = ctx;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c = { 0 };

	(void)cmd;
	c.host = "h1";
	c.argv = ARGV("true");
	r->rc = mr_hal_run(r->hal, &c, 1, &err);
	mr_hal_cmd_release(&c);
}

static struct mr_hal *new_replay(struct mr_replay **rpp)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_replay *rp = NULL;
	struct mr_hal *hal = NULL;

	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_add_host(rp, "h1"), 0);
	assert_int_equal(mr_replay_add_host(rp, "h2"), 0);
	assert_int_equal(mr_replay_add_host(rp, "h3"), 0);
	assert_int_equal(mr_hal_new_replay(&hal, rp, NULL, &err), 0);
	*rpp = rp;
	return hal;
}

static void test_replay(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_replay *rp = NULL;
	struct mr_hal *hal = new_replay(&rp);
	struct mr_hal_cmd c[6] = { 0 };
	struct seen s = { .cmds = c, .n = 6 };
	struct reenter re = { hal, 0 };

	(void)state;
	assert_int_equal(mr_replay_add(rp, "h1", "slow", 0, "h1 slow\n", NULL, 60, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h2", "slow", 2, "h2 slow\n", NULL, 30, 0), 0);
	assert_int_equal(mr_replay_add(rp, "*", "fast", 0, "fast\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h3", "gone", 0, NULL, NULL, 10, MESHRUN_E_NOEXIT), 0);
	c[0].host = "h1";
	c[0].argv = ARGV("slow");
	c[1].host = "h2";
	c[1].argv = ARGV("slow");
	c[2].host = "h3";
	c[2].argv = ARGV("fast");
	c[3].host = "h3";
	c[3].argv = ARGV("gone");
	c[4].host = "nohost"; /* not in the fixture: a connect failure */
	c[4].argv = ARGV("fast");
	c[5].host = "h1";
	c[5].argv = ARGV("unknown-command");
	assert_int_equal(mr_hal_run_cb(hal, c, 6, on_done, &s, &err), 0);
	check_final(&s);
	/* the order of the scripted delays: 0 (batch order), 10, 30, 60 */
	assert_int_equal(s.order[0], 2);
	assert_int_equal(s.order[1], 4);
	assert_int_equal(s.order[2], 5);
	assert_int_equal(s.order[3], 3);
	assert_int_equal(s.order[4], 1);
	assert_int_equal(s.order[5], 0);
	assert_string_equal(s.out[0], "h1 slow\n");
	assert_int_equal(s.status[1], 2);
	assert_int_equal(s.hal_rc[3], MESHRUN_E_NOEXIT);
	assert_int_equal(s.hal_rc[4], MESHRUN_E_CONNECT);
	assert_int_equal(s.hal_rc[5], MESHRUN_E_NOTFOUND);
	assert_int_equal(c[0].elapsed_ms, 60);
	release_all(c, 6);

	/* reentry from a callback is refused, the outer run is unharmed */
	c[0].host = "h2";
	c[0].argv = ARGV("fast");
	assert_int_equal(mr_hal_run_cb(hal, c, 1, on_done_reenter, &re, &err), 0);
	assert_int_equal(re.rc, MESHRUN_E_INVAL);
	assert_true(mr_hal_cmd_ok(&c[0]));
	release_all(c, 1);
	mr_hal_free(hal);
}

/* The routing backend reports both shares, with the results copied back. */
static int new_remote(struct mr_hal **out, const struct mr_hal_opts *opts, void *ctx,
		      struct meshrun_err *err)
{
	struct mr_replay **rpp = ctx;
	struct mr_replay *rp = NULL;

	(void)rpp;
	if (mr_replay_new(&rp) < 0)
		return MESHRUN_E_NOMEM;
	if (mr_replay_add(rp, "*", "hostname", 0, "remote\n", NULL, 5, 0) < 0) {
		mr_replay_free(rp);
		return MESHRUN_E_NOMEM;
	}
	return mr_hal_new_replay(out, rp, opts, err);
}

static void test_mux(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_mux_ctors ctors = { NULL, new_remote, NULL };
	struct mr_hal *hal = NULL;
	struct mr_hal_cmd c[4] = { 0 };
	struct seen s = { .cmds = c, .n = 4 };

	(void)state;
	assert_int_equal(mr_hal_new_mux(&hal, NULL, &ctors, &err), 0);
	c[0].host = "h1";
	c[0].argv = ARGV("hostname");
	c[1].host = "localhost";
	c[1].argv = ARGV("sh", "-c", "echo local");
	c[2].host = "h2";
	c[2].argv = ARGV("hostname");
	c[3].host = "localhost";
	c[3].argv = ARGV(NULL);
	assert_int_equal(mr_hal_run_cb(hal, c, 4, on_done, &s, &err), 0);
	check_final(&s);
	assert_string_equal(s.out[0], "remote\n");
	assert_string_equal(s.out[1], "local\n");
	assert_string_equal(s.out[2], "remote\n");
	assert_int_equal(s.hal_rc[3], MESHRUN_E_INVAL);
	release_all(c, 4);
	mr_hal_free(hal);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_local),
		cmocka_unit_test(test_remove_at_exit_in_callback),
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_mux),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
