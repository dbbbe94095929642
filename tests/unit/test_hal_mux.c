/*
 * Unit tests for src/hal/mux.c, the routing backend: this machine's hosts go to
 * the real local backend, the others to a replay backend standing in for ssh;
 * runs, connects and spawns are routed per host, one poll drives both, and the
 * remote backend is made only when a remote host is used.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/fdio.h"
#include "hal/hal.h"
#include "hal/replay.h"
#include "hal/ssh_opts.h"

#include <setjmp.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct remote {
	struct mr_replay *rp; /* handed to the replay hal when it is made */
	bool made;
	int fail;             /* < 0: the constructor fails with this code */
};

static int new_remote(struct mr_hal **out, const struct mr_hal_opts *opts, void *ctx,
		      struct meshrun_err *err)
{
	struct remote *r = ctx;

	if (r->fail < 0) {
		*out = NULL;
		return mr_err_set(err, r->fail, "ssh_config 'bad.conf': line 3: unknown keyword");
	}
	r->made = true;
	return mr_hal_new_replay(out, r->rp, opts, err);
}

static struct mr_hal *new_mux(struct remote *r)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal_mux_ctors ctors = { NULL, new_remote, r };
	struct mr_hal *hal = NULL;

	assert_int_equal(mr_replay_new(&r->rp), 0);
	assert_int_equal(mr_hal_new_mux(&hal, NULL, &ctors, &err), 0);
	assert_string_equal(mr_hal_name(hal), "auto");
	return hal;
}

static void free_mux(struct mr_hal *hal, struct remote *r)
{
	mr_hal_free(hal);
	if (!r->made)
		mr_replay_free(r->rp);
}

/* The hint for a failed connection fits the failure (issue 15), not always
 * "password-less ssh?". */
