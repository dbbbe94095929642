/*
 * test_remote_sh.c - every script meshrun and meshconfig send to a remote host
 * behaves the same whatever the user's login shell is: bash (Linux), dash, zsh
 * (macOS). Each command line is built exactly as the ssh backend builds it
 * (mr_hal_*_cmdline, which wraps it as `exec /bin/sh -c '...'`) and run the way
 * sshd runs a command: in a new session, as `<login shell> -c <command line>`.
 * No root needed: the process groups, directories and stub commands are ours.
 *
 * A shell that is not installed is skipped with a line on stdout (scripts/deps.sh
 * installs all three); every installed one must give the same outcome.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "config/config_impl.h"
#include "hal/sh.h"
#include "launch/launch.h"
#include "topo/topo.h"

static const char *const shell_names[] = { "bash", "dash", "zsh" };

/* Absolute path of a login shell, or NULL when it is not installed. */
static const char *shell_path(const char *name, char *buf, size_t n)
{
	static const char *const dirs[] = { "/bin", "/usr/bin", "/usr/local/bin" };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(buf, n, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

struct sh_result {
	pid_t pid;        /* the login shell's pid: also its session and process group */
	int status;       /* exit status, or 128+signal */
	struct mr_buf out, err;
};

static void sh_result_release(struct sh_result *r)
{
	mr_buf_release(&r->out);
	mr_buf_release(&r->err);
}

/*
 * Run `shell -c cmdline` as sshd would (setsid, argv[0] the shell's base name),
 * with stdin_text then EOF on stdin and env_add ("K=V") added to the
 * environment; collect stdout/stderr until the shell exits (10 s at most).
 */
static void sh_run(const char *shell, const char *cmdline, const char *stdin_text,
		   char *const *env_add, struct sh_result *r)
{
	int in[2], out[2], err[2];
	const char *base = strrchr(shell, '/') ? strrchr(shell, '/') + 1 : shell;
	int64_t end = mr_now_ms() + 10000;
	bool out_open = true, err_open = true;
	int st = 0;

	memset(r, 0, sizeof(*r));
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		setsid();
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		for (size_t i = 0; env_add && env_add[i]; i++)
			putenv(env_add[i]);
		execl(shell, base, "-c", cmdline, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (stdin_text)
		assert_int_equal(mr_write_full(in[1], stdin_text, strlen(stdin_text)), 0);
	close(in[1]);
	while ((out_open || err_open) && mr_now_ms() < end) {
		struct pollfd p[2] = { { out_open ? out[0] : -1, POLLIN, 0 },
				       { err_open ? err[0] : -1, POLLIN, 0 } };
		char buf[4096];

		if (poll(p, 2, 100) <= 0)
			continue;
		for (int k = 0; k < 2; k++) {
			ssize_t n;

			if (!p[k].revents)
				continue;
			n = read(p[k].fd, buf, sizeof(buf));
			if (n > 0)
				mr_buf_append(k ? &r->err : &r->out, buf, (size_t)n);
			else if (k)
				err_open = false;
			else
				out_open = false;
		}
	}
	close(out[0]);
	close(err[0]);
	while (waitpid(r->pid, &st, WNOHANG) == 0) {
		if (mr_now_ms() >= end) {
			kill(-r->pid, SIGKILL);
			fail_msg("%s -c '%s': still running after 10 s", shell, cmdline);
		}
		mr_sleep_ms(10);
	}
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A process group of two sleeps (leader and a background child), ours to reap. */
static pid_t start_group(bool ignore_term)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		execl("/bin/sh", "sh", "-c",
		      ignore_term ? "trap '' TERM; sleep 300 & exec sleep 300" : "sleep 300 & exec sleep 300",
		      (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* either side may win the race; both set the same */
	return pid;
}

/* Wait up to ms for the group to empty: its leader is our child, and so are the
 * other members once orphaned where we are a subreaper (main). */
static bool group_gone(pid_t pgid, int ms)
{
	int64_t end = mr_now_ms() + ms;

	do {
		while (waitpid(-pgid, NULL, WNOHANG) > 0)
			;
		if (kill(-pgid, 0) < 0 && errno == ESRCH)
			return true;
		mr_sleep_ms(10);
	} while (mr_now_ms() < end);
	return false;
}

static bool group_alive(pid_t pgid)
{
	return kill(-pgid, 0) == 0 && waitpid(pgid, NULL, WNOHANG) == 0;
}

static void kill_group(pid_t pgid)
{
	kill(-pgid, SIGKILL);
	waitpid(pgid, NULL, 0);
}

static char *make_tmpdir(const char *tmpl)
{
	char *d = strdup(tmpl);

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *path)
{
	char *argv[] = { "rm", "-rf", "--", (char *)path, NULL };
	pid_t pid = fork();

	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
}

/* no entry but . and .. */
static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

static void write_exec(const char *dir, const char *name, const char *body)
{
	char path[512];
	struct meshrun_err e = MESHRUN_ERR_INIT;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(mr_write_file(path, body, strlen(body), 0755, &e), 0);
}

/* ---------------------------------------------------------------- the hal's */

/* spawn and run: marker with the pid (= process group), cwd, env, arguments intact */
static void test_spawn_cmdline(void **state)
{
	char *dir = make_tmpdir("/tmp/mr remote sh.XXXXXX"); /* a space in the cwd */
	char *argv[] = { MR_SH_PATH, "-c", "printf '%s|' \"$0\" \"$1\" \"$K\" \"$MLX_T\"; pwd",
			 "a  b*", "it's $HOME `x` \"q\"", NULL };
	/* K through env(1), MLX_T (one of meshrun's) by export */
	char *env[] = { "K=v  w * $X", "MLX_T=it's; $(x) `y`", NULL };
	struct mr_buf cmd = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hal_spawn_cmdline(&cmd, argv, env, dir), 0);
	assert_true(!strncmp(mr_buf_cstr(&cmd), "exec /bin/sh -c '", 17));
	assert_non_null(strstr(mr_buf_cstr(&cmd), "export MLX_T="));
	assert_null(strstr(mr_buf_cstr(&cmd), "MLX_T=it"));
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], want[1024];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		struct sh_result r;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		sh_run(sh, mr_buf_cstr(&cmd), NULL, NULL, &r);
		snprintf(want, sizeof(want), MR_HAL_PGID_MARKER "%ld\na  b*|it's $HOME `x` \"q\"|v  w * $X|it's; $(x) `y`|%s\n",
			 (long)r.pid, dir);
		if (r.status != 0 || strcmp(mr_buf_cstr(&r.out), want))
			fail_msg("login shell %s: exit %d, stdout '%s' (expected '%s'), stderr '%s'", sh,
				 r.status, mr_buf_cstr(&r.out), want, mr_buf_cstr(&r.err));
		sh_result_release(&r);
	}
	mr_buf_release(&cmd);

	/* only meshrun's variables: the /bin/sh -c script runs in the marker's shell,
	 * $0 and $1 its own, in the cwd; a cwd that is not there runs nothing */
	char *env2[] = { "MLX_T=it's; $(x) `y`", NULL };
	char *gone = "/nonexistent/meshrun-test";
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(mr_hal_spawn_cmdline(&cmd, argv, env2, pass ? gone : dir), 0);
		/* one sh: no second `/bin/sh -c` inside the first */
		assert_null(strstr(mr_buf_cstr(&cmd) + 17, MR_SH_PATH " -c"));
		for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
			char pbuf[64], want[1024];
			const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
			struct sh_result r;

			if (!sh)
				continue;
			sh_run(sh, mr_buf_cstr(&cmd), NULL, NULL, &r);
			if (pass)
				snprintf(want, sizeof(want), MR_HAL_PGID_MARKER "%ld\n", (long)r.pid);
			else
				snprintf(want, sizeof(want), MR_HAL_PGID_MARKER "%ld\na  b*|it's $HOME `x` \"q\"||it's; $(x) `y`|%s\n",
					 (long)r.pid, dir);
			if ((pass ? r.status == 0 : r.status != 0) || strcmp(mr_buf_cstr(&r.out), want))
				fail_msg("inline sh, pass %d, login shell %s: exit %d, stdout '%s' (expected '%s'), stderr '%s'",
					 pass, sh, r.status, mr_buf_cstr(&r.out), want, mr_buf_cstr(&r.err));
			sh_result_release(&r);
		}
		mr_buf_release(&cmd);
	}
	rmdir(dir);
	free(dir);
}

