/*
 * config/ctx.c - the bottom of meshconfig: what every step shares (messages, the
 * step line, commands through the hal, the addresses of the hosts, the hostfile
 * output). run.c, tb.c and setup.c call down into it; it calls none of them.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/log.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/config_impl.h"

#include <limits.h>

/* ---- messages ---------------------------------------------------------------- */

/* common/log's line on the run's own stream (tests capture it), after the step line
 * is erased; level MR_LOG_PLAIN for cfg_say. */
static void MR_PRINTF(3, 0) emit(struct cfg_run *c, int level, const char *fmt, va_list ap)
{
	mr_progress_clear(&c->pg);
	mr_log_vprint(c->err, -1, level, fmt, ap);
}

void cfg_error(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, MR_LOG_ERROR, fmt, ap);
	va_end(ap);
}

void cfg_warn(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, MR_LOG_WARN, fmt, ap);
	va_end(ap);
}

void cfg_info(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->o->verbose)
		return;
	va_start(ap, fmt);
	emit(c, MR_LOG_INFO, fmt, ap);
	va_end(ap);
}

void cfg_say(struct cfg_run *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(c, MR_LOG_PLAIN, fmt, ap);
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
			cfg_error(c, "--output-hostfile '%s': %s", c->o->output_hostfile, e.msg);
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
