/*
 * gen.c - write a generated fixture set (src/topo/gen.h) into a folder, for the
 * meshconfig benchmark: meshconfig-bench-gen SPEC DIR  (e.g. mesh:64 /tmp/m64).
 */
#include "common/compat.h"
#include "topo/gen.h"

int main(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_genset *g = NULL;

	if (argc != 3) {
		fprintf(stderr, "usage: meshconfig-bench-gen SPEC DIR\n");
		return 2;
	}
	if (mr_topo_gen(argv[1], &g, &err) < 0 || mr_topo_gen_write(g, argv[2], &err) < 0) {
		fprintf(stderr, "[ERROR] %s\n", err.msg);
		mr_topo_genset_free(g);
		return 1;
	}
	mr_topo_genset_free(g);
	return 0;
}
