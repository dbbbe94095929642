/*
 * ssh.c - the hal's ssh backend over libssh2 (1.10 and later): the ops and the
 * one poll loop that drives every connection (ssh_conn.c) and channel
 * (ssh_chan.c); ssh_impl.h maps the files.
 *
 *  - TCP_QUICKACK before every poll where the kernel has it (sshd's Nagle
 *    would add ~40 ms per round).
 *
 * Remote command lines (built in sh.c, see sh.h: the login shell of the remote
 * user, zsh on a Mac, only gets `exec /bin/sh -c '...'`); a spawn runs
 *     echo MESHRUN-PGID=$$; [cd 'CWD' && ]exec [env 'K=V'...] 'ARGV0' 'ARGV1'...
 * sshd starts each command with setsid(), so $$ is the process group of the
 * whole command tree; the marker line is stripped from stdout. mr_proc_signal()
 * and run timeouts kill that group with `kill -SIG -PGID` over another channel.
 * Spawned processes are also registered ("+PGID"/"-PGID" lines) with a watchdog
 * channel per host (mr_hal_watchdog_script, a shell loop reading its stdin);
 * when the connection drops, sshd closes the watchdog's stdin and it kills every
 * registered group (TERM, then KILL a second later) and removes the directories
 * given to mr_hal_remove_at_exit(), so no rank or job directory outlives its
 * launcher.
 */
#include "common/compat.h"
#include "hal/libssh2/ssh_impl.h"
#include "common/err.h"
#include "common/log.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/timeutil.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

/* Step a connection and its jobs until nothing moves without waiting. */
static void conn_step(struct conn *c)
{
	bool progress;

	mr_ssh_conn_advance(c);
	if (c->state == C_FAILED) {
		if (c->head || c->s || c->fd >= 0)
			mr_ssh_conn_fail(c);
		return;
	}
	if (c->state != C_READY)
		return;
	mr_ssh_spares_top_up(c);
	do {
		progress = false;
		for (struct job *j = c->head, *next; j; j = next) {
			unsigned unlinks = c->unlinks;

			next = j->next;
			if (mr_ssh_job_step(j))
				progress = true;
			if (c->broken)
				break;
			if (c->unlinks != unlinks) { /* next may be gone: walk again */
				progress = true;
				break;
			}
		}
		if (c->broken) {
			if (c->stale) {
				/* reconnect and keep the (unstarted) jobs */
				for (struct job *j = c->head; j; j = j->next) {
					j->ch = NULL;
					j->st = S_WAIT;
					j->ready = false;
				}
				mr_ssh_conn_teardown(c, false);
				mr_err_clear(&c->err);
				c->broken = c->stale = false;
				c->retried = true;
				c->state = C_NEW;
				conn_step(c);
				return;
			}
			mr_ssh_conn_fail(c);
			return;
		}
	} while (progress);
}

static void step_all(struct ssh_hal *sh)
{
	for (struct conn *c = sh->conns; c; c = c->next)
		conn_step(c);
}

static int64_t next_deadline(const struct ssh_hal *sh)
{
	int64_t d = -1;

	for (const struct conn *c = sh->conns; c; c = c->next) {
		int64_t w = mr_ssh_spare_wait_end(c);

		if (c->state >= C_TCP && c->state <= C_AUTH && (d < 0 || c->deadline_ms < d))
			d = c->deadline_ms;
		for (const struct job *j = c->head; j; j = j->next)
			if ((j->kind == J_RUN || j->kind == J_KILL) && !j->base.end.done && j->base.deadline_ms &&
			    (d < 0 || j->base.deadline_ms < d))
				d = j->base.deadline_ms;
		if (w >= 0 && (d < 0 || w < d))
			d = w;
	}
	return d;
}

static bool conn_wants_input(const struct conn *c)
{
	if (c->state == C_HANDSHAKE || c->state == C_AUTH)
		return true;
	for (const struct job *j = c->head; j; j = j->next) {
		if (j->st == S_WAIT)
			continue;
		if (j->st != S_IO || !mr_ssh_job_throttled(j, false) || !mr_ssh_job_throttled(j, true))
			return true;
	}
	return false;
}

