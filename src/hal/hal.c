/*
 * hal.c - the public hal functions: validate, then dispatch through the
 * backend's ops table (hal_impl.h); plus the helpers every backend shares.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/port.h"
#include "common/shquote.h"
#include "hal/hal_impl.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string.h>

/* --- common part of struct mr_hal --- */

static int dup_opt(const char **dst, const char *src)
{
	char *s;

	if (!src) {
		*dst = NULL;
		return 0;
	}
	s = strdup(src);
	if (!s)
		return -1;
	*dst = s;
	return 0;
}

int mr_hal_init(struct mr_hal *hal, const struct mr_hal_ops *ops, const struct mr_hal_opts *opts)
{
	static const struct mr_hal_opts zero;

	memset(hal, 0, sizeof(*hal));
	hal->ops = ops;
	hal->opts = opts ? *opts : zero;
	hal->opts.ssh_config = hal->opts.known_hosts = NULL;
	hal->opts.identity = hal->opts.user = NULL;
	if (hal->opts.connect_timeout_ms <= 0)
		hal->opts.connect_timeout_ms = MR_HAL_DEF_CONNECT_TIMEOUT_MS;
	if (hal->opts.run_timeout_ms <= 0)
		hal->opts.run_timeout_ms = MR_HAL_DEF_RUN_TIMEOUT_MS;
	if (hal->opts.max_output == 0)
		hal->opts.max_output = MR_HAL_DEF_MAX_OUTPUT;
	if (hal->opts.max_parallel <= 0)
		hal->opts.max_parallel = MR_HAL_DEF_MAX_PARALLEL;
	if (opts && (dup_opt(&hal->opts.ssh_config, opts->ssh_config) < 0 ||
		     dup_opt(&hal->opts.known_hosts, opts->known_hosts) < 0 ||
		     dup_opt(&hal->opts.identity, opts->identity) < 0 ||
		     dup_opt(&hal->opts.user, opts->user) < 0)) {
		mr_hal_release_common(hal);
		return MESHRUN_E_NOMEM;
	}
	return 0;
}

void mr_hal_release_common(struct mr_hal *hal)
{
	free((char *)hal->opts.ssh_config);
	free((char *)hal->opts.known_hosts);
	free((char *)hal->opts.identity);
	free((char *)hal->opts.user);
	hal->opts.ssh_config = hal->opts.known_hosts = NULL;
	hal->opts.identity = hal->opts.user = NULL;
	MR_FREE(hal->watch);
	hal->nwatch = hal->watch_alloc = 0;
}

/* --- run helpers --- */

void mr_hal_cmd_prepare(const struct mr_hal *hal, struct mr_hal_cmd *cmd)
{
	static const struct mr_buf empty = MR_BUF_INIT;

	cmd->hal_rc = 0;
	cmd->status = 0;
	cmd->signal = 0;
	cmd->out = empty;
	cmd->errout = empty;
	cmd->out.max = hal->opts.max_output;
	cmd->errout.max = hal->opts.max_output;
	mr_err_clear(&cmd->err);
	cmd->elapsed_ms = 0;
}

int mr_hal_cmd_timeout_ms(const struct mr_hal *hal, const struct mr_hal_cmd *cmd)
{
	return cmd->timeout_ms > 0 ? cmd->timeout_ms : hal->opts.run_timeout_ms;
}

int mr_hal_append_capped(struct mr_buf *b, const void *data, size_t len)
{
	if (b->max && len > b->max - b->len)
		len = b->max - b->len;
	if (len == 0)
		return 0;
	return mr_buf_append(b, data, len);
}

const char *mr_hal_argv_summary(char *const *argv, char *buf, size_t n)
{
	struct mr_buf b = MR_BUF_INIT;
	const char *s = "?";

	if (n == 0)
		return buf;
	if (argv && argv[0] && mr_shquote_argv(&b, argv) == 0)
		s = mr_buf_cstr(&b);
	if (strlen(s) < n) {
		memcpy(buf, s, strlen(s) + 1);
	} else if (n > 4) {
		memcpy(buf, s, n - 4);
		memcpy(buf + n - 4, "...", 4);
	} else {
		buf[0] = '\0';
	}
	mr_buf_release(&b);
	return buf;
}

