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
 *   struct persist_hal                    struct pjob (one per command/process)
 *     fd: the daemon's socket               id: ours, in every frame about it
 *     in: bytes read, not yet a frame       cmd (run) or proc (spawn)
 *     jobs: what the daemon runs for us     pout/perr/exit until delivered
 *
 * Finding the daemon: its socket name is a hash of what decides who we are to
 * the hosts and how they resolve (mr_hal_persist_path: the ssh_config files' identity,
 * size and mtime too, so that the daemon's cached `ssh -G` answers and
 * connections never outlive an edit of the config: an edited config finds a new
 * daemon, the old one idles out; an Include'd file is not watched). A connect that finds nobody (no file, or a stale
 * socket: ECONNREFUSED) starts one under a lock file: bind and listen here,
 * then fork twice; the grandchild, in its own session with every other fd
 * closed, is the daemon. So a client never waits on a daemon that is not
 * there, and the HELLO exchange is bounded (PERSIST_HELLO_MS).
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/persist/persist_proto.h"
#include "hal/ssh_config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PERSIST_HELLO_MS 3000   /* a daemon that does not greet within this is not used */
#define PERSIST_LOCK_MS 3000    /* wait for another client starting the daemon */
#define PERSIST_REPLY_SLACK_MS 5000 /* beyond the connect timeout, for a REPLY */

struct persist_proc;

struct pjob {
	struct pjob *next;
	uint32_t id;
	struct mr_hal_cmd *cmd;       /* run: where results go; NULL once final */
	struct persist_proc *proc;    /* spawn: the proc (NULL for run) */
	const char *host;
	int64_t start_ms, deadline_ms;
	struct mr_buf pout, perr;     /* proc: output not yet delivered */
	bool done;
	int hal_rc, status, sig;
	struct meshrun_err err;
};

struct persist_proc {
	struct mr_proc base;
	struct pjob *job;
};

/* The REPLY or CONNECTED we wait for. */
struct reply {
	uint32_t id;
	uint8_t type;
	bool got;
	struct meshrun_err err;
	struct meshrun_err *errs;     /* CONNECTED, RESOLVED: one per host */
	char **gaps;                  /* RESOLVED: one per host (malloc'd or NULL) */
	size_t nerrs;
};

struct persist_hal {
	struct mr_hal base;
	int fd;
	char *path;
	uint32_t next_id;
	struct mr_buf in, out;
	size_t in_off;                /* frames of in before this are handled; shared
				       * by a pull and one nested in a callback of its
				       * dispatch (a waited request), so neither loses
				       * its place when the other consumes in */
	struct pjob *jobs;
	struct reply *wait;           /* the reply being waited for, or NULL */
	bool broken;
	struct meshrun_err broken_err;
	struct mr_pollset ps;
};

#define to_persist_hal(h) mr_container_of(h, struct persist_hal, base)
#define to_persist_proc(p) mr_container_of(p, struct persist_proc, base)

/* ---- where the daemon lives -------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; s && *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h * 1099511628211ULL; /* a field separator: "ab","c" differs from "a","bc" */
}

/* "dev:ino:size:mtime_ns" of the file at path ("-" when there is none). */
static void file_stamp(const char *path, char *out, size_t n)
{
	struct stat st;

	if (!path || stat(path, &st) < 0)
		snprintf(out, n, "-");
	else
		snprintf(out, n, "%llu:%llu:%lld:%lld", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			 (long long)st.st_size, (long long)mr_stat_mtime_ns(&st));
}

/* The ssh_config files `ssh -G` reads (ssh_config.h's load: -F FILE only, else
 * ~/.ssh/config and the system's), as stamps. */
static void config_stamp(const struct mr_hal_opts *o, char *out, size_t n)
{
	const char *cfg = o->ssh_config, *env = getenv("MESHRUN_SSH_CONFIG");
	char a[128], b[128], user[PATH_MAX];

	if (!cfg && env && *env)
		cfg = env;
	if (cfg) {
		file_stamp(cfg, a, sizeof(a));
		snprintf(out, n, "F%s", a);
		return;
	}
	snprintf(user, sizeof(user), "%s/.ssh/config", mr_ssh_home());
	file_stamp(user, a, sizeof(a));
	file_stamp("/etc/ssh/ssh_config", b, sizeof(b));
	snprintf(out, n, "U%s S%s", a, b);
}

