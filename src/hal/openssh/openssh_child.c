/*
 * openssh_child.c - the OpenSSH backend's ssh processes (openssh_impl.h): per
 * host a control master, per command a multiplexed client, and the steps that
 * start, time, feed, read and end them. Nothing here waits on the poll set:
 * openssh.c waits and calls mr_os_step() and mr_os_service() around each wait
 * (only mr_os_hosts_close() waits, bounded, for the masters to leave). Apart from
 * openssh.c because this is the state of the processes (what an ssh's exit,
 * stderr or marker line means), that the hal's ops only queue work into.
 */
#include "common/compat.h"
#include "hal/openssh/openssh_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/spawn.h"
#include "common/strvec.h"
#include "common/timeutil.h"

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- ssh processes ----------------------------------------------------------- */

static void och_init(struct och *c)
{
	memset(c, 0, sizeof(*c));
	c->pidfd = c->in_fd = c->out_fd = c->err_fd = -1;
}

void mr_os_och_close(struct och *c)
{
	mr_close(&c->pidfd);
	mr_close(&c->in_fd);
	mr_close(&c->out_fd);
	mr_close(&c->err_fd);
}

/* Reap without waiting; true once it is reaped. */
static bool och_check(struct och *c)
{
	int st;
	pid_t r;

	if (c->reaped || c->pid <= 0)
		return true;
	do
		r = waitpid(c->pid, &st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;
	c->wstatus = r == c->pid ? st : (255 << 8); /* ECHILD: reaped elsewhere */
	c->reaped = true;
	c->reaped_ms = mr_now_ms();
	c->pid = 0;
	mr_close(&c->pidfd);
	return true;
}

/* Kill and reap at once (no grace: used after the remote side had its chance). */
void mr_os_och_kill(struct och *c)
{
	if (c->pid > 0 && !c->reaped) {
		(void)kill(c->pid, SIGKILL);
		while (waitpid(c->pid, &c->wstatus, 0) < 0 && errno == EINTR)
			;
		c->reaped = true;
		c->pid = 0;
	}
	mr_os_och_close(c);
}

/* The ssh argv up to and including HOST: the hal's options, then ours. */
static int ssh_argv(struct os_hal *oh, struct mr_strvec *v, const char *host, const char *ctl,
		    bool master)
{
	const struct mr_hal_opts *o = &oh->base.opts;
	const char *cfg = o->ssh_config ? o->ssh_config : getenv("MESHRUN_SSH_CONFIG");
	int rc = mr_strvec_push(v, oh->ssh);

	if (cfg && *cfg)
		rc |= mr_strvec_push(v, "-F") | mr_strvec_push(v, cfg);
	if (o->identity)
		rc |= mr_strvec_push(v, "-i") | mr_strvec_push(v, o->identity);
	if (o->user)
		rc |= mr_strvec_push(v, "-l") | mr_strvec_push(v, o->user);
	if (o->known_hosts)
		rc |= mr_strvec_pushf(v, "-oUserKnownHostsFile=%s", o->known_hosts);
	if (o->accept_new_hostkeys)
		rc |= mr_strvec_push(v, "-oStrictHostKeyChecking=accept-new");
	/* never prompt; no tty; the command line is ours; forwardings belong to the
	 * user's interactive sessions, not to every rank */
	rc |= mr_strvec_push(v, "-oBatchMode=yes") | mr_strvec_push(v, "-oRemoteCommand=none") |
	      mr_strvec_push(v, "-oClearAllForwardings=yes") | mr_strvec_push(v, "-oLogLevel=ERROR") |
	      mr_strvec_push(v, "-T");
	rc |= mr_strvec_pushf(v, "-oControlPath=%s", ctl);
	if (master)
		rc |= mr_strvec_push(v, "-oControlMaster=yes") | mr_strvec_push(v, "-oControlPersist=no");
	else
		rc |= mr_strvec_push(v, "-oControlMaster=no");
	rc |= mr_strvec_push(v, "--") | mr_strvec_push(v, host);
	return rc ? -1 : 0;
}

/*
 * Start one ssh: stdin a socketpair (want_stdin) or empty, stdout/stderr pipes,
 * its own process group (a Ctrl-C meant for meshrun is handled by meshrun, which
 * stops the ranks itself). Nothing is left open or running on failure.
 */
static int och_start(struct och *c, char *const *argv, bool want_stdin, const char *what,
		     struct meshrun_err *err)
{
	struct mr_spawn_opts so = { 0 };
	int fds[3];
	int rc;

	och_init(c);
	so.argv = argv;
	so.what = what;
	so.flags = MR_SPAWN_SETPGID;
	rc = mr_spawn_piped(&so, want_stdin, &c->pid, fds, err);
	if (rc < 0)
		return rc;
	c->pidfd = mr_pidfd_open(c->pid);
	c->in_fd = fds[0];
	c->out_fd = fds[1];
	c->err_fd = fds[2];
	return 0;
}

/* Write what the fd takes from b; a peer that is gone closes the fd and empties b. */
void mr_os_write_some(int *fd, struct mr_buf *b)
{
	ssize_t w;

	if (*fd < 0 || !b->len)
		return;
	w = mr_send_nosig(*fd, b->p, b->len, MSG_DONTWAIT);
	if (w > 0) {
		mr_buf_consume(b, (size_t)w);
	} else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		mr_close(fd);
		mr_buf_reset(b);
	}
}

