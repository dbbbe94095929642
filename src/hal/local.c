/*
 * local.c - the local hal backend: fork/exec on this machine.
 *
 * Children are started by mr_spawn_child() (common/spawn.h: signals reset,
 * exec errors reported as MESHRUN_E_EXEC, never as an exit status of 127).
 * Every child leads its own process group (setpgid in child and parent, as
 * shells do), so signals and kills reach its children too.
 *
 * Child exit is detected with a pidfd (Linux >= 5.3: readable once the child is
 * a zombie); without pidfds the loop checks every 20 ms. The leader is checked
 * with waitid(WNOWAIT) and only reaped after the group has been killed where
 * that is needed (timeouts, free), so its pgid cannot be reused meanwhile.
 *
 * stdin is a socketpair, not a pipe: mr_send_nosig() to a child that closed
 * its stdin gives EPIPE instead of a process-wide SIGPIPE (a library must not
 * touch signal dispositions). stdout/stderr are pipes.
 *
 * After the leader exits, whatever is already in its stdout/stderr pipes is
 * read and delivered, then the pipes are closed: a background grandchild that
 * keeps them open does not keep the command alive.
 *
 * Like the ssh backend, the first child starts a watchdog (/bin/sh -c
 * mr_hal_watchdog_script, in a session of its own, stdin a socket from us):
 * every child's group is registered there while it lives, and if this process
 * dies without mr_hal_free() (SIGKILL), the EOF makes the watchdog kill those
 * groups and remove the mr_hal_remove_at_exit() directories.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/spawn.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/sh.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOCAL_TICK_MS 20            /* exit check period without pidfds */
#define LOCAL_CHUNK 65536
#define LOCAL_DRAIN_READS 64        /* at most 4 MiB drained per stream after exit */

struct local_hal;

/* One started child, shared by run commands and spawned procs. */
struct lchild {
	struct local_hal *lh; /* whose watchdog knows the child's group */
	pid_t pid;          /* > 0 while not reaped */
	int pidfd;          /* -1 without pidfd support */
	int in_fd, out_fd, err_fd; /* parent ends; -1 once closed */
	bool exited;        /* leader is a zombie (seen with WNOWAIT) */
	int wstatus;        /* valid once reaped, unless lost */
	bool lost;          /* someone else reaped it: no exit status */
};

struct local_hal {
	struct mr_hal base;
	bool no_pidfd;
	bool wd_tried;      /* the watchdog was started (or failed to) */
	int wd_fd;          /* its stdin; -1 when there is none */
	pid_t wd_pid;
};

struct local_proc {
	struct mr_proc base;
	struct lchild c;
	struct mr_buf inq;  /* bytes queued for stdin */
	bool want_close;    /* close stdin once inq is written */
};

#define to_local_hal(h) mr_container_of(h, struct local_hal, base)
#define to_local_proc(p) mr_container_of(p, struct local_proc, base)

static void lchild_init(struct lchild *c)
{
	c->lh = NULL;
	c->pid = 0;
	c->pidfd = c->in_fd = c->out_fd = c->err_fd = -1;
	c->exited = false;
	c->lost = false;
	c->wstatus = 0;
}

static void lchild_close_fds(struct lchild *c)
{
	mr_close(&c->pidfd);
	mr_close(&c->in_fd);
	mr_close(&c->out_fd);
	mr_close(&c->err_fd);
}

/* envp = our environment with each "K=V" of env set on top. */
static int build_env(struct mr_strvec *envp, char *const *env, const char *what,
		     struct meshrun_err *err)
{
	if (mr_strvec_pushv(envp, mr_environ()) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "environment for %s: out of memory", what);
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		char *name;
		int rc;

		if (!eq || eq == env[i])
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "environment entry '%s' for %s: expected NAME=VALUE", env[i], what);
		name = strndup(env[i], (size_t)(eq - env[i]));
		if (!name)
			return mr_err_set(err, MESHRUN_E_NOMEM, "environment for %s: out of memory", what);
		rc = mr_strvec_setenv(envp, name, eq + 1);
		free(name);
		if (rc < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "environment for %s: out of memory", what);
	}
	return 0;
}

