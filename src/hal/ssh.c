/*
 * ssh.c - the hal's ssh backend over libssh2 (1.10 and later).
 *
 * One poll loop drives everything: every host has one connection (struct conn),
 * made in parallel (at most opts.max_parallel handshakes at once) and reused for
 * every command to that host; every command is a channel (struct job) on it.
 * libssh2 runs non-blocking; we wait in the directions that
 * libssh2_session_block_directions() reports. Measured facts this file relies on
 * are in ../shared/libssh2-notes.md; the important ones:
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
 *  - Host keys: libssh2 prefers ECDSA; we set the host key method order to the
 *    key types known_hosts holds for the host (ed25519 first otherwise).
 *  - TCP_QUICKACK before every poll (sshd's Nagle would add ~40 ms per round).
 *
 * Remote command line: the login shell of the remote user gets
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
#include "common/err.h"
#include "common/fdio.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/ssh_config.h"
#include "hal/ssh_hostkey.h"

#include <fcntl.h>
#include <inttypes.h>
#include <libssh2.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PGID_MARKER "MESHRUN-PGID="
#define PGID_SCAN_MAX 65536          /* give up looking for the marker after this */
#define PROC_PENDING_MAX (4u << 20)  /* stop reading a proc's stream above this */
#define CHAN_CAP_START 64            /* until sshd's MaxSessions refuses one */
#define READ_CHUNK 32768

enum conn_state { C_NEW, C_TCP, C_HANDSHAKE, C_AUTH, C_READY, C_FAILED };
enum auth_step { A_START, A_AGENT_NEXT, A_AGENT_TRY, A_KEY_NEXT, A_KEY_TRY };
enum job_kind { J_RUN, J_PROC, J_WATCHDOG, J_KILL };
/* States in the order a channel goes through them. */
enum job_state { S_WAIT, S_OPEN, S_EXEC, S_IO, S_CLOSE, S_WAITCLOSED, S_FREE };
/* The libssh2 call a job has pending (see conn->owner); S_IO's in this order. */
enum job_op { OP_NONE, OP_WRITE, OP_EOF, OP_READ_OUT, OP_READ_ERR };

struct ssh_hal;
struct conn;

struct job {
	struct conn *conn;            /* NULL once unlinked (no channel work left) */
	struct job *prev, *next;      /* in conn's list */
	enum job_kind kind;
	enum job_state st;
	enum job_op pending;
	LIBSSH2_CHANNEL *ch;
	char *cmdline;
	struct mr_buf in;             /* stdin not yet written */
	size_t write_len;             /* length of the write that returned EAGAIN */
	bool in_closed, eof_sent;
	bool want_pgid;
	struct mr_buf pre;            /* stdout until the marker was seen */
	long pgid;                    /* 0 until known */
	bool registered;              /* pgid told to the watchdog */
	int pending_sig;              /* proc: signal to send once pgid is known */
	/* results */
	bool done;
	int hal_rc, status, sig;
	struct meshrun_err err;
	int64_t start_ms, deadline_ms; /* deadline 0: none */
	struct mr_hal_cmd *cmd;       /* run: where results go (NULL once delivered) */
	struct mr_hal *run_hal;       /* run: told when the result is there (mr_hal_cmd_done) */
	struct ssh_proc *proc;        /* proc: holds a reference (job freed when both gone) */
	struct mr_buf pout, perr;     /* proc: output not yet delivered */
};

struct conn {
	struct ssh_hal *sh;
	struct conn *next;
	struct mr_ssh_host_cfg cfg;   /* cfg.alias is the name the user gave */
	char *user;
	int port;
	int timeout_ms;
	enum mr_ssh_strict strict;
	struct mr_strvec kh_files;    /* known_hosts files read */
	const char *kh_add;           /* where new keys go (into kh_files), or NULL */
	struct mr_strvec keys;        /* key files to try, in order */
	enum conn_state state;
	int fd;
	struct addrinfo *ai_list, *ai_next;
	char addr[INET6_ADDRSTRLEN + 8]; /* "10.0.0.1:22" of the current attempt */
	LIBSSH2_SESSION *s;
	LIBSSH2_KNOWNHOSTS *kh;
	LIBSSH2_AGENT *agent;
	struct libssh2_agent_publickey *agent_id;
	enum auth_step auth;
	size_t key_idx;
	struct mr_buf auth_log;       /* what was tried, for the error message */
	int64_t deadline_ms;
	short revents;
	struct meshrun_err err;       /* why it failed (state C_FAILED) */
	bool broken;                  /* a job hit a transport error: fail the conn */
	bool stale;                   /* ... on an idle reused connection: reconnect once */
	bool wanted;                  /* mr_hal_connect waits for it (no jobs needed) */
	size_t pidx;                  /* its index in the pollset, when polled */
	bool was_idle;                /* READY before this batch: may be stale */
	bool retried;
	struct job *head, *tail;
	struct job *opener, *owner, *watchdog;
	int nchan, chan_cap;
	bool cap_known;
};

struct ssh_proc {
	struct mr_proc base;
	struct job *job;
};

struct ssh_hal {
	struct mr_hal base;
	struct mr_ssh_config *cfg;
	struct conn *conns;
	struct mr_pollset ps;
};

#define to_ssh_hal(h) mr_container_of(h, struct ssh_hal, base)
#define to_ssh_proc(p) mr_container_of(p, struct ssh_proc, base)

/* --- small helpers --- */

