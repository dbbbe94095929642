/*
 * doctor.c - `meshconfig doctor` (doctor.h): its options, the hal, and the
 * phases in order (doctor_impl.h): reach, facts, checks, path, report.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/log.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "common/shquote.h"
#include "common/spawn.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/config_impl.h"
#include "config/doctor_impl.h"

#include <limits.h>
#include <sys/time.h>

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "unknown"
#endif

static const char usage_line[] = "meshconfig doctor [--hostfile FILE | --hosts LIST] [options]";

static const char trailer[] =
	"Checks every host in parallel over ssh, as meshconfig and meshrun reach it, and\n"
	"prints one table: a row per host, a column per check (reach, software, cables,\n"
	"rdma, path, housekeeping): ok, warn, FAIL, or '-' (not applicable, or not tried\n"
	"because an earlier check of that host failed). Below it each problem is named\n"
	"with the command or action that fixes it. With a hostfile its ips, rdma and\n"
	"mesh_ips are checked against what the hosts really have; the path check\n"
	"connects the ranks on the ports the job would use (--starting-port,\n"
	"--connections-per-ip, as meshrun), with `meshconfig doctor-probe` started on\n"
	"each host the way meshrun starts ranks (it must be installed there: at this\n"
	"meshconfig's path or on the PATH of ssh sessions). RDMA is checked when the\n"
	"backend is jaccl or jaccl-ring (the hostfile's, or --backend).\n"
	"\n"
	"Output (two hosts; a firewall on m1 drops the job's first port):\n"
	"  HOST  reach     software  cables    rdma      path      housekeeping\n"
	"  m1    ok        ok        ok        -         FAIL      ok\n"
	"  m2    ok        ok        ok        -         ok        ok\n"
	"\n"
	"  m1 path FAIL: connects from m2 to rank 0 at 192.168.0.1:32323 time out: a\n"
	"  firewall drops them\n"
	"      fix: on m1: let incoming TCP port 32323 in (System Settings > Network >\n"
	"      Firewall; sudo pfctl -sr lists pf's rules)\n"
	"\n"
	"  1 of 2 hosts cannot run the job yet: m1 (0.9 s)\n"
	"\n"
	"Exit status:\n"
	"  0  every check passed (warnings allowed)\n"
	"  1  a check failed, or the checks could not run (the hal, a hostfile that\n"
	"     meshrun would refuse)\n"
	"  2  usage error\n";

#define DOCTOR_OPTIONS(o)                                                                        \
	{                                                                                        \
		MR_OPT_GROUP("Hosts"),                                                           \
		MR_OPT_STRING(0, "hostfile", &(o)->hostfile, "FILE",                             \
			      "the hostfile of the job (its ips, rdma and mesh_ips are checked)"), \
		MR_OPT_STRING(0, "hosts", &(o)->hosts, "LIST",                                   \
			      "a comma separated list of hosts (instead of a hostfile)"),       \
		MR_OPT_GROUP("The job"),                                                         \
		MR_OPT_CHOICE(0, "backend", &(o)->backend, "ring|mesh|jaccl|jaccl-ring|nccl|mpi", \
			      "the backend the job will use (default: the hostfile's, else ring)"), \
		MR_OPT_INT_D(0, "starting-port", &(o)->starting_port, "PORT", 1, 65535, "32323", \
			     "the job's first port, as meshrun's --starting-port"),              \
		MR_OPT_INT_D(0, "connections-per-ip", &(o)->connections_per_ip, "N", 1, 64, "1", \
			     "as meshrun's --connections-per-ip (ring)"),                        \
		MR_OPT_LIST(0, "env", &(o)->envs, "K=V",                                         \
			    "the job's variables, as meshrun's --env (MESHRUN_IB_GID_INDEX)"),   \
		MR_OPT_STRING(0, "python", &(o)->python, "PYTHON",                               \
			      "check this Python and its MLX on every host (same versions)"),    \
		MR_OPT_GROUP("Output"),                                                          \
		MR_OPT_BOOL(0, "json", &(o)->json, "print the results as JSON (for scripts)"),   \
		MR_OPT_BOOL(0, "verbose", &(o)->verbose, "print each phase and its time on stderr"), \
		MR_SSH_OPTS(&(o)->ssh),                                                          \
		MR_OPT_GROUP("Timeouts"),                                                        \
		MR_OPT_DURATION(0, "timeout", &(o)->timeout_ms, "SECS",                          \
				"deadline of each host command (default: 30s)"),                 \
		MR_OPT_DURATION(0, "connect-timeout", &(o)->connect_timeout_ms, "SECS",          \
				"the path check's TCP connects give up after SECS (default: 3s)"), \
		MR_OPT_END(),                                                                    \
	}

const struct mr_optdoc_cmd *mr_doctor_doc_cmd(void)
{
	static struct mr_doctor_opts scratch = MR_DOCTOR_OPTS_INIT;
	static const struct mr_opt opts[] = DOCTOR_OPTIONS(&scratch);
	static const struct mr_optdoc_cmd cmd = {
		"doctor", usage_line, "check every host, cable, device and the job's own path before a run",
		opts, trailer, NULL,
	};

	return &cmd;
}

int mr_doctor_parse_args(struct mr_doctor_opts *o, int argc, char **argv, FILE *out, FILE *err)
{
	const struct mr_opt opts[] = DOCTOR_OPTIONS(o);
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc = mr_opt_parse(opts, argc, argv, 0, NULL, NULL, &e);

	if (rc == MR_OPT_HELP) {
		fprintf(out, "Check a cluster before a run (meshconfig %s)\n\n", MESHRUN_VERSION);
		mr_opt_usage(out, usage_line, opts, trailer);
		return MR_DOCTOR_EXIT_OK;
	}
	if (rc == MR_OPT_VERSION) {
		fprintf(out, "meshconfig %s\n", MESHRUN_VERSION);
		return MR_DOCTOR_EXIT_OK;
	}
	if (rc == 0)
		rc = cfg_check_envs(&o->envs, &e);
	if (rc == 0 && !o->hosts && !o->hostfile)
		rc = mr_err_set(&e, MESHRUN_E_USAGE, "give the hosts: --hostfile FILE or --hosts LIST");
	if (rc == 0 && (o->timeout_ms < 0 || o->timeout_ms > INT32_MAX))
		rc = mr_err_set(&e, MESHRUN_E_USAGE, "invalid value for '--timeout': out of range");
	if (rc == 0 && (o->connect_timeout_ms < 100 || o->connect_timeout_ms > 600000))
		rc = mr_err_set(&e, MESHRUN_E_USAGE,
				"invalid value for '--connect-timeout': expected 0.1 to 600 seconds");
	if (rc < 0) {
		fprintf(err, "meshconfig doctor: %s\nmeshconfig doctor: try 'meshconfig doctor --help'\n", e.msg);
		return MR_DOCTOR_EXIT_USAGE;
	}
	return -1;
}

void mr_doctor_opts_release(struct mr_doctor_opts *o)
{
	mr_strvec_release(&o->envs);
}

/* ---- the run --------------------------------------------------------------------- */

