/*
 * cmds.c - `meshsim down | status | exec | fault | gen`.
 */
#include "common/compat.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "sim/cmd.h"
#include "sim/cmdopts.h"
#include "sim/faults.h"
#include "sim/live.h"
#include "sim/login.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/render.h"
#include "sim/state.h"
#include "fixture/fixture.h"

/* Parse sub's options (sim/cmdopts.h) into a; on help print usage and return 0
 * with *done set. */
static int parse(enum mr_sim_sub sub, struct mr_sim_args *a, int argc, char **argv,
		 struct mr_strvec *rest, size_t min_pos, size_t max_pos, unsigned flags, bool *done)
{
	const struct mr_optdoc_cmd *doc = mr_sim_sub_doc(sub);
	const char *cmd = doc->name;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_opt opts[MR_SIM_MAX_OPTS];
	int rc;

	mr_sim_sub_opts(sub, a, opts);
	rc = mr_opt_parse(opts, argc, argv, flags, NULL, rest, &err);

	*done = false;
	if (rc == MR_OPT_VERSION) {
		printf("meshsim %s\n", MESHRUN_VERSION);
		*done = true;
		return 0;
	}
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, doc->usage, opts, doc->trailer);
		*done = true;
		return 0;
	}
	if (rc == 0 && (rest->nr < min_pos || rest->nr > max_pos))
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "wrong number of arguments");
	if (rc < 0) {
		mr_error("meshsim %s: %s", cmd, err.msg);
		mr_error("meshsim %s: try 'meshsim %s --help'", cmd, cmd);
		return MR_SIM_EXIT_USAGE;
	}
	return 0;
}

static int need_root(const char *cmd)
{
	if (geteuid() == 0)
		return 0;
	mr_error("meshsim %s: needs root (network namespaces)", cmd);
	return MR_SIM_EXIT_FAIL;
}

/* ------------------------------------------------------------------ down */