/*
 * The watchdog: three groups registered, one forgotten again ("-PGID"), one that
 * ignores TERM, two directories (one with a space); at EOF the two registered
 * groups are gone (TERM, then KILL), the forgotten one still runs, both
 * directories are removed.
 */
static void test_watchdog(void **state)
{
	struct mr_buf cmd = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hal_watchdog_cmdline(&cmd, NULL), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], in[1024], sub[600];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		char *d1, *d2;
		pid_t g1, g2, g3;
		struct sh_result r;
		struct stat st;
		int64_t t0;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		d1 = make_tmpdir("/tmp/mr-wd-test.XXXXXX");
		d2 = make_tmpdir("/tmp/mr wd test.XXXXXX");
		snprintf(sub, sizeof(sub), "%s/sub", d1);
		assert_int_equal(mkdir(sub, 0755), 0);
		g1 = start_group(false);
		g2 = start_group(true);
		g3 = start_group(false);
		mr_sleep_ms(100); /* the traps are set */
		snprintf(in, sizeof(in), "+%ld\n+%ld\n+%ld\n-%ld\nD%s\nD%s\n", (long)g1, (long)g2,
			 (long)g3, (long)g3, d1, d2);
		t0 = mr_now_ms();
		sh_run(sh, mr_buf_cstr(&cmd), in, NULL, &r);
		if (r.status != 0)
			fail_msg("watchdog under %s: exit %d, stderr '%s'", sh, r.status, mr_buf_cstr(&r.err));
		if (!group_gone(g1, 3000))
			fail_msg("watchdog under %s: group %ld still runs", sh, (long)g1);
		if (!group_gone(g2, 3000))
			fail_msg("watchdog under %s: TERM-ignoring group %ld still runs", sh, (long)g2);
		if (!group_alive(g3))
			fail_msg("watchdog under %s: killed group %ld, which was unregistered", sh, (long)g3);
		if (stat(d1, &st) == 0 || stat(d2, &st) == 0)
			fail_msg("watchdog under %s: directory '%s' or '%s' left", sh, d1, d2);
		printf("%s: watchdog done in %lld ms\n", shell_names[s], (long long)(mr_now_ms() - t0));
		kill_group(g3);
		sh_result_release(&r);
		rm_rf(d1);
		rm_rf(d2);
		free(d1);
		free(d2);
	}
	mr_buf_release(&cmd);
}

/*
 * Names in TMPDIR ("T", as the watchdog's argument or as a line): registered
 * before the setup command makes the directory (the chaos campaign's kill -9 of
 * meshrun between the two left it behind). Both are removed at EOF, a name with
 * '/' or "." is ignored, and without a later "D" line (the setup is over) the
 * removal waits a second for a mkdir that may still be under way.
 */
static void test_watchdog_names(void **state)
{
	struct mr_buf cmd = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hal_watchdog_cmdline(&cmd, "meshrun.wdA"), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], tmpenv[600], a[600], b[600], sub[600], in[1400];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		char *tmp, *env[] = { tmpenv, NULL };
		struct sh_result r;
		struct stat st;
		int64_t t0, ms;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		tmp = make_tmpdir("/tmp/mr wd names.XXXXXX");
		snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", tmp);
		snprintf(a, sizeof(a), "%s/meshrun.wdA", tmp);
		snprintf(b, sizeof(b), "%s/meshrun.wdB", tmp);
		snprintf(sub, sizeof(sub), "%s/sub", tmp);
		assert_int_equal(mkdir(a, 0700), 0);
		assert_int_equal(mkdir(b, 0700), 0);
		assert_int_equal(mkdir(sub, 0700), 0);
		/* no "D": the setup may still run, the removal waits */
		t0 = mr_now_ms();
		sh_run(sh, mr_buf_cstr(&cmd), "Tmeshrun.wdB\nTsub/x\nT.\nT..\n", env, &r);
		ms = mr_now_ms() - t0;
		if (r.status != 0 || stat(a, &st) == 0 || stat(b, &st) == 0)
			fail_msg("watchdog names under %s: exit %d, '%s' or '%s' left, stderr '%s'", sh,
				 r.status, a, b, mr_buf_cstr(&r.err));
		if (stat(sub, &st) != 0 || stat(tmp, &st) != 0)
			fail_msg("watchdog names under %s: removed '%s' or TMPDIR itself", sh, sub);
		if (ms < 900)
			fail_msg("watchdog names under %s: removed after %lld ms, before a racing mkdir", sh,
				 (long long)ms);
		sh_result_release(&r);
		/* a "D" line after them: the setup is over, no wait */
		assert_int_equal(mkdir(a, 0700), 0);
		snprintf(in, sizeof(in), "D%s\n", sub);
		t0 = mr_now_ms();
		sh_run(sh, mr_buf_cstr(&cmd), in, env, &r);
		ms = mr_now_ms() - t0;
		if (r.status != 0 || stat(a, &st) == 0 || stat(sub, &st) == 0 || ms >= 900)
			fail_msg("watchdog names then D under %s: exit %d in %lld ms, stderr '%s'", sh,
				 r.status, (long long)ms, mr_buf_cstr(&r.err));
		sh_result_release(&r);
		rm_rf(tmp);
		free(tmp);
	}
	mr_buf_release(&cmd);
}