static const struct {
	int sig;
	const char *name;
} sig_names[] = {
	{ SIGHUP, "HUP" },     { SIGINT, "INT" },       { SIGQUIT, "QUIT" }, { SIGILL, "ILL" },
	{ SIGTRAP, "TRAP" },   { SIGABRT, "ABRT" },     { SIGBUS, "BUS" },   { SIGFPE, "FPE" },
	{ SIGKILL, "KILL" },   { SIGUSR1, "USR1" },     { SIGSEGV, "SEGV" }, { SIGUSR2, "USR2" },
	{ SIGPIPE, "PIPE" },   { SIGALRM, "ALRM" },     { SIGTERM, "TERM" }, { SIGCHLD, "CHLD" },
	{ SIGCONT, "CONT" },   { SIGSTOP, "STOP" },     { SIGTSTP, "TSTP" }, { SIGTTIN, "TTIN" },
	{ SIGTTOU, "TTOU" },   { SIGURG, "URG" },       { SIGXCPU, "XCPU" }, { SIGXFSZ, "XFSZ" },
	{ SIGVTALRM, "VTALRM" }, { SIGPROF, "PROF" },   { SIGWINCH, "WINCH" }, { SIGIO, "IO" },
	{ SIGSYS, "SYS" },
};

static const char *sig_name(int sig)
{
	for (size_t i = 0; i < ARRAY_SIZE(sig_names); i++)
		if (sig_names[i].sig == sig)
			return sig_names[i].name;
	return NULL;
}

/* Signal names as sshd sends them ("TERM"; tolerate a "SIG" prefix). */
static int sig_from_name(const char *name)
{
	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (size_t i = 0; i < ARRAY_SIZE(sig_names); i++)
		if (!strcmp(sig_names[i].name, name))
			return sig_names[i].sig;
	return 0;
}

static const char *ssh_errmsg(LIBSSH2_SESSION *s, int rc)
{
	static char fallback[48];
	char *msg = NULL;

	if (s)
		libssh2_session_last_error(s, &msg, NULL, 0);
	if (msg && *msg)
		return msg;
	snprintf(fallback, sizeof(fallback), "libssh2 error %d", rc);
	return fallback;
}

/* The transport itself failed (as opposed to the server refusing something). */
static bool is_socket_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_BAD_SOCKET:
	case LIBSSH2_ERROR_DECRYPT:
	case LIBSSH2_ERROR_INVALID_MAC:
		return true;
	default:
		return false;
	}
}

/* Channel-level errors leave the connection usable; everything else breaks it. */
static bool is_conn_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_CHANNEL_FAILURE:
	case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
	case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
	case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
	case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
	case LIBSSH2_ERROR_CHANNEL_CLOSED:
	case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
	case LIBSSH2_ERROR_INVAL:
		return false;
	default:
		return true;
	}
}

static bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* --- jobs --- */

static void job_free(struct job *j)
{
	free(j->cmdline);
	mr_buf_release(&j->in);
	mr_buf_release(&j->pre);
	mr_buf_release(&j->pout);
	mr_buf_release(&j->perr);
	free(j);
}

static void link_job(struct conn *c, struct job *j, bool at_head)
{
	j->conn = c;
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
static void unlink_job(struct job *j)
{
	struct conn *c = j->conn;

	if (c) {
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
		if (j->ch)
			c->nchan--;
		j->ch = NULL; /* freed with the session if not freed already */
		j->conn = NULL;
		j->prev = j->next = NULL;
	}
	if (!j->proc)
		job_free(j);
}

static struct job *new_job(enum job_kind kind, const char *cmdline)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->kind = kind;
	j->cmdline = strdup(cmdline);
	if (!j->cmdline) {
		free(j);
		return NULL;
	}
	j->start_ms = mr_now_ms();
	return j;
}

static int watchdog_line(struct conn *c, char op, long pgid);

/* Record the result once (run: into its command; proc: kept for delivery). */
static void job_result(struct job *j, int hal_rc, int status, int sig, const struct meshrun_err *err)
{
	if (j->done)
		return;
	j->done = true;
	j->hal_rc = hal_rc;
	j->status = status;
	j->sig = sig;
	if (err)
		j->err = *err;
	if (j->registered && j->conn) {
		watchdog_line(j->conn, '-', j->pgid);
		j->registered = false;
	}
	if (j->cmd) {
		struct mr_hal_cmd *cmd = j->cmd;

		cmd->hal_rc = hal_rc;
		cmd->status = status;
		cmd->signal = sig;
		if (err && hal_rc < 0)
			cmd->err = *err;
		cmd->elapsed_ms = mr_now_ms() - j->start_ms;
		j->cmd = NULL;
		mr_hal_cmd_done(j->run_hal, cmd);
	}
}

static void job_fail(struct job *j, int code, const char *fmt, ...) MR_PRINTF(3, 4);
static void job_fail(struct job *j, int code, const char *fmt, ...)
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

static struct job *queue_kill(struct conn *c, long pgid, int sig)
{
	char line[96];
	struct job *j;

	snprintf(line, sizeof(line), "kill -%s -%ld 2>/dev/null; exit 0", sig_name(sig), pgid);
	j = new_job(J_KILL, line);
	if (!j)
		return NULL;
	j->in_closed = true;
	link_job(c, j, true); /* ahead of waiting commands: a kill must not queue behind them */
	return j;
}

static int watchdog_line(struct conn *c, char op, long pgid)
{
	if (!c->watchdog || c->watchdog->in_closed)
		return 0;
	return mr_buf_printf(&c->watchdog->in, "%c%ld\n", op, pgid) < 0 ? MESHRUN_E_NOMEM : 0;
}

static void sink_out(struct job *j, const char *d, size_t n)
{
	if (j->kind == J_RUN && j->cmd)
		mr_hal_append_capped(&j->cmd->out, d, n);
	else if (j->kind == J_PROC)
		mr_buf_append(&j->pout, d, n);
}

