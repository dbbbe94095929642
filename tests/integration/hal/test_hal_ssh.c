/*
 * test_hal_ssh.c - the ssh backend of the hal against real sshd instances.
 *
 * Run by sshd_hosts.sh (which brings up h1..h4 in network namespaces and sets
 * MRH_SSH_CONFIG, MRH_HOSTS, MRH_DIR, MRH_NETNS_PREFIX); exits 77 when started
 * without that environment. Every check prints what failed; exit 1 if any did.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/spawn.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			failures++;                                             \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
		}                                                               \
	} while (0)

static const char *ssh_config;
static const char *mrh_dir;
static const char *ns_prefix;
static struct mr_strvec hosts = MR_STRVEC_INIT;

static struct mr_hal *new_hal_of(int (*make)(struct mr_hal **, const struct mr_hal_opts *,
					      struct meshrun_err *),
				 const char *known_hosts, bool accept_new)
{
	struct mr_hal_opts o = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;

	o.ssh_config = ssh_config;
	o.connect_timeout_ms = 5000;
	o.run_timeout_ms = 20000;
	o.known_hosts = known_hosts;
	o.accept_new_hostkeys = accept_new;
	if (make(&hal, &o, &err) < 0) {
		fprintf(stderr, "new hal: %s\n", err.msg);
		exit(1);
	}
	return hal;
}

static struct mr_hal *new_hal(const char *known_hosts, bool accept_new)
{
	return new_hal_of(mr_hal_new_ssh, known_hosts, accept_new);
}

/* --- process checks inside a namespace --- */

/* How many processes in host's namespace have exactly this argv. */
static int count_in_ns(const char *host, const char *const *argv)
{
	char cmd[256], path[64], buf[4096];
	FILE *f;
	int pid, n = 0;

	snprintf(cmd, sizeof(cmd), "ip netns pids %s%s 2>/dev/null", ns_prefix, host);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%d", &pid) == 1) {
		struct mr_buf want = MR_BUF_INIT;
		ssize_t len;
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = mr_read_full(fd, buf, sizeof(buf));
		close(fd);
		for (size_t i = 0; argv[i]; i++)
			mr_buf_append(&want, argv[i], strlen(argv[i]) + 1);
		if (len == (ssize_t)want.len && !memcmp(buf, want.p, want.len))
			n++;
		mr_buf_release(&want);
	}
	pclose(f);
	return n;
}

/* Wait until count_in_ns() == want (bounded: this is not a timing assertion). */
static int wait_count(const char *host, const char *const *argv, int want, int max_ms)
{
	int64_t end = mr_now_ms() + max_ms;
	int n;

	while ((n = count_in_ns(host, argv)) != want && mr_now_ms() < end)
		mr_sleep_ms(50);
	return n;
}

/* --- spawned process bookkeeping --- */

struct pstate {
	struct mr_buf out, err;
	bool exited;
	int hal_rc, status, sig;
	struct meshrun_err xerr;
};

static void on_out(struct mr_proc *p, const char *d, size_t n, void *ctx)
{
	(void)p;
	mr_buf_append(&((struct pstate *)ctx)->out, d, n);
}

static void on_err(struct mr_proc *p, const char *d, size_t n, void *ctx)
{
	(void)p;
	mr_buf_append(&((struct pstate *)ctx)->err, d, n);
}

static void on_exit_cb(struct mr_proc *p, int hal_rc, int status, int sig,
		       const struct meshrun_err *err, void *ctx)
{
	struct pstate *st = ctx;

	(void)p;
	st->exited = true;
	st->hal_rc = hal_rc;
	st->status = status;
	st->sig = sig;
	if (err)
		st->xerr = *err;
}

static struct mr_proc *spawn(struct mr_hal *hal, const char *host, char *const *argv,
			     char *const *env, const char *cwd, struct pstate *st)
{
	struct mr_spawn sp = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_proc *p = NULL;

	memset(st, 0, sizeof(*st));
	sp.host = host;
	sp.argv = argv;
	sp.env = env;
	sp.cwd = cwd;
	sp.events.ctx = st;
	sp.events.on_stdout = on_out;
	sp.events.on_stderr = on_err;
	sp.events.on_exit = on_exit_cb;
	if (mr_hal_spawn(hal, &sp, &p, &err) < 0) {
		fprintf(stderr, "spawn on %s: %s\n", host, err.msg);
		exit(1);
	}
	return p;
}

