/*
 * hal.c - the public hal functions: validate, then dispatch through the
 * backend's ops table (hal_impl.h); plus the helpers every backend shares.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/timeutil.h"
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

int mr_hal_check_env(const char *host, char *const *env, struct meshrun_err *err)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		char name[256];

		if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
			return mr_err_set(err, MESHRUN_E_INVAL, "spawn on '%s': environment entry '%s' is not NAME=VALUE",
					  host, env[i]);
		memcpy(name, env[i], (size_t)(eq - env[i]));
		name[eq - env[i]] = '\0';
		if (!mr_is_env_name(name))
			return mr_err_set(err, MESHRUN_E_INVAL, "spawn on '%s': invalid environment variable name '%s'",
					  host, name);
	}
	return 0;
}

bool mr_hal_job_end_set(struct mr_hal_job_end *e, int hal_rc, int status, int sig,
			const struct meshrun_err *err)
{
	if (e->done)
		return false;
	e->done = true;
	e->hal_rc = hal_rc;
	e->status = status;
	e->sig = sig;
	if (err)
		e->err = *err;
	return true;
}

void mr_hal_job_end_report(const struct mr_hal_job_end *e, struct mr_hal *hal, struct mr_hal_cmd **cmd,
			   int64_t start_ms)
{
	struct mr_hal_cmd *c = *cmd;

	if (!c)
		return;
	c->hal_rc = e->hal_rc;
	c->status = e->status;
	c->signal = e->sig;
	if (e->hal_rc < 0)
		c->err = e->err;
	c->elapsed_ms = mr_now_ms() - start_ms;
	*cmd = NULL;
	mr_hal_cmd_done(hal, c);
}

long mr_hal_marker_feed(struct mr_hal_marker *m, const char *data, size_t len, mr_hal_sink_fn out,
			void *ctx)
{
	const size_t mlen = strlen(MR_HAL_PGID_MARKER);
	const char *pre, *at, *nl, *digits;
	long pgid = 0;

	if (!m->want) {
		if (len)
			out(ctx, data, len);
		return 0;
	}
	mr_buf_append(&m->pre, data, len);
	pre = mr_buf_cstr(&m->pre);
	at = memmem(pre, m->pre.len, MR_HAL_PGID_MARKER, mlen);
	nl = at ? memchr(at, '\n', m->pre.len - (size_t)(at - pre)) : NULL;
	if (!nl) {
		if (m->pre.len > MR_HAL_PGID_SCAN_MAX)
			mr_hal_marker_flush(m, out, ctx);
		return 0;
	}
	for (digits = at + mlen; digits < nl && *digits >= '0' && *digits <= '9'; digits++)
		if (pgid < 100000000)
			pgid = pgid * 10 + (*digits - '0');
	m->want = false;
	if (at > pre)
		out(ctx, pre, (size_t)(at - pre));
	if (m->pre.len > (size_t)(nl + 1 - pre))
		out(ctx, nl + 1, m->pre.len - (size_t)(nl + 1 - pre));
	mr_buf_release(&m->pre);
	return digits == nl && pgid > 1 ? pgid : 0;
}

void mr_hal_marker_flush(struct mr_hal_marker *m, mr_hal_sink_fn out, void *ctx)
{
	if (!m->want)
		return;
	m->want = false;
	if (m->pre.len)
		out(ctx, mr_buf_cstr(&m->pre), m->pre.len);
	mr_buf_release(&m->pre);
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

/*
 * POSIX sh only (dash, bash, zsh's sh mode and macOS's /bin/sh read it alike):
 * $p is split into words on purpose, which zsh as a login shell would not do;
 * mr_hal_watchdog_cmdline() runs it under /bin/sh for that reason.
 * A "T" name (an argument or a line) is a directory that a setup command may
 * still be creating in ${TMPDIR:-/tmp}: until a "D" line says the setup is over
 * ($w), the removal waits a second, so a mkdir racing our death comes first.
 * An "M" name is the same, and made here at once (mkdir -m 700) and marked:
 * the remote backends' form (mr_hal_makes_dirs), whose setup waits for the
 * mark before it writes there, so that a host stopped at any instant keeps no
 * directory of theirs without a mark (but for the exit of our own mkdir).
 * (nm: a "T" or "M" name of line $l, as $x; a path in it is refused.)
 * A "D" directory gets MR_HAL_WATCHDOG_MARK ("HOST PID" of this shell, mk):
 * the liveness mark that lets a later job's setup sweep it should we die with
 * the host's other processes (nobody left to read our EOF; docs/contracts.md);
 * only into a directory of ours that is no link, and not again when it is
 * there (a rewrite empties it for an instant). An "A" directory is the same
 * without the mark (the local hal writes it itself). The host's name (hs) is
 * looked up once per watchdog (a persist daemon's serves many jobs), before an
 * "M" name's mkdir, and without an exec where /proc has it (Linux; the
 * setup's first wait is on it); elsewhere `uname -n`. At the end only what
 * still exists costs an rm.
 */