static int open_pidfd(struct local_hal *lh, pid_t pid)
{
	if (!lh->no_pidfd) {
		int fd = mr_pidfd_open(pid);

		if (fd >= 0)
			return fd;
		if (errno == ENOSYS || errno == EPERM)
			lh->no_pidfd = true;
	}
	return -1;
}

/* Start the watchdog once; without one, children just lack the guard. */
static int wd_start(struct local_hal *lh)
{
	char *argv[] = { "/bin/sh", "-c", (char *)mr_hal_watchdog_script, "meshrun-watchdog", NULL };
	struct mr_spawn_opts so = { 0 };
	int sv[2], rc;

	if (lh->wd_tried)
		return lh->wd_fd >= 0 ? 0 : -1;
	lh->wd_tried = true;
	if (mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, sv) < 0)
		return -1;
	so.argv = argv;
	so.what = "the local watchdog";
	so.fds[0] = sv[1];
	so.fds[1] = so.fds[2] = -1;
	/* own session: a Ctrl-C or a kill of our process group leaves it to do its job */
	so.flags = MR_SPAWN_SETSID;
	rc = mr_spawn_child(&so, &lh->wd_pid, NULL);
	mr_close(&sv[1]);
	if (rc < 0) {
		mr_close(&sv[0]);
		lh->wd_pid = 0;
		return -1;
	}
	lh->wd_fd = sv[0];
	return 0;
}

/* Tell the watchdog one line (op, then arg); a watchdog that is gone is dropped. */
static int wd_line(struct local_hal *lh, char op, const char *arg)
{
	char line[PATH_MAX + 4];
	int n = snprintf(line, sizeof(line), "%c%s\n", op, arg);

	if (lh->wd_fd < 0)
		return -1;
	if (n < 0 || (size_t)n >= sizeof(line)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (int off = 0; off < n;) {
		ssize_t w = mr_send_nosig(lh->wd_fd, line + off, (size_t)(n - off), 0);

		if (w <= 0) {
			mr_close(&lh->wd_fd);
			return -1;
		}
		off += (int)w;
	}
	return 0;
}

static void wd_group(struct local_hal *lh, char op, pid_t pgid)
{
	char num[24];

	snprintf(num, sizeof(num), "%ld", (long)pgid);
	(void)wd_line(lh, op, num);
}

/* EOF to the watchdog (nothing registered is left by now) and reap it. */
static void wd_stop(struct local_hal *lh)
{
	int64_t until = mr_now_ms() + 2000;

	mr_close(&lh->wd_fd);
	if (lh->wd_pid <= 0)
		return;
	while (waitpid(lh->wd_pid, NULL, WNOHANG) == 0) {
		if (mr_ms_left(until) == 0) {
			(void)kill(lh->wd_pid, SIGKILL);
			while (waitpid(lh->wd_pid, NULL, 0) < 0 && errno == EINTR)
				;
			break;
		}
		poll(NULL, 0, 5);
	}
	lh->wd_pid = 0;
}

/*
 * Start argv with stdin from a socketpair (want_stdin) or empty, stdout and
 * stderr into pipes. On success c holds the pid and the parent's fds
 * (non-blocking). On failure nothing is left running or open.
 */
static int start_child(struct local_hal *lh, const char *host, char *const *argv,
		       char *const *env, const char *cwd, bool want_stdin, struct lchild *c,
		       struct meshrun_err *err)
{
	struct mr_spawn_opts so = { 0 };
	struct mr_strvec envp = MR_STRVEC_INIT;
	char what[200], cmd[160];
	int fds[3];
	pid_t pid;
	int rc = 0;

	lchild_init(c);
	mr_hal_argv_summary(argv, cmd, sizeof(cmd));
	snprintf(what, sizeof(what), "'%s' on '%s'", cmd, mr_hal_host_name(host));

	so.argv = argv;
	so.cwd = cwd;
	so.what = what;
	so.flags = MR_SPAWN_SETPGID;
	if (env && env[0]) {
		rc = build_env(&envp, env, what, err);
		if (rc < 0)
			goto out;
		so.envp = envp.v;
	}
	rc = mr_spawn_piped(&so, want_stdin, &pid, fds, err);
	if (rc < 0)
		goto out;
	c->pid = pid;
	c->lh = lh;
	if (wd_start(lh) == 0)
		wd_group(lh, '+', pid);
	c->pidfd = open_pidfd(lh, pid);
	c->in_fd = fds[0];
	c->out_fd = fds[1];
	c->err_fd = fds[2];
out:
	mr_strvec_release(&envp);
	return rc;
}

static void group_kill(pid_t pid, int sig)
{
	if (kill(-pid, sig) < 0 && errno == ESRCH)
		(void)kill(pid, sig); /* no group (setpgid lost a race with exec): the leader */
}

/* Has the leader exited? (Does not reap it.) */
static bool lchild_check_exit(struct lchild *c)
{
	siginfo_t si;
	int r;

	if (c->exited || c->pid <= 0)
		return true;
	memset(&si, 0, sizeof(si));
	r = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT);
	if (r == 0 && si.si_pid == c->pid)
		c->exited = true;
	else if (r < 0 && errno == ECHILD)
		c->exited = true; /* reaped behind our back (SIGCHLD ignored): status lost */
	return c->exited;
}

