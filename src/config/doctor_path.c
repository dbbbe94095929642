/*
 * doctor_path.c - the doctor's path check: the connections the job will make,
 * on the ports it will use, tried before it runs; and the pings over the
 * cables (doctor_cables.c decides which).
 *
 * The endpoints come from launch/env.h's own builders, so they are the ones
 * meshrun hands the ranks:
 *   ring (and mpi through libmeshrun-mpi's ring)
 *             MLX_HOSTFILE: rank r listens on each "ip:port" of its row, and
 *             rank r-1 (its left neighbour) connects to every one of them;
 *   mesh      MESHRUN_MESH_HOSTFILE: for i < j, rank j connects to each
 *             address of cell [i][j], where rank i listens;
 *   jaccl, jaccl-ring
 *             MLX_JACCL_COORDINATOR (rank 0's ips[0], --starting-port): the
 *             side channel every other rank connects to;
 *   nccl, mpi (mpirun)  not tried: their own launchers pick the ports.
 * An endpoint whose address is not on its host (the cables column says so)
 * is not tried, nor is anything on a host that could not be reached.
 *
 * Mechanism: one `meshconfig doctor-probe listen` per listening host, started
 * with mr_hal_spawn() as meshrun starts its ranks; once each says "ready",
 * one mr_hal_run() batch with one command per host: its pings in the
 * background, then `doctor-probe connect` exec'd (path_script); then the
 * listeners' stdin is closed and they end. The probe is the meshconfig the facts found on each host
 * (doctor_facts.c "tools"); a host without one is a warning.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/json.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"
#include "launch/env.h"

#include <cjson/cJSON.h>

/*
 * One command per host for phase 2 (no second ssh session for it):
 *   /bin/sh -c path_script doctor-path OS NPAIRS IF IP ... [PROBE doctor-probe connect ...]
 * pings each "IF IP" pair in the background, each tried twice (the first
 * packet may go to address resolution), "ping IF IP STATUS" per pair; then
 * execs the connect probe, as a rank's command line execs the rank (hal.h:
 * the same session, the same /bin/sh), or waits for the pings. macOS's ping
 * binds with -b, Linux's with -I (meshsim's hosts say Darwin); OS is the
 * host's uname -s from its facts.
 */
static const char path_script[] =
	"os=$1; n=$2; shift 2\n"
	"p() { if [ \"$os\" = Darwin ]; then ping -n -c 1 -t 2 -b \"$1\" \"$2\"; "
	"else ping -n -c 1 -W 2 -I \"$1\" \"$2\"; fi >/dev/null 2>&1; }\n"
	"while [ \"$n\" -gt 0 ]; do\n"
	"  ( p \"$1\" \"$2\" || p \"$1\" \"$2\"; echo \"ping $1 $2 $?\" ) &\n"
	"  shift 2; n=$((n - 1))\n"
	"done\n"
	"[ $# -eq 0 ] || exec \"$@\"\n"
	"wait\n";

/* ---- the plan ------------------------------------------------------------------ */

static size_t add_ep(struct doctor *d, size_t rank, const char *ipport)
{
	const char *colon = strrchr(ipport, ':');
	char ip[64];
	struct dr_ep *e;
	int port = colon ? (int)strtol(colon + 1, NULL, 10) : 0;
	uint32_t a;

	snprintf(ip, sizeof(ip), "%.*s", colon ? (int)(colon - ipport) : 0, ipport);
	if (ip[0] == '[') { /* "[v6]" */
		memmove(ip, ip + 1, strlen(ip));
		ip[strcspn(ip, "]")] = '\0';
	}
	for (size_t i = 0; i < d->neps; i++)
		if (d->eps[i].port == port && !strcmp(d->eps[i].ip, ip) && d->eps[i].host == d->rank_host[rank])
			return i;
	d->eps = xreallocarray(d->eps, d->neps + 1, sizeof(*d->eps));
	e = &d->eps[d->neps];
	memset(e, 0, sizeof(*e));
	e->host = d->rank_host[rank];
	e->rank = rank;
	snprintf(e->ip, sizeof(e->ip), "%s", ip);
	e->port = port;
	{
		const struct dr_host *H = &d->hosts[e->host];
		/* not tried where it cannot work: the host is not there, or the
		 * address is not its (the cables column names that) */
		e->skip = !H->reached || !H->f.ok || port <= 0 ||
			  (dr_ipv4(ip, &a) && H->f.nifs && !dr_facts_if_of_addr(&H->f, a, NULL));
	}
	return d->neps++;
}

