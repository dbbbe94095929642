/*
 * gen.c - write a generated fixture set (src/topo/gen.h) into a folder, for the
 * meshconfig benchmark: meshconfig-bench-gen SPEC DIR  (e.g. mesh:64 /tmp/m64).
 */
#include "common/compat.h"
#include "fixture/fixture.h"

int main(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;

	if (argc != 3) {
		fprintf(stderr, "usage: meshconfig-bench-gen SPEC DIR\n");
		return 2;
	}
	if (mr_fixture_gen(argv[1], &g, &err) < 0 || mr_fixture_gen_write(g, argv[2], &err) < 0) {
		fprintf(stderr, "[ERROR] %s\n", err.msg);
		mr_fixture_set_free(g);
		return 1;
	}
	mr_fixture_set_free(g);
	return 0;
}