/*
 * "R" lines (the persist daemon, when a client goes): the directory is removed
 * at once, while the watchdog still runs, and forgotten (made again, it stays
 * at EOF); "R" for a name with '/', or for one never given, is harmless; what
 * is still registered goes at EOF as before.
 */
static void test_watchdog_remove_now(void **state)
{
	struct mr_buf cmd = MR_BUF_INIT;
	char a[600], b[600], c[600], sub[600];
	char *tmp;
	struct stat st;
	FILE *wd;
	int gone = 0, rc;

	(void)state;
	assert_int_equal(mr_hal_watchdog_cmdline(&cmd, NULL), 0);
	tmp = make_tmpdir("/tmp/mr wd now.XXXXXX");
	snprintf(a, sizeof(a), "%s/meshrun.nowA", tmp);
	snprintf(b, sizeof(b), "%s/d b", tmp);
	snprintf(c, sizeof(c), "%s/kept", tmp);
	snprintf(sub, sizeof(sub), "%s/sub", tmp);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	assert_int_equal(mkdir(c, 0700), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	setenv("TMPDIR", tmp, 1);
	wd = popen(mr_buf_cstr(&cmd), "w");
	unsetenv("TMPDIR");
	assert_non_null(wd);
	fprintf(wd, "Tmeshrun.nowA\nD%s\nD%s\nRmeshrun.nowA\nR%s\nRsub/x\nR.\nR%s/none\n", b, c, b, tmp);
	fflush(wd);
	for (int i = 0; i < 300 && !gone; i++) {
		gone = stat(a, &st) < 0 && stat(b, &st) < 0;
		if (!gone)
			mr_sleep_ms(10);
	}
	if (!gone)
		fail_msg("watchdog R: '%s' or '%s' still there 3 s after the R lines", a, b);
	if (stat(c, &st) != 0 || stat(sub, &st) != 0)
		fail_msg("watchdog R: removed '%s' or '%s' before EOF", c, sub);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	rc = pclose(wd);
	if (rc != 0 || stat(c, &st) == 0)
		fail_msg("watchdog R: exit %d, '%s' left at EOF", rc, c);
	if (stat(a, &st) != 0 || stat(b, &st) != 0 || stat(sub, &st) != 0 || stat(tmp, &st) != 0)
		fail_msg("watchdog R: a forgotten directory, '%s' or TMPDIR removed at EOF", sub);
	rm_rf(tmp);
	free(tmp);
	mr_buf_release(&cmd);
}

/* kill -SIG -PGID: the whole group gets the signal; a gone group is still exit 0 */
static void test_kill(void **state)
{
	(void)state;
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		struct mr_buf cmd = MR_BUF_INIT;
		struct sh_result r;
		pid_t g;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		g = start_group(false);
		mr_sleep_ms(50);
		assert_int_equal(mr_hal_kill_cmdline(&cmd, "TERM", g), 0);
		sh_run(sh, mr_buf_cstr(&cmd), NULL, NULL, &r);
		if (r.status != 0 || !group_gone(g, 3000))
			fail_msg("kill under %s: exit %d, group %ld %s", sh, r.status, (long)g,
				 group_alive(g) ? "still runs" : "gone");
		sh_result_release(&r);
		/* again: no such group any more, still exit 0 and quiet */
		sh_run(sh, mr_buf_cstr(&cmd), NULL, NULL, &r);
		if (r.status != 0 || r.out.len || r.err.len)
			fail_msg("kill of a gone group under %s: exit %d '%s'", sh, r.status, mr_buf_cstr(&r.err));
		sh_result_release(&r);
		mr_buf_release(&cmd);
	}
}

/* ------------------------------------------------------------------ meshrun's */

