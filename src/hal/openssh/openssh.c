/*
 * openssh.c - the hal's backend on the OpenSSH client binary ("openssh"), for
 * hosts whose ssh_config needs what libssh2 cannot do (PKCS11Provider, FIDO
 * keys, ...: ssh_config.c's libssh2_gaps), or for every host (--ssh openssh):
 * whatever `ssh HOST` reaches, this reaches, with the user's own ssh_config and
 * agent.
 *
 * Per host one control master, our child (no shell: common/spawn.h):
 *     ssh [-F CFG] ... -o ControlMaster=yes -o ControlPath=DIR/cm-PID-N
 *         -o ControlPersist=no -T -- HOST 'exec /bin/sh -c ...watchdog...'
 * Its remote command is the hal's watchdog (mr_hal_watchdog_script) started
 * through mr_hal_spawn_cmdline(), so the PGID marker line it prints first says
 * "authenticated, session open, control socket listening": the host is READY.
 * Its stdin is ours: "+PGID", "-PGID" and "D/dir" lines go there, and when this
 * process ends (mr_hal_free, or SIGKILL) the EOF makes the watchdog kill every
 * registered group and remove the directories, as with libssh2.
 *
 * Every command (run, spawned proc, kill) is a multiplexed client of that master:
 *     ssh ... -o ControlMaster=no -o ControlPath=... -T -- HOST 'CMDLINE'
 * where CMDLINE is exactly what the libssh2 backend execs (hal.c's builders:
 * `exec /bin/sh -c '...'`, the PGID marker, `kill -SIG -PGID`). A client passes
 * its stdin/stdout/stderr to the master, so after the client exits the master
 * may still hold our pipes for a moment: a command is over once its client is
 * reaped and both pipes reached EOF (bounded by DRAIN_MS).
 *
 * Exit status: the client exits with the remote status. OpenSSH's client does
 * not pass a remote exit *signal* on: it exits 255 and says nothing, as for a
 * lost connection or a remote `exit 255` (checked with OpenSSH 9.2, plain and
 * multiplexed). So 255 is MESHRUN_E_NOEXIT, never a status: meshrun exits 255
 * for a rank killed by a signal here, where the libssh2 backend gives 128+S.
 *
 * Control sockets live in a private directory: $XDG_RUNTIME_DIR/meshrun-ssh,
 * else $TMPDIR (or /tmp)/meshrun-ssh-UID, created 0700 and refused when it is
 * not ours, a symlink, or open to others. Masters leave with `ssh -O exit` at
 * mr_hal_free() (and the EOF on their stdin when we die): nothing stays running.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/spawn.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/sh.h"
#include "hal/ssh_config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define OS_TICK_MS 20             /* exit checks without pidfds */
#define OS_CHUNK 65536
#define OS_DRAIN_MS 2000          /* pipes still open after the client exited */
#define OS_ERR_MAX 4096           /* master's stderr kept for the message */
#define OS_EXIT_WAIT_MS 3000      /* ssh -O exit and the masters leaving */
#define OS_PENDING_MAX (4u << 20) /* stop reading a proc's stream above this */

/* One ssh process of ours. */
struct och {
	pid_t pid;        /* > 0 until reaped */
	int pidfd, in_fd, out_fd, err_fd;
	bool reaped;
	int wstatus;
	int64_t reaped_ms;
};

enum host_state { H_NEW, H_STARTING, H_READY, H_FAILED };

struct ohost {
	struct os_hal *oh;
	struct ohost *next;
	char *name;
	char *ctl;                  /* control path */
	enum host_state st;
	struct och m;               /* the master; m.in_fd feeds the watchdog */
	struct mr_buf mout, merr;   /* stdout until the marker; stderr (capped) */
	struct mr_buf wdq;          /* watchdog lines not yet written */
	int64_t deadline;
	struct meshrun_err err;
	bool wanted;                /* mr_hal_connect waits for it */
};

enum ojob_kind { J_RUN, J_PROC, J_KILL };

struct ojob {
	struct ohost *h;
	struct ojob *next;          /* in the hal's list */
	enum ojob_kind kind;
	char *cmdline;
	bool started;               /* its client was started (or it failed before) */
	bool ended;                 /* the client is reaped and its pipes drained */
	bool finished;              /* nothing more to do: freed once no proc holds it */
	struct och c;
	struct mr_buf in;           /* stdin not yet written */
	bool in_closed;
	struct mr_hal_marker mark;  /* stdout until the marker */
	long pgid;
	bool registered;
	int pending_sig;
	struct mr_hal_cmd *cmd;     /* run: where results go */
	struct os_proc *proc;       /* proc: its owner (NULL once released) */
	struct mr_buf pout, perr;   /* proc: output not yet delivered */
	int64_t start_ms, deadline_ms, kill_at;
	bool timed_out;
	struct mr_hal_job_end end;  /* the result, once known */
};

