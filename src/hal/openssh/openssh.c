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
 *
 * This file: the hal ops and the wait (pump: the poll set, the timers); the ssh
 * processes, hosts and jobs, and the steps that advance them, are in
 * openssh_child.c (openssh_impl.h says who owns what).
 */
#include "common/compat.h"
#include "hal/openssh/openssh_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/spawn.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/sh.h"
#include "hal/ssh_config.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

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

/* ---- the loop ---------------------------------------------------------------- */

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
		if (j->kind == J_RUN && !j->base.end.done && !j->timed_out && j->base.deadline_ms)
			LOWER(j->base.deadline_ms);
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
		if (j->c.in_fd >= 0 && j->base.in.len)
			rc |= mr_pollset_add(ps, j->c.in_fd, POLLOUT) < 0;
		if (j->c.out_fd >= 0 && !mr_os_job_throttled(j, false))
			rc |= mr_pollset_add(ps, j->c.out_fd, POLLIN) < 0;
		if (j->c.err_fd >= 0 && !mr_os_job_throttled(j, true))
			rc |= mr_pollset_add(ps, j->c.err_fd, POLLIN) < 0;
		if (j->c.pidfd >= 0)
			rc |= mr_pollset_add(ps, j->c.pidfd, POLLIN) < 0;
	}
	return rc ? MESHRUN_E_NOMEM : 0;
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

	mr_os_step(oh);
	mr_os_service(oh);
	mr_os_step(oh);
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
	mr_os_service(oh);
	mr_os_step(oh);
	if (watch && n > 0)
		mr_hal_watch_dispatch(&oh->base, &oh->ps, first_watch);
	mr_os_reap_jobs(oh);
	return 0;
}

/* ---- ops --------------------------------------------------------------------- */

static bool runs_pending(const struct os_hal *oh)
{
	for (const struct ojob *j = oh->jobs; j; j = j->next)
		if (j->kind == J_RUN && j->base.cmd)
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
		if (mr_os_host_get(oh, host, &h, &cmd->err) < 0) {
			cmd->hal_rc = cmd->err.code;
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		if (h->st == H_FAILED && h->m.pid <= 0)
			h->st = H_NEW; /* a fresh try for a new batch */
		mr_buf_reset(&line);
		if (mr_hal_spawn_cmdline(&line, cmd->argv, NULL, NULL) < 0 ||
		    !(j = mr_os_job_new(oh, h, J_RUN, mr_buf_cstr(&line)))) {
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->base.cmd = cmd;
		j->base.mark.want = true;
		j->base.deadline_ms = j->base.start_ms + mr_hal_cmd_timeout_ms(hal, cmd);
		if (cmd->stdin_len && mr_buf_append(&j->base.in, cmd->stdin_data, cmd->stdin_len) < 0) {
			j->base.cmd = NULL;
			j->started = j->base.end.done = j->finished = true;
			cmd->hal_rc = mr_err_set(&cmd->err, MESHRUN_E_NOMEM, "'%s': out of memory", host);
			mr_hal_cmd_done(hal, cmd);
			continue;
		}
		j->base.in_closed = true;
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
			if (j->base.cmd) {
				mr_os_job_fail(j, &e);
				mr_os_job_ended(j);
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

		if (mr_os_host_get(oh, mr_hal_host_name(hosts[i]), &h, &errs[i]) < 0)
			continue;
		if (h->st == H_FAILED && h->m.pid <= 0)
			h->st = H_NEW;
		h->wanted = true;
	}
	while (!hosts_settled(oh))
		if (pump(oh, -1, false) < 0)
			break;
	for (size_t i = 0; i < n; i++) {
		struct ohost *h = errs[i].code ? NULL : mr_os_host_find(oh, mr_hal_host_name(hosts[i]));

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

	if ((rc = mr_hal_check_env(host, sp->env, err)) < 0 || (rc = mr_os_host_get(oh, host, &h, err)) < 0)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p || mr_hal_spawn_cmdline(&line, sp->argv, sp->env, sp->cwd) < 0 || mr_proc_init(&p->base, hal, sp) < 0) {
		mr_buf_release(&line);
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	}
	if (h->st == H_FAILED && h->m.pid <= 0)
		h->st = H_NEW;
	j = mr_os_job_new(oh, h, J_PROC, mr_buf_cstr(&line));
	mr_buf_release(&line);
	if (!j) {
		mr_proc_release_common(&p->base);
		free(p);
		return mr_err_set(err, MESHRUN_E_NOMEM, "spawn on '%s': out of memory", host);
	}
	j->base.mark.want = true;
	j->proc = p;
	p->job = j;
	*out = &p->base;
	return 0;
}

static int os_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;
	int rc;

	if (j->base.end.done || j->ended || (j->started && j->c.in_fd < 0))
		return 0; /* it is gone, or closed its stdin; its exit is on the way */
	rc = mr_hal_job_queue_input(&j->base, p, data, len, err);
	if (rc < 0)
		return rc;
	mr_os_write_some(&j->c.in_fd, &j->base.in);
	return 0;
}

static int os_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;

	(void)err;
	j->base.in_closed = true;
	if (j->started && !j->base.in.len)
		mr_close(&j->c.in_fd);
	return 0;
}