int mr_sim_cmd_down(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name = MR_SIM_DEFAULT_NAME;
	size_t removed = 0;
	bool done;
	int code;

	code = parse(MR_SIM_DOWN, &a, argc, argv, &rest, 0, 1, 0, &done);
	if (code || done)
		goto out;
	if (rest.nr)
		name = rest.v[0];
	if (mr_sim_check_name(name, &err) < 0) {
		mr_error("meshsim down: %s", err.msg);
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	code = need_root("down");
	if (code)
		goto out;
	if (mr_sim_teardown(name, &removed, &err) < 0) {
		mr_error("meshsim down: %s", err.msg);
		code = MR_SIM_EXIT_FAIL;
		goto out;
	}
	if (removed)
		printf("meshsim: cluster '%s' is down\n", name);
	else
		printf("meshsim: nothing of cluster '%s' was found\n", name);
out:
	mr_strvec_release(&rest);
	return code;
}

/* ---------------------------------------------------------------- status */

/*
 * The pid in <host>/sshd.pid, or 0 while there is none. sshd creates the file
 * and writes "PID\n" into it a moment later, so an empty file or one without
 * its newline yet is "not written yet", never a pid (and the buffer, which
 * may be the read-only "" of mr_buf_cstr(), is only read).
 */
static pid_t read_pid(const char *state, const char *host)
{
	char *p = xasprintf("%s/%s/sshd.pid", state, host);
	struct mr_buf b = MR_BUF_INIT;
	char line[32];
	size_t n;
	int64_t v = 0;

	if (mr_read_file(p, 64, &b, NULL) == 0) {
		const char *s = mr_buf_cstr(&b);
		n = strcspn(s, "\r\n");
		if (s[n] && n < sizeof(line)) {
			memcpy(line, s, n);
			line[n] = '\0';
			if (mr_parse_i64(line, 2, INT32_MAX, &v) < 0)
				v = 0;
		}
	}
	mr_buf_release(&b);
	free(p);
	return (pid_t)v;
}

int mr_sim_cmd_status(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT, faults = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name = MR_SIM_DEFAULT_NAME;
	struct mr_sim_state *st = NULL;
	char *state = NULL;
	bool done;
	int code;

	code = parse(MR_SIM_STATUS, &a, argc, argv, &rest, 0, 1, 0, &done);
	if (code || done)
		goto out;
	if (rest.nr)
		name = rest.v[0];
	if (mr_sim_check_name(name, &err) < 0 || mr_sim_state_load(name, &st, &err) < 0) {
		mr_error("meshsim status: %s", err.msg);
		code = MR_SIM_EXIT_FAIL;
		goto out;
	}
	state = mr_sim_state_dir(name);
	mr_sim_faults_load(state, &faults, NULL);
	printf("cluster %s: %zu hosts, %zu cables, management 10.230.%u.0/%u (bridge %s-br)\n",
	       st->name, st->cluster->nhosts, st->cluster->ncables, st->subnet,
	       mr_sim_prefix_len(st->cluster->nhosts), st->name);
	printf("source: %s\nstate: %s\nssh: ssh -F %s/ssh_config HOST\n", st->fixture, state, state);
	printf("soft-RoCE: %s%s\n", st->rxe ? "rdma_<if> devices on the cables of RDMA hosts"
					     : st->rxe_note ? st->rxe_note : "no",
	       st->pretend_rdma ? " (--pretend-rdma: ibv_devices lists the fixture's devices anyway)" : "");
	printf("hosts:\n");
	for (size_t i = 0; i < st->cluster->nhosts; i++) {
		const char *h = st->cluster->hosts[i].name;
		char *ns = mr_sim_ns_name(name, h);
		pid_t pid = read_pid(state, h);
		bool alive = pid > 0 && mr_sim_pid_in_netns(pid, ns);
		struct mr_buf addrs = MR_BUF_INIT;
		struct stat sb;
		char *nosudo = xasprintf("%s/%s/nosudo", state, h);

		printf("  %-8s netns %s  sshd %s", h, ns, alive ? "running" : "stopped");
		if (alive)
			printf(" (pid %d)", (int)pid);
		printf("%s\n", stat(nosudo, &sb) == 0 ? "  no passwordless sudo" : "");
		if (geteuid() == 0 &&
		    mr_sim_run(&addrs, NULL, "addresses", "ip", "-n", ns, "-br", "-4", "addr", NULL) == 0) {
			struct mr_strvec lines = MR_STRVEC_INIT;
			mr_strvec_split(&lines, mr_buf_cstr(&addrs), '\n', true);
			for (size_t l = 0; l < lines.nr; l++)
				if (strncmp(lines.v[l], "lo ", 3))
					printf("           %s\n", lines.v[l]);
			mr_strvec_release(&lines);
		}
		mr_buf_release(&addrs);
		free(nosudo);
		free(ns);
	}
	printf("cables:\n");
	for (size_t c = 0; c < st->cluster->ncables; c++) {
		const struct mr_sim_cable *k = &st->cluster->cables[c];
		printf("  %s:%s <-> %s:%s\n", st->cluster->hosts[k->a].name, k->a_if,
		       st->cluster->hosts[k->b].name, k->b_if);
	}
	printf("faults:%s\n", faults.nr ? "" : " none");
	for (size_t f = 0; f < faults.nr; f++)
		printf("  %s\n", faults.v[f]);
out:
	free(state);
	mr_sim_state_free(st);
	mr_strvec_release(&faults);
	mr_strvec_release(&rest);
	return code;
}

/* ------------------------------------------------------------------ exec */

int mr_sim_cmd_exec(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name;
	struct mr_sim_state *st = NULL;
	struct mr_buf path = MR_BUF_INIT;
	char *ns = NULL, *nspath = NULL, *state = NULL, *hdir = NULL;
	int fd = -1;
	bool done;
	int code;

	code = parse(MR_SIM_EXEC, &a, argc, argv, &rest, 2, SIZE_MAX, MR_OPT_STOP_AT_NONOPT, &done);
	if (code || done)
		goto out;
	name = a.name;
	code = MR_SIM_EXIT_FAIL;
	if (need_root("exec"))
		goto out;
	if (mr_sim_check_name(name, &err) < 0 || mr_sim_state_load(name, &st, &err) < 0) {
		mr_error("meshsim exec: %s", err.msg);
		goto out;
	}
	if (mr_sim_cluster_find_host(st->cluster, rest.v[0]) < 0) {
		mr_error("meshsim exec: no host '%s' in cluster '%s'", rest.v[0], name);
		goto out;
	}
	/* "HOST -- cmd": the parser keeps everything after HOST; drop a leading "--" */
	size_t first = 1;
	if (first < rest.nr && !strcmp(rest.v[first], "--"))
		first++;
	if (first >= rest.nr) {
		mr_error("meshsim exec: no command given");
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	ns = mr_sim_ns_name(name, rest.v[0]);
	nspath = xasprintf("/run/netns/%s", ns);
	state = mr_sim_state_dir(name);
	hdir = xasprintf("%s/%s", state, rest.v[0]);
	fd = open(nspath, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		mr_error("meshsim exec: enter namespace '%s': %s", nspath, strerror(errno));
		goto out;
	}
	if (mr_sim_pid_in_netns(read_pid(state, rest.v[0]), ns)) /* its hostname, as over ssh */
		(void)mr_sim_login_enter_uts(read_pid(state, rest.v[0]));
	mr_sim_render_path(hdir, &path);
	setenv("PATH", mr_buf_cstr(&path), 1);
	setenv("SHLVL", "1", 1);
	fflush(NULL);
	signal(SIGPIPE, SIG_DFL);
	execvp(rest.v[first], &rest.v[first]);
	mr_error("meshsim exec: run '%s' in host '%s': %s", rest.v[first], rest.v[0], strerror(errno));
	code = 127;
out:
	mr_close(&fd);
	free(ns);
	free(nspath);
	free(state);
	free(hdir);
	mr_buf_release(&path);
	mr_sim_state_free(st);
	mr_strvec_release(&rest);
	return code;
}

/* ----------------------------------------------------------------- fault */

struct fault_ctx {
	const char *name;
	struct mr_sim_state *st;
	char *state;
	int lockfd; /* the fault lock: a flapper must not inherit it */
};

/* "h1:en3" -> host index and cable; errors name what is wrong. */
static int find_port(struct fault_ctx *f, const char *arg, size_t *host, size_t *cable, int *side,
		     struct meshrun_err *err)
{
	const char *colon = strchr(arg, ':');
	char *h;
	ssize_t hi, ci;

	if (!colon)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected HOST:INTERFACE", arg);
	h = xstrndup(arg, (size_t)(colon - arg));
	hi = mr_sim_cluster_find_host(f->st->cluster, h);
	free(h);
	if (hi < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no such host in cluster '%s'", arg,
				  f->name);
	ci = mr_sim_cluster_find_cable(f->st->cluster, (size_t)hi, colon + 1, side);
	if (ci < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no cable on that interface", arg);
	*host = (size_t)hi;
	*cable = (size_t)ci;
	return 0;
}

/* "h1:en3" -> host index and interface name (no cable needed). */
static int parse_port(struct fault_ctx *f, const char *arg, size_t *host, char *ifn, size_t ifn_len,
		      struct meshrun_err *err)
{
	const char *colon = strchr(arg, ':');
	char *h;
	ssize_t hi;

	if (!colon || !mr_is_ifname(colon + 1) || strlen(colon + 1) >= ifn_len)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected HOST:INTERFACE", arg);
	h = xstrndup(arg, (size_t)(colon - arg));
	hi = mr_sim_cluster_find_host(f->st->cluster, h);
	free(h);
	if (hi < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no such host in cluster '%s'", arg,
				  f->name);
	*host = (size_t)hi;
	snprintf(ifn, ifn_len, "%s", colon + 1);
	return 0;
}

static bool has_str(const struct mr_strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return true;
	return false;
}

/* Whether ifn in namespace ns is administratively up (false when absent). */
static bool link_admin_up(const char *ns, const char *ifn)
{
	struct mr_buf out = MR_BUF_INIT;
	bool up = false;

	if (mr_sim_run(&out, NULL, "link state", "ip", "-n", ns, "-o", "link", "show", "dev", ifn,
		       NULL) == 0) {
		const char *s = mr_buf_cstr(&out), *lt = strchr(s, '<'), *gt = lt ? strchr(lt, '>') : NULL;
		for (const char *p = lt; p && p < gt; p = strpbrk(p + 1, ",>"))
			up |= !strncmp(p + 1, "UP", 2) && (p[3] == ',' || p[3] == '>');
	}
	mr_buf_release(&out);
	return up;
}

static char *unplug_marker(const struct fault_ctx *f, size_t host, const char *ifn)
{
	return xasprintf("%s/%s/live/unplugged/%s", f->state, f->st->cluster->hosts[host].name, ifn);
}

/*
 * unplug: each end keeps its administrative state in its marker (live.h) and
 * goes down, so neither end has a carrier whatever the shims do; plug: each end
 * gets that state back. Then system_profiler shows the receptacles as they are.
 */
static int fault_link(struct fault_ctx *f, const char *arg, bool up, struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	const struct mr_sim_cable *k;
	size_t h, ci;
	int side, rc;
	char *key;

	rc = find_port(f, arg, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	k = &c->cables[ci];
	for (int s = 0; s < 2 && rc == 0; s++) {
		size_t hi = s ? k->b : k->a;
		const char *ifn = s ? k->b_if : k->a_if;
		char *ns = mr_sim_ns_name(f->name, c->hosts[hi].name), *mark = unplug_marker(f, hi, ifn);
		struct mr_buf was = MR_BUF_INIT;
		struct stat sb;

		if (!up) {
			if (stat(mark, &sb) < 0) {
				const char *st = link_admin_up(ns, ifn) ? "up\n" : "down\n";
				rc = mr_write_file(mark, st, strlen(st), 0644, err);
			}
			if (rc == 0)
				rc = mr_sim_run(NULL, err, "set link", "ip", "-n", ns, "link", "set", "dev",
						ifn, "down", NULL);
		} else {
			bool back_up = mr_read_file(mark, 64, &was, NULL) < 0 ||
				       strncmp(mr_buf_cstr(&was), "down", 4) != 0;
			rc = mr_sim_run(NULL, err, "set link", "ip", "-n", ns, "link", "set", "dev", ifn,
					back_up ? "up" : "down", NULL);
			if (rc == 0 && unlink(mark) < 0 && errno != ENOENT)
				rc = mr_err_sys(err, "remove '%s'", mark);
		}
		mr_buf_release(&was);
		free(mark);
		free(ns);
	}
	key = xasprintf("unplug %s:%s", c->hosts[k->a].name, k->a_if);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, up ? NULL : key, err);
	if (rc == 0)
		rc = mr_sim_live_refresh(f->state, f->st, err);
	free(key);
	return rc;
}

/* Host h's Thunderbolt ports, from the fixture copy in the state folder. */
static int host_ports(struct fault_ctx *f, size_t h, struct mr_strvec *out, struct meshrun_err *err)
{
	struct mr_sim_host host = f->st->cluster->hosts[h];
	struct mr_buf sp = MR_BUF_INIT, hw = MR_BUF_INIT;
	char *p = xasprintf("%s/%s/fixture/system_profiler.json", f->state, host.name);
	int rc = mr_read_file(p, 64 << 20, &sp, err);

	free(p);
	p = xasprintf("%s/%s/fixture/networksetup.txt", f->state, host.name);
	if (rc == 0)
		rc = mr_read_file(p, 1 << 20, &hw, err);
	free(p);
	host.sp_json = mr_buf_cstr(&sp);
	host.sp_len = sp.len;
	host.hwports = mr_buf_cstr(&hw);
	if (rc == 0)
		rc = mr_sim_live_ports(&host, out, err);
	mr_buf_release(&sp);
	mr_buf_release(&hw);
	return rc;
}

static int flap_stop(struct fault_ctx *f, size_t ci, struct meshrun_err *err);
static int fault_loss(struct fault_ctx *f, const char *port, const char *pct_s,
		      struct meshrun_err *err);

/* Remove cable ci: its veth pair, its faults (a flapper too), its markers; the
 * array shrinks. */
static int remove_cable(struct fault_ctx *f, size_t ci, struct meshrun_err *err)
{
	struct mr_sim_cluster *c = f->st->cluster;
	const struct mr_sim_cable *k = &c->cables[ci];
	char *ns = mr_sim_ns_name(f->name, c->hosts[k->a].name), *key;
	static const char *const cable_faults[] = { "unplug", "rate", "flap" };
	int rc;

	rc = flap_stop(f, ci, err);
	/* an nftables chain outlives its device: loss chains go first */
	for (int s = 0; s < 2 && rc == 0; s++) {
		char *port = xasprintf("%s:%s", c->hosts[s ? k->b : k->a].name, s ? k->b_if : k->a_if);
		rc = fault_loss(f, port, "0", err);
		free(port);
	}
	/* deleting one end of a veth pair deletes both (and their rxe devices, qdiscs
	 * and the nftables chains hooked to them) */
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "remove cable", "ip", "-n", ns, "link", "del", "dev",
				k->a_if, NULL);
	for (size_t i = 0; i < sizeof(cable_faults) / sizeof(cable_faults[0]) && rc == 0; i++) {
		key = xasprintf("%s %s:%s", cable_faults[i], c->hosts[k->a].name, k->a_if);
		rc = mr_sim_faults_update(f->state, key, NULL, err);
		free(key);
	}
	for (int s = 0; s < 2 && rc == 0; s++) {
		size_t h = s ? k->b : k->a;
		const char *ifn = s ? k->b_if : k->a_if;
		char *mark = unplug_marker(f, h, ifn);
		key = xasprintf("latency %s:%s", c->hosts[h].name, ifn);
		rc = mr_sim_faults_update(f->state, key, NULL, err);
		free(key);
		key = xasprintf("loss %s:%s", c->hosts[h].name, ifn);
		if (rc == 0)
			rc = mr_sim_faults_update(f->state, key, NULL, err);
		if (rc == 0 && unlink(mark) < 0 && errno != ENOENT)
			rc = mr_err_sys(err, "remove '%s'", mark);
		free(key);
		free(mark);
	}
	free(ns);
	if (rc == 0) {
		memmove(&c->cables[ci], &c->cables[ci + 1], (c->ncables - ci - 1) * sizeof(*c->cables));
		c->ncables--;
	}
	return rc;
}

/* One end of a new cable: into bridge0 while that is up (as a Mac's Thunderbolt
 * Bridge takes a new port), up, and its soft-RoCE device where the host has one. */
static int attach_end(struct fault_ctx *f, size_t h, const char *ifn, struct meshrun_err *err)
{
	const struct mr_sim_host *host = &f->st->cluster->hosts[h];
	char *ns = mr_sim_ns_name(f->name, host->name), *dev = xasprintf("rdma_%s", ifn);
	int rc = 0;

	if (link_admin_up(ns, "bridge0"))
		rc = mr_sim_run(NULL, err, "cable into bridge0", "ip", "-n", ns, "link", "set", "dev",
				ifn, "master", "bridge0", NULL);
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "cable up", "ip", "-n", ns, "link", "set", "dev", ifn, "up",
				NULL);
	if (rc == 0 && host->rdma_live && has_str(&host->rdma, dev))
		rc = mr_sim_run(NULL, err, "soft-RoCE", "ip", "netns", "exec", ns, "rdma", "link",
				"add", dev, "type", "rxe", "netdev", ifn, NULL);
	free(dev);
	free(ns);
	return rc;
}

/*
 * recable A:IA B:IB: the cables on those two ports (if any) are taken out and
 * one cable joins them: a new veth pair, seen by both system_profilers.
 */
static int fault_recable(struct fault_ctx *f, const char *pa, const char *pb,
			 struct meshrun_err *err)
{
	struct mr_sim_cluster *c = f->st->cluster;
	struct mr_strvec ports = MR_STRVEC_INIT;
	struct mr_buf b = MR_BUF_INIT;
	size_t h[2];
	char ifn[2][16], *nsa = NULL, *nsb = NULL, *p;
	ssize_t k0, k1;
	int rc;

	rc = parse_port(f, pa, &h[0], ifn[0], sizeof(ifn[0]), err);
	if (rc == 0)
		rc = parse_port(f, pb, &h[1], ifn[1], sizeof(ifn[1]), err);
	if (rc < 0)
		return rc;
	if (h[0] == h[1])
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s' and '%s': a cable joins two hosts", pa,
				  pb);
	for (int s = 0; s < 2; s++) {
		mr_strvec_release(&ports);
		mr_buf_reset(&b);
		rc = host_ports(f, h[s], &ports, err);
		for (size_t i = 0; i < ports.nr; i++)
			mr_buf_printf(&b, "%s%s", i ? ", " : "", ports.v[i]);
		if (rc == 0 && (!has_str(&ports, ifn[s]) || mr_sim_ifname_reserved(ifn[s])))
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"'%s': not a Thunderbolt port of %s (its fixture has: %s)",
					s ? pb : pa, c->hosts[h[s]].name, b.len ? mr_buf_cstr(&b) : "none");
		if (rc < 0)
			goto out;
	}
	k0 = mr_sim_cluster_find_cable(c, h[0], ifn[0], NULL);
	k1 = mr_sim_cluster_find_cable(c, h[1], ifn[1], NULL);
	if (k0 >= 0 && k0 == k1) {
		printf("meshsim: %s and %s are already cabled\n", pa, pb);
		goto out;
	}
	/* the higher index first: removing it leaves the other's index as it was */
	if (k0 >= 0 && k1 >= 0 && k1 > k0) {
		rc = remove_cable(f, (size_t)k1, err);
		k1 = -1;
	}
	if (rc == 0 && k0 >= 0)
		rc = remove_cable(f, (size_t)k0, err);
	if (rc == 0 && k1 >= 0)
		rc = remove_cable(f, (size_t)k1, err);
	nsa = mr_sim_ns_name(f->name, c->hosts[h[0]].name);
	nsb = mr_sim_ns_name(f->name, c->hosts[h[1]].name);
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "new cable", "ip", "link", "add", ifn[0], "netns", nsa,
				"type", "veth", "peer", "name", ifn[1], "netns", nsb, NULL);
	if (rc == 0) {
		mr_sim_cluster_add_cable(c, h[0], ifn[0], h[1], ifn[1]);
		rc = attach_end(f, h[0], ifn[0], err);
	}
	if (rc == 0)
		rc = attach_end(f, h[1], ifn[1], err);
	/* state.json: the cables as they are now, also after a failure half-way */
	mr_buf_reset(&b);
	if (mr_sim_state_emit(f->st, &b) < 0) {
		if (rc == 0)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "state.json: out of memory");
	} else {
		int wrc;
		p = xasprintf("%s/state.json", f->state);
		wrc = mr_write_file(p, b.p, b.len, 0644, rc == 0 ? err : NULL);
		if (rc == 0)
			rc = wrc;
		free(p);
	}
	if (rc == 0)
		rc = mr_sim_live_refresh(f->state, f->st, err);
