/*
 * Unit tests of group.c, libmeshrun's front end, at its seam with the
 * backends: a fake ops table stands in for a backend whose buffers the host
 * cannot touch directly (nccl with GPU memory), so every move between the
 * caller's send and recv buffers must go through ops->copy, and a failed copy
 * must fail the call before the collective runs.
 */
#include "common/compat.h"
#include "coll/coll.h"
#include "common/err.h"

#include <setjmp.h>
#include <cmocka.h>

static int copies, collectives;
static bool copy_fails;

static int f_copy(struct meshrun_group *g, void *dst, const void *src, size_t bytes,
		  struct meshrun_err *err)
{
	(void)g;
	if (copy_fails)
		return mr_err_set(err, MESHRUN_E_PEER, "fake: copy of %zu bytes failed", bytes);
	copies++;
	memmove(dst, src, bytes);
	return 0;
}

/* A group of 2 whose peer holds the same values: sums double. */
static int f_all_reduce(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
			enum mr_op op, struct meshrun_err *err)
{
	(void)g, (void)dt, (void)op, (void)err;
	collectives++;
	for (size_t i = 0; i < count; i++)
		((float *)buf)[i] *= 2;
	return 0;
}

/* The peer (rank 1) contributes bytes of 0x77. */
static int f_all_gather(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err)
{
	(void)g, (void)err;
	collectives++;
	memset((char *)buf + bytes, 0x77, bytes);
	return 0;
}

/* Rank 0's block of the sum of two equal contributions. */
static int f_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			    enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	(void)g, (void)dt, (void)op, (void)err;
	collectives++;
	for (size_t i = 0; i < count; i++)
		((float *)buf)[i] *= 2;
	return 0;
}

static const struct mr_coll_ops fake_ops = {
	.name = "fake",
	.all_reduce = f_all_reduce,
	.all_gather = f_all_gather,
	.reduce_scatter = f_reduce_scatter,
	.copy = f_copy,
};

static int setup(void **state)
{
	(void)state;
	copies = collectives = 0;
	copy_fails = false;
	return 0;
}

static void test_out_of_place_uses_copy(void **state)
{
	struct meshrun_group g = { &fake_ops, 0, 2, NULL };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	float send[4] = { 1, 2, 3, 4 }, recv[4] = { 0 };
	float two[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	unsigned char gs[3] = { 1, 2, 3 }, gr[6] = { 0 };

	(void)state;
	assert_int_equal(meshrun_all_sum(&g, send, recv, 4, MESHRUN_FLOAT32, &err), 0);
	assert_int_equal(copies, 1);
	assert_true(recv[0] == 2 && recv[3] == 8 && send[0] == 1);
	/* in place: nothing to move */
	assert_int_equal(meshrun_all_sum(&g, recv, recv, 4, MESHRUN_FLOAT32, &err), 0);
	assert_int_equal(copies, 1);
	assert_true(recv[0] == 4);

	assert_int_equal(meshrun_all_gather(&g, gs, gr, 3, MESHRUN_UINT8, &err), 0);
	assert_int_equal(copies, 2);
	assert_memory_equal(gr, ((unsigned char[]){ 1, 2, 3, 0x77, 0x77, 0x77 }), 6);

	/* sum_scatter: the send blocks in, rank 0's block out, both by copy */
	assert_int_equal(meshrun_sum_scatter(&g, two, recv, 4, MESHRUN_FLOAT32, &err), 0);
	assert_int_equal(copies, 4);
	assert_true(recv[0] == 2 && recv[1] == 4 && recv[2] == 6 && recv[3] == 8);
	assert_true(two[4] == 5); /* the caller's send buffer is untouched */
	assert_int_equal(collectives, 4);
}

static void test_failed_copy_fails_the_call(void **state)
{
	struct meshrun_group g = { &fake_ops, 0, 2, NULL };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	float send[2] = { 1, 2 }, recv[4] = { 0 };

	(void)state;
	copy_fails = true;
	assert_int_equal(meshrun_all_sum(&g, send, recv, 2, MESHRUN_FLOAT32, &err), MESHRUN_E_PEER);
	assert_non_null(strstr(err.msg, "fake: copy of 8 bytes failed"));
	mr_err_clear(&err);
	assert_int_equal(meshrun_all_gather(&g, send, recv, 2, MESHRUN_FLOAT32, &err), MESHRUN_E_PEER);
	mr_err_clear(&err);
	assert_int_equal(meshrun_sum_scatter(&g, recv, send, 2, MESHRUN_FLOAT32, &err), MESHRUN_E_PEER);
	assert_int_equal(collectives, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_out_of_place_uses_copy, setup),
		cmocka_unit_test_setup(test_failed_copy_fails_the_call, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
