/*
 * hostfile.c - the MLX hostfile model: parse, build from --hosts, emit, check.
 *
 * What MLX does (read in ml-explore/mlx, python/mlx/_distributed_utils/common.py
 * (class Hostfile: to_json, from_file, from_list) and .../config.py
 * (save_hostfile, configure_ring/_jaccl/_jaccl_ring); older releases in
 * python/mlx/distributed_config.py wrote the list form):
 *
 * - Writing: `json.dump(hostfile.to_json(), f, indent=4)` to --output-hostfile,
 *   or `print(json.dumps(..., indent=4))` to stdout. So the file has NO trailing
 *   newline; stdout gets one from print(). Separators are "," and ": " (Python's
 *   default with indent, so no trailing spaces), every list/dict element on its
 *   own line, four spaces per level, an empty list as "[]", ensure_ascii on:
 *   non-ASCII as \uXXXX (lower-case hex), control characters as \n.. or \u00XX.
 * - Current MLX always writes the object form, all keys always present, in this
 *   order: {"backend": "", "envs": [...], "hosts": [{"ssh", "ips", "rdma"}]}.
 *   backend is "" (ethernet), "ring", "jaccl" or "jaccl-ring". Ring hosts have
 *   "rdma": []; jaccl hosts a row with null on the diagonal and device names
 *   ("rdma_en2") elsewhere; jaccl-ring rows have a string for one cable and a
 *   list of strings for several cables, null where there is no cable.
 * - Older MLX wrote the list form: [{"ssh", "ips"}] (ethernet: no "rdma" key),
 *   [{"ssh", "ips", "rdma": []}] (ring), [{"ssh", "ips", "rdma": [...]}] (jaccl).
 * - Reading (from_file): a dict gives backend = get("backend", ""), envs =
 *   get("envs", []), hosts = ["hosts"]; a list is the hosts. Each host needs
 *   "ssh"; "ips" and "rdma" default to []. Unknown keys are ignored. No types
 *   are checked (we do check them, and name the JSON path).
 * - from_list: split at ",", an empty entry is an error, an entry is an IP when
 *   ipaddress.ip_address() accepts it (then ips = [it]), rdma = [].
 *
 * We emit the list form when the hostfile was read in the list form (and then
 * "rdma" only when it was present), the object form otherwise, so a file read
 * and written again comes out byte for byte the same as MLX wrote it.
 * Differences, on purpose: ssh names, ips and device names are checked (a
 * hostfile feeds shell commands); a repeated key and an empty host list are
 * errors. A host named twice is allowed (several ranks on one machine).
 */
#include "common/compat.h"
#include "hostfile/hostfile.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/shquote.h"

#include <ctype.h>
#include <unistd.h>

#define HOSTFILE_MAX_BYTES (16u << 20)
#define RDMA_DEV_MAX 63 /* IBV_SYSFS_NAME_MAX is 64 including the NUL */

static int nomem(struct meshrun_err *err)
{
	return mr_err_set(err, MESHRUN_E_NOMEM, "hostfile: out of memory");
}