static void sink_err(struct job *j, const char *d, size_t n)
{
	if (j->kind == J_RUN && j->cmd)
		mr_hal_append_capped(&j->cmd->errout, d, n);
	else if (j->kind == J_PROC)
		mr_buf_append(&j->perr, d, n);
}

static void got_pgid(struct job *j, long pgid)
{
	struct conn *c = j->conn;

	j->pgid = pgid;
	if (j->kind == J_RUN && j->done && c) /* timed out before we knew whom to kill */
		queue_kill(c, pgid, SIGKILL);
	if (j->kind != J_PROC || !c)
		return;
	if (watchdog_line(c, '+', pgid) == 0 && c->watchdog)
		j->registered = true;
	if (j->pending_sig) {
		queue_kill(c, pgid, j->pending_sig);
		j->pending_sig = 0;
	}
}

/* stdout of a command: find and strip the marker line, pass the rest on. */
static void job_stdout(struct job *j, const char *d, size_t n)
{
	const char *pre, *m, *nl, *digits;
	long pgid = 0;

	if (!j->want_pgid) {
		sink_out(j, d, n);
		return;
	}
	mr_buf_append(&j->pre, d, n);
	pre = mr_buf_cstr(&j->pre);
	m = memmem(pre, j->pre.len, PGID_MARKER, strlen(PGID_MARKER));
	nl = m ? memchr(m, '\n', j->pre.len - (size_t)(m - pre)) : NULL;
	if (!nl) {
		if (j->pre.len > PGID_SCAN_MAX) { /* no marker: a strange login shell */
			j->want_pgid = false;
			sink_out(j, pre, j->pre.len);
			mr_buf_release(&j->pre);
		}
		return;
	}
	for (digits = m + strlen(PGID_MARKER); digits < nl && *digits >= '0' && *digits <= '9'; digits++)
		if (pgid < 100000000)
			pgid = pgid * 10 + (*digits - '0');
	j->want_pgid = false;
	sink_out(j, pre, (size_t)(m - pre));
	sink_out(j, nl + 1, j->pre.len - (size_t)(nl + 1 - pre));
	mr_buf_release(&j->pre);
	if (digits == nl && pgid > 1)
		got_pgid(j, pgid);
}

/* --- connections --- */

static void agent_close(struct conn *c)
{
	if (c->agent) {
		libssh2_agent_disconnect(c->agent);
		libssh2_agent_free(c->agent);
		c->agent = NULL;
	}
}

static void conn_teardown(struct conn *c, bool polite)
{
	agent_close(c);
	if (c->s && polite && c->state == C_READY)
		libssh2_session_disconnect(c->s, "meshrun done"); /* one try, non-blocking */
	/* Close the socket first: with it gone, session_free cannot wait on it. */
	mr_close(&c->fd);
	if (c->kh) {
		libssh2_knownhost_free(c->kh);
		c->kh = NULL;
	}
	if (c->s) {
		libssh2_session_free(c->s);
		c->s = NULL;
	}
	if (c->ai_list) {
		freeaddrinfo(c->ai_list);
		c->ai_list = c->ai_next = NULL;
	}
	c->opener = c->owner = NULL;
	c->nchan = 0;
}

/* The connection is gone: every job on it gets a result and is unlinked. */
static void conn_fail(struct conn *c)
{
	bool was_ready = c->state == C_READY;

	for (struct job *j = c->head, *next; j; j = next) {
		next = j->next;
		j->ch = NULL;
		if (!j->done) {
			if (was_ready && j->st > S_OPEN)
				job_fail(j, MESHRUN_E_NOEXIT, "%s: no exit status received", c->err.msg);
			else
				job_fail(j, c->err.code == MESHRUN_E_NOEXIT ? MESHRUN_E_CONNECT : c->err.code,
					 "%s", c->err.msg);
		}
		unlink_job(j);
	}
	c->state = C_FAILED;
	c->broken = c->stale = false;
	conn_teardown(c, false);
}

