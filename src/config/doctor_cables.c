/*
 * doctor_cables.c - the cables and rdma columns of `meshconfig doctor`: the
 * cables between the hosts (src/topo, as meshconfig finds them), each end's
 * link, MTU, /30 and route, the hostfile's addresses against them, the pings
 * to run; then the RDMA devices the hostfile names, judged by the cable each
 * one sits on. Pure, no I/O, like the rest of the checks.
 *
 * Apart from doctor_checks.c because these two columns are the doctor's
 * Thunderbolt knowledge and change with it, while the other checks (reach,
 * software, housekeeping, the path's results) do not; the rdma column stays
 * with the cables because it looks every device up on the topology built
 * here. The rules that keep one fault in one cell are at the top of
 * doctor_checks.c.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"

/* "meshconfig --hostfile F --auto-setup" or "--hosts a,b --auto-setup". */
static void setup_fix(const struct doctor *d, char *out, size_t n)
{
	struct mr_buf b = MR_BUF_INIT;

	if (d->o->hostfile) {
		mr_buf_puts(&b, "meshconfig --hostfile ");
		mr_shquote(&b, d->o->hostfile);
	} else {
		mr_buf_puts(&b, "meshconfig --hosts ");
		for (size_t i = 0; i < d->nhosts; i++)
			mr_buf_printf(&b, "%s%s", i ? "," : "", d->hosts[i].name);
	}
	mr_buf_puts(&b, " --auto-setup");
	snprintf(out, n, "%s", mr_buf_cstr(&b));
	mr_buf_release(&b);
}

static void hostfile_fix(const struct doctor *d, char *out, size_t n)
{
	struct mr_buf b = MR_BUF_INIT;

	mr_buf_puts(&b, "write the hostfile again: meshconfig --hosts ");
	for (size_t i = 0; i < d->nhosts; i++)
		mr_buf_printf(&b, "%s%s", i ? "," : "", d->hosts[i].name);
	mr_buf_puts(&b, " --output-hostfile ");
	mr_shquote(&b, d->o->hostfile ? d->o->hostfile : "hosts.json");
	snprintf(out, n, "%s", mr_buf_cstr(&b));
	mr_buf_release(&b);
}

/* ---- cables ----------------------------------------------------------------------- */

static size_t cable_row(const struct doctor *d, size_t c, int s)
{
	return d->tc_host[d->tc->cables[c].host[s]];
}

static const char *cable_if(const struct doctor *d, size_t c, int s)
{
	const struct mr_topo_cable *k = &d->tc->cables[c];

	return d->tc->hosts[k->host[s]].ports[k->port[s]].ifname;
}

/* The cable at interface ifn of row h (its side in *side), or -1. */
static ssize_t cable_at(const struct doctor *d, size_t h, const char *ifn, int *side)
{
	ssize_t t = d->hosts[h].topo;

	if (!d->tc || !d->tc->finished || t < 0 || !ifn || !ifn[0])
		return -1;
	for (size_t c = 0; c < d->tc->ncables; c++)
		for (int s = 0; s < 2; s++)
			if (d->tc->cables[c].host[s] == (size_t)t && !strcmp(cable_if(d, c, s), ifn)) {
				if (side)
					*side = s;
				return (ssize_t)c;
			}
	return -1;
}

/* The cables between the hosts whose Thunderbolt facts parsed (src/topo, as
 * meshconfig finds them). */