/* A host for ssh: an IP address, or [user@]name. */
static bool valid_ssh_name(const char *s)
{
	const char *at = strchr(s, '@');

	if (mr_is_ip(s))
		return true;
	if (!at)
		return mr_is_hostname(s);
	if (at == s || s[0] == '-' || strchr(at + 1, '@'))
		return false;
	for (const char *p = s; p < at; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
			return false;
	return mr_is_hostname(at + 1) || mr_is_ip(at + 1);
}

/* An address for the ring backend: an IP address or a host name. */
static bool valid_ip(const char *s)
{
	return mr_is_ip(s) || mr_is_hostname(s);
}

static bool valid_rdma_dev(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > RDMA_DEV_MAX || s[0] == '-' || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
			return false;
	return true;
}

static void host_release(struct mr_host *h)
{
	MR_FREE(h->ssh);
	mr_strvec_release(&h->ips);
	for (size_t i = 0; i < h->nrdma; i++)
		mr_strvec_release(&h->rdma[i].devs);
	MR_FREE(h->rdma);
	h->nrdma = 0;
	h->has_rdma = false;
	for (size_t i = 0; i < h->nmesh; i++)
		mr_strvec_release(&h->mesh[i].devs);
	MR_FREE(h->mesh);
	h->nmesh = 0;
	h->has_mesh = false;
}

struct mr_hostfile *mr_hostfile_new(void)
{
	return calloc(1, sizeof(struct mr_hostfile));
}

void mr_hostfile_free(struct mr_hostfile *hf)
{
	if (!hf)
		return;
	for (size_t i = 0; i < hf->nhosts; i++)
		host_release(&hf->hosts[i]);
	free(hf->hosts);
	free(hf->backend);
	mr_strvec_release(&hf->envs);
	free(hf);
}

int mr_hostfile_add_host(struct mr_hostfile *hf, const char *ssh, struct meshrun_err *err)
{
	struct mr_host *hosts;
	char *copy;

	if (hf->nhosts >= (size_t)INT32_MAX)
		return mr_err_set(err, MESHRUN_E_INVAL, "hostfile: too many hosts");
	copy = strdup(ssh);
	if (!copy)
		return nomem(err);
	hosts = realloc(hf->hosts, (hf->nhosts + 1) * sizeof(*hosts));
	if (!hosts) {
		free(copy);
		return nomem(err);
	}
	hf->hosts = hosts;
	memset(&hosts[hf->nhosts], 0, sizeof(*hosts));
	hosts[hf->nhosts].ssh = copy;
	return (int)hf->nhosts++;
}

/* ---- parsing ---- */

struct parser {
	const char *name;
	struct mr_json_path path;
	struct meshrun_err *err;
};

/* 0 when v is an array, else an error naming the parser's file and path. */
static int want_array(struct parser *ps, const cJSON *v)
{
	return mr_json_want_array(v, ps->name, &ps->path, ps->err);
}

static int parse_string_list(struct parser *ps, const cJSON *arr, bool (*valid)(const char *),
			     const char *what, struct mr_strvec *out)
{
	size_t i = 0;
	const cJSON *it;
	int rc = want_array(ps, arr);

	if (rc)
		return rc;
	cJSON_ArrayForEach(it, arr) {
		const char *s = NULL;
		mr_json_path_index(&ps->path, i++);
		rc = mr_json_want_string(it, ps->name, &ps->path, &s, ps->err);
		if (!rc && valid && !valid(s))
			rc = mr_json_err(ps->err, ps->name, &ps->path, "'%s' is not %s", s, what);
		if (!rc && mr_strvec_push(out, s) < 0)
			rc = nomem(ps->err);
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
	}
	return 0;
}

/* What a row of per-peer cells ("rdma", "mesh_ips") holds in each cell. */
struct cell_kind {
	bool (*valid)(const char *);
	const char *what;          /* for "'x' is not <what>" */
	enum mr_rdma_kind lone;    /* what a lone string makes */
	const char *wrong;         /* for "expected <wrong>, got <type>" */
};

static const struct cell_kind rdma_cell = { valid_rdma_dev, "an RDMA device name", MR_RDMA_ONE,
					    "null, a string or an array" };
/* a lone string is one cable: a list of one */
static const struct cell_kind mesh_cell = { valid_ip, "an IP address or host name", MR_RDMA_LIST,
					    "null or a list of addresses" };

static int parse_cell(struct parser *ps, const cJSON *it, const struct cell_kind *k,
		      struct mr_rdma_cell *cell)
{
	if (cJSON_IsNull(it)) {
		cell->kind = MR_RDMA_NULL;
		return 0;
	}
	if (cJSON_IsString(it)) {
		cell->kind = k->lone;
		if (!k->valid(it->valuestring))
			return mr_json_err(ps->err, ps->name, &ps->path, "'%s' is not %s", it->valuestring,
					   k->what);
		if (mr_strvec_push(&cell->devs, it->valuestring) < 0)
			return nomem(ps->err);
		return 0;
	}
	if (cJSON_IsArray(it)) {
		cell->kind = MR_RDMA_LIST;
		return parse_string_list(ps, it, k->valid, k->what, &cell->devs);
	}
	return mr_json_err(ps->err, ps->name, &ps->path, "expected %s, got %s", k->wrong,
			   mr_json_type_name(it));
}

/* A host's row: *cells gets one cell per element, *ncells counts those to free. */
static int parse_row(struct parser *ps, const cJSON *arr, const struct cell_kind *k, bool *has,
		     struct mr_rdma_cell **cells, size_t *ncells)
{
	size_t n, i = 0;
	const cJSON *it;
	int rc = want_array(ps, arr);

	if (rc)
		return rc;
	*has = true;
	n = (size_t)cJSON_GetArraySize(arr);
	if (!n)
		return 0;
	*cells = calloc(n, sizeof(**cells));
	if (!*cells)
		return nomem(ps->err);
	cJSON_ArrayForEach(it, arr) {
		mr_json_path_index(&ps->path, i);
		/* Count the cell first so that host_release() frees what it holds. */
		*ncells = ++i;
		rc = parse_cell(ps, it, k, &(*cells)[i - 1]);
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
	}
	return 0;
}

/* The row under key in obj (parse_row), when obj has one; 0 when it has none. */
static int parse_row_member(struct parser *ps, const cJSON *obj, const char *key,
			    const struct cell_kind *k, bool *has, struct mr_rdma_cell **cells,
			    size_t *ncells)
{
	const cJSON *arr = mr_json_member(obj, key);
	int rc;

	if (!arr)
		return 0;
	mr_json_path_key(&ps->path, key);
	rc = parse_row(ps, arr, k, has, cells, ncells);
	mr_json_path_pop(&ps->path);
	return rc;
}

static int parse_host(struct parser *ps, const cJSON *obj, struct mr_hostfile *hf)
{
	const cJSON *ssh, *ips;
	struct mr_host *h;
	int rc;

	rc = mr_json_want_object(obj, ps->name, &ps->path, ps->err);
	if (rc)
		return rc;
	ssh = mr_json_member(obj, "ssh");
	if (!ssh)
		return mr_json_missing(ps->err, ps->name, &ps->path, "ssh");
	mr_json_path_key(&ps->path, "ssh");
	rc = mr_json_want_string(ssh, ps->name, &ps->path, NULL, ps->err);
	if (!rc && !valid_ssh_name(ssh->valuestring))
		rc = mr_json_err(ps->err, ps->name, &ps->path,
				 "'%s' is not a host name or IP address", ssh->valuestring);
	mr_json_path_pop(&ps->path);
	if (rc)
		return rc;

	rc = mr_hostfile_add_host(hf, ssh->valuestring, ps->err);
	if (rc < 0)
		return rc;
	h = &hf->hosts[rc];

	ips = mr_json_member(obj, "ips");
	if (ips) {
		mr_json_path_key(&ps->path, "ips");
		rc = parse_string_list(ps, ips, valid_ip, "an IP address or host name", &h->ips);
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
	}
	rc = parse_row_member(ps, obj, "rdma", &rdma_cell, &h->has_rdma, &h->rdma, &h->nrdma);
	if (!rc)
		rc = parse_row_member(ps, obj, "mesh_ips", &mesh_cell, &h->has_mesh, &h->mesh,
				      &h->nmesh);
	return rc;
}

static int parse_hosts(struct parser *ps, const cJSON *arr, struct mr_hostfile *hf)
{
	size_t i = 0;
	const cJSON *it;
	int rc = want_array(ps, arr);

	if (rc)
		return rc;
	if (!cJSON_GetArraySize(arr))
		return mr_json_err(ps->err, ps->name, &ps->path, "no hosts");
	cJSON_ArrayForEach(it, arr) {
		mr_json_path_index(&ps->path, i++);
		rc = parse_host(ps, it, hf);
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_object_form(struct parser *ps, const cJSON *root, struct mr_hostfile *hf)
{
	const cJSON *backend = mr_json_member(root, "backend");
	const cJSON *envs = mr_json_member(root, "envs");
	const cJSON *hosts = mr_json_member(root, "hosts");
	int rc = 0;

	hf->object_form = true;
	if (backend) {
		mr_json_path_key(&ps->path, "backend");
		rc = mr_json_want_string(backend, ps->name, &ps->path, NULL, ps->err);
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
		hf->backend = strdup(backend->valuestring);
		if (!hf->backend)
			return nomem(ps->err);
	}
	if (envs) {
		mr_json_path_key(&ps->path, "envs");
		rc = parse_string_list(ps, envs, NULL, NULL, &hf->envs);
		for (size_t i = 0; !rc && i < hf->envs.nr; i++) {
			/* As mlx.launch: "K=V", or "K" for an empty value. */
			const char *e = hf->envs.v[i];
			char *name = strndup(e, strcspn(e, "="));
			if (!name)
				return nomem(ps->err);
			if (!mr_is_env_name(name)) {
				mr_json_path_index(&ps->path, i);
				rc = mr_json_err(ps->err, ps->name, &ps->path,
						 "'%s' is not NAME=VALUE with a valid variable name",
						 e);
				mr_json_path_pop(&ps->path);
			}
			free(name);
		}
		mr_json_path_pop(&ps->path);
		if (rc)
			return rc;
	}
	if (!hosts)
		return mr_json_missing(ps->err, ps->name, &ps->path, "hosts");
	mr_json_path_key(&ps->path, "hosts");
	rc = parse_hosts(ps, hosts, hf);
	mr_json_path_pop(&ps->path);
	return rc;
}

int mr_hostfile_parse(const char *text, size_t len, const char *name, struct mr_hostfile **out,
		      struct meshrun_err *err)
{
	struct parser ps = { name, MR_JSON_PATH_INIT, err };
	struct mr_hostfile *hf = NULL;
	cJSON *root = NULL;
	int rc;

	rc = mr_json_parse(text, len, name, &root, err);
	if (rc)
		return rc;
	hf = mr_hostfile_new();
	if (!hf) {
		rc = nomem(err);
		goto out;
	}
	if (cJSON_IsObject(root))
		rc = parse_object_form(&ps, root, hf);
	else if (cJSON_IsArray(root))
		rc = parse_hosts(&ps, root, hf);
	else
		rc = mr_json_err(err, name, &ps.path, "expected an array or an object, got %s",
				 mr_json_type_name(root));
	if (rc)
		goto out;
	*out = hf;
	hf = NULL;
out:
	mr_hostfile_free(hf);
	cJSON_Delete(root);
	return rc;
}

int mr_hostfile_load(const char *path, struct mr_hostfile **out, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	int rc;

	rc = mr_read_file(path, HOSTFILE_MAX_BYTES, &b, err);
	if (!rc)
		rc = mr_hostfile_parse(mr_buf_cstr(&b), b.len, path, out, err);
	mr_buf_release(&b);
	return rc;
}

int mr_hostfile_from_list(const char *list, struct mr_hostfile **out, struct meshrun_err *err)
{
	struct mr_strvec items = MR_STRVEC_INIT;
	struct mr_hostfile *hf = NULL;
	int rc = 0;

	if (mr_strvec_split(&items, list, ',', false) < 0) {
		rc = nomem(err);
		goto out;
	}
	hf = mr_hostfile_new();
	if (!hf) {
		rc = nomem(err);
		goto out;
	}
	hf->object_form = true; /* what MLX's to_json() writes */
	for (size_t i = 0; i < items.nr; i++) {
		const char *s = items.v[i];
		if (!*s) {
			rc = mr_err_set(err, MESHRUN_E_USAGE, "--hosts '%s': entry %zu is empty",
					list, i + 1);
			goto out;
		}
		if (!valid_ssh_name(s)) {
			bool space = isspace((unsigned char)s[0]) ||
				     isspace((unsigned char)s[strlen(s) - 1]);

			rc = mr_err_set(err, MESHRUN_E_USAGE,
					"--hosts: entry %zu '%s' is not a [user@]host name or IP address%s",
					i + 1, s, space ? " (no spaces around the commas)" :
						  s[0] == '-' ? " (it would be read as an ssh option)" : "");
			goto out;
		}
		rc = mr_hostfile_add_host(hf, s, err);
		if (rc < 0)
			goto out;
		hf->hosts[rc].has_rdma = true; /* MLX: Host(..., ips, []) */
		rc = 0;
		/* "user@10.0.0.5" is that address too (MLX gives it no ips: the ring fails) */
		const char *at = strrchr(s, '@');
		const char *ip = at ? at + 1 : s;
		if (mr_is_ip(ip) && mr_strvec_push(&hf->hosts[hf->nhosts - 1].ips, ip) < 0) {
			rc = nomem(err);
			goto out;
		}
	}
	*out = hf;
	hf = NULL;
out:
	mr_hostfile_free(hf);
	mr_strvec_release(&items);
	return rc;
}

/* ---- emitting: the bytes of Python's json.dump(obj, f, indent=4) ---- */

static int indent(struct mr_buf *b, int level)
{
	for (int i = 0; i < level; i++)
		if (mr_buf_puts(b, "    ") < 0)
			return -1;
	return 0;
}

/* A list of strings at nesting level `level` (the level of the line holding '['). */
static int emit_strings(struct mr_buf *b, const struct mr_strvec *v, int level)
{
	if (!v->nr)
		return mr_buf_puts(b, "[]");
	if (mr_buf_puts(b, "[\n") < 0)
		return -1;
	for (size_t i = 0; i < v->nr; i++) {
		if (indent(b, level + 1) < 0 || mr_json_quote(b, v->v[i]) < 0 ||
		    mr_buf_puts(b, i + 1 < v->nr ? ",\n" : "\n") < 0)
			return -1;
	}
	if (indent(b, level) < 0)
		return -1;
	return mr_buf_putc(b, ']');
}

static int emit_cell(struct mr_buf *b, const struct mr_rdma_cell *c, int level)
{
	switch (c->kind) {
	case MR_RDMA_ONE:
		if (c->devs.nr == 1)
			return mr_json_quote(b, c->devs.v[0]);
		errno = EINVAL;
		return -1;
	case MR_RDMA_LIST:
		return emit_strings(b, &c->devs, level);
	case MR_RDMA_NULL:
	default:
		return mr_buf_puts(b, "null");
	}
}

/* ,\n  "key": [cells...] : a host's row of the rdma or mesh_ips matrix */
static int emit_row(struct mr_buf *b, const char *key, const struct mr_rdma_cell *cells, size_t n,
		    int level)
{
	if (mr_buf_puts(b, ",\n") < 0 || indent(b, level + 1) < 0 || mr_buf_putc(b, '"') < 0 ||
	    mr_buf_puts(b, key) < 0 || mr_buf_puts(b, "\": ") < 0)
		return -1;
	if (!n)
		return mr_buf_puts(b, "[]");
	if (mr_buf_puts(b, "[\n") < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (indent(b, level + 2) < 0 || emit_cell(b, &cells[i], level + 2) < 0 ||
		    mr_buf_puts(b, i + 1 < n ? ",\n" : "\n") < 0)
			return -1;
	if (indent(b, level + 1) < 0)
		return -1;
	return mr_buf_putc(b, ']');
}

static int emit_host(struct mr_buf *b, const struct mr_host *h, int level, bool rdma)
{
	if (mr_buf_puts(b, "{\n") < 0 || indent(b, level + 1) < 0 ||
	    mr_buf_puts(b, "\"ssh\": ") < 0 || mr_json_quote(b, h->ssh) < 0 ||
	    mr_buf_puts(b, ",\n") < 0 || indent(b, level + 1) < 0 ||
	    mr_buf_puts(b, "\"ips\": ") < 0 || emit_strings(b, &h->ips, level + 1) < 0)
		return -1;
	if (rdma && emit_row(b, "rdma", h->rdma, h->nrdma, level) < 0)
		return -1;
	if (h->has_mesh && emit_row(b, "mesh_ips", h->mesh, h->nmesh, level) < 0)
		return -1;
	if (mr_buf_putc(b, '\n') < 0 || indent(b, level) < 0)
		return -1;
	return mr_buf_putc(b, '}');
}

static int emit_hosts(struct mr_buf *b, const struct mr_hostfile *hf, int level)
{
	if (!hf->nhosts)
		return mr_buf_puts(b, "[]");
	if (mr_buf_puts(b, "[\n") < 0)
		return -1;
	for (size_t i = 0; i < hf->nhosts; i++) {
		const struct mr_host *h = &hf->hosts[i];
		if (indent(b, level + 1) < 0 ||
		    emit_host(b, h, level + 1, hf->object_form || h->has_rdma) < 0 ||
		    mr_buf_puts(b, i + 1 < hf->nhosts ? ",\n" : "\n") < 0)
			return -1;
	}
	if (indent(b, level) < 0)
		return -1;
	return mr_buf_putc(b, ']');
}

int mr_hostfile_emit(const struct mr_hostfile *hf, struct mr_buf *out, struct meshrun_err *err)
{
	size_t start = out->len;
	int rc;

	if (hf->object_form) {
		rc = mr_buf_puts(out, "{\n    \"backend\": ");
		if (!rc)
			rc = mr_json_quote(out, hf->backend ? hf->backend : "");
		if (!rc)
			rc = mr_buf_puts(out, ",\n    \"envs\": ");
		if (!rc)
			rc = emit_strings(out, &hf->envs, 1);
		if (!rc)
			rc = mr_buf_puts(out, ",\n    \"hosts\": ");
		if (!rc)
			rc = emit_hosts(out, hf, 1);
		if (!rc)
			rc = mr_buf_puts(out, "\n}");
	} else {
		rc = emit_hosts(out, hf, 0);
	}
	if (rc < 0) {
		int e = errno;
		out->len = start;
		if (out->p)
			out->p[start] = '\0';
		if (e == EILSEQ)
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "hostfile: a name is not valid UTF-8");
		if (e == EINVAL)
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "hostfile: an rdma cell of kind ONE needs one device");
		return nomem(err);
	}
	return 0;
}

int mr_hostfile_save(const struct mr_hostfile *hf, const char *path, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	int rc;

	rc = mr_hostfile_emit(hf, &b, err);
	if (rc)
		goto out;
	if (!strcmp(path, "-")) {
		/* print(json.dumps(...)): stdout gets a newline, the file does not. */
		if (mr_buf_putc(&b, '\n') < 0) {
			rc = nomem(err);
			goto out;
		}
		if (mr_write_full(STDOUT_FILENO, b.p, b.len) < 0)
			rc = mr_err_sys(err, "write hostfile to stdout");
	} else {
		rc = mr_write_file(path, b.p, b.len, 0644, err);
	}
out:
	mr_buf_release(&b);
	return rc;
}

/* ---- the rdma matrix for jaccl / jaccl-ring ---- */

static size_t cell_count(const struct mr_rdma_cell *c)
{
	return c->kind == MR_RDMA_NULL ? 0 : c->devs.nr;
}

static int need_cell(const struct mr_hostfile *hf, size_t i, size_t j, struct meshrun_err *err)
{
	if (cell_count(&hf->hosts[i].rdma[j]))
		return 0;
	return mr_err_set(err, MESHRUN_E_INVAL,
			  "malformed hostfile: host %zu ('%s') rdma[%zu]: no RDMA device for peer %zu ('%s')",
			  i, hf->hosts[i].ssh, j, j, hf->hosts[j].ssh);
}

int mr_hostfile_check_rdma(const struct mr_hostfile *hf, bool mesh, struct meshrun_err *err)
{
	size_t n = hf->nhosts;
	int rc;

	if (!n)
		return mr_err_set(err, MESHRUN_E_INVAL, "malformed hostfile: no hosts");
	for (size_t i = 0; i < n; i++) {
		const struct mr_host *h = &hf->hosts[i];
		if (h->nrdma != n)
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "malformed hostfile: host %zu ('%s'): rdma has %zu entries, expected %zu (one per host)",
					  i, h->ssh, h->nrdma, n);
		if (h->rdma[i].kind != MR_RDMA_NULL)
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "malformed hostfile: host %zu ('%s') rdma[%zu]: expected null for the host itself, got '%s'",
					  i, h->ssh, i,
					  h->rdma[i].devs.nr ? h->rdma[i].devs.v[0] : "[]");
	}
	for (size_t i = 0; i < n && n > 1; i++) {
		const struct mr_host *h = &hf->hosts[i];
		if (mesh) {
			for (size_t j = 0; j < n; j++)
				if (j != i && (rc = need_cell(hf, i, j, err)))
					return rc;
			continue;
		}
		size_t left = (i + n - 1) % n, right = (i + 1) % n;
		if ((rc = need_cell(hf, i, left, err)) || (rc = need_cell(hf, i, right, err)))
			return rc;
		if (cell_count(&h->rdma[left]) != cell_count(&h->rdma[right]))
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "malformed hostfile: host %zu ('%s'): rdma[%zu] has %zu device(s) but rdma[%zu] has %zu; a ring needs as many cables to each neighbour",
					  i, h->ssh, left, cell_count(&h->rdma[left]), right,
					  cell_count(&h->rdma[right]));
	}
	return 0;
}

