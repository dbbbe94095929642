/*
 * Unit tests for the nccl backend (src/coll/nccl.c) on a machine without a
 * GPU: meshrun_init(NCCL) must fail with MESHRUN_E_BACKEND and a message that
 * says what is missing (the CUDA runtime, the driver or a device, or NCCL),
 * and `any` must move on to a size-1 group. Skipped where a GPU is present:
 * there the backend is exercised by the device check script instead.
 */
#include "common/compat.h"
#include "coll/coll.h"
#include "common/err.h"

#include <setjmp.h>
#include <cmocka.h>

static void set_nccl_env(void)
{
	setenv("NCCL_HOST_IP", "127.0.0.1", 1);
	setenv("NCCL_PORT", "1", 1); /* never reached: init stops before the exchange */
	setenv("MLX_RANK", "0", 1);
	setenv("MLX_WORLD_SIZE", "2", 1);
	setenv("MLX_NCCL_TIMEOUT", "200", 1);
}

static void test_no_gpu_clear_message(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	(void)state;

	if (mr_coll_have_gpu())
		skip();
	set_nccl_env();
	assert_int_equal(meshrun_init(&g, MESHRUN_BACKEND_NCCL, MESHRUN_STRICT, &err), MESHRUN_E_BACKEND);
	assert_null(g);
	/* "no distributed backend available: nccl: no CUDA device: cudaGetDeviceCount: ..." or
	 * "...: nccl: no CUDA device: cannot load the CUDA runtime: ..." (no CUDA at all) */
	if (!strstr(err.msg, "nccl: no CUDA device: cudaGetDeviceCount: ") &&
	    !strstr(err.msg, "nccl: no CUDA device: cannot load the CUDA runtime: ") &&
	    !strstr(err.msg, "nccl: cannot load libnccl.so.2: "))
		fail_msg("unclear message: %s", err.msg);

	/* not strict: the size-1 group */
	mr_err_clear(&err);
	assert_int_equal(meshrun_init(&g, MESHRUN_BACKEND_NCCL, 0, &err), 0);
	assert_non_null(g);
	assert_string_equal(meshrun_backend_name(g), "none");
	assert_int_equal(meshrun_size(g), 1);
	meshrun_free(g);
}

static void test_missing_env_named(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	(void)state;

	unsetenv("NCCL_HOST_IP");
	unsetenv("NCCL_PORT");
	unsetenv("MLX_WORLD_SIZE");
	setenv("MLX_RANK", "0", 1);
	assert_int_equal(meshrun_init(&g, MESHRUN_BACKEND_NCCL, MESHRUN_STRICT, &err), MESHRUN_E_BACKEND);
	if (!strstr(err.msg, "nccl: missing environment variables NCCL_HOST_IP, NCCL_PORT, MLX_WORLD_SIZE"))
		fail_msg("message: %s", err.msg);
}

/* Not started by mpirun: the mpi backend is absent without loading libmpi. */
static void test_mpi_absent_outside_mpirun(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	(void)state;

	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_RANK");
	unsetenv("PMI_RANK");
	unsetenv("PMI_SIZE");
	assert_int_equal(meshrun_init(&g, MESHRUN_BACKEND_MPI, MESHRUN_STRICT, &err), MESHRUN_E_BACKEND);
	if (!strstr(err.msg, "mpi: not started by mpirun"))
		fail_msg("message: %s", err.msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_gpu_clear_message),
		cmocka_unit_test(test_missing_env_named),
		cmocka_unit_test(test_mpi_absent_outside_mpirun),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