/*
 * Append the socket of every connection that waits on something, in the
 * directions it waits. With mark, note each one's index so that pump() can hand
 * the results back (c->revents -1 means "polled, results pending").
 */
static int add_conn_pollfds(struct ssh_hal *sh, struct mr_pollset *ps, bool mark)
{
	for (struct conn *c = sh->conns; c; c = c->next) {
		short ev = 0;

		if (mark)
			c->revents = 0;
		if (c->fd < 0)
			continue;
		if (c->state == C_TCP) {
			ev = POLLOUT;
		} else if (c->state >= C_HANDSHAKE && c->state <= C_READY && (c->state < C_READY || c->head)) {
			if (conn_wants_input(c))
				ev |= POLLIN;
			if (libssh2_session_block_directions(c->s) & LIBSSH2_SESSION_BLOCK_OUTBOUND)
				ev |= POLLOUT;
		}
		if (ev && c->state >= C_HANDSHAKE && !c->via && !c->proxy_pid)
			(void)mr_tcp_quickack(c->fd); /* cleared by the kernel after each ACK: set it every time */
		if (ev && mr_pollset_add(ps, c->fd, ev) < 0)
			return MESHRUN_E_NOMEM;
		if (ev && mark) {
			c->pidx = ps->nr - 1;
			c->revents = -1;
		}
		/* Tunnels to hosts behind this one: their socketpair ends (stepped after every poll). */
		for (struct job *j = c->head; j; j = j->next) {
			short tev = 0;

			if (j->kind != J_TUNNEL || j->tun_fd < 0 || j->st != S_IO)
				continue;
			if (!j->base.in_closed && j->base.in.len < READ_CHUNK * 8)
				tev |= POLLIN;
			if (j->base.pout.len)
				tev |= POLLOUT;
			if (tev && mr_pollset_add(ps, j->tun_fd, tev) < 0)
				return MESHRUN_E_NOMEM;
		}
	}
	return 0;
}

/* Lower *timeout_ms (-1: none) to the next connect or run deadline. */
static void clamp_to_deadline(const struct ssh_hal *sh, int *timeout_ms)
{
	int64_t d = next_deadline(sh), now;

	if (d < 0)
		return;
	now = mr_now_ms();
	if (*timeout_ms < 0 || d - now < *timeout_ms)
		*timeout_ms = d <= now ? 0 : (int)MR_MIN(d - now, (int64_t)INT32_MAX);
}

/*
 * One round: step, wait up to timeout_ms (-1: until something happens) for the
 * sockets (and the watched fds), step again. stop() ends the round before the
 * wait when the caller has what it waits for.
 */
static int pump(struct ssh_hal *sh, int timeout_ms, bool watch, bool (*stop)(struct ssh_hal *, void *),
		void *arg)
{
	size_t first_watch = 0;
	int n;

	step_all(sh);
	if (stop && stop(sh, arg))
		return 0;
	mr_pollset_reset(&sh->ps);
	if (add_conn_pollfds(sh, &sh->ps, true) < 0)
		return MESHRUN_E_NOMEM;
	if (watch && mr_hal_watch_add_pollfds(&sh->base, &sh->ps, &first_watch) < 0)
		return MESHRUN_E_NOMEM;
	clamp_to_deadline(sh, &timeout_ms);
	if (sh->ps.nr == 0 && timeout_ms < 0)
		return 0; /* nothing could ever happen */
	n = poll(sh->ps.fds, sh->ps.nr, timeout_ms);
	if (n < 0 && errno != EINTR)
		return MESHRUN_E_SYS;
	for (struct conn *c = sh->conns; c; c = c->next)
		if (c->revents == -1)
			c->revents = n > 0 ? sh->ps.fds[c->pidx].revents : 0;
	step_all(sh);
	if (watch && n > 0)
		mr_hal_watch_dispatch(&sh->base, &sh->ps, first_watch);
	return 0;
}

/*
 * Ensure the host's watchdog exists (first spawn or remove_at_exit there);
 * tmp_name goes into its command line (see ssh_remove_at_exit). At the head of
 * the connection's jobs, its channel is opened, and its command sent, before
 * those of any job linked later.
 */