const char *mr_hal_host_name(const char *host)
{
	return host && *host ? host : "localhost";
}

/* --- procs --- */

int mr_proc_init(struct mr_proc *p, struct mr_hal *hal, const struct mr_spawn *sp)
{
	char line[160];

	memset(p, 0, sizeof(*p));
	p->hal = hal;
	p->ev = sp->events;
	p->user = sp->user;
	p->host = strdup(mr_hal_host_name(sp->host));
	p->cmdline = strdup(mr_hal_argv_summary(sp->argv, line, sizeof(line)));
	if (!p->host || !p->cmdline) {
		MR_FREE(p->host);
		MR_FREE(p->cmdline);
		return MESHRUN_E_NOMEM;
	}
	p->next = hal->procs;
	if (hal->procs)
		hal->procs->prev = p;
	hal->procs = p;
	return 0;
}

void mr_proc_release_common(struct mr_proc *p)
{
	struct mr_hal *hal = p->hal;

	if (!hal)
		return;
	if (p->prev)
		p->prev->next = p->next;
	else if (hal->procs == p)
		hal->procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->next = p->prev = NULL;
	p->hal = NULL;
	MR_FREE(p->host);
	MR_FREE(p->cmdline);
}

static bool proc_quiet(const struct mr_proc *p)
{
	return p->exited || p->release_pending;
}

void mr_proc_deliver_stdout(struct mr_proc *p, const char *data, size_t len)
{
	if (!proc_quiet(p) && len && p->ev.on_stdout)
		p->ev.on_stdout(p, data, len, p->ev.ctx);
}

void mr_proc_deliver_stderr(struct mr_proc *p, const char *data, size_t len)
{
	if (!proc_quiet(p) && len && p->ev.on_stderr)
		p->ev.on_stderr(p, data, len, p->ev.ctx);
}

void mr_proc_deliver_exit(struct mr_proc *p, int hal_rc, int status, int sig,
			  const struct meshrun_err *err)
{
	bool quiet = p->release_pending;

	if (p->exited)
		return;
	p->exited = true;
	if (!quiet && p->ev.on_exit)
		p->ev.on_exit(p, hal_rc, status, sig, err, p->ev.ctx);
}

void mr_hal_deliver_backlogs(struct mr_hal *hal, void (*get)(struct mr_proc *p, struct mr_proc_backlog *b))
{
	struct mr_proc **snap;
	size_t n = 0, i = 0;

	for (struct mr_proc *p = hal->procs; p; p = p->next)
		n++;
	if (!n || !(snap = calloc(n, sizeof(*snap))))
		return;
	for (struct mr_proc *p = hal->procs; p && i < n; p = p->next)
		snap[i++] = p;
	for (i = 0; i < n; i++) {
		struct mr_proc *p = snap[i];
		struct mr_proc_backlog b;
		size_t len;
		char *d;

		if (p->exited || p->release_pending)
			continue;
		get(p, &b);
		if (b.out->len) {
			d = mr_buf_detach(b.out, &len);
			mr_proc_deliver_stdout(p, d, len);
			free(d);
		}
		if (b.err_out->len) {
			d = mr_buf_detach(b.err_out, &len);
			mr_proc_deliver_stderr(p, d, len);
			free(d);
		}
		get(p, &b); /* as it is now */
		if (b.done && !b.out->len && !b.err_out->len)
			mr_proc_deliver_exit(p, b.hal_rc, b.status, b.sig, b.hal_rc < 0 ? b.err : NULL);
	}
	free(snap);
}

/* --- pollset and watched fds --- */