static void add_conn(struct doctor *d, size_t from_rank, size_t ep)
{
	size_t from = d->rank_host[from_rank];

	for (size_t i = 0; i < d->nconns; i++)
		if (d->conns[i].from == from && d->conns[i].ep == ep)
			return;
	d->conns = xreallocarray(d->conns, d->nconns + 1, sizeof(*d->conns));
	memset(&d->conns[d->nconns], 0, sizeof(*d->conns));
	d->conns[d->nconns].from = from;
	d->conns[d->nconns++].ep = ep;
}

/* The string cells of a JSON list, or one string. */
static size_t json_strings(const cJSON *cell, const char **out, size_t max)
{
	size_t n = 0;
	const cJSON *it;

	if (cJSON_IsString(cell)) {
		out[0] = cell->valuestring;
		return 1;
	}
	cJSON_ArrayForEach(it, cell)
		if (cJSON_IsString(it) && n < max)
			out[n++] = it->valuestring;
	return n;
}

static int plan_matrix(struct doctor *d, bool mesh, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	cJSON *root = NULL;
	size_t n = d->hf->nhosts;
	int rc;

	rc = mesh ? mr_launch_mesh_json(d->hf, d->o->starting_port, &b, err)
		  : mr_launch_ring_json(d->hf, d->o->starting_port, d->o->connections_per_ip, &b, err);
	if (rc == 0)
		rc = mr_json_parse(b.p, b.len, "the job's address list", &root, err);
	for (size_t r = 0; rc == 0 && r < n; r++) {
		const cJSON *row = cJSON_GetArrayItem(root, (int)r);
		const char *v[64];

		if (!mesh) {
			/* rank r listens on its row; its left neighbour connects */
			size_t k = json_strings(row, v, ARRAY_SIZE(v));
			for (size_t i = 0; i < k; i++)
				add_conn(d, (r + n - 1) % n, add_ep(d, r, v[i]));
			continue;
		}
		for (size_t j = r + 1; j < n; j++) {
			size_t k = json_strings(cJSON_GetArrayItem(row, (int)j), v, ARRAY_SIZE(v));
			for (size_t i = 0; i < k; i++)
				add_conn(d, j, add_ep(d, r, v[i]));
		}
	}
	cJSON_Delete(root);
	mr_buf_release(&b);
	return rc;
}

int dr_path_plan(struct doctor *d, struct meshrun_err *err)
{
	const char *be = d->backend;
	size_t n = d->hf->nhosts;
	int rc = 0;

	if (n < 2) {
		snprintf(d->path_note, sizeof(d->path_note), "one rank: no connections to try");
		return 0;
	}
	if (!d->o->hostfile && !strcmp(be, "ring")) {
		bool ips = true;
		for (size_t r = 0; r < n; r++)
			ips &= d->hf->hosts[r].ips.nr > 0;
		if (!ips) {
			snprintf(d->path_note, sizeof(d->path_note),
				 "no hostfile: the job's addresses come from one (--hostfile)");
			return 0;
		}
	}
	if (!strcmp(be, "ring"))
		rc = plan_matrix(d, false, err);
	else if (!strcmp(be, "mesh"))
		rc = plan_matrix(d, true, err);
	else if (!strcmp(be, "jaccl") || !strcmp(be, "jaccl-ring")) {
		char ep[96];
		size_t e;
		if (!d->hf->hosts[0].ips.nr)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "backend %s needs rank 0's ips[0] (the coordinator's address): host '%s' has no 'ips'",
					  be, d->hf->hosts[0].ssh);
		snprintf(ep, sizeof(ep), strchr(d->hf->hosts[0].ips.v[0], ':') ? "[%s]:%d" : "%s:%d",
			 d->hf->hosts[0].ips.v[0], d->o->starting_port);
		e = add_ep(d, 0, ep);
		for (size_t r = 1; r < n; r++)
			add_conn(d, r, e);
	} else {
		snprintf(d->path_note, sizeof(d->path_note),
			 "backend %s: its own launcher picks the ports (not tried)", be);
	}
	return rc;
}