out:
	free(nsa);
	free(nsb);
	mr_buf_release(&b);
	mr_strvec_release(&ports);
	return rc;
}

static int fault_host(struct fault_ctx *f, const char *host, bool start, struct meshrun_err *err)
{
	ssize_t hi = mr_sim_cluster_find_host(f->st->cluster, host);
	char *ns, *cfg, *log, *key, *sshd;
	int rc;

	if (hi < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "no host '%s' in cluster '%s'", host,
				  f->name);
	ns = mr_sim_ns_name(f->name, host);
	key = xasprintf("stop %s", host);
	if (!start) {
		/* like pulling the power: every process of the host, then its network */
		mr_sim_kill_netns(ns, 1000);
		rc = mr_sim_run(NULL, err, "management link down", "ip", "-n", ns, "link", "set",
				"dev", "en0", "down", NULL);
		if (rc == 0)
			rc = mr_sim_faults_update(f->state, key, key, err);
		free(ns);
		free(key);
		return rc;
	}
	cfg = xasprintf("%s/%s/sshd_config", f->state, host);
	log = xasprintf("%s/%s/sshd.log", f->state, host);
	sshd = mr_sim_which("sshd");
	rc = mr_sim_run(NULL, err, "management link up", "ip", "-n", ns, "link", "set", "dev", "en0",
			"up", NULL);
	if (rc == 0 && !mr_sim_pid_in_netns(read_pid(f->state, host), ns)) {
		char *pidf = xasprintf("%s/%s/sshd.pid", f->state, host);
		unlink(pidf);
		struct mr_sim_job job = MR_SIM_JOB_INIT;
		char *hdir = xasprintf("%s/%s", f->state, host);
		mr_sim_login_sshd_job(&job, "start sshd", ns, host, f->state, hdir,
				      sshd ? sshd : "/usr/sbin/sshd");
		rc = mr_sim_run_jobs(&job, 1, 1, 10000, 0, err);
		mr_sim_job_release(&job);
		free(hdir);
		/* the daemon writes its pid file just after the parent returned */
		int64_t deadline = mr_now_ms() + 10000;
		while (rc == 0 && read_pid(f->state, host) == 0 && mr_ms_left(deadline) > 0)
			mr_sleep_ms(5);
		if (rc == 0 && !mr_sim_pid_in_netns(read_pid(f->state, host), ns))
			rc = mr_err_set(err, MESHRUN_E_TIMEOUT,
					"host '%s': sshd wrote no pid file '%s' (see %s)", host, pidf,
					log);
		free(pidf);
	}
	if (rc == 0) {
		/* the root namespace remembers the stopped host as unreachable: forget it */
		char addr[16];
		char *br = mr_sim_bridge_name(f->name);
		mr_sim_host_addr(f->st->subnet, (size_t)hi, addr, sizeof(addr));
		mr_sim_run(NULL, NULL, "forget neighbour", "ip", "neigh", "del", addr, "dev", br, NULL);
		free(br);
		rc = mr_sim_faults_update(f->state, key, NULL, err);
	}
	free(sshd);
	free(cfg);
	free(log);
	free(ns);
	free(key);
	return rc;
}