/* ---- hosts: the control masters ---------------------------------------------- */

struct ohost *mr_os_host_find(struct os_hal *oh, const char *name)
{
	for (struct ohost *h = oh->hosts; h; h = h->next)
		if (!strcmp(h->name, name))
			return h;
	return NULL;
}

int mr_os_host_get(struct os_hal *oh, const char *name, struct ohost **out, struct meshrun_err *err)
{
	struct ohost *h = mr_os_host_find(oh, name);
	char path[512];

	if (h) {
		*out = h;
		return 0;
	}
	if (name[0] == '-')
		return mr_err_set(err, MESHRUN_E_INVAL, "host '%s': a name cannot start with '-'", name);
	/* unique per process, hal instance and host (two hals in one process must
	 * not unlink each other's sockets) */
	snprintf(path, sizeof(path), "%s/cm-%ld-%lx-%u", oh->dir, (long)getpid(),
		 (unsigned long)((uintptr_t)oh >> 4) & 0xfffffUL, ++oh->seq);
	h = calloc(1, sizeof(*h));
	if (!h || !(h->name = strdup(name)) || !(h->ctl = strdup(path))) {
		if (h)
			free(h->name);
		free(h);
		return mr_err_set(err, MESHRUN_E_NOMEM, "'%s': out of memory", name);
	}
	h->oh = oh;
	och_init(&h->m);
	h->merr.max = OS_ERR_MAX;
	h->next = oh->hosts;
	oh->hosts = h;
	*out = h;
	return 0;
}

/* Why (mr_hal_err_hint) a line of ssh's stderr gives: "ssh: connect to host
 * h port 22: Connection refused" says connect()'s strerror; "Host key for h
 * has changed" a key that is not the recorded one. */
static int ssh_said_why(const char *line)
{
	if (strstr(line, "has changed") || strstr(line, "HAS CHANGED"))
		return MR_HAL_WHY_HOSTKEY_CHANGED;
	if (strstr(line, "timed out"))
		return ETIMEDOUT;
	if (strstr(line, "refused"))
		return ECONNREFUSED;
	if (strstr(line, "No route"))
		return EHOSTUNREACH;
	if (strstr(line, "unreachable"))
		return ENETUNREACH;
	return 0;
}

