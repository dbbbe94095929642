/*
 * live.c - see live.h: system_profiler as the cables are now, and the files
 * the shims read it from.
 */
#include "common/compat.h"
#include "sim/live.h"

#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "topo/topo.h"

const char mr_sim_ibv_none[] =
	"    device          \t   node GUID\n"
	"    ------          \t----------------\n";

void mr_sim_live_plugged(const struct mr_sim_cluster *c, const struct mr_strvec *faults,
			 bool *plugged)
{
	for (size_t i = 0; i < c->ncables; i++)
		plugged[i] = true;
	for (size_t f = 0; faults && f < faults->nr; f++) {
		const char *l = faults->v[f], *port, *colon;
		size_t plen;
		char host[72], ifn[16];
		ssize_t h, k;

		if (strncmp(l, "unplug ", 7))
			continue;
		port = l + 7;
		plen = strcspn(port, " ");
		colon = memchr(port, ':', plen);
		if (!colon || (size_t)(colon - port) >= sizeof(host) ||
		    plen - (size_t)(colon - port) - 1 >= sizeof(ifn))
			continue;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - port), port);
		snprintf(ifn, sizeof(ifn), "%.*s", (int)(plen - (size_t)(colon - port) - 1), colon + 1);
		h = mr_sim_cluster_find_host(c, host);
		k = h < 0 ? -1 : mr_sim_cluster_find_cable(c, (size_t)h, ifn, NULL);
		if (k >= 0)
			plugged[k] = false;
	}
}

/* ------------------------------------------------------------ the buses */

/* One Thunderbolt receptacle of a host: its bus in the parsed fixture. */
struct bus {
	cJSON *obj;          /* the element of SPThunderboltDataType (in the host's tree) */
	char ifname[16];     /* networksetup device of "Thunderbolt <receptacle>" */
	const char *uuid;    /* its domain_uuid_key, or NULL (then synth is used) */
	char synth[48];      /* a UUID for a bus recorded without one */
	char speed[32];      /* receptacle_1_tag.current_speed_key as recorded, or "" (a
			      * copy: the trees are edited host by host) */
	ssize_t fx_host;     /* the fixture's cable here: peer host, or -1 */
	char fx_if[16];      /* and the peer's interface */
};

struct host {
	cJSON *root;
	struct bus *bus;
	size_t nbus;
	const char *label;      /* device_name_key of its buses ("Mac Studio"), or NULL */
	char idle_speed[32];    /* "Up to 120 Gb/s" of an empty receptacle, or "" */
	cJSON *seen_as;         /* a copy of an _items entry (of any host) naming one of its
				 * buses; a copy, as the trees are edited host by host */
};

static const char *str_member(const cJSON *obj, const char *key)
{
	const cJSON *v = mr_json_member(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The buses of host i with a receptacle networksetup names (others are left alone). */
static int find_buses(const struct mr_sim_cluster *c, size_t i, struct host *h,
		      struct meshrun_err *err)
{
	const struct mr_sim_host *sh = &c->hosts[i];
	struct mr_topo_hwports hp = { 0 };
	char *file = xasprintf("%s/system_profiler.json", sh->name);
	const cJSON *arr;
	cJSON *b;
	int rc;

	if (!sh->sp_json || !sh->hwports) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "%s: no fixture text", sh->name);
		goto out;
	}
	rc = mr_json_parse(sh->sp_json, sh->sp_len, file, &h->root, err);
	if (rc == 0)
		rc = mr_topo_parse_hwports(sh->name, sh->hwports, &hp, err);
	if (rc < 0)
		goto out;
	arr = mr_json_member(h->root, "SPThunderboltDataType");
	if (!cJSON_IsArray(arr)) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: SPThunderboltDataType: expected an array",
				file);
		goto out;
	}
	h->bus = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*h->bus));
	cJSON_ArrayForEach(b, arr) {
		const cJSON *tag = mr_json_member(b, "receptacle_1_tag");
		const char *rid = str_member(tag, "receptacle_id_key"), *dev, *speed;
		char hwname[32];
		struct bus *bu;

		if (!h->label)
			h->label = str_member(b, "device_name_key");
		speed = str_member(tag, "current_speed_key");
		if (speed && !strncmp(speed, "Up to ", 6) && !h->idle_speed[0])
			snprintf(h->idle_speed, sizeof(h->idle_speed), "%s", speed);
		if (!rid || strlen(rid) > 3)
			continue;
		snprintf(hwname, sizeof(hwname), "Thunderbolt %s", rid);
		dev = mr_topo_hwports_find(&hp, hwname);
		if (!dev || !mr_is_ifname(dev))
			continue;
		bu = &h->bus[h->nbus++];
		bu->obj = b;
		snprintf(bu->ifname, sizeof(bu->ifname), "%s", dev);
		bu->uuid = str_member(b, "domain_uuid_key");
		/* not a UUID macOS would print: a digit string no fixture uses */
		snprintf(bu->synth, sizeof(bu->synth), "%08zX-5E00-4000-8000-%012zX", i + 1,
			 (i + 1) * 4096 + strtoul(rid, NULL, 10));
		snprintf(bu->speed, sizeof(bu->speed), "%s", speed ? speed : "");
		bu->fx_host = -1;
	}
