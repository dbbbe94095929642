/*
 * meshrun-allreduce-test - checks libmeshrun's collectives on whatever group
 * the environment gives (run it under meshrun or mlx.launch, one per rank).
 *
 * Every dtype and op at counts 0, 1, size-1, size, size+1, an odd count,
 * 1 MiB and 12345 elements short of 1 MiB (uneven segments, slices and
 * packets on the ring's pipelined path, above its small-buffer paths), plus the large size, min(64 MiB, --max-size) when that is above 1 MiB
 * (check_large: every dtype's sum, every op on float32; all of it with --full),
 * in place and out of place; all_gather, sum_scatter, send/recv between every
 * pair of ranks, barrier, and a check that every rank got bit-identical float
 * sums. Prints one line per failure and a closing summary; exits 0 when all
 * passed, 1 on a wrong result, 2 on a library error (its message printed).
 * A send/recv pair that the backend reports as MESHRUN_E_UNSUPPORTED (jaccl-ring
 * connects neighbours only, as MLX's) is skipped and counted as skipped, on
 * both ranks, never as passed; any other error still fails.
 * --fault-loop: repeat a max-size float32 all_sum until it fails (fault tests).
 * --ignore-sigterm: for fault tests under a launcher, which stops every rank
 * (SIGTERM, then SIGKILL after its grace) as soon as one failed: the other
 * ranks still print the failure they saw themselves.
 */
#include "common/compat.h"
#include "common/num.h"
#include "common/opt.h"
#include "meshrun/meshrun.h"

#include <math.h>
#include <signal.h>

struct opts {
	const char *max_size;
	bool full;
	bool fault_loop;
	bool ignore_sigterm;
	bool quiet;
};

struct ctx {
	struct meshrun_group *g;
	int rank, size;
	size_t max_bytes;
	long checks, failures, skipped;
	char skip_why[MESHRUN_ERR_MSG_MAX]; /* the first skip's reason */
	struct meshrun_err err;
	bool liberr;
	bool quiet;
};

