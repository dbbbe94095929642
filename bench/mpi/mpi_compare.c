/*
 * bench-meshrun-mpi - time libmeshrun's in-place float32 all_sum on its mpi
 * backend (forced, strict), with the method and rows of bench/allreduce
 * (bench_common.h), so that its rows stand next to bench-ar-mpi's plain
 * MPI_Allreduce. Run under mpirun; bench/mpi/run.sh runs both and prints
 * the ratio (it should be about 1: the same engine, plus our dispatch).
 */
#include "common/compat.h"
#include "bench_common.h"
#include "common/opt.h"
#include "meshrun/meshrun.h"

struct opts {
	const char *sizes;
	const char *label;
	int repeats;
};

static int run_size(struct meshrun_group *g, const struct opts *o, size_t bytes, float *buf,
		    struct meshrun_err *err)
{
	int rank = meshrun_rank(g), n = meshrun_size(g);
	size_t count = bytes / sizeof(float);
	int iters = bench_iters(bytes);

	memset(buf, 0, bytes);
	for (int round = -1; round < o->repeats; round++) {
		if (meshrun_barrier(g, err) < 0)
			return -1;
		double t0 = bench_now();
		for (int i = 0; i < iters; i++)
			if (meshrun_all_sum(g, buf, buf, count, MESHRUN_FLOAT32, err) < 0)
				return -1;
		double dt = (bench_now() - t0) / iters;
		if (rank == 0 && round >= 0)
			bench_row(o->label, n, bytes, round, dt);
	}
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)(rank + 1);
	if (meshrun_all_sum(g, buf, buf, count, MESHRUN_FLOAT32, err) < 0)
		return -1;
	return bench_check(o->label, buf, count, (float)(n * (n + 1) / 2)) ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct opts o = { BENCH_DEFAULT_SIZES, "meshrun-mpi", 5 };
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o.sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o.repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o.label, "NAME", "meshrun-mpi", "implementation name in the rows"),
		MR_OPT_END(),
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	struct bench_sizes sz;
	int rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);

	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "bench-meshrun-mpi [--sizes LIST] [--repeats N]   (under mpirun)", table, NULL);
		return 0;
	}
	if (rc != MR_OPT_OK || bench_sizes_parse(o.sizes, &sz, &err) < 0) {
		fprintf(stderr, "bench-meshrun-mpi: %s\n", err.msg);
		return 2;
	}
	if (meshrun_init(&g, MESHRUN_BACKEND_MPI, MESHRUN_STRICT, &err) < 0) {
		fprintf(stderr, "bench-meshrun-mpi: %s\n", err.msg);
		return 1;
	}
	size_t maxb = 0;
	for (size_t i = 0; i < sz.n; i++)
		maxb = MR_MAX(maxb, sz.bytes[i]);
	float *buf = malloc(maxb);
	rc = 0;
	if (!buf) {
		fprintf(stderr, "bench-meshrun-mpi: out of memory for %zu bytes\n", maxb);
		rc = 1;
	}
	for (size_t i = 0; buf && i < sz.n && rc == 0; i++) {
		rc = run_size(g, &o, sz.bytes[i], buf, &err);
		if (rc < 0)
			fprintf(stderr, "bench-meshrun-mpi: %s\n", err.msg);
	}
	free(buf);
	meshrun_free(g);
	return rc ? 1 : 0;
}
