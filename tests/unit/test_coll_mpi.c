/*
 * Unit tests for src/coll/mpi.c against a fake libmpi (tests/unit/fake/fakempi.c:
 * Open MPI's ABI, a world of 2 whose other rank mirrors this one): loading and
 * refusing a library, every collective through the public API (custom types and
 * ops for float16, bfloat16 and bool), MPI's error text in our message, and no
 * second MPI_Init after our MPI_Finalize. The order of the tests matters: MPI's
 * state is the process's.
 */
#include "common/compat.h"
#include "meshrun/meshrun.h"

#include <setjmp.h>
#include <cmocka.h>

static struct meshrun_group *init_mpi(int want, const char *msg)
{
	struct meshrun_group *g = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rc;

	setenv("MLX_MPI_LIBNAME", FAKE_MPI_PATH, 1);
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	rc = meshrun_init(&g, MESHRUN_BACKEND_MPI, MESHRUN_STRICT, &err);
	if (rc != want)
		fail_msg("meshrun_init: expected %d, got %d: %s", want, rc, err.msg);
	if (msg && !strstr(err.msg, msg))
		fail_msg("'%s' does not say '%s'", err.msg, msg);
	return g;
}

static void test_refuses_other_mpis(void **state)
{
	(void)state;
	setenv("FAKEMPI_VERSION", "MPICH Version: 4.1.2", 1);
	assert_null(init_mpi(MESHRUN_E_BACKEND, "is 'MPICH Version: 4.1.2', not Open MPI"));
	unsetenv("FAKEMPI_VERSION");
}

static void test_collectives(void **state)
{
	struct meshrun_group *g = init_mpi(0, NULL);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	float f[3] = { 1, 2, 3 }, fo[3];
	int64_t i64[2] = { -5, 7 };
	uint16_t h[2] = { 0x3E00, 0xBC00 };  /* float16 1.5, -1.0 */
	uint16_t bf[2] = { 0x3F80, 0x4040 }; /* bfloat16 1.0, 3.0 */
	uint8_t b[3] = { 0, 1, 2 };
	int32_t gat[4] = { 7, 8, 0, 0 }, sc[4] = { 1, 2, 3, 4 };
	char msg[6] = "hello", got[6] = "";

	(void)state;
	assert_non_null(g);
	assert_string_equal(meshrun_backend_name(g), "mpi");
	assert_int_equal(meshrun_size(g), 2);
	assert_int_equal(meshrun_rank(g), 0);

	assert_int_equal(meshrun_all_sum(g, f, fo, 3, MESHRUN_FLOAT32, &err), 0);
	assert_true(fo[0] == 2 && fo[1] == 4 && fo[2] == 6);
	assert_true(f[0] == 1); /* send untouched */
	assert_int_equal(meshrun_all_max(g, i64, i64, 2, MESHRUN_INT64, &err), 0);
	assert_true(i64[0] == -5 && i64[1] == 7);
	assert_int_equal(meshrun_all_sum(g, h, h, 2, MESHRUN_FLOAT16, &err), 0);
	assert_int_equal(h[0], 0x4200); /* 3.0 */
	assert_int_equal(h[1], 0xC000); /* -2.0 */
	assert_int_equal(meshrun_all_sum(g, bf, bf, 2, MESHRUN_BFLOAT16, &err), 0);
	assert_int_equal(bf[0], 0x4000); /* 2.0 */
	assert_int_equal(bf[1], 0x40C0); /* 6.0 */
	assert_int_equal(meshrun_all_min(g, b, b, 3, MESHRUN_BOOL, &err), 0);
	assert_true(!b[0] && b[1] && b[2]);

	assert_int_equal(meshrun_all_gather(g, gat, gat, 2, MESHRUN_INT32, &err), 0);
	assert_true(gat[0] == 7 && gat[1] == 8 && gat[2] == 7 && gat[3] == 8);
	assert_int_equal(meshrun_sum_scatter(g, sc, sc, 2, MESHRUN_INT32, &err), 0);
	assert_true(sc[0] == 2 && sc[1] == 4); /* rank 0's block of the sum */

	assert_int_equal(meshrun_send(g, msg, 6, MESHRUN_UINT8, 1, &err), 0);
	assert_int_equal(meshrun_recv(g, got, 6, MESHRUN_UINT8, 1, &err), 0);
	assert_string_equal(got, "hello");
	assert_int_equal(meshrun_barrier(g, &err), 0);
	assert_string_equal(err.msg, "");

	/* MPI's own error text reaches the message */
	setenv("FAKEMPI_FAIL", "MPI_Allreduce", 1);
	assert_int_equal(meshrun_all_sum(g, f, fo, 3, MESHRUN_FLOAT32, &err), MESHRUN_E_PEER);
	assert_non_null(strstr(err.msg, "mpi: MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated"));
	unsetenv("FAKEMPI_FAIL");
	meshrun_free(g);
}

/* We called MPI_Init, so the last group's end called MPI_Finalize: no new group. */
static void test_no_init_after_finalize(void **state)
{
	(void)state;
	assert_null(init_mpi(MESHRUN_E_BACKEND, "already finalized"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refuses_other_mpis),
		cmocka_unit_test(test_collectives),
		cmocka_unit_test(test_no_init_after_finalize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
