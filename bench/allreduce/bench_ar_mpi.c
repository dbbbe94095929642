/*
 * bench-ar-mpi - time MPI_Allreduce (in place, float32, MPI_SUM) with the same
 * method and rows as the other peers (bench_common.h). Run under mpirun.
 */
#include "common/compat.h"
#include "bench_common.h"
#include "common/opt.h"

#include <mpi.h>

struct opts {
	const char *sizes;
	const char *label;
	int repeats;
};

static int run_size(int rank, int n, const struct opts *o, size_t bytes, float *buf)
{
	size_t count = bytes / sizeof(float);
	int iters = bench_iters(bytes);

	memset(buf, 0, bytes);
	for (int round = -1; round < o->repeats; round++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = bench_now();
		for (int i = 0; i < iters; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double dt = (bench_now() - t0) / iters;
		if (rank == 0 && round >= 0)
			bench_row(o->label, n, bytes, round, dt);
	}
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)(rank + 1);
	MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	return bench_check(o->label, buf, count, (float)(n * (n + 1) / 2)) ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct opts o = { BENCH_DEFAULT_SIZES, "openmpi", 5 };
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o.sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o.repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o.label, "NAME", "openmpi", "implementation name in the rows"),
		MR_OPT_END(),
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct bench_sizes sz;
	int rank, n, rc;

	MPI_Init(&argc, &argv);
	rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "bench-ar-mpi [--sizes LIST] [--repeats N]", table, NULL);
		MPI_Finalize();
		return 0;
	}
	if (rc != MR_OPT_OK || bench_sizes_parse(o.sizes, &sz, &err) < 0) {
		fprintf(stderr, "bench-ar-mpi: %s\n", err.msg);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	size_t maxb = 0;
	for (size_t i = 0; i < sz.n; i++)
		maxb = MR_MAX(maxb, sz.bytes[i]);
	if (maxb / sizeof(float) > (size_t)INT32_MAX) {
		fprintf(stderr, "bench-ar-mpi: %zu bytes is more than MPI's int count allows\n", maxb);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	float *buf = malloc(maxb);
	if (!buf) {
		fprintf(stderr, "bench-ar-mpi: out of memory for %zu bytes\n", maxb);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	rc = 0;
	for (size_t i = 0; i < sz.n && rc == 0; i++)
		rc = run_size(rank, n, &o, sz.bytes[i], buf);
	free(buf);
	if (rc)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Finalize();
	return 0;
}