static void build_topology(struct doctor *d)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;

	d->tc = mr_topo_cluster_new();
	d->tc_host = xcalloc(d->nhosts ? d->nhosts : 1, sizeof(*d->tc_host));
	if (!d->tc)
		return;
	for (size_t h = 0; h < d->nhosts; h++) {
		struct dr_host *H = &d->hosts[h];

		H->topo = -1;
		if (!dr_have(d, h) || !H->f.tb || !H->f.sp || !H->f.hwports)
			continue;
		mr_err_clear(&e);
		if (mr_topo_cluster_add_host(d->tc, H->name, H->f.sp, H->f.sp_len, H->f.hwports, NULL,
					     &e) < 0) {
			dr_find(d, h, DR_CABLES, DR_FAIL, "discovery", NULL, "%s", e.msg);
			continue;
		}
		H->topo = (ssize_t)d->tc->nhosts - 1;
		d->tc_host[H->topo] = h;
	}
	mr_err_clear(&e);
	if (mr_topo_cluster_finish(d->tc, &e) < 0) {
		for (size_t t = 0; t < d->tc->nhosts; t++)
			dr_find(d, d->tc_host[t], DR_CABLES, DR_FAIL, "discovery", NULL, "%s", e.msg);
		return;
	}
	for (size_t k = 0; k < d->tc->nonesided; k++) {
		const struct mr_topo_cable *c = &d->tc->onesided[k];
		const struct mr_topo_host *a = &d->tc->hosts[c->host[0]], *b = &d->tc->hosts[c->host[1]];
		char fix[256];

		snprintf(fix, sizeof(fix), "unplug and plug in the cable at %s:%s", a->name,
			 a->ports[c->port[0]].ifname);
		dr_find(d, d->tc_host[c->host[0]], DR_CABLES, DR_WARN, "onesided", fix,
			"%s sees a cable to %s, which %s does not report back (a stale link)",
			a->ports[c->port[0]].ifname, b->name, b->name);
	}
}

/* The cluster's most common MTU over the cabled Thunderbolt ends (0: none
 * known, or a tie: then neither end of a mismatch is the odd one). */
static int mtu_mode(const struct doctor *d)
{
	unsigned vals[64];
	size_t cnt[64], nv = 0, best = 0;
	int mode = 0;
	bool tie = false;

	for (size_t c = 0; d->tc && d->tc->finished && c < d->tc->ncables; c++)
		for (int s = 0; s < 2; s++) {
			const struct dr_if *x = dr_facts_if(&d->hosts[cable_row(d, c, s)].f, cable_if(d, c, s));
			size_t k = 0;

			if (!x || !x->mtu)
				continue;
			while (k < nv && vals[k] != x->mtu)
				k++;
			if (k == nv && nv < ARRAY_SIZE(vals)) {
				vals[nv] = x->mtu;
				cnt[nv++] = 0;
			}
			if (k == nv)
				continue;
			if (++cnt[k] > best) {
				best = cnt[k];
				mode = (int)vals[k];
				tie = false;
			} else if (cnt[k] == best && (int)vals[k] != mode) {
				tie = true;
			}
		}
	return tie ? 0 : mode;
}

/* The interface the routing table sends a to (longest prefix), or NULL. */
static const char *route_if(const struct dr_facts *f, uint32_t a)
{
	const char *ifn = NULL;
	int best = -1;

	for (size_t i = 0; i < f->routes.nr; i++) {
		const struct mr_topo_route *r = &f->routes.v[i];
		uint32_t mask = r->len ? 0xffffffffu << (32 - r->len) : 0;

		if (!r->ifname[0] || (a & mask) != r->net || (int)r->len <= best)
			continue;
		best = (int)r->len;
		ifn = r->ifname;
	}
	return ifn;
}

/* The address of a cable end: its first IPv4 address, or NULL. */
static const struct dr_inet *end_addr(const struct dr_if *x)
{
	return x && x->ninet ? &x->inet[0] : NULL;
}

static void add_ping(struct doctor *d, size_t h, const char *ifn, size_t peer, const char *peer_if,
		     uint32_t addr)
{
	struct dr_ping *p;

	d->pings = xreallocarray(d->pings, d->npings + 1, sizeof(*d->pings));
	p = &d->pings[d->npings++];
	memset(p, 0, sizeof(*p));
	p->host = h;
	p->peer = peer;
	snprintf(p->ifname, sizeof(p->ifname), "%s", ifn);
	snprintf(p->peer_if, sizeof(p->peer_if), "%s", peer_if);
	dr_ipv4_str(addr, p->peer_ip, sizeof(p->peer_ip));
	p->result = -1;
}