/* The socket's path: DIR/persist-HASH.sock, HASH over what authentication,
 * host key checks and host lookups depend on, so two identities never share a
 * daemon, nor two versions of an ssh_config. */
int mr_hal_persist_path(const struct mr_hal_opts *o, char *path, size_t n, struct meshrun_err *err)
{
	const char *rt = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
	const char *fields[] = {
		o->user, o->identity, o->ssh_config ? o->ssh_config : getenv("MESHRUN_SSH_CONFIG"),
		o->known_hosts, o->accept_new_hostkeys ? "accept-new" : "", getenv("SSH_AUTH_SOCK"),
		getenv("HOME"), getenv("USER"), getenv("MESHRUN_SSH_RESOLVER"),
	};
	char dir[200], uid[32], stamp[300];
	uint64_t h = 14695981039346656037ULL;
	int rc;

	snprintf(uid, sizeof(uid), "%ld:%d", (long)geteuid(), MR_PF_VERSION);
	h = fnv1a(h, uid);
	config_stamp(o, stamp, sizeof(stamp));
	h = fnv1a(h, stamp);
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		h = fnv1a(h, fields[i]);
	/* sun_path is 104 bytes on macOS: leave room for the name */
	if (rt && rt[0] == '/' && strlen(rt) < 64) {
		snprintf(dir, sizeof(dir), "%s/meshrun", rt);
	} else {
		if (!tmp || tmp[0] != '/' || strlen(tmp) >= 64)
			tmp = "/tmp";
		snprintf(dir, sizeof(dir), "%s%smeshrun-%ld", tmp, tmp[strlen(tmp) - 1] == '/' ? "" : "/",
			 (long)geteuid());
	}
	rc = mr_hal_private_dir(dir, "the persist daemon's socket", err);
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(path, n, "%s/persist-%016llx.sock", dir, (unsigned long long)h) >= n)
		return mr_err_set(err, MESHRUN_E_INVAL, "persist socket path under '%s': too long", dir);
	return 0;
}

/* Connect to path without waiting: 0 with *fd, or -1 with errno (ENOENT,
 * ECONNREFUSED: nobody there; EAGAIN: its backlog is full). */
static int dial(const char *path, int *fd)
{
	struct sockaddr_un sa;
	int s = mr_socket(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	uid_t peer;

	if (s < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		int e = errno;

		close(s);
		errno = e;
		return -1;
	}
	if (mr_peer_uid(s, &peer) < 0 || peer != geteuid()) {
		close(s);
		errno = EPERM;
		return -1;
	}
	*fd = s;
	return 0;
}

static void reset_child_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM };
	sigset_t none;

	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		signal(sigs[i], SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTSTP, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * Start the daemon on a socket bound at path. We bind and listen before the
 * fork, so our connect after it cannot miss. fork without exec: the daemon is
 * this program's own code (no path to find), and the child only uses what the
 * parent built before it (the opts) plus fresh state of its own.
 */
static int spawn_daemon(const char *path, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	struct sockaddr_un sa;
	char logpath[PATH_MAX];
	mode_t old;
	pid_t pid;
	int lfd, rc, st;

	lfd = mr_socket(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC);
	if (lfd < 0)
		return mr_err_sys(err, "persist daemon: socket");
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path); /* stale: nobody listened on it (we hold the lock) */
	old = umask(077);
	rc = bind(lfd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || chmod(path, 0600) < 0 || listen(lfd, 64) < 0) {
		rc = mr_err_sys(err, "persist daemon: bind/listen '%s'", path);
		close(lfd);
		return rc;
	}
	snprintf(logpath, sizeof(logpath), "%.*s.log", (int)(strlen(path) - 5), path);
	pid = fork();
	if (pid < 0) {
		rc = mr_err_sys(err, "persist daemon: fork");
		unlink(path);
		close(lfd);
		return rc;
	}
	if (pid == 0) {
		int fd;

		setsid();
		if (fork() != 0)
			_exit(0);
		reset_child_signals();
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		if (lfd != 3) {
			dup2(lfd, 3);
			lfd = 3;
		}
		mr_close_from(4);
		if (chdir("/") < 0) { /* keep no directory busy; nothing depends on it */
		}
		mr_persist_daemon_run(lfd, path, opts, opts->persist_ms);
		_exit(0); /* not exit(): the parent's heap is not ours to check for leaks */
	}
	close(lfd);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Send b's frames, waiting while the socket is full (the daemon reads us
 * whenever it is not in a bounded blocking op: the same bound as a REPLY). */
