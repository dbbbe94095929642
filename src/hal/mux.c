/*
 * mux.c - the routing hal backend ("auto"): this machine's hosts go to a local
 * backend, every other host to an ssh backend (hal.h: mr_hal_new_auto), so a job
 * on 127.0.0.1 plus remote Macs runs its local ranks by fork/exec and needs no
 * sshd here. Remote hosts go to libssh2 or to the OpenSSH client (opts.ssh); in
 * auto mode each host's `ssh -G` decides, once, cached in m->route.
 *
 *   struct mux_hal                        struct mux_proc
 *     inner[MUX_LOCAL]  (made lazily)       base: the proc the caller holds
 *     inner[MUX_REMOTE] (made lazily)       inner: the inner backend's proc, whose
 *     inner[MUX_OPENSSH] (made lazily)      events forward to base
 *
 * A mux proc is a thin wrapper: writes, signals and releases go to the inner
 * proc; the inner proc's events (delivered while mux_poll() polls the inner hal)
 * are re-delivered on the wrapper, so the caller's callbacks see the proc it
 * holds. Releases the caller makes inside a callback are deferred by hal.c (the
 * mux is in its poll); the inner proc is released after that.
 *
 * One poll: every inner backend's poll_prepare() adds its fds and lowers the
 * timeout, the mux adds its own watched fds, poll() waits once, then each inner
 * backend gets mr_hal_poll(inner, 0), which reads and delivers what is ready.
 * A backend without poll_prepare (replay) is polled every MR_HAL_MUX_TICK_MS.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/log.h"
#include "common/spawn.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/ssh_config.h"

#include <poll.h>
#include <strings.h>
#include <unistd.h>

enum { MUX_LOCAL = 0, MUX_REMOTE = 1, MUX_OPENSSH = 2, MUX_N = 3 };

/* A remote host's side, once known. */
struct mux_route {
	char *host;
	int side;
};

struct mux_hal {
	struct mr_hal base;
	struct mr_hal_mux_ctors ctors;
	struct mr_hal *inner[MUX_N];
	struct mr_pollset ps;
	struct mux_route *route;
	size_t nroute, route_alloc;
	int probe;  /* auto: 1 look hosts up, 0 no OpenSSH client (libssh2), -1 not checked */
	struct mr_ssh_config *cfg; /* shared with inner[MUX_REMOTE], freed after it */
};

struct mux_proc {
	struct mr_proc base;
	struct mr_proc *inner;
};

#define to_mux_hal(h) mr_container_of(h, struct mux_hal, base)
#define to_mux_proc(p) mr_container_of(p, struct mux_proc, base)

bool mr_hal_host_is_local(const char *host)
{
	char self[256];

	if (!host || !*host || !strcmp(host, "127.0.0.1") || !strcasecmp(host, "localhost") ||
	    !strcmp(host, "::1"))
		return true;
	if (gethostname(self, sizeof(self)) < 0)
		return false;
	self[sizeof(self) - 1] = '\0';
	return !strcasecmp(host, self);
}

static const int *route_find(const struct mux_hal *m, const char *host)
{
	for (size_t i = 0; i < m->nroute; i++)
		if (!strcmp(m->route[i].host, host))
			return &m->route[i].side;
	return NULL;
}

static void route_add(struct mux_hal *m, const char *host, int side)
{
	struct mux_route *v = mr_array_grow(m->route, m->nroute + 1, &m->route_alloc, sizeof(*v));
	char *h = strdup(host);

	if (!v || !h) { /* not remembered: asked again next time */
		free(h);
		return;
	}
	m->route = v;
	m->route[m->nroute].host = h;
	m->route[m->nroute++].side = side;
}

static int side_of(const struct mux_hal *m, const char *host)
{
	const int *s;

	if (mr_hal_host_is_local(host))
		return MUX_LOCAL;
	if (m->base.opts.ssh == MR_HAL_SSH_OPENSSH)
		return MUX_OPENSSH;
	s = route_find(m, host);
	return s ? *s : MUX_REMOTE;
}

/*
 * The ssh_config that the auto choice and the libssh2 backend both read: loaded
 * once, so that each host costs one `ssh -G` (its cache), not one for the choice
 * and one more for the connection. < 0 when it cannot be loaded (err says why).
 */
static int shared_cfg(struct mux_hal *m, struct mr_ssh_config **out, struct meshrun_err *err)
{
	int rc = 0;

	if (!m->cfg)
		rc = mr_ssh_config_load(&m->cfg, m->base.opts.ssh_config, err);
	*out = m->cfg;
	return rc;
}