static void poll_until_exit(struct mr_hal *hal, struct pstate *st, int max_ms)
{
	int64_t end = mr_now_ms() + max_ms;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	while (!st->exited && mr_now_ms() < end)
		if (mr_hal_poll(hal, 100, &err) < 0) {
			fprintf(stderr, "mr_hal_poll: %s\n", err.msg);
			break;
		}
}

static void pstate_release(struct pstate *st)
{
	mr_buf_release(&st->out);
	mr_buf_release(&st->err);
}

/* --- the cases --- */

static void test_parallel(struct mr_hal *hal)
{
	enum { PER_HOST = 25 };
	size_t n = hosts.nr * PER_HOST;
	struct mr_hal_cmd *cmds = calloc(n, sizeof(*cmds));
	char (*args)[3][24] = calloc(n, sizeof(*args));
	char *(*argvs)[7] = calloc(n, sizeof(*argvs));
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t t0 = mr_now_ms();

	for (size_t i = 0; i < n; i++) {
		snprintf(args[i][0], 24, "%zu", i);
		snprintf(args[i][1], 24, "%zu", i % 7);
		argvs[i][0] = "sh";
		argvs[i][1] = "-c";
		argvs[i][2] = "echo out-$0-$1; echo err-$1 >&2; exit $2";
		argvs[i][3] = hosts.v[i % hosts.nr];
		argvs[i][4] = args[i][0];
		argvs[i][5] = args[i][1];
		argvs[i][6] = NULL;
		cmds[i].host = hosts.v[i % hosts.nr];
		cmds[i].argv = argvs[i];
	}
	CHECK(mr_hal_run(hal, cmds, n, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < n; i++) {
		char want_out[64], want_err[32];

		snprintf(want_out, sizeof(want_out), "out-%s-%zu\n", hosts.v[i % hosts.nr], i);
		snprintf(want_err, sizeof(want_err), "err-%zu\n", i);
		CHECK(cmds[i].hal_rc == 0, "cmd %zu on %s: %s", i, cmds[i].host, cmds[i].err.msg);
		CHECK(cmds[i].signal == 0, "cmd %zu: signal %d", i, cmds[i].signal);
		CHECK(cmds[i].status == (int)(i % 7), "cmd %zu: status %d", i, cmds[i].status);
		CHECK(!strcmp(mr_buf_cstr(&cmds[i].out), want_out), "cmd %zu: stdout '%s'", i,
		      mr_buf_cstr(&cmds[i].out));
		CHECK(!strcmp(mr_buf_cstr(&cmds[i].errout), want_err), "cmd %zu: stderr '%s'", i,
		      mr_buf_cstr(&cmds[i].errout));
		mr_hal_cmd_release(&cmds[i]);
	}
	printf("parallel: %zu commands on %zu hosts in %" PRId64 " ms (with connect)\n", n,
	       hosts.nr, mr_now_ms() - t0);
	/* Again, on the connections made above. */
	t0 = mr_now_ms();
	CHECK(mr_hal_run(hal, cmds, n, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < n; i++) {
		CHECK(mr_hal_cmd_ok(&cmds[i]) || cmds[i].status == (int)(i % 7),
		      "second round cmd %zu: %s", i, cmds[i].err.msg);
		mr_hal_cmd_release(&cmds[i]);
	}
	printf("parallel: again in %" PRId64 " ms (reused connections)\n", mr_now_ms() - t0);
	free(cmds);
	free(args);
	free(argvs);
}

static const char *const odd_args[] = {
	"a b", "it's", "\"dq\"", "$HOME", "`id`", "$(id)", "line1\nline2\n", "*", "",
	"back\\slash", "semi;colon", "&&", "tab\there", "~", "=x", "a=b", "-n", "\xc3\xbc\xc3\xb1",
	"'", "\\", "!", "#hash", "{a,b}", NULL,
};

static void test_quoting(struct mr_hal *hal)
{
	struct mr_strvec argv = MR_STRVEC_INIT;
	struct mr_buf want = MR_BUF_INIT;
	struct mr_hal_cmd cmd = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;

	mr_strvec_push(&argv, "sh");
	mr_strvec_push(&argv, "-c");
	mr_strvec_push(&argv, "for a in \"$@\"; do printf '%s\\0' \"$a\"; done");
	mr_strvec_push(&argv, "sh");
	for (size_t i = 0; odd_args[i]; i++) {
		mr_strvec_push(&argv, odd_args[i]);
		mr_buf_append(&want, odd_args[i], strlen(odd_args[i]) + 1);
	}
	cmd.host = hosts.v[0];
	cmd.argv = argv.v;
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(mr_hal_cmd_ok(&cmd), "quoting: %s", cmd.err.msg);
	CHECK(cmd.out.len == want.len && !memcmp(cmd.out.p, want.p, want.len),
	      "arguments changed on the way: got %zu bytes, want %zu", cmd.out.len, want.len);
	mr_hal_cmd_release(&cmd);
	mr_buf_release(&want);
	mr_strvec_release(&argv);

	/* The same bytes through stdin, env and cwd of a spawned process. */
	{
		char dir[256];
		char *env[] = { "MR_T1=a b $x `y`", "MR_T2=q'uote\nnl", NULL };
		char *pargv[] = { "sh", "-c", "pwd; printf '%s|%s|' \"$MR_T1\" \"$MR_T2\"; cat", NULL };
		const char *in = "stdin 'data' $x\n";
		struct pstate st;
		struct mr_proc *p;
		struct mr_buf w = MR_BUF_INIT;

		snprintf(dir, sizeof(dir), "%s/dir with 'space' $x", mrh_dir);
		CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
		p = spawn(hal, hosts.v[1], pargv, env, dir, &st);
		CHECK(mr_proc_write(p, in, strlen(in), &err) == 0, "%s", err.msg);
		CHECK(mr_proc_close_stdin(p, &err) == 0, "%s", err.msg);
		poll_until_exit(hal, &st, 20000);
		mr_buf_printf(&w, "%s\na b $x `y`|q'uote\nnl|%s", dir, in);
		CHECK(st.exited && st.hal_rc == 0 && st.status == 0 && st.sig == 0,
		      "spawn with env/cwd: rc %d status %d sig %d %s", st.hal_rc, st.status, st.sig,
		      st.xerr.msg);
		CHECK(!strcmp(mr_buf_cstr(&st.out), mr_buf_cstr(&w)), "spawn output '%s' want '%s'",
		      mr_buf_cstr(&st.out), mr_buf_cstr(&w));
		mr_proc_release(p);
		pstate_release(&st);
		mr_buf_release(&w);
	}
}

static void test_signals(struct mr_hal *hal)
{
	char *term[] = { "sh", "-c", "kill -TERM $$", NULL };
	char *kill9[] = { "sh", "-c", "echo before; kill -KILL $$", NULL };
	char *noexec[] = { "/nonexistent/prog", "x", NULL };
	struct mr_hal_cmd cmds[3] = { { 0 } };
	struct meshrun_err err = MESHRUN_ERR_INIT;

	cmds[0].host = hosts.v[0];
	cmds[0].argv = term;
	cmds[1].host = hosts.v[1];
	cmds[1].argv = kill9;
	cmds[2].host = hosts.v[2];
	cmds[2].argv = noexec;
	CHECK(mr_hal_run(hal, cmds, 3, &err) == 0, "%s", err.msg);
	CHECK(cmds[0].hal_rc == 0 && cmds[0].signal == SIGTERM, "TERM: rc %d sig %d %s",
	      cmds[0].hal_rc, cmds[0].signal, cmds[0].err.msg);
	CHECK(cmds[1].hal_rc == 0 && cmds[1].signal == SIGKILL, "KILL: rc %d sig %d %s",
	      cmds[1].hal_rc, cmds[1].signal, cmds[1].err.msg);
	CHECK(!strcmp(mr_buf_cstr(&cmds[1].out), "before\n"), "KILL stdout '%s'", cmds[1].out.p);
	CHECK(cmds[2].hal_rc == 0 && cmds[2].signal == 0 && cmds[2].status == 127,
	      "missing program: rc %d status %d", cmds[2].hal_rc, cmds[2].status);
	for (size_t i = 0; i < 3; i++)
		mr_hal_cmd_release(&cmds[i]);
}

/* The connection dies under running commands: no exit status, never status 0. */
static void test_lost_connection(struct mr_hal *hal)
{
	/* $PPID is the sshd session process that carries our connection */
	char *killer[] = { "sh", "-c", "sleep 0.3; kill -KILL $PPID", NULL };
	char *waiter[] = { "sleep", "2", NULL };
	char *t[] = { "echo", "back", NULL };
	struct mr_hal_cmd cmds[2] = { { 0 } };
	struct meshrun_err err = MESHRUN_ERR_INIT;

	cmds[0].host = cmds[1].host = hosts.v[2];
	cmds[0].argv = killer;
	cmds[1].argv = waiter;
	CHECK(mr_hal_run(hal, cmds, 2, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < 2; i++) {
		CHECK(cmds[i].hal_rc == MESHRUN_E_NOEXIT && strstr(cmds[i].err.msg, hosts.v[2]),
		      "lost connection, cmd %zu: rc %d status %d sig %d '%s'", i, cmds[i].hal_rc,
		      cmds[i].status, cmds[i].signal, cmds[i].err.msg);
		mr_hal_cmd_release(&cmds[i]);
	}
	printf("lost connection: %s\n", cmds[1].err.msg);
	/* the next command to that host connects again */
	cmds[0].argv = t;
	CHECK(mr_hal_run(hal, cmds, 1, &err) == 0, "%s", err.msg);
	CHECK(mr_hal_cmd_ok(&cmds[0]) && !strcmp(mr_buf_cstr(&cmds[0].out), "back\n"),
	      "after reconnect: %s", cmds[0].err.msg);
	mr_hal_cmd_release(&cmds[0]);
}

static void test_timeout(struct mr_hal *hal)
{
	char *argv[] = { "sleep", "3606", NULL };
	const char *const pat[] = { "sleep", "3606", NULL };
	struct mr_hal_cmd cmd = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;

	cmd.host = hosts.v[3];
	cmd.argv = argv;
	cmd.timeout_ms = 700;
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(cmd.hal_rc == MESHRUN_E_TIMEOUT, "timeout: rc %d %s", cmd.hal_rc, cmd.err.msg);
	CHECK(strstr(cmd.err.msg, hosts.v[3]) != NULL, "timeout message names no host: %s", cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	/* the timed-out command is killed on its host */
	{
		struct mr_hal_cmd nop = { 0 };
		char *t[] = { "true", NULL };

		nop.host = hosts.v[3];
		nop.argv = t; /* lets the loop deliver the kill */
		mr_hal_run(hal, &nop, 1, &err);
		mr_hal_cmd_release(&nop);
	}
	CHECK(wait_count(hosts.v[3], pat, 0, 5000) == 0, "timed-out command still runs");
}

static void test_hostkeys(void)
{
	char *argv[] = { "true", NULL };
	struct mr_hal_cmd cmd = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = new_hal(NULL, false);
	char kh[512];
	struct mr_buf text = MR_BUF_INIT;

	/* changed key: known_hosts_wrong holds another host's key for this address */
	cmd.host = "badkey";
	cmd.argv = argv;
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(cmd.hal_rc == MESHRUN_E_HOSTKEY, "badkey: rc %d %s", cmd.hal_rc, cmd.err.msg);
	CHECK(strstr(cmd.err.msg, "'badkey'") && strstr(cmd.err.msg, "SHA256:") &&
	      strstr(cmd.err.msg, "changed"), "badkey message: %s", cmd.err.msg);
	printf("wrong host key: %s\n", cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);

	/* unknown key: refused by default, added with accept_new, then known */
	snprintf(kh, sizeof(kh), "%s/known_hosts_new", mrh_dir);
	hal = new_hal(kh, false);
	cmd.host = hosts.v[0];
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(cmd.hal_rc == MESHRUN_E_HOSTKEY && strstr(cmd.err.msg, "unknown") &&
	      strstr(cmd.err.msg, hosts.v[0]), "unknown key: rc %d %s", cmd.hal_rc, cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);

	hal = new_hal(kh, true);
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(mr_hal_cmd_ok(&cmd), "accept-new: %s", cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);
	CHECK(mr_read_file(kh, 1 << 20, &text, &err) == 0 && strstr(mr_buf_cstr(&text), "ssh-ed25519"),
	      "accept-new wrote no key: '%s'", mr_buf_cstr(&text));
	mr_buf_release(&text);

	hal = new_hal(kh, false);
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(mr_hal_cmd_ok(&cmd), "known after accept-new: %s", cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);
}

static void test_unreachable(void)
{
	const char *list[2] = { "unreach", NULL };
	struct meshrun_err errs[2];
	struct mr_hal *hal = new_hal(NULL, false);
	char *argv[] = { "true", NULL };
	struct mr_hal_cmd cmd = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t t0 = mr_now_ms(), ms;

	list[1] = hosts.v[0];
	CHECK(mr_hal_connect(hal, list, 2, errs) == 1, "one of two hosts should fail");
	ms = mr_now_ms() - t0;
	CHECK(errs[0].code == MESHRUN_E_CONNECT && strstr(errs[0].msg, "'unreach'"),
	      "unreach: %d %s", errs[0].code, errs[0].msg);
	CHECK(errs[1].code == 0, "%s: %s", hosts.v[0], errs[1].msg);
	/* ConnectTimeout 2 for this host: it must give up then, not after TCP's minutes */
	CHECK(ms < 2000 + 3000, "unreachable host took %" PRId64 " ms", ms);
	printf("unreachable: %s (after %" PRId64 " ms)\n", errs[0].msg, ms);

	cmd.host = "unreach";
	cmd.argv = argv;
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	CHECK(cmd.hal_rc == MESHRUN_E_CONNECT && strstr(cmd.err.msg, "'unreach'"),
	      "run on unreach: %d %s", cmd.hal_rc, cmd.err.msg);
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);
}

static void test_proc_signal(struct mr_hal *hal)
{
	char *sl[] = { "sleep", "3601", NULL };
	const char *const pat[] = { "sleep", "3601", NULL };
	char *cat[] = { "sh", "-c", "cat; echo done >&2; exit 5", NULL };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct pstate st, st2;
	struct mr_proc *p, *q;

	p = spawn(hal, hosts.v[1], sl, NULL, NULL, &st);
	q = spawn(hal, hosts.v[2], cat, NULL, NULL, &st2);
	for (int i = 0; i < 3; i++)
		CHECK(mr_proc_write(q, "hello\n", 6, &err) == 0, "%s", err.msg);
	CHECK(mr_proc_close_stdin(q, &err) == 0, "%s", err.msg);
	/* the signal may be asked for before the process group is known */
	CHECK(mr_proc_signal(p, SIGTERM, &err) == 0, "%s", err.msg);
	poll_until_exit(hal, &st, 10000);
	poll_until_exit(hal, &st2, 10000);
	CHECK(st.exited && st.hal_rc == 0 && st.sig == SIGTERM, "signalled: rc %d sig %d status %d %s",
	      st.hal_rc, st.sig, st.status, st.xerr.msg);
	CHECK(st2.exited && st2.hal_rc == 0 && st2.status == 5, "cat: rc %d status %d %s", st2.hal_rc,
	      st2.status, st2.xerr.msg);
	CHECK(!strcmp(mr_buf_cstr(&st2.out), "hello\nhello\nhello\n"), "cat out '%s'", st2.out.p);
	CHECK(!strcmp(mr_buf_cstr(&st2.err), "done\n"), "cat err '%s'", st2.err.p);
	CHECK(wait_count(hosts.v[1], pat, 0, 5000) == 0, "signalled process still in the namespace");
	mr_proc_release(p);
	mr_proc_release(q);
	pstate_release(&st);
	pstate_release(&st2);

	/* again, once it is surely running */
	p = spawn(hal, hosts.v[1], sl, NULL, NULL, &st);
	{
		int64_t end = mr_now_ms() + 5000;

		while (count_in_ns(hosts.v[1], pat) != 1 && mr_now_ms() < end)
			mr_hal_poll(hal, 50, &err);
	}
	CHECK(count_in_ns(hosts.v[1], pat) == 1, "spawned sleep not running");
	CHECK(mr_proc_signal(p, SIGINT, &err) == 0, "%s", err.msg);
	poll_until_exit(hal, &st, 10000);
	CHECK(st.exited && st.sig == SIGINT, "INT: rc %d sig %d", st.hal_rc, st.sig);
	CHECK(wait_count(hosts.v[1], pat, 0, 5000) == 0, "process left after INT");
	mr_proc_release(p);
	pstate_release(&st);
}

/*
 * Issue 33: more live processes on one host than the hal's tables start with
 * (24: its job list, its channels and its watched fds all grow while every one
 * of them is still running), through the libssh2 and the OpenSSH backends.
 * Each reads one line and exits with its own status; every third is signalled
 * instead (a removal in the middle while the others still run). Each must get
 * exactly its own line back and its own end.
 */
static void test_many_procs(struct mr_hal *hal, const char *what, bool signal_known)
{
	enum { NPROC = 24 };
	char *argv[NPROC][6];
	char idx[NPROC][8], code[NPROC][8];
	struct pstate st[NPROC];
	struct mr_proc *p[NPROC];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t end;
	bool all;

	for (int i = 0; i < NPROC; i++) {
		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		snprintf(code[i], sizeof(code[i]), "%d", i % 5);
		argv[i][0] = "sh";
		argv[i][1] = "-c";
		argv[i][2] = "echo up-$0; read l; echo \"$0:$l\"; exit $1";
		argv[i][3] = idx[i];
		argv[i][4] = code[i];
		argv[i][5] = NULL;
		p[i] = spawn(hal, hosts.v[0], argv[i], NULL, NULL, &st[i]);
	}
	/* every one running (said "up") before any is let go */
	end = mr_now_ms() + 20000;
	do {
		all = true;
		for (int i = 0; i < NPROC; i++)
			all = all && strstr(mr_buf_cstr(&st[i].out), "up-");
		if (!all)
			mr_hal_poll(hal, 50, &err);
	} while (!all && mr_now_ms() < end);
	CHECK(all, "%s: not all %d processes on %s started", what, NPROC, hosts.v[0]);
	for (int i = 0; i < NPROC; i++) {
		char line[32];

		if (i % 3 == 1) {
			CHECK(mr_proc_signal(p[i], SIGTERM, &err) == 0, "%s", err.msg);
			continue;
		}
		snprintf(line, sizeof(line), "line-%d\n", i);
		CHECK(mr_proc_write(p[i], line, strlen(line), &err) == 0, "%s", err.msg);
		CHECK(mr_proc_close_stdin(p[i], &err) == 0, "%s", err.msg);
	}
	for (int i = 0; i < NPROC; i++) {
		char want[64];

		poll_until_exit(hal, &st[i], 20000);
		if (i % 3 == 1) {
			snprintf(want, sizeof(want), "up-%d\n", i);
			/* the OpenSSH client reports a signalled command as exit 255 only */
			CHECK(st[i].exited && ((st[i].hal_rc == 0 && st[i].sig == SIGTERM) ||
					       (!signal_known && st[i].hal_rc == MESHRUN_E_NOEXIT)),
			      "%s: proc %d: rc %d sig %d %s", what, i, st[i].hal_rc, st[i].sig, st[i].xerr.msg);
		} else {
			snprintf(want, sizeof(want), "up-%d\n%d:line-%d\n", i, i, i);
			CHECK(st[i].exited && st[i].hal_rc == 0 && st[i].sig == 0 && st[i].status == i % 5,
			      "%s: proc %d: rc %d status %d sig %d %s", what, i, st[i].hal_rc, st[i].status,
			      st[i].sig, st[i].xerr.msg);
		}
		CHECK(!strcmp(mr_buf_cstr(&st[i].out), want), "%s: proc %d: stdout '%s'", what, i,
		      mr_buf_cstr(&st[i].out));
		mr_proc_release(p[i]);
		pstate_release(&st[i]);
	}
}

/* A child spawns remote processes and is then killed: nothing may be left,
 * neither the processes nor the directory it gave mr_hal_remove_at_exit(). */
static void test_drop_connection(void)
{
	const char *host = hosts.v[3];
	const char *const pat1[] = { "sleep", "3602", NULL };
	const char *const pat2[] = { "sleep", "3603", NULL };
	char dir[] = "/tmp/meshrun-drop-test.XXXXXX";
	struct stat st;
	int pfd[2];
	pid_t pid;
	char c = 0;

	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	CHECK(pipe(pfd) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		char *a[] = { "sleep", "3602", NULL };
		/* ignores TERM: the watchdog must follow up with KILL */
		char *b[] = { "sh", "-c", "trap '' TERM; exec sleep 3603", NULL };
		struct mr_hal *hal = new_hal(NULL, false);
		struct pstate s1, s2;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int64_t end = mr_now_ms() + 10000;

		close(pfd[0]);
		if (mr_hal_remove_at_exit(hal, host, dir, &err) < 0)
			_exit(3);
		spawn(hal, host, a, NULL, NULL, &s1);
		spawn(hal, host, b, NULL, NULL, &s2);
		while ((count_in_ns(host, pat1) != 1 || count_in_ns(host, pat2) != 1) &&
		       mr_now_ms() < end)
			mr_hal_poll(hal, 50, &err);
		/* give the watchdog a moment to receive the registrations */
		end = mr_now_ms() + 300;
		while (mr_now_ms() < end)
			mr_hal_poll(hal, 50, &err);
		c = 'R';
		if (write(pfd[1], &c, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &c, 1) == 1 && c == 'R', "child did not get ready");
	close(pfd[0]);
	CHECK(count_in_ns(host, pat1) == 1 && count_in_ns(host, pat2) == 1,
	      "remote processes not running before the drop");
	kill(pid, SIGKILL); /* a crash: the socket closes with no ssh disconnect */
	waitpid(pid, NULL, 0);
	CHECK(wait_count(host, pat1, 0, 10000) == 0, "process left after the connection dropped");
	CHECK(wait_count(host, pat2, 0, 10000) == 0, "TERM-ignoring process left after the drop");
	for (int64_t end = mr_now_ms() + 10000; stat(dir, &st) == 0 && mr_now_ms() < end;)
		poll(NULL, 0, 50);
	CHECK(stat(dir, &st) < 0 && errno == ENOENT, "directory '%s' left after the drop", dir);
	rmdir(dir);
}

static void test_free_kills(void)
{
	char *a[] = { "sleep", "3605", NULL };
	const char *const pat[] = { "sleep", "3605", NULL };
	struct mr_hal *hal = new_hal(NULL, false);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct pstate st;
	int64_t end = mr_now_ms() + 5000;

	spawn(hal, hosts.v[0], a, NULL, NULL, &st);
	while (count_in_ns(hosts.v[0], pat) != 1 && mr_now_ms() < end)
		mr_hal_poll(hal, 50, &err);
	CHECK(count_in_ns(hosts.v[0], pat) == 1, "sleep 3605 not running");
	mr_hal_free(hal);
	CHECK(wait_count(hosts.v[0], pat, 0, 5000) == 0, "mr_hal_free left the process running");
	pstate_release(&st);
}

/* Run `id -un` on dest with the hal made from config; hal_rc, output in out. */
static int run_id(const char *config, const char *dest, char *out, size_t n, char *msg, size_t mn)
{
	const char *saved = ssh_config;
	char *argv[] = { "id", "-un", NULL };
	struct mr_hal_cmd cmd = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal;
	int rc;

	ssh_config = config;
	hal = new_hal(NULL, false);
	ssh_config = saved;
	cmd.host = dest;
	cmd.argv = argv;
	CHECK(mr_hal_run(hal, &cmd, 1, &err) == 0, "%s", err.msg);
	rc = cmd.hal_rc ? cmd.hal_rc : cmd.status ? -1000 - cmd.status : 0;
	snprintf(out, n, "%.*s", (int)strcspn(mr_buf_cstr(&cmd.out), "\n"), mr_buf_cstr(&cmd.out));
	snprintf(msg, mn, "%s", cmd.hal_rc ? cmd.err.msg : mr_buf_cstr(&cmd.errout));
	mr_hal_cmd_release(&cmd);
	mr_hal_free(hal);
	return rc;
}

/*
 * "user@host" (issue 15): the user of the destination, then ssh_config's User, then
 * the local user ($USER). root is the only account with a login; "mrh-nouser" does
 * not exist, so sshd refuses it: which user was sent shows in the outcome.
 */
static void test_user_at_host(void)
{
	char cfg[512], out[256], msg[1024];
	FILE *f;
	int rc;

	/* the standard config says "User root" for every host */
	rc = run_id(ssh_config, "root@h1", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == 0 && !strcmp(out, "root"), "root@h1: rc %d out '%s' %s", rc, out, msg);
	rc = run_id(ssh_config, "root@10.231.0.11", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == 0 && !strcmp(out, "root"), "root@IP: rc %d out '%s' %s", rc, out, msg);
	rc = run_id(ssh_config, "mrh-nouser@h1", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == MESHRUN_E_AUTH && strstr(msg, "'mrh-nouser@h1'") && strstr(msg, "as 'mrh-nouser'"),
	      "mrh-nouser@h1: rc %d %s", rc, msg);
	printf("unknown user: %s\n", msg);

	/* User in ssh_config: the destination's user wins over it */
	snprintf(cfg, sizeof(cfg), "%s/ssh_config_user", mrh_dir);
	f = fopen(cfg, "w");
	CHECK(f, "fopen %s", cfg);
	if (!f)
		return;
	fprintf(f, "Host h1\n    HostName 10.231.0.11\n    User mrh-nouser\n"
		   "Host h2\n    HostName 10.231.0.12\n"
		   "Host *\n    IdentityFile %s/id_ed25519\n    UserKnownHostsFile %s/known_hosts\n",
		mrh_dir, mrh_dir);
	fclose(f);
	rc = run_id(cfg, "h1", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == MESHRUN_E_AUTH && strstr(msg, "as 'mrh-nouser'"), "h1 with User: rc %d %s", rc, msg);
	rc = run_id(cfg, "root@h1", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == 0 && !strcmp(out, "root"), "root@h1 over User: rc %d out '%s' %s", rc, out, msg);

	/* no User anywhere: the local user ($USER for the built-in parser; `ssh -G`
	 * takes the password database's name, as ssh does) */
	setenv("MESHRUN_SSH_RESOLVER", "builtin", 1);
	setenv("USER", "mrh-nouser", 1);
	rc = run_id(cfg, "h2", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == MESHRUN_E_AUTH && strstr(msg, "as 'mrh-nouser'"), "h2 as $USER: rc %d %s", rc, msg);
	setenv("USER", "root", 1);
	rc = run_id(cfg, "h2", out, sizeof(out), msg, sizeof(msg));
	CHECK(rc == 0 && !strcmp(out, "root"), "h2 as $USER root: rc %d out '%s' %s", rc, out, msg);
	unsetenv("MESHRUN_SSH_RESOLVER");

	/* hostile destinations never reach ssh */
	static const char *const bad[] = { "-oProxyCommand=touch /tmp/x", "a b@h1", "me@h1;id",
					   "@h1", "me@", "-l@h1", "me@-h1", "$(id)@h1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = run_id(ssh_config, bad[i], out, sizeof(out), msg, sizeof(msg));
		CHECK(rc == MESHRUN_E_USAGE && strstr(msg, "ssh destination") && strstr(msg, bad[i]),
		      "'%s': rc %d %s", bad[i], rc, msg);
	}
	printf("hostile destination: %s\n", msg);
	unlink(cfg);
}

int main(void)
{
	const char *h = getenv("MRH_HOSTS");
	struct mr_hal *hal;
	char *ssh;

	ssh_config = getenv("MRH_SSH_CONFIG");
	mrh_dir = getenv("MRH_DIR");
	ns_prefix = getenv("MRH_NETNS_PREFIX");
	if (!h || !ssh_config || !mrh_dir || !ns_prefix) {
		printf("skip: run me through tests/integration/hal/sshd_hosts.sh\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	mr_strvec_split(&hosts, h, ' ', true);
	if (hosts.nr < 4) {
		fprintf(stderr, "need 4 hosts, got '%s'\n", h);
		return 1;
	}
	hal = new_hal(NULL, false);
	test_parallel(hal);
	test_quoting(hal);
	test_signals(hal);
	test_timeout(hal);
	test_lost_connection(hal);
	test_proc_signal(hal);
	test_many_procs(hal, "libssh2", true);
	mr_hal_free(hal);
	ssh = mr_which("ssh", NULL);
	if (ssh) {
		hal = new_hal_of(mr_hal_new_openssh, NULL, false);
		test_many_procs(hal, "openssh", false);
		mr_hal_free(hal);
		free(ssh);
	}
	test_hostkeys();
	test_user_at_host();
	test_unreachable();
	test_drop_connection();
	test_free_kills();
	mr_strvec_release(&hosts);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("all ssh hal checks passed\n");
	return 0;
}