static void test_err_hint(void **state)
{
	/* why: the reason the backend records with the error (sys_errno) */
	static const struct { int code, why; const char *msg, *want; } cases[] = {
		{ MESHRUN_E_CONNECT, MR_HAL_WHY_RESOLVE, "ssh to 'x' (x): cannot resolve 'x': Name or service not known", "does not resolve" },
		{ MESHRUN_E_CONNECT, ETIMEDOUT, "ssh to 'x' (10.0.0.9:22): connect timed out after 2000 ms", "no answer within" },
		{ MESHRUN_E_CONNECT, ECONNREFUSED, "ssh to 'x' (10.0.0.9:22): connect: Connection refused", "nothing listens" },
		{ MESHRUN_E_CONNECT, EHOSTUNREACH, "ssh to 'x' (10.0.0.9:22): connect: No route to host", "no route" },
		{ MESHRUN_E_CONNECT, ENETUNREACH, "ssh to 'x' (10.0.0.9:22): connect: Network is unreachable", "no route" },
		{ MESHRUN_E_AUTH, 0, "ssh to 'me@x' (10.0.0.9:22): authentication as 'me' failed", "authorized_keys" },
		{ MESHRUN_E_HOSTKEY, MR_HAL_WHY_HOSTKEY_CHANGED, "ssh to 'x' (10.0.0.9:22): host key changed", "host key" },
		{ 0, 0, "", NULL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		const char *h;

		e.code = cases[i].code;
		e.sys_errno = cases[i].why;
		snprintf(e.msg, sizeof(e.msg), "%s", cases[i].msg);
		h = mr_hal_err_hint(&e);
		if (!cases[i].want) {
			if (h)
				fail_msg("case %zu: unexpected hint '%s'", i, h);
			continue;
		}
		if (!h || !strstr(h, cases[i].want))
			fail_msg("case %zu: hint '%s' lacks '%s'", i, h ? h : "(none)", cases[i].want);
		assert_null(strstr(h, "password-less"));
	}
}

static void test_is_local(void **state)
{
	char self[256];

	(void)state;
	assert_true(mr_hal_host_is_local(NULL));
	assert_true(mr_hal_host_is_local(""));
	assert_true(mr_hal_host_is_local("127.0.0.1"));
	assert_true(mr_hal_host_is_local("localhost"));
	assert_true(mr_hal_host_is_local("LocalHost"));
	assert_true(mr_hal_host_is_local("::1"));
	assert_int_equal(gethostname(self, sizeof(self)), 0);
	assert_true(mr_hal_host_is_local(self));
	assert_false(mr_hal_host_is_local("h1"));
	assert_false(mr_hal_host_is_local("10.0.0.1"));
	assert_false(mr_hal_host_is_local("127.0.0.2"));
}

static void test_run_routes_per_host(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct remote r = { 0 };
	struct mr_hal *hal = new_mux(&r);
	char *echo[] = { "sh", "-c", "echo local-$0", "x", NULL };
	char *uname[] = { "uname", NULL };
	struct mr_hal_cmd c[4] = { 0 };
	const char *h = NULL;

	(void)state;
	/* only local hosts: the remote backend is never made */
	c[0].host = "127.0.0.1";
	c[0].argv = echo;
	assert_int_equal(mr_hal_run(hal, c, 1, &err), 0);
	assert_true(mr_hal_cmd_ok(&c[0]));
	assert_string_equal(mr_buf_cstr(&c[0].out), "local-x\n");
	mr_hal_cmd_release(&c[0]);
	assert_false(r.made);
	assert_null(mr_hal_mux_inner(hal, "h1"));
	assert_non_null(mr_hal_mux_inner(hal, "localhost"));

	assert_int_equal(mr_replay_add(r.rp, "*", "uname", 0, "Darwin\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(r.rp, "h2", "uname", 7, NULL, "no\n", 0, 0), 0);
	c[0].host = "h1";
	c[0].argv = uname;
	c[1].host = "localhost";
	c[1].argv = echo;
	c[2].host = "h2";
	c[2].argv = uname;
	c[3].host = "127.0.0.1";
	c[3].argv = uname; /* the real uname here: Linux, not the replay's Darwin */
	assert_int_equal(mr_hal_run(hal, c, 4, &err), 0);
	assert_true(r.made);
	assert_true(mr_hal_cmd_ok(&c[0]));
	assert_string_equal(mr_buf_cstr(&c[0].out), "Darwin\n");
	assert_string_equal(mr_buf_cstr(&c[1].out), "local-x\n");
	assert_int_equal(c[2].hal_rc, 0);
	assert_int_equal(c[2].status, 7);
	assert_string_equal(mr_buf_cstr(&c[2].errout), "no\n");
	assert_true(mr_hal_cmd_ok(&c[3]));
	assert_string_equal(mr_buf_cstr(&c[3].out), "Linux\n");
	/* the remote backend saw exactly the two remote commands */
	assert_int_equal(mr_replay_log_count(r.rp, NULL), 2);
	assert_string_equal(mr_replay_log_cmd(r.rp, NULL, 0, &h), "uname");
	assert_string_equal(h, "h1");
	assert_string_equal(mr_replay_log_cmd(r.rp, NULL, 1, &h), "uname");
	assert_string_equal(h, "h2");
	for (size_t i = 0; i < 4; i++)
		mr_hal_cmd_release(&c[i]);
	free_mux(hal, &r);
}

static void test_connect_routes_per_host(void **state)
{
	struct remote r = { 0 };
	struct mr_hal *hal = new_mux(&r);
	const char *hosts[] = { "localhost", "h1", "down", "127.0.0.1" };
	struct meshrun_err errs[4];

	(void)state;
	assert_int_equal(mr_replay_add(r.rp, "down", "*", 0, NULL, NULL, 0, MESHRUN_E_CONNECT), 0);
	assert_int_equal(mr_hal_connect(hal, hosts, 4, errs), 1);
	assert_int_equal(errs[0].code, 0);
	assert_int_equal(errs[1].code, 0);
	assert_int_equal(errs[2].code, MESHRUN_E_CONNECT);
	assert_non_null(strstr(errs[2].msg, "down"));
	assert_int_equal(errs[3].code, 0);
	free_mux(hal, &r);
}

static void test_remote_backend_fails(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct remote r = { .fail = MESHRUN_E_PARSE };
	struct mr_hal *hal = new_mux(&r);
	char *t[] = { "true", NULL };
	struct mr_hal_cmd c[2] = { 0 };
	struct mr_spawn sp = { 0 };
	struct mr_proc *p = NULL;

	(void)state;
	c[0].host = "h1";
	c[0].argv = t;
	c[1].host = "127.0.0.1";
	c[1].argv = t;
	assert_int_equal(mr_hal_run(hal, c, 2, &err), 0);
	assert_int_equal(c[0].hal_rc, MESHRUN_E_PARSE);
	assert_non_null(strstr(c[0].err.msg, "bad.conf"));
	assert_true(mr_hal_cmd_ok(&c[1])); /* the local side still ran */
	mr_hal_cmd_release(&c[0]);
	mr_hal_cmd_release(&c[1]);
	sp.host = "h1";
	sp.argv = t;
	assert_int_equal(mr_hal_spawn(hal, &sp, &p, &err), MESHRUN_E_PARSE);
	assert_null(p);
	assert_non_null(strstr(err.msg, "bad.conf"));
	free_mux(hal, &r);
}

struct seen {
	struct mr_buf out[2];
	int status[2], sig[2], exits[2];
	struct mr_proc *procs[2];
	bool wrong_proc;
};

static int which(struct seen *s, struct mr_proc *p)
{
	if (p == s->procs[0] || p == s->procs[1])
		return p == s->procs[1];
	s->wrong_proc = true; /* the inner proc leaked through */
	return 0;
}

static void on_out(struct mr_proc *p, const char *d, size_t n, void *ctx)
{
	struct seen *s = ctx;

	mr_buf_append(&s->out[which(s, p)], d, n);
}

static void on_exit_cb(struct mr_proc *p, int hal_rc, int status, int sig,
		       const struct meshrun_err *err, void *ctx)
{
	struct seen *s = ctx;
	int i = which(s, p);

	(void)err;
	assert_int_equal(hal_rc, 0);
	s->exits[i]++;
	s->status[i] = status;
	s->sig[i] = sig;
	if (mr_proc_user(p) != (void *)s)
		s->wrong_proc = true;
}

static void test_spawn_and_one_poll(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct remote r = { 0 };
	struct mr_hal *hal = new_mux(&r);
	char *lcmd[] = { "sh", "-c", "read -r l; echo \"local:$l\"; exit 3", NULL };
	char *rcmd[] = { "prog", "--x", NULL };
	struct seen s = { 0 };
	struct mr_spawn sp = { 0 };
	int rounds = 0, running;

	(void)state;
	assert_int_equal(mr_replay_add(r.rp, "h2", "prog --x", 5, "remote\n", NULL, 50, 0), 0);
	sp.events.ctx = &s;
	sp.events.on_stdout = on_out;
	sp.events.on_exit = on_exit_cb;
	sp.user = &s;
	sp.host = "127.0.0.1";
	sp.argv = lcmd;
	assert_int_equal(mr_hal_spawn(hal, &sp, &s.procs[0], &err), 0);
	sp.host = "h2";
	sp.argv = rcmd;
	assert_int_equal(mr_hal_spawn(hal, &sp, &s.procs[1], &err), 0);
	assert_string_equal(mr_proc_host(s.procs[1]), "h2");
	assert_int_equal(mr_proc_write(s.procs[0], "hi\n", 3, &err), 0);
	assert_int_equal(mr_proc_close_stdin(s.procs[0], &err), 0);
	while ((running = mr_hal_poll(hal, 1000, &err)) > 0)
		assert_true(++rounds < 500);
	assert_int_equal(running, 0);
	assert_false(s.wrong_proc);
	assert_int_equal(s.exits[0], 1);
	assert_int_equal(s.exits[1], 1);
	assert_string_equal(mr_buf_cstr(&s.out[0]), "local:hi\n");
	assert_int_equal(s.status[0], 3);
	assert_string_equal(mr_buf_cstr(&s.out[1]), "remote\n");
	assert_int_equal(s.status[1], 5);
	assert_true(mr_proc_exited(s.procs[0]) && mr_proc_exited(s.procs[1]));
	mr_proc_release(s.procs[0]);
	mr_proc_release(s.procs[1]);
	mr_buf_release(&s.out[0]);
	mr_buf_release(&s.out[1]);
	free_mux(hal, &r);
}

/* A signal to a local rank through the mux, and mr_hal_free killing what still runs. */
static void test_signal_and_free(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct remote r = { 0 };
	struct mr_hal *hal = new_mux(&r);
	char *sleeper[] = { "sleep", "30", NULL };
	struct seen s = { 0 };
	struct mr_spawn sp = { 0 };
	struct mr_proc *left = NULL;
	int rounds = 0;

	(void)state;
	sp.events.ctx = &s;
	sp.events.on_stdout = on_out;
	sp.events.on_exit = on_exit_cb;
	sp.user = &s;
	sp.host = "localhost";
	sp.argv = sleeper;
	assert_int_equal(mr_hal_spawn(hal, &sp, &s.procs[0], &err), 0);
	assert_int_equal(mr_hal_spawn(hal, &sp, &s.procs[1], &err), 0);
	assert_int_equal(mr_proc_signal(s.procs[0], SIGTERM, &err), 0);
	while (!s.exits[0]) {
		assert_true(mr_hal_poll(hal, 1000, &err) >= 0);
		assert_true(++rounds < 100);
	}
	assert_int_equal(s.sig[0], SIGTERM);
	assert_int_equal(s.exits[1], 0);
	left = s.procs[1];
	assert_false(mr_proc_exited(left));
	free_mux(hal, &r); /* kills and reaps the second sleeper, no callback */
	assert_int_equal(s.exits[1], 0);
	assert_false(s.wrong_proc);
	mr_buf_release(&s.out[0]);
	mr_buf_release(&s.out[1]);
}

static void on_readable(int fd, void *ctx)
{
	char b[16];

	*(ssize_t *)ctx = read(fd, b, sizeof(b));
}

static void test_watched_fd(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct remote r = { 0 };
	struct mr_hal *hal = new_mux(&r);
	ssize_t got = -2;
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(mr_hal_watch_fd(hal, fds[0], on_readable, &got), 0);
	assert_int_equal(write(fds[1], "abc", 3), 3);
	assert_int_equal(mr_hal_poll(hal, 5000, &err), 0);
	assert_int_equal(got, 3);
	mr_hal_unwatch_fd(hal, fds[0]);
	/* nothing left to wait for: returns at once even for -1 */
	assert_int_equal(mr_hal_poll(hal, -1, &err), 0);
	close(fds[0]);
	close(fds[1]);
	free_mux(hal, &r);
}

/* ssh -G output -> does the host need the OpenSSH client (issue 21 part 4):
 * ssh_config.c's libssh2_gaps decide; jumps are libssh2's now */
static void test_openssh_needed(void **state)
{
	static const char base[] = "hostname 10.0.0.1\nuser root\nport 22\n";
	char g[512], why[300] = "";

	(void)state;
	assert_false(mr_hal_openssh_needed("h1", base, why, sizeof(why)));
	snprintf(g, sizeof(g), "%sproxycommand ssh -W %%h:%%p jump\nproxyjump j1,j2\n", base);
	assert_false(mr_hal_openssh_needed("h1", g, why, sizeof(why)));
	snprintf(g, sizeof(g), "%spkcs11provider /usr/lib/opensc-pkcs11.so\n", base);
	assert_true(mr_hal_openssh_needed("h1", g, why, sizeof(why)));
	assert_non_null(strstr(why, "PKCS11Provider /usr/lib/opensc-pkcs11.so"));
	snprintf(g, sizeof(g), "%spkcs11provider none\n", base);
	assert_false(mr_hal_openssh_needed("h1", g, NULL, 0));
	assert_false(mr_hal_openssh_needed("h1", NULL, NULL, 0));
	assert_false(mr_hal_openssh_needed(NULL, base, NULL, 0));
}

static void test_ssh_pick(void **state)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	enum mr_hal_ssh s = MR_HAL_SSH_OPENSSH;

	(void)state;
	unsetenv("MESHRUN_SSH");
	assert_int_equal(mr_hal_ssh_pick(NULL, &s, &e), 0);
	assert_int_equal(s, MR_HAL_SSH_AUTO);
	assert_int_equal(mr_hal_ssh_pick("openssh", &s, &e), 0);
	assert_int_equal(s, MR_HAL_SSH_OPENSSH);
	setenv("MESHRUN_SSH", "libssh2", 1);
	assert_int_equal(mr_hal_ssh_pick(NULL, &s, &e), 0);
	assert_int_equal(s, MR_HAL_SSH_LIBSSH2);
	assert_int_equal(mr_hal_ssh_pick("auto", &s, &e), 0); /* the flag wins */
	assert_int_equal(s, MR_HAL_SSH_AUTO);
	setenv("MESHRUN_SSH", "putty", 1);
	assert_int_equal(mr_hal_ssh_pick(NULL, &s, &e), MESHRUN_E_USAGE);
	assert_non_null(strstr(e.msg, "MESHRUN_SSH 'putty'"));
	mr_err_clear(&e);
	assert_int_equal(mr_hal_ssh_pick("OpenSSH", &s, &e), MESHRUN_E_USAGE);
	assert_non_null(strstr(e.msg, "--ssh 'OpenSSH'"));
	unsetenv("MESHRUN_SSH");
}

/* Lines of path that contain word (0 when there is no file). */
static int count_lines(const char *path, const char *word)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, word) != NULL;
	fclose(f);
	return n;
}

