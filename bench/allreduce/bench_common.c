#include "common/compat.h"
#include "bench_common.h"
#include "common/err.h"
#include "common/num.h"

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

int bench_iters(size_t bytes)
{
	size_t it = ((size_t)16 << 20) / bytes;

	return (int)MR_MAX((size_t)1, MR_MIN(it, (size_t)50));
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