const char mr_hal_watchdog_script[] =
	"trap '' HUP INT PIPE; p=' '; w=0; hn=; "
	"hs() { [ -n \"$hn\" ] || " MR_HAL_SH_HOSTNAME("hn") "; }; "
	"mk() { [ -d \"$x\" ] && [ -O \"$x\" ] && ! [ -L \"$x\" ] && { hs; "
	"{ read -r a b <\"$x/" MR_HAL_WATCHDOG_MARK "\" && [ \"$a $b\" = \"$hn $$\" ]; } 2>/dev/null || "
	"echo \"$hn $$\" 2>/dev/null >\"$x/" MR_HAL_WATCHDOG_MARK "\"; }; }; "
	"nm() { case ${l#?} in */*|.|..) return 1;; esac; x=${TMPDIR:-/tmp}/${l#?}; w=1; "
	"case $l in M*) hs; mkdir -m 700 \"$x\" 2>/dev/null; mk;; esac; return 0; }; "
	"for l do shift; case $l in [TM]?*) nm && set -- \"$@\" \"$x\";; esac; done; "
	"while read -r l; do case $l in "
	"+*) p=\"$p${l#+} \";; "
	"-*) x=${l#-}; case $p in *\" $x \"*) p=${p%%\" $x \"*}\" \"${p#*\" $x \"};; esac;; "
	"A/*) set -- \"$@\" \"${l#A}\"; w=0;; "
	"D/*) x=${l#D}; set -- \"$@\" \"$x\"; w=0; mk;; "
	"R?*) x=${l#R}; case $x in /*) ;; */*|.|..) x=;; *) x=\"${TMPDIR:-/tmp}/$x\";; esac; "
	"[ -z \"$x\" ] || { for a do shift; [ \"$a\" = \"$x\" ] || set -- \"$@\" \"$a\"; done; [ ! -e \"$x\" ] || rm -rf -- \"$x\"; };; "
	"[TM]?*) nm && set -- \"$@\" \"$x\";; "
	"esac; done; "
	"for x in $p; do kill -TERM -$x; done 2>/dev/null; "
	"[ \"$p\" = ' ' ] && [ $w = 0 ] || { sleep 1; for x in $p; do kill -KILL -$x; done 2>/dev/null; }; "
	"for x do [ -e \"$x\" ] && { rm -rf -- \"$@\"; break; }; done; exit 0";

/*
 * hal.h's "spare": $1 the token. `read` takes one byte at a time from a pipe,
 * so what follows the token line stays for the command's stdin; `eval` of an
 * `exec /bin/sh -c ...` line keeps this pid, the process group sshd made. A
 * line MR_HAL_SPARE_SH_C SCRIPT [ARG0 ARGS...] (mr_hal_spare_line) runs the
 * script in this /bin/sh, with ARGS as "$@": the same as that exec, one exec
 * of sh fewer (each costs milliseconds of CPU on a busy host).
 */
const char mr_hal_spare_script[] =
	"echo " MR_HAL_SPARE_READY "; c=; "
	MR_HAL_SPARE_SH_C "() { s=$1; shift; [ $# = 0 ] || shift; eval \"$s\"; }; "
	"while IFS= read -r l; do [ \"$l\" = \"$1\" ] && { eval \"$c\"; exit; }; c=\"$c$l\n\"; done; exit 0";

/* $1 a signal name (TERM), $2 a process group; BSD and procps kill both take it. */
const char mr_hal_kill_script[] = "kill -\"$1\" -\"$2\" 2>/dev/null; exit 0";

/* The NAME of a NAME=VALUE entry is one of the variables meshrun sets (and an identifier). */
static bool export_safe(const char *entry, const char *eq)
{
	static const char *const prefixes[] = { "MLX_", "MESHRUN_", "NCCL_", "JACCL_", "OMPI_" };
	size_t len = (size_t)(eq - entry);
	char name[256];

	if (len >= sizeof(name))
		return false;
	memcpy(name, entry, len);
	name[len] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (len > strlen(prefixes[i]) && !strncmp(name, prefixes[i], strlen(prefixes[i])))
			return mr_is_env_name(name);
	return false;
}

