/*
 * fuzz_mesh_hostfile.c - the address matrix the mesh backend reads
 * (MESHRUN_MESH_HOSTFILE, coll/mesh/tcpmesh_cfg.c): a parsed matrix has a null
 * diagonal, 1..MR_MESH_MAX_CABLES addresses per other cell, and the same
 * count of cables at both ends.
 */
#include "fuzz.h"
#include "coll/mesh/tcpmesh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_mesh_hosts h;
	int rc;

	memset(&h, 0, sizeof(h));
	rc = mr_mesh_hosts_parse((const char *)data, size, "fuzz.json", &h, &err);
	fuzz_check_err(rc, &err, "mr_mesh_hosts_parse");
	if (rc == 0) {
		FUZZ_ASSERT(h.size >= 1);
		for (int i = 0; i < h.size; i++)
			for (int j = 0; j < h.size; j++) {
				int n = MR_MESH_NCAB(&h, i, j);
				if (i == j) {
					FUZZ_ASSERT(n == 0);
					continue;
				}
				FUZZ_ASSERT(n >= 1 && n <= MR_MESH_MAX_CABLES && n == MR_MESH_NCAB(&h, j, i));
				for (int k = 0; k < n; k++)
					FUZZ_ASSERT(MR_MESH_ADDR(&h, i, j, k)->salen > 0);
			}
	}
	mr_mesh_hosts_free(&h);
	return 0;
}