static void ensure_watchdog(struct conn *c, const char *tmp_name)
{
	struct mr_buf line = MR_BUF_INIT;
	struct job *w = NULL;

	if (c->watchdog)
		return;
	if (mr_hal_watchdog_cmdline(&line, tmp_name) == 0)
		w = mr_ssh_job_new(J_WATCHDOG, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (!w)
		return; /* best effort: the proc still runs, only the drop guard is missing */
	mr_ssh_job_link(c, w, true);
	c->watchdog = w;
}

static bool runs_done(struct ssh_hal *sh, void *arg)
{
	struct mr_hal_cmd *cmds = arg;

	(void)sh;
	(void)cmds;
	for (struct conn *c = sh->conns; c; c = c->next)
		for (struct job *j = c->head; j; j = j->next)
			if (j->kind == J_RUN && j->base.cmd)
				return false;
	return true;
}

/* `ssh -G` for every host not resolved yet, in parallel (cmds or names). */
static void prefetch(struct ssh_hal *sh, const struct mr_hal_cmd *cmds, const char *const *hosts, size_t n)
{
	const char **names;
	size_t k = 0;

	if (!mr_ssh_config_resolver(sh->cfg) || n < 2)
		return;
	names = calloc(n, sizeof(*names));
	if (!names)
		return; /* the lookups resolve one by one */
	for (size_t i = 0; i < n; i++) {
		const char *h = mr_hal_host_name(cmds ? cmds[i].host : hosts[i]);

		if (!mr_ssh_conn_find(sh, h))
			names[k++] = h;
	}
	mr_ssh_config_prefetch(sh->cfg, names, k);
	free(names);
}

static int ssh_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	struct mr_buf line = MR_BUF_INIT;
	int rc = 0;

	prefetch(sh, cmds, NULL, n);
	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *cmd = &cmds[i];
		const char *host = mr_hal_host_name(cmd->host);
		struct conn *c = NULL;
		struct job *j;

		if (cmd->hal_rc < 0)
			continue;
		if (mr_ssh_conn_get(sh, host, &c, &cmd->err) < 0) {
			cmd->hal_rc = cmd->err.code;
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		mr_buf_reset(&line);
		if (mr_hal_spawn_cmdline(&line, cmd->argv, NULL, NULL) < 0 ||
		    !(j = mr_ssh_job_new(J_RUN, mr_buf_cstr(&line)))) {
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			continue;
		}
		j->base.cmd = cmd;
		j->run_hal = hal;
		j->base.mark.want = true;
		j->base.deadline_ms = j->base.start_ms + mr_hal_cmd_timeout_ms(hal, cmd);
		if (cmd->stdin_len && mr_buf_append(&j->base.in, cmd->stdin_data, cmd->stdin_len) < 0) {
			mr_ssh_job_free(j);
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			continue;
		}
		j->base.in_closed = true;
		mr_ssh_conn_prepare(c);
		mr_ssh_job_link(c, j, false);
	}
	mr_buf_release(&line);
	while (!runs_done(sh, cmds)) {
		rc = pump(sh, -1, false, runs_done, cmds);
		if (rc < 0) {
			mr_err_sys(err, "ssh hal: poll");
			break;
		}
	}
	if (rc < 0) { /* give every unfinished command a result */
		for (struct conn *c = sh->conns; c; c = c->next)
			for (struct job *j = c->head; j; j = j->next)
				if (j->base.cmd)
					mr_ssh_job_fail(j, rc, "'%s': %s", c->cfg.dest, err ? err->msg : "poll failed");
	}
	return rc;
}

static bool conns_settled(struct ssh_hal *sh, void *arg)
{
	(void)arg;
	for (struct conn *c = sh->conns; c; c = c->next)
		if (c->wanted && c->state != C_READY && c->state != C_FAILED)
			return false;
	return true;
}

