/*
 * tcpmesh_cfg.c - the mesh backend's address matrix (tcpmesh.h): parse and check.
 */
#include "common/compat.h"
#include "coll/mesh/tcpmesh.h"
#include "common/err.h"

#include <cjson/cJSON.h>

void mr_mesh_hosts_free(struct mr_mesh_hosts *h)
{
	for (size_t i = 0; h->cell && i < (size_t)h->size * (size_t)h->size; i++)
		free(h->cell[i]);
	MR_FREE(h->cell);
	MR_FREE(h->ncab);
	h->size = 0;
}

static int cell_fill(struct mr_mesh_hosts *h, const cJSON *c, int i, int j, const char *name,
		     struct meshrun_err *err)
{
	int n = cJSON_IsArray(c) ? cJSON_GetArraySize(c) : 1;

	if (i == j) {
		if (!cJSON_IsNull(c))
			return mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d]: the diagonal must be null", name, i, j);
		return 0;
	}
	if (!cJSON_IsArray(c) && !cJSON_IsString(c))
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d]: expected \"ip:port\" or a list of them (rank %d's address on its cable to rank %d)", name, i, j, i, j);
	if (n < 1 || n > MR_MESH_MAX_CABLES)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d]: %d addresses, expected 1 to %d", name, i, j, n, MR_MESH_MAX_CABLES);
	h->cell[(size_t)i * (size_t)h->size + (size_t)j] = calloc((size_t)n, sizeof(struct mr_ring_addr));
	if (!h->cell[(size_t)i * (size_t)h->size + (size_t)j])
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
	for (int k = 0; k < n; k++) {
		const cJSON *a = cJSON_IsArray(c) ? cJSON_GetArrayItem(c, k) : c;
		if (!cJSON_IsString(a))
			return mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d][%d]: expected an \"ip:port\" string", name, i, j, k);
		int rc = mr_ring_parse_addr(a->valuestring, MR_MESH_ADDR(h, i, j, k), err);
		if (rc < 0) {
			mr_err_prefix(err, "%s: [%d][%d][%d]", name, i, j, k);
			return rc;
		}
	}
	MR_MESH_NCAB(h, i, j) = n;
	return 0;
}

static int matrix_fill(const cJSON *root, const char *name, void *dst, struct meshrun_err *err)
{
	struct mr_mesh_hosts h = { 0, NULL, NULL };
	int rc = 0;

	if (!cJSON_IsArray(root) || cJSON_GetArraySize(root) == 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: expected a non-empty list of rows", name);
	h.size = cJSON_GetArraySize(root);
	if (h.size > 4096)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: %d ranks, at most 4096", name, h.size);
	h.ncab = calloc((size_t)h.size * (size_t)h.size, sizeof(*h.ncab));
	h.cell = calloc((size_t)h.size * (size_t)h.size, sizeof(*h.cell));
	if (!h.ncab || !h.cell) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
		goto out;
	}
	for (int i = 0; i < h.size && rc == 0; i++) {
		const cJSON *row = cJSON_GetArrayItem(root, i);
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != h.size) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d]: expected a list of %d cells (one per rank)", name, i, h.size);
			break;
		}
		for (int j = 0; j < h.size && rc == 0; j++)
			rc = cell_fill(&h, cJSON_GetArrayItem(row, j), i, j, name, err);
	}
	for (int i = 0; i < h.size && rc == 0; i++)
		for (int j = i + 1; j < h.size && rc == 0; j++)
			if (MR_MESH_NCAB(&h, i, j) != MR_MESH_NCAB(&h, j, i))
				rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d] lists %d cables but [%d][%d] lists %d (both ends of the same cables)", name, i, j, MR_MESH_NCAB(&h, i, j), j, i, MR_MESH_NCAB(&h, j, i));
	if (rc == 0) {
		*(struct mr_mesh_hosts *)dst = h;
		h.ncab = NULL;
		h.cell = NULL;
	}
out:
	mr_mesh_hosts_free(&h);
	return rc;
}

int mr_mesh_hosts_parse(const char *text, size_t len, const char *name, struct mr_mesh_hosts *out,
			struct meshrun_err *err)
{
	return mr_env_json_parse(text, len, name, matrix_fill, out, err);
}

int mr_mesh_hosts_load(const char *path, struct mr_mesh_hosts *out, struct meshrun_err *err)
{
	return mr_env_json_load(path, 64u << 20, matrix_fill, out, err);
}