/* One cable: both ends up, speed, bridge0, MTU, the /30 on both ends, the route
 * to the peer; pings to run. Each problem goes to the end that has it. */
static void check_cable(struct doctor *d, size_t c)
{
	const struct mr_topo_cable *k = &d->tc->cables[c];
	size_t row[2] = { cable_row(d, c, 0), cable_row(d, c, 1) };
	const char *ifn[2] = { cable_if(d, c, 0), cable_if(d, c, 1) };
	const struct dr_if *x[2];
	const struct dr_inet *in[2];
	bool usable[2];
	char fix[512], peer[2][96];
	size_t nfinds = d->nfinds;

	for (int s = 0; s < 2; s++) {
		x[s] = dr_facts_if(&d->hosts[row[s]].f, ifn[s]);
		in[s] = end_addr(x[s]);
		snprintf(peer[s], sizeof(peer[s]), "%s:%s", d->hosts[row[1 - s]].name, ifn[1 - s]);
		dr_cell(d, row[s], DR_CABLES, DR_OK);
	}
	for (int s = 0; s < 2; s++) {
		const struct dr_if *br = dr_facts_if(&d->hosts[row[s]].f, "bridge0");
		bool member = false;

		usable[s] = false;
		if (!x[s]) {
			dr_find(d, row[s], DR_CABLES, DR_FAIL, "no-interface", NULL,
				"ifconfig %s printed nothing (the port of the cable to %s)", ifn[s], peer[s]);
			continue;
		}
		if (!x[s]->up || (x[s]->status_known && !x[s]->active)) {
			if (!x[s]->up)
				snprintf(fix, sizeof(fix), "sudo ifconfig %s up", ifn[s]);
			else
				snprintf(fix, sizeof(fix), "reseat the cable between %s:%s and %s",
					 d->hosts[row[s]].name, ifn[s], peer[s]);
			dr_find(d, row[s], DR_CABLES, DR_FAIL, "link-down", fix, "%s (cable to %s) is %s",
				ifn[s], peer[s], !x[s]->up ? "down" : "up but inactive (no link)");
			continue;
		}
		for (size_t m = 0; br && br->up && m < br->members.nr; m++)
			member |= !strcmp(br->members.v[m], ifn[s]);
		if (member)
			dr_find(d, row[s], DR_CABLES, DR_FAIL, "bridge-member", "sudo ifconfig bridge0 down",
				"%s (cable to %s) is inside bridge0, the Thunderbolt Bridge (it came back, e.g. after a restart)",
				ifn[s], peer[s]);
		usable[s] = true;
	}
	if (k->speed_gbps && k->speed_gbps <= 40)
		for (int s = 0; s < 2; s++)
			dr_find(d, row[s], DR_CABLES, DR_WARN, "tb4",
				"use Thunderbolt 5 ports and a Thunderbolt 5 cable for RDMA",
				"%s (cable to %s) runs at %u Gb/s: Thunderbolt 4, no RDMA over it", ifn[s],
				peer[s], k->speed_gbps);
	if (usable[0] && usable[1] && x[0]->mtu && x[1]->mtu && x[0]->mtu != x[1]->mtu) {
		for (int s = 0; s < 2; s++) {
			unsigned want = d->mtu_mode > 0 ? (unsigned)d->mtu_mode : x[1 - s]->mtu;
			/* blame the end that differs from the cluster (both when neither does) */
			if (x[s]->mtu == want && x[1 - s]->mtu != want)
				continue;
			snprintf(fix, sizeof(fix), "sudo ifconfig %s mtu %u", ifn[s],
				 x[s]->mtu == want ? x[1 - s]->mtu : want);
			dr_find(d, row[s], DR_CABLES, DR_FAIL, "mtu-mismatch", fix,
				"%s has MTU %u, the other end %s has %u", ifn[s], x[s]->mtu, peer[s], x[1 - s]->mtu);
		}
	}
	/* the /30: each end needs one; a missing one is put on its own end */
	for (int s = 0; s < 2; s++) {
		if (!usable[s] || in[s])
			continue;
		if (in[1 - s] && in[1 - s]->len == 30) {
			char a[16];
			uint32_t p = in[1 - s]->addr;
			dr_ipv4_str((p & ~3u) | (3u - (p & 3u)), a, sizeof(a));
			snprintf(fix, sizeof(fix), "sudo ifconfig %s inet %s netmask 255.255.255.252", ifn[s], a);
		} else {
			setup_fix(d, fix, sizeof(fix));
		}
		dr_find(d, row[s], DR_CABLES, DR_FAIL, "no-ipv4", fix,
			"%s (cable to %s) has no IPv4 address (JACCL then has no IPv4-mapped GID: errno 22 at RTR)",
			ifn[s], peer[s]);
	}
	if (!usable[0] || !usable[1] || !in[0] || !in[1])
		return;
	{
		unsigned len = MR_MIN(in[0]->len, in[1]->len);
		uint32_t mask = len ? 0xffffffffu << (32 - len) : 0;
		if ((in[0]->addr & mask) != (in[1]->addr & mask)) {
			char a0[16], a1[16];
			setup_fix(d, fix, sizeof(fix));
			dr_ipv4_str(in[0]->addr, a0, sizeof(a0));
			dr_ipv4_str(in[1]->addr, a1, sizeof(a1));
			for (int s = 0; s < 2; s++)
				dr_find(d, row[s], DR_CABLES, DR_FAIL, "subnet-mismatch", fix,
					"%s has %s/%u, the other end %s has %s/%u: not one subnet", ifn[s],
					s ? a1 : a0, in[s]->len, peer[s], s ? a0 : a1, in[1 - s]->len);
			return;
		}
	}
	for (int s = 0; s < 2; s++) {
		const struct dr_facts *f = &d->hosts[row[s]].f;
		const char *via = f->routes_known ? route_if(f, in[1 - s]->addr) : NULL;
		char a[16];

		dr_ipv4_str(in[1 - s]->addr, a, sizeof(a));
		if (via && strcmp(via, ifn[s])) {
			snprintf(fix, sizeof(fix), "sudo route change %s -interface %s", a, ifn[s]);
			dr_find(d, row[s], DR_CABLES, DR_FAIL, "route", fix,
				"traffic to %s (%s) leaves by %s, not by its cable %s", a, peer[s], via, ifn[s]);
		}
	}
	/* a ping only over a cable nothing is known to be wrong with: else its
	 * failure would blame the other end for this one's problem */
	for (size_t i = nfinds; i < d->nfinds; i++)
		if (d->finds[i].status == DR_FAIL)
			return;
	for (int s = 0; s < 2; s++)
		add_ping(d, row[s], ifn[s], row[1 - s], ifn[1 - s], in[1 - s]->addr);
}