struct os_proc {
	struct mr_proc base;
	struct ojob *job;
};

struct os_hal {
	struct mr_hal base;
	char *ssh;                  /* the client binary */
	char *dir;                  /* control socket directory */
	unsigned seq;
	struct ohost *hosts;
	struct ojob *jobs;
	struct mr_pollset ps;
	unsigned changes;           /* bumped when a wait may be over: see pump() */
};

#define to_os_hal(h) mr_container_of(h, struct os_hal, base)
#define to_os_proc(p) mr_container_of(p, struct os_proc, base)

/* ---- the control socket directory ------------------------------------------- */

/* The directory of our control sockets; its path leaves room for a socket name
 * (sun_path is 104 bytes on macOS; ssh adds a 17-character temporary suffix). */
static int socket_dir(char **out, struct meshrun_err *err)
{
	const char *rt = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
	char path[256];
	int rc;

	if (rt && rt[0] == '/' && strlen(rt) < 48) {
		snprintf(path, sizeof(path), "%s/meshrun-ssh", rt);
	} else {
		if (!tmp || tmp[0] != '/' || strlen(tmp) >= 48)
			tmp = "/tmp";
		snprintf(path, sizeof(path), "%s%smeshrun-ssh-%ld", tmp,
			 tmp[strlen(tmp) - 1] == '/' ? "" : "/", (long)geteuid());
	}
	rc = mr_hal_private_dir(path, "control sockets of the OpenSSH client", err);
	if (rc < 0)
		return rc;
	*out = strdup(path);
	return *out ? 0 : mr_err_set(err, MESHRUN_E_NOMEM, "openssh hal: out of memory");
}

/* ---- ssh processes ----------------------------------------------------------- */

static void och_init(struct och *c)
{
	memset(c, 0, sizeof(*c));
	c->pidfd = c->in_fd = c->out_fd = c->err_fd = -1;
}