static void conn_set_err(struct conn *c, int code, const char *fmt, ...) MR_PRINTF(3, 4);
static void conn_set_err(struct conn *c, int code, const char *fmt, ...)
{
	char msg[MESHRUN_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mr_err_set(&c->err, code, "ssh to '%s' (%s): %s", c->cfg.alias,
		   c->addr[0] ? c->addr : c->cfg.hostname, msg);
}

static void conn_free(struct conn *c)
{
	for (struct job *j = c->head, *next; j; j = next) {
		next = j->next;
		j->ch = NULL;
		unlink_job(j);
	}
	conn_teardown(c, true);
	mr_ssh_host_cfg_release(&c->cfg);
	free(c->user);
	mr_strvec_release(&c->kh_files);
	mr_strvec_release(&c->keys);
	mr_buf_release(&c->auth_log);
	free(c);
}

static int push_unique(struct mr_strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 0;
	return mr_strvec_push(v, s);
}

static struct conn *find_conn(struct ssh_hal *sh, const char *host)
{
	for (struct conn *c = sh->conns; c; c = c->next)
		if (!strcmp(c->cfg.alias, host))
			return c;
	return NULL;
}

/* The connection for host (created, not yet started, on first use). */
static int get_conn(struct ssh_hal *sh, const char *host, struct conn **out, struct meshrun_err *err)
{
	const struct mr_hal_opts *o = &sh->base.opts;
	struct conn *c = find_conn(sh, host);
	const char *home = mr_ssh_home();
	const char *u;
	char path[4096];
	int rc;

	if (c) {
		*out = c;
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", host);
	c->fd = -1;
	c->sh = sh;
	c->chan_cap = CHAN_CAP_START;
	rc = mr_ssh_config_lookup(sh->cfg, host, &c->cfg, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	u = o->user ? o->user : c->cfg.user ? c->cfg.user : getenv("USER");
	c->user = strdup(u && *u ? u : "root");
	c->port = c->cfg.port ? c->cfg.port : 22;
	c->timeout_ms = c->cfg.connect_timeout_ms ? c->cfg.connect_timeout_ms : o->connect_timeout_ms;
	c->strict = c->cfg.strict ? c->cfg.strict : MR_SSH_STRICT_YES;
	if (o->accept_new_hostkeys && c->strict == MR_SSH_STRICT_YES)
		c->strict = MR_SSH_STRICT_ACCEPT_NEW;
	rc = 0;
	/* The first file named (option, UserKnownHostsFile, default) takes new keys. */
	if (o->known_hosts) {
		rc |= mr_strvec_push(&c->kh_files, o->known_hosts);
	} else if (c->cfg.known_hosts.nr) {
		rc |= mr_strvec_pushv(&c->kh_files, c->cfg.known_hosts.v);
	} else if (!c->cfg.known_hosts_none) {
		snprintf(path, sizeof(path), "%s/.ssh/known_hosts", home);
		rc |= mr_strvec_push(&c->kh_files, path);
	}
	bool have_user_file = c->kh_files.nr > 0;

	if (!o->known_hosts && file_exists("/etc/ssh/ssh_known_hosts"))
		rc |= push_unique(&c->kh_files, "/etc/ssh/ssh_known_hosts");
	if (o->identity)
		rc |= push_unique(&c->keys, o->identity);
	for (size_t i = 0; i < c->cfg.identity_files.nr; i++)
		rc |= push_unique(&c->keys, c->cfg.identity_files.v[i]);
	snprintf(path, sizeof(path), "%s/.ssh/id_ed25519", home);
	rc |= push_unique(&c->keys, path);
	snprintf(path, sizeof(path), "%s/.ssh/id_ecdsa", home);
	rc |= push_unique(&c->keys, path);
	if (rc || !c->user) {
		conn_free(c);
		return mr_err_set(err, MESHRUN_E_NOMEM, "ssh to '%s': out of memory", host);
	}
	c->kh_add = have_user_file ? c->kh_files.v[0] : NULL;
	c->next = sh->conns;
	sh->conns = c;
	*out = c;
	return 0;
}

/* Before new work: a failed connection gets a fresh try; an idle one may be stale. */
static void conn_prepare(struct conn *c)
{
	if (c->state == C_READY && !c->head)
		c->was_idle = true;
	if (c->state != C_FAILED || c->head)
		return;
	mr_err_clear(&c->err);
	c->state = C_NEW;
	c->retried = false;
	c->addr[0] = '\0';
}

/* Try the next address; C_TCP when a connect is in progress, else C_FAILED. */
static void conn_hostkey(const struct conn *c, struct mr_ssh_hostkey *k)
{
	k->s = c->s;
	k->kh = c->kh;
	k->hostname = c->cfg.hostname;
	k->alias = c->cfg.alias;
	k->port = c->port;
	k->strict = c->strict;
	k->files = &c->kh_files;
	k->add_to = c->kh_add;
}

static void conn_try_next_addr(struct conn *c)
{
	int saved = 0;

	mr_close(&c->fd);
	while (c->ai_next) {
		struct addrinfo *ai = c->ai_next;
		char host[INET6_ADDRSTRLEN] = "?";
		int one = 1;

		c->ai_next = ai->ai_next;
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
		snprintf(c->addr, sizeof(c->addr), ai->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
			 host, c->port);
		c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
			c->state = C_TCP;
			return;
		}
		saved = errno;
		mr_close(&c->fd);
	}
	conn_set_err(c, MESHRUN_E_CONNECT, "connect: %s", strerror(saved ? saved : EHOSTUNREACH));
	c->state = C_FAILED;
}

static int count_connecting(const struct ssh_hal *sh)
{
	int n = 0;

	for (const struct conn *c = sh->conns; c; c = c->next)
		if (c->state == C_TCP || c->state == C_HANDSHAKE || c->state == C_AUTH)
			n++;
	return n;
}

static void conn_start(struct conn *c)
{
	struct addrinfo hints = { 0 };
	char port[16];
	int rc;

	c->deadline_ms = mr_now_ms() + c->timeout_ms;
	c->addr[0] = '\0';
	c->auth = A_START;
	c->key_idx = 0;
	mr_buf_reset(&c->auth_log);
	c->chan_cap = CHAN_CAP_START;
	c->cap_known = false;
	c->was_idle = false;
	c->s = libssh2_session_init_ex(NULL, NULL, NULL, c);
	if (!c->s) {
		conn_set_err(c, MESHRUN_E_NOMEM, "libssh2_session_init failed");
		c->state = C_FAILED;
		return;
	}
	libssh2_session_set_blocking(c->s, 0);
	c->kh = libssh2_knownhost_init(c->s);
	for (size_t i = 0; c->kh && i < c->kh_files.nr; i++)
		if (file_exists(c->kh_files.v[i]) &&
		    libssh2_knownhost_readfile(c->kh, c->kh_files.v[i], LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0) {
			conn_set_err(c, MESHRUN_E_PARSE, "cannot read known_hosts file '%s'",
				     c->kh_files.v[i]);
			c->state = C_FAILED;
			return;
		}
	{
		struct mr_ssh_hostkey k;

		conn_hostkey(c, &k);
		mr_ssh_hostkey_prefer(&k);
	}

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", c->port);
	/* Name resolution blocks (getaddrinfo); IP addresses and /etc/hosts are instant. */
	rc = getaddrinfo(c->cfg.hostname, port, &hints, &c->ai_list);
	if (rc) {
		conn_set_err(c, MESHRUN_E_CONNECT, "cannot resolve '%s': %s", c->cfg.hostname,
			     gai_strerror(rc));
		c->state = C_FAILED;
		return;
	}
	c->ai_next = c->ai_list;
	conn_try_next_addr(c);
}

enum auth_res { AUTH_WAIT, AUTH_ENDED, AUTH_REFUSED };

/*
 * The rc of one publickey attempt (agent or key file), alike for both: success
 * or a transport error ends authentication (C_READY or C_FAILED); any other
 * error is a refusal, and the caller tries the next identity.
 */
static enum auth_res auth_attempt(struct conn *c, int rc)
{
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return AUTH_WAIT;
	if (rc == 0) {
		agent_close(c);
		c->state = C_READY;
		return AUTH_ENDED;
	}
	if (is_socket_error(rc)) {
		conn_set_err(c, MESHRUN_E_CONNECT, "during authentication: %s", ssh_errmsg(c->s, rc));
		c->state = C_FAILED;
		return AUTH_ENDED;
	}
	return AUTH_REFUSED;
}

/* One step of publickey authentication; C_READY or C_FAILED when it ends. */
static bool conn_auth_step(struct conn *c)
{
	enum auth_res res;
	int rc;

	for (;;) {
		switch (c->auth) {
		case A_START: {
			const char *sock = getenv("SSH_AUTH_SOCK");

			c->auth = A_KEY_NEXT;
			if (!sock || !*sock)
				break;
			c->agent = libssh2_agent_init(c->s);
			/* The agent is a local unix socket: these calls block, briefly. */
			if (!c->agent || libssh2_agent_connect(c->agent) < 0 ||
			    libssh2_agent_list_identities(c->agent) < 0) {
				mr_buf_puts(&c->auth_log, "ssh-agent not usable; ");
				agent_close(c);
				break;
			}
			c->agent_id = NULL;
			c->auth = A_AGENT_NEXT;
			break;
		}
		case A_AGENT_NEXT:
			if (libssh2_agent_get_identity(c->agent, &c->agent_id, c->agent_id) != 0) {
				agent_close(c);
				c->auth = A_KEY_NEXT;
				break;
			}
			c->auth = A_AGENT_TRY;
			break;
		case A_AGENT_TRY:
			rc = libssh2_agent_userauth(c->agent, c->user, c->agent_id);
			res = auth_attempt(c, rc);
			if (res != AUTH_REFUSED)
				return res == AUTH_ENDED;
			mr_buf_printf(&c->auth_log, "agent key '%s' refused; ",
				      c->agent_id && c->agent_id->comment ? c->agent_id->comment : "?");
			c->auth = A_AGENT_NEXT;
			break;
		case A_KEY_NEXT:
			while (c->key_idx < c->keys.nr && !file_exists(c->keys.v[c->key_idx]))
				c->key_idx++;
			if (c->key_idx == c->keys.nr) {
				conn_set_err(c, MESHRUN_E_AUTH, "authentication as '%s' failed: %s%s",
					     c->user, mr_buf_cstr(&c->auth_log),
					     c->auth_log.len ? "no key left to try" :
							       "no ssh-agent and no key file found");
				c->state = C_FAILED;
				return true;
			}
			c->auth = A_KEY_TRY;
			break;
		case A_KEY_TRY: {
			const char *path = c->keys.v[c->key_idx];

			rc = libssh2_userauth_publickey_fromfile_ex(c->s, c->user, (unsigned)strlen(c->user),
								    NULL, path, NULL);
			res = auth_attempt(c, rc);
			if (res != AUTH_REFUSED)
				return res == AUTH_ENDED;
			mr_buf_printf(&c->auth_log, "key '%s' %s; ", path,
				      rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED || rc == LIBSSH2_ERROR_FILE ?
					      "unreadable (bad file or needs a passphrase)" : "refused");
			c->key_idx++;
			c->auth = A_KEY_NEXT;
			break;
		}
		}
	}
}

/* Advance connection set-up; true when the state changed. */
static bool conn_connect_step(struct conn *c)
{
	int rc;

	if (c->state >= C_TCP && c->state <= C_AUTH && mr_now_ms() >= c->deadline_ms) {
		conn_set_err(c, MESHRUN_E_CONNECT, "connect timed out after %d ms", c->timeout_ms);
		c->state = C_FAILED;
		return true;
	}
	switch (c->state) {
	case C_TCP: {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		if (!(c->revents & (POLLOUT | POLLERR | POLLHUP)))
			return false;
		c->revents = 0;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr) {
			if (c->ai_next) {
				conn_try_next_addr(c);
				return true;
			}
			conn_set_err(c, MESHRUN_E_CONNECT, "connect: %s", strerror(soerr));
			c->state = C_FAILED;
			return true;
		}
		c->state = C_HANDSHAKE;
		return true;
	}
	case C_HANDSHAKE:
		rc = libssh2_session_handshake(c->s, c->fd);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return false;
		if (rc) {
			conn_set_err(c, MESHRUN_E_CONNECT, "ssh handshake failed: %s", ssh_errmsg(c->s, rc));
			c->state = C_FAILED;
			return true;
		}
		{
			struct mr_ssh_hostkey k;
			char msg[MESHRUN_ERR_MSG_MAX - 64];

			conn_hostkey(c, &k);
			if (!mr_ssh_hostkey_check(&k, msg, sizeof(msg))) {
				conn_set_err(c, MESHRUN_E_HOSTKEY, "%s", msg);
				c->state = C_FAILED;
				return true;
			}
		}
		c->state = C_AUTH;
		return true;
	case C_AUTH:
		return conn_auth_step(c);
	default:
		return false;
	}
}

/* --- channel steps --- */

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

	if (is_conn_error(rc)) {
		conn_set_err(c, MESHRUN_E_NOEXIT, "connection lost (%s: %s)", what, ssh_errmsg(c->s, rc));
		c->broken = true;
		return;
	}
	job_fail(j, j->st >= S_IO ? MESHRUN_E_NOEXIT : MESHRUN_E_EXEC, "'%s': %s: %s",
		 c->cfg.alias, what, ssh_errmsg(c->s, rc));
	/* The channel stays with the session (freeing it could wait on the server). */
	unlink_job(j);
}

static bool job_throttled(const struct job *j, bool err)
{
	return j->kind == J_PROC && (err ? j->perr.len : j->pout.len) > PROC_PENDING_MAX;
}

/* Returns true on progress; may unlink (and free) j. */
static bool job_io(struct job *j, bool *gone)
{
	struct conn *c = j->conn;
	enum job_op start = c->owner == j ? j->pending : OP_WRITE;
	bool progress = false;
	char buf[READ_CHUNK];
	ssize_t n;

	if (start <= OP_WRITE && j->in.len) {
		size_t len = j->write_len ? j->write_len : MR_MIN(j->in.len, (size_t)READ_CHUNK);

		n = libssh2_channel_write(j->ch, j->in.p, len);
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
			mr_buf_consume(&j->in, (size_t)n);
			progress = true;
		}
	}
	if (start <= OP_EOF && j->in_closed && !j->in.len && !j->eof_sent) {
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
		if (job_throttled(j, stream))
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
				if (job_throttled(j, stream))
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
		if (j->want_pgid) { /* no marker came: it is all output */
			j->want_pgid = false;
			sink_out(j, mr_buf_cstr(&j->pre), j->pre.len);
			mr_buf_release(&j->pre);
		}
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
		int sig = sig_from_name(signame);

		if (sig)
			job_result(j, 0, 0, sig, NULL);
		else
			job_fail(j, MESHRUN_E_PROTO, "'%s': killed by unknown signal '%s'",
				 c->cfg.alias, signame);
		libssh2_free(c->s, signame);
		return;
	}
	job_result(j, 0, libssh2_channel_get_exit_status(j->ch), 0, NULL);
}

