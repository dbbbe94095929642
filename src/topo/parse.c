/*
 * parse.c - one host's command output -> struct mr_topo_host.
 *
 * Mirrors extract_connectivity() and parse_hardware_ports() of MLX's
 * python/mlx/_distributed_utils/config.py, with path-aware errors and strict
 * checks on every name that may later reach a shell.
 */
#include "common/compat.h"

#include <ctype.h>

#include "common/err.h"
#include "common/json.h"
#include "common/num.h"
#include "common/shquote.h"
#include "topo/topo.h"
#include "topo/topo_int.h"

bool mr_topo_ifname_ok(const char *s)
{
	/* mr_is_ifname() plus: no leading '-' or '.', so a name can never be read
	 * as an option of ifconfig/route. */
	return mr_is_ifname(s) && isalnum((unsigned char)s[0]);
}

char *mr_topo_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void trim_right(char *s)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

void mr_topo_hwports_release(struct mr_topo_hwports *hp)
{
	for (size_t i = 0; i < hp->nr; i++) {
		free(hp->v[i].port);
		free(hp->v[i].device);
	}
	MR_FREE(hp->v);
	hp->nr = 0;
}

const char *mr_topo_hwports_find(const struct mr_topo_hwports *hp, const char *port)
{
	/* MLX fills a dict, so a repeated port name means the last one wins. */
	for (size_t i = hp->nr; i-- > 0;)
		if (!strcmp(hp->v[i].port, port))
			return hp->v[i].device;
	return NULL;
}

int mr_topo_parse_hwports(const char *host, const char *text, struct mr_topo_hwports *out,
			  struct meshrun_err *err)
{
	struct mr_topo_hwports hp = { NULL, 0 };
	char *copy = strdup(text ? text : "");
	char *save = NULL, *line, *port = NULL;
	int rc = 0;

	if (!copy)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: networksetup: out of memory", host);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		trim_right(line);
		if (!strncmp(line, "Hardware Port:", 14)) {
			const char *v = line + 14;

			while (*v == ' ')
				v++;
			free(port);
			port = strdup(v);
			if (!port)
				goto out_nomem;
		} else if (!strncmp(line, "Device:", 7) && port) {
			const char *v = line + 7;
			struct mr_topo_hwport *nv;

			while (*v == ' ')
				v++;
			if (!mr_topo_ifname_ok(v)) {
				rc = mr_err_set(err, MESHRUN_E_PARSE,
						"%s: networksetup: '%s': invalid interface name '%s'",
						host, port, v);
				goto out;
			}
			nv = realloc(hp.v, (hp.nr + 1) * sizeof(*nv));
			if (!nv)
				goto out_nomem;
			hp.v = nv;
			hp.v[hp.nr].port = port;
			port = NULL;
			hp.v[hp.nr].device = strdup(v);
			if (!hp.v[hp.nr].device) {
				free(hp.v[hp.nr].port);
				goto out_nomem;
			}
			hp.nr++;
		}
	}
	*out = hp;
	hp.v = NULL;
	hp.nr = 0;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: networksetup: out of memory", host);
out:
	free(port);
	mr_topo_hwports_release(&hp);
	free(copy);
	return rc;
}

int mr_topo_parse_ibv_devices(const char *host, const char *text, struct mr_strvec *out,
			      struct meshrun_err *err)
{
	/* MLX: stdout.strip().split(), keep the words starting with "rdma_". */
	const char *p = text ? text : "";

	while (*p) {
		char word[256];
		size_t n = 0;

		while (*p && isspace((unsigned char)*p))
			p++;
		while (p[n] && !isspace((unsigned char)p[n]))
			n++;
		if (!n)
			break;
		if (n >= 5 && !strncmp(p, "rdma_", 5)) {
			if (n >= sizeof(word) || (memcpy(word, p, n), word[n] = '\0',
						 !mr_topo_ifname_ok(word + 5) || n > 32)) {
				return mr_err_set(err, MESHRUN_E_PARSE,
						  "%s: ibv_devices: invalid device name '%.*s'", host,
						  (int)MR_MIN(n, (size_t)64), p);
			}
			if (mr_strvec_push(out, word) < 0)
				return mr_err_set(err, MESHRUN_E_NOMEM, "%s: ibv_devices: out of memory",
						  host);
		}
		p += n;
	}
	return 0;
}

unsigned mr_topo_parse_speed(const char *s)
{
	/* "80 Gb/s", "Up to 120 Gb/s", "40 Gb/s" -> the number before " Gb/s". */
	const char *g = s ? strstr(s, " Gb/s") : NULL;
	const char *b;
	unsigned v = 0;

	if (!g)
		return 0;
	b = g;
	while (b > s && isdigit((unsigned char)b[-1]))
		b--;
	if (b == g || g - b > 5)
		return 0;
	for (; b < g; b++)
		v = v * 10 + (unsigned)(*b - '0');
	return v;
}

/* The ids a bus carries: 1 to max characters of set; an error shows `show` bytes. */
struct bus_id {
	const char *key, *what, *set;
	size_t max;
	int show;
};

