/*
 * bench_meshrun.h - the whole program of a peer that times libmeshrun's
 * in-place all_sum (float32, or --dtype) on one backend (bench-ar-ours: ring,
 * bench-meshrun-mpi: mpi), with the method and rows of bench_common.h.
 */
#ifndef MR_BENCH_MESHRUN_H
#define MR_BENCH_MESHRUN_H

#include "meshrun/meshrun.h"

/*
 * main() of such a peer: prog names it in messages, usage is the first line
 * of --help, label the default --label; the backend is forced (strict).
 * Returns the exit code: 0, 1 (init, a collective or the check failed) or
 * 2 (bad options).
 */
int bench_meshrun_main(int argc, char **argv, const char *prog, enum meshrun_backend backend,
		       const char *label, const char *usage);

#endif
