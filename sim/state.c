#include "common/compat.h"
#include "sim/state.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "sim/plan.h"

void mr_sim_state_free(struct mr_sim_state *st)
{
	if (!st)
		return;
	free(st->name);
	free(st->fixture);
	free(st->rxe_note);
	mr_sim_cluster_free(st->cluster);
	free(st);
}

static int put_str(struct mr_buf *out, const char *s)
{
	return mr_json_quote(out, s ? s : "");
}

int mr_sim_state_emit(const struct mr_sim_state *st, struct mr_buf *out)
{
	const struct mr_sim_cluster *c = st->cluster;
	int rc = 0;

	rc |= mr_buf_puts(out, "{\n    \"name\": ");
	rc |= put_str(out, st->name);
	rc |= mr_buf_printf(out, ",\n    \"subnet\": %u,\n    \"fixture\": ", st->subnet);
	rc |= put_str(out, st->fixture);
	rc |= mr_buf_printf(out, ",\n    \"rxe\": %s,\n    \"rxe_note\": ", st->rxe ? "true" : "false");
	if (st->rxe_note)
		rc |= put_str(out, st->rxe_note);
	else
		rc |= mr_buf_puts(out, "null");
	rc |= mr_buf_printf(out, ",\n    \"pretend_rdma\": %s", st->pretend_rdma ? "true" : "false");
	rc |= mr_buf_puts(out, ",\n    \"hosts\": [");
	for (size_t i = 0; i < c->nhosts; i++) {
		const struct mr_sim_host *h = &c->hosts[i];
		rc |= mr_buf_puts(out, i ? ",\n        {\"name\": " : "\n        {\"name\": ");
		rc |= put_str(out, h->name);
		rc |= mr_buf_printf(out, ", \"nosudo\": %s, \"rdma\": [", h->nosudo ? "true" : "false");
		for (size_t r = 0; r < h->rdma.nr; r++) {
			if (r)
				rc |= mr_buf_puts(out, ", ");
			rc |= put_str(out, h->rdma.v[r]);
		}
		rc |= mr_buf_printf(out, "], \"rdma_live\": %s}", h->rdma_live ? "true" : "false");
	}
	rc |= mr_buf_puts(out, "\n    ],\n    \"cables\": [");
	for (size_t i = 0; i < c->ncables; i++) {
		const struct mr_sim_cable *k = &c->cables[i];
		rc |= mr_buf_puts(out, i ? ",\n        [" : "\n        [");
		rc |= put_str(out, c->hosts[k->a].name);
		rc |= mr_buf_puts(out, ", ");
		rc |= put_str(out, k->a_if);
		rc |= mr_buf_puts(out, ", ");
		rc |= put_str(out, c->hosts[k->b].name);
		rc |= mr_buf_puts(out, ", ");
		rc |= put_str(out, k->b_if);
		rc |= mr_buf_puts(out, "]");
	}
	rc |= mr_buf_puts(out, "\n    ]\n}\n");
	return rc ? -1 : 0;
}

static int get_str(const cJSON *obj, const char *key, const char *name, struct mr_json_path *p,
		   const char **out, struct meshrun_err *err)
{
	int rc;

	mr_json_path_key(p, key);
	rc = mr_json_want_string(mr_json_member(obj, key), name, p, out, err);
	mr_json_path_pop(p);
	return rc;
}

static int parse_hosts(const cJSON *arr, const char *name, struct mr_json_path *p,
		       struct mr_sim_cluster *c, struct meshrun_err *err)
{
	size_t i = 0;
	const cJSON *h;

	if (mr_json_want_array(arr, name, p, err) < 0)
		return MESHRUN_E_PARSE;
	cJSON_ArrayForEach(h, arr) {
		const char *hn = NULL;
		const cJSON *rd, *d;
		struct mr_sim_host *sh;

		mr_json_path_index(p, i++);
		if (mr_json_want_object(h, name, p, err) < 0 ||
		    get_str(h, "name", name, p, &hn, err) < 0)
			return MESHRUN_E_PARSE;
		sh = mr_sim_cluster_add_host(c, hn);
		sh->nosudo = cJSON_IsTrue(mr_json_member(h, "nosudo"));
		sh->rdma_live = cJSON_IsTrue(mr_json_member(h, "rdma_live"));
		rd = mr_json_member(h, "rdma");
		if (rd) {
			size_t r = 0;
			mr_json_path_key(p, "rdma");
			if (mr_json_want_array(rd, name, p, err) < 0)
				return MESHRUN_E_PARSE;
			cJSON_ArrayForEach(d, rd) {
				const char *dn = NULL;
				mr_json_path_index(p, r++);
				if (mr_json_want_string(d, name, p, &dn, err) < 0)
					return MESHRUN_E_PARSE;
				mr_strvec_push(&sh->rdma, dn);
				mr_json_path_pop(p);
			}
			mr_json_path_pop(p);
		}
		mr_json_path_pop(p);
	}
	return 0;
}

static int parse_cables(const cJSON *arr, const char *name, struct mr_json_path *p,
			struct mr_sim_cluster *c, struct meshrun_err *err)
{
	size_t i = 0;
	const cJSON *k;

