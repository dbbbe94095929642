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

static const char *const dtype_names[] = { "float32", "float16", "bfloat16" };

size_t bench_dtype_size(enum bench_dtype dtype)
{
	return dtype == BENCH_FLOAT32 ? 4 : 2;
}

const char *bench_dtype_name(enum bench_dtype dtype)
{
	return dtype_names[dtype];
}

/* The small integer k (1..256, what the check sums) as dtype, exact. */
static uint32_t dtype_int(enum bench_dtype dtype, unsigned k)
{
	float f = (float)k;
	uint32_t u;
	int e = 0;

	memcpy(&u, &f, sizeof(u));
	if (dtype == BENCH_FLOAT32)
		return u;
	if (dtype == BENCH_BFLOAT16)
		return u >> 16;
	while ((k >> (e + 1)) != 0)
		e++;
	return ((uint32_t)(e + 15) << 10) | ((k << (10 - e)) & 0x3ffu); /* float16 */
}

static void dtype_fill(enum bench_dtype dtype, void *buf, size_t count, unsigned k)
{
	uint32_t v = dtype_int(dtype, k);

	for (size_t i = 0; i < count; i++) {
		if (dtype == BENCH_FLOAT32)
			memcpy((unsigned char *)buf + 4 * i, &v, 4);
		else
			((uint16_t *)buf)[i] = (uint16_t)v;
	}
}

/* 1 when every element of buf is want, else 0 (prints the first mismatch). */
static int dtype_check(const char *impl, enum bench_dtype dtype, const void *buf, size_t count,
		       unsigned want)
{
	uint32_t w = dtype_int(dtype, want);

	for (size_t i = 0; i < count; i++) {
		uint32_t v = 0;
		if (dtype == BENCH_FLOAT32)
			memcpy(&v, (const unsigned char *)buf + 4 * i, 4);
		else
			v = ((const uint16_t *)buf)[i];
		if (v != w) {
			fprintf(stderr, "%s: wrong %s sum at element %zu of %zu: bits 0x%x, want 0x%x (%u)\n",
				impl, bench_dtype_name(dtype), i, count, v, w, want);
			return 0;
		}
	}
	return 1;
}

int bench_opts_parse(int argc, char **argv, const char *usage, struct bench_opts *o,
		     struct bench_sizes *sz, struct meshrun_err *err)
{
	const char *dtype = bench_dtype_name(o->dtype);
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o->sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o->repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o->label, "NAME", o->label, "implementation name in the rows"),
		MR_OPT_STRING(0, "backend", &o->backend, "NAME", "libmeshrun's backend: the program's own, or 'any' (meshrun_init's choice from the environment, e.g. the mesh under meshrun on a full mesh)"),
		MR_OPT_STRING_D(0, "dtype", &dtype, "NAME", "float32", "element type: float32, float16 or bfloat16 (libmeshrun peers)"),
		MR_OPT_END(),
	};
	int rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, err);

	if (rc == MR_OPT_HELP)
		mr_opt_usage(stdout, usage, table, NULL);
	if (rc != MR_OPT_OK)
		return rc;
	for (rc = 0; rc < (int)ARRAY_SIZE(dtype_names) && strcmp(dtype, dtype_names[rc]) != 0; rc++)
		;
	if (rc == (int)ARRAY_SIZE(dtype_names))
		return mr_err_set(err, MESHRUN_E_USAGE, "--dtype: float32, float16 or bfloat16, got '%s'", dtype);
	o->dtype = (enum bench_dtype)rc;
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
		   void *buf)
{
	size_t count = bytes / bench_dtype_size(o->dtype);
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
	dtype_fill(o->dtype, buf, count, (unsigned)p->rank + 1);
	if (p->sum(p->ctx, buf, count) < 0)
		return -1;
	return dtype_check(o->label, o->dtype, buf, count, (unsigned)(n * (n + 1) / 2)) ? 0 : 1;
}
