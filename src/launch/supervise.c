#include "common/compat.h"
#include "launch/supervise.h"
#include "launch/hints.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <signal.h>
#include <unistd.h>

/* The self-pipe's write end: the only way from a signal handler into the loop. */
static volatile sig_atomic_t sig_wfd = -1;
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction saved_actions[ARRAY_SIZE(stop_signals)];

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;

	if (sig_wfd >= 0)
		(void)!write(sig_wfd, &c, 1);
	errno = saved;
}

/* --- output --- */

static void emit(struct mr_sup *s, int stream, const char *data, size_t len)
{
	int fd = stream ? STDERR_FILENO : STDOUT_FILENO;

	if (s->out_broken[stream] || !len)
		return;
	if (mr_write_full(fd, data, len) < 0 && errno == EPIPE)
		s->out_broken[stream] = true;
}

/* Write lines data[0..len) (each ending in '\n', or the tail when final) of rank r. */
static void emit_lines(struct mr_sup *s, struct mr_sup_rank *r, int stream, const char *data,
		       size_t len)
{
	if (!s->tag) {
		emit(s, stream, data, len);
		return;
	}
	mr_buf_reset(&s->line);
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) + 1 : len;

		if (mr_buf_printf(&s->line, "[rank %zu %s] ", r->rank, r->host) < 0 ||
		    mr_buf_append(&s->line, data, n) < 0) {
			emit(s, stream, s->line.p, s->line.len); /* out of memory: what we have */
			mr_buf_reset(&s->line);
			emit(s, stream, data, len);
			return;
		}
		data += n;
		len -= n;
	}
	emit(s, stream, s->line.p, s->line.len);
}

static void on_output(struct mr_sup *s, struct mr_sup_rank *r, int stream, const char *data,
		      size_t len)
{
	struct mr_buf *part = &r->part[stream];
	const char *nl;
	size_t whole;

	if (stream == 1 && r->err_head.len < MR_SUP_ERR_HEAD) /* for the summary (a failed append: none) */
		(void)mr_buf_append(&r->err_head, data, MR_MIN(len, MR_SUP_ERR_HEAD - r->err_head.len));

	/* Fast path: nothing pending and the chunk ends a line. */
	if (!part->len && len && data[len - 1] == '\n') {
		emit_lines(s, r, stream, data, len);
		return;
	}
	if (mr_buf_append(part, data, len) < 0) {
		emit_lines(s, r, stream, part->p, part->len); /* cannot buffer: pass through */
		mr_buf_reset(part);
		emit_lines(s, r, stream, data, len);
		return;
	}
	nl = part->len ? mr_memrchr(part->p, '\n', part->len) : NULL;
	whole = nl ? (size_t)(nl - part->p) + 1 : 0;
	if (whole) {
		emit_lines(s, r, stream, part->p, whole);
		mr_buf_consume(part, whole);
	}
	if (part->len >= MR_SUP_MAX_LINE) {
		if (mr_buf_putc(part, '\n') == 0) {
			emit_lines(s, r, stream, part->p, part->len);
			mr_buf_reset(part);
		}
	}
}

static void on_stdout(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	on_output(ctx, mr_proc_user(p), 0, data, len);
}

static void on_stderr(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	on_output(ctx, mr_proc_user(p), 1, data, len);
}