static double h2d(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Exact for the small multiples of 0.5 this test uses. */
static uint16_t d2h(double v)
{
	uint16_t s = v < 0 ? 0x8000 : 0;
	v = fabs(v);
	if (v == 0)
		return s;
	int e;
	double f = frexp(v, &e); /* v = f * 2^e, f in [0.5, 1) */
	return (uint16_t)(s | ((e + 14) << 10) | ((uint16_t)(f * 2048) & 0x3ff));
}

static double bf2d(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint16_t d2bf(double v)
{
	float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* Input element i of rank r, as a small number every dtype holds exactly. */
static double input_val(int dt, int r, size_t i)
{
	long v = (long)((i * 7 + (size_t)r * 13) % 23);
	switch (dt) {
	case MESHRUN_BOOL: return (i + (size_t)r) % 3 == 0;
	case MESHRUN_UINT8: case MESHRUN_UINT16: case MESHRUN_UINT32: case MESHRUN_UINT64:
		return (double)v;
	case MESHRUN_INT8: case MESHRUN_INT16: case MESHRUN_INT32: case MESHRUN_INT64:
		return (double)(v - 11);
	default:
		return (double)(v - 11) * 0.5;
	}
}

static void put(int dt, void *buf, size_t i, double v)
{
	switch (dt) {
	case MESHRUN_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
	case MESHRUN_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case MESHRUN_INT16: ((int16_t *)buf)[i] = (int16_t)v; break;
	case MESHRUN_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case MESHRUN_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case MESHRUN_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case MESHRUN_UINT16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
	case MESHRUN_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case MESHRUN_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case MESHRUN_FLOAT16: ((uint16_t *)buf)[i] = d2h(v); break;
	case MESHRUN_BFLOAT16: ((uint16_t *)buf)[i] = d2bf(v); break;
	case MESHRUN_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case MESHRUN_FLOAT64: ((double *)buf)[i] = v; break;
	}
}

static double get(int dt, const void *buf, size_t i)
{
	switch (dt) {
	case MESHRUN_BOOL: return ((const uint8_t *)buf)[i];
	case MESHRUN_INT8: return ((const int8_t *)buf)[i];
	case MESHRUN_INT16: return ((const int16_t *)buf)[i];
	case MESHRUN_INT32: return ((const int32_t *)buf)[i];
	case MESHRUN_INT64: return (double)((const int64_t *)buf)[i];
	case MESHRUN_UINT8: return ((const uint8_t *)buf)[i];
	case MESHRUN_UINT16: return ((const uint16_t *)buf)[i];
	case MESHRUN_UINT32: return ((const uint32_t *)buf)[i];
	case MESHRUN_UINT64: return (double)((const uint64_t *)buf)[i];
	case MESHRUN_FLOAT16: return h2d(((const uint16_t *)buf)[i]);
	case MESHRUN_BFLOAT16: return bf2d(((const uint16_t *)buf)[i]);
	case MESHRUN_FLOAT32: return ((const float *)buf)[i];
	case MESHRUN_FLOAT64: return ((const double *)buf)[i];
	}
	return NAN;
}

enum op { OP_SUM, OP_MAX, OP_MIN };
static const char *const op_names[] = { "all_sum", "all_max", "all_min" };

static double expect(int dt, enum op op, int size, size_t i)
{
	double acc = input_val(dt, 0, i);
	for (int r = 1; r < size; r++) {
		double v = input_val(dt, r, i);
		if (op == OP_SUM)
			acc = dt == MESHRUN_BOOL ? (acc || v) : acc + v;
		else if (op == OP_MAX)
			acc = v > acc ? v : acc;
		else
			acc = v < acc ? v : acc;
	}
	return acc;
}

/*
 * Filling and checking by runs. input_val() repeats every PERIOD elements
 * (i mod 23, and bool's (i + r) mod 3), and so does every expected result, so
 * a pattern of run + PERIOD encoded elements (run a multiple of PERIOD) fills
 * a buffer with memcpy and checks it with memcmp from any start offset.
 * Computed per element (doubles, a modulo, frexp for float16) the values took
 * most of a test's time: in the soft-RoCE guest, where QEMU emulates floating
 * point in software, and under ASan.
 */
#define PERIOD 69
#define PATTERN_RUNS 64 /* periods per memcpy/memcmp at the most */

struct pattern {
	unsigned char *b; /* run + PERIOD elements: element j holds value j */
	size_t esz, run;
};

/* The input of rank r (r >= 0), or the expected result of op over size ranks (r < 0). */
static void pattern_make(struct pattern *p, int dt, size_t count, int r, enum op op, int size)
{
	p->esz = meshrun_dtype_size(dt);
	p->run = MR_MIN(count / PERIOD + 1, (size_t)PATTERN_RUNS) * PERIOD;
	p->b = malloc((p->run + PERIOD) * p->esz);
	if (!p->b) {
		fprintf(stderr, "meshrun-allreduce-test: out of memory\n");
		exit(2);
	}
	for (size_t j = 0; j < p->run + PERIOD; j++)
		put(dt, p->b, j, r >= 0 ? input_val(dt, r, j) : expect(dt, op, size, j));
}

/* buf[0, count) := values start .. start + count - 1 of the pattern. */
static void pattern_fill(const struct pattern *p, void *buf, size_t count, size_t start)
{
	const unsigned char *src = p->b + start % PERIOD * p->esz;

	for (size_t i = 0; i < count; i += p->run)
		memcpy((unsigned char *)buf + i * p->esz, src, MR_MIN(p->run, count - i) * p->esz);
}

/*
 * The first element of buf[0, count) whose value differs from the pattern's
 * from start on, or SIZE_MAX. Compared as bytes first; where they differ, as
 * values (so that a -0 where +0 is expected is still right).
 */
static size_t pattern_first_bad(const struct pattern *p, int dt, const void *buf, size_t count, size_t start)
{
	const unsigned char *src = p->b + start % PERIOD * p->esz, *b = buf;
	size_t i;

	for (i = 0; i < count; i += p->run)
		if (memcmp(b + i * p->esz, src, MR_MIN(p->run, count - i) * p->esz) != 0)
			break;
	for (; i < count; i++)
		if (get(dt, buf, i) != get(dt, p->b, (start + i) % PERIOD))
			return i;
	return SIZE_MAX;
}

static void pattern_free(struct pattern *p)
{
	free(p->b);
	p->b = NULL;
}

static bool fail_lib(struct ctx *c, const char *what)
{
	fprintf(stderr, "meshrun-allreduce-test: rank %d: %s: %s\n", c->rank, what, c->err.msg);
	c->liberr = true;
	return false;
}

/* A p2p call the backend does not support for this pair: skipped, not passed. */
static void skip_unsupported(struct ctx *c)
{
	if (!c->skipped)
		snprintf(c->skip_why, sizeof(c->skip_why), "%s", c->err.msg);
	c->skipped++;
	c->err = (struct meshrun_err)MESHRUN_ERR_INIT;
}

static void report(struct ctx *c, bool ok, const char *fmt, ...) MR_PRINTF(3, 4);
static void report(struct ctx *c, bool ok, const char *fmt, ...)
{
	va_list ap;

	c->checks++;
	if (ok)
		return;
	c->failures++;
	fprintf(stderr, "FAIL rank %d: ", c->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static bool check_reduce(struct ctx *c, int dt, enum op op, size_t count, bool inplace)
{
	size_t esz = meshrun_dtype_size(dt);
	unsigned char *in = malloc(count * esz + 1), *out = malloc(count * esz + 1);
	struct pattern mine, want;
	bool ok = true;
	int rc;

	if (!in || !out) {
		fprintf(stderr, "meshrun-allreduce-test: out of memory\n");
		exit(2);
	}
	pattern_make(&mine, dt, count, c->rank, op, c->size);
	pattern_make(&want, dt, count, -1, op, c->size);
	pattern_fill(&mine, in, count, 0);
	void *dst = inplace ? in : out;
	if (op == OP_SUM)
		rc = meshrun_all_sum(c->g, in, dst, count, dt, &c->err);
	else if (op == OP_MAX)
		rc = meshrun_all_max(c->g, in, dst, count, dt, &c->err);
	else
		rc = meshrun_all_min(c->g, in, dst, count, dt, &c->err);
	if (rc < 0) {
		ok = fail_lib(c, op_names[op]);
		goto out;
	}
	size_t bad = pattern_first_bad(&want, dt, dst, count, 0);
	report(c, bad == SIZE_MAX, "%s %s count %zu %s: element %zu is %g, want %g", op_names[op],
	       meshrun_dtype_name(dt), count, inplace ? "in place" : "out of place", bad,
	       bad == SIZE_MAX ? 0 : get(dt, dst, bad), bad == SIZE_MAX ? 0 : expect(dt, op, c->size, bad));
	if (!inplace)
		report(c, pattern_first_bad(&mine, dt, in, count, 0) == SIZE_MAX,
		       "%s %s count %zu: the send buffer changed", op_names[op], meshrun_dtype_name(dt), count);
out:
	pattern_free(&want);
	pattern_free(&mine);
	free(in);
	free(out);
	return ok;
}

static bool check_gather(struct ctx *c, int dt, size_t count)
{
	size_t esz = meshrun_dtype_size(dt), n = (size_t)c->size;
	unsigned char *in = malloc(count * esz + 1), *out = malloc(n * count * esz + 1);
	struct pattern mine;
	bool ok = true;

	if (!in || !out)
		exit(2);
	pattern_make(&mine, dt, count, c->rank, OP_SUM, c->size);
	pattern_fill(&mine, in, count, 0);
	pattern_free(&mine);
	if (meshrun_all_gather(c->g, in, out, count, dt, &c->err) < 0) {
		ok = fail_lib(c, "all_gather");
		goto out;
	}
	size_t bad = SIZE_MAX;
	for (size_t r = 0; r < n && bad == SIZE_MAX; r++) {
		struct pattern theirs;
		pattern_make(&theirs, dt, count, (int)r, OP_SUM, c->size);
		size_t i = pattern_first_bad(&theirs, dt, out + r * count * esz, count, 0);
		if (i != SIZE_MAX)
			bad = r * count + i;
		pattern_free(&theirs);
	}
	report(c, bad == SIZE_MAX, "all_gather %s count %zu: element %zu wrong", meshrun_dtype_name(dt), count, bad);
out:
	free(in);
	free(out);
	return ok;
}

static bool check_scatter(struct ctx *c, int dt, size_t count, bool inplace)
{
	size_t esz = meshrun_dtype_size(dt), n = (size_t)c->size;
	unsigned char *in = malloc(n * count * esz + 1), *out = malloc(count * esz + 1);
	struct pattern mine, want;
	bool ok = true;

	if (!in || !out)
		exit(2);
	pattern_make(&mine, dt, n * count, c->rank, OP_SUM, c->size);
	pattern_make(&want, dt, count, -1, OP_SUM, c->size);
	pattern_fill(&mine, in, n * count, 0);
	void *dst = inplace ? (void *)in : (void *)out;
	if (meshrun_sum_scatter(c->g, in, dst, count, dt, &c->err) < 0) {
		ok = fail_lib(c, "sum_scatter");
		goto out;
	}
	size_t bad = pattern_first_bad(&want, dt, dst, count, (size_t)c->rank * count);
	report(c, bad == SIZE_MAX, "sum_scatter %s count %zu %s: element %zu wrong", meshrun_dtype_name(dt), count, inplace ? "in place" : "out of place", bad);
out:
	pattern_free(&want);
	pattern_free(&mine);
	free(in);
	free(out);
	return ok;
}

static bool check_p2p(struct ctx *c, size_t count)
{
	int32_t *buf = malloc(count * sizeof(*buf) + 1);
	bool ok = true;

	if (!buf)
		exit(2);
	for (int s = 0; s < c->size && ok; s++) {
		for (int d = 0; d < c->size && ok; d++) {
			if (s == d)
				continue;
			if (c->rank == s) {
				for (size_t i = 0; i < count; i++)
					buf[i] = (int32_t)(s * 1000003 + d * 1009 + (int)i);
				int rc = meshrun_send(c->g, buf, count, MESHRUN_INT32, d, &c->err);
				if (rc == MESHRUN_E_UNSUPPORTED)
					skip_unsupported(c);
				else if (rc < 0)
					ok = fail_lib(c, "send");
			} else if (c->rank == d) {
				int rc = meshrun_recv(c->g, buf, count, MESHRUN_INT32, s, &c->err);
				if (rc == MESHRUN_E_UNSUPPORTED) {
					skip_unsupported(c);
					continue;
				}
				if (rc < 0) {
					ok = fail_lib(c, "recv");
					break;
				}
				size_t bad = SIZE_MAX;
				for (size_t i = 0; i < count && bad == SIZE_MAX; i++)
					if (buf[i] != (int32_t)(s * 1000003 + d * 1009 + (int)i))
						bad = i;
				report(c, bad == SIZE_MAX, "recv %zu int32 from rank %d: element %zu wrong", count, s, bad);
			}
		}
	}
	free(buf);
	return ok;
}

/* Float sums that round: every rank must still get the very same bits. */
static bool check_identical(struct ctx *c, int dt, size_t count)
{
	size_t esz = meshrun_dtype_size(dt);
	unsigned char *buf = malloc(count * esz + 1);
	uint64_t *sums = calloc((size_t)c->size, sizeof(*sums));
	uint64_t h = 1469598103934665603ull, x = 88172645463325252ull + (uint64_t)c->rank;
	bool ok = true;

	if (!buf || !sums)
		exit(2);
	for (size_t i = 0; i < count; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		double v = ((double)(x % 2000001) - 1000000.0) / 997.0;
		if (dt == MESHRUN_FLOAT32)
			((float *)buf)[i] = (float)v;
		else
			((uint16_t *)buf)[i] = d2bf(v); /* truncation is fine for inputs */
	}
	if (meshrun_all_sum(c->g, buf, buf, count, dt, &c->err) < 0) {
		ok = fail_lib(c, "all_sum (bit-identity)");
		goto out;
	}
	for (size_t i = 0; i < count * esz; i++)
		h = (h ^ buf[i]) * 1099511628211ull;
	if (meshrun_all_gather(c->g, &h, sums, 1, MESHRUN_UINT64, &c->err) < 0) {
		ok = fail_lib(c, "all_gather (bit-identity)");
		goto out;
	}
	bool same = true;
	for (int r = 0; r < c->size; r++)
		same = same && sums[r] == h;
	report(c, same, "all_sum %s count %zu: results differ between ranks", meshrun_dtype_name(dt), count);
out:
	free(buf);
	free(sums);
	return ok;
}

static int fault_loop(struct ctx *c)
{
	size_t count = c->max_bytes / sizeof(float);
	float *buf = calloc(count ? count : 1, sizeof(*buf));

	if (!buf)
		return 2;
	for (long it = 1;; it++) {
		if (meshrun_all_sum(c->g, buf, buf, count, MESHRUN_FLOAT32, &c->err) < 0) {
			fprintf(stderr, "meshrun-allreduce-test: rank %d: all_sum failed: %s\n", c->rank, c->err.msg);
			free(buf);
			return 3;
		}
		printf("rank %d iteration %ld done\n", c->rank, it);
		fflush(stdout);
	}
}

/*
 * The large size: every dtype's in-place sum, and for float32 every other
 * collective (sum out of place, max, min, all_gather, sum_scatter); with
 * --full everything for every dtype. So each op and each dtype reaches the
 * large size at a fraction of the full cost (minutes under emulation).
 */
static bool check_large(struct ctx *c, int dt, size_t count, bool full)
{
	bool all = full || dt == MESHRUN_FLOAT32;

	if (!check_reduce(c, dt, OP_SUM, count, true))
		return false;
	if (!all)
		return true;
	/* sum out of place; max and min in place (and out of place with --full) */
	if (!check_reduce(c, dt, OP_SUM, count, false))
		return false;
	for (int op = OP_MAX; op <= OP_MIN; op++)
		for (int ip = 1; ip >= (full ? 0 : 1); ip--)
			if (!check_reduce(c, dt, (enum op)op, count, ip))
				return false;
	return check_gather(c, dt, count) && check_scatter(c, dt, count, false) &&
	       (!full || check_scatter(c, dt, count, true));
}

static bool run_all(struct ctx *c, bool full)
{
	size_t n = (size_t)c->size;
	size_t counts[] = { 0, 1, n - 1, n, n + 1, 12345 };

	for (int dt = 0; dt < MESHRUN_DTYPE_COUNT; dt++) {
		size_t esz = meshrun_dtype_size(dt);
		size_t mib = (1u << 20) / esz;
		size_t big = MR_MIN((size_t)64 << 20, c->max_bytes) / esz;
		for (size_t k = 0; k < ARRAY_SIZE(counts) + 2; k++) {
			size_t count = k < ARRAY_SIZE(counts) ? counts[k] : k == ARRAY_SIZE(counts) ? mib : mib - 12345;
			if (count * esz > c->max_bytes)
				continue;
			for (int op = 0; op < 3; op++)
				for (int ip = 0; ip < 2; ip++)
					if (!check_reduce(c, dt, (enum op)op, count, ip))
						return false;
			if (!check_gather(c, dt, count) || !check_scatter(c, dt, count, false) ||
			    !check_scatter(c, dt, count, true))
				return false;
		}
		if (big > mib && !check_large(c, dt, big, full))
			return false;
	}
	/* large and small (backends take other paths below a few KiB) */
	if (!check_identical(c, MESHRUN_FLOAT32, MR_MIN(c->max_bytes / 4, (size_t)262147)) ||
	    !check_identical(c, MESHRUN_BFLOAT16, MR_MIN(c->max_bytes / 2, (size_t)100003)) ||
	    !check_identical(c, MESHRUN_FLOAT32, MR_MIN(c->max_bytes / 4, (size_t)1001)) ||
	    !check_identical(c, MESHRUN_BFLOAT16, MR_MIN(c->max_bytes / 2, (size_t)999)))
		return false;
	size_t p2p[] = { 0, 1, 1000, (1u << 20) / 4 };
	for (size_t k = 0; k < ARRAY_SIZE(p2p); k++)
		if (p2p[k] * 4 <= c->max_bytes && !check_p2p(c, p2p[k]))
			return false;
	for (int i = 0; i < 3; i++) {
		if (meshrun_barrier(c->g, &c->err) < 0)
			return fail_lib(c, "barrier");
		c->checks++;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct opts o = { "64M", false, false, false, false };
	struct ctx c;
	struct meshrun_err perr = MESHRUN_ERR_INIT;
	uint64_t max;
	const struct mr_opt opts[] = {
		MR_OPT_STRING_D(0, "max-size", &o.max_size, "BYTES", "64M", "largest buffer to test (K, M, G suffixes); above 1M the large case uses min(64M, BYTES)"),
		MR_OPT_BOOL(0, "full", &o.full, "the large case for every dtype and op, not only every dtype's sum and every op on float32"),
		MR_OPT_BOOL(0, "fault-loop", &o.fault_loop, "repeat a max-size float32 all_sum until it fails (exit 3)"),
		MR_OPT_BOOL(0, "ignore-sigterm", &o.ignore_sigterm, "ignore SIGTERM (fault tests under a launcher that stops the other ranks at the first failure)"),
		MR_OPT_BOOL('q', "quiet", &o.quiet, "print only failures and errors"),
		MR_OPT_END(),
	};

	memset(&c, 0, sizeof(c));
	int rc = mr_opt_parse(opts, argc, argv, 0, NULL, NULL, &perr);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "meshrun-allreduce-test [options]   (one process per rank)", opts,
			     "Exit status: 0 all checks passed, 1 a result was wrong, 2 an error, 3 --fault-loop failed.");
		return 0;
	}
	if (rc == MR_OPT_VERSION) {
		puts("meshrun-allreduce-test 0.1");
		return 0;
	}
	if (rc < 0 || mr_parse_size(o.max_size, 1u << 30, &max) < 0) {
		fprintf(stderr, "meshrun-allreduce-test: %s\n", rc < 0 ? perr.msg : "bad --max-size");
		return 2;
	}
	c.max_bytes = (size_t)max;
	c.quiet = o.quiet;
	if (o.ignore_sigterm)
		signal(SIGTERM, SIG_IGN);
	if (meshrun_init(&c.g, MESHRUN_BACKEND_ANY, 0, &c.err) < 0) {
		fprintf(stderr, "meshrun-allreduce-test: init: %s\n", c.err.msg);
		return 2;
	}
	c.rank = meshrun_rank(c.g);
	c.size = meshrun_size(c.g);
	if (o.fault_loop) {
		rc = fault_loop(&c);
		meshrun_free(c.g);
		return rc;
	}
	bool done = run_all(&c, o.full);
	if (!o.quiet || c.failures || c.liberr || c.skipped) {
		char skips[48] = "";
		if (c.skipped)
			snprintf(skips, sizeof(skips), ", %ld skipped", c.skipped);
		printf("meshrun-allreduce-test: rank %d of %d (%s): %ld checks, %ld failed%s%s\n", c.rank,
		       c.size, meshrun_backend_name(c.g), c.checks, c.failures, skips,
		       done ? "" : ", stopped by an error");
		if (c.skipped)
			printf("meshrun-allreduce-test: rank %d: skipped %ld send/recv calls the backend does not support (first: %s)\n",
			       c.rank, c.skipped, c.skip_why);
	}
	meshrun_free(c.g);
	return c.liberr ? 2 : c.failures ? 1 : 0;
}