/* The check before launch: files in a new job directory under TMPDIR; bad command -> 3 */
static void test_launch_setup(void **state)
{
	char *tmp = make_tmpdir("/tmp/mr-setup-test.XXXXXX");
	char tmpenv[600];
	char *env[] = { tmpenv, NULL };
	char *ok_argv[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
			    "sh", "", "/", "meshrun.setuptest", "0", "hosts.json", "[[\"a b\", 'c']]\n$X `y`", "empty", "", NULL };
	char *bad_argv[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
			     "no-such-command-mr", "/no/such dir", "", "", "0", NULL };
	char *nowrite_argv[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
				 "sh", "", "/", "", "0", "hosts.json", "x", "no/such", "y", NULL };
	struct mr_buf ok = MR_BUF_INIT, bad = MR_BUF_INIT, nowrite = MR_BUF_INIT;

	(void)state;
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", tmp);
	assert_int_equal(mr_hal_spawn_cmdline(&ok, ok_argv, NULL, NULL), 0);
	assert_int_equal(mr_hal_spawn_cmdline(&nowrite, nowrite_argv, NULL, NULL), 0);
	assert_int_equal(mr_hal_spawn_cmdline(&bad, bad_argv, NULL, NULL), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], path[1024], dir[700] = "";
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		struct mr_buf f = MR_BUF_INIT;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct sh_result r;
		const char *o, *nl = NULL;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		sh_run(sh, mr_buf_cstr(&ok), NULL, env, &r);
		o = strchr(mr_buf_cstr(&r.out), '\n'); /* past the marker line */
		if (r.status != 0 || !o || strncmp(o + 1, tmp, strlen(tmp)) || !(nl = strchr(o + 1, '\n')) ||
		    strcmp(nl, "\n1\n"))
			fail_msg("setup under %s: exit %d, stdout '%s', stderr '%s'", sh, r.status,
				 mr_buf_cstr(&r.out), mr_buf_cstr(&r.err));
		snprintf(dir, sizeof(dir), "%.*s", (int)(nl - o - 1), o + 1);
		snprintf(path, sizeof(path), "%s/meshrun.setuptest", tmp);
		assert_string_equal(dir, path); /* the name meshrun chose, not mktemp's */
		snprintf(path, sizeof(path), "%s/hosts.json", dir);
		assert_int_equal(mr_read_file(path, 4096, &f, &e), 0);
		assert_string_equal(mr_buf_cstr(&f), "[[\"a b\", 'c']]\n$X `y`");
		mr_buf_reset(&f);
		snprintf(path, sizeof(path), "%s/empty", dir);
		assert_int_equal(mr_read_file(path, 4096, &f, &e), 0);
		assert_int_equal(f.len, 0);
		mr_buf_release(&f);
		rm_rf(dir);
		sh_result_release(&r);

		/* the watchdog made the directory first (an "M" name): taken as it is;
		 * a link in its place is not */
		snprintf(path, sizeof(path), "%s/meshrun.setuptest", tmp);
		assert_int_equal(mkdir(path, 0700), 0);
		sh_run(sh, mr_buf_cstr(&ok), NULL, env, &r);
		if (r.status != 0 || !strstr(mr_buf_cstr(&r.out), path))
			fail_msg("setup into a directory the watchdog made, under %s: exit %d, stderr '%s'", sh,
				 r.status, mr_buf_cstr(&r.err));
		sh_result_release(&r);
		rm_rf(path);
		assert_int_equal(symlink("/tmp", path), 0);
		sh_run(sh, mr_buf_cstr(&ok), NULL, env, &r);
		if (r.status != 4)
			fail_msg("setup into a link under %s: exit %d, stdout '%s'", sh, r.status, mr_buf_cstr(&r.out));
		sh_result_release(&r);
		unlink(path);

		/* a file that cannot be written (as on a full disk): exit 4, naming it, no
		 * directory left (found by the chaos campaign's full-disk fault) */
		sh_run(sh, mr_buf_cstr(&nowrite), NULL, env, &r);
		if (r.status != 4 || !strstr(mr_buf_cstr(&r.err), "/no/such'") || !dir_is_empty(tmp))
			fail_msg("setup with an unwritable file under %s: exit %d, stderr '%s', %s", sh,
				 r.status, mr_buf_cstr(&r.err),
				 dir_is_empty(tmp) ? "nothing left" : "the job directory is left");
		sh_result_release(&r);

		sh_run(sh, mr_buf_cstr(&bad), NULL, env, &r);
		if (r.status != 3 || !strstr(mr_buf_cstr(&r.err), "command 'no-such-command-mr' not found") ||
		    !strstr(mr_buf_cstr(&r.err), "working directory '/no/such dir' does not exist"))
			fail_msg("failing setup under %s: exit %d, stderr '%s'", sh, r.status, mr_buf_cstr(&r.err));
		sh_result_release(&r);
	}
	mr_buf_release(&ok);
	mr_buf_release(&bad);
	mr_buf_release(&nowrite);
	rm_rf(tmp);
	free(tmp);
}

/*
 * hal.h's "spare": a shell started ahead says it is ready, runs the command
 * line that comes before its token line (mr_hal_spare_line: our `exec /bin/sh
 * -c` lines in the spare's own sh) in its own pid (the session's process
 * group: the marker says so), with its arguments as "$@" and its exit status
 * as the spare's, and hands what follows to the command's stdin; EOF before
 * the token runs nothing.
 */
static void test_spare(void **state)
{
	char *argv[] = { "/bin/sh", "-c", "read -r x; echo \"got $x\"; printf '[%s]' \"$@\"; echo",
			 "arg0", "a  b", "it's \"q\" $X", NULL };
	char *st_argv[] = { "/bin/sh", "-c", "echo out; [ $# = 1 ] && exit 7", "arg0", "one", NULL };
	char *fail_argv[] = { "/bin/sh", "-c", "echo last; false", NULL };
	struct {
		struct mr_buf cmd;
		const char *in, *out; /* out: after the ready line and the pgid marker, if any */
		bool marker;          /* the marker line (mr_hal_spawn_cmdline): the spare's pid */
		int status;
	} cases[] = {
		{ MR_BUF_INIT, "hello spare\n", "got hello spare\n[a  b][it's \"q\" $X]\n", true, 0 },
		{ MR_BUF_INIT, "", "out\n", true, 7 },
		{ MR_BUF_INIT, "", "last\n", true, 1 },
		{ MR_BUF_INIT, "", "none 0\n", false, 0 }, /* no arguments at all */
	};
	struct mr_buf spare = MR_BUF_INIT, in = MR_BUF_INIT;
	const char *token = "MESHRUN-GO-0123456789abcdef";

	(void)state;
	assert_int_equal(mr_hal_spare_cmdline(&spare, token), 0);
	assert_int_equal(mr_hal_spawn_cmdline(&cases[0].cmd, argv, NULL, NULL), 0);
	assert_int_equal(mr_hal_spawn_cmdline(&cases[1].cmd, st_argv, NULL, NULL), 0);
	assert_int_equal(mr_hal_spawn_cmdline(&cases[2].cmd, fail_argv, NULL, NULL), 0);
	assert_int_equal(mr_shquote_sh_c(&cases[3].cmd, "echo none $#", NULL), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		struct sh_result r;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
			char want[512];

			mr_buf_reset(&in);
			assert_int_equal(mr_hal_spare_line(&in, mr_buf_cstr(&cases[k].cmd)), 0);
			assert_true(!strncmp(mr_buf_cstr(&in), MR_HAL_SPARE_SH_C " ", strlen(MR_HAL_SPARE_SH_C) + 1));
			mr_buf_printf(&in, "\n%s\n%s", token, cases[k].in);
			sh_run(sh, mr_buf_cstr(&spare), mr_buf_cstr(&in), NULL, &r);
			if (cases[k].marker)
				snprintf(want, sizeof(want), MR_HAL_SPARE_READY "\n" MR_HAL_PGID_MARKER "%ld\n%s",
					 (long)r.pid, cases[k].out);
			else
				snprintf(want, sizeof(want), MR_HAL_SPARE_READY "\n%s", cases[k].out);
			if (r.status != cases[k].status || strcmp(mr_buf_cstr(&r.out), want))
				fail_msg("spare under %s, case %zu: exit %d (want %d), stdout '%s' (want '%s'), stderr '%s'",
					 sh, k, r.status, cases[k].status, mr_buf_cstr(&r.out), want, mr_buf_cstr(&r.err));
			sh_result_release(&r);
		}
		/* EOF before the token: nothing runs */
		sh_run(sh, mr_buf_cstr(&spare), "echo ran >&2\n", NULL, &r);
		if (r.status != 0 || strcmp(mr_buf_cstr(&r.out), MR_HAL_SPARE_READY "\n") || r.err.len)
			fail_msg("spare under %s at EOF: exit %d, stdout '%s', stderr '%s'", sh, r.status,
				 mr_buf_cstr(&r.out), mr_buf_cstr(&r.err));
		sh_result_release(&r);
	}
	/* a line of another form goes as it is */
	mr_buf_reset(&in);
	assert_int_equal(mr_hal_spare_line(&in, "echo plain"), 0);
	assert_string_equal(mr_buf_cstr(&in), "echo plain");
	for (size_t k = 0; k < ARRAY_SIZE(cases); k++)
		mr_buf_release(&cases[k].cmd);
	mr_buf_release(&spare);
	mr_buf_release(&in);
}