int mr_pollset_add(struct mr_pollset *ps, int fd, short events)
{
	struct pollfd *fds = mr_array_grow(ps->fds, ps->nr + 1, &ps->alloc, sizeof(*fds));

	if (!fds)
		return -1;
	ps->fds = fds;
	ps->fds[ps->nr].fd = fd;
	ps->fds[ps->nr].events = events;
	ps->fds[ps->nr].revents = 0;
	return (int)ps->nr++;
}

void mr_pollset_reset(struct mr_pollset *ps)
{
	ps->nr = 0;
}

void mr_pollset_release(struct mr_pollset *ps)
{
	MR_FREE(ps->fds);
	ps->nr = ps->alloc = 0;
}

int mr_hal_watch_add_pollfds(struct mr_hal *hal, struct mr_pollset *ps, size_t *first)
{
	*first = ps->nr;
	for (size_t i = 0; i < hal->nwatch; i++)
		if (mr_pollset_add(ps, hal->watch[i].fd, POLLIN) < 0)
			return -1;
	return 0;
}

static struct mr_hal_watch *find_watch(struct mr_hal *hal, int fd)
{
	for (size_t i = 0; i < hal->nwatch; i++)
		if (hal->watch[i].fd == fd)
			return &hal->watch[i];
	return NULL;
}

