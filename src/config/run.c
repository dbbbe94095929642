/*
 * run.c - meshconfig's steps in order: hosts, ssh check, then the ethernet or the
 * thunderbolt path, and the hostfile at the end.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/config_impl.h"
#include "hal/replay.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <unistd.h>

/* ---- messages ---------------------------------------------------------------- */

static void emit(struct cfg_run *c, int level, const char *fmt, va_list ap)
{
	static const char *tags[] = { "ERROR", "WARN", "INFO" };
	static const char *colors[] = { "\033[31m", "\033[33m", "\033[32m" };
	char line[2048];
	bool color = isatty(fileno(c->err)) && !getenv("NO_COLOR");

	vsnprintf(line, sizeof(line), fmt, ap);
	mr_progress_clear(&c->pg);
	if (level < 0)
		fprintf(c->err, "%s\n", line);
	else if (color)
		fprintf(c->err, "%s[%s]\033[0m %s\n", colors[level], tags[level], line);
	else
		fprintf(c->err, "[%s] %s\n", tags[level], line);
	fflush(c->err);
}

void cfg_error(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, 0, fmt, ap);
	va_end(ap);
}

void cfg_warn(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, 1, fmt, ap);
	va_end(ap);
}

void cfg_info(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->o->verbose)
		return;
	va_start(ap, fmt);
	emit(c, 2, fmt, ap);
	va_end(ap);
}

void cfg_say(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, -1, fmt, ap);
	va_end(ap);
}

void cfg_step(struct cfg_run *c, const char *what)
{
	c->t_step = mr_now_us();
	if (c->pg.tty)
		mr_progress_step(&c->pg, what, c->nhosts);
	cfg_info(c, "%s", what);
}

void cfg_step_done(struct cfg_run *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (c->pg.tty)
		mr_progress_step_done(&c->pg);
	if (!c->o->verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	cfg_info(c, "%s (%.1f ms)", line, (double)(mr_now_us() - c->t_step) / 1000.0);
}

/* ---- small helpers ------------------------------------------------------------- */

void cfg_cmd(struct cfg_run *c, struct mr_hal_cmd *cmd, const char *host, char *const *argv)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->host = host;
	cmd->argv = argv;
	cmd->timeout_ms = c->timeout_ms;
}

/* The hosts of one batch, for the progress line (cfg_hal_run). */
struct host_count {
	struct cfg_run *c;
	struct mr_hal_cmd *cmds;
	size_t *slot;        /* per command: its host in name[] */
	const char **name;   /* the distinct hosts */
	size_t *left;        /* per host: its commands not finished */
	size_t nhost, done;
};

static void host_cmd_done(struct mr_hal_cmd *cmd, void *ctx)
{
	struct host_count *hc = ctx;
	size_t k = hc->slot[cmd - hc->cmds];

	if (!hc->left[k] || --hc->left[k])
		return;
	hc->done++;
	mr_progress_update(&hc->c->pg, hc->done, hc->name[k]);
}

int cfg_hal_run(struct cfg_run *c, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *e)
{
	struct host_count hc = { c, cmds, NULL, NULL, NULL, 0, 0 };
	int rc;

	if (!c->pg.tty || !n)
		return mr_hal_run(c->hal, cmds, n, e);
	hc.slot = xcalloc(n, sizeof(*hc.slot));
	hc.name = xcalloc(n, sizeof(*hc.name));
	hc.left = xcalloc(n, sizeof(*hc.left));
	for (size_t i = 0; i < n; i++) {
		const char *h = cmds[i].host ? cmds[i].host : "";
		size_t k = 0;

		while (k < hc.nhost && strcmp(hc.name[k], h))
			k++;
		if (k == hc.nhost)
			hc.name[hc.nhost++] = h;
		hc.slot[i] = k;
		hc.left[k]++;
	}
	/* hosts of the step with nothing in this batch (unreachable, no retry) */
	hc.done = c->pg.total > hc.nhost ? c->pg.total - hc.nhost : 0;
	if (hc.done)
		mr_progress_update(&c->pg, hc.done, NULL);
	rc = mr_hal_run_cb(c->hal, cmds, n, host_cmd_done, &hc, e);
	free(hc.left);
	free(hc.name);
	free(hc.slot);
	return rc;
}

