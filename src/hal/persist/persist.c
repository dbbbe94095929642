/*
 * persist.c - the persist hal backend (hal_impl.h: mr_hal_new_persist): a client of
 * the per-user daemon (persist_daemon.c) that keeps authenticated libssh2
 * connections between runs, as OpenSSH's ControlPersist keeps a master.
 *
 * Every hal op becomes a frame on the daemon's unix socket (persist_proto.h);
 * the daemon runs it on its own ssh hal and sends the process's output and
 * exit back. What the caller must see at once (a spawn that cannot start, a
 * signal that cannot be named, a release that has killed) waits for the
 * daemon's REPLY; writes, stdin EOF, REMOVE (remove_at_exit) and the SPAWNs of
 * mr_hal_run's commands (sent back to back; an error in a late REPLY ends the
 * command) do not: every round trip is a wakeup of the daemon and of us. mr_hal_run's commands are
 * processes of the daemon too, whose deadline and output caps are kept here.
 *
 * This file holds the ops and the jobs they create; finding or starting the
 * daemon, sending frames and handling what comes back are persist_conn.c's
 * (persist_impl.h says what crosses).
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/persist/persist_impl.h"
#include "hal/persist/persist_proto.h"

#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>

/* ---- the hal ops --------------------------------------------------------------- */

static struct pjob *job_new(struct persist_hal *h, const char *host)
{
	struct pjob *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->id = ++h->next_id ? h->next_id : ++h->next_id;
	j->host = host;
	j->start_ms = mr_now_ms();
	j->next = h->jobs;
	h->jobs = j;
	return j;
}

/* SPAWN for job j; on a REPLY with an error the job is gone. Without wait
 * (run commands, sent back to back), the REPLY is not waited for: an error in
 * it ends the job as it arrives (persist_conn.c dispatch). */
static int send_spawn(struct persist_hal *h, struct pjob *j, const char *host, char *const *argv,
		      char *const *env, const char *cwd, bool wait, struct meshrun_err *err)
{
	struct reply w = { .id = j->id, .type = MR_PF_REPLY };
	size_t start;

	if (mr_pf_begin(&h->out, MR_PF_SPAWN, j->id, &start) < 0 || mr_pf_put_str(&h->out, host) < 0 ||
	    mr_pf_put_str(&h->out, cwd) < 0 || mr_pf_put_strv(&h->out, argv) < 0 ||
	    mr_pf_put_strv(&h->out, env) < 0 || mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	}
	if (wait)
		return mr_ps_request(h, &w, err);
	if (h->broken || mr_ps_send_all(h, &h->out) < 0) {
		if (!h->broken)
			mr_ps_set_broken(h, "cannot send to it");
		return mr_hal_err_set_why(err, h->broken_err.code, h->broken_err.sys_errno, "%s", h->broken_err.msg);
	}
	return 0;
}

static int send_simple(struct persist_hal *h, uint8_t type, uint32_t id, const void *data, size_t len,
		       bool with_data)
{
	size_t start;

	if (h->broken)
		return 0; /* the job has its error already */
	if (mr_pf_begin(&h->out, type, id, &start) < 0 || (with_data && mr_pf_put_bytes(&h->out, data, len) < 0) ||
	    mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return -1;
	}
	if (mr_ps_send_all(h, &h->out) < 0)
		mr_ps_set_broken(h, "cannot send to it");
	return 0;
}

static int send_release(struct persist_hal *h, uint32_t id, bool want_reply)
{
	struct reply w = { .id = id, .type = MR_PF_REPLY };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t start;

	if (h->broken)
		return 0;
	if (mr_pf_begin(&h->out, MR_PF_RELEASE, id, &start) < 0 || mr_pf_put_u32(&h->out, want_reply) < 0 ||
	    mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return -1;
	}
	if (!want_reply)
		return mr_ps_send_all(h, &h->out) < 0 ? (mr_ps_set_broken(h, "cannot send to it"), -1) : 0;
	return mr_ps_request(h, &w, &e);
}

static bool runs_pending(struct persist_hal *h)
{
	for (struct pjob *j = h->jobs; j; j = j->next)
		if (j->cmd)
			return true;
	return false;
}

