/*
 * topo/plan.c - the point-to-point IP plan: one /30 per cable (not launch/plan.c,
 * meshrun's job plan, nor sim/plan.c, meshsim's names and addresses).
 *
 * Matches IPConfigurator.__init__() and IPConfigurator.setup() of MLX's
 * python/mlx/_distributed_utils/config.py (mlx.distributed_config): the same
 * cable order, the same 192.168.X.Y counter, the same commands per host. The one
 * addition: a /30 overlapping a route that already exists on some host (a VPN, a
 * LAN) is skipped, and the counter moves on.
 */
#include "common/compat.h"

#include <ctype.h>

#include "common/err.h"
#include "common/num.h"
#include "topo/topo.h"
#include "topo/topo_int.h"

#define NETMASK_30 "255.255.255.252"

/* Private lookup (pair -> links), kept after the public members. */
struct plan_index {
	size_t n;
	size_t *off;   /* n*n+1 offsets into ent */
	size_t *ent;   /* link*2 + side, for every (i, j) in plan order */
};

void mr_topo_routes_release(struct mr_topo_routes *r)
{
	MR_FREE(r->v);
	r->nr = 0;
}

/* "192.168.1" -> /24, "10.8/16", "192.168.1.1/32", "127" -> /8, "default" -> /0. */
static int parse_dest(const char *s, uint32_t *net, unsigned *len)
{
	unsigned oct[4] = { 0 }, noct = 0;
	const char *p = s;
	uint64_t v;

	if (!strcmp(s, "default")) {
		*net = 0;
		*len = 0;
		return 0;
	}
	while (noct < 4) {
		char buf[4];
		size_t n = 0;

		while (isdigit((unsigned char)p[n]) && n < 3)
			n++;
		if (n == 0 || isdigit((unsigned char)p[n]))
			return -1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		if (mr_parse_u64(buf, 0, 255, &v) < 0)
			return -1;
		oct[noct++] = (unsigned)v;
		p += n;
		if (*p != '.')
			break;
		p++;
	}
	*len = noct * 8;
	if (*p == '/') {
		if (mr_parse_u64(p + 1, 0, 32, &v) < 0)
			return -1;
		*len = (unsigned)v;
	} else if (*p) {
		return -1;
	}
	*net = (uint32_t)oct[0] << 24 | (uint32_t)oct[1] << 16 | (uint32_t)oct[2] << 8 | oct[3];
	if (*len < 32)
		*net &= *len ? ~(uint32_t)0 << (32 - *len) : 0;
	return 0;
}

int mr_topo_parse_routes(const char *host, const char *text, struct mr_topo_routes *out,
			 struct meshrun_err *err)
{
	char *copy = strdup(text ? text : ""), *save = NULL, *line;
	struct mr_topo_routes r = { NULL, 0 };
	int rc = 0;

	if (!copy)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: netstat: out of memory", host);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[8], *s2 = NULL, *w;
		size_t nf = 0;
		struct mr_topo_route rt = { 0 };
		struct mr_topo_route *nv;

		if (!strncmp(line, "Internet6", 9))
			break;
		for (w = strtok_r(line, " \t", &s2); w && nf < ARRAY_SIZE(f);
		     w = strtok_r(NULL, " \t", &s2))
			f[nf++] = w;
		/* Destination Gateway Flags Netif [Expire] */
		if (nf < 4 || parse_dest(f[0], &rt.net, &rt.len) < 0)
			continue;
		if (!mr_topo_ifname_ok(f[3])) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: netstat: invalid interface name '%.32s'",
					host, f[3]);
			goto out;
		}
		snprintf(rt.ifname, sizeof(rt.ifname), "%s", f[3]);
		nv = realloc(r.v, (r.nr + 1) * sizeof(*nv));
		if (!nv) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: netstat: out of memory", host);
			goto out;
		}
		r.v = nv;
		r.v[r.nr++] = rt;
	}
	*out = r;
	r.v = NULL;
