/*
 * persist_conn.c - the persist client's connection to its daemon (persist_impl.h):
 * where the daemon's socket lives, reaching it or starting it, HELLO, and the
 * frames both ways: sending what an op built, reading and handling what comes
 * back (output and exits into the jobs, the REPLY an op waits for), and the
 * broken state when the daemon is gone. Apart from the hal ops (persist.c) as
 * OpenSSH keeps sshconnect.c apart from channels.c: this file knows the socket
 * and the frames, not what an op asks for; it never creates a job.
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
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/persist/persist_impl.h"
#include "hal/persist/persist_proto.h"
#include "hal/ssh_config.h"

#include <fcntl.h>
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
int mr_ps_reach_daemon(const char *path, const struct mr_hal_opts *opts, bool start, int *fd,
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

/* ---- frames to and from the daemon ------------------------------------------- */

/* Send b's frames, waiting while the socket is full (the daemon reads us
 * whenever it is not in a bounded blocking op: the same bound as a REPLY). */
int mr_ps_send_all(struct persist_hal *h, struct mr_buf *b)
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

void mr_ps_job_unlink(struct persist_hal *h, struct pjob *j)
{
	for (struct pjob **pp = &h->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
}

void mr_ps_job_free(struct pjob *j)
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
	mr_ps_job_unlink(h, j);
	mr_ps_job_free(j);
}

void mr_ps_job_exit(struct persist_hal *h, struct pjob *j, int hal_rc, int status, int sig,
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
void mr_ps_set_broken(struct persist_hal *h, const char *why)
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
		mr_ps_job_exit(h, j, e.code, 0, 0, &e);
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
			mr_ps_job_exit(h, j, rc, status, sig, &e);
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
				mr_ps_set_broken(h, "malformed reply");
			else if (e.code < 0)
				mr_ps_job_exit(h, j, e.code, 0, 0, &e);
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
			mr_ps_set_broken(h, "malformed reply");
		break;
	default:
		break;
	}
}

/* Read what is there (wait up to timeout_ms for it) and handle its frames. */
int mr_ps_pull(struct persist_hal *h, int timeout_ms)
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
			mr_ps_set_broken(h, n == 0 ? "it closed the connection" : strerror(errno));
			return 0;
		}
		if (mr_buf_append(&h->in, buf, (size_t)n) < 0) {
			mr_ps_set_broken(h, "out of memory");
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
		mr_ps_set_broken(h, "malformed frame");
	return 0;
}

/* Send the frame in h->out, then wait for its REPLY/CONNECTED into *w. */
int mr_ps_request(struct persist_hal *h, struct reply *w, struct meshrun_err *err)
{
	int64_t end = mr_now_ms() + h->base.opts.connect_timeout_ms + PERSIST_REPLY_SLACK_MS;

	if (h->broken || mr_ps_send_all(h, &h->out) < 0) {
		if (!h->broken)
			mr_ps_set_broken(h, "cannot send to it");
		return mr_hal_err_set_why(err, h->broken_err.code, h->broken_err.sys_errno, "%s", h->broken_err.msg);
	}
	h->wait = w;
	while (!w->got && !h->broken && mr_now_ms() < end)
		mr_ps_pull(h, mr_ms_left(end));
	h->wait = NULL;
	if (!w->got) {
		if (!h->broken)
			mr_ps_set_broken(h, "no reply in time");
		return mr_hal_err_set_why(err, h->broken_err.code, h->broken_err.sys_errno, "%s", h->broken_err.msg);
	}
	if (w->err.code < 0) {
		if (err && !err->code)
			*err = w->err;
		return w->err.code;
	}
	return 0;
}

/* HELLO and its answer, within PERSIST_HELLO_MS. */
int mr_ps_greet(struct persist_hal *h, int64_t idle_ms, struct meshrun_err *err)
{
	int64_t end = mr_now_ms() + PERSIST_HELLO_MS;
	size_t start, off = 0;
	struct mr_pf_frame f;
	char buf[256];

	if (mr_pf_begin(&h->out, MR_PF_HELLO, 0, &start) < 0 || mr_pf_put_u32(&h->out, MR_PF_VERSION) < 0 ||
	    mr_pf_put_u32(&h->out, (uint32_t)MR_MIN(idle_ms, (int64_t)UINT32_MAX)) < 0 ||
	    mr_pf_end(&h->out, start) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
	if (mr_ps_send_all(h, &h->out) < 0)
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
		rc = mr_ps_reach_daemon(path, &o, false, &h.fd, err);
	if (rc == 0 && h.fd < 0) {
		/* nobody listens: a stale socket goes too */
		unlink(path);
		return 0;
	}
	if (rc == 0)
		rc = mr_ps_greet(&h, 0, err);
	if (rc == 0) {
		size_t start;

		if (mr_pf_begin(&h.out, MR_PF_STOP, 0, &start) < 0 || mr_pf_end(&h.out, start) < 0)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "persist hal: out of memory");
		else
			rc = mr_ps_request(&h, &w, err);
	}
	if (rc == 0) {
		/* the daemon closes its end as it exits: wait for that, bounded */
		int64_t end = mr_now_ms() + PERSIST_HELLO_MS;

		while (!h.broken && mr_now_ms() < end)
			mr_ps_pull(&h, mr_ms_left(end));
	}
	mr_close(&h.fd);
	mr_buf_release(&h.in);
	mr_buf_release(&h.out);
	return rc < 0 ? rc : 1;
}