/*
 * cmdline under login shell sh, as sshd starts a command: a session of its own,
 * TMPDIR=tmpdir when not NULL, stdout discarded; stdin a pipe whose write end
 * is *in, or /dev/null when in is NULL. Returns its pid.
 */
static pid_t sh_start(const char *sh, const char *cmdline, const char *tmpdir, int *in)
{
	int fds[2] = { -1, -1 };
	pid_t pid;

	if (in)
		assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		setsid();
		if (tmpdir)
			setenv("TMPDIR", tmpdir, 1);
		dup2(in ? fds[0] : null, 0);
		dup2(null, 1);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		execl(sh, strrchr(sh, '/') + 1, "-c", cmdline, (char *)NULL);
		_exit(127);
	}
	if (in) {
		close(fds[0]);
		*in = fds[1];
	}
	return pid;
}

/* Its exit status, waited for at most 10 s (then killed: -1). */
static int wait_status(pid_t pid)
{
	int st = 0;

	for (int i = 0; i < 1000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		mr_sleep_ms(10);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/*
 * WD 1 (the host's watchdog makes and marks the directory, mr_hal_makes_dirs):
 * the setup writes no file into the directory before its mark is there (a host
 * stopped then would keep an unmarked directory no sweep removes: issue 16's
 * campaign), then writes; with no watchdog at all it makes the directory itself.
 */
static void test_launch_setup_waits(void **state)
{
	char *argv[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
			 "", "", "/", "meshrun.waits", "1", "hosts.json", "[]", NULL };
	char *argv_late[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
			      "", "", "/", "meshrun.waits", "0", "hosts.json", "[]", NULL };
	/* a mkdir that loses the race: the directory is made just before it runs */
	static const char late_mkdir[] = "#!/bin/sh\n/bin/mkdir \"$@\" 2>/dev/null\nexec /bin/mkdir \"$@\"\n";
	struct mr_buf cmd = MR_BUF_INIT, late = MR_BUF_INIT, path = MR_BUF_INIT;
	char *fake = make_tmpdir("/tmp/mr-setup-mkdir.XXXXXX");
	char *old_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_hal_spawn_cmdline(&cmd, argv, NULL, NULL), 0);
	assert_int_equal(mr_buf_printf(&path, "%s/mkdir", fake), 0);
	assert_int_equal(mr_write_file(mr_buf_cstr(&path), late_mkdir, strlen(late_mkdir), 0755, &err), 0);
	mr_buf_reset(&path);
	assert_int_equal(mr_buf_printf(&path, "PATH=%s:%s", fake, old_path ? old_path : "/usr/bin:/bin"), 0);
	{
		char *env[] = { (char *)mr_buf_cstr(&path), NULL };

		assert_int_equal(mr_hal_spawn_cmdline(&late, argv_late, env, NULL), 0);
	}
	mr_buf_release(&path);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], dir[700], file[760], mark[760];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct stat st;
		char *tmp;
		pid_t pid;
		int status;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		tmp = make_tmpdir("/tmp/mr-setup-waits.XXXXXX");
		snprintf(dir, sizeof(dir), "%s/meshrun.waits", tmp);
		snprintf(file, sizeof(file), "%s/hosts.json", dir);
		snprintf(mark, sizeof(mark), "%s/" MR_HAL_WATCHDOG_MARK, dir);
		/* made, not yet marked: the watchdog between its mkdir and its mark */
		assert_int_equal(mkdir(dir, 0700), 0);
		pid = sh_start(sh, mr_buf_cstr(&cmd), tmp, NULL);
		mr_sleep_ms(300);
		if (stat(file, &st) == 0)
			fail_msg("setup under %s wrote into an unmarked directory", sh);
		assert_int_equal(mr_write_file(mark, "host 1\n", 7, 0600, &e), 0);
		status = wait_status(pid);
		if (status != 0 || stat(file, &st) < 0)
			fail_msg("setup under %s: exit %d once the mark came, '%s' %s", sh, status, file,
				 stat(file, &st) < 0 ? "missing" : "written");
		rm_rf(dir);

		/* no watchdog came: the setup made it after its wait */
		status = wait_status(sh_start(sh, mr_buf_cstr(&cmd), tmp, NULL));
		if (status != 0 || stat(file, &st) < 0 || stat(mark, &st) == 0)
			fail_msg("setup under %s without a watchdog: exit %d, '%s' %s", sh, status, file,
				 stat(file, &st) < 0 ? "missing" : "written");
		rm_rf(dir);

		/* a watchdog slower than the wait makes it between the setup's look
		 * and its mkdir (a loaded host, issue 33): the setup's mkdir fails
		 * with "File exists", and the directory, ours, is taken */
		status = wait_status(sh_start(sh, mr_buf_cstr(&late), tmp, NULL));
		if (status != 0 || stat(file, &st) < 0)
			fail_msg("setup under %s, directory made under its mkdir: exit %d, '%s' %s", sh, status,
				 file, stat(file, &st) < 0 ? "missing" : "written");
		rm_rf(tmp);
		free(tmp);
	}
	free(old_path);
	rm_rf(fake);
	free(fake);
	mr_buf_release(&cmd);
	mr_buf_release(&late);
}

/* "HOST PID" in dir's mark names this host and pid */
static bool marked_by(const char *dir, pid_t pid)
{
	char path[700], want[400], got[400] = "";
	struct utsname u;
	FILE *f;

	snprintf(path, sizeof(path), "%s/" MR_HAL_WATCHDOG_MARK, dir);
	if (uname(&u) < 0 || !(f = fopen(path, "r")))
		return false;
	if (!fgets(got, sizeof(got), f))
		got[0] = '\0';
	fclose(f);
	snprintf(want, sizeof(want), "%s %ld\n", u.nodename, (long)pid);
	return !strcmp(got, want);
}

/*
 * "M" names (the ssh backends', hal.h): the watchdog makes the directory at
 * once, as an argument or a line, and marks it, also one the setup made first;
 * it leaves alone a link in the name's place; at EOF all are gone.
 */
