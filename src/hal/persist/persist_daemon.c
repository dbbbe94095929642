/*
 * persist_daemon.c - the persist daemon (persist_proto.h: mr_persist_daemon_run):
 * one per user and ssh identity, started by the first client that finds none
 * (persist_conn.c), it keeps one ssh hal (ssh.c: a libssh2 connection per host,
 * reused) and runs the clients' commands on it. Connections outlive the
 * clients; the daemon exits when it has had no client for its idle time, or
 * on STOP.
 *
 *   struct daemon                       struct dproc (a process for a client)
 *     hal: the ssh hal, all clients        cl: its client; NULL once orphaned
 *     cfg: its ssh_config (lent to hal)    id: the client's name for it
 *     clients: connected, uid checked
 *     procs: every dproc                   struct dclient
 *                                            dirs: its remove_at_exit entries
 *
 * A client that goes (BYE, or its socket closes: killed -9 included) takes its
 * processes with it, as a direct ssh hal's free (TERM to all, one grace period,
 * KILL) or its watchdog would: here the daemon does the killing over its
 * connections, then has the ssh hal's own watchdog on each host remove the
 * client's directories ("R" lines on a channel that is open already: no new
 * channel, no login shell). The client's directories are registered with
 * those watchdogs too, so should the daemon itself die, they (one per host,
 * every pgid registered) kill what it ran and remove every directory.
 *
 * Host lookups (RESOLVE) are answered from the daemon's ssh_config, whose
 * `ssh -G` results are cached for the daemon's life: a client with a live
 * daemon runs no `ssh -G` itself.
 *
 * One poll: the listening socket, every client (POLLOUT while its queue is not
 * empty), and the ssh hal's fds through its poll_prepare (hal_impl.h). The ops
 * that block (CONNECT waits for handshakes; RELEASE and a client's end wait a
 * grace period) block every client meanwhile: bounded by the connect timeout
 * and twice MR_HAL_KILL_GRACE_MS.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/persist/persist_proto.h"
#include "hal/ssh_config.h"

#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLIENT_OUT_MAX ((size_t)256 << 20) /* a client this far behind is dropped */
#define PERSIST_SPARES 2 /* ssh hal opts.ssh_spares: a job's setup and a rank per host */

struct dclient;

struct dproc {
	struct dproc *next;
	struct daemon *d;
	struct dclient *cl;           /* NULL: orphaned (its client went) */
	uint32_t id;
	struct mr_proc *p;            /* NULL once released */
	bool exited;
};

struct dclient {
	struct dclient *next;
	int fd;
	struct mr_buf in, out;
	struct mr_strvec dir_hosts, dirs; /* REMOVE entries: host i, dir i */
	bool greeted, gone;
};

struct daemon {
	struct mr_hal *hal;
	struct mr_ssh_config *cfg;
	int lfd;
	const char *path;
	int64_t idle_ms, last_ms;
	struct dclient *clients;
	struct dproc *procs;
	bool stop;
	struct mr_pollset ps;
};

/* ---- frames to a client --------------------------------------------------------- */

/* Queue a frame: the caller has begun it at start in cl->out; end it, or drop
 * the client when out of memory or too far behind. */
static void queue_end(struct dclient *cl, size_t start, int rc)
{
	if (rc < 0 || mr_pf_end(&cl->out, start) < 0 || cl->out.len > CLIENT_OUT_MAX) {
		cl->out.len = start;
		mr_warn("persist daemon: dropping client (fd %d): out of memory or not reading", cl->fd);
		cl->gone = true;
	}
}

static void send_reply(struct dclient *cl, uint8_t type, uint32_t id, const struct meshrun_err *e)
{
	size_t start;
	int rc;

	if (cl->gone)
		return;
	rc = mr_pf_begin(&cl->out, type, id, &start);
	if (rc == 0 && type == MR_PF_HELLO_OK)
		rc = mr_pf_put_u32(&cl->out, MR_PF_VERSION) < 0 || mr_pf_put_u32(&cl->out, (uint32_t)getpid()) < 0 ? -1 : 0;
	else if (rc == 0)
		rc = mr_pf_put_err(&cl->out, e);
	queue_end(cl, start, rc);
}