/*
 * auto (issue 21): the backend choice and the libssh2 backend share one `ssh -G`
 * per host. A fake ssh first on PATH logs its calls and answers -G with
 * 127.0.0.1:1 (refused at once); fc needs PKCS11Provider, so it goes to the
 * OpenSSH client (the fake fails every other call).
 */
static void test_one_ssh_g_per_host(void **state)
{
	char dir[] = "/tmp/mr-fakessh-XXXXXX";
	char path[512], calls[512], script[2048];
	const char *old_path = getenv("PATH");
	char *saved_path = strdup(old_path ? old_path : "/usr/bin:/bin");
	char *argv[] = { "true", NULL };
	const char *hosts[] = { "fa", "fb", "fc" };
	struct mr_hal_cmd cmds[3];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;
	struct mr_hal *os;

	(void)state;
	assert_non_null(saved_path);
	assert_non_null(mkdtemp(dir));
	snprintf(calls, sizeof(calls), "%s/calls", dir);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "echo \"$*\" >>%s\n"
		 "case \" $* \" in *\" -G \"*) ;; *) echo 'fake ssh: no' >&2; exit 255 ;; esac\n"
		 "for a; do h=$a; done\n"
		 "printf 'host %%s\\nhostname 127.0.0.1\\nport 1\\nuser root\\nconnecttimeout 2\\n' \"$h\"\n"
		 "printf 'identityfile %s/nokey\\nuserknownhostsfile %s/kh\\nstricthostkeychecking yes\\n'\n"
		 "[ \"$h\" = fc ] && echo 'pkcs11provider /x/opensc-pkcs11.so'\n"
		 "exit 0\n",
		 calls, dir, dir);
	snprintf(path, sizeof(path), "%s/ssh", dir);
	assert_int_equal(mr_write_file(path, script, strlen(script), 0755, &err), 0);
	snprintf(script, sizeof(script), "%s:%s", dir, saved_path);
	setenv("PATH", script, 1);
	unsetenv("MESHRUN_SSH_CONFIG");
	unsetenv("MESHRUN_SSH_RESOLVER");
	unsetenv("SSH_AUTH_SOCK");

	assert_int_equal(mr_hal_new_auto(&hal, NULL, &err), 0);
	for (int round = 0; round < 2; round++) {
		memset(cmds, 0, sizeof(cmds));
		for (size_t i = 0; i < 3; i++) {
			cmds[i].host = hosts[i];
			cmds[i].argv = argv;
			cmds[i].timeout_ms = 5000;
		}
		assert_int_equal(mr_hal_run(hal, cmds, 3, &err), 0);
		for (size_t i = 0; i < 3; i++) {
			assert_true(cmds[i].hal_rc < 0); /* nothing listens, the fake refuses */
			mr_hal_cmd_release(&cmds[i]);
		}
		/* one -G per host, the first round only: 5 when the choice asked on its own */
		assert_int_equal(count_lines(calls, "-G"), 3);
	}
	os = mr_hal_mux_inner(hal, "fc");
	assert_non_null(os);
	assert_string_equal(mr_hal_name(os), "openssh");
	assert_string_equal(mr_hal_name(mr_hal_mux_inner(hal, "fa")), "ssh");
	mr_hal_free(hal);

	setenv("PATH", saved_path, 1);
	free(saved_path);
	unlink(calls);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_local),
		cmocka_unit_test(test_err_hint),
		cmocka_unit_test(test_run_routes_per_host),
		cmocka_unit_test(test_connect_routes_per_host),
		cmocka_unit_test(test_remote_backend_fails),
		cmocka_unit_test(test_spawn_and_one_poll),
		cmocka_unit_test(test_signal_and_free),
		cmocka_unit_test(test_watched_fd),
		cmocka_unit_test(test_openssh_needed),
		cmocka_unit_test(test_ssh_pick),
		cmocka_unit_test(test_one_ssh_g_per_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
