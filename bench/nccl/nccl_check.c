/*
 * meshrun-nccl-check - libmeshrun's nccl backend on GPU memory, one process
 * per rank (run it under meshrun --backend nccl; see bench/nccl/run.sh).
 *
 * Buffers come from cudaMalloc (the CUDA runtime is loaded with dlopen, as
 * libmeshrun does: nothing of CUDA is needed to build this). Checked, for
 * float32, int32 and bfloat16 at 1, 1000, 2^20+3 elements and 64 MiB:
 * all_sum in place and out of place (send left untouched), all_max,
 * all_gather, sum_scatter; plus one all_sum on host memory (the staging
 * path). Then the bandwidth: in-place float32 all_sum of --size bytes
 * (default 256 MiB), a warm-up and --repeats timed calls, median time,
 * algbw and busbw (algbw * 2(n-1)/n).
 * Exit status: 0 all passed, 1 a wrong result, 2 an error (message printed).
 */
#include "common/compat.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/timeutil.h"
#include "meshrun/meshrun.h"

#include <dlfcn.h>

enum { H2D = 1, D2H = 2 };

struct cuda {
	int (*Malloc)(void **p, size_t n);
	int (*Free)(void *p);
	int (*Memcpy)(void *dst, const void *src, size_t n, int kind);
	int (*DeviceSynchronize)(void);
	const char *(*GetErrorString)(int e);
};

struct ctx {
	struct cuda cu;
	struct meshrun_group *g;
	struct meshrun_err err;
	int rank, size;
	long checks, failures;
	const char *what; /* the call being checked, for messages */
};

static int load_cuda(struct cuda *cu)
{
	static const char *const names[] = { "libcudart.so", "libcudart.so.13", "libcudart.so.12",
					     "libcudart.so.11.0" };
	void *h = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(names) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "meshrun-nccl-check: cannot load the CUDA runtime (libcudart.so): %s\n", dlerror());
		return -1;
	}
	*(void **)&cu->Malloc = dlsym(h, "cudaMalloc");
	*(void **)&cu->Free = dlsym(h, "cudaFree");
	*(void **)&cu->Memcpy = dlsym(h, "cudaMemcpy");
	*(void **)&cu->DeviceSynchronize = dlsym(h, "cudaDeviceSynchronize");
	*(void **)&cu->GetErrorString = dlsym(h, "cudaGetErrorString");
	if (!cu->Malloc || !cu->Free || !cu->Memcpy || !cu->DeviceSynchronize || !cu->GetErrorString) {
		fprintf(stderr, "meshrun-nccl-check: the CUDA runtime lacks a symbol: %s\n", dlerror());
		return -1;
	}
	return 0;
}

static int cuda_ok(struct ctx *c, int e, const char *call)
{
	if (e == 0)
		return 0;
	fprintf(stderr, "meshrun-nccl-check: rank %d: %s: %s (%d)\n", c->rank, call, c->cu.GetErrorString(e), e);
	return -1;
}

/* Value of element i of rank r's contribution: small integers, exact in bfloat16 sums. */
static int val(int r, size_t i)
{
	return (r + 1) * (int)(i % 7 + 1);
}

static uint16_t bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* the values here are exact in bfloat16 */
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static void fill(enum meshrun_dtype dt, void *h, size_t count, int rank)
{
	for (size_t i = 0; i < count; i++) {
		int v = val(rank, i);
		if (dt == MESHRUN_FLOAT32)
			((float *)h)[i] = (float)v;
		else if (dt == MESHRUN_INT32)
			((int32_t *)h)[i] = v;
		else
			((uint16_t *)h)[i] = bf16((float)v);
	}
}

static double get(enum meshrun_dtype dt, const void *h, size_t i)
{
	if (dt == MESHRUN_FLOAT32)
		return ((const float *)h)[i];
	if (dt == MESHRUN_INT32)
		return ((const int32_t *)h)[i];
	return from_bf16(((const uint16_t *)h)[i]);
}

/* Compare count elements of device buffer d with want(i); one line per failed check. */
static int expect(struct ctx *c, enum meshrun_dtype dt, const void *d, size_t count, void *h,
		  double (*want)(const struct ctx *c, size_t i, size_t count))
{
	size_t esz = meshrun_dtype_size(dt);

	if (cuda_ok(c, c->cu.Memcpy(h, d, count * esz, D2H), "cudaMemcpy to host") < 0)
		return -1;
	c->checks++;
	for (size_t i = 0; i < count; i++) {
		double w = want(c, i, count), got = get(dt, h, i);
		if (got != w) {
			printf("FAIL rank %d: %s %s count %zu: element %zu is %g, want %g\n", c->rank, c->what,
			       meshrun_dtype_name(dt), count, i, got, w);
			c->failures++;
			return 0;
		}
	}
	return 0;
}