static int fault_sudo(struct fault_ctx *f, const char *host, bool allow, struct meshrun_err *err)
{
	char *p, *key;
	int rc = 0;

	if (mr_sim_cluster_find_host(f->st->cluster, host) < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "no host '%s' in cluster '%s'", host,
				  f->name);
	p = xasprintf("%s/%s/nosudo", f->state, host);
	if (allow) {
		if (unlink(p) < 0 && errno != ENOENT)
			rc = mr_err_sys(err, "remove '%s'", p);
	} else {
		rc = mr_write_file(p, "", 0, 0644, err);
	}
	key = xasprintf("nosudo %s", host);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, allow ? NULL : key, err);
	free(key);
	free(p);
	return rc;
}

/* "KIND A:IFA" of cable ci, named by its a end whichever end was given. */
static char *cable_key(const struct fault_ctx *f, const char *kind, size_t ci)
{
	const struct mr_sim_cable *k = &f->st->cluster->cables[ci];

	return xasprintf("%s %s:%s", kind, f->st->cluster->hosts[k->a].name, k->a_if);
}

/* Whether the faults file has a line with this key (its first words); *line
 * (may be NULL) gets a copy of it. */
static bool fault_find(const struct fault_ctx *f, const char *key, char **line)
{
	struct mr_strvec v = MR_STRVEC_INIT;
	size_t kl = strlen(key);
	bool found = false;

	mr_sim_faults_load(f->state, &v, NULL);
	for (size_t i = 0; i < v.nr && !found; i++)
		if (!strncmp(v.v[i], key, kl) && (v.v[i][kl] == ' ' || !v.v[i][kl])) {
			found = true;
			if (line)
				*line = xstrdup(v.v[i]);
		}
	mr_strvec_release(&v);
	return found;
}