static void lchild_reap(struct lchild *c)
{
	int st = 0;

	if (c->pid <= 0)
		return;
	if (c->lh)
		wd_group(c->lh, '-', c->pid); /* before the reap frees the pgid for reuse */
	while (waitpid(c->pid, &st, 0) < 0) {
		if (errno != EINTR) {
			c->lost = true;
			break;
		}
	}
	c->wstatus = st;
	c->pid = 0;
	c->exited = true;
	mr_close(&c->pidfd);
}

/*
 * TERM the groups, wait up to the grace for the leaders, KILL the groups (also
 * of leaders that already exited: their children), reap. No callbacks.
 */
static void kill_and_reap(struct lchild **cs, size_t n)
{
	int64_t until = mr_now_ms() + MR_HAL_KILL_GRACE_MS;
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		if (cs[i]->pid > 0 && !lchild_check_exit(cs[i])) {
			group_kill(cs[i]->pid, SIGTERM);
			group_kill(cs[i]->pid, SIGCONT);
			any = true;
		}
	}
	while (any && mr_ms_left(until) > 0) {
		struct pollfd pfd[64];
		nfds_t np = 0;

		any = false;
		for (size_t i = 0; i < n; i++) {
			if (cs[i]->pid <= 0 || lchild_check_exit(cs[i]))
				continue;
			any = true;
			if (cs[i]->pidfd >= 0 && np < ARRAY_SIZE(pfd)) {
				pfd[np].fd = cs[i]->pidfd;
				pfd[np].events = POLLIN;
				np++;
			}
		}
		if (!any)
			break;
		(void)poll(pfd, np, MR_MIN(mr_ms_left(until), LOCAL_TICK_MS));
	}
	for (size_t i = 0; i < n; i++) {
		if (cs[i]->pid > 0) {
			group_kill(cs[i]->pid, SIGKILL);
			lchild_reap(cs[i]);
		}
		lchild_close_fds(cs[i]);
	}
}

/* Write from data; returns bytes written (0 when the pipe is full). On EPIPE
 * (the child closed its stdin) the fd is closed and *fd is -1. */
static size_t write_chunk(int *fd, const char *data, size_t len)
{
	ssize_t w;

	if (*fd < 0 || len == 0)
		return 0;
	w = mr_send_nosig(*fd, data, len, MSG_DONTWAIT);
	if (w >= 0)
		return (size_t)w;
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		mr_close(fd);
	return 0;
}

static void decode_status(int st, int *status, int *sig)
{
	*status = 0;
	*sig = 0;
	if (WIFEXITED(st))
		*status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		*sig = WTERMSIG(st);
}

/* --- run --- */

