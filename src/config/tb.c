/*
 * tb.c - the thunderbolt path: one parallel discovery batch on every host, the
 * topology from src/topo, the verdict, --dot, the backend, the IP plan, the setup
 * and the hostfile.
 *
 * Discovery runs six commands per host in one mr_hal_run() batch:
 *   system_profiler SPThunderboltDataType -json   required
 *   networksetup -listallhardwareports            required
 *   ibv_devices                                   failure = no RDMA (as MLX)
 *   ipconfig getifaddr en0 / en1                  the jaccl hostfile's ips
 *   netstat -rn -f inet (macOS only)              optional: /30s already in use
 *                                                 are skipped by the plan
 * A required command that fails, or any output that does not parse, is an error
 * naming the host (and the field, from topo); every host's problem is reported,
 * then the run stops before any configuration command is sent.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/boot.h"
#include "config/config_impl.h"
#include "topo/topo.h"

enum { D_SP, D_NS, D_IBV, D_EN0, D_EN1, D_ROUTES, D_NR };

static char *const argv_sp[] = { "system_profiler", "SPThunderboltDataType", "-json", NULL };
static char *const argv_ns[] = { "networksetup", "-listallhardwareports", NULL };
static char *const argv_ibv[] = { "ibv_devices", NULL };
/* macOS only: Linux's netstat accepts these flags but prints another table. */
const char cfg_routes_script[] = "[ \"$(uname -s)\" = Darwin ] || exit 1; exec netstat -rn -f inet";
static char *const argv_routes[] = { MR_SH_PATH, "-c", (char *)cfg_routes_script, NULL };

static const char *cmd_text(int k)
{
	static const char *const text[] = {
		"system_profiler SPThunderboltDataType -json", "networksetup -listallhardwareports",
		"ibv_devices", "ipconfig getifaddr en0", "ipconfig getifaddr en1",
		"netstat -rn -f inet",
	};
	return text[k];
}

/* A required command must have run and exited 0. */
static bool required_ok(struct cfg_run *c, const char *host, int k, const struct mr_hal_cmd *cmd)
{
	char desc[256], line[256];

	if (cmd->hal_rc < 0) {
		cfg_error(c, "%s: '%s': %s", host, cmd_text(k), cmd->err.msg);
		return false;
	}
	if (!mr_hal_cmd_ok(cmd)) {
		cfg_first_line(&cmd->errout, line, sizeof(line));
		cfg_error(c, "%s: '%s' failed: %s%s%s", host, cmd_text(k),
			  mr_hal_cmd_describe(cmd, desc, sizeof(desc)), line[0] ? ": " : "", line);
		return false;
	}
	return true;
}

/* Build the cluster from the batch; every host's error is reported. */
static int build_cluster(struct cfg_run *c, struct mr_hal_cmd *cmds, struct mr_topo_cluster *tc,
			 struct mr_topo_routes *routes)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int nbad = 0;

	for (size_t i = 0; i < c->nhosts; i++) {
		struct mr_hal_cmd *hc = &cmds[i * D_NR];
		const char *name = c->hosts[i].name;

		/* both checked, so that both failures are reported */
		bool sp_ok = required_ok(c, name, D_SP, &hc[D_SP]);
		bool ns_ok = required_ok(c, name, D_NS, &hc[D_NS]);

		if (!sp_ok || !ns_ok) {
			nbad++;
			continue;
		}
		if (hc[D_IBV].hal_rc < 0) {
			cfg_error(c, "%s: 'ibv_devices': %s", name, hc[D_IBV].err.msg);
			nbad++;
			continue;
		}
		if (!mr_hal_cmd_ok(&hc[D_IBV]))
			cfg_info(c, "%s: 'ibv_devices' failed: taken as no RDMA devices", name);
		mr_err_clear(&e);
		if (mr_topo_cluster_add_host(tc, name, mr_buf_cstr(&hc[D_SP].out), hc[D_SP].out.len,
					     mr_buf_cstr(&hc[D_NS].out),
					     mr_hal_cmd_ok(&hc[D_IBV]) ? mr_buf_cstr(&hc[D_IBV].out) : "",
					     &e) < 0) {
			cfg_error(c, "%s", e.msg);
			nbad++;
			continue;
		}
		/* Routes are a refinement: a host without that netstat form just has none. */
		if (mr_hal_cmd_ok(&hc[D_ROUTES])) {
			mr_err_clear(&e);
			if (mr_topo_parse_routes(name, mr_buf_cstr(&hc[D_ROUTES].out), &routes[i], &e) < 0) {
				cfg_error(c, "%s", e.msg);
				nbad++;
			}
		}
	}
	for (size_t i = 0; i < c->nhosts; i++) { /* not a Mac: say what meshconfig is for, once */
		const struct mr_hal_cmd *sp = &cmds[i * D_NR + D_SP];

		if (sp->hal_rc == MESHRUN_E_EXEC || (sp->hal_rc == 0 && !sp->signal && sp->status == 127)) {
			cfg_error(c, "hint: %s", MR_CONFIG_HINT_NOT_A_MAC);
			break;
		}
	}
	if (nbad == 0 && cfg_ip_parse(c, &cmds[D_EN0], D_NR) != 0)
		nbad++;
	if (nbad)
		return MR_CONFIG_EXIT_DISCOVERY;
	mr_err_clear(&e);
	if (mr_topo_cluster_finish(tc, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		return MR_CONFIG_EXIT_DISCOVERY;
	}
	for (size_t k = 0; k < tc->notes.nr; k++)
		cfg_warn(c, "%s", tc->notes.v[k]);
	return 0;
}