static int64_t wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void say(const struct doctor *d, const char *fmt, ...) MR_PRINTF(2, 3);
static void say(const struct doctor *d, const char *fmt, ...)
{
	va_list ap;

	if (!d->o->verbose)
		return;
	va_start(ap, fmt);
	mr_log_vprint(d->err, -1, MR_LOG_INFO, fmt, ap);
	va_end(ap);
}

/* Hostfile entries -> distinct hosts (rows, in first-seen order) and ranks. */
static int load_hosts(struct doctor *d, struct meshrun_err *err)
{
	const struct mr_doctor_opts *o = d->o;
	int rc;

	if (o->hostfile) {
		if (o->hosts)
			mr_log_print(d->err, -1, MR_LOG_WARN,
				     "both --hosts and --hostfile given: checking the hosts of '%s'", o->hostfile);
		rc = mr_hostfile_load(o->hostfile, &d->hf, err);
		if (rc < 0)
			mr_err_prefix(err, "--hostfile");
	} else {
		rc = mr_hostfile_from_list(o->hosts, &d->hf, err);
	}
	if (rc < 0)
		return rc;
	if (!d->hf->nhosts)
		return mr_err_set(err, MESHRUN_E_USAGE, "no hosts to check");
	d->hosts = xcalloc(d->hf->nhosts, sizeof(*d->hosts));
	d->rank_host = xcalloc(d->hf->nhosts, sizeof(*d->rank_host));
	for (size_t r = 0; r < d->hf->nhosts; r++) {
		const char *name = d->hf->hosts[r].ssh;
		size_t h = 0;

		while (h < d->nhosts && strcmp(d->hosts[h].name, name))
			h++;
		if (h == d->nhosts) {
			d->hosts[h].name = xstrdup(name);
			d->hosts[h].topo = -1;
			dr_facts_release(&d->hosts[h].f);
			d->nhosts++;
		}
		d->hosts[h].ranks = xreallocarray(d->hosts[h].ranks, d->hosts[h].nranks + 1,
						  sizeof(*d->hosts[h].ranks));
		d->hosts[h].ranks[d->hosts[h].nranks++] = r;
		d->rank_host[r] = h;
	}
	return 0;
}