/* Whether row h has a cabled Thunderbolt interface without an IPv4 address
 * (its no-ipv4 finding then also explains a hostfile address missing there). */
static bool has_bare_cable(const struct doctor *d, size_t h)
{
	for (size_t c = 0; d->tc && d->tc->finished && c < d->tc->ncables; c++)
		for (int s = 0; s < 2; s++) {
			const struct dr_if *x;
			if (cable_row(d, c, s) != h)
				continue;
			x = dr_facts_if(&d->hosts[h].f, cable_if(d, c, s));
			if (x && !x->ninet)
				return true;
		}
	return false;
}

/* The hostfile's addresses of rank r against what its host has. */
static void check_hostfile_ips(struct doctor *d, size_t r)
{
	const struct mr_host *H = &d->hf->hosts[r];
	size_t h = d->rank_host[r], n = d->hf->nhosts;
	const struct dr_facts *f = &d->hosts[h].f;
	bool ring = !strcmp(d->backend, "ring");
	char fix[512];

	hostfile_fix(d, fix, sizeof(fix));
	for (size_t k = 0; k < H->ips.nr; k++) {
		const struct dr_if *x;
		uint32_t a;
		ssize_t c;
		int s;

		if (!dr_ipv4(H->ips.v[k], &a))
			continue;
		dr_cell(d, h, DR_CABLES, DR_OK);
		if (!(x = dr_facts_if_of_addr(f, a, NULL))) {
			if (!has_bare_cable(d, h))
				dr_find(d, h, DR_CABLES, DR_FAIL, "hostfile-ip", fix,
					"the hostfile's ips[%zu] of rank %zu, %s, is not an address of %s (of en0, en1, bridge0 or a Thunderbolt port)",
					k, r, H->ips.v[k], d->hosts[h].name);
			continue;
		}
		c = cable_at(d, h, x->name, &s);
		if (ring && n > 1 && c >= 0) {
			size_t left = d->rank_host[(r + n - 1) % n], peer = cable_row(d, (size_t)c, 1 - s);
			if (peer != left)
				dr_find(d, h, DR_CABLES, DR_FAIL, "hostfile-ring", fix,
					"rank %zu's ips[%zu] %s is on %s, whose cable goes to %s; the ring needs it on the cable to rank %zu's host %s",
					r, k, H->ips.v[k], x->name, d->hosts[peer].name, (r + n - 1) % n,
					d->hosts[left].name);
		}
	}
	for (size_t j = 0; H->has_mesh && j < H->nmesh && j < n; j++)
		for (size_t k = 0; k < H->mesh[j].devs.nr; k++) {
			const char *ip = H->mesh[j].devs.v[k];
			const struct dr_if *x;
			size_t want = d->rank_host[j];
			ssize_t c;
			int s;
			uint32_t a;

			if (!dr_ipv4(ip, &a))
				continue;
			if (!(x = dr_facts_if_of_addr(f, a, NULL))) {
				if (!has_bare_cable(d, h))
					dr_find(d, h, DR_CABLES, DR_FAIL, "hostfile-ip", fix,
						"the hostfile's mesh_ips[%zu] of rank %zu, %s, is not an address of %s",
						j, r, ip, d->hosts[h].name);
				continue;
			}
			c = cable_at(d, h, x->name, &s);
			if (c < 0 || cable_row(d, (size_t)c, 1 - s) != want)
				dr_find(d, h, DR_CABLES, DR_FAIL, "hostfile-mesh", fix,
					"the hostfile's mesh_ips[%zu] of rank %zu, %s, is on %s, which has no cable to %s",
					j, r, ip, x->name, d->hosts[want].name);
		}
}