/* The first line of a tool's output, for a one-line reason. */
static const char *first_line(struct mr_buf *out)
{
	char *s = out->p;

	if (!s || !out->len)
		return "no output";
	s[strcspn(s, "\n")] = '\0';
	return s;
}

/* ------------------------------------------------------------------ rate */

/*
 * rate: a token bucket (tc tbf) at the root of both ends, so both directions
 * of the cable are limited as a slower cable limits them. The first end is
 * the probe: when the kernel has no sch_tbf nothing was changed.
 */
static int fault_rate(struct fault_ctx *f, const char *port, const char *rate_s,
		      struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	struct mr_buf out = MR_BUF_INIT;
	uint64_t bps;
	size_t h, ci;
	int side, rc;
	char rate[32], burst[32], *key, *line = NULL;

	rc = mr_sim_parse_rate(rate_s, &bps, err);
	if (rc == 0)
		rc = find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	key = cable_key(f, "rate", ci);
	if (!bps && !fault_find(f, key, NULL)) {
		free(key); /* no rate on that cable: a no-op */
		return 0;
	}
	for (int s = 0; s < 2 && bps && rc == 0; s++) {
		size_t hi = s ? c->cables[ci].b : c->cables[ci].a;
		const char *ifn = s ? c->cables[ci].b_if : c->cables[ci].a_if;
		char *lk = xasprintf("latency %s:%s", c->hosts[hi].name, ifn);
		if (fault_find(f, lk, NULL))
			rc = mr_err_set(err, MESHRUN_E_USAGE,
					"'%s': %s:%s has a latency fault (tc netem): clear that first",
					port, c->hosts[hi].name, ifn);
		free(lk);
	}
	mr_sim_fmt_rate(bps, rate, sizeof(rate));
	/* a burst of 1 ms at that rate, at least 64 KiB (a GSO frame of a veth) */
	snprintf(burst, sizeof(burst), "%llu", (unsigned long long)(bps / 8000 > 65536 ? bps / 8000 : 65536));
	for (int s = 0; s < 2 && rc == 0; s++) {
		size_t hi = s ? c->cables[ci].b : c->cables[ci].a;
		const char *ifn = s ? c->cables[ci].b_if : c->cables[ci].a_if;
		char *ns = mr_sim_ns_name(f->name, c->hosts[hi].name);
		mr_buf_reset(&out);
		if (bps)
			rc = mr_sim_run(&out, err, "set rate", "tc", "-n", ns, "qdisc", "replace", "dev",
					ifn, "root", "tbf", "rate", rate, "burst", burst, "latency",
					"100ms", NULL);
		else if (mr_sim_run(&out, NULL, "remove rate", "tc", "-n", ns, "qdisc", "del", "dev",
				    ifn, "root", NULL) < 0 && !strstr(mr_buf_cstr(&out), "handle of zero"))
			rc = mr_err_set(err, MESHRUN_E_SYS, "remove rate on %s:%s: tc: %s",
					c->hosts[hi].name, ifn, first_line(&out));
		if (rc < 0 && s == 0 && bps) {
			mr_err_clear(err);
			rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED,
					"rate on '%s' refused: tc tbf failed (no sch_tbf in this kernel?): %s",
					port, first_line(&out));
		}
		free(ns);
	}
	line = xasprintf("%s %s (both ends)", key, rate);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, bps ? line : NULL, err);
	free(line);
	free(key);
	mr_buf_release(&out);
	return rc;
}

/* ------------------------------------------------------ nftables helpers */

/* Run an nft script in host h's namespace; check: only `nft -c` (changes nothing). */
static int nft_run(struct fault_ctx *f, size_t h, const char *script, bool check, struct mr_buf *out,
		   struct meshrun_err *err)
{
	char *ns = mr_sim_ns_name(f->name, f->st->cluster->hosts[h].name);
	int rc;

	rc = mr_sim_run(out, err, "nft", "ip", "netns", "exec", ns, "nft", check ? "-c" : "--",
			script, NULL);
	free(ns);
	return rc;
}

/* A dry run of script in host h: MESHRUN_E_UNSUPPORTED with the reason when
 * nft or the kernel's nf_tables cannot do it. */
static int nft_probe(struct fault_ctx *f, size_t h, const char *what, const char *script,
		     struct meshrun_err *err)
{
	struct mr_buf out = MR_BUF_INIT;
	char *nft = mr_sim_which("nft");
	int rc = 0;

	if (!nft)
		rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED,
				"%s refused: needs nft (nftables) and this machine has none", what);
	else if (nft_run(f, h, script, true, &out, NULL) < 0)
		rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED,
				"%s refused: this kernel's nf_tables cannot do it: %s", what,
				first_line(&out));
	free(nft);
	mr_buf_release(&out);
	return rc;
}