static void och_close(struct och *c)
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
static void och_kill(struct och *c)
{
	if (c->pid > 0 && !c->reaped) {
		(void)kill(c->pid, SIGKILL);
		while (waitpid(c->pid, &c->wstatus, 0) < 0 && errno == EINTR)
			;
		c->reaped = true;
		c->pid = 0;
	}
	och_close(c);
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
static void write_some(int *fd, struct mr_buf *b)
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

static struct ohost *host_find(struct os_hal *oh, const char *name)
{
	for (struct ohost *h = oh->hosts; h; h = h->next)
		if (!strcmp(h->name, name))
			return h;
	return NULL;
}

static int host_get(struct os_hal *oh, const char *name, struct ohost **out, struct meshrun_err *err)
{
	struct ohost *h = host_find(oh, name);
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

/* What ssh said, as a hal error: the last non-empty line of its stderr. */
static void host_fail_from_stderr(struct ohost *h, const char *why)
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
		mr_err_set(&h->err, code, "ssh to '%s' (OpenSSH): cannot resolve: %s", h->name, last);
	else if (strstr(s, "IDENTIFICATION HAS CHANGED")) /* said lines before the last one */
		mr_err_set(&h->err, code, "ssh to '%s' (OpenSSH): host key has changed: %s", h->name, last);
	else if (last[0])
		mr_err_set(&h->err, code, "ssh to '%s' (OpenSSH): %s", h->name, last);
	else
		mr_err_set(&h->err, code, "ssh to '%s' (OpenSSH): %s", h->name, why);
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
static void hosts_close(struct os_hal *oh)
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
		och_kill(&ex[k]);
	free(ex);
	for (struct ohost *h = oh->hosts; h; h = h->next) {
		och_kill(&h->m);
		(void)unlink(h->ctl);
	}
}

/* ---- jobs: one multiplexed client each --------------------------------------- */

static struct ojob *job_new(struct os_hal *oh, struct ohost *h, enum ojob_kind kind, const char *cmdline)
{
	struct ojob *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->cmdline = strdup(cmdline);
	if (!j->cmdline) {
		free(j);
		return NULL;
	}
	j->h = h;
	j->kind = kind;
	och_init(&j->c);
	j->start_ms = mr_now_ms();
	/* at the tail: jobs start in the order they were made */
	struct ojob **pp = &oh->jobs;
	while (*pp)
		pp = &(*pp)->next;
	*pp = j;
	return j;
}

static void job_free(struct ojob *j)
{
	och_kill(&j->c);
	free(j->cmdline);
	mr_buf_release(&j->in);
	mr_buf_release(&j->mark.pre);
	mr_buf_release(&j->pout);
	mr_buf_release(&j->perr);
	free(j);
}

static void wd_line(struct ohost *h, char op, long pgid)
{
	if (h->m.pid > 0 && h->m.in_fd >= 0)
		(void)mr_buf_printf(&h->wdq, "%c%ld\n", op, pgid);
}

static void job_result(struct ojob *j, int hal_rc, int status, int sig, const struct meshrun_err *err)
{
	if (!mr_hal_job_end_set(&j->end, hal_rc, status, sig, err))
		return;
	j->h->oh->changes++;
	if (j->registered) {
		wd_line(j->h, '-', j->pgid);
		j->registered = false;
	}
	mr_hal_job_end_report(&j->end, &j->h->oh->base, &j->cmd, j->start_ms);
}

static void job_fail(struct ojob *j, const struct meshrun_err *e)
{
	job_result(j, e->code, 0, 0, e);
}

static struct ojob *queue_kill(struct ohost *h, long pgid, int sig);

static void got_pgid(struct ojob *j, long pgid)
{
	j->pgid = pgid;
	if (j->kind == J_RUN && j->timed_out)
		queue_kill(j->h, pgid, SIGKILL);
	if (j->kind != J_PROC)
		return;
	if (!j->end.done) {
		wd_line(j->h, '+', pgid);
		j->registered = true;
	}
	if (j->pending_sig) {
		queue_kill(j->h, pgid, j->pending_sig);
		j->pending_sig = 0;
	}
}

static void sink(struct ojob *j, bool is_err, const char *d, size_t n)
{
	if (!n)
		return;
	if (j->kind == J_RUN && j->cmd)
		mr_hal_append_capped(is_err ? &j->cmd->errout : &j->cmd->out, d, n);
	else if (j->kind == J_PROC) {
		mr_buf_append(is_err ? &j->perr : &j->pout, d, n);
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
	long pgid = mr_hal_marker_feed(&j->mark, d, n, sink_out_cb, j);

	if (pgid > 1)
		got_pgid(j, pgid);
}

static struct ojob *queue_kill(struct ohost *h, long pgid, int sig)
{
	struct mr_buf line = MR_BUF_INIT;
	const char *name = mr_sh_sig_name(sig);
	struct ojob *j = NULL;

	if (name && mr_hal_kill_cmdline(&line, name, pgid) == 0)
		j = job_new(h->oh, h, J_KILL, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (j)
		j->in_closed = true;
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
	if (ssh_argv(oh, &argv, j->h->name, j->h->ctl, false) < 0 || mr_strvec_push(&argv, j->cmdline) < 0)
		mr_err_set(&e, MESHRUN_E_NOMEM, "'%s': out of memory", j->h->name);
	else
		(void)och_start(&j->c, argv.v, j->kind == J_PROC || j->in.len, what, &e);
	mr_debug("openssh: '%s': client %ld for %s", j->h->name, (long)j->c.pid,
		 j->kind == J_RUN ? "a command" : j->kind == J_PROC ? "a process" : "a kill");
	mr_strvec_release(&argv);
	if (e.code)
		job_fail(j, &e);
}

/* Nothing more will happen to j: a proc's job is finished when the proc goes. */
static void job_ended(struct ojob *j)
{
	j->started = j->ended = true;
	j->h->oh->changes++;
	och_close(&j->c);
	if (j->kind != J_PROC)
		j->finished = true;
}

/* The client is reaped and its pipes are drained: the result. */
static void job_end(struct ojob *j)
{
	int st = j->c.wstatus;
	struct meshrun_err e = MESHRUN_ERR_INIT;

	mr_debug("openssh: '%s': client ended: wait status 0x%x, pgid %ld", j->h->name, (unsigned)st, j->pgid);
	och_close(&j->c);
	mr_hal_marker_flush(&j->mark, sink_out_cb, j); /* no marker came: all output */
	if (j->end.done)
		return;
	if (j->timed_out) {
		mr_err_set(&e, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms", j->h->name,
			   j->deadline_ms - j->start_ms);
		job_fail(j, &e);
	} else if (WIFSIGNALED(st)) {
		mr_err_set(&e, MESHRUN_E_NOEXIT, "'%s': no exit status received (the OpenSSH client was killed by signal %d)",
			   j->h->name, WTERMSIG(st));
		job_fail(j, &e);
	} else if (WEXITSTATUS(st) == 255) {
		mr_err_set(&e, MESHRUN_E_NOEXIT,
			   "'%s': no exit status received (the OpenSSH client exited 255: the command was killed by a signal, exited 255, or the connection was lost)",
			   j->h->name);
		job_fail(j, &e);
	} else {
		job_result(j, 0, WEXITSTATUS(st), 0, NULL);
	}
}

static bool job_throttled(const struct ojob *j, bool is_err)
{
	return j->kind == J_PROC && (is_err ? j->perr.len : j->pout.len) > OS_PENDING_MAX;
}

/* ---- the loop ------------------------------------------------------------------ */

static bool host_has_work(const struct os_hal *oh, const struct ohost *h)
{
	if (h->wanted)
		return true;
	for (const struct ojob *j = oh->jobs; j; j = j->next)
		if (j->h == h && !j->started && !j->end.done)
			return true;
	return false;
}

/* Everything that needs no waiting: start masters and clients, timers, ends. */
static void step(struct os_hal *oh)
{
	int64_t now = mr_now_ms();
	int starting = count_starting(oh);

	for (struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->st == H_NEW && host_has_work(oh, h) && starting < oh->base.opts.max_parallel) {
			host_start(h);
			starting += h->st == H_STARTING;
		}
		if (h->st == H_STARTING && !h->m.reaped && now >= h->deadline) {
			och_kill(&h->m);
			mr_err_set(&h->err, MESHRUN_E_CONNECT, "ssh to '%s' (OpenSSH): timed out after %d ms",
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
			och_close(&h->m);
			host_fail_from_stderr(h, "the client exited before the session opened");
		}
		if (h->st == H_READY && och_check(&h->m) && !h->err.code) {
			/* the master is gone: later commands must not connect on their own */
			mr_err_set(&h->err, MESHRUN_E_CONNECT, "ssh to '%s' (OpenSSH): the control master exited",
				   h->name);
			och_close(&h->m);
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

				job_fail(j, &e);
				job_ended(j);
				continue;
			}
		}
		if (j->kind == J_RUN && !j->end.done && !j->timed_out && j->deadline_ms && now >= j->deadline_ms) {
			j->timed_out = true;
			j->kill_at = now + MR_HAL_KILL_GRACE_MS;
			if (j->pgid)
				queue_kill(j->h, j->pgid, SIGKILL);
			if (!j->started) {
				struct meshrun_err e = MESHRUN_ERR_INIT;

				mr_err_set(&e, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms",
					   j->h->name, j->deadline_ms - j->start_ms);
				job_fail(j, &e);
				job_ended(j);
				continue;
			}
		}
		if (!j->started)
			continue;
		if (j->timed_out && j->c.pid > 0 && now >= j->kill_at)
			(void)kill(j->c.pid, SIGKILL);
		if (j->c.pid <= 0 && !j->c.reaped) { /* failed to start: the result is there */
			job_ended(j);
			continue;
		}
		if (och_check(&j->c) &&
		    ((j->c.out_fd < 0 && j->c.err_fd < 0) || now - j->c.reaped_ms >= OS_DRAIN_MS)) {
			job_end(j);
			job_ended(j);
		}
	}
}

static int64_t next_timer(const struct os_hal *oh)
{
	int64_t t = -1;

#define LOWER(x) do { int64_t v_ = (x); if (t < 0 || v_ < t) t = v_; } while (0)
	for (const struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->st == H_STARTING)
			LOWER(h->deadline);
		if (h->m.pid > 0 && h->m.pidfd < 0)
			LOWER(mr_now_ms() + OS_TICK_MS);
	}
	for (const struct ojob *j = oh->jobs; j; j = j->next) {
		if (j->finished || j->ended)
			continue;
		if (j->kind == J_RUN && !j->end.done && !j->timed_out && j->deadline_ms)
			LOWER(j->deadline_ms);
		if (j->timed_out && j->c.pid > 0)
			LOWER(j->kill_at);
		if (j->c.pid > 0 && j->c.pidfd < 0)
			LOWER(mr_now_ms() + OS_TICK_MS);
		if (j->started && j->c.reaped)
			LOWER(j->c.reaped_ms + OS_DRAIN_MS);
	}
#undef LOWER
	return t;
}

static int add_pollfds(struct os_hal *oh, struct mr_pollset *ps)
{
	int rc = 0;

	for (struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->m.pid <= 0)
			continue;
		if (h->m.in_fd >= 0 && h->wdq.len)
			rc |= mr_pollset_add(ps, h->m.in_fd, POLLOUT) < 0;
		if (h->m.out_fd >= 0)
			rc |= mr_pollset_add(ps, h->m.out_fd, POLLIN) < 0;
		if (h->m.err_fd >= 0)
			rc |= mr_pollset_add(ps, h->m.err_fd, POLLIN) < 0;
		if (h->m.pidfd >= 0)
			rc |= mr_pollset_add(ps, h->m.pidfd, POLLIN) < 0;
	}
	for (struct ojob *j = oh->jobs; j; j = j->next) {
		if (j->finished || j->ended || !j->started)
			continue;
		if (j->c.in_fd >= 0 && j->in.len)
			rc |= mr_pollset_add(ps, j->c.in_fd, POLLOUT) < 0;
		if (j->c.out_fd >= 0 && !job_throttled(j, false))
			rc |= mr_pollset_add(ps, j->c.out_fd, POLLIN) < 0;
		if (j->c.err_fd >= 0 && !job_throttled(j, true))
			rc |= mr_pollset_add(ps, j->c.err_fd, POLLIN) < 0;
		if (j->c.pidfd >= 0)
			rc |= mr_pollset_add(ps, j->c.pidfd, POLLIN) < 0;
	}
	return rc ? MESHRUN_E_NOMEM : 0;
}