/* ---- listeners ----------------------------------------------------------------- */

struct listener {
	struct doctor *d;
	size_t host;
	struct mr_proc *proc;
	struct mr_buf out;
	bool ready, exited;
};

static void on_out(struct mr_proc *p, const char *data, size_t len, void *ctx)
{
	struct listener *l = ctx;

	(void)p;
	if (mr_buf_append(&l->out, data, len) == 0 &&
	    (!strncmp(mr_buf_cstr(&l->out), "ready\n", 6) || strstr(mr_buf_cstr(&l->out), "\nready\n")))
		l->ready = true;
}

static void on_exit_cb(struct mr_proc *p, int hal_rc, int status, int sig, const struct meshrun_err *e,
		       void *ctx)
{
	struct listener *l = ctx;

	(void)p, (void)hal_rc, (void)status, (void)sig, (void)e;
	l->exited = true;
}

/* "bound EP" / "error EP NAME text" lines into the endpoints of l's host. */
static void read_binds(struct doctor *d, const struct listener *l)
{
	struct mr_strvec lines = MR_STRVEC_INIT;

	mr_strvec_split(&lines, mr_buf_cstr(&l->out), '\n', true);
	for (size_t i = 0; i < d->neps; i++) {
		struct dr_ep *e = &d->eps[i];
		char ep[96];

		if (e->host != l->host || e->skip)
			continue;
		snprintf(ep, sizeof(ep), strchr(e->ip, ':') ? "[%s]:%d" : "%s:%d", e->ip, e->port);
		snprintf(e->bind_err, sizeof(e->bind_err), "%s", l->ready ? "ENOANSWER" : "ENOSTART");
		snprintf(e->bind_msg, sizeof(e->bind_msg), "%s",
			 l->ready ? "the probe said nothing of it"
				  : "'meshconfig doctor-probe listen' did not start there (a meshconfig without doctor?)");
		for (size_t k = 0; k < lines.nr; k++) {
			const char *s = lines.v[k];
			size_t el = strlen(ep);

			if (!strncmp(s, "bound ", 6) && !strcmp(s + 6, ep)) {
				e->bind_err[0] = '\0';
				e->bind_msg[0] = '\0';
			} else if (!strncmp(s, "error ", 6) && !strncmp(s + 6, ep, el) && s[6 + el] == ' ') {
				const char *nm = s + 7 + el;
				size_t nl = strcspn(nm, " ");
				snprintf(e->bind_err, sizeof(e->bind_err), "%.*s", (int)MR_MIN(nl, (size_t)31), nm);
				snprintf(e->bind_msg, sizeof(e->bind_msg), "%s", nm[nl] ? nm + nl + 1 : "");
			}
		}
	}
	mr_strvec_release(&lines);
}

/* ---- the run --------------------------------------------------------------------- */

static bool has_probe(const struct doctor *d, size_t h)
{
	return d->hosts[h].reached && d->hosts[h].f.ok && d->hosts[h].f.probe[0];
}

static void ep_text(const struct dr_ep *e, char *out, size_t n)
{
	snprintf(out, n, strchr(e->ip, ':') ? "[%s]:%d" : "%s:%d", e->ip, e->port);
}

