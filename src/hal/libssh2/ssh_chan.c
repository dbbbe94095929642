/*
 * ssh_chan.c - the ssh backend's channels (ssh_impl.h): every command is a job,
 * a channel on its host's connection, stepped through S_WAIT .. S_FREE (OpenSSH's
 * channels.c). Quirks of libssh2 this relies on:
 *
 *  - BAD_USE (-39): a call that returns EAGAIN after sending part of a packet
 *    must be repeated, and nothing else may send on that connection meanwhile.
 *    conn->owner is the job whose call is pending; while it is set, only that
 *    job touches the connection and it first repeats job->pending.
 *  - Open one channel at a time per connection (conn->opener).
 *  - Exit status: libssh2 1.10 reports 0 when none was received. A job counts
 *    as exited only after remote EOF, libssh2_channel_close() and
 *    libssh2_channel_wait_closed() == 0; then an exit signal means a signal,
 *    otherwise the status is real. A transport error before that gives
 *    MESHRUN_E_NOEXIT, never status 0.
 *  - A tunnel (J_TUNNEL, ProxyJump) is a direct-tcpip channel instead of a
 *    session: no exec, no MaxSessions slot; its "stdin" is what it reads from
 *    its socketpair end, its "stdout" goes back there.
 */
#include "common/compat.h"
#include "hal/libssh2/ssh_impl.h"
#include "common/err.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <inttypes.h>
#include <signal.h>
#include <unistd.h>

#define TUNNEL_BUF_MAX (1u << 20) /* stop reading a side whose other side lags this much */

void mr_ssh_job_free(struct job *j)
{
	if (j->kind == J_TUNNEL)
		mr_ssh_tunnel_gone(j);
	mr_hal_job_release(&j->base);
	free(j);
}

void mr_ssh_job_link(struct conn *c, struct job *j, bool at_head)
{
	j->conn = c;
	if (j->kind == J_SPARE)
		c->nspare++;
	if (at_head) {
		j->prev = NULL;
		j->next = c->head;
		if (c->head)
			c->head->prev = j;
		else
			c->tail = j;
		c->head = j;
	} else {
		j->next = NULL;
		j->prev = c->tail;
		if (c->tail)
			c->tail->next = j;
		else
			c->head = j;
		c->tail = j;
	}
}

/* Take j out of its connection; free it unless a proc still holds it. */
void mr_ssh_job_unlink(struct job *j)
{
	struct conn *c = j->conn;

	if (c) {
		c->unlinks++;
		if (j->prev)
			j->prev->next = j->next;
		else
			c->head = j->next;
		if (j->next)
			j->next->prev = j->prev;
		else
			c->tail = j->prev;
		if (c->opener == j)
			c->opener = NULL;
		if (c->owner == j)
			c->owner = NULL;
		if (c->watchdog == j)
			c->watchdog = NULL;
		if (j->kind == J_SPARE)
			c->nspare--;
		if (j->ch && j->kind != J_TUNNEL)
			c->nchan--;
		j->ch = NULL; /* freed with the session if not freed already */
		j->conn = NULL;
		j->prev = j->next = NULL;
	}
	if (!j->proc)
		mr_ssh_job_free(j);
}

struct job *mr_ssh_job_new(enum job_kind kind, const char *cmdline)
{
	struct job *j = mr_hal_job_new(struct job, base, cmdline);

	if (!j)
		return NULL;
	j->kind = kind;
	j->tun_fd = -1;
	return j;
}

static int watchdog_line(struct conn *c, char op, long pgid);

static int watchdog_line(struct conn *c, char op, long pgid)
{
	if (!c->watchdog || c->watchdog->base.in_closed)
		return 0;
	return mr_buf_printf(&c->watchdog->base.in, "%c%ld\n", op, pgid) < 0 ? MESHRUN_E_NOMEM : 0;
}