static void test_watchdog_makes(void **state)
{
	struct mr_buf cmd = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_hal_watchdog_cmdline(&cmd, "meshrun.wdA"), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64], a[700], b[600], c[600], lnk[600], target[600];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		const char *in = "Mmeshrun.wdB\nMmeshrun.wdC\nMmeshrun.link\n";
		char *tmp;
		struct stat st;
		int wd_in;
		pid_t pid;
		bool ok = false;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		tmp = make_tmpdir("/tmp/mr wd makes.XXXXXX");
		snprintf(a, sizeof(a), "%s/meshrun.wdA", tmp);
		snprintf(b, sizeof(b), "%s/meshrun.wdB", tmp);
		snprintf(c, sizeof(c), "%s/meshrun.wdC", tmp);
		snprintf(lnk, sizeof(lnk), "%s/meshrun.link", tmp);
		snprintf(target, sizeof(target), "%s/elsewhere", tmp);
		assert_int_equal(mkdir(c, 0700), 0); /* the setup came first */
		assert_int_equal(mkdir(target, 0700), 0);
		assert_int_equal(symlink(target, lnk), 0);
		pid = sh_start(sh, mr_buf_cstr(&cmd), tmp, &wd_in);
		assert_int_equal(mr_write_full(wd_in, in, strlen(in)), 0);
		for (int i = 0; i < 500 && !ok; i++) {
			ok = marked_by(a, pid) && marked_by(b, pid) && marked_by(c, pid);
			if (!ok)
				mr_sleep_ms(10);
		}
		if (!ok)
			fail_msg("watchdog under %s: '%s', '%s' or '%s' not made and marked by pid %ld", sh, a, b, c,
				 (long)pid);
		if (lstat(a, &st) < 0 || (st.st_mode & 0777) != 0700)
			fail_msg("watchdog under %s: '%s' is not mode 700", sh, a);
		/* the setup is over ("D"): a mark that is there is not written again
		 * (a rewrite empties it for an instant); wdD's mark says it was read */
		{
			char am[760], d[600], line[1400];
			struct stat before, after;

			snprintf(am, sizeof(am), "%s/" MR_HAL_WATCHDOG_MARK, a);
			snprintf(d, sizeof(d), "%s/meshrun.wdD", tmp);
			assert_int_equal(mkdir(d, 0700), 0);
			assert_int_equal(stat(am, &before), 0);
			mr_sleep_ms(20); /* a rewrite would get a later mtime */
			snprintf(line, sizeof(line), "D%s\nD%s\n", a, d);
			assert_int_equal(mr_write_full(wd_in, line, strlen(line)), 0);
			for (int i = 0; i < 500 && !marked_by(d, pid); i++)
				mr_sleep_ms(10);
			if (!marked_by(d, pid) || stat(am, &after) < 0 ||
			    mr_stat_mtime_ns(&after) != mr_stat_mtime_ns(&before))
				fail_msg("watchdog under %s: wrote the mark of '%s' again at its D line", sh, a);
		}
		close(wd_in);
		waitpid(pid, NULL, 0);
		if (stat(a, &st) == 0 || stat(b, &st) == 0 || stat(c, &st) == 0)
			fail_msg("watchdog under %s: left '%s', '%s' or '%s' at EOF", sh, a, b, c);
		snprintf(a, sizeof(a), "%s/" MR_HAL_WATCHDOG_MARK, target);
		if (stat(target, &st) < 0 || stat(a, &st) == 0)
			fail_msg("watchdog under %s: wrote a mark through the link, or removed its target", sh);
		unlink(lnk);
		rm_rf(tmp);
		free(tmp);
	}
	mr_buf_release(&cmd);
}

/*
 * A real watchdog (sh_start) told "D<dir>": it writes its mark into dir;
 * returns its pid (= session), *in its stdin.
 */
static pid_t start_marking_watchdog(const char *sh, const char *dir, int *in)
{
	struct mr_buf cmd = MR_BUF_INIT, line = MR_BUF_INIT;
	pid_t pid;

	assert_int_equal(mr_hal_watchdog_cmdline(&cmd, NULL), 0);
	pid = sh_start(sh, mr_buf_cstr(&cmd), NULL, in);
	mr_buf_printf(&line, "D%s\n", dir);
	assert_int_equal(mr_write_full(*in, line.p, line.len), 0);
	/* the whole line, not the file alone: the shell creates it before it
	 * writes, and a kill -9 in between left an empty mark (kept by the sweep) */
	for (int i = 0; i < 500 && !marked_by(dir, pid); i++)
		mr_sleep_ms(10);
	if (!marked_by(dir, pid))
		fail_msg("watchdog under %s wrote no mark into '%s'", sh, dir);
	mr_buf_release(&cmd);
	mr_buf_release(&line);
	return pid;
}

static void make_job_dir(const char *tmp, const char *name, const char *mark)
{
	char path[700];
	struct meshrun_err e = MESHRUN_ERR_INIT;

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/%s/hostfile.json", tmp, name);
	assert_int_equal(mr_write_file(path, "[]", 2, 0600, &e), 0);
	if (mark) {
		snprintf(path, sizeof(path), "%s/%s/" MR_HAL_WATCHDOG_MARK, tmp, name);
		assert_int_equal(mr_write_file(path, mark, strlen(mark), 0600, &e), 0);
	}
}

static bool job_dir_exists(const char *tmp, const char *name)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	return access(path, F_OK) == 0;
}

/*
 * The sweep (issue 16): two jobs' directories on one host, one whose watchdog was
 * killed with the rest of the host (kill -9, nobody read its EOF) and one whose
 * watchdog lives. The next job's setup removes the first and keeps the second,
 * and keeps what it cannot judge: no mark (a setup under way), another host's
 * mark; a mark whose pid lives but is no watchdog (reused) is swept. The
 * all-local path's test (mr_launch_dir_is_stale) agrees but keeps the reused pid.
 */
