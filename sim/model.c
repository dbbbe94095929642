#include "common/compat.h"
#include "sim/model.h"

#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "sim/plan.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

struct mr_sim_cluster *mr_sim_cluster_new(void)
{
	return xcalloc(1, sizeof(struct mr_sim_cluster));
}

struct mr_sim_host *mr_sim_cluster_add_host(struct mr_sim_cluster *c, const char *name)
{
	struct mr_sim_host *h;

	c->hosts = xreallocarray(c->hosts, c->nhosts + 1, sizeof(*c->hosts));
	h = &c->hosts[c->nhosts++];
	memset(h, 0, sizeof(*h));
	h->name = xstrdup(name);
	return h;
}

void mr_sim_cluster_add_cable(struct mr_sim_cluster *c, size_t a, const char *a_if, size_t b,
			      const char *b_if)
{
	struct mr_sim_cable *k;

	c->cables = xreallocarray(c->cables, c->ncables + 1, sizeof(*c->cables));
	k = &c->cables[c->ncables++];
	memset(k, 0, sizeof(*k));
	if (b < a) {
		size_t t = a;
		const char *ti = a_if;
		a = b;
		b = t;
		a_if = b_if;
		b_if = ti;
	}
	k->a = a;
	k->b = b;
	snprintf(k->a_if, sizeof(k->a_if), "%s", a_if);
	snprintf(k->b_if, sizeof(k->b_if), "%s", b_if);
}

void mr_sim_cluster_free(struct mr_sim_cluster *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nhosts; i++) {
		free(c->hosts[i].name);
		mr_strvec_release(&c->hosts[i].rdma);
	}
	free(c->hosts);
	free(c->cables);
	free(c->dir);
	mr_fixture_free(c->fx);
	free(c);
}

ssize_t mr_sim_cluster_find_host(const struct mr_sim_cluster *c, const char *name)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (!strcmp(c->hosts[i].name, name))
			return (ssize_t)i;
	return -1;
}

ssize_t mr_sim_cluster_find_cable(const struct mr_sim_cluster *c, size_t host, const char *ifname,
				  int *side)
{
	for (size_t i = 0; i < c->ncables; i++) {
		const struct mr_sim_cable *k = &c->cables[i];
		if (k->a == host && !strcmp(k->a_if, ifname)) {
			if (side)
				*side = 0;
			return (ssize_t)i;
		}
		if (k->b == host && !strcmp(k->b_if, ifname)) {
			if (side)
				*side = 1;
			return (ssize_t)i;
		}
	}
	return -1;
}

static int check_if(const struct mr_sim_cluster *c, size_t h, const char *ifname,
		    struct meshrun_err *err)
{
	const char *host = c->hosts[h].name;

	if (!mr_is_ifname(ifname) || !mr_is_shell_safe(ifname))
		return mr_err_set(err, MESHRUN_E_PARSE,
				  "%s/networksetup.txt: invalid interface name '%s'", host, ifname);
	if (mr_sim_ifname_reserved(ifname))
		return mr_err_set(err, MESHRUN_E_PARSE,
				  "%s/networksetup.txt: Thunderbolt interface '%s' clashes with the name meshsim gives the management interface or bridge",
				  host, ifname);
	return 0;
}

int mr_sim_cluster_check(const struct mr_sim_cluster *c, struct meshrun_err *err)
{
	if (c->nhosts == 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "cluster.json: hosts: no hosts");
	if (c->nhosts > MR_SIM_MAX_HOSTS)
		return mr_err_set(err, MESHRUN_E_PARSE,
				  "cluster.json: hosts: %zu hosts, meshsim supports at most %d",
				  c->nhosts, MR_SIM_MAX_HOSTS);
	for (size_t i = 0; i < c->nhosts; i++) {
		const char *n = c->hosts[i].name;
		if (!mr_is_hostname(n) || !mr_is_shell_safe(n) || !strcmp(n, ".") ||
		    !strcmp(n, "..") || strlen(n) > 64)
			return mr_err_set(err, MESHRUN_E_PARSE,
					  "cluster.json: hosts[%zu].name: invalid host name '%s'", i, n);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(c->hosts[j].name, n))
				return mr_err_set(err, MESHRUN_E_PARSE,
						  "cluster.json: hosts[%zu].name: duplicate host name '%s' (also hosts[%zu])",
						  i, n, j);
	}
	for (size_t i = 0; i < c->ncables; i++) {
		const struct mr_sim_cable *k = &c->cables[i];
		if (k->a >= c->nhosts || k->b >= c->nhosts || k->a == k->b)
			return mr_err_set(err, MESHRUN_E_PARSE, "cable %zu: bad host index", i);
		if (check_if(c, k->a, k->a_if, err) < 0 || check_if(c, k->b, k->b_if, err) < 0)
			return err ? err->code : MESHRUN_E_PARSE;
		for (size_t j = 0; j < i; j++) {
			const struct mr_sim_cable *o = &c->cables[j];
			const char *dup = NULL;
			size_t h = 0;
			if ((o->a == k->a && !strcmp(o->a_if, k->a_if)) ||
			    (o->b == k->a && !strcmp(o->b_if, k->a_if))) {
				dup = k->a_if;
				h = k->a;
			} else if ((o->a == k->b && !strcmp(o->a_if, k->b_if)) ||
				   (o->b == k->b && !strcmp(o->b_if, k->b_if))) {
				dup = k->b_if;
				h = k->b;
			}
			if (dup)
				return mr_err_set(err, MESHRUN_E_PARSE,
						  "%s/system_profiler.json: interface '%s' carries two cables",
						  c->hosts[h].name, dup);
		}
	}
	return 0;
}