static int ssh_connect(struct mr_hal *hal, const char *const *hosts, size_t n,
		       struct meshrun_err *errs)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	int failed = 0;

	prefetch(sh, NULL, hosts, n);
	for (size_t i = 0; i < n; i++) {
		struct conn *c = NULL;

		if (mr_ssh_conn_get(sh, mr_hal_host_name(hosts[i]), &c, &errs[i]) < 0)
			continue;
		mr_ssh_conn_prepare(c);
		c->wanted = true;
	}
	while (!conns_settled(sh, NULL))
		if (pump(sh, -1, false, conns_settled, NULL) < 0)
			break;
	for (size_t i = 0; i < n; i++) {
		struct conn *c = errs[i].code ? NULL : mr_ssh_conn_find(sh, mr_hal_host_name(hosts[i]));

		if (c && c->state != C_READY) {
			if (c->err.code)
				errs[i] = c->err;
			else
				mr_err_set(&errs[i], MESHRUN_E_CONNECT, "ssh to '%s': not connected",
					   c->cfg.dest);
		}
		if (errs[i].code)
			failed++;
	}
	for (struct conn *c = sh->conns; c; c = c->next)
		c->wanted = false;
	return failed;
}

static int ssh_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		     struct meshrun_err *err)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	const char *host = mr_hal_host_name(sp->host);
	struct mr_buf line = MR_BUF_INIT;
	struct ssh_proc *p = NULL;
	struct conn *c = NULL;
	struct job *j = NULL;
	int rc;

	rc = mr_hal_check_env(host, sp->env, err);
	if (rc < 0)
		return rc;
	rc = mr_ssh_conn_get(sh, host, &c, err);
	if (rc < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p || mr_hal_spawn_cmdline(&line, sp->argv, sp->env, sp->cwd) < 0 ||
	    !(j = mr_ssh_job_new(J_PROC, mr_buf_cstr(&line))))
		goto nomem;
	if (mr_proc_init(&p->base, hal, sp) < 0)
		goto nomem;
	mr_buf_release(&line);
	j->base.mark.want = true;
	j->proc = p;
	p->job = j;
	mr_ssh_conn_prepare(c);
	ensure_watchdog(c, NULL);
	mr_ssh_job_link(c, j, false);
	*out = &p->base;
	return 0;
nomem:
	mr_buf_release(&line);
	if (j)
		mr_ssh_job_free(j);
	free(p);
	return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
}

static int ssh_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;

	if (j->base.end.done || !j->conn)
		return 0; /* it is gone; its exit is on the way */
	return mr_hal_job_queue_input(&j->base, p, data, len, err);
}

static int ssh_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;

	(void)err;
	j->base.in_closed = true;
	return 0;
}

static int ssh_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;
	int rc = mr_hal_job_signal(&j->base, p, sig, j->base.end.done || !j->conn, j->st >= S_IO, err);

	if (rc <= 0)
		return rc;
	if (!mr_ssh_queue_kill(j->conn, j->base.pgid, sig))
		return mr_err_set(err, MESHRUN_E_NOMEM, "signal '%s' on '%s': out of memory",
				  p->cmdline, p->host);
	return 0;
}

static bool any_proc_pending(struct ssh_hal *sh)
{
	for (struct mr_proc *p = sh->base.procs; p; p = p->next) {
		struct job *j = to_ssh_proc(p)->job;

		if (p->exited || p->release_pending)
			continue;
		if (mr_hal_job_has_news(&j->base))
			return true;
	}
	return false;
}

static int running_procs(struct ssh_hal *sh)
{
	int n = 0;

	for (struct mr_proc *p = sh->base.procs; p; p = p->next)
		if (!p->exited)
			n++;
	return n;
}

static void backlog(struct mr_proc *p, struct mr_proc_backlog *b)
{
	mr_hal_job_backlog(&to_ssh_proc(p)->job->base, b);
}

static void deliver(struct ssh_hal *sh)
{
	mr_hal_deliver_backlogs(&sh->base, backlog);
}

static int ssh_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	int rc;

	if (any_proc_pending(sh))
		timeout_ms = 0;
	else if (!running_procs(sh) && !hal->nwatch)
		timeout_ms = 0;
	rc = pump(sh, timeout_ms, true, NULL, NULL);
	if (rc < 0)
		return mr_err_sys(err, "ssh hal: poll");
	deliver(sh);
	return 0;
}

/* hal_impl.h's poll_prepare: step (no events delivered), then say what to wait on. */
static int ssh_poll_prepare(struct mr_hal *hal, struct mr_pollset *ps, int *timeout_ms)
{
	struct ssh_hal *sh = to_ssh_hal(hal);

	step_all(sh);
	if (any_proc_pending(sh))
		*timeout_ms = 0;
	clamp_to_deadline(sh, timeout_ms);
	return add_conn_pollfds(sh, ps, false);
}