/* --verbose: "[INFO] +1.234s rank 2 (h3): exited with status 0". */
static void MR_PRINTF(3, 4) trace(const struct mr_sup *s, const struct mr_sup_rank *r,
				  const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (!s->verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	mr_info("+%.3fs rank %zu (%s): %s", (double)(mr_now_ms() - s->t0) / 1000.0, r->rank,
		r->host ? r->host : "?", what);
}

/* --- stopping --- */

static void signal_running(struct mr_sup *s, int sig)
{
	for (size_t i = 0; i < s->nranks; i++) {
		struct mr_sup_rank *r = &s->ranks[i];

		if (!r->started || r->done)
			continue;
		r->stopped = true;
		r->sent_kill |= sig == SIGKILL;
		if (sig != SIGCONT)
			trace(s, r, "stopping: %s sent", sig == SIGKILL ? "SIGKILL" : "SIGTERM");
		(void)mr_proc_signal(r->proc, sig, NULL);
	}
}

static void begin_stop(struct mr_sup *s)
{
	if (s->stopping) {
		if (!s->killed) { /* asked twice: no more grace */
			signal_running(s, SIGKILL);
			s->killed = true;
			s->give_up_at = mr_now_ms() + 10000;
		}
		return;
	}
	s->stopping = true;
	signal_running(s, SIGTERM);
	signal_running(s, SIGCONT); /* a stopped (^Z) rank must see the TERM */
	s->kill_at = mr_now_ms() + MR_SUP_GRACE_MS;
}

static bool rank_failed(const struct mr_sup_rank *r)
{
	return r->hal_rc < 0 || r->signal || r->status;
}

static void on_exit_cb(struct mr_proc *p, int hal_rc, int status, int sig,
		       const struct meshrun_err *err, void *ctx)
{
	struct mr_sup *s = ctx;
	struct mr_sup_rank *r = mr_proc_user(p);

	r->done = true;
	r->stdin_open = false;
	r->hal_rc = hal_rc;
	r->status = status;
	r->signal = sig;
	if (hal_rc < 0)
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", err && err->msg[0] ? err->msg : "lost");
	if (hal_rc < 0)
		trace(s, r, "lost: %s", r->errmsg);
	else if (sig)
		trace(s, r, "killed by signal %d", sig);
	else
		trace(s, r, "exited with status %d", status);
	if (s->nrunning)
		s->nrunning--;
	if (!rank_failed(r) || r->stopped)
		return;
	if (s->exit_code < 0) {
		s->exit_code = hal_rc < 0 ? MR_LAUNCH_EXIT_FAIL : sig ? 128 + sig : status;
		snprintf(s->stop_why, sizeof(s->stop_why), "after rank %zu (%s) failed", r->rank, r->host);
		s->first_failed = r->rank;
		if (s->nrunning)
			mr_warn("rank %zu (%s) failed: stopping the other %zu rank%s", r->rank, r->host,
				s->nrunning, s->nrunning == 1 ? "" : "s");
	}
	begin_stop(s);
}

static void on_sigpipe_readable(int fd, void *ctx)
{
	struct mr_sup *s = ctx;
	unsigned char buf[16];
	ssize_t n = read(fd, buf, sizeof(buf));

	for (ssize_t i = 0; i < n; i++) {
		if (s->exit_code < 0) {
			s->exit_code = 128 + buf[i];
			snprintf(s->stop_why, sizeof(s->stop_why), "when meshrun got %s", strsignal(buf[i]));
		}
		mr_warn("got %s: stopping every rank%s", strsignal(buf[i]),
			s->stopping ? " now (SIGKILL)" : "");
		begin_stop(s);
	}
}

/* --- stdin --- */

static void close_rank_stdin(struct mr_sup_rank *r)
{
	if (r->stdin_open && r->started && !r->done)
		(void)mr_proc_close_stdin(r->proc, NULL);
	r->stdin_open = false;
}

static void stdin_unwatch(struct mr_sup *s)
{
	if (s->stdin_watched)
		mr_hal_unwatch_fd(s->hal, s->stdin_fd);
	s->stdin_watched = false;
	mr_input_relay_free(s->stdin_relay);
	s->stdin_relay = NULL;
}

static void stdin_eof(struct mr_sup *s)
{
	stdin_unwatch(s);
	for (size_t i = 0; i < s->nranks; i++)
		close_rank_stdin(&s->ranks[i]);
}

static void on_stdin_readable(int fd, void *ctx)
{
	struct mr_sup *s = ctx;
	char buf[65536];
	ssize_t n = mr_read_some(fd, buf, sizeof(buf));

	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		stdin_eof(s);
		return;
	}
	for (size_t i = 0; i < s->nranks; i++) {
		struct mr_sup_rank *r = &s->ranks[i];

		if (r->stdin_open && r->started && !r->done &&
		    mr_proc_write(r->proc, buf, (size_t)n, NULL) < 0)
			r->stdin_open = false;
	}
}

/* --- the loop --- */

int mr_sup_init(struct mr_sup *s, struct mr_hal *hal, size_t nranks, bool tag,
		enum mr_stdin_mode mode, int64_t timeout_ms, struct meshrun_err *err)
{
	struct sigaction sa;
	int fds[2];