	if (mr_json_want_array(arr, name, p, err) < 0)
		return MESHRUN_E_PARSE;
	cJSON_ArrayForEach(k, arr) {
		const char *f[4] = { NULL };
		ssize_t a, b;

		mr_json_path_index(p, i++);
		if (mr_json_want_array(k, name, p, err) < 0)
			return MESHRUN_E_PARSE;
		if (cJSON_GetArraySize(k) != 4)
			return mr_json_err(err, name, p, "expected [host, if, host, if]");
		for (int j = 0; j < 4; j++) {
			mr_json_path_index(p, (size_t)j);
			if (mr_json_want_string(cJSON_GetArrayItem(k, j), name, p, &f[j], err) < 0)
				return MESHRUN_E_PARSE;
			mr_json_path_pop(p);
		}
		a = mr_sim_cluster_find_host(c, f[0]);
		b = mr_sim_cluster_find_host(c, f[2]);
		if (a < 0 || b < 0)
			return mr_json_err(err, name, p, "unknown host '%s'", a < 0 ? f[0] : f[2]);
		if (strlen(f[1]) > 15 || strlen(f[3]) > 15)
			return mr_json_err(err, name, p, "interface name too long");
		mr_sim_cluster_add_cable(c, (size_t)a, f[1], (size_t)b, f[3]);
		mr_json_path_pop(p);
	}
	return 0;
}

int mr_sim_state_parse(const char *text, size_t len, const char *name, struct mr_sim_state **out,
		       struct meshrun_err *err)
{
	struct mr_json_path p = MR_JSON_PATH_INIT;
	struct mr_sim_state *st = NULL;
	cJSON *root = NULL;
	const char *s = NULL;
	long long k = 0;
	const cJSON *note;
	int rc;

	rc = mr_json_parse(text, len, name, &root, err);
	if (rc < 0)
		return rc;
	st = xcalloc(1, sizeof(*st));
	st->cluster = mr_sim_cluster_new();
	rc = MESHRUN_E_PARSE;
	if (mr_json_want_object(root, name, &p, err) < 0)
		goto out;
	if (get_str(root, "name", name, &p, &s, err) < 0)
		goto out;
	st->name = xstrdup(s);
	mr_json_path_key(&p, "subnet");
	if (mr_json_want_int(mr_json_member(root, "subnet"), name, &p, 1, 250, &k, err) < 0)
		goto out;
	mr_json_path_pop(&p);
	st->subnet = (unsigned)k;
	if (get_str(root, "fixture", name, &p, &s, err) < 0)
		goto out;
	st->fixture = xstrdup(s);
	st->rxe = cJSON_IsTrue(mr_json_member(root, "rxe"));
	st->pretend_rdma = cJSON_IsTrue(mr_json_member(root, "pretend_rdma"));
	note = mr_json_member(root, "rxe_note");
	if (cJSON_IsString(note))
		st->rxe_note = xstrdup(note->valuestring);
	mr_json_path_key(&p, "hosts");
	if (parse_hosts(mr_json_member(root, "hosts"), name, &p, st->cluster, err) < 0)
		goto out;
	mr_json_path_pop(&p);
	mr_json_path_key(&p, "cables");
	if (parse_cables(mr_json_member(root, "cables"), name, &p, st->cluster, err) < 0)
		goto out;
	mr_json_path_pop(&p);
	rc = mr_sim_cluster_check(st->cluster, err);
	if (rc < 0) {
		mr_err_prefix(err, "%s", name);
		goto out;
	}
	*out = st;
	st = NULL;
	rc = 0;
out:
	cJSON_Delete(root);
	mr_sim_state_free(st);
	return rc;
}

int mr_sim_state_load(const char *name, struct mr_sim_state **out, struct meshrun_err *err)
{
	char *dir = mr_sim_state_dir(name);
	char *path = xasprintf("%s/state.json", dir);
	struct mr_buf b = MR_BUF_INIT;
	struct stat sb;
	int rc;

	if (stat(path, &sb) < 0 && errno == ENOENT) {
		rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "no cluster '%s' is up (no '%s')", name, path);
		goto out;
	}
	rc = mr_read_file(path, 16 << 20, &b, err);
	if (rc < 0)
		goto out;
	rc = mr_sim_state_parse(mr_buf_cstr(&b), b.len, path, out, err);
out:
	mr_buf_release(&b);
	free(path);
	free(dir);
	return rc;
}

int mr_sim_faults_load(const char *state_dir, struct mr_strvec *out, struct meshrun_err *err)
{
	char *path = xasprintf("%s/faults", state_dir);
	struct mr_buf b = MR_BUF_INIT;
	struct stat sb;
	int rc = 0;

	if (stat(path, &sb) == 0) {
		rc = mr_read_file(path, 1 << 20, &b, err);
		if (rc == 0)
			mr_strvec_split(out, mr_buf_cstr(&b), '\n', true);
	}
	mr_buf_release(&b);
	free(path);
	return rc;
}

/* The first two words of a fault line. */
static size_t key_len(const char *line)
{
	const char *sp = strchr(line, ' ');

	if (!sp)
		return strlen(line);
	sp = strchr(sp + 1, ' ');
	return sp ? (size_t)(sp - line) : strlen(line);
}

int mr_sim_faults_update(const char *state_dir, const char *key, const char *line,
			 struct meshrun_err *err)
{
	struct mr_strvec v = MR_STRVEC_INIT;
	struct mr_buf b = MR_BUF_INIT;
	size_t kl = strlen(key);
	char *path = NULL;
	int rc;

	rc = mr_sim_faults_load(state_dir, &v, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < v.nr; i++)
		if (!(key_len(v.v[i]) == kl && !strncmp(v.v[i], key, kl)))
			mr_buf_printf(&b, "%s\n", v.v[i]);
	if (line)
		mr_buf_printf(&b, "%s\n", line);
	path = xasprintf("%s/faults", state_dir);
	rc = mr_write_file(path, b.p ? b.p : "", b.len, 0644, err);
out:
	free(path);
	mr_buf_release(&b);
	mr_strvec_release(&v);
	return rc;
}