/* A batch whose commands' finish times (monotonic ms) go to done_ms. */
struct timed {
	struct mr_hal_cmd *base;
	int64_t *done_ms;
};

static void cmd_done(struct mr_hal_cmd *cmd, void *ctx)
{
	struct timed *t = ctx;

	t->done_ms[cmd - t->base] = mr_now_ms();
}

static void cmd_init(struct doctor *d, struct mr_hal_cmd *c, const char *host, char *const *argv)
{
	memset(c, 0, sizeof(*c));
	c->host = host;
	c->argv = argv;
	c->timeout_ms = d->timeout_ms;
}

/*
 * Phase 1: `date +%s` everywhere. The time to its end is the host's connect
 * time (as meshrun pays it), and its answer the host's clock, read between
 * the batch's start and that end on ours (BSD date prints whole seconds).
 */
static int phase_reach(struct doctor *d, struct meshrun_err *err)
{
	static char *const argv_date[] = { "date", "+%s", NULL };
	struct mr_hal_cmd *cmds = xcalloc(d->nhosts, sizeof(*cmds));
	int64_t *done = xcalloc(d->nhosts, sizeof(*done)), t0 = mr_now_ms(), w0 = wall_ms();
	struct timed t = { cmds, done };
	int rc;

	for (size_t h = 0; h < d->nhosts; h++)
		cmd_init(d, &cmds[h], d->hosts[h].name, argv_date);
	rc = mr_hal_run_cb(d->hal, cmds, d->nhosts, cmd_done, &t, err);
	for (size_t h = 0; rc == 0 && h < d->nhosts; h++) {
		struct dr_host *H = &d->hosts[h];
		char desc[256], line[64];
		int64_t s;

		H->connect_ms = done[h] - t0;
		if (cmds[h].hal_rc < 0) {
			snprintf(H->reach_err, sizeof(H->reach_err), "%s", cmds[h].err.msg);
			H->reach_hint = mr_hal_err_hint(&cmds[h].err);
		} else if (!mr_hal_cmd_ok(&cmds[h])) {
			snprintf(H->reach_err, sizeof(H->reach_err), "'date +%%s' failed there: %s",
				 mr_hal_cmd_describe(&cmds[h], desc, sizeof(desc)));
		} else {
			H->reached = true;
			snprintf(line, sizeof(line), "%.*s", (int)strcspn(mr_buf_cstr(&cmds[h].out), "\n"),
				 mr_buf_cstr(&cmds[h].out));
			if (mr_parse_i64(line, 0, INT64_MAX / 1000, &s) == 0) {
				H->clock_s = s;
				H->clock_known = true;
				H->wall_lo_ms = w0;
				H->wall_hi_ms = w0 + H->connect_ms;
			}
		}
		mr_hal_cmd_release(&cmds[h]);
	}
	free(done);
	free(cmds);
	return rc;
}

