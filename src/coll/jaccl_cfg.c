/*
 * jaccl_cfg.c - the JACCL backend's environment, device matrix, frame header
 * and frame arithmetic (pure functions, no verbs: unit tested in
 * test_jaccl_cfg.c).
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/jaccl_types.h"
#include "coll/mesh_plan.h"
#include "coll/env.h"
#include "coll/le.h"
#include "common/err.h"
#include "common/num.h"

#include <cjson/cJSON.h>

void mr_jaccl_matrix_free(struct mr_jaccl_matrix *m)
{
	if (m->cells) {
		for (size_t i = 0; i < (size_t)m->size * (size_t)m->size; i++)
			free(m->cells[i].names);
	}
	MR_FREE(m->cells);
	m->size = 0;
}

static int set_name(struct mr_jaccl_cell *c, int i, const cJSON *v, const char *name, int r,
		    int col, struct meshrun_err *err)
{
	if (!cJSON_IsString(v))
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d, column %d: device names must be strings", name, r, col);
	size_t len = strlen(v->valuestring);
	if (len == 0 || len >= MR_JACCL_DEVNAME_MAX)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d, column %d: device name '%s' is empty or longer than %d bytes", name, r, col, v->valuestring, MR_JACCL_DEVNAME_MAX - 1);
	memcpy(c->names[i], v->valuestring, len + 1);
	return 0;
}

static int parse_cell(struct mr_jaccl_cell *c, const cJSON *v, const char *name, int r, int col,
		      struct meshrun_err *err)
{
	int n;

	if (cJSON_IsNull(v))
		return 0;
	if (cJSON_IsString(v))
		n = 1;
	else if (cJSON_IsArray(v))
		n = cJSON_GetArraySize(v);
	else
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d, column %d: expected null, a device name or a list of device names", name, r, col);
	if (n > MR_JACCL_MAX_CABLES)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d, column %d: %d devices, at most %d supported", name, r, col, n, MR_JACCL_MAX_CABLES);
	if (n == 0)
		return 0;
	c->names = calloc((size_t)n, sizeof(*c->names));
	if (!c->names)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
	c->n = n;
	for (int i = 0; i < n; i++) {
		int rc = set_name(c, i, cJSON_IsString(v) ? v : cJSON_GetArrayItem(v, i), name, r, col, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int matrix_fill(const cJSON *root, const char *name, void *dst, struct meshrun_err *err)
{
	struct mr_jaccl_matrix m = { 0, NULL };
	int rc = 0;

	if (!cJSON_IsArray(root)) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: the device file should start with a list (one row per rank)", name);
		goto out;
	}
	m.size = cJSON_GetArraySize(root);
	if (m.size < 1 || m.size > MR_JACCL_MAX_RANKS) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: %d rows, expected 1..%d (one per rank)", name, m.size, MR_JACCL_MAX_RANKS);
		goto out;
	}
	m.cells = calloc((size_t)m.size * (size_t)m.size, sizeof(*m.cells));
	if (!m.cells) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
		goto out;
	}
	for (int r = 0; r < m.size; r++) {
		const cJSON *row = cJSON_GetArrayItem(root, r);
		if (!cJSON_IsArray(row)) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d: expected a list of %d cells", name, r, m.size);
			goto out;
		}
		if (cJSON_GetArraySize(row) != m.size) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: rank %d: %d cells, expected %d (one per rank: the matrix must be square)", name, r, cJSON_GetArraySize(row), m.size);
			goto out;
		}
		for (int c = 0; c < m.size; c++) {
			rc = parse_cell(MR_JACCL_CELL(&m, r, c), cJSON_GetArrayItem(row, c), name, r, c, err);
			if (rc < 0)
				goto out;
		}
	}
	*(struct mr_jaccl_matrix *)dst = m;
	m.cells = NULL;
out:
	mr_jaccl_matrix_free(&m);
	return rc;
}

int mr_jaccl_matrix_parse(const char *text, size_t len, const char *name,
			  struct mr_jaccl_matrix *out, struct meshrun_err *err)
{
	return mr_env_json_parse(text, len, name, matrix_fill, out, err);
}

int mr_jaccl_matrix_load(const char *path, struct mr_jaccl_matrix *out, struct meshrun_err *err)
{
	return mr_env_json_load(path, 4u << 20, matrix_fill, out, err);
}

/* Why m is not a mesh ("rank 1, column 3: ..."), or "" when it is. */
static void mesh_fault(const struct mr_jaccl_matrix *m, char *why, size_t n)
{
	why[0] = '\0';
	if (m->size < 2) {
		snprintf(why, n, "a mesh needs at least 2 ranks");
		return;
	}
	for (int r = 0; r < m->size; r++) {
		for (int c = 0; c < m->size; c++) {
			int k = MR_JACCL_CELL(m, r, c)->n;
			if (r == c && k) {
				snprintf(why, n, "rank %d, column %d: the diagonal must be null", r, c);
				return;
			}
			if (r != c && !k) {
				snprintf(why, n, "rank %d, column %d: no device (a mesh needs every rank cabled to every other)", r, c);
				return;
			}
		}
	}
}