/* ---- events of the ssh hal ------------------------------------------------------ */

static void relay(struct dproc *dp, uint8_t type, const char *data, size_t len)
{
	struct dclient *cl = dp->cl;

	if (!cl || cl->gone)
		return;
	for (size_t off = 0; off < len && !cl->gone; off += MR_PF_CHUNK) {
		size_t start;
		int rc = mr_pf_begin(&cl->out, type, dp->id, &start);

		if (rc == 0)
			rc = mr_pf_put_bytes(&cl->out, data + off, MR_MIN(len - off, (size_t)MR_PF_CHUNK));
		queue_end(cl, start, rc);
	}
}

static void on_stdout(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	(void)p;
	relay(ctx, MR_PF_OUT, data, len);
}

static void on_stderr(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	(void)p;
	relay(ctx, MR_PF_ERR, data, len);
}

static void on_exit_ev(struct mr_proc *p, int hal_rc, int status, int sig, const struct meshrun_err *err,
		       void *ctx)
{
	struct dproc *dp = ctx;
	struct dclient *cl = dp->cl;
	size_t start;
	int rc;

	(void)p;
	dp->exited = true;
	if (!cl || cl->gone)
		return;
	rc = mr_pf_begin(&cl->out, MR_PF_EXIT, dp->id, &start);
	if (rc == 0)
		rc = mr_pf_put_i32(&cl->out, hal_rc) < 0 || mr_pf_put_i32(&cl->out, status) < 0 ||
				     mr_pf_put_i32(&cl->out, sig) < 0 || mr_pf_put_err(&cl->out, hal_rc < 0 ? err : NULL) < 0
			     ? -1 : 0;
	queue_end(cl, start, rc);
}

/* ---- processes ------------------------------------------------------------------ */

static struct dproc *dproc_find(struct daemon *d, struct dclient *cl, uint32_t id)
{
	for (struct dproc *dp = d->procs; dp; dp = dp->next)
		if (dp->cl == cl && dp->id == id && dp->p)
			return dp;
	return NULL;
}

/* Release (killing it if it still runs: ssh.c's TERM, grace, KILL) and forget. */
static void dproc_release(struct dproc *dp)
{
	if (dp->p) {
		mr_proc_release(dp->p);
		dp->p = NULL;
	}
}

static int start_proc(struct daemon *d, struct dproc *dp, const char *host, char *const *argv, char *const *env,
		      const char *cwd, struct meshrun_err *err)
{
	struct mr_spawn sp = {
		.host = host, .argv = argv, .env = env, .cwd = cwd,
		.events = { .ctx = dp, .on_stdout = on_stdout, .on_stderr = on_stderr, .on_exit = on_exit_ev },
		.user = dp,
	};

	return mr_hal_spawn(d->hal, &sp, &dp->p, err);
}

static struct dproc *dproc_new(struct daemon *d, struct dclient *cl, uint32_t id)
{
	struct dproc *dp = calloc(1, sizeof(*dp));

	if (!dp)
		return NULL;
	dp->d = d;
	dp->cl = cl;
	dp->id = id;
	dp->next = d->procs;
	d->procs = dp;
	return dp;
}

/* Free every dproc that has no process left (released, or orphaned and exited). */
static void sweep(struct daemon *d)
{
	for (struct dproc **pp = &d->procs; *pp;) {
		struct dproc *dp = *pp;

		if (dp->p && dp->exited && !dp->cl)
			dproc_release(dp);
		if (!dp->p) {
			*pp = dp->next;
			free(dp);
			continue;
		}
		pp = &dp->next;
	}
}

/*
 * The client is gone: kill its processes together (TERM, one grace period,
 * KILL, one more), release them, then have the hosts' watchdogs remove its
 * directories (without waiting: the lines go out with the next poll).
 */
