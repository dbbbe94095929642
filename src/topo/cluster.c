/*
 * cluster.c - hosts -> cables and the connectivity matrix.
 *
 * Cable order is MLX's (IPConfigurator.__init__ in
 * python/mlx/_distributed_utils/config.py): hosts in order, each host's ports in
 * sorted order, a cable taken when first met.
 */
#include "common/compat.h"

#include "common/err.h"
#include "topo/topo.h"
#include "topo/topo_int.h"

struct uuid_ref {
	const char *uuid;
	size_t host, port;
};

struct mr_topo_cluster *mr_topo_cluster_new(void)
{
	return calloc(1, sizeof(struct mr_topo_cluster));
}

void mr_topo_cluster_free(struct mr_topo_cluster *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nhosts; i++)
		mr_topo_host_release(&c->hosts[i]);
	free(c->hosts);
	free(c->cables);
	free(c->onesided);
	free(c->conn);
	mr_strvec_release(&c->notes);
	free(c);
}

ssize_t mr_topo_host_index(const struct mr_topo_cluster *c, const char *name)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (!strcmp(c->hosts[i].name, name))
			return (ssize_t)i;
	return -1;
}

int mr_topo_cluster_take_host(struct mr_topo_cluster *c, struct mr_topo_host *h,
			      struct meshrun_err *err)
{
	struct mr_topo_host *nv;

	if (c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: cluster already finished", h->name);
	if (mr_topo_host_index(c, h->name) >= 0)
		return mr_err_set(err, MESHRUN_E_INVAL, "host '%s' is given twice", h->name);
	nv = realloc(c->hosts, (c->nhosts + 1) * sizeof(*nv));
	if (!nv)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", h->name);
	c->hosts = nv;
	c->hosts[c->nhosts++] = *h;
	memset(h, 0, sizeof(*h));
	return 0;
}

int mr_topo_cluster_add_host(struct mr_topo_cluster *c, const char *name, const char *sp_json,
			     size_t sp_len, const char *hwports, const char *ibv_devices,
			     struct meshrun_err *err)
{
	struct mr_topo_host h = { 0 };
	int rc;