out:
	mr_topo_hwports_release(&hp);
	free(file);
	return rc;
}

static struct bus *bus_of(struct host *h, const char *ifname)
{
	for (size_t b = 0; b < h->nbus; b++)
		if (!strcmp(h->bus[b].ifname, ifname))
			return &h->bus[b];
	return NULL;
}

static const char *bus_uuid(const struct bus *b)
{
	return b->uuid ? b->uuid : b->synth;
}

/* The cables the fixture itself shows (src/topo: both sides name each other). */
static int fixture_cables(const struct mr_sim_cluster *c, struct host *hs, struct meshrun_err *err)
{
	struct mr_topo_cluster *tc = mr_topo_cluster_new();
	int rc = 0;

	if (!tc)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	for (size_t i = 0; i < c->nhosts && rc == 0; i++)
		rc = mr_topo_cluster_add_host(tc, c->hosts[i].name, c->hosts[i].sp_json,
					      c->hosts[i].sp_len, c->hosts[i].hwports, NULL, err);
	if (rc == 0)
		rc = mr_topo_cluster_finish(tc, err);
	for (size_t k = 0; rc == 0 && k < tc->ncables; k++) {
		const struct mr_topo_cable *cb = &tc->cables[k];
		for (int s = 0; s < 2; s++) {
			size_t h = cb->host[s], p = cb->host[!s];
			struct bus *b = bus_of(&hs[h], tc->hosts[h].ports[cb->port[s]].ifname);
			if (b) {
				b->fx_host = (ssize_t)p;
				snprintf(b->fx_if, sizeof(b->fx_if), "%s",
					 tc->hosts[p].ports[cb->port[!s]].ifname);
			}
		}
	}
	mr_topo_cluster_free(tc);
	return rc;
}

/* For each host, an _items entry (of any host) that names one of its buses. */
static void find_seen_as(const struct mr_sim_cluster *c, struct host *hs)
{
	for (size_t i = 0; i < c->nhosts; i++)
		for (size_t b = 0; b < hs[i].nbus; b++) {
			const cJSON *it;
			cJSON_ArrayForEach(it, mr_json_member(hs[i].bus[b].obj, "_items")) {
				const char *u = str_member(it, "domain_uuid_key");
				for (size_t p = 0; u && p < c->nhosts; p++)
					for (size_t q = 0; q < hs[p].nbus && !hs[p].seen_as; q++)
						if (hs[p].bus[q].uuid && !strcmp(hs[p].bus[q].uuid, u))
							hs[p].seen_as = cJSON_Duplicate(it, true);
			}
		}
}

/* ------------------------------------------------------- editing a bus */

/* Set obj[key] = item, in place when present, else where sorted order puts it
 * (system_profiler prints keys sorted). Takes item. */
static int obj_put(cJSON *obj, const char *key, cJSON *item)
{
	cJSON *ch;

	if (!item)
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(obj, key)) {
		if (cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item))
			return 0;
		cJSON_Delete(item);
		return -1;
	}
	if (!cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		return -1;
	}
	/* cJSON appends: move the larger keys behind it (cJSON_InsertItemInArray
	 * refuses object members in some 1.7 releases) */
	for (ch = obj->child; ch != item && ch->string && strcmp(ch->string, key) < 0; ch = ch->next)
		;
	while (ch != item) {
		cJSON *next = ch->next;
		cJSON_DetachItemViaPointer(obj, ch);
		cJSON_AddItemToArray(obj, ch);
		ch = next;
	}
	return 0;
}

static int put_str(cJSON *obj, const char *key, const char *s)
{
	return obj_put(obj, key, cJSON_CreateString(s));
}

/* The receptacle as macOS shows it with nothing plugged in. */
static int make_empty(const struct host *h, struct bus *b)
{
	cJSON *tag = cJSON_GetObjectItemCaseSensitive(b->obj, "receptacle_1_tag");

	cJSON_DeleteItemFromObjectCaseSensitive(b->obj, "_items");
	cJSON_DeleteItemFromObjectCaseSensitive(tag, "micro_version_key");
	if (put_str(tag, "current_speed_key", h->idle_speed[0] ? h->idle_speed : "Up to 120 Gb/s") < 0 ||
	    put_str(tag, "link_status_key", "0x100") < 0 ||
	    put_str(tag, "receptacle_status_key", "receptacle_no_devices_connected") < 0)
		return -1;
	return 0;
}