/* Record the result once (run: into its command; proc: kept for delivery). */
static void job_result(struct job *j, int hal_rc, int status, int sig, const struct meshrun_err *err)
{
	if (!mr_hal_job_end_set(&j->base.end, hal_rc, status, sig, err))
		return;
	if (j->base.registered && j->conn) {
		watchdog_line(j->conn, '-', j->base.pgid);
		j->base.registered = false;
	}
	mr_hal_job_end_report(&j->base.end, j->run_hal, &j->base.cmd, j->base.start_ms);
}

void mr_ssh_job_fail(struct job *j, int code, const char *fmt, ...)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char msg[MESHRUN_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mr_err_set(&e, code, "%s", msg);
	job_result(j, code, 0, 0, &e);
}

struct job *mr_ssh_queue_kill(struct conn *c, long pgid, int sig)
{
	struct mr_buf line = MR_BUF_INIT;
	struct job *j = NULL;

	if (mr_hal_kill_cmdline(&line, mr_sh_sig_name(sig), pgid) == 0)
		j = mr_ssh_job_new(J_KILL, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (!j)
		return NULL;
	j->base.in_closed = true;
	j->base.start_ms = mr_now_ms();
	j->base.deadline_ms = j->base.start_ms + MR_HAL_ANSWER_MS;
	mr_ssh_job_link(c, j, true); /* ahead of waiting commands: a kill must not queue behind them */
	return j;
}

/* A spare's stdout: ready once its line came (what a login shell printed
 * before it is dropped; a spare that says too much is never used). */
static void spare_out(struct job *j, const char *d, size_t n)
{
	if (j->ready || j->base.pout.len > 4096)
		return;
	mr_buf_append(&j->base.pout, d, n);
	if (strstr(mr_buf_cstr(&j->base.pout), MR_HAL_SPARE_READY "\n")) {
		j->ready = true;
		mr_buf_release(&j->base.pout);
	}
}

static void sink_out(struct job *j, const char *d, size_t n)
{
	if (j->kind == J_RUN && j->base.cmd)
		mr_hal_append_capped(&j->base.cmd->out, d, n);
	else if (j->kind == J_PROC || j->kind == J_TUNNEL)
		mr_buf_append(&j->base.pout, d, n);
	else if (j->kind == J_SPARE)
		spare_out(j, d, n);
}

static void sink_err(struct job *j, const char *d, size_t n)
{
	if (j->kind == J_RUN && j->base.cmd)
		mr_hal_append_capped(&j->base.cmd->errout, d, n);
	else if (j->kind == J_PROC)
		mr_buf_append(&j->base.perr, d, n);
}

static void got_pgid(struct job *j, long pgid)
{
	struct conn *c = j->conn;

	j->base.pgid = pgid;
	if (j->kind == J_RUN && j->base.end.done && c) /* timed out before we knew whom to kill */
		mr_ssh_queue_kill(c, pgid, SIGKILL);
	if (j->kind != J_PROC || !c)
		return;
	if (watchdog_line(c, '+', pgid) == 0 && c->watchdog)
		j->base.registered = true;
	if (j->base.pending_sig) {
		mr_ssh_queue_kill(c, pgid, j->base.pending_sig);
		j->base.pending_sig = 0;
	}
}

static void sink_out_cb(void *ctx, const char *d, size_t n)
{
	sink_out(ctx, d, n);
}

/* stdout of a command: find and strip the marker line, pass the rest on. */
static void job_stdout(struct job *j, const char *d, size_t n)
{
	long pgid = mr_hal_marker_feed(&j->base.mark, d, n, sink_out_cb, j);

	if (pgid > 1)
		got_pgid(j, pgid);
}

/* j never ran: its result is its connection's error (with the reason, for the hint). */
static void job_fail_as_conn(struct job *j, const struct conn *c)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int code = c->err.code == MESHRUN_E_NOEXIT ? MESHRUN_E_CONNECT : c->err.code;

