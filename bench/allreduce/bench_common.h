/*
 * bench_common.h - what the all-reduce benchmark programs share (C side; the
 * Gloo program, being C++, repeats the few lines it needs and must print the
 * same rows).
 *
 * Method, the same for every peer: per size, one untimed warm-up round, then
 * `repeats` timed rounds; a round is a barrier followed by bench_iters(bytes)
 * back-to-back in-place float32 sums, and its row is the mean time of one
 * operation in that round as seen by rank 0. After the timed rounds one
 * untimed sum of (rank + 1) checks the result (n(n+1)/2 everywhere).
 *
 * Rows on stdout, rank 0 only:  impl,ranks,bytes,round,seconds
 */
#ifndef MR_BENCH_COMMON_H
#define MR_BENCH_COMMON_H

#include "common/compat.h"
#include "meshrun/err.h"

#define BENCH_DEFAULT_SIZES "4K,16K,64K,256K,1M,4M,16M,64M,128M"
#define BENCH_MAX_SIZES 64

struct bench_sizes {
	size_t n;
	size_t bytes[BENCH_MAX_SIZES]; /* multiples of 4 (float32) */
};

/* "4K,1M,128M" -> sizes; errors name the bad entry. */
int bench_sizes_parse(const char *list, struct bench_sizes *out, struct meshrun_err *err);
/* Operations per timed round: enough that a round of small sizes lasts ms. */
int bench_iters(size_t bytes);
double bench_now(void);
void bench_row(const char *impl, int ranks, size_t bytes, int round, double sec);
/* 1 when every element of buf equals want, else 0 (prints the first mismatch). */
int bench_check(const char *impl, const float *buf, size_t count, float want);

#endif