/* Read and write whatever is ready, without waiting (all fds are non-blocking). */
static void service(struct os_hal *oh)
{
	char buf[OS_CHUNK];
	ssize_t n;

	for (struct ohost *h = oh->hosts; h; h = h->next) {
		if (h->m.pid <= 0)
			continue;
		write_some(&h->m.in_fd, &h->wdq);
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
			write_some(&j->c.in_fd, &j->in);
			if (j->in_closed && !j->in.len)
				mr_close(&j->c.in_fd);
		}
		for (int k = 0; k < 16 && !job_throttled(j, false) &&
				(n = mr_read_or_close(&j->c.out_fd, buf, sizeof(buf))) > 0; k++)
			job_stdout(j, buf, (size_t)n);
		for (int k = 0; k < 16 && !job_throttled(j, true) &&
				(n = mr_read_or_close(&j->c.err_fd, buf, sizeof(buf))) > 0; k++)
			sink(j, true, buf, (size_t)n);
	}
}

/* Free the jobs nobody needs any more (finished, or a proc's that was released). */
static void reap_jobs(struct os_hal *oh)
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

/*
 * One round: step, wait up to timeout_ms for our fds (and the watched ones), step.
 * The callers wait for a condition (a result, a host settled, output to deliver)
 * that they check between rounds; when the steps before the wait already changed
 * something (e.g. read the EOF that ends the last command), there must be no
 * wait: nothing may ever wake it (idle masters, no timer left).
 */