/* The Mac at the far end, as it appears in the _items of a receptacle. */
static cJSON *peer_item(const struct host *peer, const char *peer_uuid)
{
	cJSON *it;

	if (peer->seen_as) {
		/* how the fixture shows that Mac elsewhere: its model, its services */
		it = cJSON_Duplicate(peer->seen_as, true);
		if (it && put_str(it, "domain_uuid_key", peer_uuid) < 0) {
			cJSON_Delete(it);
			it = NULL;
		}
		return it;
	}
	it = cJSON_CreateObject();
	if (!it || put_str(it, "_name", peer->label ? peer->label : "Mac") < 0 ||
	    put_str(it, "device_id_key", "0xA") < 0 || put_str(it, "domain_uuid_key", peer_uuid) < 0 ||
	    put_str(it, "vendor_id_key", "0x0A27") < 0 ||
	    put_str(it, "vendor_name_key", "Apple Inc.") < 0) {
		cJSON_Delete(it);
		return NULL;
	}
	return it;
}

static bool connected_speed(const char *s)
{
	return s[0] && strncmp(s, "Up to ", 6) != 0;
}

/* A cable from b to peer bus pb of host peer. */
static int make_link(struct bus *b, const struct host *peer, const struct bus *pb)
{
	cJSON *tag = cJSON_GetObjectItemCaseSensitive(b->obj, "receptacle_1_tag");
	cJSON *items = cJSON_CreateArray(), *it = peer_item(peer, bus_uuid(pb));
	const char *speed = connected_speed(b->speed) ? b->speed
			  : connected_speed(pb->speed) ? pb->speed : "80 Gb/s";

	if (!items || !it) {
		cJSON_Delete(items);
		cJSON_Delete(it);
		return -1;
	}
	cJSON_AddItemToArray(items, it);
	if (obj_put(b->obj, "_items", items) < 0)
		return -1;
	if (!b->uuid && put_str(b->obj, "domain_uuid_key", b->synth) < 0)
		return -1;
	if (put_str(tag, "current_speed_key", speed) < 0 || put_str(tag, "link_status_key", "0x2") < 0 ||
	    put_str(tag, "receptacle_status_key", "receptacle_connected") < 0)
		return -1;
	return 0;
}

/* --------------------------------------------------------------- output */

static int indent(struct mr_buf *b, int depth)
{
	for (int i = 0; i < depth; i++)
		if (mr_buf_putc(b, ' ') < 0)
			return -1;
	return 0;
}

/* system_profiler's layout: one space per level, "key": value, no trailing spaces. */
static int emit(struct mr_buf *b, const cJSON *it, int depth)
{
	if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
		bool obj = cJSON_IsObject(it);
		int rc = 0;

		if (!it->child)
			return mr_buf_puts(b, obj ? "{}" : "[]");
		rc |= mr_buf_puts(b, obj ? "{\n" : "[\n");
		for (const cJSON *ch = it->child; ch && !rc; ch = ch->next) {
			rc |= indent(b, depth + 1);
			if (obj)
				rc |= mr_json_quote(b, ch->string ? ch->string : "") |
				      mr_buf_puts(b, ": ");
			rc |= emit(b, ch, depth + 1);
			rc |= mr_buf_puts(b, ch->next ? ",\n" : "\n");
		}
		rc |= indent(b, depth);
		rc |= mr_buf_putc(b, obj ? '}' : ']');
		return rc ? -1 : 0;
	}
	if (cJSON_IsString(it))
		return mr_json_quote(b, it->valuestring);
	if (cJSON_IsNumber(it)) {
		double d = it->valuedouble;
		if (d > -9007199254740992.0 && d < 9007199254740992.0 && d == (double)(long long)d)
			return mr_buf_printf(b, "%lld", (long long)d);
		return mr_buf_printf(b, "%.17g", d);
	}
	if (cJSON_IsBool(it))
		return mr_buf_puts(b, cJSON_IsTrue(it) ? "true" : "false");
	if (cJSON_IsRaw(it))
		return mr_buf_puts(b, it->valuestring);
	return mr_buf_puts(b, "null");
}

/* ------------------------------------------------------------- render */