static bool job_is_done(struct ssh_hal *sh, void *arg)
{
	(void)sh;
	return ((struct job *)arg)->base.end.done;
}

/* Signal a proc's process group; before its pgid is known, once it is. */
static void job_kill(struct job *j, int sig)
{
	if (j->base.pgid)
		mr_ssh_queue_kill(j->conn, j->base.pgid, sig);
	else
		j->base.pending_sig = sig;
}

/* TERM, grace, KILL, grace: wait (no callbacks) until j has an exit or time is up. */
static void kill_and_wait(struct ssh_hal *sh, struct job *j)
{
	static const int sigs[] = { SIGTERM, SIGKILL };

	for (size_t k = 0; k < ARRAY_SIZE(sigs) && !j->base.end.done && j->conn; k++) {
		int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;

		job_kill(j, sigs[k]);
		while (!j->base.end.done && j->conn && mr_now_ms() < end)
			if (pump(sh, mr_ms_left(end), false, job_is_done, j) < 0)
				break;
	}
}

static void proc_forget(struct ssh_proc *p)
{
	struct job *j = p->job;

	mr_proc_release_common(&p->base);
	if (j) {
		j->proc = NULL;
		if (!j->conn)
			mr_ssh_job_free(j);
		else if (j->st == S_WAIT) /* never started: nothing to wait for */
			mr_ssh_job_unlink(j);
	}
	free(p);
}

static void ssh_proc_release(struct mr_proc *mp)
{
	struct ssh_proc *p = to_ssh_proc(mp);
	struct ssh_hal *sh = to_ssh_hal(mp->hal);

	if (!p->job->base.end.done)
		kill_and_wait(sh, p->job);
	proc_forget(p);
}

static bool procs_done(struct ssh_hal *sh, void *arg)
{
	(void)arg;
	for (struct mr_proc *p = sh->base.procs; p; p = p->next) {
		struct job *j = to_ssh_proc(p)->job;

		if (!j->base.end.done && j->conn)
			return false;
	}
	return true;
}

static void ssh_free(struct mr_hal *hal)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	static const int sigs[] = { SIGTERM, SIGKILL };

	/* Every running proc: TERM, one grace period for all, then KILL. */
	for (size_t k = 0; k < ARRAY_SIZE(sigs) && !procs_done(sh, NULL); k++) {
		int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;

		for (struct mr_proc *p = hal->procs; p; p = p->next) {
			struct job *j = to_ssh_proc(p)->job;

			if (j->base.end.done || !j->conn)
				continue;
			job_kill(j, sigs[k]);
		}
		while (!procs_done(sh, NULL) && mr_now_ms() < end)
			if (pump(sh, mr_ms_left(end), false, procs_done, NULL) < 0)
				break;
	}
	while (hal->procs)
		proc_forget(to_ssh_proc(hal->procs));
	/* Hosts behind a jump host before it: their tunnels end with them. */
	while (sh->conns) {
		struct conn **pc = &sh->conns, *c;

		for (; *pc; pc = &(*pc)->next) {
			bool used = false;

			for (struct conn *o = sh->conns; o && !used; o = o->next)
				used = o->via == *pc;
			if (!used)
				break;
		}
		if (!*pc) /* cannot happen (jumps form no loop); free in list order */
			pc = &sh->conns;
		c = *pc;
		*pc = c->next;
		for (struct conn *o = sh->conns; o; o = o->next)
			if (o->via == c)
				o->via = NULL;
		mr_ssh_conn_free(c);
	}
	mr_pollset_release(&sh->ps);
	if (!sh->cfg_borrowed)
		mr_ssh_config_free(sh->cfg);
	mr_hal_release_common(hal);
	libssh2_exit();
	free(sh);
}

static int ssh_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir,
			      struct meshrun_err *err)
{
	struct conn *c = NULL;
	int rc;

