/* Unit tests for src/mpishim/probe.c: which user ops libmeshrun-mpi reduces natively. */
#include "common/compat.h"
#include "mpishim/mpishim.h"

#include <setjmp.h>
#include <cmocka.h>

/* MLX's simple_sum/max/min<float16_t>, with the compiler's own half type where
 * it has one (an arithmetic independent of libmeshrun's), else libmeshrun's
 * conversions as MLX's software float16_t does */
#ifdef __FLT16_MAX__
typedef _Float16 half;
#define H_LOAD(p) (*(const half *)(p))
#define H_STORE(p, v) (*(half *)(p) = (v))
#else
typedef float half;
#define H_LOAD(p) mr_f16_to_f32(*(const uint16_t *)(p))
#define H_STORE(p, v) (*(uint16_t *)(p) = mr_f32_to_f16(v))
#endif

static void h_sum(void *in, void *acc, int *len, void **dt)
{
	(void)dt;
	for (int i = 0; i < *len; i++) {
		half a = H_LOAD((uint16_t *)acc + i), b = H_LOAD((uint16_t *)in + i);
		H_STORE((uint16_t *)acc + i, (half)(a + b));
	}
}

static void h_max(void *in, void *acc, int *len, void **dt)
{
	(void)dt;
	for (int i = 0; i < *len; i++) {
		half a = H_LOAD((uint16_t *)acc + i), b = H_LOAD((uint16_t *)in + i);
		H_STORE((uint16_t *)acc + i, a < b ? b : a); /* std::max(acc, in) */
	}
}

static void bf_min(void *in, void *acc, int *len, void **dt)
{
	(void)dt;
	uint16_t *a = acc, *b = in;
	for (int i = 0; i < *len; i++)
		if (mr_bf16_to_f32(b[i]) < mr_bf16_to_f32(a[i]))
			a[i] = b[i];
}

static void bf_sum_truncating(void *in, void *acc, int *len, void **dt)
{
	(void)dt;
	uint16_t *a = acc, *b = in;
	for (int i = 0; i < *len; i++) { /* rounds toward zero: not libmeshrun's sum */
		float s = mr_bf16_to_f32(a[i]) + mr_bf16_to_f32(b[i]);
		uint32_t u;
		memcpy(&u, &s, 4);
		a[i] = (uint16_t)(u >> 16);
	}
}

static int ompi_mpi_probe_type; /* any address: the type handle */
static void *seen_type;
static void int16_sum(void *in, void *acc, int *len, void **dt)
{
	seen_type = *dt;
	int16_t *a = acc, *b = in;
	for (int i = 0; i < *len; i++)
		a[i] = (int16_t)(a[i] + b[i]);
}

static void probe(mrmpi_user_fn *fn, struct mrmpi_op *op)
{
	memset(op, 0, sizeof(*op));
	op->magic = MRMPI_OP;
	op->user = true;
	op->fn = fn;
	mrmpi_probe_op(op, &ompi_mpi_probe_type);
}

static void test_probe_native(void **state)
{
	struct mrmpi_op op;

	(void)state;
	probe(h_sum, &op);
	assert_true(op.probed);
	assert_int_equal(op.native_dt, MESHRUN_FLOAT16);
	assert_int_equal(op.native_op, MR_OP_SUM);
	probe(h_max, &op); /* half and bfloat16 order alike: bfloat16's max (probe.c) */
	assert_int_equal(op.native_dt, MESHRUN_BFLOAT16);
	assert_int_equal(op.native_op, MR_OP_MAX);
	probe(bf_min, &op);
	assert_int_equal(op.native_dt, MESHRUN_BFLOAT16);
	assert_int_equal(op.native_op, MR_OP_MIN);
}

static void test_probe_other_ops_are_called(void **state)
{
	struct mrmpi_op op;

	(void)state;
	probe(bf_sum_truncating, &op);
	assert_int_equal(op.native_dt, -1);
	probe(int16_sum, &op);
	assert_int_equal(op.native_dt, -1);
	assert_ptr_equal(seen_type, &ompi_mpi_probe_type); /* the function got the handle */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_native),
		cmocka_unit_test(test_probe_other_ops_are_called),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