static void say_verdict(struct cfg_run *c, const struct mr_topo_cluster *tc,
			const struct mr_topo_choice *ch)
{
	struct mr_buf b = MR_BUF_INIT;
	size_t note = 0; /* the next of ch->notes */

	mr_buf_printf(&b, "verdict: %s, %zu host%s, %zu cable%s", ch->mesh ? "mesh" : ch->has_ring ? "ring" : "neither",
		      tc->nhosts, tc->nhosts == 1 ? "" : "s", tc->ncables, tc->ncables == 1 ? "" : "s");
	if (ch->has_ring && ch->ring.n) {
		mr_buf_puts(&b, ", ring");
		for (size_t k = 0; k < ch->ring.n && k < 16; k++)
			mr_buf_printf(&b, "%s%s", k ? "-" : " ", tc->hosts[ch->ring.order[k]].name);
		if (ch->ring.n > 16)
			mr_buf_puts(&b, "-...");
		mr_buf_printf(&b, " (%u cable%s per hop)", ch->ring.cables,
			      ch->ring.cables == 1 ? "" : "s");
	}
	if (ch->rdma)
		mr_buf_puts(&b, ", RDMA on every host");
	else if (ch->no_rdma.nr)
		mr_buf_printf(&b, ", no RDMA on %zu host%s", ch->no_rdma.nr, ch->no_rdma.nr == 1 ? "" : "s");
	mr_buf_printf(&b, ": backend %s", mr_topo_backend_name(ch->backend));
	cfg_say(c, "%s", mr_buf_cstr(&b));
	mr_buf_release(&b);
	/* as MLX's check_rdma(strict=False): missing RDMA is a warning; why it is not
	 * a mesh (the missing cables) is said always, as MLX prints it; why there is
	 * no ring only explains the choice (topo.h: one note per false fact, in
	 * this order) */
	if (!ch->mesh && note < ch->notes.nr)
		cfg_say(c, "%s", ch->notes.v[note++]);
	if (!ch->has_ring && note < ch->notes.nr)
		cfg_info(c, "%s", ch->notes.v[note++]);
	if (!ch->rdma && note < ch->notes.nr)
		cfg_warn(c, "%s", ch->notes.v[note++]);
}

/* Passwordless sudo everywhere? With --auto-setup, name the hosts without it. */
static bool can_auto_setup(struct cfg_run *c)
{
	size_t nno = 0;

	for (size_t i = 0; i < c->nhosts; i++)
		nno += !c->hosts[i].has_sudo;
	if (nno && c->o->auto_setup) {
		cfg_warn(c, "automatic setup requested but %zu host%s no passwordless sudo; printing the commands instead:",
			 nno, nno == 1 ? " has" : "s have");
		for (size_t i = 0; i < c->nhosts; i++)
			if (!c->hosts[i].has_sudo)
				cfg_warn(c, "  - %s", c->hosts[i].name);
	}
	return nno == 0;
}

/* Step 1, discovery: one batch of commands for every host -> tc and routes. */
static int discover(struct cfg_run *c, struct mr_hal_cmd *cmds, struct mr_topo_cluster *tc,
		    struct mr_topo_routes *routes)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	size_t n = c->nhosts;
	int rc;

	cfg_step(c, "getting the Thunderbolt connectivity of every host");
	for (size_t i = 0; i < n; i++) {
		struct mr_hal_cmd *hc = &cmds[i * D_NR];
		const char *name = c->hosts[i].name;

		cfg_cmd(c, &hc[D_SP], name, argv_sp);
		cfg_cmd(c, &hc[D_NS], name, argv_ns);
		cfg_cmd(c, &hc[D_IBV], name, argv_ibv);
		cfg_cmd(c, &hc[D_ROUTES], name, argv_routes);
	}
	cfg_ip_cmds(c, &cmds[D_EN0], D_NR);
	if (cfg_hal_run(c, cmds, n * D_NR, &e) < 0) {
		cfg_error(c, "discovery: %s", e.msg);
		return MR_CONFIG_EXIT_DISCOVERY;
	}
	rc = build_cluster(c, cmds, tc, routes);
	if (rc)
		return rc;
	cfg_step_done(c, "%zu hosts, %zu cables%s", tc->nhosts, tc->ncables,
		      tc->nonesided ? " (and one-sided ones, not used)" : "");
	return 0;
}