/* What ssh said, as a hal error: the last non-empty line of its stderr. */
static void host_fail_from_stderr(struct ohost *h, const char *what)
{
	const char *s = mr_buf_cstr(&h->merr), *line = s, *p;
	char last[400] = "";
	int code = MESHRUN_E_CONNECT;

	for (p = s; *p; p++) {
		if (*p == '\n') {
			if (p > line) {
				size_t n = MR_MIN((size_t)(p - line), sizeof(last) - 1);

				memcpy(last, line, n);
				last[n] = '\0';
			}
			line = p + 1;
		}
	}
	if (*line)
		snprintf(last, sizeof(last), "%s", line);
	if (strstr(s, "Permission denied") || strstr(s, "Too many authentication failures"))
		code = MESHRUN_E_AUTH;
	else if (strstr(s, "Host key verification failed") || strstr(s, "IDENTIFICATION HAS CHANGED") ||
		 strstr(s, "host key is known"))
		code = MESHRUN_E_HOSTKEY;
	if (strstr(s, "Could not resolve hostname"))
		mr_hal_err_set_why(&h->err, code, MR_HAL_WHY_RESOLVE, "ssh to '%s' (OpenSSH): cannot resolve: %s",
				   h->name, last);
	else if (strstr(s, "IDENTIFICATION HAS CHANGED")) /* said lines before the last one */
		mr_hal_err_set_why(&h->err, code, MR_HAL_WHY_HOSTKEY_CHANGED,
				   "ssh to '%s' (OpenSSH): host key has changed: %s", h->name, last);
	else
		mr_hal_err_set_why(&h->err, code, ssh_said_why(last[0] ? last : what), "ssh to '%s' (OpenSSH): %s",
				   h->name, last[0] ? last : what);
	h->st = H_FAILED;
	h->oh->changes++;
}

static int count_starting(const struct os_hal *oh)
{
	int n = 0;

	for (const struct ohost *h = oh->hosts; h; h = h->next)
		n += h->st == H_STARTING;
	return n;
}

