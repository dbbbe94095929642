/*
 * bench_common.h - what the all-reduce benchmark programs share (C side; the
 * Gloo program, being C++, repeats the few lines it needs and must print the
 * same rows).
 *
 * Method, the same for every peer: per size, one untimed warm-up round, then
 * `repeats` timed rounds; a round is a barrier followed by
 * bench_round_iters(bytes, round) back-to-back in-place sums (the warm-up
 * at least BENCH_WARMUP_OPS) of float32, or with --dtype (libmeshrun peers)
 * float16 or bfloat16, and its row is the mean time of one
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
/*
 * A timed round is BENCH_ROUND_BYTES / bytes operations (1..50). 64 MiB, not
 * 16: with 16, a 16 MiB round was one operation, and on a shared machine one
 * descheduling of one rank decided a whole sample (the ring's 2-rank 16 MiB
 * ratio to the best peer read 0.83x, 1.21x and 2.26x in three runs); four
 * operations per round average that out for every peer.
 */
#define BENCH_ROUND_BYTES (64u << 20)
/*
 * The warm-up round is at least this many operations: libmeshrun's mesh
 * backend tries both its schedules on a size's first six all-reduces
 * (MESHRUN_MESH_SCHEDULE=auto), and with one operation per round at 128 MiB
 * three of them fell into the timed rounds (a mesh call and a first ring
 * call, each 20-30% slower, in every mesh row). The same for every peer.
 */
#define BENCH_WARMUP_OPS 6

struct bench_sizes {
	size_t n;
	size_t bytes[BENCH_MAX_SIZES]; /* multiples of 4 (float32) */
};

/* The element type of the sums (--dtype). */
enum bench_dtype { BENCH_FLOAT32 = 0, BENCH_FLOAT16, BENCH_BFLOAT16 };

/* The options every C peer takes; a peer sets the defaults before parsing. */
struct bench_opts {
	const char *sizes;
	const char *label; /* implementation name in the rows */
	int repeats;
	const char *backend; /* --backend: libmeshrun peers only (bench_meshrun.h); NULL when not given */
	enum bench_dtype dtype; /* --dtype: set by bench_opts_parse; a peer that times float32
				 * only rejects the others */
};

/*
 * One peer's collective as bench_run_size() drives it: barrier and an
 * in-place sum of count elements of the options' dtype, each 0 or negative
 * on failure (the peer keeps its message in ctx).
 */
struct bench_peer {
	int rank, size;
	int (*barrier)(void *ctx);
	int (*sum)(void *ctx, void *buf, size_t count);
	void *ctx;
};

/*
 * Parse --sizes, --repeats, --label, --backend and --dtype into o (its values are the defaults)
 * and the size list into sz. Returns MR_OPT_OK; MR_OPT_HELP after printing
 * usage on stdout; else an error for the caller to print (err.msg) and exit 2.
 */
int bench_opts_parse(int argc, char **argv, const char *usage, struct bench_opts *o,
		     struct bench_sizes *sz, struct meshrun_err *err);
/* The largest of the sizes: the buffer every round uses. */
size_t bench_max_bytes(const struct bench_sizes *sz);
/*
 * The method above for one size on buf (bytes long), rows by rank 0. Returns
 * 0, 1 when the check failed (printed), or -1 when barrier or sum failed.
 */
int bench_run_size(const struct bench_peer *p, const struct bench_opts *o, size_t bytes,
		   void *buf);
/* Bytes of one element of dtype; its name. */
size_t bench_dtype_size(enum bench_dtype dtype);
const char *bench_dtype_name(enum bench_dtype dtype);

/* "4K,1M,128M" -> sizes; errors name the bad entry. */
int bench_sizes_parse(const char *list, struct bench_sizes *out, struct meshrun_err *err);
/* Operations in round `round` of a size: BENCH_ROUND_BYTES of them, enough that a
 * round of small sizes lasts ms and a mid-size round is more than one
 * operation; the warm-up (-1) at least BENCH_WARMUP_OPS. */
int bench_round_iters(size_t bytes, int round);
double bench_now(void);
void bench_row(const char *impl, int ranks, size_t bytes, int round, double sec);

#endif
