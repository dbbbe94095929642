/*
 * config/run.c - meshconfig's steps in order (not launch/run.c, a meshrun job):
 * hosts, ssh check, then the ethernet or the thunderbolt path (tb.c), and the hal
 * the options ask for. What the steps share is in ctx.c.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/hostfold.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/boot.h"
#include "config/config_impl.h"
#include "hal/replay.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- step 1: hosts ------------------------------------------------------------- */

/* The replay hal's fixture hosts as a list "h1,h2,..." (malloc'd), or NULL. */
static char *replay_hosts(struct mr_hal *hal)
{
	struct mr_replay *rp = mr_hal_replay(hal);
	struct mr_buf b = MR_BUF_INIT;

	if (!rp || mr_replay_host_count(rp) == 0)
		return NULL;
	for (size_t i = 0; i < mr_replay_host_count(rp); i++)
		if ((i && mr_buf_putc(&b, ',') < 0) || mr_buf_puts(&b, mr_replay_host(rp, i)) < 0) {
			mr_buf_release(&b);
			return NULL;
		}
	return mr_buf_detach(&b, NULL);
}

static int load_hosts(struct cfg_run *c, struct mr_hostfile **out)
{
	const struct mr_config_opts *o = c->o;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *sim_hosts = NULL;
	const char *list = o->hosts;
	int rc;

	if (o->hostfile) {
		if (o->hosts)
			cfg_warn(c, "both --hosts and --hostfile given: using the hosts of '%s'",
				 o->hostfile);
		rc = mr_hostfile_load(o->hostfile, out, &e);
	} else {
		/* --simulate without hosts: the fixture's, in its order */
		if (!list && o->simulate)
			list = sim_hosts = replay_hosts(c->hal);
		rc = mr_hostfile_from_list(list ? list : "127.0.0.1", out, &e);
	}
	free(sim_hosts);
	if (rc < 0) {
		/* name the flag: "--hostfile: open 'x': ..." (--hosts' errors name it) */
		cfg_error(c, "%s%s", o->hostfile ? "--hostfile: " : "", e.msg);
		return MR_CONFIG_EXIT_USAGE;
	}
	if ((*out)->nhosts == 0) {
		cfg_error(c, "no hosts to configure");
		mr_hostfile_free(*out);
		*out = NULL;
		return MR_CONFIG_EXIT_USAGE;
	}
	return 0;
}

/* ---- step 2: ssh check --------------------------------------------------------- */

static char *const argv_true[] = { "true", NULL };
static char *const argv_sudo[] = { "sudo", "-n", "true", NULL };

/*
 * Connect to every host, then run `true` and `sudo -n true` everywhere in one
 * batch. hosts[] keeps the reachable ones; the others are an error naming each
 * of them, or (--ignore-unreachable) a warning.
 */