static int pump(struct os_hal *oh, int timeout_ms, bool watch)
{
	size_t first_watch = 0;
	unsigned changes = oh->changes;
	int64_t t;
	int n;

	step(oh);
	service(oh);
	step(oh);
	if (oh->changes != changes)
		timeout_ms = 0;
	mr_pollset_reset(&oh->ps);
	if (add_pollfds(oh, &oh->ps) < 0)
		return MESHRUN_E_NOMEM;
	if (watch && mr_hal_watch_add_pollfds(&oh->base, &oh->ps, &first_watch) < 0)
		return MESHRUN_E_NOMEM;
	t = next_timer(oh);
	if (t >= 0) {
		int left = mr_ms_left(t);

		if (timeout_ms < 0 || left < timeout_ms)
			timeout_ms = left;
	}
	if (oh->ps.nr == 0 && timeout_ms < 0)
		return 0;
	n = poll(oh->ps.fds, oh->ps.nr, timeout_ms);
	if (n < 0 && errno != EINTR)
		return MESHRUN_E_SYS;
	service(oh);
	step(oh);
	if (watch && n > 0)
		mr_hal_watch_dispatch(&oh->base, &oh->ps, first_watch);
	reap_jobs(oh);
	return 0;
}

/* ---- ops --------------------------------------------------------------------- */

static bool runs_pending(const struct os_hal *oh)
{
	for (const struct ojob *j = oh->jobs; j; j = j->next)
		if (j->kind == J_RUN && j->cmd)
			return true;
	return false;
}