void dr_check_cables(struct doctor *d)
{
	build_topology(d);
	d->mtu_mode = mtu_mode(d);
	for (size_t c = 0; d->tc && d->tc->finished && c < d->tc->ncables; c++)
		check_cable(d, c);
	for (size_t r = 0; r < d->hf->nhosts; r++)
		if (dr_have(d, d->rank_host[r]) && d->hosts[d->rank_host[r]].f.nifs)
			check_hostfile_ips(d, r);
}

/* ---- rdma --------------------------------------------------------------------- */

/* Devices a host's ranks name, with the queue pairs the job opens on each. */
struct qp_need {
	char name[64];
	int need;
};

static void need_qp(struct qp_need *v, size_t *n, size_t cap, const char *dev)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i].name, dev)) {
			v[i].need++;
			return;
		}
	if (*n < cap) {
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", dev);
		v[(*n)++].need = 1;
	}
}

/* The fix for a device whose interface lacks an IPv4 address. */
static void ipv4_fix(const struct doctor *d, size_t h, const char *ifn, char *fix, size_t n)
{
	int s;
	ssize_t c = cable_at(d, h, ifn, &s);
	const struct dr_inet *peer = NULL;

	if (c >= 0)
		peer = end_addr(dr_facts_if(&d->hosts[cable_row(d, (size_t)c, 1 - s)].f,
					    cable_if(d, (size_t)c, 1 - s)));
	if (peer && peer->len == 30) {
		char a[16];
		dr_ipv4_str((peer->addr & ~3u) | (3u - (peer->addr & 3u)), a, sizeof(a));
		snprintf(fix, n, "sudo ifconfig %s inet %s netmask 255.255.255.252", ifn, a);
	} else {
		setup_fix(d, fix, n);
	}
}