static int ssh_check(struct cfg_run *c, const struct mr_hostfile *in)
{
	size_t n = in->nhosts, nbad = 0, nsudo = 0;
	const char **names = xcalloc(n, sizeof(*names));
	struct meshrun_err *errs = xcalloc(n, sizeof(*errs));
	struct mr_hal_cmd *cmds = xcalloc(2 * n, sizeof(*cmds));
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char (*why)[MESHRUN_ERR_MSG_MAX] = xcalloc(n, sizeof(*why));
	size_t *idx = xcalloc(n, sizeof(*idx)), nrun = 0;
	int rc = 0;

	c->t_step = mr_now_us();
	if (c->pg.tty)
		mr_progress_step(&c->pg, "ssh check", n);
	cfg_info(c, "checking ssh access to %zu host%s (hal %s)", n, n == 1 ? "" : "s",
		 mr_hal_name(c->hal));
	for (size_t i = 0; i < n; i++)
		names[i] = in->hosts[i].ssh;
	mr_hal_connect(c->hal, names, n, errs);
	/* Only hosts that connected get the commands (no second connect timeout);
	 * cmds[2i], cmds[2i+1] belong to the k-th connected host, idx[k] = i. */
	for (size_t i = 0; i < n; i++) {
		if (errs[i].code < 0)
			continue;
		idx[nrun] = i;
		cfg_cmd(c, &cmds[2 * nrun], names[i], argv_true);
		cfg_cmd(c, &cmds[2 * nrun + 1], names[i], argv_sudo);
		nrun++;
	}
	if (nrun && cfg_hal_run(c, cmds, 2 * nrun, &e) < 0) {
		cfg_error(c, "ssh check: %s", e.msg);
		rc = MR_CONFIG_EXIT_UNREACHABLE;
		goto out;
	}

	c->hosts = xcalloc(n, sizeof(*c->hosts));
	for (size_t i = 0, k = 0; i < n; i++) {
		const struct mr_hal_cmd *t = NULL, *sudo = NULL;
		char desc[256];

		if (k < nrun && idx[k] == i) {
			t = &cmds[2 * k];
			sudo = &cmds[2 * k + 1];
			k++;
		}
		if (!t) {
			snprintf(why[i], sizeof(why[i]), "%s", errs[i].msg);
		} else if (!mr_hal_cmd_ok(t)) {
			snprintf(why[i], sizeof(why[i]), "'true': %.900s",
				 t->hal_rc < 0 ? t->err.msg
					       : mr_hal_cmd_describe(t, desc, sizeof(desc)));
		} else {
			struct cfg_host *h = &c->hosts[c->nhosts++];
			h->name = xstrdup(names[i]);
			if (mr_strvec_pushv(&h->ips, in->hosts[i].ips.v) < 0) {
				cfg_error(c, "out of memory");
				rc = MR_CONFIG_EXIT_TOPOLOGY;
				goto out;
			}
			h->reachable = true;
			h->has_sudo = mr_hal_cmd_ok(sudo);
			nsudo += h->has_sudo;
			continue;
		}
		nbad++;
	}
	if (nbad) {
		if (!c->o->ignore_unreachable)
			cfg_error(c, "could not ssh to %zu of %zu hosts:", nbad, n);
		else
			cfg_warn(c, "ignoring %zu unreachable host%s (--ignore-unreachable):", nbad,
				 nbad == 1 ? "" : "s");
		/* every host in full (a long list folded), the hint that fits each
		 * kind of failure once (not "password-less ssh?" for a bad name) */
		struct mr_hostfold fold = MR_HOSTFOLD_INIT;
		struct mr_strvec lines = MR_STRVEC_INIT;
		int frc = 0;

		for (size_t i = 0; i < n && frc == 0; i++)
			if (why[i][0])
				frc = mr_hostfold_add(&fold, names[i], why[i], mr_hal_err_hint(&errs[i]));
		if (frc == 0)
			frc = mr_hostfold_render(&fold, c->o->verbose, "--verbose", "- ", &lines);
		for (size_t i = 0; i < lines.nr; i++)
			(c->o->ignore_unreachable ? cfg_warn : cfg_error)(c, "  %s", lines.v[i]);
		if (frc < 0)
			cfg_error(c, "out of memory");
		mr_strvec_release(&lines);
		mr_hostfold_release(&fold);
		if (!c->o->ignore_unreachable) {
			rc = MR_CONFIG_EXIT_UNREACHABLE;
			goto out;
		}
	}
	if (c->nhosts == 0) {
		cfg_error(c, "no reachable host left");
		rc = MR_CONFIG_EXIT_UNREACHABLE;
		goto out;
	}
	cfg_step_done(c, "ssh: %zu host%s reachable, %zu with passwordless sudo", c->nhosts,
		      c->nhosts == 1 ? "" : "s", nsudo);
out:
	cfg_cmds_release(cmds, 2 * n);
	free(idx);
	free(why);
	free(cmds);
	free(errs);
	free(names);
	return rc;
}

/* ---- ethernet ------------------------------------------------------------------ */

static int ethernet(struct cfg_run *c)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf;
	int rc;

	cfg_info(c, "preparing an ethernet hostfile");
	rc = cfg_collect_ips(c);
	if (rc)
		return rc;
	hf = cfg_hostfile_new(c, "");
	if (!hf) {
		cfg_error(c, "out of memory");
		return MR_CONFIG_EXIT_TOPOLOGY;
	}
	for (size_t i = 0; i < c->nhosts && rc == 0; i++) {
		int k = mr_hostfile_add_host(hf, c->hosts[i].name, &e);
		if (k < 0 || mr_strvec_pushv(&hf->hosts[k].ips, c->hosts[i].ips.v) < 0) {
			cfg_error(c, "hostfile: %s", e.msg[0] ? e.msg : "out of memory");
			rc = MR_CONFIG_EXIT_TOPOLOGY;
			break;
		}
		hf->hosts[k].has_rdma = true; /* MLX writes "rdma": [] */
	}
	if (rc == 0)
		rc = cfg_write_hostfile(c, hf);
	mr_hostfile_free(hf);
	return rc;
}

/* ---- the whole run ------------------------------------------------------------- */

static void run_release(struct cfg_run *c)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		free(c->hosts[i].name);
		free(c->hosts[i].ip);
		mr_strvec_release(&c->hosts[i].ips);
	}
	MR_FREE(c->hosts);
	c->nhosts = 0;
}

/*
 * --output-hostfile must be writable before any host is touched (the setup may
 * run sudo on every host): its directory exists and takes a new file (a probe
 * file, created and removed: root passes access() on a read-only mount).
 * Errors name the path as the user gave it.
 */