/* A peer UUID that no bus of any host has: the cable leads nowhere. */
static int check_peers(const struct mr_topo_cluster *tc, struct meshrun_err *err)
{
	for (size_t i = 0; i < tc->nhosts; i++) {
		const struct mr_topo_host *h = &tc->hosts[i];
		for (size_t p = 0; p < h->nports; p++) {
			const char *peer = h->ports[p].peer_uuid;
			bool found = false;
			if (!peer)
				continue;
			for (size_t j = 0; j < tc->nhosts && !found; j++)
				for (size_t q = 0; q < tc->hosts[j].nports && !found; q++)
					found = !strcmp(tc->hosts[j].ports[q].uuid, peer);
			if (!found)
				return mr_err_set(err, MESHRUN_E_PARSE,
						  "%s/system_profiler.json: receptacle %s (%s): _items[].domain_uuid_key '%s' is on no host of the cluster",
						  h->name, h->ports[p].receptacle, h->ports[p].ifname, peer);
		}
	}
	return 0;
}

int mr_sim_cluster_load(const char *dir, struct mr_sim_cluster **out, struct mr_strvec *notes,
			struct meshrun_err *err)
{
	struct mr_fixture *fx = NULL;
	struct mr_sim_cluster *c = NULL;
	const struct mr_topo_cluster *tc;
	int rc;

	rc = mr_fixture_load(dir, &fx, err);
	if (rc < 0)
		return rc;
	tc = fx->cluster;
	c = mr_sim_cluster_new();
	c->dir = xstrdup(dir);
	c->fx = fx;
	for (size_t i = 0; i < fx->nhosts; i++) {
		struct mr_sim_host *h = mr_sim_cluster_add_host(c, fx->hosts[i].name);
		ssize_t ti = mr_topo_host_index(tc, fx->hosts[i].name);
		h->nosudo = fx->hosts[i].nosudo;
		h->sp_json = fx->hosts[i].sp_json;
		h->sp_len = fx->hosts[i].sp_len;
		h->hwports = fx->hosts[i].hwports;
		h->ibv = fx->hosts[i].ibv;
		if (ti >= 0)
			mr_strvec_pushv(&h->rdma, tc->hosts[ti].rdma_devs.v ?
					tc->hosts[ti].rdma_devs.v : (char *[]){ NULL });
	}
	rc = check_peers(tc, err);
	if (rc < 0)
		goto fail;
	for (size_t i = 0; i < tc->ncables; i++) {
		const struct mr_topo_cable *k = &tc->cables[i];
		const struct mr_topo_host *ha = &tc->hosts[k->host[0]], *hb = &tc->hosts[k->host[1]];
		ssize_t a = mr_sim_cluster_find_host(c, ha->name), b = mr_sim_cluster_find_host(c, hb->name);
		if (a < 0 || b < 0) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "cable %s-%s: host not in cluster.json",
					ha->name, hb->name);
			goto fail;
		}
		mr_sim_cluster_add_cable(c, (size_t)a, ha->ports[k->port[0]].ifname, (size_t)b,
					 hb->ports[k->port[1]].ifname);
	}
	for (size_t i = 0; notes && i < tc->nonesided; i++) {
		const struct mr_topo_cable *k = &tc->onesided[i];
		mr_strvec_pushf(notes, "%s: %s: cable reported by %s only, not simulated",
				tc->hosts[k->host[0]].name, tc->hosts[k->host[0]].ports[k->port[0]].ifname,
				tc->hosts[k->host[0]].name);
	}
	rc = mr_sim_cluster_check(c, err);
	if (rc < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	mr_err_prefix(err, "%s", dir);
	mr_sim_cluster_free(c);
	return rc;
}