static void ring_fault(const struct mr_jaccl_matrix *m, char *why, size_t n)
{
	why[0] = '\0';
	if (m->size < 2) {
		snprintf(why, n, "a ring needs at least 2 ranks");
		return;
	}
	int want = MR_JACCL_CELL(m, 0, 1)->n;
	if (want == 0) {
		snprintf(why, n, "rank 0, column 1: no device (a ring needs rank 0 cabled to rank 1)");
		return;
	}
	for (int r = 0; r < m->size; r++) {
		int side[2] = { (r + m->size - 1) % m->size, (r + 1) % m->size };
		if (MR_JACCL_CELL(m, r, r)->n) {
			snprintf(why, n, "rank %d, column %d: the diagonal must be null", r, r);
			return;
		}
		for (int s = 0; s < 2; s++) {
			int k = MR_JACCL_CELL(m, r, side[s])->n;
			if (k != want) {
				snprintf(why, n, "rank %d, column %d: %d device(s) to its %s neighbour, but a ring needs %d as in rank 0, column 1", r, side[s], k, s ? "right" : "left", want);
				return;
			}
		}
	}
}

int mr_jaccl_matrix_topology(const struct mr_jaccl_matrix *m, bool prefer_ring, int *ncables,
			     const char *name, struct meshrun_err *err)
{
	char mesh[200], ring[200];

	mesh_fault(m, mesh, sizeof(mesh));
	ring_fault(m, ring, sizeof(ring));
	if (prefer_ring && !ring[0]) {
		*ncables = MR_JACCL_CELL(m, 0, 1)->n;
		return MR_JACCL_RING;
	}
	if (!mesh[0]) {
		*ncables = 1;
		return MR_JACCL_MESH;
	}
	if (!ring[0]) {
		*ncables = MR_JACCL_CELL(m, 0, 1)->n;
		return MR_JACCL_RING;
	}
	return mr_err_set(err, MESHRUN_E_PARSE, "%s: the devices form neither a mesh (%s) nor a ring (%s)", name, mesh, ring);
}

static const char *env2(const char *a, const char *b, const char **which)
{
	const char *v = getenv(a);

	*which = a;
	if (v)
		return v;
	*which = b;
	return getenv(b);
}