static int os_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	struct os_hal *oh = to_os_hal(hal);
	struct mr_buf line = MR_BUF_INIT;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *cmd = &cmds[i];
		const char *host = mr_hal_host_name(cmd->host);
		struct ohost *h = NULL;
		struct ojob *j;

		if (cmd->hal_rc < 0)
			continue;
		if (host_get(oh, host, &h, &cmd->err) < 0) {
			cmd->hal_rc = cmd->err.code;
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		if (h->st == H_FAILED && h->m.pid <= 0)
			h->st = H_NEW; /* a fresh try for a new batch */
		mr_buf_reset(&line);
		if (mr_hal_spawn_cmdline(&line, cmd->argv, NULL, NULL) < 0 ||
		    !(j = job_new(oh, h, J_RUN, mr_buf_cstr(&line)))) {
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->cmd = cmd;
		j->mark.want = true;
		j->deadline_ms = j->start_ms + mr_hal_cmd_timeout_ms(hal, cmd);
		if (cmd->stdin_len && mr_buf_append(&j->in, cmd->stdin_data, cmd->stdin_len) < 0) {
			j->cmd = NULL;
			j->started = j->end.done = j->finished = true;
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->in_closed = true;
	}
	mr_buf_release(&line);
	while (runs_pending(oh)) {
		rc = pump(oh, -1, false);
		if (rc < 0) {
			rc = mr_err_sys(err, "openssh hal: poll");
			break;
		}
	}
	if (rc < 0) {
		struct meshrun_err e = MESHRUN_ERR_INIT;

		mr_err_set(&e, rc, "openssh hal: poll failed");
		for (struct ojob *j = oh->jobs; j; j = j->next)
			if (j->cmd) {
				job_fail(j, &e);
				job_ended(j);
			}
	}
	return rc;
}

static bool hosts_settled(const struct os_hal *oh)
{
	for (const struct ohost *h = oh->hosts; h; h = h->next)
		if (h->wanted && h->st != H_READY && h->st != H_FAILED)
			return false;
	return true;
}

static int os_connect(struct mr_hal *hal, const char *const *hosts, size_t n, struct meshrun_err *errs)
{
	struct os_hal *oh = to_os_hal(hal);
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		struct ohost *h = NULL;

		if (host_get(oh, mr_hal_host_name(hosts[i]), &h, &errs[i]) < 0)
			continue;
		if (h->st == H_FAILED && h->m.pid <= 0)
			h->st = H_NEW;
		h->wanted = true;
	}
	while (!hosts_settled(oh))
		if (pump(oh, -1, false) < 0)
			break;
	for (size_t i = 0; i < n; i++) {
		struct ohost *h = errs[i].code ? NULL : host_find(oh, mr_hal_host_name(hosts[i]));

		if (h && h->st != H_READY) {
			if (h->err.code)
				errs[i] = h->err;
			else
				mr_err_set(&errs[i], MESHRUN_E_CONNECT, "ssh to '%s' (OpenSSH): not connected", h->name);
		}
		if (errs[i].code)
			failed++;
	}
	for (struct ohost *h = oh->hosts; h; h = h->next)
		h->wanted = false;
	return failed;
}

static int os_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		    struct meshrun_err *err)
{
	struct os_hal *oh = to_os_hal(hal);
	const char *host = mr_hal_host_name(sp->host);
	struct mr_buf line = MR_BUF_INIT;
	struct os_proc *p;
	struct ohost *h = NULL;
	struct ojob *j;
	int rc;

	if ((rc = mr_hal_check_env(host, sp->env, err)) < 0 || (rc = host_get(oh, host, &h, err)) < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p || mr_hal_spawn_cmdline(&line, sp->argv, sp->env, sp->cwd) < 0 || mr_proc_init(&p->base, hal, sp) < 0) {
		mr_buf_release(&line);
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	}
	if (h->st == H_FAILED && h->m.pid <= 0)
		h->st = H_NEW;
	j = job_new(oh, h, J_PROC, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (!j) {
		mr_proc_release_common(&p->base);
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	}
	j->mark.want = true;
	j->proc = p;
	p->job = j;
	*out = &p->base;
	return 0;
}

static int os_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;

	if (j->end.done || j->ended || (j->started && j->c.in_fd < 0))
		return 0; /* it is gone, or closed its stdin; its exit is on the way */
	if (mr_buf_append(&j->in, data, len) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "write to '%s' on '%s': out of memory", p->cmdline, p->host);
	write_some(&j->c.in_fd, &j->in);
	return 0;
}

static int os_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;

	(void)err;
	j->in_closed = true;
	if (j->started && !j->in.len)
		mr_close(&j->c.in_fd);
	return 0;
}

static int os_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;

	if (!mr_sh_sig_name(sig))
		return mr_err_set(err, MESHRUN_E_INVAL, "signal %d for '%s' on '%s': cannot name it to a remote host",
				  sig, p->cmdline, p->host);
	if (j->end.done)
		return 0;
	if (!j->pgid) {
		if (j->ended && !j->mark.want)
			return mr_err_set(err, MESHRUN_E_UNSUPPORTED,
					  "signal '%s' on '%s': its process group is unknown (the login shell printed no marker)",
					  p->cmdline, p->host);
		if (sig != SIGCONT || !j->pending_sig) /* CONT follows a TERM: keep the TERM */
			j->pending_sig = sig;
		return 0;
	}
	if (!queue_kill(j->h, j->pgid, sig))
		return mr_err_set(err, MESHRUN_E_NOMEM, "signal '%s' on '%s': out of memory", p->cmdline, p->host);
	return 0;
}

