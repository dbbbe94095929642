/*
 * mesh_plan.c - the mesh schedule (mesh_plan.h).
 */
#include "common/compat.h"
#include "coll/mesh_plan.h"

int mr_mesh_blocks(int rank, int size, bool reduce, struct mr_mesh_xfer *out)
{
	int n = 0;

	for (int p = 0; p < size; p++) {
		if (p == rank)
			continue;
		out[n].peer = p;
		out[n].sblk = reduce ? p : rank;
		out[n].rblk = reduce ? rank : p;
		n++;
	}
	return n;
}

void mr_mesh_split(size_t count, size_t parts, size_t i, size_t *off, size_t *n)
{
	size_t base = count / parts, extra = count % parts;

	*n = base + (i < extra);
	*off = i * base + MR_MIN(i, extra);
}

bool mr_mesh_direct(size_t count, size_t esz, int size)
{
	return count * esz < MR_MESH_DIRECT || count < (size_t)size;
}
