/*
 * gen.c - consistent fixture sets for mesh:N / ring:N topologies (see gen.h).
 */
#include "common/compat.h"

#include <sys/stat.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "topo/gen.h"

#define MAX_CABLES 4

enum kind { KIND_MESH, KIND_RING };

struct spec {
	enum kind kind;
	unsigned n, cables, speed;
	bool *cabled;  /* n*n */
	bool *nordma;  /* n */
};

struct gport {
	unsigned receptacle;
	unsigned peer, peer_receptacle; /* peer host index, its receptacle */
};

struct ghost {
	struct gport *ports;
	unsigned nports;
};

void mr_topo_genset_free(struct mr_topo_genset *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->nhosts; i++) {
		free(g->hosts[i].name);
		free(g->hosts[i].en0);
		free(g->hosts[i].sp_json);
		free(g->hosts[i].hwports);
		free(g->hosts[i].ibv);
	}
	free(g->hosts);
	free(g->spec);
	free(g->cluster_json);
	free(g);
}

static int host_num(const char *s, unsigned n, unsigned *out)
{
	uint64_t v;

	if (s[0] != 'h' || mr_parse_u64(s + 1, 1, n, &v) < 0)
		return -1;
	*out = (unsigned)v - 1;
	return 0;
}

static int parse_spec(const char *text, struct spec *sp, struct meshrun_err *err)
{
	char *copy = strdup(text), *save = NULL, *tok, *colon;
	uint64_t v;
	int rc = 0;

	memset(sp, 0, sizeof(*sp));
	sp->cables = 1;
	sp->speed = 80;
	if (!copy)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	tok = strtok_r(copy, ",", &save);
	colon = tok ? strchr(tok, ':') : NULL;
	if (!colon) {
		rc = mr_err_set(err, MESHRUN_E_USAGE, "topology '%s': expected KIND:N (mesh:4, ring:8)",
				text);
		goto out;
	}
	*colon = '\0';
	if (!strcmp(tok, "mesh"))
		sp->kind = KIND_MESH;
	else if (!strcmp(tok, "ring"))
		sp->kind = KIND_RING;
	else {
		rc = mr_err_set(err, MESHRUN_E_USAGE, "topology '%s': unknown kind '%s' (mesh or ring)",
				text, tok);
		goto out;
	}
	if (mr_parse_u64(colon + 1, 2, MR_TOPO_GEN_MAX_HOSTS, &v) < 0) {
		rc = mr_err_set(err, MESHRUN_E_USAGE, "topology '%s': host count '%s' is not in 2..%d",
				text, colon + 1, MR_TOPO_GEN_MAX_HOSTS);
		goto out;
	}
	sp->n = (unsigned)v;
	sp->cabled = calloc((size_t)sp->n * sp->n, sizeof(*sp->cabled));
	sp->nordma = calloc(sp->n, sizeof(*sp->nordma));
	if (!sp->cabled || !sp->nordma) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < sp->n; i++)
		for (unsigned j = 0; j < sp->n; j++) {
			bool on;

			if (i == j)
				continue;
			if (sp->kind == KIND_MESH)
				on = true;
			else
				on = (i + 1) % sp->n == j || (j + 1) % sp->n == i;
			sp->cabled[i * sp->n + j] = on;
		}
	while ((tok = strtok_r(NULL, ",", &save))) {
		char *eq = strchr(tok, '=');
		unsigned a, b;

		if (!eq)
			goto bad_opt;
		*eq++ = '\0';
		if (!strcmp(tok, "cables")) {
			if (mr_parse_u64(eq, 1, MAX_CABLES, &v) < 0)
				goto bad_opt;
			sp->cables = (unsigned)v;
		} else if (!strcmp(tok, "speed")) {
			if (mr_parse_u64(eq, 1, 1000, &v) < 0)
				goto bad_opt;
			sp->speed = (unsigned)v;
		} else if (!strcmp(tok, "nordma")) {
			if (host_num(eq, sp->n, &a) < 0)
				goto bad_opt;
			sp->nordma[a] = true;
		} else if (!strcmp(tok, "missing")) {
			char *dash = strchr(eq, '-');

			if (!dash)
				goto bad_opt;
			*dash = '\0';
			if (host_num(eq, sp->n, &a) < 0 || host_num(dash + 1, sp->n, &b) < 0 || a == b) {
				*dash = '-';
				goto bad_opt;
			}
			*dash = '-';
			sp->cabled[a * sp->n + b] = sp->cabled[b * sp->n + a] = false;
		} else {
			goto bad_opt;
		}
		continue;
bad_opt:
		if (eq)
			eq[-1] = '=';
		rc = mr_err_set(err, MESHRUN_E_USAGE,
				"topology '%s': bad option '%s' (cables=1..%d, missing=hA-hB, nordma=hA, speed=GBPS; hosts h1..h%u)",
				text, tok, MAX_CABLES, sp->n);
		goto out;
	}