void mr_hal_watch_dispatch(struct mr_hal *hal, const struct mr_pollset *ps, size_t first)
{
	for (size_t i = first; i < ps->nr; i++) {
		struct mr_hal_watch *w;

		if (!(ps->fds[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
			continue;
		w = find_watch(hal, ps->fds[i].fd); /* may have been unwatched meanwhile */
		if (w)
			w->cb(w->fd, w->ctx);
	}
}

int mr_hal_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir,
			  struct meshrun_err *err)
{
	if (!hal || !dir)
		return mr_err_set(err, MESHRUN_E_INVAL, "remove at exit: no hal or directory");
	/* a name (in the host's TMPDIR): one path component, short enough for the watchdog */
	bool name = dir[0] && !strchr(dir, '/') && strcmp(dir, ".") && strcmp(dir, "..") &&
		    strlen(dir) < 200;

	if ((dir[0] != '/' && !name) || strchr(dir, '\n'))
		return mr_err_set(err, MESHRUN_E_INVAL, "remove at exit on '%s': '%s' is not an absolute path or a file name, on one line",
				  mr_hal_host_name(host), dir);
	if (!hal->ops->remove_at_exit)
		return 0;
	return hal->ops->remove_at_exit(hal, host, dir, err);
}

int mr_hal_remove_now(struct mr_hal *hal, const char *host, const char *dir)
{
	if (!hal || !dir || !*dir || strchr(dir, '\n') || !hal->ops->remove_now)
		return 0;
	return hal->ops->remove_now(hal, host, dir);
}

bool mr_hal_removes_at_free(struct mr_hal *hal, const char *host)
{
	return hal && hal->ops->removes_at_free && hal->ops->removes_at_free(hal, host);
}

bool mr_hal_makes_dirs(struct mr_hal *hal, const char *host)
{
	return hal && hal->ops->makes_dirs && hal->ops->makes_dirs(hal, host);
}

bool mr_hal_yes(struct mr_hal *hal, const char *host)
{
	(void)hal;
	(void)host;
	return true;
}

int mr_hal_watch_fd(struct mr_hal *hal, int fd, void (*cb)(int fd, void *ctx), void *ctx)
{
	struct mr_hal_watch *w;

	if (!hal || fd < 0 || !cb)
		return MESHRUN_E_INVAL;
	w = find_watch(hal, fd);
	if (!w) {
		struct mr_hal_watch *v = mr_array_grow(hal->watch, hal->nwatch + 1, &hal->watch_alloc, sizeof(*v));

		if (!v)
			return MESHRUN_E_NOMEM;
		hal->watch = v;
		w = &hal->watch[hal->nwatch++];
	}
	w->fd = fd;
	w->cb = cb;
	w->ctx = ctx;
	return 0;
}

void mr_hal_unwatch_fd(struct mr_hal *hal, int fd)
{
	struct mr_hal_watch *w = hal ? find_watch(hal, fd) : NULL;

	if (!w)
		return;
	*w = hal->watch[--hal->nwatch];
}

/* --- public API --- */

void mr_hal_free(struct mr_hal *hal)
{
	if (!hal)
		return;
	hal->ops->free(hal);
}

const char *mr_hal_name(const struct mr_hal *hal)
{
	return hal ? hal->ops->name : "none";
}

/* The state of one mr_hal_run_cb() with a callback (hal->run while it runs). */
struct mr_hal_run_state {
	struct mr_hal_cmd *cmds;
	size_t n;
	void (*on_done)(struct mr_hal_cmd *cmd, void *ctx);
	void *ctx;
	bool reported[];  /* per command: on_done was called */
};

void mr_hal_cmd_done(struct mr_hal *hal, struct mr_hal_cmd *cmd)
{
	struct mr_hal_run_state *st = hal ? hal->run : NULL;
	uintptr_t a = (uintptr_t)cmd, base;
	size_t i;

	if (!st)
		return;
	base = (uintptr_t)st->cmds;
	if (a < base || (a - base) % sizeof(*cmd) || (i = (a - base) / sizeof(*cmd)) >= st->n)
		return; /* not an entry of this batch */
	if (st->reported[i])
		return;
	st->reported[i] = true;
	st->on_done(cmd, st->ctx);
}

int mr_hal_run_cb(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n,
		  void (*on_done)(struct mr_hal_cmd *cmd, void *ctx), void *ctx,
		  struct meshrun_err *err)
{
	struct mr_hal_run_state *st = NULL;
	size_t todo = 0;
	int rc = 0;

	if (!hal || (!cmds && n))
		return mr_err_set(err, MESHRUN_E_INVAL, "mr_hal_run: no hal or no commands");
	if (hal->run)
		return mr_err_set(err, MESHRUN_E_INVAL, "mr_hal_run: called from a run callback of the same hal");
	if (on_done && n) {
		st = calloc(1, sizeof(*st) + n * sizeof(st->reported[0]));
		if (!st)
			return mr_err_set(err, MESHRUN_E_NOMEM, "run %zu commands: out of memory", n);
		st->cmds = cmds;
		st->n = n;
		st->on_done = on_done;
		st->ctx = ctx;
		hal->run = st;
	}
	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *c = &cmds[i];

		mr_hal_cmd_prepare(hal, c);
		if (!c->argv || !c->argv[0]) {
			c->hal_rc = mr_err_set(&c->err, MESHRUN_E_INVAL, "empty command for host '%s'",
					       mr_hal_host_name(c->host));
			mr_hal_cmd_done(hal, c);
			continue;
		}
		if (c->stdin_len && !c->stdin_data) {
			c->hal_rc = mr_err_set(&c->err, MESHRUN_E_INVAL,
					       "command for host '%s': stdin_len without stdin_data",
					       mr_hal_host_name(c->host));
			mr_hal_cmd_done(hal, c);
			continue;
		}
		todo++;
	}
	if (todo)
		rc = hal->ops->run(hal, cmds, n, err);
	if (hal->run) {
		/* what the backend did not report (or a broken run): now, in order */
		for (size_t i = 0; i < n; i++)
			mr_hal_cmd_done(hal, &cmds[i]);
		hal->run = NULL;
		free(st);
	}
	return rc;
}

int mr_hal_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	return mr_hal_run_cb(hal, cmds, n, NULL, NULL, err);
}

int mr_hal_connect(struct mr_hal *hal, const char *const *hosts, size_t n,
		   struct meshrun_err *errs)
{
	for (size_t i = 0; i < n; i++)
		mr_err_clear(&errs[i]);
	if (!hal || !hal->ops->connect || n == 0)
		return 0;
	return hal->ops->connect(hal, hosts, n, errs);
}