static int get_inner(struct mux_hal *m, int side, struct mr_hal **out, struct meshrun_err *err);

/*
 * With --persist, the daemon's cached lookups decide (no `ssh -G` here): 0 with
 * every host routed, < 0 when there is no daemon to ask (then we look up).
 */
static int by_daemon(struct mux_hal *m, const char **todo, size_t k, struct mr_buf *names, size_t *nopen)
{
	struct meshrun_err *errs = NULL;
	struct mr_hal *in = NULL;
	char **gaps = NULL;
	int rc = -1;

	if (m->base.opts.persist_ms <= 0 || get_inner(m, MUX_REMOTE, &in, NULL) < 0 ||
	    in->ops->kind != MR_HAL_PERSIST)
		return -1;
	errs = calloc(k, sizeof(*errs));
	gaps = calloc(k, sizeof(*gaps));
	if (!errs || !gaps || (rc = mr_hal_persist_resolve(in, todo, k, gaps, errs)) < 0)
		goto out;
	for (size_t i = 0; i < k; i++) {
		/* as below: a failed lookup stays with libssh2, which says what is wrong */
		bool need = !errs[i].code && gaps[i];

		route_add(m, todo[i], need ? MUX_OPENSSH : MUX_REMOTE);
		if (need)
			(void)mr_buf_printf(names, "%s%s (%s)", (*nopen)++ ? ", " : "", todo[i], gaps[i]);
	}
out:
	for (size_t i = 0; gaps && i < k; i++)
		free(gaps[i]);
	free(gaps);
	free(errs);
	return rc;
}

/*
 * auto: which of hosts need the OpenSSH client? Each remote host not decided yet
 * is looked up in the shared ssh_config (`ssh -G` for all of them at once, or the
 * built-in parser); a host whose lookup fails stays with libssh2 (which then says
 * what is wrong), as do all hosts where no OpenSSH client is installed. Tests
 * that inject their own backends (ctors) never probe.
 */