out:
	free(copy);
	return rc;
}

static void spec_release(struct spec *sp)
{
	MR_FREE(sp->cabled);
	MR_FREE(sp->nordma);
}

static void uuid_of(char *buf, size_t len, unsigned host, unsigned recep)
{
	snprintf(buf, len, "%08X-%04X-4000-8000-%012X", host + 1, recep, (host + 1) * 4096 + recep);
}

static int gen_sp(struct mr_buf *b, const struct spec *sp, const struct ghost *hosts, unsigned i)
{
	const struct ghost *h = &hosts[i];
	char u[48], pu[48];
	unsigned nbus = h->nports + 1;
	int rc = 0;

	rc |= mr_buf_puts(b, "{\n \"SPThunderboltDataType\": [\n");
	/* macOS lists the buses last first; the idle one has no domain_uuid_key */
	for (unsigned bus = nbus; bus-- > 0;) {
		unsigned recep = bus + 1;
		bool idle = bus == h->nports;

		rc |= mr_buf_puts(b, "  {\n");
		if (!idle) {
			const struct gport *p = &h->ports[bus];

			uuid_of(pu, sizeof(pu), p->peer, p->peer_receptacle);
			rc |= mr_buf_printf(b,
				"   \"_items\": [\n"
				"    {\n"
				"     \"_name\": \"Mac Studio\",\n"
				"     \"device_id_key\": \"0xA\",\n"
				"     \"device_name_key\": \"Mac16,9\",\n"
				"     \"domain_uuid_key\": \"%s\",\n"
				"     \"services_title\": [\n"
				"      {\n"
				"       \"_name\": \"service_ip\",\n"
				"       \"protocol_id_key\": 1,\n"
				"       \"protocol_revision_key\": 1,\n"
				"       \"protocol_version_key\": 1\n"
				"      }\n"
				"     ],\n"
				"     \"vendor_id_key\": \"0x0A27\",\n"
				"     \"vendor_name_key\": \"Apple Inc.\"\n"
				"    }\n"
				"   ],\n", pu);
		}
		rc |= mr_buf_printf(b,
			"   \"_name\": \"thunderboltusb4_bus_%u\",\n"
			"   \"device_name_key\": \"Mac Studio\",\n", bus);
		if (!idle) {
			uuid_of(u, sizeof(u), i, recep);
			rc |= mr_buf_printf(b, "   \"domain_uuid_key\": \"%s\",\n", u);
		}
		rc |= mr_buf_printf(b,
			"   \"receptacle_1_tag\": {\n"
			"    \"current_speed_key\": \"%s%u Gb/s\",\n"
			"    \"link_status_key\": \"%s\",\n"
			"    \"receptacle_id_key\": \"%u\",\n"
			"    \"receptacle_status_key\": \"%s\"\n"
			"   },\n"
			"   \"route_string_key\": \"0\",\n"
			"   \"switch_uid_key\": \"0x%016X\",\n"
			"   \"vendor_name_key\": \"Apple Inc.\"\n"
			"  }%s\n",
			idle ? "Up to " : "", idle ? 120 : sp->speed, idle ? "0x100" : "0x2", recep,
			idle ? "receptacle_no_devices_connected" : "receptacle_connected",
			(i + 1) * 4096 + recep, bus ? "," : "");
	}
	rc |= mr_buf_puts(b, " ]\n}\n");
	return rc ? -1 : 0;
}

static int gen_hwports(struct mr_buf *b, unsigned i, unsigned nports)
{
	int rc = 0;

	rc |= mr_buf_printf(b, "Hardware Port: Ethernet\nDevice: en0\nEthernet Address: 02:00:%02x:%02x:00:00\n\n",
			    (i + 1) >> 8, (i + 1) & 0xff);
	rc |= mr_buf_puts(b, "Hardware Port: Thunderbolt Bridge\nDevice: bridge0\nEthernet Address: 36:00:00:00:00:00\n\n");
	rc |= mr_buf_printf(b, "Hardware Port: Wi-Fi\nDevice: en1\nEthernet Address: 02:01:%02x:%02x:00:00\n\n",
			    (i + 1) >> 8, (i + 1) & 0xff);
	for (unsigned r = 1; r <= nports + 1; r++)
		rc |= mr_buf_printf(b, "Hardware Port: Thunderbolt %u\nDevice: en%u\nEthernet Address: 36:%02x:%02x:%02x:00:00\n\n",
				    r, r + 1, (i + 1) >> 8, (i + 1) & 0xff, r);
	rc |= mr_buf_puts(b, "VLAN Configurations\n===================\n");
	return rc ? -1 : 0;
}

