/* Unit tests for src/hal/replay.c: fixture folders, scripted answers, failures, the log. */
#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "hal/hal.h"
#include "hal/replay.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define ARGV(...) ((char *const[]){ __VA_ARGS__, NULL })

#define SP_CMD "system_profiler", "SPThunderboltDataType", "-json"
#define NS_CMD "networksetup", "-listallhardwareports"

/* A temporary fixture folder, removed by fixture_rm(). */
struct fixture {
	char dir[64];
};

static void put(struct fixture *f, const char *rel, const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	assert_int_equal(mr_write_file(path, text, strlen(text), 0644, NULL), 0);
}

static void mkd(struct fixture *f, const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void fixture_make(struct fixture *f, bool with_cluster_json)
{
	snprintf(f->dir, sizeof(f->dir), "/tmp/mr-replay-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	mkd(f, "h1");
	mkd(f, "h2");
	put(f, "h1/system_profiler.json", "{\"SPThunderboltDataType\": [\"h1\"]}\n");
	put(f, "h1/networksetup.txt", "Hardware Port: Thunderbolt 1\nDevice: en2\n");
	put(f, "h1/ibv_devices.txt", "    device          \t   node GUID\n    rdma_en2\n");
	put(f, "h2/system_profiler.json", "{\"SPThunderboltDataType\": [\"h2\"]}\n");
	/* h2 has no networksetup.txt and no ibv_devices.txt */
	if (with_cluster_json)
		put(f, "cluster.json", "{\"hosts\": [\"h1\", \"h2\", \"h3\"], \"expect\": \"ring\"}\n");
}

static void fixture_rm(struct fixture *f)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
}

static struct mr_hal *new_replay(struct mr_replay *rp)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;

	assert_int_equal(mr_hal_new_replay(&hal, rp, NULL, &err), 0);
	assert_string_equal(mr_hal_name(hal), "replay");
	assert_ptr_equal(mr_hal_replay(hal), rp);
	return hal;
}

static void run1(struct mr_hal *hal, struct mr_hal_cmd *c, const char *host, char *const *argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	memset(c, 0, sizeof(*c));
	c->host = host;
	c->argv = argv;
	assert_int_equal(mr_hal_run(hal, c, 1, &err), 0);
}

static void test_fixture_subfolders(void **state)
{
	struct fixture f;
	struct mr_replay *rp = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal;
	struct mr_hal_cmd c;

	(void)state;
	fixture_make(&f, false);
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_load(rp, f.dir, &err), 0);
	assert_int_equal(mr_replay_host_count(rp), 2);
	assert_string_equal(mr_replay_host(rp, 0), "h1");
	assert_string_equal(mr_replay_host(rp, 1), "h2");
	hal = new_replay(rp);

	run1(hal, &c, "h1", ARGV(SP_CMD));
	assert_true(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_buf_cstr(&c.out), "{\"SPThunderboltDataType\": [\"h1\"]}\n");
	assert_string_equal(mr_buf_cstr(&c.errout), "");
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h2", ARGV(SP_CMD));
	assert_string_equal(mr_buf_cstr(&c.out), "{\"SPThunderboltDataType\": [\"h2\"]}\n");
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h1", ARGV(NS_CMD));
	assert_string_equal(mr_buf_cstr(&c.out), "Hardware Port: Thunderbolt 1\nDevice: en2\n");
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h1", ARGV("ibv_devices"));
	assert_true(mr_hal_cmd_ok(&c));
	assert_non_null(strstr(mr_buf_cstr(&c.out), "rdma_en2"));
	mr_hal_cmd_release(&c);

	/* no fixture file and no default: a clear error */
	run1(hal, &c, "h2", ARGV(NS_CMD));
	assert_int_equal(c.hal_rc, MESHRUN_E_NOTFOUND);
	assert_string_equal(c.err.msg, "replay: no answer for 'networksetup -listallhardwareports' on host 'h2'");
	mr_hal_cmd_release(&c);

	/* a host that is no subfolder */
	run1(hal, &c, "h9", ARGV("ibv_devices"));
	assert_int_equal(c.hal_rc, MESHRUN_E_CONNECT);
	assert_string_equal(c.err.msg, "host 'h9' is not in the replay fixture");
	mr_hal_cmd_release(&c);

	/* the log: every command that reached a host, in order */
	assert_int_equal(mr_replay_log_count(rp, NULL), 5);
	assert_int_equal(mr_replay_log_count(rp, "h1"), 3);
	assert_int_equal(mr_replay_log_count(rp, "h2"), 2);
	assert_int_equal(mr_replay_log_count(rp, "h9"), 0);
	{
		const char *h = NULL;

		assert_string_equal(mr_replay_log_cmd(rp, NULL, 1, &h),
				    "system_profiler SPThunderboltDataType -json");
		assert_string_equal(h, "h2");
		assert_string_equal(mr_replay_log_cmd(rp, "h1", 2, &h), "ibv_devices");
		assert_string_equal(h, "h1");
		assert_string_equal(mr_replay_log_cmd(rp, "h2", 1, NULL),
				    "networksetup -listallhardwareports");
		assert_null(mr_replay_log_cmd(rp, "h2", 2, &h));
		assert_null(h);
	}
	mr_replay_log_clear(rp);
	assert_int_equal(mr_replay_log_count(rp, NULL), 0);
	mr_hal_free(hal);
	fixture_rm(&f);
}

