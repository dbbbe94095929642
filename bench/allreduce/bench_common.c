#include "common/compat.h"
#include "bench_common.h"
#include "common/err.h"
#include "common/num.h"
#include "common/opt.h"

#include <time.h>

int bench_sizes_parse(const char *list, struct bench_sizes *out, struct meshrun_err *err)
{
	char item[64];
	const char *p = list;

	out->n = 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		uint64_t v;
		if (len == 0 || len >= sizeof(item))
			return mr_err_set(err, MESHRUN_E_USAGE, "--sizes: bad entry in '%s'", list);
		memcpy(item, p, len);
		item[len] = '\0';
		if (mr_parse_size(item, (uint64_t)1 << 34, &v) < 0 || v < 4 || v % 4)
			return mr_err_set(err, MESHRUN_E_USAGE, "--sizes: '%s' is not a size in bytes that is a multiple of 4", item);
		if (out->n == BENCH_MAX_SIZES)
			return mr_err_set(err, MESHRUN_E_USAGE, "--sizes: more than %d sizes", BENCH_MAX_SIZES);
		out->bytes[out->n++] = (size_t)v;
		p += len;
		if (*p == ',')
			p++;
	}
	if (!out->n)
		return mr_err_set(err, MESHRUN_E_USAGE, "--sizes: empty list");
	return 0;
}

int bench_round_iters(size_t bytes, int round)
{
	int it = (int)MR_MAX((size_t)1, MR_MIN((size_t)BENCH_ROUND_BYTES / bytes, (size_t)50));

	return round < 0 ? MR_MAX(it, BENCH_WARMUP_OPS) : it;
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_row(const char *impl, int ranks, size_t bytes, int round, double sec)
{
	printf("%s,%d,%zu,%d,%.9f\n", impl, ranks, bytes, round, sec);
	fflush(stdout);
}

int bench_check(const char *impl, const float *buf, size_t count, float want)
{
	for (size_t i = 0; i < count; i++) {
		if (buf[i] != want) {
			fprintf(stderr, "%s: wrong sum at element %zu of %zu: %g, want %g\n", impl, i,
				count, (double)buf[i], (double)want);
			return 0;
		}
	}
	return 1;
}

int bench_opts_parse(int argc, char **argv, const char *usage, struct bench_opts *o,
		     struct bench_sizes *sz, struct meshrun_err *err)
{
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o->sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o->repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o->label, "NAME", o->label, "implementation name in the rows"),
		MR_OPT_STRING(0, "backend", &o->backend, "NAME", "libmeshrun's backend: the program's own, or 'any' (meshrun_init's choice from the environment, e.g. the mesh under meshrun on a full mesh)"),
		MR_OPT_END(),
	};
	int rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, err);

	if (rc == MR_OPT_HELP)
		mr_opt_usage(stdout, usage, table, NULL);
	if (rc != MR_OPT_OK)
		return rc;
	return bench_sizes_parse(o->sizes, sz, err);
}

size_t bench_max_bytes(const struct bench_sizes *sz)
{
	size_t maxb = 0;

	for (size_t i = 0; i < sz->n; i++)
		maxb = MR_MAX(maxb, sz->bytes[i]);
	return maxb;
}

int bench_run_size(const struct bench_peer *p, const struct bench_opts *o, size_t bytes,
		   float *buf)
{
	size_t count = bytes / sizeof(float);
	int n = p->size;

	memset(buf, 0, bytes);
	for (int round = -1; round < o->repeats; round++) {
		int iters = bench_round_iters(bytes, round);
		if (p->barrier(p->ctx) < 0)
			return -1;
		double t0 = bench_now();
		for (int i = 0; i < iters; i++)
			if (p->sum(p->ctx, buf, count) < 0)
				return -1;
		double dt = (bench_now() - t0) / iters;
		if (p->rank == 0 && round >= 0)
			bench_row(o->label, n, bytes, round, dt);
	}
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)(p->rank + 1);
	if (p->sum(p->ctx, buf, count) < 0)
		return -1;
	return bench_check(o->label, buf, count, (float)(n * (n + 1) / 2)) ? 0 : 1;
}