out:
	mr_topo_routes_release(&r);
	free(copy);
	return rc;
}

static bool overlaps(uint32_t a, unsigned alen, uint32_t b, unsigned blen)
{
	unsigned l = MR_MIN(alen, blen);
	uint32_t m = l ? ~(uint32_t)0 << (32 - l) : 0;

	return (a & m) == (b & m);
}

/* Does 192.168.x.y/30 collide with a route of some host (not one of ours)? */
static bool conflicts(const struct mr_topo_cluster *c, const struct mr_topo_routes *routes,
		      uint32_t net)
{
	if (!routes)
		return false;
	for (size_t h = 0; h < c->nhosts; h++) {
		for (size_t k = 0; k < routes[h].nr; k++) {
			const struct mr_topo_route *r = &routes[h].v[k];
			bool ours = !strcmp(r->ifname, "bridge0");

			if (r->len == 0)
				continue;
			for (size_t p = 0; !ours && p < c->hosts[h].nports; p++)
				ours = !strcmp(r->ifname, c->hosts[h].ports[p].ifname);
			if (!ours && overlaps(net, 30, r->net, r->len))
				return true;
		}
	}
	return false;
}

void mr_topo_plan_release(struct mr_topo_plan *p)
{
	struct plan_index *ix = p->priv;

	if (p->cmds) {
		for (size_t i = 0; i < p->nhosts; i++) {
			for (size_t k = 0; k < p->cmds[i].nr; k++)
				mr_strvec_release(&p->cmds[i].v[k].argv);
			free(p->cmds[i].v);
		}
	}
	MR_FREE(p->cmds);
	MR_FREE(p->links);
	if (ix) {
		free(ix->off);
		free(ix->ent);
		free(ix);
	}
	memset(p, 0, sizeof(*p));
}