static void test_launch_sweep(void **state)
{
	char *tmp = make_tmpdir("/tmp/mr-sweep-test.XXXXXX");
	char tmpenv[600], path[700], other[400], reused[400];
	char *env[] = { tmpenv, NULL };
	char *argv[] = { MR_SH_PATH, "-c", (char *)mr_hal_setup_script, "meshrun-setup",
			 "", "", "/", "meshrun.newjob", "0", "hostfile.json", "[]", NULL };
	struct mr_buf cmd = MR_BUF_INIT, spare = MR_BUF_INIT, in = MR_BUF_INIT;
	const char *token = "MESHRUN-GO-sweep";
	struct utsname u;

	(void)state;
	assert_int_equal(uname(&u), 0);
	snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", tmp);
	snprintf(other, sizeof(other), "not-%s 1\n", u.nodename);
	snprintf(reused, sizeof(reused), "%s %ld\n", u.nodename, (long)getpid());
	assert_int_equal(mr_hal_spawn_cmdline(&cmd, argv, NULL, NULL), 0);
	/* the same setup as a spare runs it (--persist): in the spare's own sh */
	assert_int_equal(mr_hal_spare_cmdline(&spare, token), 0);
	assert_int_equal(mr_hal_spare_line(&in, mr_buf_cstr(&cmd)), 0);
	mr_buf_printf(&in, "\n%s\n", token);
	for (size_t s = 0; s < 2 * ARRAY_SIZE(shell_names); s++) {
		char pbuf[64];
		const char *sh = shell_path(shell_names[s / 2], pbuf, sizeof(pbuf));
		bool in_spare = s % 2;
		struct sh_result r;
		int live_in, dead_in;
		pid_t live, dead;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s / 2]);
			continue;
		}
		make_job_dir(tmp, "meshrun.live", NULL);
		make_job_dir(tmp, "meshrun.dead", NULL);
		make_job_dir(tmp, "meshrun.nomark", NULL);
		make_job_dir(tmp, "meshrun.other", other);
		make_job_dir(tmp, "meshrun.reused", reused);
		/* the job's own directory, made and marked by its watchdog (WD 1): not
		 * swept, even with a mark the sweep would take for another's */
		make_job_dir(tmp, "meshrun.newjob", reused);
		snprintf(path, sizeof(path), "%s/meshrun.newjob/keep", tmp);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/meshrun.live", tmp);
		live = start_marking_watchdog(sh, path, &live_in);
		snprintf(path, sizeof(path), "%s/meshrun.dead", tmp);
		dead = start_marking_watchdog(sh, path, &dead_in);
		/* the host's processes die at once: the watchdog reads no EOF */
		kill(-dead, SIGKILL);
		waitpid(dead, NULL, 0);
		close(dead_in);

		assert_true(mr_launch_dir_is_stale(path));
		snprintf(path, sizeof(path), "%s/meshrun.live", tmp);
		assert_false(mr_launch_dir_is_stale(path));
		snprintf(path, sizeof(path), "%s/meshrun.nomark", tmp);
		assert_false(mr_launch_dir_is_stale(path));
		snprintf(path, sizeof(path), "%s/meshrun.other", tmp);
		assert_false(mr_launch_dir_is_stale(path));
		snprintf(path, sizeof(path), "%s/meshrun.reused", tmp);
		assert_false(mr_launch_dir_is_stale(path));

		if (in_spare)
			sh_run(sh, mr_buf_cstr(&spare), mr_buf_cstr(&in), env, &r);
		else
			sh_run(sh, mr_buf_cstr(&cmd), NULL, env, &r);
		if (r.status != 0 || job_dir_exists(tmp, "meshrun.dead") || job_dir_exists(tmp, "meshrun.reused") ||
		    !job_dir_exists(tmp, "meshrun.live") || !job_dir_exists(tmp, "meshrun.nomark") ||
		    !job_dir_exists(tmp, "meshrun.other") || !job_dir_exists(tmp, "meshrun.newjob/keep"))
			fail_msg("sweep under %s%s: exit %d, stderr '%s', dead %d reused %d live %d nomark %d other %d new (kept) %d",
				 sh, in_spare ? " in a spare" : "", r.status, mr_buf_cstr(&r.err), job_dir_exists(tmp, "meshrun.dead"),
				 job_dir_exists(tmp, "meshrun.reused"), job_dir_exists(tmp, "meshrun.live"),
				 job_dir_exists(tmp, "meshrun.nomark"), job_dir_exists(tmp, "meshrun.other"),
				 job_dir_exists(tmp, "meshrun.newjob/keep"));
		sh_result_release(&r);
		/* the live job ends: its watchdog removes its directory as before */
		close(live_in);
		waitpid(live, NULL, 0);
		if (job_dir_exists(tmp, "meshrun.live"))
			fail_msg("watchdog under %s left its directory at EOF", sh);
		for (const char *const *n = (const char *const[]){ "meshrun.nomark", "meshrun.other", "meshrun.newjob", NULL }; *n; n++) {
			snprintf(path, sizeof(path), "%s/%s", tmp, *n);
			rm_rf(path);
		}
		assert_true(dir_is_empty(tmp));
	}
	mr_buf_release(&cmd);
	mr_buf_release(&spare);
	mr_buf_release(&in);
	rm_rf(tmp);
	free(tmp);
}

/* --------------------------------------------------------------- meshconfig's */

/* Stub commands on the PATH: sudo, ifconfig (fails for en2), route, ping, netstat, uname. */
static char *stub_bin(const char *uname_s)
{
	char *bin = make_tmpdir("/tmp/mr-stub-bin.XXXXXX");
	char uname_body[128];

	write_exec(bin, "sudo", "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n");
	write_exec(bin, "ifconfig", "#!/bin/sh\necho \"ifconfig $*\" >&2\n[ \"$1\" != en2 ] || exit 7\n");
	write_exec(bin, "route", "#!/bin/sh\necho \"route $*\"\n");
	write_exec(bin, "ping", "#!/bin/sh\necho \"ping $*\"\n");
	write_exec(bin, "netstat", "#!/bin/sh\necho \"netstat $*\"\n");
	snprintf(uname_body, sizeof(uname_body), "#!/bin/sh\necho %s\n", uname_s);
	write_exec(bin, "uname", uname_body);
	return bin;
}

static void push_cmd(struct mr_topo_host_cmds *hc, const char *const *words)
{
	struct mr_topo_cmd *c = &hc->v[hc->nr++];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; words[i]; i++)
		assert_int_equal(mr_strvec_push(&c->argv, words[i]), 0);
}

