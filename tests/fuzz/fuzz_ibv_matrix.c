/*
 * fuzz_ibv_matrix.c - the device matrix file MLX_IBV_DEVICES names, as the
 * jaccl backend reads it: parse, then the mesh/ring decision both ways.
 */
#include "fuzz.h"
#include "coll/jaccl_types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_jaccl_matrix m;
	int rc;

	memset(&m, 0, sizeof(m));
	rc = mr_jaccl_matrix_parse((const char *)data, size, "fuzz.json", &m, &err);
	fuzz_check_err(rc, &err, "mr_jaccl_matrix_parse");
	if (rc == 0) {
		FUZZ_ASSERT(m.size >= 1 && m.size <= MR_JACCL_MAX_RANKS);
		for (int ring = 0; ring < 2; ring++) {
			struct meshrun_err e = MESHRUN_ERR_INIT;
			int ncables = -1;
			int t = mr_jaccl_matrix_topology(&m, ring, &ncables, "fuzz.json", &e);
			fuzz_check_err(t, &e, "mr_jaccl_matrix_topology");
			if (t == MR_JACCL_MESH)
				FUZZ_ASSERT(ncables == 1);
			else if (t == MR_JACCL_RING)
				FUZZ_ASSERT(ncables >= 1 && ncables <= MR_JACCL_MAX_CABLES);
			else
				FUZZ_ASSERT(t < 0);
		}
	}
	mr_jaccl_matrix_free(&m);
	return 0;
}
