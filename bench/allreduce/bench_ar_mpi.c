/*
 * bench-ar-mpi - time MPI_Allreduce (in place, float32, MPI_SUM) with the same
 * method and rows as the other peers (bench_common.h). Run under mpirun.
 */
#include "common/compat.h"
#include "bench_common.h"
#include "common/opt.h"

#include <mpi.h>

/* MPI's default error handler aborts the job, so these never fail. */
static int mpi_barrier(void *ctx)
{
	(void)ctx;
	MPI_Barrier(MPI_COMM_WORLD);
	return 0;
}

static int mpi_sum(void *ctx, void *buf, size_t count)
{
	(void)ctx;
	MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { BENCH_DEFAULT_SIZES, "openmpi", 5, NULL, BENCH_FLOAT32 };
	struct bench_peer peer = { 0, 0, mpi_barrier, mpi_sum, NULL };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct bench_sizes sz;
	int rc;

	MPI_Init(&argc, &argv);
	rc = bench_opts_parse(argc, argv, "bench-ar-mpi [--sizes LIST] [--repeats N]", &o, &sz, &err);
	if (rc == MR_OPT_HELP) {
		MPI_Finalize();
		return 0;
	}
	if (rc != MR_OPT_OK) {
		fprintf(stderr, "bench-ar-mpi: %s\n", err.msg);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (o.dtype != BENCH_FLOAT32) {
		fprintf(stderr, "bench-ar-mpi: --dtype %s: MPI has no 16-bit float type; this peer times float32 only\n", bench_dtype_name(o.dtype));
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &peer.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &peer.size);
	size_t maxb = bench_max_bytes(&sz);
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
		rc = bench_run_size(&peer, &o, sz.bytes[i], buf);
	free(buf);
	if (rc)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Finalize();
	return 0;
}