static int add_cmd(struct mr_topo_host_cmds *hc, const char *const *argv)
{
	struct mr_topo_cmd *nv = realloc(hc->v, (hc->nr + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	hc->v = nv;
	memset(&hc->v[hc->nr], 0, sizeof(hc->v[hc->nr]));
	hc->nr++;
	for (; *argv; argv++)
		if (mr_strvec_push(&hc->v[hc->nr - 1].argv, *argv) < 0)
			return -1;
	return 0;
}

static const size_t *pair_ent(const struct mr_topo_plan *p, size_t i, size_t j, size_t *cnt)
{
	const struct plan_index *ix = p->priv;

	*cnt = 0;
	if (!ix || i >= ix->n || j >= ix->n)
		return NULL;
	*cnt = ix->off[i * ix->n + j + 1] - ix->off[i * ix->n + j];
	return ix->ent + ix->off[i * ix->n + j];
}

size_t mr_topo_plan_count(const struct mr_topo_plan *p, size_t i, size_t j)
{
	size_t cnt;

	pair_ent(p, i, j, &cnt);
	return cnt;
}

const char *mr_topo_plan_ip(const struct mr_topo_plan *p, size_t i, size_t j, size_t k)
{
	size_t cnt;
	const size_t *e = pair_ent(p, i, j, &cnt);

	if (k >= cnt)
		return NULL;
	return p->links[e[k] / 2].ip[e[k] % 2];
}

const char *mr_topo_plan_if(const struct mr_topo_plan *p, size_t i, size_t j, size_t k)
{
	size_t cnt;
	const size_t *e = pair_ent(p, i, j, &cnt);

	if (k >= cnt)
		return NULL;
	return p->links[e[k] / 2].ifname[e[k] % 2];
}

int mr_topo_plan_build(const struct mr_topo_cluster *c, const struct mr_topo_routes *routes,
		       struct mr_topo_plan *out, struct meshrun_err *err)
{
	struct mr_topo_plan p = { 0 };
	struct plan_index *ix = NULL;
	unsigned ip0 = 0, ip1 = 0;
	size_t n = c->nhosts, *fill = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "cluster not finished");
	p.links = calloc(c->ncables + 1, sizeof(*p.links));
	p.cmds = calloc(n + 1, sizeof(*p.cmds));
	ix = calloc(1, sizeof(*ix));
	if (!p.links || !p.cmds || !ix)
		goto out_nomem;
	p.nhosts = n;
	p.priv = ix;
	ix->n = n;
	ix->off = calloc(n * n + 1, sizeof(*ix->off));
	ix->ent = calloc(2 * c->ncables + 1, sizeof(*ix->ent));
	fill = calloc(n * n + 1, sizeof(*fill));
	if (!ix->off || !ix->ent || !fill)
		goto out_nomem;

	for (size_t k = 0; k < c->ncables; k++) {
		const struct mr_topo_cable *cb = &c->cables[k];
		struct mr_topo_link *l = &p.links[p.nlinks];
		uint32_t net;

		for (;;) {
			if (ip0 > 255) {
				rc = mr_err_set(err, MESHRUN_E_INVAL,
						"ran out of /30 ranges in 192.168.0.0/16 for %zu cables",
						c->ncables);
				goto out;
			}
			net = 0xC0A80000u | ip0 << 8 | ip1;
			if (!conflicts(c, routes, net))
				break;
			p.nskipped++;
			ip1 += 4;
			if (ip1 > 255) {
				ip0++;
				ip1 = 0;
			}
		}
		l->cable = k;
		for (int s = 0; s < 2; s++) {
			l->host[s] = cb->host[s];
			l->ifname[s] = c->hosts[cb->host[s]].ports[cb->port[s]].ifname;
			snprintf(l->ip[s], sizeof(l->ip[s]), "192.168.%u.%u", ip0, ip1 + 1 + s);
		}
		snprintf(l->subnet, sizeof(l->subnet), "192.168.%u.%u/30", ip0, ip1);
		p.nlinks++;
		ix->off[cb->host[0] * n + cb->host[1] + 1]++;
		ix->off[cb->host[1] * n + cb->host[0] + 1]++;
		ip1 += 4;
		if (ip1 > 255) {
			ip0++;
			ip1 = 0;
		}
	}
	for (size_t i = 1; i <= n * n; i++)
		ix->off[i] += ix->off[i - 1];
	for (size_t k = 0; k < p.nlinks; k++) {
		const struct mr_topo_link *l = &p.links[k];

		for (int s = 0; s < 2; s++) {
			size_t pi = l->host[s] * n + l->host[1 - s];

			ix->ent[ix->off[pi] + fill[pi]++] = k * 2 + (size_t)s;
		}
	}

	/* IPConfigurator.setup(): bridge0 down, then per peer in index order. */
	for (size_t i = 0; i < n; i++) {
		static const char *const down[] = { "ifconfig", "bridge0", "down", NULL };

		if (add_cmd(&p.cmds[i], down) < 0)
			goto out_nomem;
		for (size_t j = 0; j < n; j++) {
			size_t cnt = mr_topo_plan_count(&p, i, j);

			for (size_t k = 0; j != i && k < cnt; k++) {
				const char *ifn = mr_topo_plan_if(&p, i, j, k);
				const char *set[] = { "ifconfig", ifn, "inet",
						      mr_topo_plan_ip(&p, i, j, k), "netmask",
						      NETMASK_30, NULL };
				const char *route[] = { "route", "change", mr_topo_plan_ip(&p, j, i, k),
							"-interface", ifn, NULL };

				if (add_cmd(&p.cmds[i], set) < 0 || add_cmd(&p.cmds[i], route) < 0)
					goto out_nomem;
			}
		}
	}
	*out = p;
	memset(&p, 0, sizeof(p));
	ix = NULL;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	free(fill);
	if (ix && !p.priv) {
		if (ix) {
			free(ix->off);
			free(ix->ent);
		}
		free(ix);
	}
	mr_topo_plan_release(&p);
	return rc;
}