static void end_client_procs(struct daemon *d, struct dclient *cl)
{
	static const int sigs[] = { SIGTERM, SIGKILL };
	struct meshrun_err e = MESHRUN_ERR_INIT;

	for (size_t k = 0; k < ARRAY_SIZE(sigs); k++) {
		int64_t end = mr_now_ms() + MR_HAL_KILL_GRACE_MS;
		bool any = false;

		for (struct dproc *dp = d->procs; dp; dp = dp->next)
			if (dp->cl == cl && dp->p && !mr_proc_exited(dp->p)) {
				mr_proc_signal(dp->p, sigs[k], &e);
				any = true;
			}
		if (!any)
			break;
		cl->gone = true; /* its events are not sent any more */
		while (mr_now_ms() < end) {
			bool left = false;

			for (struct dproc *dp = d->procs; dp; dp = dp->next)
				left |= dp->cl == cl && dp->p && !mr_proc_exited(dp->p);
			if (!left)
				break;
			if (mr_hal_poll(d->hal, mr_ms_left(end), &e) < 0)
				break;
		}
	}
	for (struct dproc *dp = d->procs; dp; dp = dp->next)
		if (dp->cl == cl)
			dproc_release(dp);
	for (size_t i = 0; i < cl->dirs.nr; i++)
		if (mr_hal_remove_now(d->hal, cl->dir_hosts.v[i], cl->dirs.v[i]) < 0)
			mr_warn("persist daemon: cannot remove '%s' on '%s' now: out of memory (it goes when the daemon does)",
				cl->dirs.v[i], cl->dir_hosts.v[i]);
	mr_strvec_release(&cl->dir_hosts);
	mr_strvec_release(&cl->dirs);
}

/* ---- requests ------------------------------------------------------------------- */

static void do_spawn(struct daemon *d, struct dclient *cl, const struct mr_pf_frame *f, struct mr_pf_reader *r)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_strvec argv = MR_STRVEC_INIT, env = MR_STRVEC_INIT;
	char *host = NULL, *cwd = NULL;
	struct dproc *dp = NULL;

	if (mr_pf_get_str(r, &host) < 0 || mr_pf_get_str(r, &cwd) < 0 || mr_pf_get_strv(r, &argv) < 0 ||
	    mr_pf_get_strv(r, &env) < 0 || !host || !argv.nr) {
		r->bad = true;
		goto out;
	}
	if (dproc_find(d, cl, f->id)) {
		mr_err_set(&e, MESHRUN_E_PROTO, "spawn on '%s': id %u in use", host, f->id);
	} else if (!(dp = dproc_new(d, cl, f->id))) {
		mr_err_set(&e, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	} else if (start_proc(d, dp, host, argv.v, env.v, cwd, &e) < 0) {
		dp->p = NULL; /* swept */
	}
	send_reply(cl, MR_PF_REPLY, f->id, &e);
out:
	mr_strvec_release(&argv);
	mr_strvec_release(&env);
	free(host);
	free(cwd);
}

static void do_remove(struct daemon *d, struct dclient *cl, const struct mr_pf_frame *f, struct mr_pf_reader *r)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *host = NULL, *dir = NULL;

	if (mr_pf_get_str(r, &host) < 0 || mr_pf_get_str(r, &dir) < 0 || !host || !dir ||
	    !*dir || strchr(dir, '\n')) {
		r->bad = true;
		goto out;
	}
	/* the ssh hal's own watchdog on host (as ssh.c registers a name: in its
	 * command line when it starts it); ours to remove when the client goes */
	if (mr_hal_remove_at_exit(d->hal, host, dir, &e) == 0 &&
	    (mr_strvec_push(&cl->dir_hosts, host) < 0 || mr_strvec_push(&cl->dirs, dir) < 0)) {
		mr_strvec_release(&cl->dir_hosts);
		mr_strvec_release(&cl->dirs);
		mr_err_set(&e, MESHRUN_E_NOMEM, "remove '%s' at exit on '%s': out of memory", dir, host);
	}
	if (e.code) /* the client does not wait for the reply */
		mr_warn("persist daemon: %s", e.msg);
	send_reply(cl, MR_PF_REPLY, f->id, &e);
out:
	free(host);
	free(dir);
}

