/*
 * sim/cmd_fault_net.c - the faults that shape a cable's traffic (see
 * fault_impl.h): rate, latency, loss, partition/heal and flap.
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

/* ------------------------------------------------------------------ rate */

/*
 * rate: a token bucket (tc tbf) at the root of both ends, so both directions
 * of the cable are limited as a slower cable limits them. The first end is
 * the probe: when the kernel has no sch_tbf nothing was changed.
 */
int mr_simf_rate(struct fault_ctx *f, const char *port, const char *rate_s,
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
		rc = mr_simf_find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	key = mr_simf_cable_key(f, "rate", ci);
	if (!bps && !mr_simf_find(f, key, NULL)) {
		free(key); /* no rate on that cable: a no-op */
		return 0;
	}
	for (int s = 0; s < 2 && bps && rc == 0; s++) {
		size_t hi = s ? c->cables[ci].b : c->cables[ci].a;
		const char *ifn = s ? c->cables[ci].b_if : c->cables[ci].a_if;
		char *lk = xasprintf("latency %s:%s", c->hosts[hi].name, ifn);
		if (mr_simf_find(f, lk, NULL))
			rc = mr_err_set(err, MESHRUN_E_USAGE,
					"'%s': %s:%s has a latency fault (tc netem): clear that first",
					port, c->hosts[hi].name, ifn);
		free(lk);
	}
	mr_sim_fmt_rate(bps, rate, sizeof(rate));
	/* a bucket of 10 ms at that rate, at least 64 KiB (a GSO frame of a veth):
	 * tbf refills only when its timer runs, and on a loaded host (many
	 * shaped cables, few cores) the timer runs late; a bucket of 1 ms lost
	 * the tokens of each late wake-up, and 12 busy cables of a mesh:4 got a
	 * third of their rate (bench/mesh, 300mbit, 2 cores under load) */
	snprintf(burst, sizeof(burst), "%llu", (unsigned long long)(bps / 800 > 65536 ? bps / 800 : 65536));
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
					c->hosts[hi].name, ifn, mr_simf_first_line(&out));
		if (rc < 0 && s == 0 && bps) {
			mr_err_clear(err);
			rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED,
					"rate on '%s' refused: tc tbf failed (no sch_tbf in this kernel?): %s",
					port, mr_simf_first_line(&out));
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
				mr_simf_first_line(&out));
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
 * loss: PCT% of what that end sends is dropped at random (nftables: numgen
 * random, so the kernel needs no sch_netem), where the cable's other end
 * receives it: a netdev ingress chain in the other host. Not on the sender's
 * egress: a packet dropped there fails the sender's own transmit
 * (NET_XMIT_DROP), which its TCP takes for a local hiccup and sends again as
 * new data, never counted as a retransmission; a lossy cable drops on the
 * wire, after the sender's stack let go of the packet, as ingress does.
 */
int mr_simf_loss(struct fault_ctx *f, const char *port, const char *pct_s,
		      struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	unsigned pct;
	size_t h, ci, rh;
	int side, rc;
	char chain[40], shown[16], *key, *script = NULL, *line = NULL, *what;
	const char *ifn, *rif;

	rc = mr_sim_parse_pct(pct_s, &pct, err);
	if (rc == 0)
		rc = mr_simf_find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	ifn = side ? c->cables[ci].b_if : c->cables[ci].a_if;
	rh = side ? c->cables[ci].a : c->cables[ci].b; /* the receiving end */
	rif = side ? c->cables[ci].a_if : c->cables[ci].b_if;
	key = xasprintf("loss %s:%s", c->hosts[h].name, ifn);
	if (!pct && !mr_simf_find(f, key, NULL)) {
		free(key);
		return 0;
	}
	nft_chain("loss_", rif, chain, sizeof(chain));
	if (pct)
		script = xasprintf("add table netdev meshsim_loss; "
				   "add chain netdev meshsim_loss %s { type filter hook ingress device \"%s\" priority 0; }; "
				   "flush chain netdev meshsim_loss %s; "
				   "add rule netdev meshsim_loss %s numgen random mod 10000 < %u counter drop",
				   chain, rif, chain, chain, pct);
	else
		script = xasprintf("delete chain netdev meshsim_loss %s", chain);
	what = xasprintf("loss on '%s'", port);
	if (pct)
		rc = nft_probe(f, rh, what, script, err);
	if (rc == 0)
		rc = nft_run(f, rh, script, false, NULL, err);
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
int mr_simf_heal(struct fault_ctx *f, struct meshrun_err *err)
{
	char *line = NULL;
	int rc = 0;

	if (!mr_simf_find(f, "partition", &line))
		return 0;
	for (size_t h = 0; h < f->st->cluster->nhosts; h++) {
		struct mr_buf out = MR_BUF_INIT;
		if (nft_run(f, h, "delete table netdev meshsim_part", false, &out, NULL) < 0 &&
		    !strstr(mr_buf_cstr(&out), "No such file") && rc == 0)
			rc = mr_err_set(err, MESHRUN_E_SYS, "heal %s: nft: %s",
					f->st->cluster->hosts[h].name, mr_simf_first_line(&out));
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
int mr_simf_partition(struct fault_ctx *f, const char *spec, struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	struct mr_strvec g[2] = { MR_STRVEC_INIT, MR_STRVEC_INIT };
	struct mr_buf *scripts = NULL;
	int *group = NULL;
	char *line = NULL;
	int rc;

	if (!strcmp(spec, "off"))
		return mr_simf_heal(f, err);
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
		rc = mr_simf_heal(f, err);
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
int mr_simf_flap_stop(struct fault_ctx *f, size_t ci, struct meshrun_err *err)
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
int mr_simf_flap(struct fault_ctx *f, const char *port, const char *period,
		      struct meshrun_err *err)
{
	int64_t ms;
	size_t h, ci;
	int side, rc;
	pid_t pid;
	char *key, *line = NULL, *pidf = NULL, num[24];

	rc = mr_sim_parse_period(period, &ms, err);
	if (rc == 0)
		rc = mr_simf_find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	key = mr_simf_cable_key(f, "flap", ci);
	if (!ms && !mr_simf_find(f, key, NULL)) {
		free(key);
		return 0;
	}
	rc = mr_simf_flap_stop(f, ci, err);
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

int mr_simf_latency(struct fault_ctx *f, const char *port, const char *delay,
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
	rc = mr_simf_find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	ifn = side ? c->cables[ci].b_if : c->cables[ci].a_if;
	key = xasprintf("latency %s:%s", c->hosts[h].name, ifn);
	if (ms == 0 && !mr_simf_find(f, key, NULL)) {
		free(key); /* nothing to remove: a no-op */
		return 0;
	}
	if (ms) {
		char *rk = mr_simf_cable_key(f, "rate", ci);
		bool shaped = mr_simf_find(f, rk, NULL);
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