/* An nft chain name for an interface ([A-Za-z0-9_.-] -> [A-Za-z0-9_]). */
static void nft_chain(const char *prefix, const char *ifn, char *out, size_t len)
{
	snprintf(out, len, "%s%s", prefix, ifn);
	for (char *p = out; *p; p++)
		if (*p == '.' || *p == '-')
			*p = '_';
}

/* ------------------------------------------------------------------ loss */

/*
 * loss: PCT% of what that end sends is dropped at random (nftables: a netdev
 * egress chain with numgen random, as netem's loss drops on egress), so the
 * kernel needs no sch_netem.
 */
static int fault_loss(struct fault_ctx *f, const char *port, const char *pct_s,
		      struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	unsigned pct;
	size_t h, ci;
	int side, rc;
	char chain[40], shown[16], *key, *script = NULL, *line = NULL, *what;
	const char *ifn;

	rc = mr_sim_parse_pct(pct_s, &pct, err);
	if (rc == 0)
		rc = find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	ifn = side ? c->cables[ci].b_if : c->cables[ci].a_if;
	key = xasprintf("loss %s:%s", c->hosts[h].name, ifn);
	if (!pct && !fault_find(f, key, NULL)) {
		free(key);
		return 0;
	}
	nft_chain("loss_", ifn, chain, sizeof(chain));
	if (pct)
		script = xasprintf("add table netdev meshsim_loss; "
				   "add chain netdev meshsim_loss %s { type filter hook egress device \"%s\" priority 0; }; "
				   "flush chain netdev meshsim_loss %s; "
				   "add rule netdev meshsim_loss %s numgen random mod 10000 < %u counter drop",
				   chain, ifn, chain, chain, pct);
	else
		script = xasprintf("delete chain netdev meshsim_loss %s", chain);
	what = xasprintf("loss on '%s'", port);
	if (pct)
		rc = nft_probe(f, h, what, script, err);
	if (rc == 0)
		rc = nft_run(f, h, script, false, NULL, err);
	mr_sim_fmt_pct(pct, shown, sizeof(shown));
	line = xasprintf("%s %s (sent by that end)", key, shown);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, pct ? line : NULL, err);
	free(what);
	free(line);
	free(script);
	free(key);
	return rc;
}

/* ------------------------------------------------------------- partition */

/* Undo a partition: every host's meshsim_part table goes (absent: fine). */
static int heal(struct fault_ctx *f, struct meshrun_err *err)
{
	char *line = NULL;
	int rc = 0;

	if (!fault_find(f, "partition", &line))
		return 0;
	for (size_t h = 0; h < f->st->cluster->nhosts; h++) {
		struct mr_buf out = MR_BUF_INIT;
		if (nft_run(f, h, "delete table netdev meshsim_part", false, &out, NULL) < 0 &&
		    !strstr(mr_buf_cstr(&out), "No such file") && rc == 0)
			rc = mr_err_set(err, MESHRUN_E_SYS, "heal %s: nft: %s",
					f->st->cluster->hosts[h].name, first_line(&out));
		mr_buf_release(&out);
	}
	if (rc == 0) {
		/* the key is the whole line's first two words: "partition A|B" */
		line[strcspn(line, "\n")] = '\0';
		rc = mr_sim_faults_update(f->state, line, NULL, err);
	}
	free(line);
	return rc;
}

/*
 * partition A|B: each host drops, at the ingress of en0, what comes from the
 * other group's management addresses, and everything arriving on its cables
 * to the other group (nftables netdev ingress chains, table meshsim_part).
 * The root namespace (the launcher, ssh) still reaches every host.
 */
static int fault_partition(struct fault_ctx *f, const char *spec, struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	struct mr_strvec g[2] = { MR_STRVEC_INIT, MR_STRVEC_INIT };
	struct mr_buf *scripts = NULL;
	int *group = NULL;
	char *line = NULL;
	int rc;

	if (!strcmp(spec, "off"))
		return heal(f, err);
	rc = mr_sim_parse_partition(spec, &g[0], &g[1], err);
	group = xcalloc(c->nhosts ? c->nhosts : 1, sizeof(*group));
	for (size_t h = 0; h < c->nhosts; h++)
		group[h] = -1;
	for (int s = 0; s < 2 && rc == 0; s++)
		for (size_t i = 0; i < g[s].nr && rc == 0; i++) {
			ssize_t hi = mr_sim_cluster_find_host(c, g[s].v[i]);
			if (hi < 0)
				rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no host '%s' in cluster '%s'",
						spec, g[s].v[i], f->name);
			else
				group[hi] = s;
		}
	if (rc < 0)
		goto out;
	scripts = xcalloc(c->nhosts ? c->nhosts : 1, sizeof(*scripts));
	for (size_t h = 0; h < c->nhosts; h++) {
		struct mr_buf *b = &scripts[h];
		const char *sep = "";
		if (group[h] < 0)
			continue;
		mr_buf_puts(b, "add table netdev meshsim_part\ndelete table netdev meshsim_part\n"
			       "table netdev meshsim_part {\n chain mgmt { type filter hook ingress "
			       "device \"en0\" priority 0; ip saddr { ");
		for (size_t o = 0; o < c->nhosts; o++)
			if (group[o] >= 0 && group[o] != group[h]) {
				char addr[16];
				mr_sim_host_addr(f->st->subnet, o, addr, sizeof(addr));
				mr_buf_printf(b, "%s%s", sep, addr);
				sep = ", ";
			}
		mr_buf_puts(b, " } drop; }\n");
		for (size_t k = 0; k < c->ncables; k++) {
			const struct mr_sim_cable *cb = &c->cables[k];
			size_t peer = cb->a == h ? cb->b : cb->a;
			const char *ifn = cb->a == h ? cb->a_if : cb->b_if;
			char chain[40];
			if ((cb->a != h && cb->b != h) || group[peer] < 0 || group[peer] == group[h])
				continue;
			nft_chain("cable_", ifn, chain, sizeof(chain));
			mr_buf_printf(b, " chain %s { type filter hook ingress device \"%s\" priority 0; drop; }\n",
				      chain, ifn);
		}
		mr_buf_puts(b, "}\n");
	}
	/* the first host's script as a dry run: nothing changes when the kernel cannot */
	for (size_t h = 0; h < c->nhosts && rc == 0; h++)
		if (group[h] >= 0) {
			char *what = xasprintf("partition '%s'", spec);
			rc = nft_probe(f, h, what, mr_buf_cstr(&scripts[h]), err);
			free(what);
			break;
		}
	if (rc == 0)
		rc = heal(f, err);
	for (size_t h = 0; h < c->nhosts && rc == 0; h++)
		if (group[h] >= 0)
			rc = nft_run(f, h, mr_buf_cstr(&scripts[h]), false, NULL, err);
	line = xasprintf("partition %s", spec);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, line, line, err);
