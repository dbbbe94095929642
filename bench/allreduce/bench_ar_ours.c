/*
 * bench-ar-ours - time libmeshrun's in-place all_sum, float32 or --dtype (one process per
 * rank, launched like any libmeshrun program: MLX_RANK + MLX_HOSTFILE).
 * Rows as bench_common.h says; run it through bench/allreduce/run.sh.
 */
#include "common/compat.h"
#include "bench_meshrun.h"

int main(int argc, char **argv)
{
	return bench_meshrun_main(argc, argv, "bench-ar-ours", MESHRUN_BACKEND_RING, "ours",
				  "bench-ar-ours [--sizes LIST] [--repeats N]");
}
