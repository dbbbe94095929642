/*
 * bench-meshrun-mpi - time libmeshrun's in-place float32 all_sum on its mpi
 * backend (forced, strict), with the method and rows of bench/allreduce
 * (bench_common.h), so that its rows stand next to bench-ar-mpi's plain
 * MPI_Allreduce. Run under mpirun; bench/mpi/run.sh runs both and prints
 * the ratio (it should be about 1: the same engine, plus our dispatch).
 */
#include "common/compat.h"
#include "bench_meshrun.h"

int main(int argc, char **argv)
{
	return bench_meshrun_main(argc, argv, "bench-meshrun-mpi", MESHRUN_BACKEND_MPI, "meshrun-mpi",
				  "bench-meshrun-mpi [--sizes LIST] [--repeats N]   (under mpirun)");
}