out:
	for (size_t h = 0; scripts && h < c->nhosts; h++)
		mr_buf_release(&scripts[h]);
	free(scripts);
	free(group);
	free(line);
	mr_strvec_release(&g[0]);
	mr_strvec_release(&g[1]);
	return rc;
}

/* ------------------------------------------------------------------ flap */

static char *flap_pidfile(const struct fault_ctx *f, size_t ci)
{
	const struct mr_sim_cable *k = &f->st->cluster->cables[ci];

	return xasprintf("%s/%s/flap-%s.pid", f->state, f->st->cluster->hosts[k->a].name, k->a_if);
}

/* Both ends of cable ci up (an end whose cable is unplugged stays down) or down. */
static int cable_set(const char *name, const char *state, const struct mr_sim_cluster *c,
		     size_t ci, bool up, struct meshrun_err *err)
{
	const struct mr_sim_cable *k = &c->cables[ci];
	int rc = 0;

	for (int s = 0; s < 2 && rc == 0; s++) {
		const char *h = c->hosts[s ? k->b : k->a].name, *ifn = s ? k->b_if : k->a_if;
		char *ns = mr_sim_ns_name(name, h), *mark = xasprintf("%s/%s/live/unplugged/%s", state, h, ifn);
		struct stat sb;
		bool down = !up || stat(mark, &sb) == 0;
		rc = mr_sim_run(NULL, err, "flap", "ip", "-n", ns, "link", "set", "dev", ifn,
				down ? "down" : "up", NULL);
		free(mark);
		free(ns);
	}
	return rc;
}

/* The flapper: in the namespace of the cable's a end (so `down` and a stopped
 * host end it with the host's processes), down and up every period until
 * killed or the cluster's state is gone. */
static void flapper(struct fault_ctx *f, size_t ci, int64_t ms)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	char *ns = mr_sim_ns_name(f->name, c->hosts[c->cables[ci].a].name);
	char *nspath = xasprintf("/run/netns/%s", ns), *sj = xasprintf("%s/state.json", f->state);
	int fd = open(nspath, O_RDONLY | O_CLOEXEC), nul = open("/dev/null", O_RDWR);
	struct stat sb;

	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0 || nul < 0)
		_exit(1);
	dup2(nul, 0);
	dup2(nul, 1);
	dup2(nul, 2);
	/* no inherited descriptor may outlive meshsim: the fault lock above all */
	for (int i = 3; i < 1024; i++)
		close(i);
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	for (bool up = false; stat(sj, &sb) == 0; up = !up) {
		cable_set(f->name, f->state, c, ci, up, NULL);
		mr_sleep_ms(ms);
	}
	_exit(0);
}

/* Stop the flapper of cable ci, if any, and leave the cable up. */
static int flap_stop(struct fault_ctx *f, size_t ci, struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	char *pidf = flap_pidfile(f, ci), *ns = mr_sim_ns_name(f->name, c->hosts[c->cables[ci].a].name);
	struct mr_buf b = MR_BUF_INIT;
	int64_t pid = 0;
	int rc = 0;

	if (mr_read_file(pidf, 64, &b, NULL) == 0) {
		char *s = (char *)mr_buf_cstr(&b);
		s[strcspn(s, "\n")] = '\0';
		if (mr_parse_i64(s, 2, INT32_MAX, &pid) < 0)
			pid = 0;
	}
	/* only our flapper: a pid in that host's namespace (a stale file may name
	 * a pid reused by something else) */
	if (pid && mr_sim_pid_in_netns((pid_t)pid, ns)) {
		int64_t deadline = mr_now_ms() + 3000;
		kill((pid_t)pid, SIGTERM);
		while (mr_sim_pid_in_netns((pid_t)pid, ns) && mr_ms_left(deadline) > 0)
			mr_sleep_ms(10);
		if (mr_sim_pid_in_netns((pid_t)pid, ns))
			kill((pid_t)pid, SIGKILL);
	}
	if (unlink(pidf) < 0 && errno != ENOENT)
		rc = mr_err_sys(err, "remove '%s'", pidf);
	if (rc == 0)
		rc = cable_set(f->name, f->state, c, ci, true, err);
	mr_buf_release(&b);
	free(pidf);
	free(ns);
	return rc;
}

/*
 * flap HOST:IF PERIOD: the cable goes down (both ends, no carrier) and up
 * again every PERIOD, by a background process recorded in
 * <a host>/flap-<if>.pid; "off" stops it and leaves the cable up.
 */
static int fault_flap(struct fault_ctx *f, const char *port, const char *period,
		      struct meshrun_err *err)
{
	int64_t ms;
	size_t h, ci;
	int side, rc;
	pid_t pid;
	char *key, *line = NULL, *pidf = NULL, num[24];

	rc = mr_sim_parse_period(period, &ms, err);
	if (rc == 0)
		rc = find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	key = cable_key(f, "flap", ci);
	if (!ms && !fault_find(f, key, NULL)) {
		free(key);
		return 0;
	}
	rc = flap_stop(f, ci, err);
	if (rc == 0 && ms) {
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			rc = mr_err_sys(err, "fork the flapper");
		} else if (pid == 0) {
			setsid();
			flapper(f, ci, ms);
		} else {
			pidf = flap_pidfile(f, ci);
			snprintf(num, sizeof(num), "%d\n", (int)pid);
			rc = mr_write_file(pidf, num, strlen(num), 0644, err);
			if (rc < 0)
				kill(pid, SIGKILL);
			line = xasprintf("%s %lldms (pid %d)", key, (long long)ms, (int)pid);
		}
	}
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, ms ? line : NULL, err);
	free(pidf);
	free(line);
	free(key);
	return rc;
}