int mr_sim_live_render(const struct mr_sim_cluster *c, const bool *plugged, struct mr_buf *out,
		       bool *changed, struct meshrun_err *err)
{
	struct host *hs = xcalloc(c->nhosts ? c->nhosts : 1, sizeof(*hs));
	int rc = 0;

	for (size_t i = 0; i < c->nhosts && rc == 0; i++)
		rc = find_buses(c, i, &hs[i], err);
	if (rc == 0)
		rc = fixture_cables(c, hs, err);
	if (rc == 0)
		find_seen_as(c, hs);
	for (size_t i = 0; i < c->nhosts && rc == 0; i++) {
		struct host *h = &hs[i];
		bool edited = false;

		for (size_t b = 0; b < h->nbus && rc == 0; b++) {
			struct bus *bu = &h->bus[b];
			int side = 0;
			ssize_t k = mr_sim_cluster_find_cable(c, i, bu->ifname, &side);
			size_t ph = 0;
			const char *pif = NULL;
			struct bus *pb = NULL;

			if (k >= 0 && (!plugged || plugged[k])) {
				const struct mr_sim_cable *cb = &c->cables[k];
				ph = side ? cb->a : cb->b;
				pif = side ? cb->a_if : cb->b_if;
				pb = bus_of(&hs[ph], pif);
			}
			if (pb && bu->fx_host == (ssize_t)ph && !strcmp(bu->fx_if, pif))
				continue; /* the recorded cable */
			if (pb) {
				rc = make_link(bu, &hs[ph], pb);
				edited = true;
			} else if (bu->fx_host >= 0) {
				rc = make_empty(h, bu);
				edited = true;
			}
			if (rc < 0)
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: system_profiler: out of memory",
						c->hosts[i].name);
		}
		if (rc < 0)
			break;
		if (changed)
			changed[i] = edited;
		if (!edited)
			rc = mr_buf_append(&out[i], c->hosts[i].sp_json, c->hosts[i].sp_len);
		else if (emit(&out[i], h->root, 0) < 0 || mr_buf_putc(&out[i], '\n') < 0)
			rc = -1;
		if (rc < 0)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: system_profiler: out of memory",
					c->hosts[i].name);
	}
	for (size_t i = 0; i < c->nhosts; i++) {
		cJSON_Delete(hs[i].root);
		cJSON_Delete(hs[i].seen_as);
		free(hs[i].bus);
	}
	free(hs);
	return rc;
}

int mr_sim_live_ports(const struct mr_sim_host *h, struct mr_strvec *out, struct meshrun_err *err)
{
	struct mr_sim_cluster one = { 0 };
	struct host hh = { 0 };
	int rc;

	one.hosts = (struct mr_sim_host *)h;
	one.nhosts = 1;
	rc = find_buses(&one, 0, &hh, err);
	for (size_t b = 0; rc == 0 && b < hh.nbus; b++)
		mr_strvec_push(out, hh.bus[b].ifname);
	cJSON_Delete(hh.root);
	free(hh.bus);
	return rc;
}

/* -------------------------------------------------------------- files */

int mr_sim_live_refresh(const char *state_dir, const struct mr_sim_state *st,
			struct meshrun_err *err)
{
	const struct mr_sim_cluster *sc = st->cluster;
	struct mr_sim_cluster c = *sc;
	struct mr_strvec faults = MR_STRVEC_INIT;
	size_t n = sc->nhosts;
	struct mr_buf *sp = xcalloc(n ? n : 1, sizeof(*sp)), *hw = xcalloc(n ? n : 1, sizeof(*hw));
	struct mr_buf *out = xcalloc(n ? n : 1, sizeof(*out));
	bool *plugged = xcalloc(sc->ncables ? sc->ncables : 1, sizeof(*plugged));
	int rc;

	/* the same cluster, with the fixture texts of the state folder */
	c.hosts = xcalloc(n ? n : 1, sizeof(*c.hosts));
	rc = mr_sim_faults_load(state_dir, &faults, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char *p = xasprintf("%s/%s/fixture/system_profiler.json", state_dir, sc->hosts[i].name);
		rc = mr_read_file(p, 64 << 20, &sp[i], err);
		free(p);
		p = xasprintf("%s/%s/fixture/networksetup.txt", state_dir, sc->hosts[i].name);
		if (rc == 0)
			rc = mr_read_file(p, 1 << 20, &hw[i], err);
		free(p);
		c.hosts[i] = sc->hosts[i];
		c.hosts[i].sp_json = mr_buf_cstr(&sp[i]);
		c.hosts[i].sp_len = sp[i].len;
		c.hosts[i].hwports = mr_buf_cstr(&hw[i]);
	}
	if (rc == 0) {
		mr_sim_live_plugged(&c, &faults, plugged);
		rc = mr_sim_live_render(&c, plugged, out, NULL, err);
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char *p = xasprintf("%s/%s/live/system_profiler.json", state_dir, sc->hosts[i].name);
		rc = mr_write_file(p, out[i].p ? out[i].p : "", out[i].len, 0644, err);
		free(p);
	}
	for (size_t i = 0; i < n; i++) {
		mr_buf_release(&sp[i]);
		mr_buf_release(&hw[i]);
		mr_buf_release(&out[i]);
	}
	free(sp);
	free(hw);
	free(out);
	free(plugged);
	free(c.hosts);
	mr_strvec_release(&faults);
	return rc;
}