int mr_hal_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		 struct meshrun_err *err)
{
	*out = NULL;
	if (!hal || !sp)
		return mr_err_set(err, MESHRUN_E_INVAL, "mr_hal_spawn: no hal or no spawn options");
	if (!sp->argv || !sp->argv[0])
		return mr_err_set(err, MESHRUN_E_INVAL, "spawn on '%s': empty command",
				  mr_hal_host_name(sp->host));
	return hal->ops->spawn(hal, sp, out, err);
}

int mr_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	if (len == 0)
		return 0;
	if (!data)
		return mr_err_set(err, MESHRUN_E_INVAL, "write to %s on '%s': no data", p->cmdline, p->host);
	if (p->stdin_closed)
		return mr_err_set(err, MESHRUN_E_INVAL, "write to '%s' on '%s': stdin already closed",
				  p->cmdline, p->host);
	if (p->exited)
		return mr_err_set(err, MESHRUN_E_INVAL, "write to '%s' on '%s': process has exited",
				  p->cmdline, p->host);
	return p->hal->ops->proc_write(p, data, len, err);
}

int mr_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	int rc;

	if (p->stdin_closed || p->exited)
		return 0;
	rc = p->hal->ops->proc_close_stdin(p, err);
	if (rc == 0)
		p->stdin_closed = true;
	return rc;
}

int mr_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	if (sig <= 0 || sig >= NSIG)
		return mr_err_set(err, MESHRUN_E_INVAL, "signal %d for '%s' on '%s': no such signal",
				  sig, p->cmdline, p->host);
	if (p->exited)
		return mr_err_set(err, MESHRUN_E_INVAL, "signal '%s' on '%s': process has exited",
				  p->cmdline, p->host);
	return p->hal->ops->proc_signal(p, sig, err);
}

bool mr_proc_exited(const struct mr_proc *p)
{
	return p->exited;
}

void *mr_proc_user(const struct mr_proc *p)
{
	return p->user;
}

const char *mr_proc_host(const struct mr_proc *p)
{
	return p->host;
}

void mr_proc_release(struct mr_proc *p)
{
	if (!p)
		return;
	if (p->hal->in_poll) {
		p->release_pending = true;
		return;
	}
	p->hal->ops->proc_release(p);
}

static int count_running(const struct mr_hal *hal)
{
	int n = 0;

	for (const struct mr_proc *p = hal->procs; p; p = p->next)
		if (!p->exited)
			n++;
	return n;
}

int mr_hal_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	int rc;
	struct mr_proc *p, *next;

	if (!hal)
		return mr_err_set(err, MESHRUN_E_INVAL, "mr_hal_poll: no hal");
	if (hal->in_poll)
		return mr_err_set(err, MESHRUN_E_INVAL, "mr_hal_poll called from a hal callback");
	hal->in_poll = true;
	rc = hal->ops->poll(hal, timeout_ms, err);
	hal->in_poll = false;
	for (p = hal->procs; p; p = next) {
		next = p->next;
		if (p->release_pending)
			hal->ops->proc_release(p);
	}
	return rc < 0 ? rc : count_running(hal);
}

/* --- results --- */

void mr_hal_cmd_release(struct mr_hal_cmd *cmd)
{
	if (!cmd)
		return;
	mr_buf_release(&cmd->out);
	mr_buf_release(&cmd->errout);
}

bool mr_hal_cmd_ok(const struct mr_hal_cmd *cmd)
{
	return cmd->hal_rc == 0 && cmd->signal == 0 && cmd->status == 0;
}

const char *mr_hal_cmd_describe(const struct mr_hal_cmd *cmd, char *buf, size_t n)
{
	if (n == 0)
		return buf;
	if (cmd->hal_rc < 0) {
		snprintf(buf, n, "%s", cmd->err.msg[0] ? cmd->err.msg : meshrun_strerror(cmd->hal_rc));
	} else if (cmd->signal > 0) {
		const char *d = mr_sigdescr(cmd->signal);

		snprintf(buf, n, "killed by signal %d (%s)", cmd->signal, d ? d : "unknown signal");
	} else {
		snprintf(buf, n, "exit status %d", cmd->status);
	}
	return buf;
}