	memset(s, 0, sizeof(*s));
	s->t0 = mr_now_ms();
	s->hal = hal;
	s->tag = tag;
	s->stdin_mode = mode;
	s->exit_code = -1;
	s->kill_at = s->give_up_at = -1;
	s->deadline = timeout_ms > 0 ? mr_now_ms() + timeout_ms : -1;
	s->sig_fd = -1;
	s->stdin_fd = STDIN_FILENO;
	s->ranks = calloc(nranks ? nranks : 1, sizeof(*s->ranks));
	if (!s->ranks)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	s->nranks = nranks;
	for (size_t i = 0; i < nranks; i++)
		s->ranks[i].rank = i;

	if (mr_pipe_cloexec(fds) < 0)
		return mr_err_sys(err, "pipe");
	(void)mr_set_nonblock(fds[0], true);
	(void)mr_set_nonblock(fds[1], true);
	s->sig_fd = fds[0];
	sig_wfd = fds[1];
	if (mr_hal_watch_fd(hal, s->sig_fd, on_sigpipe_readable, s) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "watch the signal pipe: out of memory");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
		sigaction(stop_signals[i], &sa, &saved_actions[i]);

	if (mode != MR_STDIN_NONE) {
		if (mr_pollable_input(STDIN_FILENO, &s->stdin_fd, &s->stdin_relay) < 0)
			return mr_err_sys(err, "forward stdin (terminal relay)");
		if (mr_hal_watch_fd(hal, s->stdin_fd, on_stdin_readable, s) == 0)
			s->stdin_watched = true;
	}
	return 0;
}

int mr_sup_start(struct mr_sup *s, size_t rank, struct mr_spawn *sp, struct meshrun_err *err)
{
	struct mr_sup_rank *r = &s->ranks[rank];
	int rc;

	r->host = strdup(sp->host);
	if (!r->host)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	sp->events.ctx = s;
	sp->events.on_stdout = on_stdout;
	sp->events.on_stderr = on_stderr;
	sp->events.on_exit = on_exit_cb;
	sp->user = r;
	if ((rc = mr_hal_spawn(s->hal, sp, &r->proc, err)) < 0)
		return rc;
	r->started = true;
	trace(s, r, "started");
	s->nrunning++;
	r->stdin_open = s->stdin_watched &&
			(s->stdin_mode == MR_STDIN_ALL || (s->stdin_mode == MR_STDIN_RANK0 && rank == 0));
	if (!r->stdin_open)
		(void)mr_proc_close_stdin(r->proc, NULL);
	return 0;
}

void mr_sup_abort(struct mr_sup *s)
{
	if (s->exit_code < 0) {
		s->exit_code = MR_LAUNCH_EXIT_FAIL;
		snprintf(s->stop_why, sizeof(s->stop_why), "after the launch failed");
	}
	begin_stop(s);
}

static int next_timeout(const struct mr_sup *s)
{
	int64_t t = -1;
	int64_t cands[3] = { s->deadline, s->killed ? -1 : s->kill_at, s->give_up_at };

	for (size_t i = 0; i < ARRAY_SIZE(cands); i++)
		if (cands[i] >= 0 && (t < 0 || cands[i] < t))
			t = cands[i];
	return mr_ms_left(t);
}

/* "rank 0 (h1), rank 3 (h4)": the ranks started and not done (cut with "..."). */
static const char *unfinished(const struct mr_sup *s, char *buf, size_t len)
{
	size_t n = 0, at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->nranks && at < len; i++) {
		const struct mr_sup_rank *r = &s->ranks[i];
		if (!r->started || r->done)
			continue;
		at += (size_t)snprintf(buf + at, len - at, "%srank %zu (%s)", n++ ? ", " : "", r->rank, r->host);
	}
	if (at >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	if (!n)
		snprintf(buf, len, "no rank");
	return buf;
}

/* How a rank ended, as the summary tells it. */
enum rank_end {
	END_RUNNING, /* no exit status: still running when meshrun gave up */
	END_LOST,    /* the connection went without an exit status */
	END_OK,      /* exit status 0 */
	END_FAILED,  /* a status or signal of its own */
	END_STOPPED, /* ended by the TERM or KILL meshrun sent it */
};