static bool proc_ready(const struct os_proc *p)
{
	const struct ojob *j = p->job;

	return j->pout.len || j->perr.len || j->end.done;
}

static void backlog(struct mr_proc *p, struct mr_proc_backlog *b)
{
	struct ojob *j = to_os_proc(p)->job;

	*b = (struct mr_proc_backlog){ &j->pout, &j->perr, j->end.done, j->end.hal_rc, j->end.status, j->end.sig, &j->end.err };
}

static void deliver(struct os_hal *oh)
{
	mr_hal_deliver_backlogs(&oh->base, backlog);
}

static bool any_ready(struct os_hal *oh)
{
	for (struct mr_proc *p = oh->base.procs; p; p = p->next)
		if (!p->exited && !p->release_pending && proc_ready(to_os_proc(p)))
			return true;
	return false;
}

static int os_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct os_hal *oh = to_os_hal(hal);
	bool running = false;
	int rc;

	for (struct mr_proc *p = hal->procs; p; p = p->next)
		running |= !p->exited;
	if (any_ready(oh) || (!running && !hal->nwatch))
		timeout_ms = 0;
	rc = pump(oh, timeout_ms, true);
	if (rc < 0)
		return mr_err_sys(err, "openssh hal: poll");
	deliver(oh);
	return 0;
}

static int os_poll_prepare(struct mr_hal *hal, struct mr_pollset *ps, int *timeout_ms)
{
	struct os_hal *oh = to_os_hal(hal);
	unsigned changes = oh->changes;
	int64_t t;

	step(oh);
	service(oh);
	step(oh);
	if (any_ready(oh) || oh->changes != changes) /* as in pump() */
		*timeout_ms = 0;
	t = next_timer(oh);
	if (t >= 0) {
		int left = mr_ms_left(t);

		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	}
	return add_pollfds(oh, ps);
}

/* TERM, grace, KILL, grace (over the remote group), then the client itself. */
static void kill_jobs(struct os_hal *oh, struct ojob **js, size_t n)
{
	static const int sigs[] = { SIGTERM, SIGKILL };

	for (size_t k = 0; k < ARRAY_SIZE(sigs); k++) {
		int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;
		bool any = false;

		for (size_t i = 0; i < n; i++) {
			struct ojob *j = js[i];

			if (j->end.done || !j->started)
				continue;
			any = true;
			if (j->pgid)
				queue_kill(j->h, j->pgid, sigs[k]);
			else
				j->pending_sig = sigs[k];
		}
		while (any && mr_ms_left(end) > 0) {
			any = false;
			for (size_t i = 0; i < n; i++)
				any |= js[i]->started && !js[i]->end.done;
			if (any && pump(oh, mr_ms_left(end), false) < 0)
				break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!js[i]->end.done) {
			struct meshrun_err e = MESHRUN_ERR_INIT;

			mr_err_set(&e, MESHRUN_E_CANCELED, "'%s': stopped", js[i]->h->name);
			job_fail(js[i], &e);
		}
		och_kill(&js[i]->c);
		js[i]->started = js[i]->ended = true;
	}
}

static void proc_forget(struct os_proc *p)
{
	struct ojob *j = p->job;

	mr_proc_release_common(&p->base);
	j->proc = NULL;
	j->finished = true;
	j->started = j->ended = true;
	och_kill(&j->c);
	free(p);
}

static void os_proc_release(struct mr_proc *mp)
{
	struct os_proc *p = to_os_proc(mp);
	struct os_hal *oh = to_os_hal(mp->hal);
	struct ojob *j = p->job;

	if (!j->end.done)
		kill_jobs(oh, &j, 1);
	proc_forget(p);
	reap_jobs(oh);
}

/* Let the kill commands still queued or running finish (bounded). */
static void finish_kills(struct os_hal *oh)
{
	int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;

	for (;;) {
		bool any = false;

		for (struct ojob *j = oh->jobs; j; j = j->next)
			any |= j->kind == J_KILL && !j->finished;
		if (!any || mr_ms_left(end) == 0 || pump(oh, mr_ms_left(end), false) < 0)
			break;
	}
}