static int gen_ibv(struct mr_buf *b, unsigned i, unsigned nports, bool nordma)
{
	int rc = mr_buf_puts(b, "    device          \t   node GUID\n    ------          \t----------------\n");

	for (unsigned r = 1; !nordma && r <= nports + 1; r++)
		rc |= mr_buf_printf(b, "    rdma_en%-9u\t%016x\n", r + 1, (i + 1) * 4096 + r);
	return rc ? -1 : 0;
}

/* Does the cabling (as a graph) trivially have or lack a ring? 1 yes, 0 no, -1 unknown. */
static int ring_known(const struct spec *sp, bool mesh, bool *natural)
{
	unsigned n = sp->n, mindeg = n;
	bool ring_edges = true;

	*natural = false;
	if (mesh) {
		*natural = true;
		return 1; /* complete graphs (n >= 2) are rings in MLX's sense */
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned d = 0;

		for (unsigned j = 0; j < n; j++)
			d += sp->cabled[i * n + j];
		mindeg = MR_MIN(mindeg, d);
		if (!sp->cabled[i * n + (i + 1) % n])
			ring_edges = false;
	}
	*natural = ring_edges;
	if (ring_edges)
		return 1;
	if (mindeg < 2)
		return 0;
	if (n >= 3 && 2 * mindeg >= n)
		return 1; /* Dirac */
	if (sp->kind == KIND_RING)
		return 0; /* a ring minus an edge is a path */
	return -1;
}

static int gen_cluster_json(struct mr_buf *b, const struct spec *sp, const char *text,
			    const struct ghost *hosts)
{
	unsigned n = sp->n;
	bool mesh = true, rdma = sp->speed > 40, natural;
	int rk, rc = 0;
	const char *verdict, *backend;

	for (unsigned i = 0; i < n; i++) {
		rdma &= !sp->nordma[i];
		for (unsigned j = i + 1; j < n; j++)
			mesh &= sp->cabled[i * n + j];
	}
	rk = ring_known(sp, mesh, &natural);
	verdict = mesh ? "mesh" : rk == 1 ? "ring" : rk == 0 ? "neither" : NULL;
	if (mesh && rdma)
		backend = "jaccl";
	else if (rk == 1)
		backend = rdma ? "jaccl-ring" : "ring";
	else
		backend = NULL;

	rc |= mr_buf_printf(b, "{\n    \"name\": \"%s\",\n    \"generated\": \"%s\",\n    \"hosts\": [\n",
			    text, text);
	for (unsigned i = 0; i < n; i++)
		rc |= mr_buf_printf(b, "        {\"name\": \"h%u\", \"en0\": \"10.99.%u.%u\"}%s\n", i + 1,
				    (i + 1) / 250, (i + 1) % 250 + 1, i + 1 < n ? "," : "");
	rc |= mr_buf_puts(b, "    ],\n    \"expect\": {\n");
	if (verdict)
		rc |= mr_buf_printf(b, "        \"verdict\": \"%s\",\n", verdict);
	if (backend)
		rc |= mr_buf_printf(b, "        \"backend\": \"%s\",\n", backend);
	else if (rk == 0)
		rc |= mr_buf_puts(b, "        \"backend\": null,\n");
	if (natural) {
		/* h1-h2-...-hN-h1 all cabled: MLX's DFS from h1 in index order
		 * finds exactly h1, h2, ..., hN first */
		rc |= mr_buf_puts(b, "        \"ring\": [");
		for (unsigned i = 0; i < n; i++)
			rc |= mr_buf_printf(b, "%s\"h%u\"", i ? ", " : "", i + 1);
		rc |= mr_buf_printf(b, "],\n        \"ring_cables\": %u,\n", sp->cables);
	}
	rc |= mr_buf_puts(b, "        \"connectivity\": [\n");
	for (unsigned i = 0; i < n; i++) {
		rc |= mr_buf_puts(b, "            [");
		for (unsigned j = 0; j < n; j++)
			rc |= mr_buf_printf(b, "%s%u", j ? ", " : "",
					    sp->cabled[i * n + j] ? sp->cables : 0);
		rc |= mr_buf_printf(b, "]%s\n", i + 1 < n ? "," : "");
	}
	rc |= mr_buf_puts(b, "        ],\n        \"cables\": [\n");
	{
		bool first = true;

		for (unsigned i = 0; i < n; i++)
			for (unsigned p = 0; p < hosts[i].nports; p++) {
				const struct gport *gp = &hosts[i].ports[p];

				if (gp->peer < i)
					continue;
				rc |= mr_buf_printf(b, "%s            [\"h%u\", \"en%u\", \"h%u\", \"en%u\"]",
						    first ? "" : ",\n", i + 1, gp->receptacle + 1,
						    gp->peer + 1, gp->peer_receptacle + 1);
				first = false;
			}
		rc |= mr_buf_puts(b, "\n        ]\n    }\n}\n");
	}
	return rc ? -1 : 0;
}