static enum rank_end rank_end(const struct mr_sup_rank *r)
{
	/* a shell between us and the program reports its death by signal S as 128+S;
	 * a KILL before ours (the grace) is someone else's */
	int sig = r->signal ? r->signal : r->status > 128 ? r->status - 128 : 0;
	bool ours = sig == SIGTERM || (sig == SIGKILL && r->sent_kill);

	if (!r->done)
		return END_RUNNING;
	if (r->hal_rc < 0)
		return END_LOST;
	if (!r->signal && !r->status)
		return END_OK;
	return r->stopped && ours ? END_STOPPED : END_FAILED;
}

/* "exit status 127", "killed by signal 9 (Killed)" */
static const char *describe_end(const struct mr_sup_rank *r, char *buf, size_t n)
{
	if (r->signal)
		snprintf(buf, n, "killed by signal %d (%s)", r->signal, strsignal(r->signal));
	else
		snprintf(buf, n, "exit status %d", r->status);
	return buf;
}

/* The lines of rank r's first stderr, up to three, each cut at 200 bytes. */
static void show_err_head(const struct mr_sup_rank *r)
{
	const char *p = r->err_head.p, *end = p + r->err_head.len;

	if (!r->err_head.len)
		return;
	mr_error("rank %zu (%s)'s stderr began:", r->rank, r->host);
	for (int k = 0; k < 3 && p < end; k++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		mr_error("  | %.*s%s", (int)MR_MIN(len, (size_t)200), p, len > 200 ? "..." : "");
		p += len + 1;
	}
}

/* "0-2, 5": the ranks whose end is kind (and, for END_FAILED, like ref's). */
static void rank_list(const struct mr_sup *s, enum rank_end kind, const struct mr_sup_rank *ref,
		      char *buf, size_t n)
{
	size_t at = 0, i = 0;

	buf[0] = '\0';
	while (i < s->nranks && at < n) {
		size_t j = i;

#define IN_SET(k) (s->ranks[k].started && rank_end(&s->ranks[k]) == kind &&                        \
		   (!ref || (s->ranks[k].signal == ref->signal && s->ranks[k].status == ref->status)))
		if (!IN_SET(i)) {
			i++;
			continue;
		}
		while (j + 1 < s->nranks && IN_SET(j + 1))
			j++;
#undef IN_SET
		at += (size_t)snprintf(buf + at, n - at, j > i ? "%s%zu-%zu" : "%s%zu", at ? ", " : "", i, j);
		i = j + 1;
	}
	if (at >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
}

/*
 * Two or more ranks failed on their own, all the same way, and every other
 * rank was stopped by meshrun (its TERM may well have come first: a missing
 * library fails every rank within milliseconds): one line for them all, then
 * the first lines of the stderr of the first of them that failed.
 */
static bool summary_same_way(const struct mr_sup *s)
{
	const struct mr_sup_rank *first = NULL;
	size_t nfail = 0, nstop = 0, nstarted = 0;
	char what[128], ranks[128], stopped[128];

	for (size_t i = 0; i < s->nranks; i++) {
		const struct mr_sup_rank *r = &s->ranks[i];

		if (!r->started)
			continue;
		nstarted++;
		switch (rank_end(r)) {
		case END_STOPPED:
			nstop++;
			continue;
		case END_FAILED:
			break;
		default:
			return false;
		}
		if (first && (r->signal != first->signal || r->status != first->status))
			return false;
		if (!first || r->rank == s->first_failed)
			first = r;
		nfail++;
	}
	if (nfail < 2)
		return false;
	describe_end(first, what, sizeof(what));
	if (!nstop) {
		mr_error("every rank (%zu of %zu) failed the same way: %s", nfail, nstarted, what);
	} else {
		rank_list(s, END_FAILED, first, ranks, sizeof(ranks));
		rank_list(s, END_STOPPED, NULL, stopped, sizeof(stopped));
		mr_error("%zu of %zu ranks failed the same way: %s (ranks %s); meshrun stopped rank%s %s %s",
			 nfail, nstarted, what, ranks, nstop == 1 ? "" : "s", stopped, s->stop_why);
	}
	show_err_head(first);
	if (!first->signal && first->status == 127)
		mr_error("hint: " MR_HINT_EXIT_127);
	return true;
}