	mr_hal_err_set_why(&e, code, c->err.sys_errno, "%s", c->err.msg);
	job_result(j, code, 0, 0, &e);
}

/* The connection is gone: every job on it gets a result and is unlinked. */
void mr_ssh_conn_fail(struct conn *c)
{
	bool was_ready = c->state == C_READY;

	for (struct job *j = c->head, *next; j; j = next) {
		next = j->next;
		j->ch = NULL;
		if (!j->base.end.done) {
			if (was_ready && j->st > S_OPEN)
				mr_ssh_job_fail(j, MESHRUN_E_NOEXIT, "%s: no exit status received", c->err.msg);
			else
				job_fail_as_conn(j, c);
		}
		mr_ssh_job_unlink(j);
	}
	c->state = C_FAILED;
	c->broken = c->stale = false;
	mr_ssh_conn_teardown(c, false);
}

void mr_ssh_conn_free(struct conn *c)
{
	for (struct job *j = c->head, *next; j; j = next) {
		next = j->next;
		j->ch = NULL;
		mr_ssh_job_unlink(j);
	}
	mr_ssh_conn_release(c);
}

/* After a call returned EAGAIN: does this job now own the outbound queue? */
static void note_eagain(struct job *j, enum job_op op)
{
	struct conn *c = j->conn;

	if (libssh2_session_block_directions(c->s) & LIBSSH2_SESSION_BLOCK_OUTBOUND) {
		c->owner = j;
		j->pending = op;
	} else if (c->owner == j) {
		c->owner = NULL;
	}
}

static void note_done(struct job *j)
{
	if (j->conn->owner == j)
		j->conn->owner = NULL;
}

/* A libssh2 error rc on this job's channel: the job or the whole connection fails. */
static void job_ssh_error(struct job *j, int rc, const char *what)
{
	struct conn *c = j->conn;

	if (mr_ssh_is_conn_error(rc)) {
		mr_ssh_conn_set_err(c, MESHRUN_E_NOEXIT, "connection lost (%s: %s)", what, mr_ssh_errmsg(c->s, rc));
		c->broken = true;
		return;
	}
	mr_ssh_job_fail(j, j->st >= S_IO ? MESHRUN_E_NOEXIT : MESHRUN_E_EXEC, "'%s': %s: %s",
		 c->cfg.dest, what, mr_ssh_errmsg(c->s, rc));
	/* The channel stays with the session (freeing it could wait on the server). */
	mr_ssh_job_unlink(j);
}

bool mr_ssh_job_throttled(const struct job *j, bool err)
{
	if (j->kind == J_TUNNEL)
		return !err && j->base.pout.len > TUNNEL_BUF_MAX;
	return j->kind == J_PROC && mr_hal_job_over_cap(&j->base, err);
}

/* A tunnel's socketpair end: what the carried connection wrote goes to the
 * channel (j->base.in), what came from the channel (j->base.pout) goes back. */