void cfg_cmds_release(struct mr_hal_cmd *cmds, size_t n)
{
	for (size_t i = 0; cmds && i < n; i++)
		mr_hal_cmd_release(&cmds[i]);
}

bool cfg_ifname_ok(const char *s)
{
	return s && isalnum((unsigned char)s[0]) && mr_is_ifname(s);
}

bool cfg_ipv4_ok(const char *s)
{
	struct in_addr a;

	/* inet_pton accepts only the dotted-quad form: no "1.2.3", no leading blanks. */
	return s && strlen(s) <= 15 && inet_pton(AF_INET, s, &a) == 1;
}

void cfg_first_line(const struct mr_buf *b, char *dst, size_t n)
{
	const char *s = mr_buf_cstr(b);
	size_t len;

	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	len = strcspn(s, "\r\n");
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	snprintf(dst, n, "%.*s", (int)MR_MIN(len, (size_t)INT_MAX), s);
}

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
		cfg_error(c, "%s", e.msg);
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
		for (size_t i = 0; i < n; i++) {
			if (!why[i][0])
				continue;
			if (!c->o->ignore_unreachable)
				cfg_error(c, "  - %s: %s", names[i], why[i]);
			else
				cfg_warn(c, "  - %s: %s", names[i], why[i]);
		}
		if (!c->o->ignore_unreachable) {
			cfg_error(c, "maybe they are not set up for password-less ssh?");
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

/* ---- addresses (ethernet, and the jaccl hostfile's ips) ------------------------ */

static char *const argv_ip_en0[] = { "ipconfig", "getifaddr", "en0", NULL };
static char *const argv_ip_en1[] = { "ipconfig", "getifaddr", "en1", NULL };

static bool has_string(const struct mr_strvec *sv, const char *s)
{
	for (size_t i = 0; i < sv->nr; i++)
		if (!strcmp(sv->v[i], s))
			return true;
	return false;
}

void cfg_ip_cmds(struct cfg_run *c, struct mr_hal_cmd *cmds, size_t stride)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		cfg_cmd(c, &cmds[stride * i], c->hosts[i].name, argv_ip_en0);
		cfg_cmd(c, &cmds[stride * i + 1], c->hosts[i].name, argv_ip_en1);
	}
}

int cfg_ip_parse(struct cfg_run *c, const struct mr_hal_cmd *cmds, size_t stride)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		struct cfg_host *h = &c->hosts[i];

		for (int k = 0; k < 2 && !h->ip; k++) {
			const struct mr_hal_cmd *cmd = &cmds[stride * i + (size_t)k];
			char ip[64];

			/* no ipconfig at all (local hal on Linux): no address, as exit 127 over ssh */
			if (cmd->hal_rc == MESHRUN_E_EXEC)
				continue;
			if (cmd->hal_rc < 0) {
				cfg_error(c, "%s: 'ipconfig getifaddr en%d': %s", h->name, k,
					  cmd->err.msg);
				return MR_CONFIG_EXIT_DISCOVERY;
			}
			/* macOS exits 1 with no output when the interface has no address. */
			if (!mr_hal_cmd_ok(cmd))
				continue;
			cfg_first_line(&cmd->out, ip, sizeof(ip));
			if (!ip[0])
				continue;
			if (!mr_is_ip(ip)) {
				cfg_error(c, "%s: 'ipconfig getifaddr en%d': expected an IP address, got '%.40s'",
					  h->name, k, ip);
				return MR_CONFIG_EXIT_DISCOVERY;
			}
			h->ip = xstrdup(ip);
		}
		if (h->ip && !has_string(&h->ips, h->ip) && mr_strvec_push(&h->ips, h->ip) < 0) {
			cfg_error(c, "out of memory");
			return MR_CONFIG_EXIT_TOPOLOGY;
		}
		if (!h->ip && !h->ips.nr)
			cfg_warn(c, "could not find an IP address for '%s' (en0 and en1 have none)",
				 h->name);
	}
	return 0;
}