static void test_fixture_cluster_json(void **state)
{
	static const struct {
		const char *json;
		const char *msg; /* NULL: loads */
	} cases[] = {
		{ "{\"hosts\": [\"h1\", \"h2\", \"h3\"]}", NULL },
		{ "{\"hosts\": [{\"name\": \"h1\"}, {\"name\": \"h2\", \"rdma\": false}, {\"name\": \"h3\"}]}", NULL },
		{ "[\"h1\", \"h2\", \"h3\"]", NULL },
		{ "{\"nodes\": []}", "cluster.json: top level: missing key 'hosts'" },
		{ "{\"hosts\": [\"h1\", 3]}", "cluster.json: hosts[1]: expected a string, got number" },
		{ "{\"hosts\": [{\"ssh\": \"h1\"}]}", "cluster.json: hosts[0]: missing key 'name'" },
		{ "{\"hosts\": [\"../etc\"]}", "cluster.json: hosts[0]: '../etc' is not a valid host name" },
		{ "{\"hosts\": []}", "cluster.json: hosts: no hosts" },
		{ "{\"hosts\": [", "cluster.json:1:" },
	};
	struct fixture f;

	(void)state;
	fixture_make(&f, false);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct mr_replay *rp = NULL;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int rc;

		put(&f, "cluster.json", cases[i].json);
		assert_int_equal(mr_replay_new(&rp), 0);
		rc = mr_replay_load(rp, f.dir, &err);
		if (!cases[i].msg) {
			assert_int_equal(rc, 0);
			assert_int_equal(mr_replay_host_count(rp), 3);
			assert_string_equal(mr_replay_host(rp, 2), "h3");
		} else {
			assert_int_equal(rc, MESHRUN_E_PARSE);
			/* the message names the file by its full path, then the JSON path */
			assert_non_null(strstr(err.msg, f.dir));
			assert_non_null(strstr(err.msg, cases[i].msg));
		}
		mr_replay_free(rp);
	}

	/* h3 is listed but has no folder: known host, no answers */
	{
		struct mr_replay *rp = NULL;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_hal *hal;
		struct mr_hal_cmd c;

		put(&f, "cluster.json", "{\"hosts\": [\"h1\", \"h3\"]}");
		assert_int_equal(mr_replay_new(&rp), 0);
		assert_int_equal(mr_replay_load(rp, f.dir, &err), 0);
		hal = new_replay(rp);
		run1(hal, &c, "h3", ARGV("ibv_devices"));
		assert_int_equal(c.hal_rc, MESHRUN_E_NOTFOUND);
		mr_hal_cmd_release(&c);
		/* h2 has a folder but is not in cluster.json */
		run1(hal, &c, "h2", ARGV(SP_CMD));
		assert_int_equal(c.hal_rc, MESHRUN_E_CONNECT);
		assert_string_equal(c.err.msg, "host 'h2' is not in the replay fixture");
		mr_hal_cmd_release(&c);
		mr_hal_free(hal);
	}
	fixture_rm(&f);

	/* missing or empty folders */
	{
		struct mr_replay *rp = NULL;
		struct meshrun_err err = MESHRUN_ERR_INIT;

		assert_int_equal(mr_replay_new(&rp), 0);
		assert_int_equal(mr_replay_load(rp, "/nonexistent-meshrun-fixture", &err), MESHRUN_E_SYS);
		assert_string_equal(err.msg, "open replay fixture folder '/nonexistent-meshrun-fixture': No such file or directory");
		mr_err_clear(&err);
		snprintf(f.dir, sizeof(f.dir), "/tmp/mr-replay-test-XXXXXX");
		assert_non_null(mkdtemp(f.dir));
		assert_int_equal(mr_replay_load(rp, f.dir, &err), MESHRUN_E_NOTFOUND);
		assert_non_null(strstr(err.msg, "no cluster.json and no host folders"));
		mr_replay_free(rp);
		fixture_rm(&f);
	}
}