/* Phase 2: the facts script on every reached host. */
static int phase_facts(struct doctor *d, const char *self, struct meshrun_err *err)
{
	size_t n = d->nhosts;
	struct mr_hal_cmd *cmds = xcalloc(n, sizeof(*cmds));
	char *argv_facts[8] = { MR_SH_PATH, "-c", (char *)dr_facts_script, "doctor", (char *)self,
				(char *)(d->o->python ? d->o->python : ""), d->want_rdma ? "1" : "0", NULL };
	size_t *host = xcalloc(n, sizeof(*host)), nc = 0;
	int rc;

	for (size_t h = 0; h < n; h++) {
		if (!d->hosts[h].reached)
			continue;
		host[nc] = h;
		cmd_init(d, &cmds[nc++], d->hosts[h].name, argv_facts);
	}
	rc = nc ? mr_hal_run(d->hal, cmds, nc, err) : 0;
	for (size_t k = 0; rc == 0 && k < nc; k++) {
		struct dr_host *H = &d->hosts[host[k]];
		struct meshrun_err e = MESHRUN_ERR_INIT;
		const struct mr_hal_cmd *c = &cmds[k];
		char desc[256];

		if (c->hal_rc < 0 || !mr_hal_cmd_ok(c))
			snprintf(H->reach_err, sizeof(H->reach_err), "%s",
				 c->hal_rc < 0 ? c->err.msg : mr_hal_cmd_describe(c, desc, sizeof(desc)));
		else if (dr_facts_parse(mr_buf_cstr(&c->out), &H->f, &e) < 0)
			snprintf(H->reach_err, sizeof(H->reach_err), "%s", e.msg);
	}
	for (size_t k = 0; k < nc; k++)
		mr_hal_cmd_release(&cmds[k]);
	free(host);
	free(cmds);
	return rc;
}

void doctor_release(struct doctor *d)
{
	for (size_t h = 0; d->hosts && h < d->nhosts; h++) {
		free(d->hosts[h].name);
		free(d->hosts[h].ranks);
		dr_facts_release(&d->hosts[h].f);
	}
	for (size_t i = 0; i < d->nfinds; i++) {
		free(d->finds[i].what);
		free(d->finds[i].fix);
	}
	free(d->finds);
	free(d->hosts);
	free(d->rank_host);
	free(d->tc_host);
	free(d->pings);
	free(d->eps);
	free(d->conns);
	mr_topo_cluster_free(d->tc);
	mr_hostfile_free(d->hf);
	memset(d, 0, sizeof(*d));
}

/* This meshconfig's absolute path (the probe tried first on the hosts), or "". */
static void self_path(const char *argv0, char *out, size_t n)
{
	char *found = argv0 && !strchr(argv0, '/') ? mr_which(argv0, NULL) : NULL;
	char real[PATH_MAX];

	out[0] = '\0';
	if (argv0 && realpath(found ? found : argv0, real) && mr_is_shell_safe(real))
		snprintf(out, n, "%s", real);
	free(found);
}

