/*
 * allreduce_demo.c - the smallest complete libmeshrun program, and the job that
 * scripts/demo.sh runs: every rank contributes rank+1, one all_sum adds them up,
 * and every rank prints the sum it got next to the one it expects
 * (1 + 2 + ... + size). A second all_sum over a 4 MiB float32 vector shows that
 * large buffers arrive whole: every element must equal the same sum.
 *
 *	meshrun -n 4 -- meshrun-allreduce-demo                 (4 local ranks)
 *	meshrun --hostfile hosts.json -- meshrun-allreduce-demo (one rank per host)
 *
 * Started without a launcher it runs as a group of size 1. It uses only the
 * public API (meshrun/meshrun.h) so that it can be copied as a starting point:
 *	cc prog.c $(pkg-config --cflags --libs meshrun)
 * Exit status: 0 when every check passed, 1 on a wrong result, 2 on an error.
 */
#include <meshrun/meshrun.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VEC_COUNT (1u << 20) /* float32 elements: 4 MiB */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char usage[] =
	"usage: meshrun-allreduce-demo   (no arguments; under meshrun, one process per rank)\n"
	"  e.g. meshrun -n 4 -- meshrun-allreduce-demo\n"
	"Every rank contributes rank+1; one all_sum adds them up and each rank prints the\n"
	"sum next to the expected one, then a 4 MiB float32 all_sum is checked.\n"
	"Exit status: 0 every check passed, 1 a wrong result, 2 an error.\n";

int main(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	float *vec = NULL;
	int64_t mine, sum = 0, want;
	size_t wrong = 0;
	double t0, dt;
	int rank, size, status = 2;

	/* every program answers --help (and refuses what it does not know) */
	if (argc > 1) {
		bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");

		if (!help)
			fprintf(stderr, "meshrun-allreduce-demo: unknown argument '%s'\n", argv[1]);
		fputs(usage, help ? stdout : stderr);
		return help ? 0 : 2;
	}
	if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0) {
		fprintf(stderr, "allreduce-demo: init: %s\n", err.msg);
		return 2;
	}
	rank = meshrun_rank(g);
	size = meshrun_size(g);
	mine = rank + 1;
	want = (int64_t)size * (size + 1) / 2;

	if (meshrun_all_sum(g, &mine, &sum, 1, MESHRUN_INT64, &err) < 0)
		goto fail;

	vec = malloc(VEC_COUNT * sizeof(*vec));
	if (!vec) {
		fprintf(stderr, "allreduce-demo: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < VEC_COUNT; i++)
		vec[i] = (float)mine;
	t0 = now_s();
	if (meshrun_all_sum(g, vec, vec, VEC_COUNT, MESHRUN_FLOAT32, &err) < 0)
		goto fail;
	dt = now_s() - t0;
	for (size_t i = 0; i < VEC_COUNT; i++)
		if (vec[i] != (float)want)
			wrong++;
	if (meshrun_barrier(g, &err) < 0)
		goto fail;

	status = sum == want && !wrong ? 0 : 1;
	printf("rank %d of %d (%s): contributed %lld, all_sum = %lld (expected %lld); "
	       "4 MiB float32 all_sum: %.0f ms, %zu wrong: %s\n",
	       rank, size, meshrun_backend_name(g), (long long)mine, (long long)sum,
	       (long long)want, dt * 1e3, wrong, status ? "WRONG" : "OK");
	goto out;
fail:
	fprintf(stderr, "allreduce-demo: rank %d: %s\n", rank, err.msg);
out:
	free(vec);
	meshrun_free(g);
	return status;
}