static int send_all(struct persist_hal *h, struct mr_buf *b)
{
	int64_t end = mr_now_ms() + h->base.opts.connect_timeout_ms + PERSIST_REPLY_SLACK_MS;
	size_t off = 0;
	ssize_t n;

	while (off < b->len) {
		n = mr_send_nosig(h->fd, b->p + off, b->len - off, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			struct pollfd pfd = { h->fd, POLLOUT, 0 };

			if (mr_now_ms() >= end || (poll(&pfd, 1, mr_ms_left(end)) < 0 && errno != EINTR))
				break;
			continue;
		}
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	n = off < b->len ? -1 : 0;
	mr_buf_reset(b);
	return (int)n;
}

static struct pjob *job_find(struct persist_hal *h, uint32_t id)
{
	for (struct pjob *j = h->jobs; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

static void job_unlink(struct persist_hal *h, struct pjob *j)
{
	for (struct pjob **pp = &h->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
}

static void job_free(struct pjob *j)
{
	mr_buf_release(&j->pout);
	mr_buf_release(&j->perr);
	free(j);
}

/* A run command's result is final: tell the caller, forget the job. */
static void run_finish(struct persist_hal *h, struct pjob *j)
{
	struct mr_hal_cmd *cmd = j->cmd;

	cmd->hal_rc = j->hal_rc;
	cmd->status = j->status;
	cmd->signal = j->sig;
	if (j->hal_rc < 0)
		cmd->err = j->err;
	cmd->elapsed_ms = mr_now_ms() - j->start_ms;
	j->cmd = NULL;
	mr_hal_cmd_done(&h->base, cmd);
	job_unlink(h, j);
	job_free(j);
}

static void job_exit(struct persist_hal *h, struct pjob *j, int hal_rc, int status, int sig,
		     const struct meshrun_err *e)
{
	if (j->done)
		return;
	j->done = true;
	j->hal_rc = hal_rc;
	j->status = status;
	j->sig = sig;
	if (hal_rc < 0 && e)
		j->err = *e;
	if (j->cmd)
		run_finish(h, j);
}

/* The daemon is gone: every unfinished job fails, naming its host. */
static void set_broken(struct persist_hal *h, const char *why)
{
	struct pjob *next;

	if (!h->broken)
		mr_err_set(&h->broken_err, MESHRUN_E_PEER, "persist daemon '%s': %s", h->path, why);
	h->broken = true;
	for (struct pjob *j = h->jobs; j; j = next) {
		struct meshrun_err e = MESHRUN_ERR_INIT;

		next = j->next;
		if (j->done)
			continue;
		mr_err_set(&e, MESHRUN_E_PEER, "'%s': persist daemon: %s", j->host, why);
		job_exit(h, j, e.code, 0, 0, &e);
	}
}

static void dispatch(struct persist_hal *h, const struct mr_pf_frame *f)
{
	struct mr_pf_reader r;
	struct pjob *j = f->id ? job_find(h, f->id) : NULL;
	struct reply *w = h->wait;

	mr_pf_reader_init(&r, f);
	switch (f->type) {
	case MR_PF_OUT:
	case MR_PF_ERR: {
		const char *d;
		size_t n;

		mr_pf_get_bytes(&r, &d, &n);
		if (!j || r.bad || !d)
			break;
		if (j->cmd)
			mr_hal_append_capped(f->type == MR_PF_OUT ? &j->cmd->out : &j->cmd->errout, d, n);
		else if (mr_buf_append(f->type == MR_PF_OUT ? &j->pout : &j->perr, d, n) < 0)
			mr_warn("persist: output of '%s' on '%s' lost: out of memory", j->proc->base.cmdline, j->host);
		break;
	}
	case MR_PF_EXIT: {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		int rc = mr_pf_get_i32(&r), status = mr_pf_get_i32(&r), sig = mr_pf_get_i32(&r);

		mr_pf_get_err(&r, &e);
		if (j && !r.bad)
			job_exit(h, j, rc, status, sig, &e);
		break;
	}
	case MR_PF_REPLY:
	case MR_PF_CONNECTED:
	case MR_PF_RESOLVED:
		if (f->type == MR_PF_REPLY && j && j->cmd && (!w || w->id != f->id)) {
			/* a run command's SPAWN, not waited for: an error ends it */
			struct meshrun_err e = MESHRUN_ERR_INIT;

			mr_pf_get_err(&r, &e);
			if (r.bad)
				set_broken(h, "malformed reply");
			else if (e.code < 0)
				job_exit(h, j, e.code, 0, 0, &e);
			break;
		}
		if (!w || w->id != f->id || w->type != f->type)
			break;
		if (f->type == MR_PF_REPLY) {
			mr_pf_get_err(&r, &w->err);
		} else {
			uint32_t n = mr_pf_get_u32(&r);

			for (uint32_t i = 0; i < n && i < w->nerrs; i++) {
				mr_pf_get_err(&r, &w->errs[i]);
				if (f->type == MR_PF_RESOLVED && mr_pf_get_str(&r, &w->gaps[i]) < 0)
					break;
			}
		}
		w->got = !r.bad;
		if (r.bad)
			set_broken(h, "malformed reply");
		break;
	default:
		break;
	}
}

/* Read what is there (wait up to timeout_ms for it) and handle its frames. */
static int pull(struct persist_hal *h, int timeout_ms)
{
	struct pollfd pfd = { h->fd, POLLIN, 0 };
	char buf[65536];
	struct mr_pf_frame f;
	int rc;

	if (h->broken)
		return 0;
	if (timeout_ms != 0 && poll(&pfd, 1, timeout_ms) < 0)
		return errno == EINTR ? 0 : -1;
	for (;;) {
		ssize_t n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			set_broken(h, n == 0 ? "it closed the connection" : strerror(errno));
			return 0;
		}
		if (mr_buf_append(&h->in, buf, (size_t)n) < 0) {
			set_broken(h, "out of memory");
			return 0;
		}
		if ((size_t)n < sizeof(buf))
			break;
	}
	/* dispatch uses f only before it calls back (f points into in) */
	while ((rc = mr_pf_next(&h->in, &h->in_off, &f)) == 1)
		dispatch(h, &f);
	mr_buf_consume(&h->in, h->in_off);
	h->in_off = 0;
	if (rc < 0)
		set_broken(h, "malformed frame");
	return 0;
}

/* Send the frame in h->out, then wait for its REPLY/CONNECTED into *w. */
static int request(struct persist_hal *h, struct reply *w, struct meshrun_err *err)
{
	int64_t end = mr_now_ms() + h->base.opts.connect_timeout_ms + PERSIST_REPLY_SLACK_MS;

	if (h->broken || send_all(h, &h->out) < 0) {
		if (!h->broken)
			set_broken(h, "cannot send to it");
		return mr_err_set(err, h->broken_err.code, "%s", h->broken_err.msg);
	}
	h->wait = w;
	while (!w->got && !h->broken && mr_now_ms() < end)
		pull(h, mr_ms_left(end));
	h->wait = NULL;
	if (!w->got) {
		if (!h->broken)
			set_broken(h, "no reply in time");
		return mr_err_set(err, h->broken_err.code, "%s", h->broken_err.msg);
	}
	if (w->err.code < 0) {
		if (err && !err->code)
			*err = w->err;
		return w->err.code;
	}
	return 0;
}

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
 * it ends the job as it arrives (dispatch). */
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
		return request(h, &w, err);
	if (h->broken || send_all(h, &h->out) < 0) {
		if (!h->broken)
			set_broken(h, "cannot send to it");
		return mr_err_set(err, h->broken_err.code, "%s", h->broken_err.msg);
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
	if (send_all(h, &h->out) < 0)
		set_broken(h, "cannot send to it");
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
		return send_all(h, &h->out) < 0 ? (set_broken(h, "cannot send to it"), -1) : 0;
	return request(h, &w, &e);
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
			job_unlink(h, j);
			job_free(j);
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
			job_exit(h, late, e.code, 0, 0, &e);
			send_release(h, id, false);
			continue;
		}
		pull(h, next == INT64_MAX ? -1 : mr_ms_left(next));
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
	if (request(h, &w, &e) < 0) {
		for (size_t i = 0; i < n; i++)
			mr_err_set(&errs[i], e.code, "'%s': %s", mr_hal_host_name(hosts[i]), e.msg);
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
		job_unlink(h, j);
		job_free(j);
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
	return request(h, &w, err);
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
		pull(h, 0);
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
	job_unlink(h, p->job);
	job_free(p->job);
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
			request(h, &w, &e);
		else if (send_all(h, &h->out) < 0)
			mr_debug("persist: cannot send BYE (the daemon ends our watchdogs at our EOF too)");
	}
	while (hal->procs)
		proc_forget(h, to_persist_proc(hal->procs));
	while (h->jobs) {
		struct pjob *j = h->jobs;

		h->jobs = j->next;
		job_free(j);
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
		return mr_err_set(err, h->broken_err.code, "%s", h->broken_err.msg);

	host = mr_hal_host_name(host);
	if (mr_pf_begin(&h->out, MR_PF_REMOVE, w.id, &start) < 0 || mr_pf_put_str(&h->out, host) < 0 ||
	    mr_pf_put_str(&h->out, dir) < 0 || mr_pf_end(&h->out, start) < 0) {
		mr_buf_reset(&h->out);
		return mr_err_set(err, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	}
	if (send_all(h, &h->out) < 0) {
		set_broken(h, "cannot send to it");
		return mr_err_set(err, h->broken_err.code, "%s", h->broken_err.msg);
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
	rc = request(h, &w, &e);
	if (rc < 0)
		for (size_t i = 0; i < n; i++)
			MR_FREE(gaps[i]);
	return rc;
}

/* HELLO and its answer, within PERSIST_HELLO_MS. */
static int greet(struct persist_hal *h, int64_t idle_ms, struct meshrun_err *err)
{
	int64_t end = mr_now_ms() + PERSIST_HELLO_MS;
	size_t start, off = 0;
	struct mr_pf_frame f;
	char buf[256];

	if (mr_pf_begin(&h->out, MR_PF_HELLO, 0, &start) < 0 || mr_pf_put_u32(&h->out, MR_PF_VERSION) < 0 ||
	    mr_pf_put_u32(&h->out, (uint32_t)MR_MIN(idle_ms, (int64_t)UINT32_MAX)) < 0 ||
	    mr_pf_end(&h->out, start) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
	if (send_all(h, &h->out) < 0)
		return mr_err_sys(err, "persist daemon '%s': send", h->path);
	while (mr_now_ms() < end) {
		struct pollfd pfd = { h->fd, POLLIN, 0 };
		ssize_t n;
		int rc;

		if (poll(&pfd, 1, mr_ms_left(end)) <= 0)
			continue;
		n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n <= 0)
			return mr_err_set(err, MESHRUN_E_PEER, "persist daemon '%s': closed the connection at hello",
					  h->path);
		if (mr_buf_append(&h->in, buf, (size_t)n) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
		rc = mr_pf_next(&h->in, &off, &f);
		if (rc < 0 || (rc == 1 && f.type != MR_PF_HELLO_OK))
			return mr_err_set(err, MESHRUN_E_PROTO, "persist daemon '%s': unexpected answer to hello",
					  h->path);
		if (rc == 1) {
			struct mr_pf_reader r;
			uint32_t v;

			mr_pf_reader_init(&r, &f);
			v = mr_pf_get_u32(&r);
			mr_buf_consume(&h->in, off);
			if (v != MR_PF_VERSION)
				return mr_err_set(err, MESHRUN_E_PROTO, "persist daemon '%s': version %u, we speak %d",
						  h->path, v, MR_PF_VERSION);
			return 0;
		}
	}
	return mr_err_set(err, MESHRUN_E_TIMEOUT, "persist daemon '%s': no answer within %d ms", h->path,
			  PERSIST_HELLO_MS);
}

/* Hold path.lock (for starting a daemon) within PERSIST_LOCK_MS; the fd, or -1. */
static int take_lock(const char *path)
{
	char lp[PATH_MAX];
	int64_t end = mr_now_ms() + PERSIST_LOCK_MS;
	int fd;

	snprintf(lp, sizeof(lp), "%s.lock", path);
	fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || mr_now_ms() >= end) {
			close(fd);
			return -1;
		}
		mr_sleep_ms(10);
	}
	return fd;
}

/* Connect to the daemon, starting one when none listens. */
static int reach_daemon(const char *path, const struct mr_hal_opts *opts, bool start, int *fd,
			struct meshrun_err *err)
{
	int lock, rc;

	if (dial(path, fd) == 0)
		return 0;
	if (errno != ENOENT && errno != ECONNREFUSED)
		return mr_err_sys(err, "persist daemon '%s': connect", path);
	if (!start)
		return 0; /* *fd stays -1: nobody there */
	lock = take_lock(path);
	if (lock < 0)
		return mr_err_sys(err, "persist daemon '%s': lock", path);
	rc = dial(path, fd); /* another client may have started it meanwhile */
	if (rc < 0 && (errno == ENOENT || errno == ECONNREFUSED)) {
		rc = spawn_daemon(path, opts, err);
		if (rc == 0 && dial(path, fd) < 0)
			rc = mr_err_sys(err, "persist daemon '%s': connect after start", path);
	} else if (rc < 0) {
		rc = mr_err_sys(err, "persist daemon '%s': connect", path);
	}
	close(lock);
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
		rc = reach_daemon(path, &h->base.opts, true, &h->fd, err);
	if (rc == 0)
		rc = greet(h, h->base.opts.persist_ms, err);
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

int mr_hal_persist_stop(const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	struct mr_hal_opts o = opts ? *opts : (struct mr_hal_opts){ 0 };
	struct persist_hal h = { .fd = -1 };
	struct reply w = { .id = 0, .type = MR_PF_REPLY };
	char path[PATH_MAX];
	int rc;

	if (o.connect_timeout_ms <= 0)
		o.connect_timeout_ms = MR_HAL_DEF_CONNECT_TIMEOUT_MS;
	h.base.opts = o;
	h.path = path;
	rc = mr_hal_persist_path(&o, path, sizeof(path), err);
	if (rc == 0)
		rc = reach_daemon(path, &o, false, &h.fd, err);
	if (rc == 0 && h.fd < 0) {
		/* nobody listens: a stale socket goes too */
		unlink(path);
		return 0;
	}
	if (rc == 0)
		rc = greet(&h, 0, err);
	if (rc == 0) {
		size_t start;

		if (mr_pf_begin(&h.out, MR_PF_STOP, 0, &start) < 0 || mr_pf_end(&h.out, start) < 0)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
		else
			rc = request(&h, &w, err);
	}
	if (rc == 0) {
		/* the daemon closes its end as it exits: wait for that, bounded */
		int64_t end = mr_now_ms() + PERSIST_HELLO_MS;

		while (!h.broken && mr_now_ms() < end)
			pull(&h, mr_ms_left(end));
	}
	mr_close(&h.fd);
	mr_buf_release(&h.in);
	mr_buf_release(&h.out);
	return rc < 0 ? rc : 1;
}