static void do_connect(struct daemon *d, struct dclient *cl, const struct mr_pf_frame *f, struct mr_pf_reader *r)
{
	struct mr_strvec hosts = MR_STRVEC_INIT;
	struct meshrun_err *errs = NULL;
	size_t start;
	int rc;

	if (mr_pf_get_strv(r, &hosts) < 0) {
		r->bad = true;
		return;
	}
	errs = calloc(hosts.nr + 1, sizeof(*errs));
	if (!errs) {
		cl->gone = true;
		goto out;
	}
	if (hosts.nr)
		mr_hal_connect(d->hal, (const char *const *)hosts.v, hosts.nr, errs);
	rc = mr_pf_begin(&cl->out, MR_PF_CONNECTED, f->id, &start);
	if (rc == 0)
		rc = mr_pf_put_u32(&cl->out, (uint32_t)hosts.nr);
	for (size_t i = 0; i < hosts.nr && rc == 0; i++)
		rc = mr_pf_put_err(&cl->out, &errs[i]);
	queue_end(cl, start, rc);
out:
	free(errs);
	mr_strvec_release(&hosts);
}

/* RESOLVE: each host through the daemon's ssh_config (`ssh -G` at most once
 * per host for the daemon's life, all new ones in parallel). */
static void do_resolve(struct daemon *d, struct dclient *cl, const struct mr_pf_frame *f, struct mr_pf_reader *r)
{
	struct mr_strvec hosts = MR_STRVEC_INIT;
	size_t start;
	int rc;

	if (mr_pf_get_strv(r, &hosts) < 0) {
		r->bad = true;
		return;
	}
	mr_ssh_config_prefetch(d->cfg, (const char *const *)hosts.v, hosts.nr);
	rc = mr_pf_begin(&cl->out, MR_PF_RESOLVED, f->id, &start);
	if (rc == 0)
		rc = mr_pf_put_u32(&cl->out, (uint32_t)hosts.nr);
	for (size_t i = 0; i < hosts.nr && rc == 0; i++) {
		struct mr_ssh_host_cfg hc = MR_SSH_HOST_CFG_INIT;
		struct meshrun_err e = MESHRUN_ERR_INIT;

		if (mr_ssh_config_lookup(d->cfg, hosts.v[i], &hc, &e) < 0 && !e.code)
			mr_err_set(&e, MESHRUN_E_PARSE, "'%s': lookup failed", hosts.v[i]);
		rc = mr_pf_put_err(&cl->out, e.code ? &e : NULL) < 0 ||
				     mr_pf_put_str(&cl->out, !e.code && hc.libssh2_gaps.nr ? hc.libssh2_gaps.v[0] : NULL) < 0
			     ? -1 : 0;
		mr_ssh_host_cfg_release(&hc);
	}
	queue_end(cl, start, rc);
	mr_strvec_release(&hosts);
}

static void handle(struct daemon *d, struct dclient *cl, const struct mr_pf_frame *f)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_pf_reader r;
	struct dproc *dp;

	mr_pf_reader_init(&r, f);
	if (!cl->greeted && f->type != MR_PF_HELLO) {
		cl->gone = true;
		return;
	}
	switch (f->type) {
	case MR_PF_HELLO: {
		uint32_t v = mr_pf_get_u32(&r), idle = mr_pf_get_u32(&r);

		if (r.bad || v != MR_PF_VERSION)
			break;
		cl->greeted = true;
		if (idle) /* the last client's --persist sets how long we stay */
			d->idle_ms = idle;
		send_reply(cl, MR_PF_HELLO_OK, 0, NULL);
		break;
	}
	case MR_PF_SPAWN:
		do_spawn(d, cl, f, &r);
		break;
	case MR_PF_WRITE:
	case MR_PF_CLOSE_STDIN:
		dp = dproc_find(d, cl, f->id);
		if (f->type == MR_PF_WRITE) {
			const char *data;
			size_t n;

			mr_pf_get_bytes(&r, &data, &n);
			if (dp && !r.bad && data && n && !mr_proc_exited(dp->p))
				mr_proc_write(dp->p, data, n, &e);
		} else if (dp && !mr_proc_exited(dp->p) && !dp->p->stdin_closed) {
			mr_proc_close_stdin(dp->p, &e);
		}
		break;
	case MR_PF_SIGNAL: {
		int sig = mr_pf_get_i32(&r);

		dp = dproc_find(d, cl, f->id);
		if (r.bad)
			break;
		if (dp && !mr_proc_exited(dp->p))
			mr_proc_signal(dp->p, sig, &e);
		send_reply(cl, MR_PF_REPLY, f->id, &e);
		break;
	}
	case MR_PF_RELEASE: {
		uint32_t want = mr_pf_get_u32(&r);

		dp = dproc_find(d, cl, f->id);
		if (r.bad)
			break;
		if (dp)
			dproc_release(dp);
		if (want)
			send_reply(cl, MR_PF_REPLY, f->id, &e);
		break;
	}
	case MR_PF_REMOVE:
		do_remove(d, cl, f, &r);
		break;
	case MR_PF_CONNECT:
		do_connect(d, cl, f, &r);
		break;
	case MR_PF_RESOLVE:
		do_resolve(d, cl, f, &r);
		break;
	case MR_PF_BYE:
		end_client_procs(d, cl);
		cl->gone = false; /* still there to read the reply */
		send_reply(cl, MR_PF_REPLY, f->id, NULL);
		break;
	case MR_PF_STOP:
		send_reply(cl, MR_PF_REPLY, f->id, NULL);
		d->stop = true;
		break;
	default:
		r.bad = true;
		break;
	}
	if (r.bad) {
		mr_warn("persist daemon: malformed frame (type %u) from a client: dropping it", f->type);
		cl->gone = true;
	}
}