/* The setup script: each command's status pinned on it, stdout only "fail K S" and "done" */
static void test_config_setup(void **state)
{
	static const char *const c0[] = { "ifconfig", "bridge0", "down", NULL };
	static const char *const c1[] = { "ifconfig", "en2", "inet", "192.168.0.1", "netmask",
					  "255.255.255.252", NULL };
	static const char *const c2[] = { "route", "change", "192.168.0.2", "-interface", "en2", NULL };
	struct mr_topo_cmd cmds[3];
	struct mr_topo_host_cmds hc = { cmds, 0 };
	struct mr_topo_plan plan;
	struct mr_buf script = MR_BUF_INIT, cmd = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *bin = stub_bin("Darwin");
	char pathenv[700];
	char *env[] = { pathenv, NULL };
	char *argv[] = { MR_SH_PATH, "-c", NULL, NULL };

	(void)state;
	memset(&plan, 0, sizeof(plan));
	push_cmd(&hc, c0);
	push_cmd(&hc, c1);
	push_cmd(&hc, c2);
	plan.cmds = &hc;
	plan.nhosts = 1;
	assert_int_equal(cfg_setup_script(&plan, 0, "m1", &script, &e), 0);
	argv[2] = (char *)mr_buf_cstr(&script);
	assert_int_equal(mr_hal_spawn_cmdline(&cmd, argv, NULL, NULL), 0);
	snprintf(pathenv, sizeof(pathenv), "PATH=%s:/usr/bin:/bin", bin);
	for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
		char pbuf[64];
		const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
		const char *o;
		struct sh_result r;

		if (!sh) {
			printf("skip: %s is not installed\n", shell_names[s]);
			continue;
		}
		sh_run(sh, mr_buf_cstr(&cmd), NULL, env, &r);
		o = strchr(mr_buf_cstr(&r.out), '\n');
		if (r.status != 0 || !o || strcmp(o + 1, "fail 1 7\ndone\n") ||
		    !strstr(mr_buf_cstr(&r.err), "route change 192.168.0.2 -interface en2"))
			fail_msg("setup script under %s: exit %d, stdout '%s', stderr '%s'", sh, r.status,
				 mr_buf_cstr(&r.out), mr_buf_cstr(&r.err));
		sh_result_release(&r);
	}
	for (size_t k = 0; k < hc.nr; k++)
		mr_strvec_release(&cmds[k].argv);
	mr_buf_release(&script);
	mr_buf_release(&cmd);
	rm_rf(bin);
	free(bin);
}

/* The ping check and the routes command pick their form by `uname -s`. */
static void test_config_uname_forms(void **state)
{
	static const struct {
		const char *uname;
		const char *ping, *routes;
		int routes_status;
	} cases[] = {
		{ "Linux", "ping -c 1 -W 1 -I en2 192.168.0.2\n", "", 1 },
		{ "Darwin", "ping -c 1 -t 1 192.168.0.2\n", "netstat -rn -f inet\n", 0 },
	};

	(void)state;
	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		char *bin = stub_bin(cases[c].uname);
		char pathenv[700];
		char *env[] = { pathenv, NULL };
		char *ping[] = { MR_SH_PATH, "-c", (char *)cfg_ping_script, "sh", "en2", "192.168.0.2", NULL };
		char *routes[] = { MR_SH_PATH, "-c", (char *)cfg_routes_script, NULL };
		struct mr_buf pcmd = MR_BUF_INIT, rcmd = MR_BUF_INIT;

		snprintf(pathenv, sizeof(pathenv), "PATH=%s:/usr/bin:/bin", bin);
		assert_int_equal(mr_hal_spawn_cmdline(&pcmd, ping, NULL, NULL), 0);
		assert_int_equal(mr_hal_spawn_cmdline(&rcmd, routes, NULL, NULL), 0);
		for (size_t s = 0; s < ARRAY_SIZE(shell_names); s++) {
			char pbuf[64];
			const char *sh = shell_path(shell_names[s], pbuf, sizeof(pbuf));
			const char *o;
			struct sh_result r;

			if (!sh)
				continue;
			sh_run(sh, mr_buf_cstr(&pcmd), NULL, env, &r);
			o = strchr(mr_buf_cstr(&r.out), '\n');
			if (r.status != 0 || !o || strcmp(o + 1, cases[c].ping))
				fail_msg("ping check (%s) under %s: exit %d, stdout '%s'", cases[c].uname, sh,
					 r.status, mr_buf_cstr(&r.out));
			sh_result_release(&r);
			sh_run(sh, mr_buf_cstr(&rcmd), NULL, env, &r);
			o = strchr(mr_buf_cstr(&r.out), '\n');
			if (r.status != cases[c].routes_status || !o || strcmp(o + 1, cases[c].routes))
				fail_msg("routes (%s) under %s: exit %d, stdout '%s'", cases[c].uname, sh,
					 r.status, mr_buf_cstr(&r.out));
			sh_result_release(&r);
		}
		mr_buf_release(&pcmd);
		mr_buf_release(&rcmd);
		rm_rf(bin);
		free(bin);
	}
}

/* Why the wrapping matters: zsh does not split $p, so the bare watchdog loop
 * would see one word; under the wrapper it sees each. (Skipped without zsh.) */
static void test_zsh_needs_wrapping(void **state)
{
	char pbuf[64];
	const char *zsh = shell_path("zsh", pbuf, sizeof(pbuf));
	static const char loop[] = "p=' 11 22 '; n=0; for x in $p; do n=$((n+1)); done; echo $n";
	char *const args[] = { "t", NULL };
	struct mr_buf wrapped = MR_BUF_INIT;
	struct sh_result r;

	(void)state;
	if (!zsh) {
		printf("skip: zsh is not installed\n");
		return;
	}
	sh_run(zsh, loop, NULL, NULL, &r);
	assert_string_equal(mr_buf_cstr(&r.out), "1\n");
	sh_result_release(&r);
	assert_int_equal(mr_shquote_sh_c(&wrapped, loop, args), 0);
	sh_run(zsh, mr_buf_cstr(&wrapped), NULL, NULL, &r);
	assert_string_equal(mr_buf_cstr(&r.out), "2\n");
	sh_result_release(&r);
	mr_buf_release(&wrapped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zsh_needs_wrapping),
		cmocka_unit_test(test_spawn_cmdline),
		cmocka_unit_test(test_watchdog),
		cmocka_unit_test(test_watchdog_names),
		cmocka_unit_test(test_watchdog_makes),
		cmocka_unit_test(test_watchdog_remove_now),
		cmocka_unit_test(test_kill),
		cmocka_unit_test(test_spare),
		cmocka_unit_test(test_launch_setup),
		cmocka_unit_test(test_launch_setup_waits),
		cmocka_unit_test(test_launch_sweep),
		cmocka_unit_test(test_config_setup),
		cmocka_unit_test(test_config_uname_forms),
	};

	signal(SIGPIPE, SIG_IGN);
#ifdef __linux__
	/* reap the orphaned members of killed groups ourselves: some init processes
	 * (containers) take a second or more, and a zombie still counts for kill(-g, 0) */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
	return cmocka_run_group_tests(tests, NULL, NULL);
}