int mr_jaccl_env_read(struct mr_jaccl_env *e, struct meshrun_err *err)
{
	const char *which = NULL, *v;
	int size = -1, rc;

	memset(e, 0, sizeof(*e));
	e->gid_index = -1;
	e->devices_path = env2(MR_ENV(JACCL_IBV_DEVICES), MR_ENV(MLX_IBV_DEVICES), &which);
	e->coordinator = env2(MR_ENV(JACCL_COORDINATOR), MR_ENV(MLX_JACCL_COORDINATOR), &which);
	if (!e->devices_path || !*e->devices_path)
		return mr_err_set(err, MESHRUN_E_BACKEND, "jaccl: MLX_IBV_DEVICES (or JACCL_IBV_DEVICES) is not set");
	if (!e->coordinator || !*e->coordinator)
		return mr_err_set(err, MESHRUN_E_BACKEND, "jaccl: MLX_JACCL_COORDINATOR (or JACCL_COORDINATOR) is not set");
	e->prefer_ring = env2(MR_ENV(JACCL_RING), MR_ENV(MLX_JACCL_RING), &which) != NULL;

	v = getenv(MR_ENV(JACCL_RANK));
	if (v) {
		e->which_rank = MR_ENV(JACCL_RANK);
		if (mr_parse_int(v, 0, MR_JACCL_MAX_RANKS - 1, &e->rank) < 0)
			return mr_err_set(err, MESHRUN_E_PARSE, "jaccl: JACCL_RANK='%s': expected an integer in 0..%d", v, MR_JACCL_MAX_RANKS - 1);
	} else {
		rc = mr_env_rank(&e->rank, &size, &e->which_rank, err);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return mr_err_set(err, MESHRUN_E_BACKEND, "jaccl: no rank in the environment (MLX_RANK or JACCL_RANK)");
	}
	v = getenv(MR_ENV(MESHRUN_IB_GID_INDEX));
	if (v && *v && mr_parse_int(v, 0, 255, &e->gid_index) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "jaccl: MESHRUN_IB_GID_INDEX='%s': expected an integer in 0..255", v);
	v = getenv(MR_ENV(MESHRUN_JACCL_QP));
	if (!v || !*v || strcmp(v, "auto") == 0)
		e->qp = MR_JACCL_QP_AUTO;
	else if (strcmp(v, "uc") == 0)
		e->qp = MR_JACCL_QP_UC;
	else if (strcmp(v, "rc") == 0)
		e->qp = MR_JACCL_QP_RC;
	else
		return mr_err_set(err, MESHRUN_E_PARSE, "jaccl: MESHRUN_JACCL_QP='%s': expected auto, uc or rc", v);
	e->frame = MR_JACCL_FRAME_DEFAULT;
	v = getenv(MR_ENV(MESHRUN_JACCL_FRAME));
	if (v && *v) {
		uint64_t f = 0;
		if (mr_parse_size(v, MR_JACCL_FRAME_MAX, &f) < 0 || f < MR_JACCL_FRAME_MIN || (f & (f - 1)))
			return mr_err_set(err, MESHRUN_E_PARSE, "jaccl: MESHRUN_JACCL_FRAME='%s': expected a power of two from 4K to 512K (frames above 4K need macOS 26.3 or later on Macs)", v);
		e->frame = (uint32_t)f;
	}
	rc = mr_env_timeout_ms(&e->timeout_ms, err);
	if (rc < 0)
		return rc;
	return mr_env_job_token("jaccl", e->token, sizeof(e->token), &e->token_len, err);
}

void mr_jaccl_fhdr_encode(const struct mr_jaccl_fhdr *h, unsigned char *p)
{
	p[0] = MR_JACCL_MAGIC;
	p[1] = (unsigned char)h->type;
	p[2] = 0;
	p[3] = 0;
	mr_put_le32(p + 4, h->seq);
	mr_put_le32(p + 8, h->credit);
	mr_put_le32(p + 12, h->len);
}

int mr_jaccl_fhdr_decode(const unsigned char *p, uint32_t frame, struct mr_jaccl_fhdr *h,
			 struct meshrun_err *err)
{
	if (p[0] != MR_JACCL_MAGIC || p[2] || p[3])
		return mr_err_set(err, MESHRUN_E_PROTO, "a frame without jaccl's header (bytes %02x %02x %02x %02x)", p[0], p[1], p[2], p[3]);
	h->type = p[1];
	h->seq = mr_get_le32(p + 4);
	h->credit = mr_get_le32(p + 8);
	h->len = mr_get_le32(p + 12);
	if (h->type == MR_JF_DATA && (h->len == 0 || h->len > frame - MR_JACCL_HDR))
		return mr_err_set(err, MESHRUN_E_PROTO, "frame %u carries %u bytes, outside 1..%u", h->seq, h->len, frame - MR_JACCL_HDR);
	if (h->type == MR_JF_CREDIT && h->len)
		return mr_err_set(err, MESHRUN_E_PROTO, "credit frame %u carries %u bytes", h->seq, h->len);
	if (h->type != MR_JF_DATA && h->type != MR_JF_CREDIT)
		return mr_err_set(err, MESHRUN_E_PROTO, "frame %u of unknown type %u", h->seq, h->type);
	return 0;
}

size_t mr_jaccl_payload(uint32_t frame)
{
	return frame - MR_JACCL_HDR;
}

int mr_jaccl_depth(uint32_t frame)
{
	uint32_t d = (512u * 1024u) / frame;

	return (int)MR_MAX(4u, MR_MIN(32u, d));
}

size_t mr_jaccl_nchunks(size_t bytes, size_t chunk)
{
	return bytes / chunk + (bytes % chunk != 0);
}

void mr_jaccl_split(size_t count, size_t parts, size_t i, size_t *off, size_t *n)
{
	mr_mesh_split(count, parts, i, off, n);
}