static bool tunnel_pump(struct job *j)
{
	bool progress = false;
	char buf[READ_CHUNK];

	while (j->tun_fd >= 0 && !j->base.in_closed && j->base.in.len < TUNNEL_BUF_MAX) {
		ssize_t n = read(j->tun_fd, buf, sizeof(buf));

		if (n > 0) {
			mr_buf_append(&j->base.in, buf, (size_t)n);
			progress = true;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else { /* the carried connection closed its end */
			j->base.in_closed = true;
			progress = true;
		}
	}
	while (j->tun_fd >= 0 && j->base.pout.len) {
		ssize_t n = mr_send_nosig(j->tun_fd, j->base.pout.p, j->base.pout.len, MSG_DONTWAIT);

		if (n > 0) {
			mr_buf_consume(&j->base.pout, (size_t)n);
			progress = true;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			break;
		} else {
			mr_buf_reset(&j->base.pout); /* nobody reads any more */
			j->base.in_closed = true;
			break;
		}
	}
	return progress;
}

/* Returns true on progress; may unlink (and free) j. */
static bool job_io(struct job *j, bool *gone)
{
	struct conn *c = j->conn;
	enum job_op start = c->owner == j ? j->pending : OP_WRITE;
	bool progress = false;
	char buf[READ_CHUNK];
	ssize_t n;

	if (start <= OP_WRITE && j->base.in.len) {
		size_t len = j->write_len ? j->write_len : MR_MIN(j->base.in.len, (size_t)READ_CHUNK);

		n = libssh2_channel_write(j->ch, j->base.in.p, len);
		if (n == LIBSSH2_ERROR_EAGAIN) {
			j->write_len = len;
			note_eagain(j, OP_WRITE);
			if (c->owner == j)
				return progress;
		} else if (n < 0) {
			note_done(j);
			job_ssh_error(j, (int)n, "write to stdin");
			*gone = true;
			return true;
		} else {
			note_done(j);
			j->write_len = 0;
			mr_buf_consume(&j->base.in, (size_t)n);
			progress = true;
		}
	}
	if (start <= OP_EOF && j->base.in_closed && !j->base.in.len && !j->eof_sent) {
		int rc = libssh2_channel_send_eof(j->ch);

		if (rc == LIBSSH2_ERROR_EAGAIN) {
			note_eagain(j, OP_EOF);
			if (c->owner == j)
				return progress;
		} else if (rc < 0) {
			note_done(j);
			job_ssh_error(j, rc, "send EOF");
			*gone = true;
			return true;
		} else {
			note_done(j);
			j->eof_sent = true;
			progress = true;
		}
	}
	for (int stream = (start == OP_READ_ERR); stream < 2; stream++) {
		if (mr_ssh_job_throttled(j, stream))
			continue;
		for (;;) {
			n = stream ? libssh2_channel_read_stderr(j->ch, buf, sizeof(buf))
				   : libssh2_channel_read(j->ch, buf, sizeof(buf));
			if (n > 0) {
				note_done(j);
				if (stream)
					sink_err(j, buf, (size_t)n);
				else
					job_stdout(j, buf, (size_t)n);
				progress = true;
				if (mr_ssh_job_throttled(j, stream))
					break;
				continue;
			}
			if (n == LIBSSH2_ERROR_EAGAIN) {
				note_eagain(j, stream ? OP_READ_ERR : OP_READ_OUT);
				if (c->owner == j)
					return progress;
				break;
			}
			if (n < 0) {
				note_done(j);
				job_ssh_error(j, (int)n, "read output");
				*gone = true;
				return true;
			}
			note_done(j);
			break; /* 0: nothing more on this stream now */
		}
	}
	if (libssh2_channel_eof(j->ch)) {
		mr_hal_marker_flush(&j->base.mark, sink_out_cb, j); /* no marker came: all output */
		j->st = S_CLOSE;
		progress = true;
	}
	return progress;
}

static void job_exit_status(struct job *j)
{
	struct conn *c = j->conn;
	char *signame = NULL;
	size_t siglen = 0;

	libssh2_channel_get_exit_signal(j->ch, &signame, &siglen, NULL, NULL, NULL, NULL);
	if (signame) {
		int sig = mr_sh_sig_from_name(signame);

		if (sig)
			job_result(j, 0, 0, sig, NULL);
		else
			mr_ssh_job_fail(j, MESHRUN_E_PROTO, "'%s': killed by unknown signal '%s'",
				 c->cfg.dest, signame);
		libssh2_free(c->s, signame);
		return;
	}
	job_result(j, 0, libssh2_channel_get_exit_status(j->ch), 0, NULL);
}

enum chan_res { CH_WAIT, CH_FAILED, CH_DONE };

/*
 * The rc of one channel call in mr_ssh_job_step(): EAGAIN waits (note_eagain); an error
 * fails the job or its connection (job_ssh_error: j may be freed), unless what
 * is NULL, which ignores it.
 */
static enum chan_res chan_call(struct job *j, int rc, const char *what)
{
	if (rc == LIBSSH2_ERROR_EAGAIN) {
		note_eagain(j, OP_NONE);
		return CH_WAIT;
	}
	note_done(j);
	if (rc < 0 && what) {
		job_ssh_error(j, rc, what);
		return CH_FAILED;
	}
	return CH_DONE;
}

/* sshd's MaxSessions refused a channel: no spare any more on c, and those
 * there end (EOF: their shells exit), their channels for commands and kills. */
static void spares_off(struct conn *c)
{
	c->spares_off = true;
	for (struct job *o = c->head; o; o = o->next)
		if (o->kind == J_SPARE)
			o->base.in_closed = true;
}

/* j may run in a spare (sh.h "spare"): not a line that holds the token (it would end early) */
static bool spare_job(const struct job *j)
{
	return j->kind != J_SPARE && j->kind != J_WATCHDOG && j->kind != J_TUNNEL &&
	       !strstr(j->base.cmdline, j->conn->sh->spare_token);
}

/* s a spare still starting (its shell has not said ready), within MR_SSH_SPARE_WAIT_MS */
static bool spare_starting(const struct job *s, int64_t now)
{
	return s->kind == J_SPARE && !s->ready && s->st <= S_IO && !s->base.in_closed &&
	       now - s->base.start_ms < MR_SSH_SPARE_WAIT_MS;
}

/* j (S_WAIT) may wait for a spare still starting: not a kill, which is
 * answered within MR_HAL_ANSWER_MS or the host is taken for gone */
static bool may_wait_for_spare(const struct job *j)
{
	return j->st == S_WAIT && j->kind != J_KILL && spare_job(j);
}

/*
 * No ready spare for j: wait for one still starting rather than open a
 * channel (and start a login shell) beside it, if there are more of them than
 * commands waiting for spares ahead of j. A relaunch right after a job finds
 * its spares starting: opening more would only slow both.
 */
static bool wait_for_spare(struct job *j)
{
	struct conn *c = j->conn;
	int64_t now = mr_now_ms();
	size_t starting = 0, ahead = 0;

	if (!c->nspare || !may_wait_for_spare(j))
		return false;
	for (struct job *s = c->head; s; s = s->next)
		if (spare_starting(s, now))
			starting++;
	for (struct job *o = c->head; o && o != j && ahead < starting; o = o->next)
		if (may_wait_for_spare(o))
			ahead++;
	return ahead < starting;
}

int64_t mr_ssh_spare_wait_end(const struct conn *c)
{
	int64_t d = -1, now;
	bool waiting = false;

	for (const struct job *j = c->head; j && !waiting; j = j->next)
		waiting = may_wait_for_spare(j);
	if (!waiting)
		return -1;
	now = mr_now_ms();
	for (const struct job *s = c->head; s; s = s->next)
		if (spare_starting(s, now) && (d < 0 || s->base.start_ms + MR_SSH_SPARE_WAIT_MS < d))
			d = s->base.start_ms + MR_SSH_SPARE_WAIT_MS;
	return d;
}

/*
 * A command j (S_WAIT) takes a ready spare's channel instead of opening one:
 * its command line and the token go first on the spare's stdin (sh.h
 * "spare"), then j's own stdin. Not while the spare has a libssh2 call pending.
 */
static bool take_spare(struct job *j)
{
	struct conn *c = j->conn;
	const char *token = c->sh->spare_token;
	struct mr_buf in = MR_BUF_INIT;
	struct job *s;

	if (!c->nspare || !spare_job(j))
		return false;
	for (s = c->head; s; s = s->next)
		if (s->kind == J_SPARE && s->ready && s->st == S_IO && c->owner != s && !s->base.in_closed &&
		    !libssh2_channel_eof(s->ch))
			break;
	if (!s || mr_hal_spare_line(&in, j->base.cmdline) < 0 || mr_buf_printf(&in, "\n%s\n", token) < 0 ||
	    mr_buf_append(&in, j->base.in.p, j->base.in.len) < 0) {
		mr_buf_release(&in);
		return false;
	}
	mr_buf_release(&j->base.in);
	j->base.in = in;
	j->ch = s->ch;
	s->ch = NULL; /* the channel goes with j: nchan stays */
	mr_ssh_job_unlink(s);
	j->st = S_IO;
	c->was_idle = false;
	return true;
}

void mr_ssh_spares_top_up(struct conn *c)
{
	int want = c->sh->base.opts.ssh_spares;
	struct job *s;
	struct mr_buf line = MR_BUF_INIT;

	if (want <= 0 || !c->sh->spare_token[0] || c->spares_off || c->state != C_READY ||
	    c->nspare >= want || c->nchan + 2 >= c->chan_cap)
		return;
	for (struct job *j = c->head; j; j = j->next)
		if (j->st <= S_EXEC && j->kind != J_SPARE)
			return; /* commands first: a spare opens only when they have channels */
	if (mr_hal_spare_cmdline(&line, c->sh->spare_token) == 0 &&
	    (s = mr_ssh_job_new(J_SPARE, mr_buf_cstr(&line)))) {
		s->base.start_ms = mr_now_ms();
		mr_ssh_job_link(c, s, false);
	}
	mr_buf_release(&line);
}

/* Advance one job as far as it goes without waiting. true on progress. */
bool mr_ssh_job_step(struct job *j)
{
	struct conn *c = j->conn;
	bool progress = false, gone = false;
	enum chan_res res;
	int rc;

	if (j->kind == J_KILL && !j->base.end.done && j->base.deadline_ms && mr_now_ms() >= j->base.deadline_ms) {
		/* no answer to a kill: the host is gone, whatever TCP says (hal_impl.h) */
		mr_ssh_conn_set_err(c, MESHRUN_E_NOEXIT,
				    "host unresponsive: a kill sent to it was not run within %d ms "
				    "(stopped, powered off or cut off)", MR_HAL_ANSWER_MS);
		c->broken = true;
		return true;
	}
	if (c->owner && c->owner != j)
		return false;
	if (j->kind == J_RUN && !j->base.end.done && j->base.deadline_ms && mr_now_ms() >= j->base.deadline_ms) {
		mr_ssh_job_fail(j, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms",
			 c->cfg.dest, j->base.deadline_ms - j->base.start_ms);
		if (j->st == S_WAIT || j->st == S_OPEN) {
			if (j->st == S_WAIT) {
				mr_ssh_job_unlink(j);
				return true;
			}
		} else if (j->base.pgid && j->st < S_CLOSE) {
			mr_ssh_queue_kill(c, j->base.pgid, SIGKILL); /* the channel then closes by itself */
		}
		progress = true;
	}
	if (j->kind == J_TUNNEL && j->st == S_WAIT && !j->tun_for) {
		mr_ssh_job_unlink(j); /* its connection went away before it opened */
		return true;
	}
	switch (j->st) {
	case S_WAIT: {
		int limit = j->kind == J_KILL || !c->cap_known ? c->chan_cap : c->chan_cap - 1;

		if (take_spare(j)) {
			progress = true;
			goto io;
		}
		if (wait_for_spare(j))
			return progress;
		if (c->opener || (j->kind != J_TUNNEL && c->nchan >= limit))
			return progress;
		c->opener = j;
		j->st = S_OPEN;
	}
		/* fallthrough */
	case S_OPEN:
		/* The originator address is not checked by sshd; OpenSSH's ssh -W sends this one. */
		j->ch = j->kind == J_TUNNEL ? libssh2_channel_direct_tcpip_ex(c->s, j->base.cmdline, j->tun_port,
									      "127.0.0.1", 65535)
					    : libssh2_channel_open_session(c->s);
		if (!j->ch) {
			rc = libssh2_session_last_errno(c->s);
			if (rc == LIBSSH2_ERROR_EAGAIN) {
				note_eagain(j, OP_NONE);
				return progress;
			}
			note_done(j);
			c->opener = NULL;
			if (j->kind == J_TUNNEL && !mr_ssh_is_conn_error(rc)) {
				mr_ssh_job_fail(j, MESHRUN_E_CONNECT,
						"jump host '%s' could not open a connection to %s port %d: %s",
						c->cfg.dest, j->base.cmdline, j->tun_port, mr_ssh_errmsg(c->s, rc));
				mr_ssh_job_unlink(j);
				return true;
			}
			if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && j->kind == J_SPARE) {
				spares_off(c);
				mr_ssh_job_unlink(j);
				return true;
			}
			if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE) {
				bool short_lived = false, closable = false;

				spares_off(c);
				for (struct job *o = c->head; o; o = o->next) {
					/* a spare's shell exits at its EOF (spares_off) */
					if (o->ch && (o->kind == J_RUN || o->kind == J_KILL || o->kind == J_SPARE))
						short_lived = true;
					/* the watchdog's channel stays open to the end: no use waiting on it */
					if (o->ch && o->kind != J_WATCHDOG)
						closable = true;
				}
				if (closable && (short_lived || j->kind == J_RUN || j->kind == J_KILL)) {
					/* sshd's MaxSessions: wait for a channel to close */
					c->chan_cap = c->nchan;
					c->cap_known = true;
					j->st = S_WAIT;
					return true;
				}
				mr_ssh_job_fail(j, MESHRUN_E_CONNECT,
					 "'%s': sshd refused another session channel (%d open; raise MaxSessions in its sshd_config)",
					 c->cfg.dest, c->nchan);
				mr_ssh_job_unlink(j);
				return true;
			}
			if (mr_ssh_is_conn_error(rc) && c->was_idle && !c->retried && c->nchan == 0) {
				/* An idle connection the server dropped meanwhile: one fresh try. */
				j->st = S_WAIT;
				c->stale = c->broken = true;
				return true;
			}
			job_ssh_error(j, rc, "open channel");
			return true;
		}
		note_done(j);
		c->opener = NULL;
		progress = true;
		if (j->kind == J_TUNNEL) {
			j->st = S_IO;
			goto io;
		}
		c->nchan++;
		j->st = S_EXEC;
		/* fallthrough */
	case S_EXEC:
		res = chan_call(j, libssh2_channel_exec(j->ch, j->base.cmdline), "exec");
		if (res != CH_DONE)
			return res == CH_FAILED || progress;
		c->was_idle = false;
		j->st = S_IO;
		progress = true;
		/* fallthrough */
	case S_IO:
	io:
		if (j->kind == J_TUNNEL)
			progress |= tunnel_pump(j);
		progress |= job_io(j, &gone);
		if (!gone && j->kind == J_TUNNEL)
			progress |= tunnel_pump(j);
		if (gone || j->st == S_IO)
			return progress;
		/* fallthrough */
	case S_CLOSE:
		res = chan_call(j, libssh2_channel_close(j->ch), "close channel");
		if (res != CH_DONE)
			return res == CH_FAILED || progress;
		j->st = S_WAITCLOSED;
		progress = true;
		/* fallthrough */
	case S_WAITCLOSED:
		res = chan_call(j, libssh2_channel_wait_closed(j->ch), "wait for channel close");
		if (res != CH_DONE)
			return res == CH_FAILED || progress;
		job_exit_status(j);
		j->st = S_FREE;
		progress = true;
		/* fallthrough */
	case S_FREE:
		/* An error here changes nothing: the channel is gone with the session. */
		if (chan_call(j, libssh2_channel_free(j->ch), NULL) == CH_WAIT)
			return progress;
		if (j->kind != J_TUNNEL)
			c->nchan--;
		j->ch = NULL;
		mr_ssh_job_unlink(j);
		return true;
	}
	return progress;
}