/* Step 2, --dot / --png: the graph printed or rendered, nothing changed. */
static int write_dot(struct cfg_run *c, const struct mr_topo_cluster *tc)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_buf b = MR_BUF_INIT;
	int rc = 0;

	if (mr_topo_dot(tc, &b, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		rc = MR_CONFIG_EXIT_TOPOLOGY;
	} else if (c->o->png && cfg_render_png(&b, c->o->png, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		rc = MR_CONFIG_EXIT_TOPOLOGY;
	} else if (c->o->dot &&
		   (fwrite(b.p, 1, b.len, c->out) != b.len || fflush(c->out) != 0)) {
		cfg_error(c, "write the DOT graph to stdout: %s", strerror(errno));
		rc = MR_CONFIG_EXIT_TOPOLOGY;
	}
	mr_buf_release(&b);
	return rc;
}

/* Step 3, the verdict and the backend; ch is the caller's to release on success. */
static int choose_backend(struct cfg_run *c, const struct mr_topo_cluster *tc,
			  enum mr_topo_backend want, struct mr_topo_choice *ch)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;

	cfg_step(c, "choosing the backend");
	if (mr_topo_choose(tc, want, ch, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		for (size_t k = 0; k < ch->notes.nr; k++)
			cfg_error(c, "%s", ch->notes.v[k]);
		/* the cabling's own messages say to run with --dot already */
		if (ch->missing != MR_TOPO_MISSING_CABLES)
			cfg_error(c, "perhaps run with --dot to generate a plot of the connectivity");
		mr_topo_choice_release(ch);
		return MR_CONFIG_EXIT_TOPOLOGY;
	}
	say_verdict(c, tc, ch);
	cfg_step_done(c, "backend %s", mr_topo_backend_name(ch->backend));
	return 0;
}

int cfg_thunderbolt(struct cfg_run *c)
{
	size_t n = c->nhosts;
	struct mr_hal_cmd *cmds = xcalloc(n * D_NR, sizeof(*cmds));
	struct mr_topo_routes *routes = xcalloc(n, sizeof(*routes));
	struct mr_strvec *ips = xcalloc(n, sizeof(*ips));
	struct mr_topo_cluster *tc = mr_topo_cluster_new();
	struct mr_topo_choice ch;
	struct mr_topo_plan plan;
	struct mr_hostfile *hf = NULL;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	enum mr_topo_backend want = MR_TOPO_BACKEND_AUTO;
	bool have_choice = false, have_plan = false, apply;
	int rc = 0;

	memset(&ch, 0, sizeof(ch));
	memset(&plan, 0, sizeof(plan));
	if (!tc) {
		cfg_error(c, "out of memory");
		rc = MR_CONFIG_EXIT_TOPOLOGY;
		goto out;
	}
	if (c->o->backend && mr_topo_backend_parse(c->o->backend, &want) < 0) {
		cfg_error(c, "unknown backend '%s'", c->o->backend);
		rc = MR_CONFIG_EXIT_USAGE;
		goto out;
	}

	rc = discover(c, cmds, tc, routes);
	if (rc)
		goto out;
	if (c->o->dot || c->o->png) {
		rc = write_dot(c, tc);
		goto out;
	}
	rc = choose_backend(c, tc, want, &ch);
	if (rc)
		goto out;
	have_choice = true;

	/* 4. IP plan and hostfile (built before anything is changed) */
	cfg_step(c, "planning the point-to-point addresses");
	if (mr_topo_plan_build(tc, routes, &plan, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		rc = MR_CONFIG_EXIT_TOPOLOGY;
		goto out;
	}
	have_plan = true;
	if (plan.nskipped)
		cfg_info(c, "%zu /30 range%s skipped: already routed on a host", plan.nskipped,
			 plan.nskipped == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++)
		if (mr_strvec_pushv(&ips[i], c->hosts[i].ips.v) < 0) {
			cfg_error(c, "out of memory");
			rc = MR_CONFIG_EXIT_TOPOLOGY;
			goto out;
		}
	if (mr_topo_hostfile(tc, &plan, &ch, ips, &c->o->envs, &hf, &e) < 0) {
		cfg_error(c, "%s", e.msg);
		rc = MR_CONFIG_EXIT_TOPOLOGY;
		goto out;
	}
	cfg_step_done(c, "%zu links planned", plan.nlinks);

	/* 5. setup: applied with --auto-setup and sudo everywhere, else printed; then
	 * --mtu and --at-boot (boot.h) */
	apply = can_auto_setup(c) && c->o->auto_setup;
	rc = cfg_setup(c, &plan, apply);
	if (rc == 0 && c->o->mtu)
		rc = cfg_mtu(c, &plan, apply);
	if (rc == 0)
		rc = cfg_at_boot(c, &plan, apply);
	if (rc)
		goto out;

	/* 6. hostfile */
	rc = cfg_write_hostfile(c, hf);
out:
	mr_hostfile_free(hf);
	if (have_plan)
		mr_topo_plan_release(&plan);
	if (have_choice)
		mr_topo_choice_release(&ch);
	mr_topo_cluster_free(tc);
	for (size_t i = 0; i < n; i++) {
		mr_strvec_release(&ips[i]);
		mr_topo_routes_release(&routes[i]);
	}
	free(ips);
	free(routes);
	cfg_cmds_release(cmds, n * D_NR);
	free(cmds);
	return rc;
}