struct lrun {
	struct mr_hal_cmd *cmd;
	struct lchild c;
	size_t in_off;
	int64_t start, deadline, kill_at;
	bool running, timed_out, kill_sent;
	int i_in, i_out, i_err, i_pid; /* pollset indices, -1 when absent */
};

static void run_drain(struct lrun *r)
{
	char buf[LOCAL_CHUNK];

	for (int k = 0; k < LOCAL_DRAIN_READS && r->c.out_fd >= 0; k++) {
		ssize_t n = mr_read_or_close(&r->c.out_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		(void)mr_hal_append_capped(&r->cmd->out, buf, (size_t)n);
	}
	for (int k = 0; k < LOCAL_DRAIN_READS && r->c.err_fd >= 0; k++) {
		ssize_t n = mr_read_or_close(&r->c.err_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		(void)mr_hal_append_capped(&r->cmd->errout, buf, (size_t)n);
	}
}

static void run_finish(struct mr_hal *hal, struct lrun *r)
{
	struct mr_hal_cmd *cmd = r->cmd;
	char line[160];

	if (r->timed_out && !r->kill_sent)
		group_kill(r->c.pid, SIGKILL); /* the leader is gone; its children are not */
	lchild_reap(&r->c);
	run_drain(r);
	lchild_close_fds(&r->c);
	r->running = false;
	cmd->elapsed_ms = mr_now_ms() - r->start;
	if (r->timed_out) {
		cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_TIMEOUT,
					 "command '%s' on '%s' timed out after %d ms",
					 mr_hal_argv_summary(cmd->argv, line, sizeof(line)),
					 mr_hal_host_name(cmd->host), mr_hal_cmd_timeout_ms(hal, cmd));
		return;
	}
	if (r->c.lost) {
		cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOEXIT,
					 "command '%s' on '%s': no exit status received (reaped elsewhere)",
					 mr_hal_argv_summary(cmd->argv, line, sizeof(line)),
					 mr_hal_host_name(cmd->host));
		return;
	}
	decode_status(r->c.wstatus, &cmd->status, &cmd->signal);
}