static int check_output(struct cfg_run *c)
{
	const char *path = c->o->output_hostfile;
	char dir[4096], probe[4096 + 32];
	const char *slash;
	struct stat st;
	int fd;

	if (!path || !strcmp(path, "-") || c->o->dot || c->o->png)
		return 0;
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		cfg_error(c, "--output-hostfile '%s': is a directory", path);
		return MR_CONFIG_EXIT_USAGE;
	}
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return 0; /* /dev/stdout, a FIFO: written in place */
	slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
		 slash ? path : ".");
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cfg_error(c, "--output-hostfile '%s': directory '%s' %s", path, dir,
			  stat(dir, &st) < 0 ? "does not exist" : "is not a directory");
		return MR_CONFIG_EXIT_USAGE;
	}
	snprintf(probe, sizeof(probe), "%s/.meshconfig-probe.XXXXXX", dir);
	fd = mkstemp(probe);
	if (fd < 0) {
		cfg_error(c, "--output-hostfile '%s': cannot create a file in '%s': %s", path, dir,
			  strerror(errno));
		return MR_CONFIG_EXIT_USAGE;
	}
	close(fd);
	unlink(probe);
	return 0;
}

int mr_config_run(const struct mr_config_opts *o, struct mr_hal *hal, FILE *out, FILE *err)
{
	struct cfg_run c = { .o = o, .hal = hal, .out = out, .err = err };
	struct mr_hostfile *in = NULL;
	int64_t t0 = mr_now_us();
	int rc;

	c.timeout_ms = (int)o->timeout_ms;
	/* The step line only on a terminal and without --verbose (which logs each step). */
	mr_progress_init(&c.pg, err, "meshconfig", strcmp(o->over, "ethernet") ? 4 : 2,
			 !o->verbose && isatty(fileno(err)) && !getenv("NO_PROGRESS"));
	rc = check_output(&c);
	if (!rc)
		rc = load_hosts(&c, &in);
	if (rc)
		return rc;
	rc = ssh_check(&c, in);
	mr_hostfile_free(in);
	if (rc)
		goto out;
	if (o->undo)
		rc = cfg_undo(&c); /* boot.h */
	else if (!strcmp(o->over, "ethernet"))
		rc = ethernet(&c);
	else
		rc = cfg_thunderbolt(&c);
	cfg_info(&c, "done in %.1f ms (exit status %d)", (double)(mr_now_us() - t0) / 1000.0, rc);
out:
	mr_progress_clear(&c.pg);
	run_release(&c);
	return rc;
}

/* ---- the hal the options ask for ------------------------------------------------ */

static bool is_local_name(const char *s, size_t n)
{
	return (n == 9 && !strncmp(s, "127.0.0.1", n)) || (n == 9 && !strncmp(s, "localhost", n)) ||
	       (n == 3 && !strncmp(s, "::1", n));
}

/* Only local names in --hosts (or its default): no ssh needed, as for mlx.launch. */
static bool all_local(const struct mr_config_opts *o)
{
	const char *s = o->hosts ? o->hosts : "127.0.0.1";

	if (o->hostfile)
		return false;
	for (;;) {
		size_t n = strcspn(s, ",");
		if (!is_local_name(s, n))
			return false;
		if (!s[n])
			return true;
		s += n + 1;
	}
}

int mr_config_main_with(const struct mr_config_opts *o, FILE *out, FILE *err)
{
	struct mr_hal_opts ho;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;
	int rc;

	memset(&ho, 0, sizeof(ho));
	ho.run_timeout_ms = (int)o->timeout_ms;
	if (o->timeout_ms > 0)
		ho.connect_timeout_ms = (int)o->timeout_ms;
	ho.batch = true;
	{
		bool stop;

		if (mr_ssh_opts_apply(&o->ssh, &ho, &stop, &e) < 0) {
			mr_log_print(err, 0, MR_LOG_ERROR, "%s", e.msg);
			return MR_CONFIG_EXIT_USAGE;
		}
		if (stop) {
			rc = mr_hal_persist_stop(&ho, &e);
			if (rc < 0)
				mr_log_print(err, 0, MR_LOG_ERROR, "--persist stop: %s", e.msg);
			else
				mr_log_print(err, 0, MR_LOG_INFO, "%s", rc ? "persist daemon stopped" : "no persist daemon was running");
			return rc < 0 ? MR_CONFIG_EXIT_UNREACHABLE : 0;
		}
	}
	if (o->simulate)
		rc = cfg_sim_hal(o->simulate, &ho, &hal, &e);
	else if (all_local(o))
		rc = mr_hal_new_local(&hal, &ho, &e);
	else /* local names by fork/exec, the others over ssh (hal.h) */
		rc = mr_hal_new_auto(&hal, &ho, &e);
	if (rc < 0) {
		mr_log_print(err, 0, MR_LOG_ERROR, "%s", e.msg); /* no run yet: never coloured */
		return o->simulate ? MR_CONFIG_EXIT_USAGE : MR_CONFIG_EXIT_TOPOLOGY;
	}
	rc = mr_config_run(o, hal, out, err);
	mr_hal_free(hal);
	return rc;
}