static int fault_latency(struct fault_ctx *f, const char *port, const char *delay,
			 struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	struct mr_buf out = MR_BUF_INIT;
	size_t h, ci;
	int side, rc;
	int64_t ms;
	char *ns, *key, *line, *d;
	const char *ifn;

	if (mr_parse_duration_ms(delay, 60000, &ms) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected a delay like 5ms", delay);
	rc = find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	ifn = side ? c->cables[ci].b_if : c->cables[ci].a_if;
	key = xasprintf("latency %s:%s", c->hosts[h].name, ifn);
	if (ms == 0 && !fault_find(f, key, NULL)) {
		free(key); /* nothing to remove: a no-op */
		return 0;
	}
	if (ms) {
		char *rk = cable_key(f, "rate", ci);
		bool shaped = fault_find(f, rk, NULL);
		free(rk);
		if (shaped) {
			free(key);
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "'%s': its cable has a rate fault (tc tbf): clear that first",
					  port);
		}
	}
	ns = mr_sim_ns_name(f->name, c->hosts[h].name);
	d = xasprintf("%lldms", (long long)ms);
	if (ms == 0)
		rc = mr_sim_run(&out, err, "remove latency", "tc", "-n", ns, "qdisc", "del", "dev", ifn,
				"root", NULL);
	else
		rc = mr_sim_run(&out, err, "add latency", "tc", "-n", ns, "qdisc", "replace", "dev",
				ifn, "root", "netem", "delay", d, NULL);
	if (rc < 0 && ms && strstr(mr_buf_cstr(&out), "qdisc kind is unknown")) {
		mr_err_clear(err);
		rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED,
				"latency on '%s' skipped: this kernel has no sch_netem (tc netem)", port);
	}
	line = xasprintf("%s %s", key, d);
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, ms ? line : NULL, err);
	free(key);
	free(line);
	free(d);
	free(ns);
	mr_buf_release(&out);
	return rc;
}

int mr_sim_cmd_fault(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name;
	struct fault_ctx f = { NULL, NULL, NULL, -1 };
	const char *what;
	char *lock = NULL;
	int lockfd = -1;
	bool done;
	int code, rc;

	code = parse(MR_SIM_FAULT, &a, argc, argv, &rest, 1, 3, 0, &done);
	if (code || done)
		goto out;
	name = a.name;
	code = MR_SIM_EXIT_FAIL;
	if (need_root("fault"))
		goto out;
	if (mr_sim_check_name(name, &err) < 0) {
		mr_error("meshsim fault: %s", err.msg);
		goto out;
	}
	f.name = name;
	f.state = mr_sim_state_dir(name);
	/* one fault at a time: each reads and rewrites state.json, faults, live/ */
	lock = xasprintf("%s/lock", f.state);
	lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lockfd >= 0 && flock(lockfd, LOCK_EX) < 0)
		mr_close(&lockfd);
	f.lockfd = lockfd;
	if (mr_sim_state_load(name, &f.st, &err) < 0) {
		mr_error("meshsim fault: %s", err.msg);
		goto out;
	}
	what = rest.v[0];
	if (!strcmp(what, "heal")) {
		rc = rest.nr == 1 ? heal(&f, &err) : mr_err_set(&err, MESHRUN_E_USAGE, "heal takes no argument");
	} else if (rest.nr == 1) {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "'%s' needs an argument", what);
	} else if (rest.nr == 3 && strcmp(what, "latency") && strcmp(what, "recable") &&
	    strcmp(what, "rate") && strcmp(what, "loss") && strcmp(what, "flap")) {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "'%s' takes one argument", what);
	} else if (!strcmp(what, "rate") || !strcmp(what, "loss") || !strcmp(what, "flap")) {
		rc = rest.nr != 3 ? mr_err_set(&err, MESHRUN_E_USAGE, "%s HOST:IF %s", what,
					       what[0] == 'r' ? "RATE" : what[0] == 'l' ? "PCT" : "PERIOD")
		   : what[0] == 'r' ? fault_rate(&f, rest.v[1], rest.v[2], &err)
		   : what[0] == 'l' ? fault_loss(&f, rest.v[1], rest.v[2], &err)
				    : fault_flap(&f, rest.v[1], rest.v[2], &err);
	} else if (!strcmp(what, "partition")) {
		rc = fault_partition(&f, rest.v[1], &err);
	} else if (!strcmp(what, "recable")) {
		rc = rest.nr == 3 ? fault_recable(&f, rest.v[1], rest.v[2], &err)
				  : mr_err_set(&err, MESHRUN_E_USAGE, "recable HOST:IF HOST:IF");
	} else if (!strcmp(what, "unplug") || !strcmp(what, "plug")) {
		rc = fault_link(&f, rest.v[1], what[0] == 'p', &err);
	} else if (!strcmp(what, "stop") || !strcmp(what, "start")) {
		rc = fault_host(&f, rest.v[1], !strcmp(what, "start"), &err);
	} else if (!strcmp(what, "nosudo") || !strcmp(what, "sudo")) {
		rc = fault_sudo(&f, rest.v[1], what[0] == 's', &err);
	} else if (!strcmp(what, "latency")) {
		rc = rest.nr == 3 ? fault_latency(&f, rest.v[1], rest.v[2], &err)
				  : mr_err_set(&err, MESHRUN_E_USAGE, "latency HOST:IF DELAY");
	} else {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "unknown fault '%s'", what);
	}
	if (rc < 0) {
		mr_error("meshsim fault: %s", err.msg);
		code = rc == MESHRUN_E_USAGE ? MR_SIM_EXIT_USAGE
		     : rc == MESHRUN_E_UNSUPPORTED ? MR_SIM_EXIT_UNSUPPORTED : MR_SIM_EXIT_FAIL;
		goto out;
	}
	code = 0;
out:
	mr_close(&lockfd);
	free(lock);
	free(f.state);
	mr_sim_state_free(f.st);
	mr_strvec_release(&rest);
	return code;
}

/* ------------------------------------------------------------------- gen */

int mr_sim_cmd_gen(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *outdir;
	struct mr_fixture_set *g = NULL;
	bool done;
	int code;

	code = parse(MR_SIM_GEN, &a, argc, argv, &rest, 1, 1, 0, &done);
	if (code || done)
		goto out;
	outdir = a.output;
	if (!outdir) {
		mr_error("meshsim gen: missing -o DIR");
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	if (mr_fixture_gen(rest.v[0], &g, &err) < 0 || mr_fixture_gen_write(g, outdir, &err) < 0) {
		mr_error("meshsim gen: %s", err.msg);
		code = err.code == MESHRUN_E_USAGE || err.code == MESHRUN_E_PARSE ||
		       err.code == MESHRUN_E_INVAL ? MR_SIM_EXIT_USAGE : MR_SIM_EXIT_FAIL;
		goto out;
	}
	printf("meshsim: wrote %zu hosts of '%s' to %s\n", g->nhosts, rest.v[0], outdir);
out:
	mr_fixture_set_free(g);
	mr_strvec_release(&rest);
	return code;
}