	if (name && mr_topo_host_index(c, name) >= 0)
		return mr_err_set(err, MESHRUN_E_INVAL, "host '%s' is given twice", name);
	rc = mr_topo_parse_host(name, sp_json, sp_len, hwports, ibv_devices, &h, err);
	if (rc < 0)
		return rc;
	rc = mr_topo_cluster_take_host(c, &h, err);
	mr_topo_host_release(&h);
	return rc;
}

static int uuid_cmp(const void *a, const void *b)
{
	const struct uuid_ref *x = a, *y = b;

	return strcmp(x->uuid, y->uuid);
}

/* Sort order: UUID, then host and port (so a duplicate names hosts in order). */
static int uuid_sort_cmp(const void *a, const void *b)
{
	const struct uuid_ref *x = a, *y = b;
	int c = strcmp(x->uuid, y->uuid);

	if (c)
		return c;
	if (x->host != y->host)
		return x->host < y->host ? -1 : 1;
	return x->port < y->port ? -1 : x->port > y->port;
}

static const struct uuid_ref *uuid_find(const struct uuid_ref *idx, size_t n, const char *uuid)
{
	struct uuid_ref key = { uuid, 0, 0 };

	return bsearch(&key, idx, n, sizeof(*idx), uuid_cmp);
}

static unsigned cable_speed(const struct mr_topo_port *a, const struct mr_topo_port *b)
{
	if (!a->speed_gbps)
		return b ? b->speed_gbps : 0;
	if (!b || !b->speed_gbps)
		return a->speed_gbps;
	return MR_MIN(a->speed_gbps, b->speed_gbps);
}

int mr_topo_cluster_finish(struct mr_topo_cluster *c, struct meshrun_err *err)
{
	struct uuid_ref *idx = NULL;
	bool *assigned = NULL;
	size_t *port_base = NULL;
	size_t nports = 0, k = 0, n = c->nhosts;
	int rc = 0;

	if (c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "cluster already finished");
	port_base = calloc(n + 1, sizeof(*port_base));
	if (!port_base)
		goto out_nomem;
	for (size_t i = 0; i < n; i++) {
		port_base[i] = nports;
		nports += c->hosts[i].nports;
	}
	port_base[n] = nports;
	idx = calloc(nports + 1, sizeof(*idx));
	assigned = calloc(nports + 1, sizeof(*assigned));
	c->conn = calloc(n * n + 1, sizeof(*c->conn));
	c->cables = calloc(nports / 2 + 1, sizeof(*c->cables));
	c->onesided = calloc(nports + 1, sizeof(*c->onesided));
	if (!idx || !assigned || !c->conn || !c->cables || !c->onesided)
		goto out_nomem;
	for (size_t i = 0; i < n; i++)
		for (size_t p = 0; p < c->hosts[i].nports; p++)
			idx[k++] = (struct uuid_ref){ c->hosts[i].ports[p].uuid, i, p };
	qsort(idx, nports, sizeof(*idx), uuid_sort_cmp);
	for (size_t i = 1; i < nports; i++) {
		if (!strcmp(idx[i - 1].uuid, idx[i].uuid)) {
			const struct uuid_ref *a = &idx[i - 1], *b = &idx[i];

			rc = mr_err_set(err, MESHRUN_E_PARSE,
					"domain UUID '%s' is claimed by %s (%s) and %s (%s)", a->uuid,
					c->hosts[a->host].name, c->hosts[a->host].ports[a->port].ifname,
					c->hosts[b->host].name, c->hosts[b->host].ports[b->port].ifname);
			goto out;
		}
	}

	for (size_t i = 0; i < n; i++) {
		const struct mr_topo_host *h = &c->hosts[i];

		for (size_t p = 0; p < h->nports; p++) {
			const struct mr_topo_port *pp = &h->ports[p];
			const struct uuid_ref *r;
			const struct mr_topo_port *qq;
			struct mr_topo_cable cb;

			if (!pp->peer_uuid)
				continue;
			if (pp->peer_via_hub &&
			    mr_strvec_pushf(&c->notes, "%s: %s: peer %s found behind a hub or dock",
					    h->name, pp->ifname, pp->peer_uuid) < 0)
				goto out_nomem;
			r = uuid_find(idx, nports, pp->peer_uuid);
			if (!r) {
				if (mr_strvec_pushf(&c->notes,
						    "%s: %s: peer %s%s%s%s is not one of the hosts (ignored)",
						    h->name, pp->ifname, pp->peer_uuid,
						    pp->peer_label ? " (" : "",
						    pp->peer_label ? pp->peer_label : "",
						    pp->peer_label ? ")" : "") < 0)
					goto out_nomem;
				continue;
			}
			if (r->host == i) {
				if (mr_strvec_pushf(&c->notes,
						    "%s: %s: cabled to its own port %s (ignored)", h->name,
						    pp->ifname, h->ports[r->port].ifname) < 0)
					goto out_nomem;
				continue;
			}
			if (assigned[port_base[i] + p])
				continue;
			qq = &c->hosts[r->host].ports[r->port];
			cb.host[0] = i;
			cb.port[0] = p;
			cb.host[1] = r->host;
			cb.port[1] = r->port;
			if (!qq->peer_uuid || strcmp(qq->peer_uuid, pp->uuid) ||
			    assigned[port_base[r->host] + r->port]) {
				cb.speed_gbps = cable_speed(pp, NULL);
				c->onesided[c->nonesided++] = cb;
				if (mr_strvec_pushf(&c->notes,
						    "cable %s %s -> %s %s is reported by %s only (%s %s %s); not used",
						    h->name, pp->ifname, c->hosts[r->host].name, qq->ifname,
						    h->name, c->hosts[r->host].name, qq->ifname,
						    qq->peer_uuid ? "names another peer" : "sees no Mac") < 0)
					goto out_nomem;
				continue;
			}
			cb.speed_gbps = cable_speed(pp, qq);
			assigned[port_base[i] + p] = true;
			assigned[port_base[r->host] + r->port] = true;
			c->cables[c->ncables++] = cb;
			c->conn[i * n + r->host]++;
			c->conn[r->host * n + i]++;
		}
	}
	c->finished = true;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	free(port_base);
	free(idx);
	free(assigned);
	return rc;
}

bool mr_topo_is_mesh(const struct mr_topo_cluster *c, size_t *a, size_t *b)
{
	for (size_t i = 0; i < c->nhosts; i++)
		for (size_t j = i + 1; j < c->nhosts; j++)
			if (!mr_topo_conn(c, i, j)) {
				if (a)
					*a = i;
				if (b)
					*b = j;
				return false;
			}
	return true;
}