static void test_scripted(void **state)
{
	struct fixture f;
	struct mr_replay *rp = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal;
	struct mr_hal_cmd c;
	char d[128];

	(void)state;
	fixture_make(&f, true);
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_load(rp, f.dir, &err), 0);
	/* defaults for every host, then overrides */
	assert_int_equal(mr_replay_add(rp, "*", "ibv_devices", 0, "default-ibv\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "*", "ipconfig getifaddr *", 1, NULL, "no address\n", 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h2", "ipconfig getifaddr en2", 0, "10.0.0.2\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "*", "sh -c 'echo hi'", 0, "hi\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h3", "kill-me", -SIGKILL, NULL, NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "*", "*", 0, NULL, NULL, 0, 1), MESHRUN_E_INVAL);
	hal = new_replay(rp);

	/* fixture beats a "*" default; the default answers where no file exists */
	run1(hal, &c, "h1", ARGV("ibv_devices"));
	assert_non_null(strstr(mr_buf_cstr(&c.out), "rdma_en2"));
	mr_hal_cmd_release(&c);
	run1(hal, &c, "h2", ARGV("ibv_devices"));
	assert_string_equal(mr_buf_cstr(&c.out), "default-ibv\n");
	mr_hal_cmd_release(&c);

	/* prefix pattern; host-specific answer beats it */
	run1(hal, &c, "h1", ARGV("ipconfig", "getifaddr", "en2"));
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.status, 1);
	assert_string_equal(mr_buf_cstr(&c.errout), "no address\n");
	mr_hal_cmd_release(&c);
	run1(hal, &c, "h2", ARGV("ipconfig", "getifaddr", "en2"));
	assert_true(mr_hal_cmd_ok(&c));
	assert_string_equal(mr_buf_cstr(&c.out), "10.0.0.2\n");
	mr_hal_cmd_release(&c);
	run1(hal, &c, "h2", ARGV("ipconfig", "getifaddr", "en3"));
	assert_int_equal(c.status, 1);
	mr_hal_cmd_release(&c);

	/* a host-specific answer beats the fixture file */
	assert_int_equal(mr_replay_add(rp, "h1", "system_profiler SPThunderboltDataType -json", 0, "{}", NULL, 0, 0), 0);
	run1(hal, &c, "h1", ARGV(SP_CMD));
	assert_string_equal(mr_buf_cstr(&c.out), "{}");
	mr_hal_cmd_release(&c);

	/* commands are matched in their shell-quoted form */
	run1(hal, &c, "h3", ARGV("sh", "-c", "echo hi"));
	assert_string_equal(mr_buf_cstr(&c.out), "hi\n");
	mr_hal_cmd_release(&c);
	run1(hal, &c, "h3", ARGV("sh", "-c", "echo", "hi"));
	assert_int_equal(c.hal_rc, MESHRUN_E_NOTFOUND);
	assert_string_equal(c.err.msg, "replay: no answer for 'sh -c echo hi' on host 'h3'");
	mr_hal_cmd_release(&c);

	/* killed by a signal */
	run1(hal, &c, "h3", ARGV("kill-me"));
	assert_int_equal(c.hal_rc, 0);
	assert_int_equal(c.signal, SIGKILL);
	assert_string_equal(mr_hal_cmd_describe(&c, d, sizeof(d)), "killed by signal 9 (Killed)");
	mr_hal_cmd_release(&c);

	/* a batch over several hosts, one unknown */
	{
		struct mr_hal_cmd cs[3];

		memset(cs, 0, sizeof(cs));
		cs[0].host = "h1";
		cs[0].argv = ARGV(NS_CMD);
		cs[1].host = "h2";
		cs[1].argv = ARGV("ipconfig", "getifaddr", "en2");
		cs[2].host = "nohost";
		cs[2].argv = ARGV(NS_CMD);
		assert_int_equal(mr_hal_run(hal, cs, 3, &err), 0);
		assert_true(mr_hal_cmd_ok(&cs[0]));
		assert_true(mr_hal_cmd_ok(&cs[1]));
		assert_int_equal(cs[2].hal_rc, MESHRUN_E_CONNECT);
		assert_string_equal(cs[2].err.msg, "host 'nohost' is not in the replay fixture");
		for (int i = 0; i < 3; i++)
			mr_hal_cmd_release(&cs[i]);
	}
	mr_hal_free(hal);
	fixture_rm(&f);
}