enum chan_res { CH_WAIT, CH_FAILED, CH_DONE };

/*
 * The rc of one channel call in job_step(): EAGAIN waits (note_eagain); an error
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

/* Advance one job as far as it goes without waiting. true on progress. */
static bool job_step(struct job *j)
{
	struct conn *c = j->conn;
	bool progress = false, gone = false;
	enum chan_res res;
	int rc;

	if (c->owner && c->owner != j)
		return false;
	if (j->kind == J_RUN && !j->done && j->deadline_ms && mr_now_ms() >= j->deadline_ms) {
		job_fail(j, MESHRUN_E_TIMEOUT, "'%s': command timed out after %" PRId64 " ms",
			 c->cfg.alias, j->deadline_ms - j->start_ms);
		if (j->st == S_WAIT || j->st == S_OPEN) {
			if (j->st == S_WAIT) {
				unlink_job(j);
				return true;
			}
		} else if (j->pgid && j->st < S_CLOSE) {
			queue_kill(c, j->pgid, SIGKILL); /* the channel then closes by itself */
		}
		progress = true;
	}
	switch (j->st) {
	case S_WAIT: {
		int limit = j->kind == J_KILL || !c->cap_known ? c->chan_cap : c->chan_cap - 1;

		if (c->opener || c->nchan >= limit)
			return progress;
		c->opener = j;
		j->st = S_OPEN;
	}
		/* fallthrough */
	case S_OPEN:
		j->ch = libssh2_channel_open_session(c->s);
		if (!j->ch) {
			rc = libssh2_session_last_errno(c->s);
			if (rc == LIBSSH2_ERROR_EAGAIN) {
				note_eagain(j, OP_NONE);
				return progress;
			}
			note_done(j);
			c->opener = NULL;
			if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE) {
				bool short_lived = false;

				for (struct job *o = c->head; o; o = o->next)
					if (o->ch && (o->kind == J_RUN || o->kind == J_KILL))
						short_lived = true;
				if (c->nchan > 0 && (short_lived || j->kind == J_RUN || j->kind == J_KILL)) {
					/* sshd's MaxSessions: wait for a channel to close */
					c->chan_cap = c->nchan;
					c->cap_known = true;
					j->st = S_WAIT;
					return true;
				}
				job_fail(j, MESHRUN_E_CONNECT,
					 "'%s': sshd refused another session channel (%d open; raise MaxSessions in its sshd_config)",
					 c->cfg.alias, c->nchan);
				unlink_job(j);
				return true;
			}
			if (is_conn_error(rc) && c->was_idle && !c->retried && c->nchan == 0) {
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
		c->nchan++;
		j->st = S_EXEC;
		progress = true;
		/* fallthrough */
	case S_EXEC:
		res = chan_call(j, libssh2_channel_exec(j->ch, j->cmdline), "exec");
		if (res != CH_DONE)
			return res == CH_FAILED || progress;
		c->was_idle = false;
		j->st = S_IO;
		progress = true;
		/* fallthrough */
	case S_IO:
		progress |= job_io(j, &gone);
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
		j->ch = NULL;
		c->nchan--;
		unlink_job(j);
		return true;
	}
	return progress;
}

/* Step a connection and its jobs until nothing moves without waiting. */
static void conn_step(struct conn *c)
{
	bool progress;

	if (c->state == C_NEW) {
		if ((!c->head && !c->wanted) || count_connecting(c->sh) >= c->sh->base.opts.max_parallel)
			return;
		conn_start(c);
	}
	while (c->state >= C_TCP && c->state <= C_AUTH)
		if (!conn_connect_step(c))
			break;
	if (c->state == C_FAILED) {
		if (c->head || c->s || c->fd >= 0)
			conn_fail(c);
		return;
	}
	if (c->state != C_READY)
		return;
	do {
		progress = false;
		for (struct job *j = c->head, *next; j; j = next) {
			next = j->next;
			if (job_step(j))
				progress = true;
			if (c->broken)
				break;
		}
		if (c->broken) {
			if (c->stale) {
				/* reconnect and keep the (unstarted) jobs */
				for (struct job *j = c->head; j; j = j->next) {
					j->ch = NULL;
					j->st = S_WAIT;
				}
				conn_teardown(c, false);
				mr_err_clear(&c->err);
				c->broken = c->stale = false;
				c->retried = true;
				c->state = C_NEW;
				conn_step(c);
				return;
			}
			conn_fail(c);
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
		if (c->state >= C_TCP && c->state <= C_AUTH && (d < 0 || c->deadline_ms < d))
			d = c->deadline_ms;
		for (const struct job *j = c->head; j; j = j->next)
			if (j->kind == J_RUN && !j->done && j->deadline_ms &&
			    (d < 0 || j->deadline_ms < d))
				d = j->deadline_ms;
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
		if (j->st != S_IO || !job_throttled(j, false) || !job_throttled(j, true))
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
		if (!ev)
			continue;
		if (c->state >= C_HANDSHAKE) {
			int one = 1; /* cleared by the kernel after each ACK: set it every time */

			setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
		}
		if (mr_pollset_add(ps, c->fd, ev) < 0)
			return MESHRUN_E_NOMEM;
		if (mark) {
			c->pidx = ps->nr - 1;
			c->revents = -1;
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

/* --- remote command lines --- */

static int build_cmdline(struct mr_buf *b, char *const *argv, char *const *env, const char *cwd)
{
	int rc = mr_buf_puts(b, "echo " PGID_MARKER "$$; ");

	if (cwd) {
		rc |= mr_buf_puts(b, "cd ");
		rc |= mr_shquote(b, cwd);
		rc |= mr_buf_puts(b, " && ");
	}
	rc |= mr_buf_puts(b, "exec ");
	if (env && env[0]) {
		rc |= mr_buf_puts(b, "env ");
		for (size_t i = 0; env[i]; i++) {
			rc |= mr_shquote(b, env[i]);
			rc |= mr_buf_putc(b, ' ');
		}
	}
	rc |= mr_shquote_argv(b, argv);
	return rc ? -1 : 0;
}

static int check_env(const char *host, char *const *env, struct meshrun_err *err)
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

/* Ensure the host's watchdog exists (first spawn there). */
static void ensure_watchdog(struct conn *c)
{
	struct job *w;

	if (c->watchdog)
		return;
	w = new_job(J_WATCHDOG, mr_hal_watchdog_script);
	if (!w)
		return; /* best effort: the proc still runs, only the drop guard is missing */
	link_job(c, w, true);
	c->watchdog = w;
}

/* --- ops --- */

static bool runs_done(struct ssh_hal *sh, void *arg)
{
	struct mr_hal_cmd *cmds = arg;

	(void)sh;
	(void)cmds;
	for (struct conn *c = sh->conns; c; c = c->next)
		for (struct job *j = c->head; j; j = j->next)
			if (j->kind == J_RUN && j->cmd)
				return false;
	return true;
}

static int ssh_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	struct ssh_hal *sh = to_ssh_hal(hal);
	struct mr_buf line = MR_BUF_INIT;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *cmd = &cmds[i];
		const char *host = mr_hal_host_name(cmd->host);
		struct conn *c = NULL;
		struct job *j;

		if (cmd->hal_rc < 0)
			continue;
		if (get_conn(sh, host, &c, &cmd->err) < 0) {
			cmd->hal_rc = cmd->err.code;
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		mr_buf_reset(&line);
		if (build_cmdline(&line, cmd->argv, NULL, NULL) < 0 ||
		    !(j = new_job(J_RUN, mr_buf_cstr(&line)))) {
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			continue;
		}
		j->cmd = cmd;
		j->run_hal = hal;
		j->want_pgid = true;
		j->deadline_ms = j->start_ms + mr_hal_cmd_timeout_ms(hal, cmd);
		if (cmd->stdin_len && mr_buf_append(&j->in, cmd->stdin_data, cmd->stdin_len) < 0) {
			job_free(j);
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			continue;
		}
		j->in_closed = true;
		conn_prepare(c);
		link_job(c, j, false);
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
				if (j->cmd)
					job_fail(j, rc, "'%s': %s", c->cfg.alias, err ? err->msg : "poll failed");
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

	for (size_t i = 0; i < n; i++) {
		struct conn *c = NULL;

		if (get_conn(sh, mr_hal_host_name(hosts[i]), &c, &errs[i]) < 0)
			continue;
		conn_prepare(c);
		c->wanted = true;
	}
	while (!conns_settled(sh, NULL))
		if (pump(sh, -1, false, conns_settled, NULL) < 0)
			break;
	for (size_t i = 0; i < n; i++) {
		struct conn *c = errs[i].code ? NULL : find_conn(sh, mr_hal_host_name(hosts[i]));

		if (c && c->state != C_READY) {
			if (c->err.code)
				errs[i] = c->err;
			else
				mr_err_set(&errs[i], MESHRUN_E_CONNECT, "ssh to '%s': not connected",
					   c->cfg.alias);
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

	rc = check_env(host, sp->env, err);
	if (rc < 0)
		return rc;
	rc = get_conn(sh, host, &c, err);
	if (rc < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p || build_cmdline(&line, sp->argv, sp->env, sp->cwd) < 0 ||
	    !(j = new_job(J_PROC, mr_buf_cstr(&line))))
		goto nomem;
	if (mr_proc_init(&p->base, hal, sp) < 0)
		goto nomem;
	mr_buf_release(&line);
	j->want_pgid = true;
	j->proc = p;
	p->job = j;
	conn_prepare(c);
	ensure_watchdog(c);
	link_job(c, j, false);
	*out = &p->base;
	return 0;
nomem:
	mr_buf_release(&line);
	if (j)
		job_free(j);
	free(p);
	return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
}

static int ssh_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;

	if (j->done || !j->conn)
		return 0; /* it is gone; its exit is on the way */
	if (mr_buf_append(&j->in, data, len) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "write to '%s' on '%s': out of memory",
				  p->cmdline, p->host);
	return 0;
}

static int ssh_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;

	(void)err;
	j->in_closed = true;
	return 0;
}

static int ssh_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct job *j = to_ssh_proc(p)->job;

	if (!sig_name(sig))
		return mr_err_set(err, MESHRUN_E_INVAL, "signal %d for '%s' on '%s': cannot name it to a remote host",
				  sig, p->cmdline, p->host);
	if (j->done || !j->conn)
		return 0;
	if (!j->pgid) {
		if (j->st >= S_IO && !j->want_pgid)
			return mr_err_set(err, MESHRUN_E_UNSUPPORTED,
					  "signal '%s' on '%s': its process group is unknown (the login shell printed no marker)",
					  p->cmdline, p->host);
		j->pending_sig = sig;
		return 0;
	}
	if (!queue_kill(j->conn, j->pgid, sig))
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
		if (j->pout.len || j->perr.len || j->done)
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

static void deliver(struct ssh_hal *sh)
{
	struct mr_proc **snap;
	size_t n = 0, i = 0;

	for (struct mr_proc *p = sh->base.procs; p; p = p->next)
		n++;
	if (!n)
		return;
	snap = calloc(n, sizeof(*snap));
	if (!snap)
		return; /* delivered next time */
	for (struct mr_proc *p = sh->base.procs; p && i < n; p = p->next)
		snap[i++] = p;
	for (i = 0; i < n; i++) {
		struct mr_proc *p = snap[i];
		struct job *j = to_ssh_proc(p)->job;
		size_t len;
		char *d;

		if (p->exited || p->release_pending)
			continue;
		if (j->pout.len) {
			d = mr_buf_detach(&j->pout, &len);
			mr_proc_deliver_stdout(p, d, len);
			free(d);
		}
		if (j->perr.len) {
			d = mr_buf_detach(&j->perr, &len);
			mr_proc_deliver_stderr(p, d, len);
			free(d);
		}
		if (j->done && !j->pout.len && !j->perr.len)
			mr_proc_deliver_exit(p, j->hal_rc, j->status, j->sig,
					     j->hal_rc < 0 ? &j->err : NULL);
	}
	free(snap);
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
	return ((struct job *)arg)->done;
}

/* Signal a proc's process group; before its pgid is known, once it is. */
static void job_kill(struct job *j, int sig)
{
	if (j->pgid)
		queue_kill(j->conn, j->pgid, sig);
	else
		j->pending_sig = sig;
}

/* TERM, grace, KILL, grace: wait (no callbacks) until j has an exit or time is up. */
static void kill_and_wait(struct ssh_hal *sh, struct job *j)
{
	static const int sigs[] = { SIGTERM, SIGKILL };

	for (size_t k = 0; k < ARRAY_SIZE(sigs) && !j->done && j->conn; k++) {
		int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;

		job_kill(j, sigs[k]);
		while (!j->done && j->conn && mr_now_ms() < end)
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
			job_free(j);
		else if (j->st == S_WAIT) /* never started: nothing to wait for */
			unlink_job(j);
	}
	free(p);
}

static void ssh_proc_release(struct mr_proc *mp)
{
	struct ssh_proc *p = to_ssh_proc(mp);
	struct ssh_hal *sh = to_ssh_hal(mp->hal);

	if (!p->job->done)
		kill_and_wait(sh, p->job);
	proc_forget(p);
}

static bool procs_done(struct ssh_hal *sh, void *arg)
{
	(void)arg;
	for (struct mr_proc *p = sh->base.procs; p; p = p->next) {
		struct job *j = to_ssh_proc(p)->job;

		if (!j->done && j->conn)
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

			if (j->done || !j->conn)
				continue;
			job_kill(j, sigs[k]);
		}
		while (!procs_done(sh, NULL) && mr_now_ms() < end)
			if (pump(sh, mr_ms_left(end), false, procs_done, NULL) < 0)
				break;
	}
	while (hal->procs)
		proc_forget(to_ssh_proc(hal->procs));
	while (sh->conns) {
		struct conn *c = sh->conns;

		sh->conns = c->next;
		conn_free(c);
	}
	mr_pollset_release(&sh->ps);
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
	rc = get_conn(to_ssh_hal(hal), host, &c, err);
	if (rc < 0)
		return rc;
	conn_prepare(c);
	ensure_watchdog(c);
	if (!c->watchdog || mr_buf_printf(&c->watchdog->in, "D%s\n", dir) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	return 0;
}

static const struct mr_hal_ops ssh_ops = {
	.name = "ssh",
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
};

int mr_hal_new_ssh(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
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
	rc = mr_ssh_config_load(&sh->cfg, sh->base.opts.ssh_config, err);
	if (rc < 0) {
		mr_hal_release_common(&sh->base);
		free(sh);
		libssh2_exit();
		return rc;
	}
	*out = &sh->base;
	return 0;
}