/* One device of rank r's row, cell j (its link to rank j). */
static void check_rdma_dev(struct doctor *d, size_t r, size_t j, const char *name)
{
	size_t h = d->rank_host[r], want = d->rank_host[j];
	const struct dr_facts *f = &d->hosts[h].f;
	const struct dr_dev *dev = dr_facts_dev(f, name);
	const struct dr_if *x;
	char ifn[16], fix[512], list[256] = "";
	ssize_t c;
	int s;

	if (!dev) {
		for (size_t i = 0; i < f->ndevs && strlen(list) < 200; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
				 f->devs[i].name);
		hostfile_fix(d, fix, sizeof(fix));
		dr_find(d, h, DR_RDMA, DR_FAIL, "hostfile-rdma", fix,
			"the hostfile's rdma[%zu] of rank %zu (the link to %s) is %s, which %s does not have (ibv_devices: %s; a port that does no RDMA, such as a Mac Studio's next to Ethernet, has none)",
			j, r, d->hosts[want].name, name, d->hosts[h].name, list[0] ? list : "none");
		return;
	}
	dr_dev_ifname(dev, name, ifn, sizeof(ifn));
	x = ifn[0] ? dr_facts_if(f, ifn) : NULL;
	c = ifn[0] ? cable_at(d, h, ifn, &s) : -1;
	if (d->hosts[h].topo >= 0 && ifn[0]) {
		if (c < 0 || cable_row(d, (size_t)c, 1 - s) != want) {
			hostfile_fix(d, fix, sizeof(fix));
			if (c < 0)
				dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-wrong-cable", fix,
					"the hostfile's rdma[%zu] of rank %zu is %s, but %s has no cable (the link to %s needs its cable's device)",
					j, r, name, ifn, d->hosts[want].name);
			else
				dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-wrong-cable", fix,
					"the hostfile's rdma[%zu] of rank %zu is %s, but %s's cable goes to %s, not to %s",
					j, r, name, ifn, d->hosts[cable_row(d, (size_t)c, 1 - s)].name, d->hosts[want].name);
			return;
		}
		if (d->tc->cables[c].speed_gbps && d->tc->cables[c].speed_gbps <= 40)
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-tb4",
				"use Thunderbolt 5 ports and cable, or --backend ring",
				"%s's cable runs at %u Gb/s (Thunderbolt 4): no RDMA over it", name,
				d->tc->cables[c].speed_gbps);
	}
	/* a port is down on a Mac while its interface has no IPv4 address: the
	 * GID finding below names that cause, once */
	if (f->devinfo_ran && dev->described && !dev->active && !(x && !x->ninet)) {
		snprintf(fix, sizeof(fix), "check %s's cable and link (ifconfig %s)", ifn[0] ? ifn : name,
			 ifn[0] ? ifn : name);
		dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-port-down", fix, "port 1 of %s is %s", name,
			dev->state[0] ? dev->state : "not active");
	}
	if (d->gid_index) {
		bool found = false;
		for (size_t g = 0; g < dev->ngid; g++)
			found |= dev->gids[g].index == (int)strtol(d->gid_index, NULL, 10);
		if (dev->gids_listed && !found)
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-gid",
				"unset MESHRUN_IB_GID_INDEX, or give it an index ibv_devinfo -v lists",
				"MESHRUN_IB_GID_INDEX=%s, but %s has no GID at that index", d->gid_index, name);
		return;
	}
	{
		bool v4 = false;
		for (size_t g = 0; g < dev->ngid; g++)
			v4 |= dev->gids[g].v4;
		/* no GID table printed (Apple's ibv_devinfo): the IPv4-mapped GID is
		 * there exactly while the interface has an IPv4 address */
		if (!dev->gids_listed)
			v4 = x && x->ninet;
		if (!v4) {
			if (ifn[0])
				ipv4_fix(d, h, ifn, fix, sizeof(fix));
			else
				snprintf(fix, sizeof(fix), "give %s's interface an IPv4 address", name);
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-no-ipv4-gid", fix,
				"%s has no IPv4-mapped GID%s%s%s: JACCL cannot connect (errno 22 at RTR)", name,
				ifn[0] ? " (" : "", ifn[0] ? ifn : "", ifn[0] ? " has no IPv4 address)" : "");
		}
	}
}