static void test_failures(void **state)
{
	struct mr_replay *rp = NULL;
	struct meshrun_err errs[3];
	struct mr_hal *hal;
	struct mr_hal_cmd c;
	const char *hosts[] = { "h1", "h2", "h3" };

	(void)state;
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_add_host(rp, "h1"), 0);
	assert_int_equal(mr_replay_add_host(rp, "h2"), 0);
	assert_int_equal(mr_replay_add_host(rp, "bad/name"), MESHRUN_E_INVAL);
	assert_int_equal(mr_replay_add(rp, "h2", "*", 0, NULL, NULL, 0, MESHRUN_E_CONNECT), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "slow", 0, "x", NULL, 30, MESHRUN_E_TIMEOUT), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "noexit", 0, "partial", NULL, 0, MESHRUN_E_NOEXIT), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "late", 0, "done\n", NULL, 5000, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "quick", 0, "done\n", NULL, 20, 0), 0);
	hal = new_replay(rp);

	/* connect: h2 scripted to fail, h3 unknown */
	assert_int_equal(mr_hal_connect(hal, hosts, 3, errs), 2);
	assert_int_equal(errs[0].code, 0);
	assert_int_equal(errs[1].code, MESHRUN_E_CONNECT);
	assert_string_equal(errs[1].msg, "connect to 'h2' failed (replay)");
	assert_int_equal(errs[2].code, MESHRUN_E_CONNECT);
	assert_string_equal(errs[2].msg, "host 'h3' is not in the replay fixture");

	run1(hal, &c, "h2", ARGV("anything"));
	assert_int_equal(c.hal_rc, MESHRUN_E_CONNECT);
	assert_string_equal(c.err.msg, "connect to 'h2' failed (replay)");
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h1", ARGV("slow"));
	assert_int_equal(c.hal_rc, MESHRUN_E_TIMEOUT);
	assert_string_equal(c.err.msg, "command 'slow' on 'h1' timed out after 30000 ms (replay)");
	assert_int_equal(c.out.len, 0);
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h1", ARGV("noexit"));
	assert_int_equal(c.hal_rc, MESHRUN_E_NOEXIT);
	assert_int_equal(c.status, 0);
	assert_false(mr_hal_cmd_ok(&c));
	assert_string_equal(c.err.msg, "command 'noexit' on 'h1': no exit status received (replay)");
	mr_hal_cmd_release(&c);

	/* a delay past the command's own deadline is a timeout */
	memset(&c, 0, sizeof(c));
	c.host = "h1";
	c.argv = ARGV("late");
	c.timeout_ms = 50;
	assert_int_equal(mr_hal_run(hal, &c, 1, NULL), 0);
	assert_int_equal(c.hal_rc, MESHRUN_E_TIMEOUT);
	assert_string_equal(c.err.msg, "command 'late' on 'h1' timed out after 50 ms");
	mr_hal_cmd_release(&c);

	run1(hal, &c, "h1", ARGV("quick"));
	assert_true(mr_hal_cmd_ok(&c));
	assert_int_equal(c.elapsed_ms, 20);
	mr_hal_cmd_release(&c);

	/* the scripted connect failure never reached h2: not logged */
	assert_int_equal(mr_replay_log_count(rp, "h2"), 0);
	assert_int_equal(mr_replay_log_count(rp, "h1"), 4);
	mr_hal_free(hal);
}

static void test_no_command_sent(void **state)
{
	/* the assertion a configurator test makes: nothing reached any host */
	struct mr_replay *rp = NULL;
	struct mr_hal *hal;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_cmd c = { 0 };

	(void)state;
	assert_int_equal(mr_replay_new(&rp), 0);
	hal = new_replay(rp);
	assert_int_equal(mr_replay_log_count(rp, NULL), 0);
	/* open host set: any host is known; an unanswered command is logged */
	c.host = "anyhost";
	c.argv = ARGV("uname");
	assert_int_equal(mr_hal_run(hal, &c, 1, &err), 0);
	assert_int_equal(c.hal_rc, MESHRUN_E_NOTFOUND);
	assert_int_equal(mr_replay_log_count(rp, NULL), 1);
	mr_hal_cmd_release(&c);
	mr_hal_free(hal);

	/* a hal that cannot be created still frees the script */
	assert_int_equal(mr_hal_new_replay(&hal, NULL, NULL, &err), MESHRUN_E_INVAL);
	assert_null(hal);
}

/* --- spawn --- */

struct events {
	struct mr_buf out, err;
	int exits, hal_rc, status, sig;
	char msg[MESHRUN_ERR_MSG_MAX];
};

static void on_out(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	assert_int_equal(mr_buf_append(&((struct events *)ctx)->out, data, len), 0);
}