static void classify(struct mux_hal *m, const char *const *hosts, size_t n)
{
	struct mr_ssh_config *cfg = NULL;
	struct mr_buf names = MR_BUF_INIT;
	const char **todo = NULL;
	size_t k = 0, nopen = 0;

	if (m->base.opts.ssh != MR_HAL_SSH_AUTO || m->ctors.new_remote || m->probe == 0)
		return;
	if (m->probe < 0) {
		char *ssh = mr_which("ssh", NULL);

		m->probe = ssh ? 1 : 0;
		free(ssh);
		if (!m->probe)
			return;
	}
	if (!(todo = calloc(n ? n : 1, sizeof(*todo))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		const char *h = mr_hal_host_name(hosts[i]);
		bool dup = false;

		if (mr_hal_host_is_local(h) || route_find(m, h))
			continue;
		for (size_t j = 0; j < k; j++)
			dup |= !strcmp(todo[j], h);
		if (!dup)
			todo[k++] = h;
	}
	if (k && by_daemon(m, todo, k, &names, &nopen) == 0)
		goto said;
	if (shared_cfg(m, &cfg, NULL) < 0)
		goto out;
	mr_ssh_config_prefetch(cfg, todo, k);
	for (size_t i = 0; i < k; i++) {
		struct mr_ssh_host_cfg hc = MR_SSH_HOST_CFG_INIT;
		bool need = mr_ssh_config_lookup(cfg, todo[i], &hc, NULL) == 0 && hc.libssh2_gaps.nr;

		route_add(m, todo[i], need ? MUX_OPENSSH : MUX_REMOTE);
		if (need) {
			(void)mr_buf_printf(&names, "%s%s (%s)", nopen ? ", " : "", todo[i], hc.libssh2_gaps.v[0]);
			nopen++;
		}
		mr_ssh_host_cfg_release(&hc);
	}
said:
	if (nopen)
		mr_info("using the OpenSSH client for %s (--ssh libssh2|openssh to choose)",
			mr_buf_cstr(&names));
out:
	free(todo);
	mr_buf_release(&names);
}

static void classify_one(struct mux_hal *m, const char *host)
{
	classify(m, &host, 1);
}

/* libssh2 hosts: through the persist daemon with --persist (said once, and
 * connected directly, when it cannot be reached or started), else directly. */
static int new_libssh2(struct mux_hal *m, struct mr_hal **out, struct meshrun_err *err)
{
	struct meshrun_err perr = MESHRUN_ERR_INIT;
	struct mr_ssh_config *cfg = NULL;
	int rc;

	if (m->base.opts.persist_ms > 0) {
		if (mr_hal_new_persist(out, &m->base.opts, &perr) == 0)
			return 0;
		mr_warn("--persist: %s; connecting directly", perr.msg);
	}
	if ((rc = shared_cfg(m, &cfg, err)) < 0)
		return rc;
	return mr_hal_new_ssh_cfg(out, &m->base.opts, cfg, err);
}

/* The inner backend for side, made on first use. */
static int get_inner(struct mux_hal *m, int side, struct mr_hal **out, struct meshrun_err *err)
{
	int rc;

	if (!m->inner[side]) {
		if (side == MUX_LOCAL)
			rc = m->ctors.new_local ? m->ctors.new_local(&m->inner[side], &m->base.opts, m->ctors.ctx, err)
						: mr_hal_new_local(&m->inner[side], &m->base.opts, err);
		else if (side == MUX_OPENSSH)
			rc = mr_hal_new_openssh(&m->inner[side], &m->base.opts, err);
		else if (m->ctors.new_remote)
			rc = m->ctors.new_remote(&m->inner[side], &m->base.opts, m->ctors.ctx, err);
		else
			rc = new_libssh2(m, &m->inner[side], err);
		if (rc < 0) {
			m->inner[side] = NULL;
			return rc;
		}
	}
	*out = m->inner[side];
	return 0;
}

struct mr_hal *mr_hal_mux_inner(struct mr_hal *hal, const char *host)
{
	if (!hal || hal->ops->kind != MR_HAL_MUX)
		return NULL;
	return to_mux_hal(hal)->inner[side_of(to_mux_hal(hal), host)];
}

/* --- run and connect: each side's share of the batch --- */

/* An inner backend's share of the batch: part[j] is the copy of cmds[idx[j]]. */
struct mux_part {
	struct mr_hal *hal; /* the mux, whose caller is told */
	struct mr_hal_cmd *cmds, *part;
	const size_t *idx;
};

/* A command of the share is final: its result goes back now and is reported. */
static void mux_part_done(struct mr_hal_cmd *cmd, void *ctx)
{
	struct mux_part *mp = ctx;
	struct mr_hal_cmd *orig = &mp->cmds[mp->idx[cmd - mp->part]];

	*orig = *cmd; /* the same buffers: copied back once more at the end */
	mr_hal_cmd_done(mp->hal, orig);
}

static int mux_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err)
{
	struct mux_hal *m = to_mux_hal(hal);
	struct mr_hal_cmd *part = calloc(n, sizeof(*part));
	size_t *idx = calloc(n, sizeof(*idx));
	int rc = 0;

	if (!part || !idx) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "run %zu commands: out of memory", n);
		goto out;
	}
	{
		const char **hosts = calloc(n, sizeof(*hosts));

		for (size_t i = 0; hosts && i < n; i++)
			hosts[i] = cmds[i].hal_rc == 0 ? mr_hal_host_name(cmds[i].host) : "127.0.0.1";
		if (hosts)
			classify(m, hosts, n);
		free(hosts);
	}
	for (int side = 0; side < MUX_N; side++) {
		struct meshrun_err ierr = MESHRUN_ERR_INIT;
		struct mr_hal *in = NULL;
		size_t k = 0;
		int r;

		for (size_t i = 0; i < n; i++)
			if (cmds[i].hal_rc == 0 && side_of(m, cmds[i].host) == side)
				idx[k++] = i;
		if (!k)
			continue;
		if (get_inner(m, side, &in, &ierr) < 0) {
			/* e.g. a bad ssh_config: every command of that side fails with it */
			for (size_t j = 0; j < k; j++) {
				cmds[idx[j]].hal_rc = ierr.code;
				cmds[idx[j]].err = ierr;
				mr_hal_cmd_done(hal, &cmds[idx[j]]);
			}
			continue;
		}
		for (size_t j = 0; j < k; j++)
			part[j] = cmds[idx[j]];
		/* < 0: that hal broke; go on with the other side. Results are reported
		 * as they come only when our own caller asked (hal->run). */
		{
			struct mux_part mp = { hal, cmds, part, idx };

			r = mr_hal_run_cb(in, part, k, hal->run ? mux_part_done : NULL, &mp, err);
		}
		if (r < 0 && rc == 0)
			rc = r;
		for (size_t j = 0; j < k; j++)
			cmds[idx[j]] = part[j]; /* the results (and their buffers) go back */
	}
