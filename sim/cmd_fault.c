/*
 * sim/cmd_fault.c - `meshsim fault KIND ...`: unplug/plug, recable, stop/start,
 * nosudo/sudo, latency, rate, loss, flap and partition/heal on a running
 * cluster, reboot and maxmtu (cmd_fault_boot.c) (faults.c checks their
 * arguments; the faults file is state.c's).
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
#include "sim/doctor.h"
#include "sim/fault_impl.h"
#include "sim/faults.h"
#include "sim/live.h"
#include "sim/login.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/render.h"
#include "sim/state.h"
#include "fixture/fixture.h"

/* The host of port arg ("h1:en3", colon at its ':'): its index, or an error naming arg. */
static int port_host(struct fault_ctx *f, const char *arg, const char *colon, size_t *host,
		     struct meshrun_err *err)
{
	char *h = xstrndup(arg, (size_t)(colon - arg));
	ssize_t hi = mr_sim_cluster_find_host(f->st->cluster, h);

	free(h);
	if (hi < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no such host in cluster '%s'", arg,
				  f->name);
	*host = (size_t)hi;
	return 0;
}

/* "h1:en3" -> host index and cable; errors name what is wrong. */
int mr_simf_find_port(struct fault_ctx *f, const char *arg, size_t *host, size_t *cable, int *side,
		     struct meshrun_err *err)
{
	const char *colon = strchr(arg, ':');
	size_t hi;
	ssize_t ci;
	int rc;

	if (!colon)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected HOST:INTERFACE", arg);
	rc = port_host(f, arg, colon, &hi, err);
	if (rc)
		return rc;
	ci = mr_sim_cluster_find_cable(f->st->cluster, hi, colon + 1, side);
	if (ci < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': no cable on that interface", arg);
	*host = hi;
	*cable = (size_t)ci;
	return 0;
}

/* "h1:en3" -> host index and interface name (no cable needed). */
static int parse_port(struct fault_ctx *f, const char *arg, size_t *host, char *ifn, size_t ifn_len,
		      struct meshrun_err *err)
{
	const char *colon = strchr(arg, ':');
	int rc;

	if (!colon || !mr_is_ifname(colon + 1) || strlen(colon + 1) >= ifn_len)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected HOST:INTERFACE", arg);
	rc = port_host(f, arg, colon, host, err);
	if (rc)
		return rc;
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