static void on_err(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	assert_int_equal(mr_buf_append(&((struct events *)ctx)->err, data, len), 0);
}

static void ev_exit(struct mr_proc *p, int hal_rc, int status, int sig,
		    const struct meshrun_err *err, void *ctx)
{
	struct events *e = ctx;

	e->exits++;
	e->hal_rc = hal_rc;
	e->status = status;
	e->sig = sig;
	if (err)
		snprintf(e->msg, sizeof(e->msg), "%s", err->msg);
}

static int spawn(struct mr_hal *hal, struct events *e, const char *host, char *const *argv,
		 struct mr_proc **p, struct meshrun_err *err)
{
	struct mr_spawn sp = { 0 };

	memset(e, 0, sizeof(*e));
	sp.host = host;
	sp.argv = argv;
	sp.events = (struct mr_proc_events){ e, on_out, on_err, ev_exit };
	return mr_hal_spawn(hal, &sp, p, err);
}

static void wait_exit(struct mr_hal *hal, struct events *e)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	for (int i = 0; i < 100 && !e->exits; i++)
		assert_true(mr_hal_poll(hal, 1000, &err) >= 0);
	assert_int_equal(e->exits, 1);
}

static void test_spawn(void **state)
{
	struct mr_replay *rp = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal;
	struct mr_proc *p = NULL, *q = NULL;
	struct events e, e2;

	(void)state;
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_add_host(rp, "h1"), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "rank 0", 3, "hello\n", "warn\n", 10, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "rank forever", 0, NULL, NULL, 600000, 0), 0);
	assert_int_equal(mr_replay_add(rp, "h1", "rank lost", 0, "x", NULL, 0, MESHRUN_E_NOEXIT), 0);
	hal = new_replay(rp);

	assert_int_equal(spawn(hal, &e, "h1", ARGV("rank", "0"), &p, &err), 0);
	assert_int_equal(mr_proc_write(p, "in", 2, &err), 0);
	assert_int_equal(mr_proc_close_stdin(p, &err), 0);
	assert_false(mr_proc_exited(p));
	wait_exit(hal, &e);
	assert_true(mr_proc_exited(p));
	assert_int_equal(e.hal_rc, 0);
	assert_int_equal(e.status, 3);
	assert_string_equal(mr_buf_cstr(&e.out), "hello\n");
	assert_string_equal(mr_buf_cstr(&e.err), "warn\n");
	mr_proc_release(p);
	mr_buf_release(&e.out);
	mr_buf_release(&e.err);

	/* a signal ends a process that would run for ten minutes */
	assert_int_equal(spawn(hal, &e, "h1", ARGV("rank", "forever"), &p, &err), 0);
	assert_int_equal(spawn(hal, &e2, "h1", ARGV("rank", "lost"), &q, &err), 0);
	assert_int_equal(mr_hal_poll(hal, 0, &err), 1); /* "lost" ended, "forever" runs */
	assert_int_equal(e2.exits, 1);
	assert_int_equal(e2.hal_rc, MESHRUN_E_NOEXIT);
	assert_string_equal(e2.msg, "command 'rank lost' on 'h1': no exit status received (replay)");
	assert_int_equal(e.exits, 0);
	assert_int_equal(mr_proc_signal(p, SIGTERM, &err), 0);
	wait_exit(hal, &e);
	assert_int_equal(e.sig, SIGTERM);
	assert_int_equal(mr_hal_poll(hal, -1, &err), 0);
	mr_buf_release(&e2.out);

	/* unknown host and unanswered commands fail at once */
	assert_int_equal(spawn(hal, &e, "h7", ARGV("rank", "0"), &p, &err), MESHRUN_E_CONNECT);
	assert_null(p);
	assert_string_equal(err.msg, "host 'h7' is not in the replay fixture");
	mr_err_clear(&err);
	assert_int_equal(spawn(hal, &e, "h1", ARGV("rank", "9"), &p, &err), MESHRUN_E_NOTFOUND);
	assert_string_equal(err.msg, "replay: no answer for 'rank 9' on host 'h1'");

	assert_int_equal(mr_replay_log_count(rp, "h1"), 4);
	assert_string_equal(mr_replay_log_cmd(rp, "h1", 1, NULL), "rank forever");
	mr_hal_free(hal); /* releases the procs still held */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_subfolders),
		cmocka_unit_test(test_fixture_cluster_json),
		cmocka_unit_test(test_scripted),
		cmocka_unit_test(test_failures),
		cmocka_unit_test(test_no_command_sent),
		cmocka_unit_test(test_spawn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