out:
	free(part);
	free(idx);
	return rc;
}

static int mux_connect(struct mr_hal *hal, const char *const *hosts, size_t n,
		       struct meshrun_err *errs)
{
	struct mux_hal *m = to_mux_hal(hal);
	const char **names = calloc(n, sizeof(*names));
	struct meshrun_err *perr = calloc(n, sizeof(*perr));
	size_t *idx = calloc(n, sizeof(*idx));
	int bad = 0;

	if (!names || !perr || !idx) {
		for (size_t i = 0; i < n; i++)
			mr_err_set(&errs[i], MESHRUN_E_NOMEM, "connect to '%s': out of memory",
				   mr_hal_host_name(hosts[i]));
		bad = (int)n;
		goto out;
	}
	classify(m, hosts, n);
	for (int side = 0; side < MUX_N; side++) {
		struct meshrun_err ierr = MESHRUN_ERR_INIT;
		struct mr_hal *in = NULL;
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (side_of(m, hosts[i]) == side)
				idx[k++] = i;
		if (!k)
			continue;
		if (get_inner(m, side, &in, &ierr) < 0) {
			for (size_t j = 0; j < k; j++)
				errs[idx[j]] = ierr;
			bad += (int)k;
			continue;
		}
		for (size_t j = 0; j < k; j++)
			names[j] = hosts[idx[j]];
		bad += mr_hal_connect(in, names, k, perr);
		for (size_t j = 0; j < k; j++)
			errs[idx[j]] = perr[j];
	}
out:
	free(names);
	free(perr);
	free(idx);
	return bad;
}

/* --- procs --- */

static void fwd_stdout(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	(void)p;
	mr_proc_deliver_stdout(&((struct mux_proc *)ctx)->base, data, len);
}

static void fwd_stderr(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	(void)p;
	mr_proc_deliver_stderr(&((struct mux_proc *)ctx)->base, data, len);
}

static void fwd_exit(struct mr_proc *p, int hal_rc, int status, int sig,
		     const struct meshrun_err *err, void *ctx)
{
	(void)p;
	mr_proc_deliver_exit(&((struct mux_proc *)ctx)->base, hal_rc, status, sig, err);
}

static int mux_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		     struct meshrun_err *err)
{
	struct mux_hal *m = to_mux_hal(hal);
	struct mux_proc *mp = calloc(1, sizeof(*mp));
	struct mr_spawn isp = *sp;
	struct mr_hal *in = NULL;
	int rc;

	if (!mp)
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn '%s': out of memory", sp->argv[0]);
	rc = mr_proc_init(&mp->base, hal, sp);
	if (rc < 0) {
		free(mp);
		return mr_err_set(err, rc, "spawn '%s': out of memory", sp->argv[0]);
	}
	isp.events.ctx = mp;
	isp.events.on_stdout = fwd_stdout;
	isp.events.on_stderr = fwd_stderr;
	isp.events.on_exit = fwd_exit;
	isp.user = mp;
	classify_one(m, mr_hal_host_name(sp->host));
	if ((rc = get_inner(m, side_of(m, sp->host), &in, err)) < 0 ||
	    (rc = mr_hal_spawn(in, &isp, &mp->inner, err)) < 0) {
		mr_proc_release_common(&mp->base);
		free(mp);
		return rc;
	}
	*out = &mp->base;
	return 0;
}

static int mux_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	return mr_proc_write(to_mux_proc(p)->inner, data, len, err);
}

static int mux_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	return mr_proc_close_stdin(to_mux_proc(p)->inner, err);
}

static int mux_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	return mr_proc_signal(to_mux_proc(p)->inner, sig, err);
}

static void mux_proc_release(struct mr_proc *p)
{
	struct mux_proc *mp = to_mux_proc(p);

	mr_proc_release(mp->inner); /* kills it if it still runs; no callbacks */
	mr_proc_release_common(p);
	free(mp);
}

static bool any_running(const struct mr_hal *hal)
{
	for (const struct mr_proc *p = hal->procs; p; p = p->next)
		if (!p->exited)
			return true;
	return false;
}