/* ---- clients -------------------------------------------------------------------- */

static void accept_clients(struct daemon *d)
{
	for (;;) {
		int fd = mr_accept(d->lfd, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
		struct dclient *cl;
		uid_t uid;

		if (fd < 0)
			return;
		/* the socket is 0600 in a 0700 directory; the peer's uid says it too */
		if (mr_peer_uid(fd, &uid) < 0 || uid != geteuid()) {
			mr_warn("persist daemon: refusing a client of another user (uid %ld)", (long)uid);
			close(fd);
			continue;
		}
		cl = calloc(1, sizeof(*cl));
		if (!cl) {
			close(fd);
			return;
		}
		cl->fd = fd;
		cl->next = d->clients;
		d->clients = cl;
	}
}

static void client_read(struct daemon *d, struct dclient *cl)
{
	char buf[65536];
	struct mr_pf_frame f;
	size_t off = 0;
	ssize_t n;
	int rc;

	n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0 || mr_buf_append(&cl->in, buf, (size_t)n) < 0) {
		cl->gone = true;
		return;
	}
	while (!cl->gone && !d->stop && (rc = mr_pf_next(&cl->in, &off, &f)) == 1)
		handle(d, cl, &f);
	if (rc < 0)
		cl->gone = true;
	mr_buf_consume(&cl->in, off);
}

static void client_write(struct dclient *cl)
{
	while (cl->out.len) {
		ssize_t n = mr_send_nosig(cl->fd, cl->out.p, cl->out.len, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			cl->gone = true;
			cl->out.len = 0;
			return;
		}
		mr_buf_consume(&cl->out, (size_t)n);
	}
}

static void client_free(struct daemon *d, struct dclient *cl)
{
	end_client_procs(d, cl);
	for (struct dproc *dp = d->procs; dp; dp = dp->next)
		if (dp->cl == cl)
			dp->cl = NULL;
	close(cl->fd);
	mr_buf_release(&cl->in);
	mr_buf_release(&cl->out);
	mr_strvec_release(&cl->dir_hosts);
	mr_strvec_release(&cl->dirs);
	free(cl);
}

/* Free the clients that went (their processes first). */
static void reap_clients(struct daemon *d)
{
	for (struct dclient **pc = &d->clients; *pc;) {
		struct dclient *cl = *pc;

		if (!cl->gone) {
			pc = &cl->next;
			continue;
		}
		*pc = cl->next;
		client_free(d, cl);
		d->last_ms = mr_now_ms();
	}
}

/* ---- the loop ------------------------------------------------------------------- */

static bool socket_is_ours(const char *path, const struct stat *bound)
{
	struct stat st;

	return lstat(path, &st) == 0 && st.st_ino == bound->st_ino && st.st_dev == bound->st_dev;
}