static void os_free(struct mr_hal *hal)
{
	struct os_hal *oh = to_os_hal(hal);
	struct ojob **js;
	size_t n = 0, i = 0;

	for (struct mr_proc *p = hal->procs; p; p = p->next)
		n++;
	js = calloc(n ? n : 1, sizeof(*js));
	if (js) {
		for (struct mr_proc *p = hal->procs; p; p = p->next)
			js[i++] = to_os_proc(p)->job;
		kill_jobs(oh, js, n);
		free(js);
	}
	while (hal->procs)
		proc_forget(to_os_proc(hal->procs));
	finish_kills(oh);
	for (struct ojob *j = oh->jobs; j; j = j->next)
		j->finished = true;
	reap_jobs(oh);
	/* the watchdogs' last lines ("-PGID": a few bytes, they fit the socket
	 * buffer; never block here on a master that stopped reading), then EOF and
	 * ssh -O exit */
	for (struct ohost *h = oh->hosts; h; h = h->next)
		write_some(&h->m.in_fd, &h->wdq);
	hosts_close(oh);
	while (oh->hosts) {
		struct ohost *h = oh->hosts;

		oh->hosts = h->next;
		och_close(&h->m);
		mr_buf_release(&h->mout);
		mr_buf_release(&h->merr);
		mr_buf_release(&h->wdq);
		free(h->name);
		free(h->ctl);
		free(h);
	}
	mr_pollset_release(&oh->ps);
	free(oh->ssh);
	free(oh->dir);
	mr_hal_release_common(hal);
	free(oh);
}

static int os_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir, struct meshrun_err *err)
{
	struct os_hal *oh = to_os_hal(hal);
	struct ohost *h = NULL;
	int rc;

	host = mr_hal_host_name(host);
	rc = host_get(oh, host, &h, err);
	if (rc < 0)
		return rc;
	if (h->st == H_FAILED && h->m.pid <= 0)
		h->st = H_NEW;
	/* from a run's on_done (hal.h): only queue a line, never pump from inside the pump */
	if (h->st == H_NEW && !hal->run) { /* the line must reach a watchdog: start its master now */
		h->wanted = true;
		while (h->st == H_NEW || h->st == H_STARTING)
			if (pump(oh, -1, false) < 0)
				break;
		h->wanted = false;
	}
	if (h->st != H_READY)
		return mr_err_set(err, h->err.code ? h->err.code : MESHRUN_E_CONNECT,
				  "remove '%s' at exit on '%s': %s", dir, host, h->err.msg[0] ? h->err.msg : "not connected");
	/* a name (no '/') is one in the host's TMPDIR, made and marked there: "M" (sh.h) */
	if (mr_buf_printf(&h->wdq, "%c%s\n", dir[0] == '/' ? 'D' : 'M', dir) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	return 0;
}

/* ssh_config.c's verdict on ssh -G's output: its libssh2_gaps (PKCS11Provider,
 * FIDO keys, ...); a host it cannot parse stays with libssh2, which says why. */
bool mr_hal_openssh_needed(const char *dest, const char *ssh_g, char *why, size_t n)
{
	struct mr_ssh_host_cfg h;
	bool need = false;

	if (!dest || !ssh_g)
		return false;
	memset(&h, 0, sizeof(h));
	if (mr_ssh_host_cfg_from_g(dest, ssh_g, &h, NULL) == 0 && h.libssh2_gaps.nr) {
		need = true;
		if (why && n)
			snprintf(why, n, "%s", h.libssh2_gaps.v[0]);
	}
	mr_ssh_host_cfg_release(&h);
	return need;
}

static const struct mr_hal_ops os_ops = {
	.name = "openssh",
	.kind = MR_HAL_OPENSSH,
	.run = os_run,
	.connect = os_connect,
	.spawn = os_spawn,
	.proc_write = os_proc_write,
	.proc_close_stdin = os_proc_close_stdin,
	.proc_signal = os_proc_signal,
	.poll = os_poll,
	.poll_prepare = os_poll_prepare,
	.proc_release = os_proc_release,
	.free = os_free,
	.remove_at_exit = os_remove_at_exit,
	.makes_dirs = mr_hal_yes,
};

int mr_hal_new_openssh(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	struct os_hal *oh = calloc(1, sizeof(*oh));
	int rc;

	*out = NULL;
	if (!oh || mr_hal_init(&oh->base, &os_ops, opts) < 0) {
		free(oh);
		return mr_err_set(err, MESHRUN_E_NOMEM, "openssh hal: out of memory");
	}
	oh->ssh = mr_which("ssh", NULL);
	if (!oh->ssh) {
		rc = mr_err_set(err, MESHRUN_E_BACKEND, "the OpenSSH client 'ssh' is not on PATH (needed by --ssh openssh)");
		goto fail;
	}
	rc = socket_dir(&oh->dir, err);
	if (rc < 0)
		goto fail;
	*out = &oh->base;
	return 0;
fail:
	free(oh->ssh);
	mr_hal_release_common(&oh->base);
	free(oh);
	return rc;
}