int mr_hal_spawn_cmdline(struct mr_buf *b, char *const *argv, char *const *env, const char *cwd)
{
	struct mr_buf in = MR_BUF_INIT, others = MR_BUF_INIT;
	int rc = mr_buf_puts(&in, "echo " MR_HAL_PGID_MARKER "$$; ");
	bool exported = false, inline_sh;

	/* meshrun's own variables by one `export` (no exec of env(1) per rank); any
	 * other name through env, which sets what a shell may refuse (bash's
	 * readonly PPID or UID, a name that is no identifier) */
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');

		if (!eq || !export_safe(env[i], eq)) {
			rc |= mr_shquote(&others, env[i]);
			rc |= mr_buf_putc(&others, ' ');
			continue;
		}
		rc |= mr_buf_puts(&in, exported ? " " : "export ");
		rc |= mr_buf_append(&in, env[i], (size_t)(eq + 1 - env[i]));
		rc |= mr_shquote(&in, eq + 1);
		exported = true;
	}
	if (exported)
		rc |= mr_buf_puts(&in, "; ");
	/* a /bin/sh -c SCRIPT (the launch's setup) runs in this /bin/sh, its
	 * arguments ours: one exec of sh fewer per command */
	inline_sh = !others.len && argv[0] && !strcmp(argv[0], MR_SH_PATH) && argv[1] &&
		    !strcmp(argv[1], "-c") && argv[2];
	if (cwd) {
		rc |= mr_buf_puts(&in, "cd ");
		rc |= mr_shquote(&in, cwd);
		rc |= mr_buf_puts(&in, inline_sh ? " || exit\n" : " && ");
	}
	if (inline_sh) {
		rc |= mr_buf_puts(&in, "\n");
		rc |= mr_buf_puts(&in, argv[2]);
	} else {
		rc |= mr_buf_puts(&in, "exec ");
		if (others.len) {
			rc |= mr_buf_puts(&in, "env ");
			rc |= mr_buf_append(&in, others.p, others.len);
		}
		rc |= mr_shquote_argv(&in, argv);
	}
	if (rc == 0)
		rc = mr_shquote_sh_c(b, mr_buf_cstr(&in), inline_sh && argv[3] ? &argv[3] : NULL);
	mr_buf_release(&others);
	mr_buf_release(&in);
	return rc ? -1 : 0;
}

int mr_hal_watchdog_cmdline(struct mr_buf *b, const char *tmp_name)
{
	char t[256];
	char *const args[] = { "meshrun-watchdog", tmp_name ? t : NULL, NULL };

	if (tmp_name && snprintf(t, sizeof(t), "M%s", tmp_name) >= (int)sizeof(t)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mr_shquote_sh_c(b, mr_hal_watchdog_script, args);
}

int mr_hal_spare_cmdline(struct mr_buf *b, const char *token)
{
	char *const args[] = { "meshrun-spare", (char *)token, NULL };

	return mr_shquote_sh_c(b, mr_hal_spare_script, args);
}

int mr_hal_spare_line(struct mr_buf *b, const char *cmdline)
{
	size_t n = strlen(MR_SH_EXEC_C);

	/* mr_shquote_sh_c's form: the same words after the function's name */
	if (!strncmp(cmdline, MR_SH_EXEC_C, n))
		return mr_buf_puts(b, MR_HAL_SPARE_SH_C " ") < 0 ? -1 : mr_buf_puts(b, cmdline + n);
	return mr_buf_puts(b, cmdline);
}

int mr_hal_kill_cmdline(struct mr_buf *b, const char *signame, long pgid)
{
	char num[24];
	char *const args[] = { "meshrun-kill", (char *)signame, num, NULL };

	if (!signame || pgid <= 0) {
		errno = EINVAL;
		return -1;
	}
	snprintf(num, sizeof(num), "%ld", pgid);
	return mr_shquote_sh_c(b, mr_hal_kill_script, args);
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

const char *mr_hal_err_hint(const struct meshrun_err *e)
{
	if (!e || !e->code)
		return NULL;
	switch (e->code) {
	case MESHRUN_E_AUTH:
		return mr_hal_hints[HINT_AUTH];
	case MESHRUN_E_HOSTKEY:
		/* ssh_hostkey.c says "host key has changed", OpenSSH "IDENTIFICATION HAS CHANGED" */
		if (strstr(e->msg, "has changed") || strstr(e->msg, "HAS CHANGED"))
			return mr_hal_hints[HINT_HOSTKEY_CHANGED];
		return mr_hal_hints[HINT_HOSTKEY_NEW];
	case MESHRUN_E_CONNECT:
		if (strstr(e->msg, "cannot resolve"))
			return mr_hal_hints[HINT_RESOLVE];
		if (strstr(e->msg, "timed out"))
			return mr_hal_hints[HINT_TIMEOUT];
		if (strstr(e->msg, "refused"))
			return mr_hal_hints[HINT_REFUSED];
		if (strstr(e->msg, "unreachable") || strstr(e->msg, "No route"))
			return mr_hal_hints[HINT_NOROUTE];
		return NULL;
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