void mr_persist_daemon_run(int lfd, const char *path, const struct mr_hal_opts *opts, int64_t idle_ms)
{
	struct daemon d = { .lfd = lfd, .path = path, .idle_ms = idle_ms, .last_ms = mr_now_ms() };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_hal_opts o = *opts;
	struct stat bound;

	if (lstat(path, &bound) < 0 || mr_set_nonblock(lfd, true) < 0)
		return;
	o.persist_ms = 0;
	/* the next job's setup and its first rank on each host find a shell started
	 * (opened while no client is here, below) */
	o.ssh_spares = PERSIST_SPARES;
	if (mr_ssh_config_load(&d.cfg, o.ssh_config, &e) < 0 || mr_hal_new_ssh_cfg(&d.hal, &o, d.cfg, &e) < 0) {
		mr_warn("persist daemon: %s", e.msg);
		goto out;
	}
	mr_info("persist daemon %ld on '%s': up, idle time %" PRId64 " ms", (long)getpid(), path, idle_ms);
	while (!d.stop) {
		int timeout = -1, n;
		size_t first_client;

		/* spares open between jobs, not during one: their login shells would
		 * compete with its setup and ranks (a job takes those there) */
		d.hal->opts.ssh_spares = d.clients ? 0 : PERSIST_SPARES;
		if (!d.clients) {
			int64_t left = d.last_ms + d.idle_ms - mr_now_ms();

			if (left <= 0)
				break;
			timeout = (int)MR_MIN(left, (int64_t)INT32_MAX);
		}
		if (!socket_is_ours(path, &bound)) /* replaced or removed: we are not to be found */
			break;
		mr_pollset_reset(&d.ps);
		if (mr_pollset_add(&d.ps, lfd, POLLIN) < 0)
			break;
		first_client = d.ps.nr;
		for (struct dclient *cl = d.clients; cl; cl = cl->next)
			if (mr_pollset_add(&d.ps, cl->fd, (short)(POLLIN | (cl->out.len ? POLLOUT : 0))) < 0)
				goto out;
		if (d.hal->ops->poll_prepare(d.hal, &d.ps, &timeout) < 0)
			break;
		/* check now and then that the socket is still ours */
		if (timeout < 0 || timeout > 60000)
			timeout = 60000;
		n = poll(d.ps.fds, d.ps.nr, timeout);
		if (n < 0 && errno != EINTR)
			break;
		mr_hal_poll(d.hal, 0, &e);
		if (n > 0) {
			size_t i = first_client;

			for (struct dclient *cl = d.clients; cl; cl = cl->next, i++) {
				short re = d.ps.fds[i].revents;

				if (re & (POLLIN | POLLHUP | POLLERR))
					client_read(&d, cl);
				if (d.stop)
					break;
			}
			if (d.ps.fds[0].revents & POLLIN)
				accept_clients(&d);
		}
		for (struct dclient *cl = d.clients; cl; cl = cl->next)
			client_write(cl);
		reap_clients(&d);
		sweep(&d);
		if (d.clients)
			d.last_ms = mr_now_ms();
	}
out:
	if (socket_is_ours(path, &bound))
		unlink(path);
	close(lfd);
	/* the STOP reply (and whatever else is queued) before we go */
	for (struct dclient *cl = d.clients; cl; cl = cl->next) {
		mr_set_nonblock(cl->fd, false);
		if (cl->out.len)
			mr_write_full(cl->fd, cl->out.p, cl->out.len);
		cl->out.len = 0;
	}
	while (d.clients) {
		struct dclient *cl = d.clients;

		d.clients = cl->next;
		cl->gone = true;
		client_free(&d, cl);
	}
	sweep(&d);
	if (d.hal)
		mr_hal_free(d.hal); /* kills what still runs; closes the connections */
	mr_ssh_config_free(d.cfg); /* after the hal that borrowed it */
	while (d.procs) {
		struct dproc *dp = d.procs;

		d.procs = dp->next;
		free(dp);
	}
	mr_pollset_release(&d.ps);
	mr_info("persist daemon %ld: exit", (long)getpid());
}