static void summary(struct mr_sup *s)
{
	if (summary_same_way(s))
		return;
	for (size_t i = 0; i < s->nranks; i++) {
		struct mr_sup_rank *r = &s->ranks[i];
		char what[128];

		if (!r->started)
			continue;
		switch (rank_end(r)) {
		case END_RUNNING:
			mr_error("rank %zu (%s): no exit status (still running when meshrun gave up)",
				 r->rank, r->host);
			break;
		case END_LOST:
			mr_error("rank %zu (%s): %s", r->rank, r->host, r->errmsg);
			break;
		case END_OK:
			break;
		case END_STOPPED:
			/* "(signal 15)" / "(exit status 143)": as before, scripts match it */
			mr_warn("rank %zu (%s): stopped by meshrun (%s %d) %s", r->rank, r->host,
				r->signal ? "signal" : "exit status", r->signal ? r->signal : r->status,
				s->stop_why);
			break;
		case END_FAILED:
			/* its own end, also when meshrun was stopping it (the TERM may have come late) */
			mr_error("rank %zu (%s): %s%s%s", r->rank, r->host, describe_end(r, what, sizeof(what)),
				 r->stopped ? ", as meshrun was stopping it " : "", r->stopped ? s->stop_why : "");
			break;
		}
	}
}

int mr_sup_wait(struct mr_sup *s)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	while (s->nrunning) {
		int64_t now;

		if (mr_hal_poll(s->hal, next_timeout(s), &err) < 0) {
			mr_error("%s", err.msg);
			mr_err_clear(&err);
			mr_sup_abort(s);
			if (s->killed)
				break;
		}
		now = mr_now_ms();
		if (s->deadline >= 0 && now >= s->deadline && !s->stopping) {
			char left[256];
			mr_error("--timeout: the job ran past its time limit with %s still running: stopping every rank",
				 unfinished(s, left, sizeof(left)));
			if (s->exit_code < 0) {
				s->exit_code = MR_LAUNCH_EXIT_TIMEOUT;
				snprintf(s->stop_why, sizeof(s->stop_why), "at --timeout");
			}
			begin_stop(s);
		}
		if (s->stopping && !s->killed && now >= s->kill_at)
			begin_stop(s); /* grace is over: SIGKILL */
		if (s->give_up_at >= 0 && now >= s->give_up_at)
			break;
	}
	/* The unterminated tails, so nothing a rank wrote is lost. */
	for (size_t i = 0; i < s->nranks; i++)
		for (int k = 0; k < 2; k++)
			if (s->ranks[i].part[k].len) {
				struct mr_buf *b = &s->ranks[i].part[k];

				if (s->nranks > 1 || s->tag)
					(void)mr_buf_putc(b, '\n');
				emit_lines(s, &s->ranks[i], k, b->p, b->len);
				mr_buf_reset(b);
			}
	summary(s);
	for (size_t i = 0; i < s->nranks && s->exit_code < 0; i++)
		if (s->ranks[i].started && (!s->ranks[i].done || s->ranks[i].hal_rc < 0))
			s->exit_code = MR_LAUNCH_EXIT_FAIL;
	return s->exit_code < 0 ? 0 : s->exit_code;
}

void mr_sup_release(struct mr_sup *s)
{
	if (s->sig_fd >= 0) {
		for (size_t i = 0; i < ARRAY_SIZE(stop_signals); i++)
			sigaction(stop_signals[i], &saved_actions[i], NULL);
		mr_hal_unwatch_fd(s->hal, s->sig_fd);
		int wfd = sig_wfd;
		sig_wfd = -1;
		mr_close(&wfd);
		mr_close(&s->sig_fd);
	}
	stdin_unwatch(s);
	for (size_t i = 0; i < s->nranks; i++) {
		struct mr_sup_rank *r = &s->ranks[i];

		if (r->proc)
			mr_proc_release(r->proc);
		mr_buf_release(&r->part[0]);
		mr_buf_release(&r->part[1]);
		mr_buf_release(&r->err_head);
		free(r->host);
	}
	MR_FREE(s->ranks);
	mr_buf_release(&s->line);
}
