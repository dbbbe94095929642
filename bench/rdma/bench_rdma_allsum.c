/*
 * bench-rdma-allsum - time libmeshrun's in-place float32 all_sum at two sizes,
 * a small one for latency and a large one for bandwidth, with whatever backend
 * the launcher sets up (bench/rdma/guest_bench.sh runs it with jaccl,
 * jaccl-ring and ring over the same soft-RoCE veth cables).
 *
 * Each size: one untimed call, then --lat-iters / --bw-iters timed calls
 * between two barriers; rank 0 prints one line per size:
 *   RESULT <label> <ranks> <bytes> <iters> <seconds per call> <algbw GB/s>
 * (algbw = bytes / seconds per call). Then one more all_sum of known values is
 * checked, so a fast but wrong backend cannot pass. Exit 0, 1 on a wrong sum,
 * 2 on an error (its message printed).
 */
#include "common/compat.h"
#include "common/num.h"
#include "common/opt.h"
#include "meshrun/meshrun.h"

#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int time_size(struct meshrun_group *g, const char *label, size_t bytes, int iters,
		     struct meshrun_err *err)
{
	size_t count = bytes / sizeof(float);
	float *buf = calloc(count ? count : 1, sizeof(*buf));
	int rc = -1;

	if (!buf) {
		fprintf(stderr, "bench-rdma-allsum: out of memory\n");
		return -1;
	}
	if (meshrun_all_sum(g, buf, buf, count, MESHRUN_FLOAT32, err) < 0 || meshrun_barrier(g, err) < 0)
		goto out;
	double t0 = now_s();
	for (int i = 0; i < iters; i++)
		if (meshrun_all_sum(g, buf, buf, count, MESHRUN_FLOAT32, err) < 0)
			goto out;
	if (meshrun_barrier(g, err) < 0)
		goto out;
	double per = (now_s() - t0) / iters;
	if (meshrun_rank(g) == 0) {
		printf("RESULT %s %d %zu %d %.9f %.6f\n", label, meshrun_size(g), bytes, iters, per,
		       (double)bytes / per / 1e9);
		fflush(stdout);
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static int check_sum(struct meshrun_group *g, size_t count, struct meshrun_err *err)
{
	float *buf = malloc((count ? count : 1) * sizeof(*buf));
	int n = meshrun_size(g), rc = 0;

	if (!buf)
		return -1;
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)(meshrun_rank(g) + 1);
	if (meshrun_all_sum(g, buf, buf, count, MESHRUN_FLOAT32, err) < 0) {
		free(buf);
		return -1;
	}
	for (size_t i = 0; i < count && rc == 0; i++) {
		if (buf[i] != (float)(n * (n + 1) / 2)) {
			fprintf(stderr, "bench-rdma-allsum: rank %d: wrong sum at element %zu: %g, want %d\n",
				meshrun_rank(g), i, (double)buf[i], n * (n + 1) / 2);
			rc = 1;
		}
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	const char *lat = "4K", *bw = "16M", *label = "?";
	int lat_iters = 100, bw_iters = 5, rc;
	uint64_t lat_b, bw_b;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "lat-size", &lat, "BYTES", "4K", "latency size (K/M suffixes; multiple of 4)"),
		MR_OPT_STRING_D(0, "bw-size", &bw, "BYTES", "16M", "bandwidth size (K/M suffixes; multiple of 4)"),
		MR_OPT_INT_D(0, "lat-iters", &lat_iters, "N", 1, 1000000, "100", "timed calls at the latency size"),
		MR_OPT_INT_D(0, "bw-iters", &bw_iters, "N", 1, 100000, "5", "timed calls at the bandwidth size"),
		MR_OPT_STRING_D(0, "label", &label, "NAME", "?", "name in the RESULT lines"),
		MR_OPT_END(),
	};

	rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "bench-rdma-allsum [options]   (one process per rank, under meshrun)", table, NULL);
		return 0;
	}
	if (rc < 0 || mr_parse_size(lat, 1u << 30, &lat_b) < 0 || mr_parse_size(bw, 1u << 30, &bw_b) < 0 ||
	    lat_b % 4 || bw_b % 4) {
		fprintf(stderr, "bench-rdma-allsum: %s\n", rc < 0 ? err.msg : "sizes must be byte counts that are multiples of 4");
		return 2;
	}
	if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0) {
		fprintf(stderr, "bench-rdma-allsum: init: %s\n", err.msg);
		return 2;
	}
	rc = time_size(g, label, (size_t)lat_b, lat_iters, &err);
	if (rc == 0)
		rc = time_size(g, label, (size_t)bw_b, bw_iters, &err);
	if (rc == 0)
		rc = check_sum(g, (size_t)bw_b / sizeof(float), &err);
	if (rc < 0)
		fprintf(stderr, "bench-rdma-allsum: rank %d: %s\n", meshrun_rank(g), err.msg);
	meshrun_free(g);
	return rc < 0 ? 2 : rc;
}