int mr_hostfile_check_mesh(const struct mr_hostfile *hf, struct meshrun_err *err)
{
	size_t n = hf->nhosts;

	if (!n)
		return mr_err_set(err, MESHRUN_E_INVAL, "malformed hostfile: no hosts");
	for (size_t i = 0; i < n; i++) {
		const struct mr_host *h = &hf->hosts[i];
		if (!h->has_mesh || h->nmesh != n)
			return mr_err_set(err, MESHRUN_E_INVAL,
					  "malformed hostfile: host %zu ('%s'): mesh_ips has %zu entries, expected %zu (one per host; meshconfig writes them on a full mesh)",
					  i, h->ssh, h->nmesh, n);
		for (size_t j = 0; j < n; j++) {
			const struct mr_rdma_cell *c = &h->mesh[j];
			if (j == i && c->kind != MR_RDMA_NULL)
				return mr_err_set(err, MESHRUN_E_INVAL,
						  "malformed hostfile: host %zu ('%s') mesh_ips[%zu]: expected null for the host itself",
						  i, h->ssh, j);
			if (j != i && (c->kind == MR_RDMA_NULL || !c->devs.nr))
				return mr_err_set(err, MESHRUN_E_INVAL,
						  "malformed hostfile: host %zu ('%s') mesh_ips[%zu]: no address on a cable to host %zu ('%s')",
						  i, h->ssh, j, j, hf->hosts[j].ssh);
		}
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (hf->hosts[i].mesh[j].devs.nr != hf->hosts[j].mesh[i].devs.nr)
				return mr_err_set(err, MESHRUN_E_INVAL,
						  "malformed hostfile: host %zu ('%s') mesh_ips[%zu] lists %zu address(es) but host %zu ('%s') mesh_ips[%zu] lists %zu (the two ends of the same cables)",
						  i, hf->hosts[i].ssh, j, hf->hosts[i].mesh[j].devs.nr, j,
						  hf->hosts[j].ssh, i, hf->hosts[j].mesh[i].devs.nr);
	return 0;
}