int cfg_collect_ips(struct cfg_run *c)
{
	struct mr_hal_cmd *cmds = xcalloc(2 * c->nhosts, sizeof(*cmds));
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc;

	cfg_step(c, "getting the IP address of every host");
	cfg_ip_cmds(c, cmds, 2);
	rc = cfg_hal_run(c, cmds, 2 * c->nhosts, &e);
	if (rc < 0) {
		cfg_error(c, "ipconfig: %s", e.msg);
		rc = MR_CONFIG_EXIT_DISCOVERY;
	} else {
		rc = cfg_ip_parse(c, cmds, 2);
	}
	cfg_cmds_release(cmds, 2 * c->nhosts);
	free(cmds);
	if (rc == 0)
		cfg_step_done(c, "addresses collected");
	return rc;
}

/* ---- hostfile ------------------------------------------------------------------ */

struct mr_hostfile *cfg_hostfile_new(struct cfg_run *c, const char *backend)
{
	struct mr_hostfile *hf = mr_hostfile_new();

	if (!hf)
		return NULL;
	/* MLX always writes the object form: {"backend": ..., "envs": [...], "hosts": [...]}. */
	hf->object_form = true;
	hf->backend = xstrdup(backend ? backend : "");
	for (size_t i = 0; i < c->o->envs.nr; i++)
		if (mr_strvec_push(&hf->envs, c->o->envs.v[i]) < 0)
			goto fail;
	return hf;
fail:
	mr_hostfile_free(hf);
	return NULL;
}

int cfg_write_hostfile(struct cfg_run *c, const struct mr_hostfile *hf)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_buf b = MR_BUF_INIT;
	int rc = 0;

	if (c->o->output_hostfile) {
		if (mr_hostfile_save(hf, c->o->output_hostfile, &e) < 0) {
			cfg_error(c, "%s", e.msg);
			return MR_CONFIG_EXIT_TOPOLOGY;
		}
		cfg_info(c, "hostfile written to '%s'", c->o->output_hostfile);
		return 0;
	}
	if (mr_hostfile_emit(hf, &b, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		rc = MR_CONFIG_EXIT_TOPOLOGY;
	} else if (fwrite(b.p, 1, b.len, c->out) != b.len ||
		   /* MLX print()s it: stdout ends with a newline either way */
		   (b.len && b.p[b.len - 1] != '\n' && fputc('\n', c->out) == EOF) ||
		   fflush(c->out) != 0) {
		cfg_error(c, "write the hostfile to stdout: %s", strerror(errno));
		rc = MR_CONFIG_EXIT_TOPOLOGY;
	}
	mr_buf_release(&b);
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
	rc = load_hosts(&c, &in);
	if (rc)
		return rc;
	rc = ssh_check(&c, in);
	mr_hostfile_free(in);
	if (rc)
		goto out;
	if (!strcmp(o->over, "ethernet"))
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
	ho.ssh_config = o->ssh_config;
	ho.known_hosts = o->known_hosts;
	ho.accept_new_hostkeys = o->accept_new_hostkeys;
	ho.batch = true;
	if (o->simulate)
		rc = cfg_sim_hal(o->simulate, &ho, &hal, &e);
	else if (all_local(o))
		rc = mr_hal_new_local(&hal, &ho, &e);
	else /* local names by fork/exec, the others over ssh (hal.h) */
		rc = mr_hal_new_auto(&hal, &ho, &e);
	if (rc < 0) {
		fprintf(err, "[ERROR] %s\n", e.msg);
		return o->simulate ? MR_CONFIG_EXIT_USAGE : MR_CONFIG_EXIT_TOPOLOGY;
	}
	rc = mr_config_run(o, hal, out, err);
	mr_hal_free(hal);
	return rc;
}