void dr_check_rdma(struct doctor *d)
{
	if (!d->want_rdma)
		return;
	for (size_t h = 0; h < d->nhosts; h++) {
		const struct dr_facts *f = &d->hosts[h].f;
		struct qp_need need[64];
		size_t nneed = 0;
		char fix[256];

		if (!dr_have(d, h) || !f->rdma_asked)
			continue;
		dr_cell(d, h, DR_RDMA, DR_OK);
		if (dr_is_darwin(f) && f->rdma_ctl < 0) {
			dr_find(d, h, DR_RDMA, DR_FAIL, "no-rdma-ctl", "update macOS to 26.2 or later",
				"no rdma_ctl: this macOS has no RDMA over Thunderbolt (26.2 has)");
			continue;
		}
		if (dr_is_darwin(f) && f->rdma_ctl == 0) {
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-disabled",
				"start in Recovery (hold the power button), Utilities > Terminal: rdma_ctl enable; then restart",
				"rdma_ctl status: disabled");
			continue;
		}
		if (!f->ibv_ran) {
			dr_find(d, h, DR_RDMA, DR_FAIL, "no-ibv-devices", "install rdma-core's tools (ibv_devices)",
				"ibv_devices is not found where an ssh session looks");
			continue;
		}
		if (!f->ndevs) {
			if (f->rdma_ctl == 1)
				snprintf(fix, sizeof(fix),
					 "restart %s (RDMA comes up at boot after rdma_ctl enable); if ibv_devices still lists nothing, it has no Thunderbolt 5: use --backend ring",
					 d->hosts[h].name);
			else
				snprintf(fix, sizeof(fix), "load an RDMA driver (on Linux: rdma link add ... type rxe)");
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-no-devices", fix, "%sibv_devices lists no device",
				f->rdma_ctl == 1 ? "rdma_ctl says enabled, but " : "");
			continue;
		}
		for (size_t k = 0; k < d->hosts[h].nranks; k++) {
			size_t r = d->hosts[h].ranks[k];
			const struct mr_host *H = &d->hf->hosts[r];

			for (size_t j = 0; j < H->nrdma && j < d->hf->nhosts; j++)
				for (size_t q = 0; q < H->rdma[j].devs.nr; q++) {
					check_rdma_dev(d, r, j, H->rdma[j].devs.v[q]);
					need_qp(need, &nneed, ARRAY_SIZE(need), H->rdma[j].devs.v[q]);
				}
		}
		/* one queue pair per peer and device (libmeshrun's jaccl and MLX's) */
		for (size_t i = 0; i < nneed; i++) {
			const struct dr_dev *dev = dr_facts_dev(f, need[i].name);
			long limit = dr_is_darwin(f) ? DR_APPLE_MAX_QP : dev && dev->max_qp > 0 ? dev->max_qp : -1;
			int used = dev && dev->qp_used > 0 ? dev->qp_used : 0;

			if (!dev || limit < 0 || need[i].need + used <= limit)
				continue;
			dr_find(d, h, DR_RDMA, DR_FAIL, "rdma-qp",
				"fewer ranks per host, or end the jobs that hold queue pairs",
				"%s: the job opens %d queue pair%s there, %d are in use, the device has %ld at most (the next ibv_create_qp fails with EBUSY)",
				need[i].name, need[i].need, need[i].need == 1 ? "" : "s", used, limit);
		}
	}
}