static int persist_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(hal);
	uint32_t id;

	(void)err;
	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *cmd = &cmds[i];
		const char *host = mr_hal_host_name(cmd->host);
		struct pjob *j;
		int rc;

		if (cmd->hal_rc < 0)
			continue;
		j = job_new(h, host);
		if (!j) {
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->deadline_ms = j->start_ms + mr_hal_cmd_timeout_ms(hal, cmd);
		rc = send_spawn(h, j, host, cmd->argv, NULL, NULL, false, &cmd->err);
		if (rc < 0) {
			cmd->hal_rc = rc;
			cmd->elapsed_ms = mr_now_ms() - j->start_ms;
			mr_ps_job_unlink(h, j);
			mr_ps_job_free(j);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->cmd = cmd;
		/* a failed send breaks h, which finishes and frees j: by id from here */
		id = j->id;
		for (size_t off = 0; off < cmd->stdin_len && !h->broken; off += MR_PF_CHUNK)
			send_simple(h, MR_PF_WRITE, id, (const char *)cmd->stdin_data + off,
				    MR_MIN(cmd->stdin_len - off, (size_t)MR_PF_CHUNK), true);
		if (!h->broken)
			send_simple(h, MR_PF_CLOSE_STDIN, id, NULL, 0, false);
	}
	while (runs_pending(h)) {
		int64_t now = mr_now_ms(), next = INT64_MAX;
		struct pjob *late = NULL;

		for (struct pjob *j = h->jobs; j && !late; j = j->next) {
			if (!j->cmd)
				continue;
			if (now >= j->deadline_ms)
				late = j;
			else
				next = MR_MIN(next, j->deadline_ms);
		}
		if (late) {
			struct meshrun_err e = MESHRUN_ERR_INIT;

			/* its result first (which frees it), then the daemon kills it (its
			 * process group) and forgets it; a failed send breaks h and ends
			 * the others, so the list is walked again */
			id = late->id;
			mr_err_set(&e, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms", late->host,
				   now - late->start_ms);
			mr_ps_job_exit(h, late, e.code, 0, 0, &e);
			send_release(h, id, false);
			continue;
		}
		mr_ps_pull(h, next == INT64_MAX ? -1 : mr_ms_left(next));
	}
	return 0;
}

static int persist_connect(struct mr_hal *hal, const char *const *hosts, size_t n, struct meshrun_err *errs)
{
	struct persist_hal *h = to_persist_hal(hal);
	struct reply w = { .id = ++h->next_id, .type = MR_PF_CONNECTED, .errs = errs, .nerrs = n };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t start;
	int failed = 0;

	if (mr_pf_begin(&h->out, MR_PF_CONNECT, w.id, &start) < 0 || mr_pf_put_u32(&h->out, (uint32_t)n) < 0)
		goto nomem;
	for (size_t i = 0; i < n; i++)
		if (mr_pf_put_str(&h->out, mr_hal_host_name(hosts[i])) < 0)
			goto nomem;
	if (mr_pf_end(&h->out, start) < 0)
		goto nomem;
	if (mr_ps_request(h, &w, &e) < 0) {
		for (size_t i = 0; i < n; i++)
			mr_hal_err_set_why(&errs[i], e.code, e.sys_errno, "'%s': %s", mr_hal_host_name(hosts[i]), e.msg);
		return (int)n;
	}
	for (size_t i = 0; i < n; i++)
		failed += errs[i].code != 0;
	return failed;
nomem:
	mr_buf_reset(&h->out);
	for (size_t i = 0; i < n; i++)
		mr_err_set(&errs[i], MESHRUN_E_NOMEM, "'%s': out of memory", mr_hal_host_name(hosts[i]));
	return (int)n;
}

static int persist_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
			 struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(hal);
	struct persist_proc *p = calloc(1, sizeof(*p));
	struct pjob *j;
	int rc;

	if (!p || mr_proc_init(&p->base, hal, sp) < 0) {
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", mr_hal_host_name(sp->host));
	}
	j = job_new(h, p->base.host);
	if (!j) {
		mr_proc_release_common(&p->base);
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", mr_hal_host_name(sp->host));
	}
	j->proc = p;
	p->job = j;
	rc = send_spawn(h, j, p->base.host, sp->argv, sp->env, sp->cwd, true, err);
	if (rc < 0) {
		mr_ps_job_unlink(h, j);
		mr_ps_job_free(j);
		mr_proc_release_common(&p->base);
		free(p);
		return rc;
	}
	*out = &p->base;
	return 0;
}

static int persist_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(p->hal);
	struct pjob *j = to_persist_proc(p)->job;

	if (j->done)
		return 0;
	for (size_t off = 0; off < len; off += MR_PF_CHUNK)
		if (send_simple(h, MR_PF_WRITE, j->id, (const char *)data + off,
				MR_MIN(len - off, (size_t)MR_PF_CHUNK), true) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "write to '%s' on '%s': out of memory",
					  p->cmdline, p->host);
	return 0;
}