static int os_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct ojob *j = to_os_proc(p)->job;
	int rc = mr_hal_job_signal(&j->base, p, sig, j->base.end.done, j->ended, err);

	if (rc <= 0)
		return rc;
	if (!mr_os_queue_kill(j->h, j->base.pgid, sig))
		return mr_err_set(err, MESHRUN_E_NOMEM, "signal '%s' on '%s': out of memory", p->cmdline, p->host);
	return 0;
}

static bool proc_ready(const struct os_proc *p)
{
	return mr_hal_job_has_news(&p->job->base);
}

static void backlog(struct mr_proc *p, struct mr_proc_backlog *b)
{
	mr_hal_job_backlog(&to_os_proc(p)->job->base, b);
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

	mr_os_step(oh);
	mr_os_service(oh);
	mr_os_step(oh);
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

			if (j->base.end.done || !j->started)
				continue;
			any = true;
			if (j->base.pgid)
				mr_os_queue_kill(j->h, j->base.pgid, sigs[k]);
			else
				j->base.pending_sig = sigs[k];
		}
		while (any && mr_ms_left(end) > 0) {
			any = false;
			for (size_t i = 0; i < n; i++)
				any |= js[i]->started && !js[i]->base.end.done;
			if (any && pump(oh, mr_ms_left(end), false) < 0)
				break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!js[i]->base.end.done) {
			struct meshrun_err e = MESHRUN_ERR_INIT;

			mr_err_set(&e, MESHRUN_E_CANCELED, "'%s': stopped", js[i]->h->name);
			mr_os_job_fail(js[i], &e);
		}
		mr_os_och_kill(&js[i]->c);
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
	mr_os_och_kill(&j->c);
	free(p);
}

static void os_proc_release(struct mr_proc *mp)
{
	struct os_proc *p = to_os_proc(mp);
	struct os_hal *oh = to_os_hal(mp->hal);
	struct ojob *j = p->job;

	if (!j->base.end.done)
		kill_jobs(oh, &j, 1);
	proc_forget(p);
	mr_os_reap_jobs(oh);
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
	mr_os_reap_jobs(oh);
	/* the watchdogs' last lines ("-PGID": a few bytes, they fit the socket
	 * buffer; never block here on a master that stopped reading), then EOF and
	 * ssh -O exit */
	for (struct ohost *h = oh->hosts; h; h = h->next)
		mr_os_write_some(&h->m.in_fd, &h->wdq);
	mr_os_hosts_close(oh);
	while (oh->hosts) {
		struct ohost *h = oh->hosts;

		oh->hosts = h->next;
		mr_os_och_close(&h->m);
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
	rc = mr_os_host_get(oh, host, &h, err);
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
		return mr_hal_err_set_why(err, h->err.code ? h->err.code : MESHRUN_E_CONNECT, h->err.sys_errno,
					  "remove '%s' at exit on '%s': %s", dir, host,
					  h->err.msg[0] ? h->err.msg : "not connected");
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