/* Start commands from runs[*next] while the parallelism allows. */
static void run_start_more(struct mr_hal *hal, struct lrun *runs, size_t n, size_t *next,
			   size_t *nrunning)
{
	struct local_hal *lh = to_local_hal(hal);

	while (*next < n && *nrunning < (size_t)hal->opts.max_parallel) {
		struct lrun *r = &runs[(*next)++];
		struct mr_hal_cmd *cmd = r->cmd;

		if (cmd->hal_rc < 0)
			continue;
		r->start = mr_now_ms();
		r->deadline = r->start + mr_hal_cmd_timeout_ms(hal, cmd);
		cmd->hal_rc = start_child(lh, cmd->host, cmd->argv, NULL, NULL,
					  cmd->stdin_len > 0, &r->c, &cmd->err);
		if (cmd->hal_rc < 0) {
			cmd->elapsed_ms = mr_now_ms() - r->start;
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		r->running = true;
		(*nrunning)++;
	}
}

/* Put every running command's fds into ps; returns the next timer (or -1). */
static int64_t run_pollfds(struct lrun *runs, size_t next, struct mr_pollset *ps)
{
	int64_t wake = -1;

	mr_pollset_reset(ps);
	for (size_t i = 0; i < next; i++) {
		struct lrun *r = &runs[i];
		int64_t t;

		r->i_in = r->i_out = r->i_err = r->i_pid = -1;
		if (!r->running)
			continue;
		if (r->c.in_fd >= 0)
			r->i_in = mr_pollset_add(ps, r->c.in_fd, POLLOUT);
		if (r->c.out_fd >= 0)
			r->i_out = mr_pollset_add(ps, r->c.out_fd, POLLIN);
		if (r->c.err_fd >= 0)
			r->i_err = mr_pollset_add(ps, r->c.err_fd, POLLIN);
		if (r->c.pidfd >= 0)
			r->i_pid = mr_pollset_add(ps, r->c.pidfd, POLLIN);
		/* next timer: the deadline, then the KILL after the grace;
		 * afterwards only the exit (pidfd, or the tick) */
		t = !r->timed_out ? r->deadline : !r->kill_sent ? r->kill_at : -1;
		if (r->c.pidfd < 0) {
			int64_t tick = mr_now_ms() + LOCAL_TICK_MS;
			t = (t < 0 || tick < t) ? tick : t;
		}
		if (t >= 0 && (wake < 0 || t < wake))
			wake = t;
	}
	return wake;
}

/* One running command after poll: stdin, output, timers, exit. True when it ended. */
static bool run_service(struct mr_hal *hal, struct lrun *r, const struct mr_pollset *ps,
			int64_t now, char *buf, size_t bufsz)
{
	struct mr_hal_cmd *cmd = r->cmd;

	if (r->i_in >= 0 && ps->fds[r->i_in].revents) {
		const char *d = cmd->stdin_data;

		r->in_off += write_chunk(&r->c.in_fd, d + r->in_off, cmd->stdin_len - r->in_off);
		if (r->in_off >= cmd->stdin_len)
			mr_close(&r->c.in_fd);
	}
	if (r->i_out >= 0 && ps->fds[r->i_out].revents) {
		ssize_t got = mr_read_or_close(&r->c.out_fd, buf, bufsz);
		if (got > 0)
			(void)mr_hal_append_capped(&cmd->out, buf, (size_t)got);
	}
	if (r->i_err >= 0 && ps->fds[r->i_err].revents) {
		ssize_t got = mr_read_or_close(&r->c.err_fd, buf, bufsz);
		if (got > 0)
			(void)mr_hal_append_capped(&cmd->errout, buf, (size_t)got);
	}
	if (!r->timed_out && now >= r->deadline) {
		r->timed_out = true;
		r->kill_at = now + MR_HAL_KILL_GRACE_MS;
		group_kill(r->c.pid, SIGTERM);
		group_kill(r->c.pid, SIGCONT);
	} else if (r->timed_out && !r->kill_sent && now >= r->kill_at) {
		r->kill_sent = true;
		group_kill(r->c.pid, SIGKILL);
	}
	if (!lchild_check_exit(&r->c))
		return false;
	run_finish(hal, r);
	mr_hal_cmd_done(hal, cmd);
	return true;
}

static int local_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n,
		     struct meshrun_err *err)
{
	struct mr_pollset ps = MR_POLLSET_INIT;
	struct lrun *runs = calloc(n, sizeof(*runs));
	size_t next = 0, nrunning = 0;
	char buf[LOCAL_CHUNK];
	int rc = 0;

	if (!runs)
		return mr_err_set(err, MESHRUN_E_NOMEM, "run %zu commands: out of memory", n);
	for (size_t i = 0; i < n; i++) {
		runs[i].cmd = &cmds[i];
		lchild_init(&runs[i].c);
	}

	for (;;) {
		int64_t now, wake;

		run_start_more(hal, runs, n, &next, &nrunning);
		if (nrunning == 0 && next == n)
			break;
		wake = run_pollfds(runs, next, &ps);
		if (poll(ps.fds, ps.nr, mr_ms_left(wake)) < 0 && errno != EINTR) {
			rc = mr_err_sys(err, "poll over %zu local commands", nrunning);
			break;
		}
		now = mr_now_ms();
		for (size_t i = 0; i < next; i++)
			if (runs[i].running && run_service(hal, &runs[i], &ps, now, buf, sizeof(buf)))
				nrunning--;
	}

	if (rc < 0) {
		/* the hal broke: leave nothing running */
		for (size_t i = 0; i < next; i++) {
			if (runs[i].running) {
				struct lchild *c = &runs[i].c;

				kill_and_reap(&c, 1);
				runs[i].cmd->hal_rc = mr_err_set(&runs[i].cmd->err, rc, "%s", err ? err->msg : "poll failed");
			}
		}
	}
	mr_pollset_release(&ps);
	free(runs);
	return rc;
}

/* --- spawn --- */