static double want_sum(const struct ctx *c, size_t i, size_t count)
{
	(void)count;
	return (double)(c->size * (c->size + 1) / 2) * (double)(i % 7 + 1);
}

static double want_mine(const struct ctx *c, size_t i, size_t count)
{
	(void)count;
	return val(c->rank, i);
}

static double want_max(const struct ctx *c, size_t i, size_t count)
{
	(void)count;
	return val(c->size - 1, i);
}

/* all_gather of blocks of count: block r holds rank r's contribution */
static double want_gather(const struct ctx *c, size_t i, size_t count)
{
	size_t per = count / (size_t)c->size;
	return val((int)(i / per), i % per);
}

static int lib_failed(struct ctx *c)
{
	fprintf(stderr, "meshrun-nccl-check: rank %d: %s: %s\n", c->rank, c->what, c->err.msg);
	return -1;
}

/* This rank's input of count elements: filled in h, copied to device buffer d. */
static int upload(struct ctx *c, enum meshrun_dtype dt, void *h, void *d, size_t count)
{
	fill(dt, h, count, c->rank);
	return cuda_ok(c, c->cu.Memcpy(d, h, count * meshrun_dtype_size(dt), H2D), "cudaMemcpy to device");
}

/* Every check for one dtype and count; buffers of at least size*count elements. */
static int check_one(struct ctx *c, enum meshrun_dtype dt, size_t count, void *d1, void *d2, void *h)
{
	size_t esz = meshrun_dtype_size(dt), bytes = count * esz;
	size_t n = (size_t)c->size;

	c->what = "all_sum in place";
	if (upload(c, dt, h, d1, count) < 0)
		return -1;
	if (meshrun_all_sum(c->g, d1, d1, count, dt, &c->err) < 0)
		return lib_failed(c);
	if (expect(c, dt, d1, count, h, want_sum) < 0)
		return -1;

	c->what = "all_sum out of place";
	if (upload(c, dt, h, d1, count) < 0)
		return -1;
	if (meshrun_all_sum(c->g, d1, d2, count, dt, &c->err) < 0)
		return lib_failed(c);
	if (expect(c, dt, d2, count, h, want_sum) < 0)
		return -1;
	c->what = "all_sum out of place (send untouched)";
	if (expect(c, dt, d1, count, h, want_mine) < 0)
		return -1;

	c->what = "all_max";
	if (meshrun_all_max(c->g, d1, d2, count, dt, &c->err) < 0)
		return lib_failed(c);
	if (expect(c, dt, d2, count, h, want_max) < 0)
		return -1;

	c->what = "all_gather";
	if (meshrun_all_gather(c->g, d1, d2, count, dt, &c->err) < 0)
		return lib_failed(c);
	if (expect(c, dt, d2, count * n, h, want_gather) < 0)
		return -1;

	/* sum_scatter: every rank sends n blocks of count, block b of rank r
	 * holding val(r, b*count + i); rank k gets block k summed */
	c->what = "sum_scatter";
	if (upload(c, dt, h, d2, count * n) < 0)
		return -1;
	if (meshrun_sum_scatter(c->g, d2, d1, count, dt, &c->err) < 0)
		return lib_failed(c);
	if (cuda_ok(c, c->cu.Memcpy(h, d1, bytes, D2H), "cudaMemcpy to host") < 0)
		return -1;
	c->checks++;
	for (size_t i = 0; i < count; i++) {
		size_t at = (size_t)c->rank * count + i;
		double w = (double)(c->size * (c->size + 1) / 2) * (double)(at % 7 + 1);
		if (get(dt, h, i) != w) {
			printf("FAIL rank %d: sum_scatter %s count %zu: element %zu is %g, want %g\n", c->rank,
			       meshrun_dtype_name(dt), count, i, get(dt, h, i), w);
			c->failures++;
			break;
		}
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int bandwidth(struct ctx *c, size_t bytes, int repeats, void *d)
{
	double t[64];
	size_t count = bytes / sizeof(float);

	repeats = MR_MIN(repeats, (int)ARRAY_SIZE(t));
	c->what = "all_sum (bandwidth)";
	for (int k = -1; k < repeats; k++) {
		if (meshrun_barrier(c->g, &c->err) < 0)
			return lib_failed(c);
		int64_t t0 = mr_now_us();
		if (meshrun_all_sum(c->g, d, d, count, MESHRUN_FLOAT32, &c->err) < 0)
			return lib_failed(c);
		if (k >= 0)
			t[k] = (double)(mr_now_us() - t0) / 1e6;
	}
	qsort(t, (size_t)repeats, sizeof(t[0]), cmp_double);
	double med = t[repeats / 2], alg = (double)bytes / med / 1e9;
	if (c->rank == 0)
		printf("meshrun-nccl-check: %d rank%s, %zu MiB float32 all_sum on GPU memory: median %.3f ms of %d, algbw %.2f GB/s, busbw %.2f GB/s\n",
		       c->size, c->size == 1 ? "" : "s", bytes >> 20, med * 1e3, repeats, alg,
		       alg * 2.0 * (c->size - 1) / c->size);
	return 0;
}

static int run(struct ctx *c, size_t bw_bytes, int repeats)
{
	static const enum meshrun_dtype dts[] = { MESHRUN_FLOAT32, MESHRUN_INT32, MESHRUN_BFLOAT16 };
	size_t n = (size_t)c->size, max = MR_MAX((size_t)64 << 20, bw_bytes) * n;
	void *d1 = NULL, *d2 = NULL, *h = malloc(max);
	int rc = -1;

	if (!h) {
		fprintf(stderr, "meshrun-nccl-check: out of memory for %zu bytes\n", max);
		return -1;
	}
	if (cuda_ok(c, c->cu.Malloc(&d1, max), "cudaMalloc") < 0 ||
	    cuda_ok(c, c->cu.Malloc(&d2, max), "cudaMalloc") < 0)
		goto out;
	for (size_t k = 0; k < ARRAY_SIZE(dts); k++) {
		size_t counts[] = { 1, 1000, ((size_t)1 << 20) + 3, ((size_t)64 << 20) / meshrun_dtype_size(dts[k]) };
		for (size_t i = 0; i < ARRAY_SIZE(counts); i++)
			if (check_one(c, dts[k], counts[i], d1, d2, h) < 0)
				goto out;
	}
	/* host memory: the backend stages it through the GPU */
	c->what = "all_sum on host memory";
	fill(MESHRUN_FLOAT32, h, 4096, c->rank);
	if (meshrun_all_sum(c->g, h, h, 4096, MESHRUN_FLOAT32, &c->err) < 0) {
		lib_failed(c);
		goto out;
	}
	c->checks++;
	for (size_t i = 0; i < 4096; i++)
		if (((float *)h)[i] != (float)want_sum(c, i, 4096)) {
			printf("FAIL rank %d: all_sum on host memory: element %zu is %g\n", c->rank, i, ((float *)h)[i]);
			c->failures++;
			break;
		}
	rc = bandwidth(c, bw_bytes, repeats, d1);
out:
	if (d1)
		c->cu.Free(d1);
	if (d2)
		c->cu.Free(d2);
	free(h);
	return rc;
}

int main(int argc, char **argv)
{
	struct ctx c;
	const char *size = "256M";
	int repeats = 5;
	uint64_t bw;
	struct meshrun_err perr = MESHRUN_ERR_INIT;
	const struct mr_opt opts[] = {
		MR_OPT_STRING_D(0, "size", &size, "BYTES", "256M", "buffer of the bandwidth run (K, M, G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &repeats, "N", 1, 64, "5", "timed all_sums of the bandwidth run"),
		MR_OPT_END(),
	};

	memset(&c, 0, sizeof(c));
	int rc = mr_opt_parse(opts, argc, argv, 0, NULL, NULL, &perr);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "meshrun-nccl-check [options]   (one process per rank, under meshrun --backend nccl)",
			     opts, "Exit status: 0 all checks passed, 1 a result was wrong, 2 an error.");
		return 0;
	}
	if (rc == MR_OPT_VERSION) {
		puts("meshrun-nccl-check 0.1");
		return 0;
	}
	if (rc < 0 || mr_parse_size(size, (uint64_t)1 << 34, &bw) < 0 || bw < 4) {
		fprintf(stderr, "meshrun-nccl-check: %s\n", rc < 0 ? perr.msg : "bad --size");
		return 2;
	}
	if (load_cuda(&c.cu) < 0)
		return 2;
	if (meshrun_init(&c.g, MESHRUN_BACKEND_NCCL, MESHRUN_STRICT, &c.err) < 0) {
		fprintf(stderr, "meshrun-nccl-check: init: %s\n", c.err.msg);
		return 2;
	}
	c.rank = meshrun_rank(c.g);
	c.size = meshrun_size(c.g);
	rc = run(&c, (size_t)bw & ~(size_t)3, repeats);
	printf("meshrun-nccl-check: rank %d of %d (%s): %ld checks, %ld failed%s\n", c.rank, c.size,
	       meshrun_backend_name(c.g), c.checks, c.failures, rc < 0 ? ", stopped by an error" : "");
	meshrun_free(c.g);
	return rc < 0 ? 2 : c.failures ? 1 : 0;
}