int dr_path_run(struct doctor *d, struct meshrun_err *err)
{
	size_t nh = d->nhosts;
	struct listener *ls = xcalloc(nh ? nh : 1, sizeof(*ls));
	struct mr_strvec *largv = xcalloc(nh ? nh : 1, sizeof(*largv));
	struct mr_strvec *argv = xcalloc(nh ? nh : 1, sizeof(*argv));
	struct mr_hal_cmd *cmds = xcalloc(nh ? nh : 1, sizeof(*cmds));
	size_t ncmd = 0, *cmd_host = xcalloc(nh ? nh : 1, sizeof(*cmd_host));
	unsigned char rnd[8];
	char token[40], ms[24];
	int64_t deadline;
	int rc = 0;

	if (mr_random_bytes(rnd, sizeof(rnd)) < 0)
		memset(rnd, 0x5a, sizeof(rnd));
	snprintf(token, sizeof(token), "meshconfig-doctor-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);

	/* 1. a listener on every host with endpoints to try */
	for (size_t h = 0; !d->path_note[0] && h < nh; h++) {
		struct mr_spawn sp;
		bool any = false;

		for (size_t i = 0; i < d->neps; i++) {
			char ep[96];
			if (d->eps[i].host != h || d->eps[i].skip)
				continue;
			if (!has_probe(d, h)) {
				snprintf(d->eps[i].bind_err, sizeof(d->eps[i].bind_err), "noprobe");
				continue;
			}
			if (!any) {
				snprintf(ms, sizeof(ms), "%d", 60000 + 2 * (d->timeout_ms > 0 ? d->timeout_ms : 30000));
				mr_strvec_push(&largv[h], d->hosts[h].f.probe);
				mr_strvec_push(&largv[h], "doctor-probe");
				mr_strvec_push(&largv[h], "listen");
				mr_strvec_push(&largv[h], token);
				mr_strvec_push(&largv[h], ms);
				any = true;
			}
			ep_text(&d->eps[i], ep, sizeof(ep));
			mr_strvec_push(&largv[h], ep);
		}
		if (!any)
			continue;
		memset(&sp, 0, sizeof(sp));
		ls[h].d = d;
		ls[h].host = h;
		sp.host = d->hosts[h].name;
		sp.argv = largv[h].v;
		sp.events.ctx = &ls[h];
		sp.events.on_stdout = on_out;
		sp.events.on_exit = on_exit_cb;
		if (mr_hal_spawn(d->hal, &sp, &ls[h].proc, err) < 0) {
			rc = -1;
			goto out;
		}
	}
	deadline = mr_now_ms() + (d->timeout_ms > 0 ? d->timeout_ms : 30000);
	for (;;) {
		bool waiting = false;
		for (size_t h = 0; h < nh; h++)
			waiting |= ls[h].proc && !ls[h].ready && !ls[h].exited;
		if (!waiting || mr_ms_left(deadline) == 0)
			break;
		if (mr_hal_poll(d->hal, MR_MIN(mr_ms_left(deadline), 200), err) < 0) {
			rc = -1;
			goto out;
		}
	}
	for (size_t h = 0; h < nh; h++)
		if (ls[h].proc)
			read_binds(d, &ls[h]);

	/* 2. pings and connects, one command per host, one batch */
	snprintf(ms, sizeof(ms), "%lld", (long long)d->o->connect_timeout_ms);
	for (size_t h = 0; h < nh; h++) {
		size_t np = 0, nc = 0;
		char npairs[24];

		for (size_t i = 0; i < d->npings; i++)
			np += d->pings[i].host == h;
		mr_strvec_push(&argv[h], MR_SH_PATH);
		mr_strvec_push(&argv[h], "-c");
		mr_strvec_push(&argv[h], path_script);
		mr_strvec_push(&argv[h], "doctor-path");
		mr_strvec_push(&argv[h], d->hosts[h].f.os);
		snprintf(npairs, sizeof(npairs), "%zu", np);
		mr_strvec_push(&argv[h], npairs);
		for (size_t i = 0; i < d->npings; i++)
			if (d->pings[i].host == h) {
				mr_strvec_push(&argv[h], d->pings[i].ifname);
				mr_strvec_push(&argv[h], d->pings[i].peer_ip);
			}
		for (size_t i = 0; i < d->nconns; i++) {
			struct dr_conn *c = &d->conns[i];
			char ep[96];

			if (c->from != h || d->eps[c->ep].skip || d->eps[c->ep].bind_err[0] || !has_probe(d, h))
				continue;
			if (!nc++) {
				mr_strvec_push(&argv[h], d->hosts[h].f.probe);
				mr_strvec_push(&argv[h], "doctor-probe");
				mr_strvec_push(&argv[h], "connect");
				mr_strvec_push(&argv[h], token);
				mr_strvec_push(&argv[h], ms);
			}
			ep_text(&d->eps[c->ep], ep, sizeof(ep));
			mr_strvec_push(&argv[h], ep);
			c->tried = true;
		}
		if (!np && !nc)
			continue;
		memset(&cmds[ncmd], 0, sizeof(cmds[ncmd]));
		cmds[ncmd].host = d->hosts[h].name;
		cmds[ncmd].argv = argv[h].v;
		cmds[ncmd].timeout_ms = d->timeout_ms;
		cmd_host[ncmd++] = h;
	}
	if (ncmd && mr_hal_run(d->hal, cmds, ncmd, err) < 0) {
		rc = -1;
		goto out;
	}
	for (size_t k = 0; k < ncmd; k++) {
		struct mr_strvec lines = MR_STRVEC_INIT;
		size_t h = cmd_host[k];

		mr_strvec_split(&lines, mr_buf_cstr(&cmds[k].out), '\n', true);
		for (size_t i = 0; i < d->npings; i++) {
			char want[64];
			if (d->pings[i].host != h)
				continue;
			snprintf(want, sizeof(want), "ping %s %s ", d->pings[i].ifname, d->pings[i].peer_ip);
			for (size_t l = 0; l < lines.nr; l++)
				if (!strncmp(lines.v[l], want, strlen(want)))
					d->pings[i].result = strcmp(lines.v[l] + strlen(want), "0") ? 1 : 0;
		}
		for (size_t i = 0; i < d->nconns; i++) {
			struct dr_conn *c = &d->conns[i];
			char ep[96];
			size_t el;

			if (c->from != h || !c->tried)
				continue;
			ep_text(&d->eps[c->ep], ep, sizeof(ep));
			el = strlen(ep);
			snprintf(c->err, sizeof(c->err), "%s", "ENOANSWER");
			snprintf(c->msg, sizeof(c->msg), "the probe printed nothing for it (%s)",
				 cmds[k].hal_rc < 0 ? cmds[k].err.msg : "exit status");
			for (size_t l = 0; l < lines.nr; l++) {
				const char *s = lines.v[l];
				if (!strncmp(s, "ok ", 3) && !strncmp(s + 3, ep, el) && s[3 + el] == ' ') {
					c->err[0] = '\0';
					c->ms = strtoll(s + 4 + el, NULL, 10);
				} else if (!strncmp(s, "fail ", 5) && !strncmp(s + 5, ep, el) && s[5 + el] == ' ') {
					const char *nm = s + 6 + el;
					size_t nl = strcspn(nm, " ");
					snprintf(c->err, sizeof(c->err), "%.*s", (int)MR_MIN(nl, (size_t)31), nm);
					snprintf(c->msg, sizeof(c->msg), "%s", nm[nl] ? nm + nl + 1 : "");
				}
			}
		}
		mr_strvec_release(&lines);
	}
out:
	/* 3. the listeners end at EOF on stdin (and are killed at release if not) */
	for (size_t h = 0; h < nh; h++)
		if (ls[h].proc && !ls[h].exited)
			(void)mr_proc_close_stdin(ls[h].proc, NULL);
	deadline = mr_now_ms() + 2000;
	for (;;) {
		bool running = false;
		for (size_t h = 0; h < nh; h++)
			running |= ls[h].proc && !ls[h].exited;
		if (!running || mr_ms_left(deadline) == 0 || mr_hal_poll(d->hal, 100, NULL) < 0)
			break;
	}
	for (size_t h = 0; h < nh; h++) {
		if (ls[h].proc)
			mr_proc_release(ls[h].proc);
		mr_buf_release(&ls[h].out);
		mr_strvec_release(&largv[h]);
		mr_strvec_release(&argv[h]);
	}
	for (size_t k = 0; k < ncmd; k++)
		mr_hal_cmd_release(&cmds[k]);
	free(cmd_host);
	free(cmds);
	free(argv);
	free(largv);
	free(ls);
	return rc;
}