static int local_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		       struct meshrun_err *err)
{
	struct local_proc *lp = calloc(1, sizeof(*lp));
	int rc;

	if (!lp)
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn '%s': out of memory", sp->argv[0]);
	lchild_init(&lp->c);
	rc = mr_proc_init(&lp->base, hal, sp);
	if (rc < 0) {
		free(lp);
		return mr_err_set(err, rc, "spawn '%s': out of memory", sp->argv[0]);
	}
	rc = start_child(to_local_hal(hal), sp->host, sp->argv, sp->env, sp->cwd, true, &lp->c, err);
	if (rc < 0) {
		mr_proc_release_common(&lp->base);
		free(lp);
		return rc;
	}
	*out = &lp->base;
	return 0;
}

static int local_proc_write(struct mr_proc *p, const void *data, size_t len,
			    struct meshrun_err *err)
{
	struct local_proc *lp = to_local_proc(p);

	if (lp->c.in_fd < 0)
		return mr_err_set(err, MESHRUN_E_PEER, "write to '%s' on '%s': its stdin is closed",
				  p->cmdline, p->host);
	if (mr_buf_append(&lp->inq, data, len) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "queue %zu bytes for '%s': out of memory",
				  len, p->cmdline);
	/* try at once: most writes fit into the socket buffer */
	mr_buf_consume(&lp->inq, write_chunk(&lp->c.in_fd, lp->inq.p, lp->inq.len));
	return 0;
}

static int local_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct local_proc *lp = to_local_proc(p);

	lp->want_close = true;
	if (lp->inq.len == 0)
		mr_close(&lp->c.in_fd);
	return 0;
}

static int local_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct local_proc *lp = to_local_proc(p);

	if (lp->c.pid <= 0)
		return mr_err_set(err, MESHRUN_E_INVAL, "signal '%s': process has exited", p->cmdline);
	if (kill(-lp->c.pid, sig) < 0 && kill(lp->c.pid, sig) < 0)
		return mr_err_sys(err, "send signal %d to '%s' (pid %d)", sig, p->cmdline, (int)lp->c.pid);
	return 0;
}