static int persist_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct pjob *j = to_persist_proc(p)->job;

	(void)err;
	if (!j->done)
		send_simple(to_persist_hal(p->hal), MR_PF_CLOSE_STDIN, j->id, NULL, 0, false);
	return 0;
}

static int persist_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(p->hal);
	struct pjob *j = to_persist_proc(p)->job;
	struct reply w = { .id = j->id, .type = MR_PF_REPLY };
	size_t start;

	if (j->done || h->broken)
		return 0;
	if (mr_pf_begin(&h->out, MR_PF_SIGNAL, j->id, &start) < 0 || mr_pf_put_i32(&h->out, sig) < 0 ||
	    mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return mr_err_set(err, MESHRUN_E_NOMEM, "signal '%s' on '%s': out of memory", p->cmdline, p->host);
	}
	return mr_ps_request(h, &w, err);
}

static bool any_pending(struct persist_hal *h)
{
	for (struct mr_proc *p = h->base.procs; p; p = p->next) {
		struct pjob *j = to_persist_proc(p)->job;

		if (p->exited || p->release_pending)
			continue;
		if (j->pout.len || j->perr.len || j->done)
			return true;
	}
	return false;
}

static void backlog(struct mr_proc *p, struct mr_proc_backlog *b)
{
	struct pjob *j = to_persist_proc(p)->job;

	*b = (struct mr_proc_backlog){ &j->pout, &j->perr, j->done, j->hal_rc, j->status, j->sig, &j->err };
}

static int persist_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(hal);
	bool running = false;
	size_t first = 0;
	int n;

	for (struct mr_proc *p = hal->procs; p; p = p->next)
		running |= !p->exited;
	if (any_pending(h) || (!running && !hal->nwatch))
		timeout_ms = 0;
	mr_pollset_reset(&h->ps);
	if ((!h->broken && mr_pollset_add(&h->ps, h->fd, POLLIN) < 0) ||
	    mr_hal_watch_add_pollfds(hal, &h->ps, &first) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
	n = poll(h->ps.fds, h->ps.nr, timeout_ms);
	if (n < 0 && errno != EINTR)
		return mr_err_sys(err, "persist hal: poll");
	if (!h->broken)
		mr_ps_pull(h, 0);
	if (n > 0)
		mr_hal_watch_dispatch(hal, &h->ps, first);
	mr_hal_deliver_backlogs(hal, backlog);
	return 0;
}

static int persist_poll_prepare(struct mr_hal *hal, struct mr_pollset *ps, int *timeout_ms)
{
	struct persist_hal *h = to_persist_hal(hal);

	if (any_pending(h))
		*timeout_ms = 0;
	if (!h->broken && mr_pollset_add(ps, h->fd, POLLIN) < 0)
		return MESHRUN_E_NOMEM;
	return 0;
}

static void proc_forget(struct persist_hal *h, struct persist_proc *p)
{
	mr_ps_job_unlink(h, p->job);
	mr_ps_job_free(p->job);
	mr_proc_release_common(&p->base);
	free(p);
}

static void persist_proc_release(struct mr_proc *mp)
{
	struct persist_hal *h = to_persist_hal(mp->hal);
	struct persist_proc *p = to_persist_proc(mp);

	/* the daemon kills it (TERM, grace, KILL) before it replies */
	if (!p->job->done)
		send_release(h, p->job->id, true);
	proc_forget(h, p);
}

static void persist_free(struct mr_hal *hal)
{
	struct persist_hal *h = to_persist_hal(hal);
	struct reply w = { .id = 0, .type = MR_PF_REPLY };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t start;

	/* BYE: the daemon kills our running processes together (one grace period,
	 * as ssh_free) and ends our watchdogs, then replies. With every process
	 * and command ended there is nothing to wait for: the watchdogs remove
	 * our directories after the reply either way (a round trip less). */
	if (!h->broken && mr_pf_begin(&h->out, MR_PF_BYE, 0, &start) == 0 && mr_pf_end(&h->out, start) == 0) {
		bool ended = true;

		for (struct pjob *j = h->jobs; j; j = j->next)
			ended &= j->done;
		if (!ended)
			mr_ps_request(h, &w, &e);
		else if (mr_ps_send_all(h, &h->out) < 0)
			mr_debug("persist: cannot send BYE (the daemon ends our watchdogs at our EOF too)");
	}
	while (hal->procs)
		proc_forget(h, to_persist_proc(hal->procs));
	while (h->jobs) {
		struct pjob *j = h->jobs;

		h->jobs = j->next;
		mr_ps_job_free(j);
	}
	mr_close(&h->fd);
	mr_buf_release(&h->in);
	mr_buf_release(&h->out);
	mr_pollset_release(&h->ps);
	free(h->path);
	mr_hal_release_common(hal);
	free(h);
}