	rc = mr_simf_find_port(f, arg, &h, &ci, &side, err);
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


/* Remove cable ci: its veth pair, its faults (a flapper too), its markers; the
 * array shrinks. */
static int remove_cable(struct fault_ctx *f, size_t ci, struct meshrun_err *err)
{
	struct mr_sim_cluster *c = f->st->cluster;
	const struct mr_sim_cable *k = &c->cables[ci];
	char *ns = mr_sim_ns_name(f->name, c->hosts[k->a].name), *key;
	static const char *const cable_faults[] = { "unplug", "rate", "flap" };
	int rc;

	rc = mr_simf_flap_stop(f, ci, err);
	/* an nftables chain outlives its device: loss chains go first */
	for (int s = 0; s < 2 && rc == 0; s++) {
		char *port = xasprintf("%s:%s", c->hosts[s ? k->b : k->a].name, s ? k->b_if : k->a_if);
		rc = mr_simf_loss(f, port, "0", err);
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
	/* A partition cuts cables, not ports: nft dropped the chains of the ports
	 * that lost their veth, and the new cable may cross the cut. Drawn again
	 * over the cables as they are now. */
	if (rc == 0 && mr_simf_find(f, "partition", &p)) {
		p[strcspn(p, "\n")] = '\0';
		rc = mr_simf_partition(f, p + strlen("partition "), err);
		free(p);
	}
out:
	free(nsa);
	free(nsb);
	mr_buf_release(&b);
	mr_strvec_release(&ports);
	return rc;
}

int mr_simf_host(struct fault_ctx *f, const char *host, bool start, struct meshrun_err *err)
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
		/* like pulling the power: every process of the host at once (no
		 * SIGTERM: a setup forked meanwhile must not outlive the watchdog),
		 * then its network */
		mr_sim_kill_netns(ns, 0);
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
	if (rc == 0 && !mr_sim_pid_in_netns(mr_sim_read_sshd_pid(f->state, host), ns)) {
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
		while (rc == 0 && mr_sim_read_sshd_pid(f->state, host) == 0 && mr_ms_left(deadline) > 0)
			mr_sleep_ms(5);
		if (rc == 0 && !mr_sim_pid_in_netns(mr_sim_read_sshd_pid(f->state, host), ns))
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
		/* and it answers again before the fault says so (up.c: check_reach) */
		const char *names[1] = { host };
		rc = mr_sim_wait_reach(names, (const char (*)[16])&addr, 1, MR_SIM_REACH_TIMEOUT_MS, err);
		if (rc == 0)
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
char *mr_simf_cable_key(const struct fault_ctx *f, const char *kind, size_t ci)
{
	const struct mr_sim_cable *k = &f->st->cluster->cables[ci];

	return xasprintf("%s %s:%s", kind, f->st->cluster->hosts[k->a].name, k->a_if);
}

/* Whether the faults file has a line with this key (its first words); *line
 * (may be NULL) gets a copy of it. */
bool mr_simf_find(const struct fault_ctx *f, const char *key, char **line)
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
const char *mr_simf_first_line(struct mr_buf *out)
{
	char *s = out->p;

	if (!s || !out->len)
		return "no output";
	s[strcspn(s, "\n")] = '\0';
	return s;
}

/* ------------------------------------------------------------- the command */

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

	code = mr_sim_parse_args(MR_SIM_FAULT, &a, argc, argv, &rest, 1, 4, 0, &done);
	if (code || done)
		goto out;
	name = a.name;
	code = MR_SIM_EXIT_FAIL;
	if (mr_sim_need_root("fault"))
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
	if (mr_sim_doctor_fault_kind(what)) {
		rc = mr_simf_doctor(&f, &rest, &err); /* cmd_fault_doctor.c: its own arguments */
	} else if (rest.nr == 4) {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "'%s' takes at most two arguments", what);
	} else if (!strcmp(what, "heal")) {
		rc = rest.nr == 1 ? mr_simf_heal(&f, &err) : mr_err_set(&err, MESHRUN_E_USAGE, "heal takes no argument");
	} else if (rest.nr == 1) {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "'%s' needs an argument", what);
	} else if (rest.nr == 3 && strcmp(what, "latency") && strcmp(what, "recable") &&
	    strcmp(what, "rate") && strcmp(what, "loss") && strcmp(what, "flap") &&
	    strcmp(what, "maxmtu")) {
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "'%s' takes one argument", what);
	} else if (!strcmp(what, "rate") || !strcmp(what, "loss") || !strcmp(what, "flap")) {
		rc = rest.nr != 3 ? mr_err_set(&err, MESHRUN_E_USAGE, "%s HOST:IF %s", what,
					       what[0] == 'r' ? "RATE" : what[0] == 'l' ? "PCT" : "PERIOD")
		   : what[0] == 'r' ? mr_simf_rate(&f, rest.v[1], rest.v[2], &err)
		   : what[0] == 'l' ? mr_simf_loss(&f, rest.v[1], rest.v[2], &err)
				    : mr_simf_flap(&f, rest.v[1], rest.v[2], &err);
	} else if (!strcmp(what, "partition")) {
		rc = mr_simf_partition(&f, rest.v[1], &err);
	} else if (!strcmp(what, "recable")) {
		rc = rest.nr == 3 ? fault_recable(&f, rest.v[1], rest.v[2], &err)
				  : mr_err_set(&err, MESHRUN_E_USAGE, "recable HOST:IF HOST:IF");
	} else if (!strcmp(what, "unplug") || !strcmp(what, "plug")) {
		rc = fault_link(&f, rest.v[1], what[0] == 'p', &err);
	} else if (!strcmp(what, "stop") || !strcmp(what, "start")) {
		rc = mr_simf_host(&f, rest.v[1], !strcmp(what, "start"), &err);
	} else if (!strcmp(what, "reboot")) {
		rc = mr_simf_reboot(&f, rest.v[1], &err);
	} else if (!strcmp(what, "maxmtu")) {
		rc = rest.nr == 3 ? mr_simf_maxmtu(&f, rest.v[1], rest.v[2], &err)
				  : mr_err_set(&err, MESHRUN_E_USAGE, "maxmtu HOST:IF N|off");
	} else if (!strcmp(what, "nosudo") || !strcmp(what, "sudo")) {
		rc = fault_sudo(&f, rest.v[1], what[0] == 's', &err);
	} else if (!strcmp(what, "latency")) {
		rc = rest.nr == 3 ? mr_simf_latency(&f, rest.v[1], rest.v[2], &err)
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