static const struct bus_id uuid_id = {
	"domain_uuid_key", "UUID", "0123456789abcdefABCDEF-", 64, 64
};
static const struct bus_id receptacle_id = {
	"receptacle_id_key", "receptacle id", "0123456789", 3, 32
};

void mr_topo_port_release(struct mr_topo_port *p)
{
	MR_FREE(p->receptacle);
	MR_FREE(p->ifname);
	MR_FREE(p->uuid);
	MR_FREE(p->peer_uuid);
	MR_FREE(p->peer_label);
	MR_FREE(p->speed);
}

void mr_topo_host_release(struct mr_topo_host *h)
{
	for (size_t i = 0; i < h->nports; i++)
		mr_topo_port_release(&h->ports[i]);
	MR_FREE(h->ports);
	h->nports = 0;
	MR_FREE(h->name);
	MR_FREE(h->model);
	mr_strvec_release(&h->rdma_devs);
	h->ibv_known = false;
}

/* v, the member id->key of the object at path, is a valid id; *out is its text. */
static int want_id(const cJSON *v, const struct bus_id *id, const char *name,
		   struct mr_json_path *path, const char **out, struct meshrun_err *err)
{
	size_t n;

	mr_json_path_key(path, id->key);
	if (mr_json_want_string(v, name, path, out, err) < 0)
		return MESHRUN_E_PARSE;
	n = strlen(*out);
	if (n == 0 || n > id->max || strspn(*out, id->set) != n)
		return mr_json_err(err, name, path, "invalid %s '%.*s'", id->what, id->show, *out);
	mr_json_path_pop(path);
	return 0;
}

/* The first domain_uuid_key among items (an _items array); NULL when none.
 * A non-string domain_uuid_key is an error. */
static int find_peer(const cJSON *items, const char *name, struct mr_json_path *path,
		     const cJSON **peer, struct meshrun_err *err)
{
	const cJSON *it;
	size_t k = 0;

	*peer = NULL;
	if (!items)
		return 0;
	if (mr_json_want_array(items, name, path, err) < 0)
		return MESHRUN_E_PARSE;
	cJSON_ArrayForEach(it, items) {
		const cJSON *u = mr_json_member(it, "domain_uuid_key");
		const char *s;

		if (u) {
			mr_json_path_index(path, k);
			if (want_id(u, &uuid_id, name, path, &s, err) < 0)
				return MESHRUN_E_PARSE;
			mr_json_path_pop(path);
			*peer = it;
			return 0;
		}
		k++;
	}
	return 0;
}

static int sort_ports_cmp(const void *a, const void *b)
{
	const struct mr_topo_port *x = a, *y = b;

	return strcmp(x->ifname, y->ifname);
}

/* A Mac behind a hub or dock: its peer one level deeper (beyond MLX); 1 found. */
static int find_peer_via_hub(const cJSON *items, const char *name, struct mr_json_path *path,
			     const cJSON **peer, struct meshrun_err *err)
{
	const cJSON *it;
	size_t k = 0;

	cJSON_ArrayForEach(it, items) {
		const cJSON *sub = mr_json_member(it, "_items");

		if (sub) {
			int rc;

			mr_json_path_index(path, k);
			mr_json_path_key(path, "_items");
			rc = find_peer(sub, name, path, peer, err);
			if (rc < 0)
				return rc;
			mr_json_path_pop(path);
			mr_json_path_pop(path);
			if (*peer)
				return 1;
		}
		k++;
	}
	return 0;
}

static int parse_bus(const char *host, const char *name, const cJSON *bus, struct mr_json_path *path,
		     const struct mr_topo_hwports *hp, struct mr_topo_host *h, bool *added,
		     struct meshrun_err *err)
{
	const cJSON *u = mr_json_member(bus, "domain_uuid_key");
	const cJSON *tag, *rid, *spd, *dn, *peer = NULL, *items;
	struct mr_topo_port port = { 0 };
	const char *s, *recep, *dev;
	char hwname[32];
	int rc;

	*added = false;
	if (mr_json_want_object(bus, name, path, err) < 0)
		return MESHRUN_E_PARSE;
	if (!u)
		return 0; /* idle bus: MLX skips it */
	if (want_id(u, &uuid_id, name, path, &s, err) < 0)
		return MESHRUN_E_PARSE;

	tag = mr_json_member(bus, "receptacle_1_tag");
	if (!tag)
		return mr_json_missing(err, name, path, "receptacle_1_tag");
	mr_json_path_key(path, "receptacle_1_tag");
	if (mr_json_want_object(tag, name, path, err) < 0)
		return MESHRUN_E_PARSE;
	rid = mr_json_member(tag, "receptacle_id_key");
	if (!rid)
		return mr_json_missing(err, name, path, "receptacle_id_key");
	if (want_id(rid, &receptacle_id, name, path, &recep, err) < 0)
		return MESHRUN_E_PARSE;
	spd = mr_json_member(tag, "current_speed_key");
	if (spd) {
		mr_json_path_key(path, "current_speed_key");
		if (mr_json_want_string(spd, name, path, &s, err) < 0)
			return MESHRUN_E_PARSE;
		mr_json_path_pop(path);
		port.speed = strdup(s);
		if (!port.speed)
			goto out_nomem;
		port.speed_gbps = mr_topo_parse_speed(s);
	}
	mr_json_path_pop(path);