static int mux_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct mux_hal *m = to_mux_hal(hal);
	size_t first = 0;
	int wait = timeout_ms, pr;

	if (!any_running(hal) && !hal->nwatch)
		wait = 0; /* nothing could ever happen */
	mr_pollset_reset(&m->ps);
	for (int side = 0; side < MUX_N; side++) {
		struct mr_hal *in = m->inner[side];

		if (!in)
			continue;
		if (!in->ops->poll_prepare) {
			if (wait < 0 || wait > MR_HAL_MUX_TICK_MS)
				wait = MR_HAL_MUX_TICK_MS;
		} else if (in->ops->poll_prepare(in, &m->ps, &wait) < 0) {
			return mr_err_set(err, MESHRUN_E_NOMEM, "poll: out of memory");
		}
	}
	if (mr_hal_watch_add_pollfds(hal, &m->ps, &first) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "poll: out of memory");
	if (m->ps.nr == 0 && wait < 0)
		wait = 0;
	pr = poll(m->ps.fds, m->ps.nr, wait);
	if (pr < 0) {
		if (errno == EINTR)
			return 0; /* a signal: return early */
		return mr_err_sys(err, "poll over %zu fds of the local and remote hosts", m->ps.nr);
	}
	for (int side = 0; side < MUX_N; side++) {
		int rc = m->inner[side] ? mr_hal_poll(m->inner[side], 0, err) : 0;

		if (rc < 0)
			return rc;
	}
	if (pr > 0)
		mr_hal_watch_dispatch(hal, &m->ps, first);
	return 0;
}

static void mux_free(struct mr_hal *hal)
{
	struct mux_hal *m = to_mux_hal(hal);

	/* each inner backend kills and reaps its procs (no callbacks) */
	for (int side = 0; side < MUX_N; side++)
		mr_hal_free(m->inner[side]);
	mr_ssh_config_free(m->cfg);
	while (hal->procs) {
		struct mux_proc *mp = to_mux_proc(hal->procs);

		mr_proc_release_common(&mp->base);
		free(mp);
	}
	mr_pollset_release(&m->ps);
	for (size_t i = 0; i < m->nroute; i++)
		free(m->route[i].host);
	free(m->route);
	mr_hal_release_common(hal);
	free(m);
}

static int mux_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir,
			      struct meshrun_err *err)
{
	struct mux_hal *m = to_mux_hal(hal);
	struct mr_hal *in = NULL;
	int rc;

	classify_one(m, mr_hal_host_name(host));
	rc = get_inner(m, side_of(m, host), &in, err);

	return rc < 0 ? rc : mr_hal_remove_at_exit(in, host, dir, err);
}

static bool mux_removes_at_free(struct mr_hal *hal, const char *host)
{
	struct mux_hal *m = to_mux_hal(hal);

	return mr_hal_removes_at_free(m->inner[side_of(m, mr_hal_host_name(host))], host);
}

static bool mux_makes_dirs(struct mr_hal *hal, const char *host)
{
	struct mux_hal *m = to_mux_hal(hal);

	return mr_hal_makes_dirs(m->inner[side_of(m, mr_hal_host_name(host))], host);
}

static const struct mr_hal_ops mux_ops = {
	.name = "auto",
	.kind = MR_HAL_MUX,
	.run = mux_run,
	.connect = mux_connect,
	.spawn = mux_spawn,
	.proc_write = mux_proc_write,
	.proc_close_stdin = mux_proc_close_stdin,
	.proc_signal = mux_proc_signal,
	.poll = mux_poll,
	.poll_prepare = NULL, /* a mux inside a mux is not needed */
	.proc_release = mux_proc_release,
	.free = mux_free,
	.remove_at_exit = mux_remove_at_exit,
	.removes_at_free = mux_removes_at_free,
	.makes_dirs = mux_makes_dirs,
};

int mr_hal_new_mux(struct mr_hal **out, const struct mr_hal_opts *opts,
		   const struct mr_hal_mux_ctors *ctors, struct meshrun_err *err)
{
	struct mux_hal *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (!m)
		return mr_err_set(err, MESHRUN_E_NOMEM, "auto hal: out of memory");
	rc = mr_hal_init(&m->base, &mux_ops, opts);
	if (rc < 0) {
		free(m);
		return mr_err_set(err, rc, "auto hal: out of memory");
	}
	if (ctors)
		m->ctors = *ctors;
	m->probe = -1;
	*out = &m->base;
	return 0;
}

int mr_hal_new_auto(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err)
{
	return mr_hal_new_mux(out, opts, NULL, err);
}