/* Not waited for (one round trip per host and directory less): the daemon
 * handles frames in order, so the name is with the host's watchdog before the
 * command that makes the directory; what could fail there is out of memory. */
static int persist_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir, struct meshrun_err *err)
{
	struct persist_hal *h = to_persist_hal(hal);
	struct reply w = { .id = ++h->next_id, .type = MR_PF_REPLY };
	size_t start;

	if (h->broken)
		return mr_hal_err_set_why(err, h->broken_err.code, h->broken_err.sys_errno, "%s", h->broken_err.msg);

	host = mr_hal_host_name(host);
	if (mr_pf_begin(&h->out, MR_PF_REMOVE, w.id, &start) < 0 || mr_pf_put_str(&h->out, host) < 0 ||
	    mr_pf_put_str(&h->out, dir) < 0 || mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	}
	if (mr_ps_send_all(h, &h->out) < 0) {
		mr_ps_set_broken(h, "cannot send to it");
		return mr_hal_err_set_why(err, h->broken_err.code, h->broken_err.sys_errno, "%s", h->broken_err.msg);
	}
	return 0;
}

static const struct mr_hal_ops persist_ops = {
	.name = "persist",
	.kind = MR_HAL_PERSIST,
	.run = persist_run,
	.connect = persist_connect,
	.spawn = persist_spawn,
	.proc_write = persist_proc_write,
	.proc_close_stdin = persist_proc_close_stdin,
	.proc_signal = persist_proc_signal,
	.poll = persist_poll,
	.poll_prepare = persist_poll_prepare,
	.proc_release = persist_proc_release,
	.free = persist_free,
	.remove_at_exit = persist_remove_at_exit,
	.removes_at_free = mr_hal_yes, /* its daemon does, when we go (BYE, or our socket closing) */
	.makes_dirs = mr_hal_yes, /* its daemon's ssh backend */
};

int mr_hal_persist_resolve(struct mr_hal *hal, const char *const *hosts, size_t n, char **gaps,
			   struct meshrun_err *errs)
{
	struct persist_hal *h;
	struct reply w = { .type = MR_PF_RESOLVED, .errs = errs, .gaps = gaps, .nerrs = n };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t start;
	int rc;

	if (!hal || hal->ops != &persist_ops)
		return MESHRUN_E_INVAL;
	h = to_persist_hal(hal);
	w.id = ++h->next_id ? h->next_id : ++h->next_id;
	for (size_t i = 0; i < n; i++)
		gaps[i] = NULL;
	if (mr_pf_begin(&h->out, MR_PF_RESOLVE, w.id, &start) < 0 || mr_pf_put_u32(&h->out, (uint32_t)n) < 0) {
		mr_buf_reset(&h->out);
		return MESHRUN_E_NOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (mr_pf_put_str(&h->out, hosts[i]) < 0) {
			mr_buf_reset(&h->out);
			return MESHRUN_E_NOMEM;
		}
	if (mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return MESHRUN_E_NOMEM;
	}
	rc = mr_ps_request(h, &w, &e);
	if (rc < 0)
		for (size_t i = 0; i < n; i++)
			MR_FREE(gaps[i]);
	return rc;
}

int mr_hal_new_persist(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	char path[PATH_MAX];
	struct persist_hal *h;
	int rc;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	if (!h || mr_hal_init(&h->base, &persist_ops, opts) < 0) {
		free(h);
		return mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
	}
	h->fd = -1;
	if (h->base.opts.persist_ms <= 0)
		h->base.opts.persist_ms = 600000;
	rc = mr_hal_persist_path(&h->base.opts, path, sizeof(path), err);
	if (rc == 0 && !(h->path = strdup(path)))
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
	if (rc == 0)
		rc = mr_ps_reach_daemon(path, &h->base.opts, true, &h->fd, err);
	if (rc == 0)
		rc = mr_ps_greet(h, h->base.opts.persist_ms, err);
	if (rc < 0) {
		mr_close(&h->fd);
		mr_buf_release(&h->in);
		mr_buf_release(&h->out);
		free(h->path);
		mr_hal_release_common(&h->base);
		free(h);
		return rc;
	}
	*out = &h->base;
	return 0;
}