	dn = mr_json_member(bus, "device_name_key");
	if (dn && !h->model && cJSON_IsString(dn) && (h->model = strdup(dn->valuestring)) == NULL)
		goto out_nomem;

	items = mr_json_member(bus, "_items");
	mr_json_path_key(path, "_items");
	rc = find_peer(items, name, path, &peer, err);
	if (rc < 0)
		goto out;
	if (!peer && items) {
		rc = find_peer_via_hub(items, name, path, &peer, err);
		if (rc < 0)
			goto out;
		port.peer_via_hub = rc > 0;
	}
	mr_json_path_pop(path);

	snprintf(hwname, sizeof(hwname), "Thunderbolt %s", recep);
	dev = mr_topo_hwports_find(hp, hwname);
	if (!dev) {
		rc = mr_err_set(err, MESHRUN_E_PARSE,
				"%s: networksetup: no '%s' port for receptacle %s", host, hwname, recep);
		goto out;
	}
	port.receptacle = strdup(recep);
	port.ifname = strdup(dev);
	port.uuid = strdup(u->valuestring);
	if (!port.receptacle || !port.ifname || !port.uuid)
		goto out_nomem;
	if (peer) {
		const cJSON *pn = mr_json_member(peer, "_name");

		port.peer_uuid = strdup(mr_json_member(peer, "domain_uuid_key")->valuestring);
		if (!port.peer_uuid)
			goto out_nomem;
		if (cJSON_IsString(pn)) {
			port.peer_label = strndup(pn->valuestring, 64);
			if (!port.peer_label)
				goto out_nomem;
		}
	}
	for (size_t i = 0; i < h->nports; i++) {
		if (!strcmp(h->ports[i].uuid, port.uuid)) {
			rc = mr_json_err(err, name, path, "domain UUID '%s' appears on two buses",
					 port.uuid);
			goto out;
		}
		if (!strcmp(h->ports[i].ifname, port.ifname)) {
			rc = mr_err_set(err, MESHRUN_E_PARSE,
					"%s: networksetup: receptacles %s and %s both map to '%s'",
					host, h->ports[i].receptacle, port.receptacle, port.ifname);
			goto out;
		}
	}
	{
		struct mr_topo_port *nv = realloc(h->ports, (h->nports + 1) * sizeof(*nv));

		if (!nv)
			goto out_nomem;
		h->ports = nv;
		h->ports[h->nports++] = port;
		*added = true;
	}
	return 0;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", host);
out:
	mr_topo_port_release(&port);
	return rc;
}

int mr_topo_parse_host(const char *name, const char *sp_json, size_t sp_len, const char *hwports,
		       const char *ibv_devices, struct mr_topo_host *out, struct meshrun_err *err)
{
	struct mr_topo_host h = { 0 };
	struct mr_topo_hwports hp = { NULL, 0 };
	struct mr_json_path path = MR_JSON_PATH_INIT;
	char jname[300];
	cJSON *root = NULL;
	const cJSON *buses, *bus;
	size_t i = 0;
	int rc;

	if (!name || !mr_is_hostname(name))
		return mr_err_set(err, MESHRUN_E_INVAL, "invalid host name '%s'", name ? name : "");
	snprintf(jname, sizeof(jname), "%s: system_profiler", name);
	h.name = strdup(name);
	if (!h.name)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
	rc = mr_topo_parse_hwports(name, hwports, &hp, err);
	if (rc < 0)
		goto out;
	if (ibv_devices) {
		h.ibv_known = true;
		rc = mr_topo_parse_ibv_devices(name, ibv_devices, &h.rdma_devs, err);
		if (rc < 0)
			goto out;
	}
	rc = mr_json_parse(sp_json ? sp_json : "", sp_json ? sp_len : 0, jname, &root, err);
	if (rc < 0)
		goto out;
	rc = MESHRUN_E_PARSE;
	if (mr_json_want_object(root, jname, &path, err) < 0)
		goto out;
	buses = mr_json_member(root, "SPThunderboltDataType");
	if (!buses) {
		mr_json_missing(err, jname, &path, "SPThunderboltDataType");
		goto out;
	}
	mr_json_path_key(&path, "SPThunderboltDataType");
	if (mr_json_want_array(buses, jname, &path, err) < 0)
		goto out;
	cJSON_ArrayForEach(bus, buses) {
		bool added;

		mr_json_path_index(&path, i++);
		rc = parse_bus(name, jname, bus, &path, &hp, &h, &added, err);
		if (rc < 0)
			goto out;
		mr_json_path_pop(&path);
	}
	if (h.nports > 1)
		qsort(h.ports, h.nports, sizeof(*h.ports), sort_ports_cmp);
	*out = h;
	memset(&h, 0, sizeof(h));
	rc = 0;
out:
	cJSON_Delete(root);
	mr_topo_hwports_release(&hp);
	mr_topo_host_release(&h);
	return rc;
}