int mr_topo_gen(const char *text, struct mr_topo_genset **out, struct meshrun_err *err)
{
	struct spec sp;
	struct ghost *hosts = NULL;
	struct mr_topo_genset *g = NULL;
	struct mr_buf b = MR_BUF_INIT;
	unsigned n;
	int rc;

	*out = NULL;
	rc = parse_spec(text, &sp, err);
	if (rc < 0)
		goto out;
	n = sp.n;
	hosts = calloc(n, sizeof(*hosts));
	g = calloc(1, sizeof(*g));
	if (!hosts || !g)
		goto out_nomem;
	for (unsigned i = 0; i < n; i++) {
		unsigned deg = 0;

		for (unsigned j = 0; j < n; j++)
			deg += sp.cabled[i * n + j];
		hosts[i].ports = calloc((size_t)deg * sp.cables + 1, sizeof(*hosts[i].ports));
		if (!hosts[i].ports)
			goto out_nomem;
	}
	/* pairs in order: each host numbers its receptacles in peer order */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++) {
			if (!sp.cabled[i * n + j])
				continue;
			for (unsigned k = 0; k < sp.cables; k++) {
				struct gport *a = &hosts[i].ports[hosts[i].nports++];
				struct gport *c = &hosts[j].ports[hosts[j].nports++];

				a->receptacle = hosts[i].nports;
				c->receptacle = hosts[j].nports;
				a->peer = j;
				a->peer_receptacle = c->receptacle;
				c->peer = i;
				c->peer_receptacle = a->receptacle;
			}
		}
	g->spec = strdup(text);
	g->hosts = calloc(n, sizeof(*g->hosts));
	if (!g->spec || !g->hosts)
		goto out_nomem;
	for (unsigned i = 0; i < n; i++) {
		struct mr_topo_gen_host *gh = &g->hosts[g->nhosts++];

		if (asprintf(&gh->name, "h%u", i + 1) < 0) {
			gh->name = NULL;
			goto out_nomem;
		}
		if (asprintf(&gh->en0, "10.99.%u.%u", (i + 1) / 250, (i + 1) % 250 + 1) < 0) {
			gh->en0 = NULL;
			goto out_nomem;
		}
		mr_buf_reset(&b);
		if (gen_sp(&b, &sp, hosts, i) < 0 || !(gh->sp_json = mr_buf_detach(&b, NULL)))
			goto out_nomem;
		if (gen_hwports(&b, i, hosts[i].nports) < 0 || !(gh->hwports = mr_buf_detach(&b, NULL)))
			goto out_nomem;
		if (gen_ibv(&b, i, hosts[i].nports, sp.nordma[i]) < 0 ||
		    !(gh->ibv = mr_buf_detach(&b, NULL)))
			goto out_nomem;
	}
	if (gen_cluster_json(&b, &sp, text, hosts) < 0 || !(g->cluster_json = mr_buf_detach(&b, NULL)))
		goto out_nomem;
	*out = g;
	g = NULL;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "topology '%s': out of memory", text);
out:
	if (hosts)
		for (unsigned i = 0; i < sp.n; i++)
			free(hosts[i].ports);
	free(hosts);
	mr_buf_release(&b);
	mr_topo_genset_free(g);
	spec_release(&sp);
	return rc;
}

static int mkdir_p(const char *dir, struct meshrun_err *err)
{
	char path[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path))
		return mr_err_set(err, MESHRUN_E_INVAL, "bad folder name '%s'", dir);
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return mr_err_sys(err, "mkdir '%s'", path);
		path[i] = i < n ? '/' : '\0';
	}
	return 0;
}

int mr_topo_gen_write(const struct mr_topo_genset *g, const char *dir, struct meshrun_err *err)
{
	char path[4096];
	int rc;

	rc = mkdir_p(dir, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < g->nhosts; i++) {
		const struct mr_topo_gen_host *h = &g->hosts[i];
		const struct { const char *file; const char *text; } parts[] = {
			{ "system_profiler.json", h->sp_json },
			{ "networksetup.txt", h->hwports },
			{ "ibv_devices.txt", h->ibv },
		};

		snprintf(path, sizeof(path), "%s/%s", dir, h->name);
		rc = mkdir_p(path, err);
		if (rc < 0)
			return rc;
		for (size_t k = 0; k < ARRAY_SIZE(parts); k++) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, h->name, parts[k].file);
			rc = mr_write_file(path, parts[k].text, strlen(parts[k].text), 0644, err);
			if (rc < 0)
				return rc;
		}
	}
	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	return mr_write_file(path, g->cluster_json, strlen(g->cluster_json), 0644, err);
}