static void proc_deliver_read(struct local_proc *lp, int *fd, bool is_err, int reads)
{
	char buf[LOCAL_CHUNK];

	for (int k = 0; k < reads && *fd >= 0; k++) {
		ssize_t n = mr_read_or_close(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		if (is_err)
			mr_proc_deliver_stderr(&lp->base, buf, (size_t)n);
		else
			mr_proc_deliver_stdout(&lp->base, buf, (size_t)n);
	}
}

static void proc_finish(struct local_proc *lp)
{
	int status, sig;

	lchild_reap(&lp->c);
	proc_deliver_read(lp, &lp->c.out_fd, false, LOCAL_DRAIN_READS);
	proc_deliver_read(lp, &lp->c.err_fd, true, LOCAL_DRAIN_READS);
	lchild_close_fds(&lp->c);
	mr_buf_release(&lp->inq);
	if (lp->c.lost) {
		struct meshrun_err e = MESHRUN_ERR_INIT;

		mr_err_set(&e, MESHRUN_E_NOEXIT, "'%s' on '%s': no exit status received (reaped elsewhere)",
			   lp->base.cmdline, lp->base.host);
		mr_proc_deliver_exit(&lp->base, e.code, 0, 0, &e);
		return;
	}
	decode_status(lp->c.wstatus, &status, &sig);
	mr_proc_deliver_exit(&lp->base, 0, status, sig, NULL);
}

struct pslot {
	struct local_proc *lp;
	int i_in, i_out, i_err;
};

/* Append what a running proc waits on (s, when not NULL, gets the indices); a
 * proc without pidfd sets *need_tick. Returns 0 or -1 on ENOMEM. */
static int proc_pollfds(struct local_proc *lp, struct mr_pollset *ps, struct pslot *s,
			bool *need_tick)
{
	int i_in = -1, i_out = -1, i_err = -1;

	if (s)
		s->i_in = s->i_out = s->i_err = -1;
	if (lp->c.in_fd >= 0 && lp->inq.len && (i_in = mr_pollset_add(ps, lp->c.in_fd, POLLOUT)) < 0)
		return -1;
	if (lp->c.out_fd >= 0 && (i_out = mr_pollset_add(ps, lp->c.out_fd, POLLIN)) < 0)
		return -1;
	if (lp->c.err_fd >= 0 && (i_err = mr_pollset_add(ps, lp->c.err_fd, POLLIN)) < 0)
		return -1;
	if (lp->c.pidfd >= 0) {
		if (mr_pollset_add(ps, lp->c.pidfd, POLLIN) < 0)
			return -1;
	} else {
		*need_tick = true;
	}
	if (s) {
		s->i_in = i_in;
		s->i_out = i_out;
		s->i_err = i_err;
	}
	return 0;
}

/* hal_impl.h's poll_prepare: the fds local_poll() would wait on. */
static int local_poll_prepare(struct mr_hal *hal, struct mr_pollset *ps, int *timeout_ms)
{
	bool need_tick = false;

	for (struct mr_proc *p = hal->procs; p; p = p->next) {
		struct local_proc *lp = to_local_proc(p);

		if (p->exited || lp->c.pid <= 0)
			continue;
		if (proc_pollfds(lp, ps, NULL, &need_tick) < 0)
			return MESHRUN_E_NOMEM;
	}
	if (need_tick && (*timeout_ms < 0 || *timeout_ms > LOCAL_TICK_MS))
		*timeout_ms = LOCAL_TICK_MS;
	return 0;
}

static int local_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct mr_pollset ps = MR_POLLSET_INIT;
	struct pslot *slots = NULL;
	size_t nslots = 0, nalloc = 0, first_watch = 0;
	int64_t until = timeout_ms < 0 ? -1 : mr_now_ms() + timeout_ms;
	int rc = 0;

	for (;;) {
		bool need_tick = false, happened = false;
		int pr, wait_ms;

		mr_pollset_reset(&ps);
		nslots = 0;
		for (struct mr_proc *p = hal->procs; p; p = p->next) {
			struct local_proc *lp = to_local_proc(p);
			struct pslot *s;

			if (p->exited || lp->c.pid <= 0)
				continue;
			struct pslot *v = mr_array_grow(slots, nslots + 1, &nalloc, sizeof(*v));

			if (!v) {
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "poll: out of memory");
				goto out;
			}
			slots = v;
			s = &slots[nslots++];
			s->lp = lp;
			proc_pollfds(lp, &ps, s, &need_tick);
		}
		if (mr_hal_watch_add_pollfds(hal, &ps, &first_watch) < 0) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "poll: out of memory");
			goto out;
		}
		if (nslots == 0 && hal->nwatch == 0)
			break; /* nothing could ever happen */
		wait_ms = mr_ms_left(until);
		if (need_tick && (wait_ms < 0 || wait_ms > LOCAL_TICK_MS))
			wait_ms = LOCAL_TICK_MS;
		pr = poll(ps.fds, ps.nr, wait_ms);
		if (pr < 0) {
			if (errno == EINTR)
				break; /* a signal: return early */
			rc = mr_err_sys(err, "poll over %zu local processes", nslots);
			goto out;
		}
		happened = pr > 0;

		for (size_t i = 0; i < nslots; i++) {
			struct pslot *s = &slots[i];
			struct local_proc *lp = s->lp;

			if (s->i_in >= 0 && ps.fds[s->i_in].revents) {
				mr_buf_consume(&lp->inq, write_chunk(&lp->c.in_fd, lp->inq.p, lp->inq.len));
				if (lp->c.in_fd < 0)
					mr_buf_reset(&lp->inq); /* the child closed its stdin */
			}
			if (lp->want_close && lp->inq.len == 0)
				mr_close(&lp->c.in_fd);
			if (s->i_out >= 0 && ps.fds[s->i_out].revents)
				proc_deliver_read(lp, &lp->c.out_fd, false, 1);
			if (s->i_err >= 0 && ps.fds[s->i_err].revents)
				proc_deliver_read(lp, &lp->c.err_fd, true, 1);
			if (!lp->base.exited && lchild_check_exit(&lp->c)) {
				proc_finish(lp);
				happened = true;
			}
		}
		mr_hal_watch_dispatch(hal, &ps, first_watch);
		if (happened || mr_ms_left(until) == 0)
			break;
	}