int mr_doctor_run(const struct mr_doctor_opts *o, struct mr_hal *hal, FILE *out, FILE *err)
{
	struct doctor d;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char self[PATH_MAX];
	int64_t t;
	int rc;

	memset(&d, 0, sizeof(d));
	d.o = o;
	d.hal = hal;
	d.out = out;
	d.err = err;
	d.timeout_ms = (int)o->timeout_ms;
	d.t0_ms = mr_now_ms();
	self_path(o->self, self, sizeof(self));
	/* a bad host list or hostfile is a usage error, as for meshconfig */
	if (load_hosts(&d, &e) < 0 || dr_job_setup(&d, &e) < 0) {
		mr_log_print(err, -1, MR_LOG_ERROR, "%s", e.msg);
		rc = e.code == MESHRUN_E_NOMEM ? MR_DOCTOR_EXIT_FAIL : MR_DOCTOR_EXIT_USAGE;
		goto out;
	}
	say(&d, "doctor: %zu host%s, %zu rank%s, backend %s%s", d.nhosts, d.nhosts == 1 ? "" : "s",
	    d.hf->nhosts, d.hf->nhosts == 1 ? "" : "s", d.backend, d.want_rdma ? " (RDMA)" : "");
	t = mr_now_ms();
	if (phase_reach(&d, &e) < 0)
		goto hal_failed;
	say(&d, "reach: %.1f s", (double)(mr_now_ms() - t) / 1000.0);
	t = mr_now_ms();
	if (phase_facts(&d, self, &e) < 0)
		goto hal_failed;
	say(&d, "facts: %.1f s", (double)(mr_now_ms() - t) / 1000.0);
	dr_check_facts(&d);
	t = mr_now_ms();
	if (dr_path_plan(&d, &e) < 0) {
		/* the job would not start: meshrun refuses this hostfile for the backend */
		for (size_t h = 0; h < d.nhosts; h++)
			dr_find(&d, h, DR_PATH, DR_FAIL, "hostfile", NULL, "%s", e.msg);
		snprintf(d.path_note, sizeof(d.path_note), "%s", "the hostfile does not give the job's endpoints");
		mr_err_clear(&e);
	}
	if (dr_path_run(&d, &e) < 0)
		goto hal_failed;
	dr_check_pings(&d);
	dr_check_path(&d);
	say(&d, "path: %.1f s (%zu ping%s, %zu listen address%s, %zu connect%s)",
	    (double)(mr_now_ms() - t) / 1000.0, d.npings, d.npings == 1 ? "" : "s", d.neps,
	    d.neps == 1 ? "" : "es", d.nconns, d.nconns == 1 ? "" : "s");
	if (dr_report(&d, out, o->json, (double)(mr_now_ms() - d.t0_ms) / 1000.0) < 0) {
		mr_log_print(err, -1, MR_LOG_ERROR, "write the report: %s", strerror(errno));
		rc = MR_DOCTOR_EXIT_FAIL;
		goto out;
	}
	rc = dr_any_fail(&d) ? MR_DOCTOR_EXIT_FAIL : MR_DOCTOR_EXIT_OK;
	goto out;
hal_failed:
	mr_log_print(err, -1, MR_LOG_ERROR, "%s", e.msg);
	rc = MR_DOCTOR_EXIT_FAIL;
out:
	doctor_release(&d);
	return rc;
}

int mr_doctor_main(int argc, char **argv, const char *self, FILE *out, FILE *err)
{
	struct mr_doctor_opts o = MR_DOCTOR_OPTS_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_hal_opts ho;
	struct mr_hal *hal = NULL;
	bool stop = false;
	int rc = mr_doctor_parse_args(&o, argc, argv, out, err);

	o.self = self;
	if (rc >= 0)
		goto out;
	memset(&ho, 0, sizeof(ho));
	ho.run_timeout_ms = (int)o.timeout_ms;
	if (o.timeout_ms > 0)
		ho.connect_timeout_ms = (int)o.timeout_ms;
	ho.batch = true;
	if (mr_ssh_opts_apply(&o.ssh, &ho, &stop, &e) < 0) {
		mr_log_print(err, -1, MR_LOG_ERROR, "%s", e.msg);
		rc = MR_DOCTOR_EXIT_USAGE;
		goto out;
	}
	if (stop) {
		mr_log_print(err, -1, MR_LOG_ERROR, "doctor: '--persist stop' is meshconfig's or meshrun's "
			     "own ('meshconfig --persist stop'), not a check");
		rc = MR_DOCTOR_EXIT_USAGE;
		goto out;
	}
	/* local names by fork/exec, the others over ssh (hal.h), as meshrun */
	if (mr_hal_new_auto(&hal, &ho, &e) < 0) {
		mr_log_print(err, -1, MR_LOG_ERROR, "%s", e.msg);
		rc = MR_DOCTOR_EXIT_FAIL;
		goto out;
	}
	rc = mr_doctor_run(&o, hal, out, err);
	mr_hal_free(hal);
out:
	mr_doctor_opts_release(&o);
	return rc;
}