static void host_start(struct ohost *h)
{
	struct os_hal *oh = h->oh;
	char *const wd[] = { MR_SH_PATH, "-c", (char *)mr_hal_watchdog_script, "meshrun-watchdog", NULL };
	struct mr_strvec argv = MR_STRVEC_INIT;
	struct mr_buf line = MR_BUF_INIT;
	char what[300];

	mr_err_clear(&h->err);
	mr_buf_reset(&h->mout);
	mr_buf_reset(&h->merr);
	snprintf(what, sizeof(what), "the OpenSSH client for '%s'", h->name);
	(void)unlink(h->ctl); /* a stale one would turn multiplexing off */
	if (mr_hal_spawn_cmdline(&line, wd, NULL, NULL) < 0 || ssh_argv(oh, &argv, h->name, h->ctl, true) < 0 ||
	    mr_strvec_push(&argv, mr_buf_cstr(&line)) < 0) {
		mr_err_set(&h->err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", h->name);
		h->st = H_FAILED;
		oh->changes++;
	} else if (och_start(&h->m, argv.v, true, what, &h->err) < 0) {
		h->st = H_FAILED;
		oh->changes++;
	} else {
		h->st = H_STARTING;
		h->deadline = mr_now_ms() + oh->base.opts.connect_timeout_ms;
	}
	mr_strvec_release(&argv);
	mr_buf_release(&line);
}

/* Stop a master: EOF to its watchdog, `ssh -O exit` (wait bounded), reap. */
void mr_os_hosts_close(struct os_hal *oh)
{
	struct och *ex;
	size_t n = 0, i = 0;
	int64_t until = mr_now_ms() + OS_EXIT_WAIT_MS;

	for (struct ohost *h = oh->hosts; h; h = h->next)
		n += h->m.pid > 0;
	ex = calloc(n ? n : 1, sizeof(*ex));
	for (struct ohost *h = oh->hosts; h; h = h->next) {
		struct mr_strvec argv = MR_STRVEC_INIT;

		if (h->m.pid <= 0)
			continue;
		mr_close(&h->m.in_fd);
		if (!ex || h->st != H_READY)
			continue;
		if (mr_strvec_push(&argv, oh->ssh) == 0 && mr_strvec_pushf(&argv, "-oControlPath=%s", h->ctl) == 0 &&
		    mr_strvec_push(&argv, "-O") == 0 && mr_strvec_push(&argv, "exit") == 0 &&
		    mr_strvec_push(&argv, "--") == 0 && mr_strvec_push(&argv, h->name) == 0)
			if (och_start(&ex[i], argv.v, false, "ssh -O exit", NULL) == 0)
				i++;
		mr_strvec_release(&argv);
	}
	for (;;) {
		bool any = false;

		for (size_t k = 0; k < i; k++)
			any |= !och_check(&ex[k]);
		for (struct ohost *h = oh->hosts; h; h = h->next)
			any |= !och_check(&h->m);
		if (!any || mr_ms_left(until) == 0)
			break;
		poll(NULL, 0, 5);
	}
	for (size_t k = 0; k < i; k++)
		mr_os_och_kill(&ex[k]);
	free(ex);
	for (struct ohost *h = oh->hosts; h; h = h->next) {
		mr_os_och_kill(&h->m);
		(void)unlink(h->ctl);
	}
}

/* ---- jobs: one multiplexed client each --------------------------------------- */

struct ojob *mr_os_job_new(struct os_hal *oh, struct ohost *h, enum ojob_kind kind, const char *cmdline)
{
	struct ojob *j = mr_hal_job_new(struct ojob, base, cmdline);

	if (!j)
		return NULL;
	j->h = h;
	j->kind = kind;
	och_init(&j->c);
	/* at the tail: jobs start in the order they were made */
	struct ojob **pp = &oh->jobs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = j;
	return j;
}

static void job_free(struct ojob *j)
{
	mr_os_och_kill(&j->c);
	mr_hal_job_release(&j->base);
	free(j);
}

static void wd_line(struct ohost *h, char op, long pgid)
{
	if (h->m.pid > 0 && h->m.in_fd >= 0)
		(void)mr_buf_printf(&h->wdq, "%c%ld\n", op, pgid);
}

static void job_result(struct ojob *j, int hal_rc, int status, int sig, const struct meshrun_err *err)
{
	if (!mr_hal_job_end_set(&j->base.end, hal_rc, status, sig, err))
		return;
	j->h->oh->changes++;
	if (j->base.registered) {
		wd_line(j->h, '-', j->base.pgid);
		j->base.registered = false;
	}
	mr_hal_job_end_report(&j->base.end, &j->h->oh->base, &j->base.cmd, j->base.start_ms);
}

void mr_os_job_fail(struct ojob *j, const struct meshrun_err *e)
{
	job_result(j, e->code, 0, 0, e);
}

static void got_pgid(struct ojob *j, long pgid)
{
	j->base.pgid = pgid;
	if (j->kind == J_RUN && j->timed_out)
		mr_os_queue_kill(j->h, pgid, SIGKILL);
	if (j->kind != J_PROC)
		return;
	if (!j->base.end.done) {
		wd_line(j->h, '+', pgid);
		j->base.registered = true;
	}
	if (j->base.pending_sig) {
		mr_os_queue_kill(j->h, pgid, j->base.pending_sig);
		j->base.pending_sig = 0;
	}
}

static void sink(struct ojob *j, bool is_err, const char *d, size_t n)
{
	if (!n)
		return;
	if (j->kind == J_RUN && j->base.cmd)
		mr_hal_append_capped(is_err ? &j->base.cmd->errout : &j->base.cmd->out, d, n);
	else if (j->kind == J_PROC) {
		mr_buf_append(is_err ? &j->base.perr : &j->base.pout, d, n);
		j->h->oh->changes++; /* to deliver */
	}
}

static void sink_out_cb(void *ctx, const char *d, size_t n)
{
	sink(ctx, false, d, n);
}

/* stdout: find and strip the marker line (hal.c's, as ssh_chan.c). */
static void job_stdout(struct ojob *j, const char *d, size_t n)
{
	long pgid = mr_hal_marker_feed(&j->base.mark, d, n, sink_out_cb, j);

	if (pgid > 1)
		got_pgid(j, pgid);
}

struct ojob *mr_os_queue_kill(struct ohost *h, long pgid, int sig)
{
	struct mr_buf line = MR_BUF_INIT;
	const char *name = mr_sh_sig_name(sig);
	struct ojob *j = NULL;

	if (name && mr_hal_kill_cmdline(&line, name, pgid) == 0)
		j = mr_os_job_new(h->oh, h, J_KILL, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (j)
		j->base.in_closed = true;
	mr_debug("openssh: '%s': kill -%s -%ld queued", h->name, name ? name : "?", pgid);
	return j;
}

static void job_start(struct ojob *j)
{
	struct os_hal *oh = j->h->oh;
	struct mr_strvec argv = MR_STRVEC_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char what[300];

	j->started = true;
	snprintf(what, sizeof(what), "the OpenSSH client for '%s'", j->h->name);
	if (ssh_argv(oh, &argv, j->h->name, j->h->ctl, false) < 0 || mr_strvec_push(&argv, j->base.cmdline) < 0)
		mr_err_set(&e, MESHRUN_E_NOMEM, "'%s': out of memory", j->h->name);
	else
		(void)och_start(&j->c, argv.v, j->kind == J_PROC || j->base.in.len, what, &e);
	mr_debug("openssh: '%s': client %ld for %s", j->h->name, (long)j->c.pid,
		 j->kind == J_RUN ? "a command" : j->kind == J_PROC ? "a process" : "a kill");
	mr_strvec_release(&argv);
	if (e.code)
		mr_os_job_fail(j, &e);
}

/* Nothing more will happen to j: a proc's job is finished when the proc goes. */
void mr_os_job_ended(struct ojob *j)
{
	j->started = j->ended = true;
	j->h->oh->changes++;
	mr_os_och_close(&j->c);
	if (j->kind != J_PROC)
		j->finished = true;
}

/* The client is reaped and its pipes are drained: the result. */
static void job_end(struct ojob *j)
{
	int st = j->c.wstatus;
	struct meshrun_err e = MESHRUN_ERR_INIT;

	mr_debug("openssh: '%s': client ended: wait status 0x%x, pgid %ld", j->h->name, (unsigned)st, j->base.pgid);
	mr_os_och_close(&j->c);
	mr_hal_marker_flush(&j->base.mark, sink_out_cb, j); /* no marker came: all output */
	if (j->base.end.done)
		return;
	if (j->timed_out) {
		mr_err_set(&e, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms", j->h->name,
			   j->base.deadline_ms - j->base.start_ms);
		mr_os_job_fail(j, &e);
	} else if (WIFSIGNALED(st)) {
		mr_err_set(&e, MESHRUN_E_NOEXIT, "'%s': no exit status received (the OpenSSH client was killed by signal %d)",
			   j->h->name, WTERMSIG(st));
		mr_os_job_fail(j, &e);
	} else if (WEXITSTATUS(st) == 255) {
		mr_err_set(&e, MESHRUN_E_NOEXIT,
			   "'%s': no exit status received (the OpenSSH client exited 255: the command was killed by a signal, exited 255, or the connection was lost)",
			   j->h->name);
		mr_os_job_fail(j, &e);
	} else {
		job_result(j, 0, WEXITSTATUS(st), 0, NULL);
	}
}

bool mr_os_job_throttled(const struct ojob *j, bool is_err)
{
	return j->kind == J_PROC && mr_hal_job_over_cap(&j->base, is_err);
}

/* ---- stepping: what needs no waiting ----------------------------------------- */

static bool host_has_work(const struct os_hal *oh, const struct ohost *h)
{
	if (h->wanted)
		return true;
	for (const struct ojob *j = oh->jobs; j; j = j->next)
		if (j->h == h && !j->started && !j->base.end.done)
			return true;
	return false;
}

/* Everything that needs no waiting: start masters and clients, timers, ends. */
void mr_os_step(struct os_hal *oh)
{
	int64_t now = mr_now_ms();
	int starting = count_starting(oh);

	for (struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->st == H_NEW && host_has_work(oh, h) && starting < oh->base.opts.max_parallel) {
			host_start(h);
			starting += h->st == H_STARTING;
		}
		if (h->st == H_STARTING && !h->m.reaped && now >= h->deadline) {
			mr_os_och_kill(&h->m);
			mr_hal_err_set_why(&h->err, MESHRUN_E_CONNECT, ETIMEDOUT, "ssh to '%s' (OpenSSH): timed out after %d ms",
					   h->name, oh->base.opts.connect_timeout_ms);
			h->st = H_FAILED;
			oh->changes++;
		}
		if (h->st == H_STARTING && och_check(&h->m)) {
			/* read what it said before it went */
			char buf[OS_CHUNK];
			ssize_t n;

			while ((n = mr_read_or_close(&h->m.err_fd, buf, sizeof(buf))) > 0)
				mr_hal_append_capped(&h->merr, buf, (size_t)n);
			mr_os_och_close(&h->m);
			host_fail_from_stderr(h, "the client exited before the session opened");
		}
		if (h->st == H_READY && och_check(&h->m) && !h->err.code) {
			/* the master is gone: later commands must not connect on their own */
			mr_err_set(&h->err, MESHRUN_E_CONNECT, "ssh to '%s' (OpenSSH): the control master exited",
				   h->name);
			mr_os_och_close(&h->m);
			h->st = H_FAILED;
			oh->changes++;
		}
	}
	for (struct ojob *j = oh->jobs; j; j = j->next) {
		if (j->finished || j->ended)
			continue;
		if (!j->started) {
			if (j->h->st == H_READY) {
				job_start(j);
			} else if (j->h->st == H_FAILED) {
				struct meshrun_err e = j->h->err;

				mr_os_job_fail(j, &e);
				mr_os_job_ended(j);
				continue;
			}
		}
		if (j->kind == J_RUN && !j->base.end.done && !j->timed_out && j->base.deadline_ms && now >= j->base.deadline_ms) {
			j->timed_out = true;
			j->kill_at = now + MR_HAL_KILL_GRACE_MS;
			if (j->base.pgid)
				mr_os_queue_kill(j->h, j->base.pgid, SIGKILL);
			if (!j->started) {
				struct meshrun_err e = MESHRUN_ERR_INIT;

				mr_err_set(&e, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms",
					   j->h->name, j->base.deadline_ms - j->base.start_ms);
				mr_os_job_fail(j, &e);
				mr_os_job_ended(j);
				continue;
			}
		}
		if (!j->started)
			continue;
		if (j->timed_out && j->c.pid > 0 && now >= j->kill_at)
			(void)kill(j->c.pid, SIGKILL);
		if (j->c.pid <= 0 && !j->c.reaped) { /* failed to start: the result is there */
			mr_os_job_ended(j);
			continue;
		}
		if (och_check(&j->c) &&
		    ((j->c.out_fd < 0 && j->c.err_fd < 0) || now - j->c.reaped_ms >= OS_DRAIN_MS)) {
			job_end(j);
			mr_os_job_ended(j);
		}
	}
}

/* Read and write whatever is ready, without waiting (all fds are non-blocking). */
void mr_os_service(struct os_hal *oh)
{
	char buf[OS_CHUNK];
	ssize_t n;

	for (struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->m.pid <= 0)
			continue;
		mr_os_write_some(&h->m.in_fd, &h->wdq);
		while ((n = mr_read_or_close(&h->m.err_fd, buf, sizeof(buf))) > 0)
			mr_hal_append_capped(&h->merr, buf, (size_t)n);
		while ((n = mr_read_or_close(&h->m.out_fd, buf, sizeof(buf))) > 0) {
			if (h->st != H_STARTING)
				continue; /* the watchdog says nothing else */
			mr_hal_append_capped(&h->mout, buf, (size_t)n);
			if (memmem(h->mout.p, h->mout.len, MR_HAL_PGID_MARKER, strlen(MR_HAL_PGID_MARKER)) &&
			    memchr(h->mout.p, '\n', h->mout.len)) {
				h->st = H_READY;
				oh->changes++;
				mr_debug("openssh: '%s': control master %ld ready", h->name, (long)h->m.pid);
			}
		}
	}
	for (struct ojob *j = oh->jobs; j; j = j->next) {
		if (j->finished || j->ended || !j->started)
			continue;
		if (j->c.in_fd >= 0) {
			mr_os_write_some(&j->c.in_fd, &j->base.in);
			if (j->base.in_closed && !j->base.in.len)
				mr_close(&j->c.in_fd);
		}
		for (int k = 0; k < 16 && !mr_os_job_throttled(j, false) &&
				(n = mr_read_or_close(&j->c.out_fd, buf, sizeof(buf))) > 0; k++)
			job_stdout(j, buf, (size_t)n);
		for (int k = 0; k < 16 && !mr_os_job_throttled(j, true) &&
				(n = mr_read_or_close(&j->c.err_fd, buf, sizeof(buf))) > 0; k++)
			sink(j, true, buf, (size_t)n);
	}
}

/* Free the jobs nobody needs any more (finished, or a proc's that was released). */
void mr_os_reap_jobs(struct os_hal *oh)
{
	for (struct ojob **pp = &oh->jobs; *pp;) {
		struct ojob *j = *pp;

		if (j->finished && !j->proc) {
			*pp = j->next;
			job_free(j);
		} else {
			pp = &j->next;
		}
	}
}