	host = mr_hal_host_name(host);
	/* from a run's on_done (hal.h): a line for the watchdog there, nothing new */
	if (hal->run) {
		c = mr_ssh_conn_find(to_ssh_hal(hal), host);
		if (!c || !c->watchdog || c->watchdog->base.in_closed)
			return mr_err_set(err, MESHRUN_E_CONNECT, "remove '%s' at exit on '%s': no watchdog there yet",
					  dir, host);
		goto queue;
	}
	rc = mr_ssh_conn_get(to_ssh_hal(hal), host, &c, err);
	if (rc < 0)
		return rc;
	mr_ssh_conn_prepare(c);
	/* A name for a directory not made yet: with a new watchdog, in its command
	 * line, which sshd has before the command that makes the directory; a line
	 * on its stdin could arrive after that command ran. */
	if (!c->watchdog && dir[0] != '/') {
		ensure_watchdog(c, dir);
		if (!c->watchdog)
			return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
		return 0;
	}
	ensure_watchdog(c, NULL);
queue:
	if (!c->watchdog || mr_buf_printf(&c->watchdog->base.in, "%c%s\n", dir[0] == '/' ? 'D' : 'M', dir) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	return 0;
}

/* The watchdog removes it now (an "R" line); no watchdog there: nothing to do. */
static int ssh_remove_now(struct mr_hal *hal, const char *host, const char *dir)
{
	struct conn *c = mr_ssh_conn_find(to_ssh_hal(hal), mr_hal_host_name(host));

	if (!c || !c->watchdog || c->watchdog->base.in_closed)
		return 0;
	return mr_buf_printf(&c->watchdog->base.in, "R%s\n", dir) < 0 ? MESHRUN_E_NOMEM : 0;
}

static const struct mr_hal_ops ssh_ops = {
	.name = "ssh",
	.kind = MR_HAL_SSH,
	.run = ssh_run,
	.connect = ssh_connect,
	.spawn = ssh_spawn,
	.proc_write = ssh_proc_write,
	.proc_close_stdin = ssh_proc_close_stdin,
	.proc_signal = ssh_proc_signal,
	.poll = ssh_poll,
	.poll_prepare = ssh_poll_prepare,
	.proc_release = ssh_proc_release,
	.free = ssh_free,
	.remove_at_exit = ssh_remove_at_exit,
	.makes_dirs = mr_hal_yes,
	.remove_now = ssh_remove_now,
};

int mr_hal_new_ssh_cfg(struct mr_hal **out, const struct mr_hal_opts *opts, struct mr_ssh_config *cfg,
		       struct meshrun_err *err)
{
	struct ssh_hal *sh;
	int rc;

	*out = NULL;
	if (libssh2_init(0) != 0)
		return mr_err_set(err, MESHRUN_E_BACKEND, "libssh2_init failed");
	sh = calloc(1, sizeof(*sh));
	if (!sh || mr_hal_init(&sh->base, &ssh_ops, opts) < 0) {
		free(sh);
		libssh2_exit();
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh hal: out of memory");
	}
	sh->cfg = cfg;
	sh->cfg_borrowed = cfg != NULL;
	rc = cfg ? 0 : mr_ssh_config_load(&sh->cfg, sh->base.opts.ssh_config, err);
	if (rc < 0) {
		mr_hal_release_common(&sh->base);
		free(sh);
		libssh2_exit();
		return rc;
	}
	if (sh->base.opts.ssh_spares > 0) {
		unsigned char r[16];

		if (mr_random_bytes(r, sizeof(r)) < 0) {
			sh->base.opts.ssh_spares = 0; /* no token nobody can guess: no spares */
		} else {
			memcpy(sh->spare_token, "MESHRUN-GO-", 11);
			for (size_t i = 0; i < sizeof(r); i++)
				snprintf(sh->spare_token + 11 + 2 * i, 3, "%02x", r[i]);
		}
	}
	if (mr_ssh_config_unsupported(sh->cfg) && !mr_ssh_config_fell_back(sh->cfg))
		mr_warn("ssh config: without OpenSSH's ssh to resolve hosts, these are not supported and are ignored: %s",
			mr_ssh_config_unsupported(sh->cfg));
	*out = &sh->base;
	return 0;
}

int mr_hal_new_ssh(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	return mr_hal_new_ssh_cfg(out, opts, NULL, err);
}
