/* Unit tests for src/coll/dtype.c: reductions per dtype, float16/bfloat16 rounding. */
#include "common/compat.h"
#include "coll/dtype.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <cmocka.h>

static uint16_t h_sum(uint16_t a, uint16_t b)
{
	mr_reduce(MR_OP_SUM, MESHRUN_FLOAT16, &a, &b, 1);
	return a;
}

static uint16_t bf_sum(uint16_t a, uint16_t b)
{
	mr_reduce(MR_OP_SUM, MESHRUN_BFLOAT16, &a, &b, 1);
	return a;
}

static void test_f16_convert(void **state)
{
	(void)state;
	assert_true(mr_f16_to_f32(0x3c00) == 1.0f);
	assert_true(mr_f16_to_f32(0xc000) == -2.0f);
	assert_true(mr_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(mr_f16_to_f32(0x0001) == 0x1p-24f); /* smallest subnormal */
	assert_true(isinf(mr_f16_to_f32(0x7c00)));
	assert_true(isnan(mr_f16_to_f32(0x7e00)));
	/* every finite half survives a round trip */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue;
		assert_int_equal(mr_f32_to_f16(mr_f16_to_f32((uint16_t)h)), h);
	}
	assert_int_equal(mr_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
	assert_int_equal(mr_f32_to_f16(65519.0f), 0x7bff);
	assert_int_equal(mr_f32_to_f16(0x1p-25f), 0x0000); /* tie to even: 0 */
	assert_int_equal(mr_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 ulp: tie to even 2 */
	assert_true((mr_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
}

static void test_f16_sum_rounding(void **state)
{
	(void)state;
	/* 1 + 2^-11 is a tie between 1 and 1+2^-10: even is 1 */
	assert_int_equal(h_sum(0x3c00, mr_f32_to_f16(0x1p-11f)), 0x3c00);
	/* (1+2^-10) + 2^-11: tie, even is 1+2^-9 */
	assert_int_equal(h_sum(0x3c01, mr_f32_to_f16(0x1p-11f)), 0x3c02);
	/* just above the tie rounds up */
	assert_int_equal(h_sum(0x3c00, mr_f32_to_f16(0x1.004p-11f)), 0x3c01);
	/* summed as numbers, not as integers: 1 + 1 = 2 (0x3c00 + 0x3c00 would be 0x7800) */
	assert_int_equal(h_sum(0x3c00, 0x3c00), 0x4000);
	assert_int_equal(h_sum(0x7bff, 0x7bff), 0x7c00); /* overflow to inf */
	assert_int_equal(h_sum(0x0001, 0x0001), 0x0002); /* subnormals add exactly */
	assert_int_equal(h_sum(0x3c00, 0xbc00), 0x0000);
	/* 2048 + 1 = 2049 is a tie between 2048 and 2050: even mantissa is 2048 */
	assert_int_equal(h_sum(mr_f32_to_f16(2048.0f), 0x3c00), mr_f32_to_f16(2048.0f));
	assert_int_equal(h_sum(mr_f32_to_f16(2050.0f), 0x3c00), mr_f32_to_f16(2052.0f));
}

static void test_bf16(void **state)
{
	(void)state;
	assert_true(mr_bf16_to_f32(0x3f80) == 1.0f);
	assert_int_equal(mr_f32_to_bf16(1.0f), 0x3f80);
	/* 1 + 2^-8 is a tie between 1 and 1+2^-7: even is 1 */
	assert_int_equal(bf_sum(0x3f80, mr_f32_to_bf16(0x1p-8f)), 0x3f80);
	assert_int_equal(bf_sum(0x3f81, mr_f32_to_bf16(0x1p-8f)), 0x3f82);
	assert_int_equal(bf_sum(0x3f80, 0x3f80), 0x4000);
	/* 256 + 1: tie, even is 256; 258 + 1 rounds to 260 */
	assert_int_equal(bf_sum(mr_f32_to_bf16(256.0f), 0x3f80), mr_f32_to_bf16(256.0f));
	assert_int_equal(bf_sum(mr_f32_to_bf16(258.0f), 0x3f80), mr_f32_to_bf16(260.0f));
	assert_int_equal(mr_f32_to_bf16(INFINITY), 0x7f80);
	assert_true((mr_f32_to_bf16(NAN) & 0x7fff) > 0x7f80);
	assert_int_equal(mr_f32_to_bf16(0x1.fffffep127f), 0x7f80); /* rounds to inf */
}

static void test_int_bool_float(void **state)
{
	int8_t a8[3] = { 127, -128, 5 }, b8[3] = { 1, -1, -7 };
	uint32_t a32[2] = { 0xffffffffu, 3 }, b32[2] = { 2, 9 };
	uint8_t ab[4] = { 0, 1, 0, 1 }, bb[4] = { 0, 0, 1, 1 };
	double ad[2] = { 1.5, NAN }, bd[2] = { NAN, 2.0 };
	int64_t a64[1] = { INT64_MAX }, b64[1] = { 1 };

	(void)state;
	mr_reduce(MR_OP_SUM, MESHRUN_INT8, a8, b8, 3); /* two's complement wrap */
	assert_int_equal(a8[0], -128);
	assert_int_equal(a8[1], 127);
	assert_int_equal(a8[2], -2);
	mr_reduce(MR_OP_MAX, MESHRUN_UINT32, a32, b32, 2);
	assert_int_equal(a32[0], 0xffffffffu);
	assert_int_equal(a32[1], 9);
	mr_reduce(MR_OP_SUM, MESHRUN_INT64, a64, b64, 1);
	assert_true(a64[0] == INT64_MIN);
	uint8_t c[4];
	memcpy(c, ab, 4);
	mr_reduce(MR_OP_SUM, MESHRUN_BOOL, c, bb, 4);
	assert_memory_equal(c, ((uint8_t[]){ 0, 1, 1, 1 }), 4);
	memcpy(c, ab, 4);
	mr_reduce(MR_OP_MIN, MESHRUN_BOOL, c, bb, 4);
	assert_memory_equal(c, ((uint8_t[]){ 0, 0, 0, 1 }), 4);
	mr_reduce(MR_OP_MAX, MESHRUN_FLOAT64, ad, bd, 2); /* NaN wins either side */
	assert_true(isnan(ad[0]) && isnan(ad[1]));
	float f[2] = { -1.0f, 4.0f }, g[2] = { -3.0f, 2.0f };
	mr_reduce(MR_OP_MIN, MESHRUN_FLOAT32, f, g, 2);
	assert_true(f[0] == -3.0f && f[1] == 2.0f);
	assert_int_equal(mr_dtype_size(MESHRUN_BFLOAT16), 2);
	assert_int_equal(mr_dtype_size(MESHRUN_DTYPE_COUNT), 0);
	assert_false(mr_dtype_valid(-1));
}

/* The vectorised float32/float64 sums (blocks of 16 bytes x 4 plus a scalar
 * tail) equal the element-wise scalar sum for every length and any alignment,
 * and leave the bytes around the range alone. */
static void test_float_sum_blocks(void **state)
{
	float fa[80 + 3], fb[80 + 3], want[80 + 3];
	double da[40 + 3], db[40 + 3];

	(void)state;
	for (size_t off = 0; off < 3; off++) {
		for (size_t n = 0; n <= 80; n++) {
			for (size_t i = 0; i < ARRAY_SIZE(fa); i++) {
				fa[i] = (float)i * 0.37f - 3.0f;
				fb[i] = 1.0f / (float)(i + 1);
				want[i] = i >= off && i < off + n ? fa[i] + fb[i] : fa[i];
			}
			mr_reduce(MR_OP_SUM, MESHRUN_FLOAT32, fa + off, fb + off, n);
			assert_memory_equal(fa, want, sizeof(fa));
		}
		for (size_t n = 0; n <= 40; n++) {
			for (size_t i = 0; i < ARRAY_SIZE(da); i++) {
				da[i] = (double)i * 0.37 - 3.0;
				db[i] = 1.0 / (double)(i + 1);
			}
			mr_reduce(MR_OP_SUM, MESHRUN_FLOAT64, da + off, db + off, n);
			for (size_t i = 0; i < ARRAY_SIZE(da); i++) {
				double w = (double)i * 0.37 - 3.0;
				if (i >= off && i < off + n)
					w += 1.0 / (double)(i + 1);
				assert_true(da[i] == w);
			}
		}
	}
}

/*
 * max/min of float32/float64 (two 16-byte vectors a step, then a scalar tail)
 * choose exactly what the scalar rule does - x if x is NaN, else y if y is
 * NaN, else the larger/smaller, y on a tie - bit for bit (NaN payloads, signed
 * zeros) for every pair of special values, at every offset and length.
 */
#define MINMAX_REF(op, x, y)                                                     \
	(isnan(x) ? (x) : isnan(y) ? (y) : (op) == MR_OP_MAX ? ((x) > (y) ? (x) : (y)) \
							      : ((x) < (y) ? (x) : (y)))

static void test_float_minmax_blocks(void **state)
{
	const float fs[] = { 0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN,
			     1e-40f, -1e-40f, 3.5f, 3.5f /* [11]: a NaN with a payload */, FLT_MAX, -FLT_MAX, 2.0f, 0.5f };
	const double ds[] = { 0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, -NAN,
			      1e-310, -1e-310, 3.5, 3.5, DBL_MAX, -DBL_MAX, 2.0, 0.5 };
	enum { K = 16, N = K * K + 7 };
	float fa[N], fb[N], fw[N];
	double da[N], db[N], dw[N];
	float fp[K];
	uint32_t payload = 0x7fc01234u; /* a NaN with a payload, to see it kept */

	(void)state;
	assert_int_equal(ARRAY_SIZE(fs), K);
	assert_int_equal(ARRAY_SIZE(ds), K);
	memcpy(fp, fs, sizeof(fp));
	memcpy(&fp[11], &payload, sizeof(payload));
	for (int op = MR_OP_MAX; op <= MR_OP_MIN; op++) {
		/* every pair alone: the scalar tail */
		for (size_t p = 0; p < K; p++) {
			for (size_t q = 0; q < K; q++) {
				float f = fp[p], fw1 = MINMAX_REF(op, fp[p], fp[q]);
				double d = ds[p], dw1 = MINMAX_REF(op, ds[p], ds[q]);
				mr_reduce((enum mr_op)op, MESHRUN_FLOAT32, &f, &fp[q], 1);
				mr_reduce((enum mr_op)op, MESHRUN_FLOAT64, &d, &ds[q], 1);
				assert_memory_equal(&f, &fw1, sizeof(f));
				assert_memory_equal(&d, &dw1, sizeof(d));
			}
		}
		for (size_t off = 0; off < 3; off++) {
			for (size_t n = off; n <= N; n += 37) {
				for (size_t i = 0; i < N; i++) {
					fa[i] = fp[i % K];
					fb[i] = fp[(i / K) % K];
					da[i] = ds[i % K];
					db[i] = ds[(i / K) % K];
				}
				for (size_t i = 0; i < N; i++) {
					fw[i] = i >= off && i < n ? MINMAX_REF(op, fa[i], fb[i]) : fa[i];
					dw[i] = i >= off && i < n ? MINMAX_REF(op, da[i], db[i]) : da[i];
				}
				mr_reduce((enum mr_op)op, MESHRUN_FLOAT32, fa + off, fb + off, n - off);
				mr_reduce((enum mr_op)op, MESHRUN_FLOAT64, da + off, db + off, n - off);
				assert_memory_equal(fa, fw, sizeof(fa));
				assert_memory_equal(da, dw, sizeof(da));
			}
		}
	}
}

/*
 * max/min of float16 and bfloat16: a NaN on either side wins, as for float32, so
 * the result does not depend on which rank's buffer is the accumulator; and the
 * larger/smaller finite value otherwise.
 */
static void test_half_max_min(void **state)
{
	static const struct {
		enum meshrun_dtype dt;
		uint16_t nan, one, two; /* quiet NaN, 1.0, 2.0 */
	} t[] = { { MESHRUN_FLOAT16, 0x7e00, 0x3c00, 0x4000 },
		  { MESHRUN_BFLOAT16, 0x7fc0, 0x3f80, 0x4000 } };

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(t); k++) {
		for (int op = MR_OP_MAX; op <= MR_OP_MIN; op++) {
			uint16_t a[3] = { t[k].nan, t[k].one, t[k].one };
			uint16_t b[3] = { t[k].one, t[k].nan, t[k].two };

			mr_reduce((enum mr_op)op, t[k].dt, a, b, 3);
			assert_true((a[0] & 0x7fff) > (t[k].dt == MESHRUN_FLOAT16 ? 0x7c00 : 0x7f80));
			assert_true((a[1] & 0x7fff) > (t[k].dt == MESHRUN_FLOAT16 ? 0x7c00 : 0x7f80));
			assert_int_equal(a[2], op == MR_OP_MAX ? t[k].two : t[k].one);
		}
	}
}

/*
 * float16 and bfloat16 sum, max and min: the vector paths at each level (F16C
 * or NEON for float16, SSE2/NEON or AVX2 vectors for bfloat16) give the scalar
 * loops' bits for every first operand, against zeros, subnormals, the largest
 * finite values, infinities, NaNs, rounding boundaries and pseudo-random
 * values, at every position of a block and in the tail; where both sums are
 * NaN, any NaN passes (a NaN sum is whichever operand the addition picks).
 */
static bool half_nan(enum meshrun_dtype dt, uint16_t v)
{
	return (v & 0x7fffu) > (dt == MESHRUN_FLOAT16 ? 0x7c00u : 0x7f80u);
}

static void test_half_vector(void **state)
{
	enum { N = 65536 + 5 }; /* every value, then a tail of 5 */
	static const uint16_t special[] = {
		0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01,
		0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xfe00, 0x0080, 0x007f,
		0x7f7f, 0x7f80, 0x7fc0, 0x7f81, 0x3f80, 0xbf80, 0x4000, 0x1000, 0x0200,
	};
	static const enum meshrun_dtype dts[] = { MESHRUN_FLOAT16, MESHRUN_BFLOAT16 };
	uint16_t yv[64];
	uint16_t *x = malloc(N * sizeof(*x)), *y = malloc(N * sizeof(*y));
	uint16_t *fast = malloc(N * sizeof(*fast)), *slow = malloc(N * sizeof(*slow));
	uint32_t seed = 12345;

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(fast);
	assert_non_null(slow);
	for (size_t k = 0; k < ARRAY_SIZE(yv); k++) {
		seed = seed * 1103515245u + 12345u;
		yv[k] = k < ARRAY_SIZE(special) ? special[k] : (uint16_t)(seed >> 16);
	}
	for (size_t i = 0; i < N; i++)
		x[i] = (uint16_t)(i < 65536 ? i : i * 40503u);
	for (size_t d = 0; d < ARRAY_SIZE(dts); d++) {
		for (int op = MR_OP_SUM; op <= MR_OP_MIN; op++) {
			for (size_t k = 0; k < ARRAY_SIZE(yv); k++) {
				for (size_t i = 0; i < N; i++)
					y[i] = yv[(i + k) % ARRAY_SIZE(yv)];
				memcpy(slow, x, N * sizeof(*x));
				mr_dtype_set_vec(MR_VEC_NONE);
				mr_reduce((enum mr_op)op, dts[d], slow, y, N);
				for (int lv = MR_VEC_BASE; lv <= MR_VEC_BEST; lv++) {
					memcpy(fast, x, N * sizeof(*x));
					mr_dtype_set_vec((enum mr_vec)lv);
					mr_reduce((enum mr_op)op, dts[d], fast, y, N);
					for (size_t i = 0; i < N; i++) {
						if (op == MR_OP_SUM && half_nan(dts[d], slow[i]) &&
						    half_nan(dts[d], fast[i]))
							continue;
						if (fast[i] != slow[i])
							fail_msg("%s %s, vector level %d: (0x%04x, 0x%04x) = 0x%04x, the scalar loop says 0x%04x",
								 dts[d] == MESHRUN_FLOAT16 ? "float16" : "bfloat16",
								 mr_op_name((enum mr_op)op), lv, x[i], y[i], fast[i],
								 slow[i]);
					}
				}
			}
		}
	}
	free(slow);
	free(fast);
	free(y);
	free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_convert),
		cmocka_unit_test(test_f16_sum_rounding),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_int_bool_float),
		cmocka_unit_test(test_float_sum_blocks),
		cmocka_unit_test(test_float_minmax_blocks),
		cmocka_unit_test(test_half_max_min),
		cmocka_unit_test(test_half_vector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