/* mr_hal_err_hint's texts, in one table (the unit test checks that every flag a
 * hint names is one of meshrun's and of meshconfig's: both tools print them). */
enum {
	HINT_AUTH,
	HINT_HOSTKEY_NEW,
	HINT_HOSTKEY_CHANGED,
	HINT_RESOLVE,
	HINT_TIMEOUT,
	HINT_REFUSED,
	HINT_NOROUTE,
	HINT_COUNT
};

const char *const mr_hal_hints[] = {
	[HINT_AUTH] = "authentication refused: add your public key to the host's ~/.ssh/authorized_keys "
		      "(ssh-copy-id [user@]host), or give the right user (user@host, or User in ssh_config)",
	[HINT_HOSTKEY_NEW] = "host key not known yet: check it once with 'ssh [user@]host', or have "
			     "--accept-new-hostkeys record the keys of new hosts (into the "
			     "--known-hosts file when one is given)",
	[HINT_HOSTKEY_CHANGED] = "host key changed since it was recorded: if the host was reinstalled, "
				 "remove its old key (ssh-keygen -R HOST; -f FILE for a --known-hosts "
				 "file) and check the new one; otherwise do not connect "
				 "(--accept-new-hostkeys never accepts a changed key)",
	[HINT_RESOLVE] = "the name does not resolve: check its spelling, DNS or /etc/hosts, or give "
			 "a HostName in ssh_config (--ssh-config)",
	[HINT_TIMEOUT] = "no answer within the connect timeout: is the host up and on this network "
			 "(a firewall dropping port 22)?",
	[HINT_REFUSED] = "nothing listens for ssh there: start sshd (on a Mac: System Settings > "
			 "General > Sharing > Remote Login)",
	[HINT_NOROUTE] = "no route to the host: check the address and this machine's network",
	[HINT_COUNT] = NULL,
};

int mr_hal_err_set_why(struct meshrun_err *err, int code, int why, const char *fmt, ...)
{
	char msg[MESHRUN_ERR_MSG_MAX];
	va_list ap;

	if (!err || err->code)
		return code;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mr_err_set(err, code, "%s", msg);
	err->sys_errno = why;
	return code;
}

const char *mr_hal_err_hint(const struct meshrun_err *e)
{
	if (!e || !e->code)
		return NULL;
	switch (e->code) {
	case MESHRUN_E_AUTH:
		return mr_hal_hints[HINT_AUTH];
	case MESHRUN_E_HOSTKEY:
		if (e->sys_errno == MR_HAL_WHY_HOSTKEY_CHANGED)
			return mr_hal_hints[HINT_HOSTKEY_CHANGED];
		return mr_hal_hints[HINT_HOSTKEY_NEW];
	case MESHRUN_E_CONNECT:
		switch (e->sys_errno) {
		case MR_HAL_WHY_RESOLVE:
			return mr_hal_hints[HINT_RESOLVE];
		case ETIMEDOUT:
			return mr_hal_hints[HINT_TIMEOUT];
		case ECONNREFUSED:
			return mr_hal_hints[HINT_REFUSED];
		case EHOSTUNREACH:
		case ENETUNREACH:
			return mr_hal_hints[HINT_NOROUTE];
		default:
			return NULL;
		}
	default:
		return NULL;
	}
}

int mr_hal_private_dir(const char *dir, const char *what, struct meshrun_err *err)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return mr_err_sys(err, "mkdir '%s' (%s)", dir, what);
	if (lstat(dir, &st) < 0)
		return mr_err_sys(err, "lstat '%s'", dir);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return mr_err_set(err, MESHRUN_E_INVAL, "'%s' is not a directory of ours: refusing to put %s there",
				  dir, what);
	if ((st.st_mode & 077) && chmod(dir, 0700) < 0)
		return mr_err_sys(err, "chmod 0700 '%s'", dir);
	return 0;
}