out:
	free(slots);
	mr_pollset_release(&ps);
	return rc;
}

static void local_proc_release(struct mr_proc *p)
{
	struct local_proc *lp = to_local_proc(p);
	struct lchild *c = &lp->c;

	kill_and_reap(&c, 1);
	mr_buf_release(&lp->inq);
	mr_proc_release_common(p);
	free(lp);
}

static void local_free(struct mr_hal *hal)
{
	struct local_hal *lh = to_local_hal(hal);
	struct lchild **cs = NULL;
	size_t n = 0;

	for (struct mr_proc *p = hal->procs; p; p = p->next)
		n++;
	cs = calloc(n ? n : 1, sizeof(*cs));
	if (cs) {
		size_t i = 0;

		for (struct mr_proc *p = hal->procs; p; p = p->next)
			cs[i++] = &to_local_proc(p)->c;
		kill_and_reap(cs, n);
		free(cs);
	}
	while (hal->procs)
		local_proc_release(hal->procs); /* one by one if cs could not be allocated */
	wd_stop(lh);
	mr_hal_release_common(hal);
	free(lh);
}

/* MR_HAL_WATCHDOG_MARK in dir: "HOST PID" of our watchdog (best effort: without it
 * the directory is only not swept should the watchdog die with us). */
static void write_mark(struct local_hal *lh, const char *dir)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct utsname u;
	char path[PATH_MAX], line[sizeof(u.nodename) + 32];
	int n;

	if (uname(&u) < 0 || snprintf(path, sizeof(path), "%s/" MR_HAL_WATCHDOG_MARK, dir) >= (int)sizeof(path))
		return;
	n = snprintf(line, sizeof(line), "%s %ld\n", u.nodename, (long)lh->wd_pid);
	if (n > 0 && (size_t)n < sizeof(line))
		(void)mr_write_file(path, line, (size_t)n, 0644, &e);
}

static int local_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir,
				struct meshrun_err *err)
{
	struct local_hal *lh = to_local_hal(hal);

	/* written before we return: the watchdog has it before anything we start next */
	if (wd_start(lh) < 0 || wd_line(lh, dir[0] == '/' ? 'A' : 'T', dir) < 0)
		return mr_err_set(err, MESHRUN_E_SYS, "remove '%s' at exit on '%s': the watchdog could not be started or has gone",
				  dir, mr_hal_host_name(host));
	/* the mark a "D" line would have the watchdog write, written here: no
	 * `uname` exec per job, and there before we return */
	if (dir[0] == '/')
		write_mark(lh, dir);
	return 0;
}

static const struct mr_hal_ops local_ops = {
	.name = "local",
	.kind = MR_HAL_LOCAL,
	.run = local_run,
	.connect = NULL,
	.spawn = local_spawn,
	.proc_write = local_proc_write,
	.proc_close_stdin = local_proc_close_stdin,
	.proc_signal = local_proc_signal,
	.poll = local_poll,
	.poll_prepare = local_poll_prepare,
	.proc_release = local_proc_release,
	.free = local_free,
	.remove_at_exit = local_remove_at_exit,
};

int mr_hal_new_local(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	struct local_hal *lh = calloc(1, sizeof(*lh));
	int rc;

	*out = NULL;
	if (!lh)
		return mr_err_set(err, MESHRUN_E_NOMEM, "local hal: out of memory");
	lh->wd_fd = -1;
	rc = mr_hal_init(&lh->base, &local_ops, opts);
	if (rc < 0) {
		free(lh);
		return mr_err_set(err, rc, "local hal: out of memory");
	}
	*out = &lh->base;
	return 0;
}
