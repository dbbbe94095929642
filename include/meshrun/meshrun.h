/*
 * meshrun/meshrun.h - libmeshrun: distributed collectives with MLX's environment.
 *
 *	struct meshrun_err err = MESHRUN_ERR_INIT;
 *	struct meshrun_group *g = NULL;
 *	if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0) {
 *		fprintf(stderr, "error: %s\n", err.msg);
 *		return 1;
 *	}
 *	rc = meshrun_all_sum(g, x, x, n, MESHRUN_FLOAT32, &err);   // in place
 *	meshrun_free(g);
 *
 * Backends and selection: meshrun_init() reads the environment MLX's backends
 * read. MESHRUN_BACKEND_ANY tries, in MLX's order, nccl (only where a GPU is
 * present), ring, mpi, jaccl, with meshrun's mesh (MESHRUN_MESH_HOSTFILE)
 * just before the ring; the first backend whose environment is present
 * is used and its failure is returned. A backend that is not built (jaccl
 * without libibverbs) or cannot be loaded (nccl without libcudart/libnccl or a
 * GPU, mpi without Open MPI's libmpi) counts as absent. When no backend is
 * configured, the call
 * fails with MESHRUN_E_BACKEND under MESHRUN_STRICT, and otherwise returns a
 * group of size 1 on which every collective is a copy.
 *
 * Ring backend environment (see docs of the ring backend in src/coll/ring.h):
 *   MLX_RANK (else OMPI_COMM_WORLD_RANK, else SLURM_PROCID), MLX_HOSTFILE,
 *   MLX_RING_VERBOSE, MESHRUN_JOB_TOKEN, MESHRUN_TIMEOUT (seconds, default 30).
 *
 * Calls: every call returns 0 or a negative MESHRUN_E_* code and fills err
 * (may be NULL) with a message; the library never prints (except verbose logs
 * the user asked for with MLX_RING_VERBOSE) and never exits. A group is used by
 * one thread at a time. After a communication failure (a peer died, closed,
 * stalled, or sent garbage) the group is broken: that call and every later one
 * return MESHRUN_E_PEER with the message naming the peer's rank and address.
 *
 * Buffers: send and recv may be the same buffer (in place) or disjoint. counts
 * are in elements of dtype. Buffers are owned by the caller.
 */
#ifndef MESHRUN_MESHRUN_H
#define MESHRUN_MESHRUN_H

#include <stddef.h>

#include "meshrun/err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct meshrun_group; /* opaque */

enum meshrun_backend {
	MESHRUN_BACKEND_ANY = 0,
	MESHRUN_BACKEND_RING,
	MESHRUN_BACKEND_JACCL,
	MESHRUN_BACKEND_NCCL,
	MESHRUN_BACKEND_MPI,
	MESHRUN_BACKEND_MESH, /* TCP over every cable of a full mesh (MESHRUN_MESH_HOSTFILE) */
};

enum meshrun_dtype {
	MESHRUN_BOOL = 0, /* 1 byte, 0 or 1; sum is logical or */
	MESHRUN_INT8,
	MESHRUN_INT16,
	MESHRUN_INT32,
	MESHRUN_INT64,
	MESHRUN_UINT8,
	MESHRUN_UINT16,
	MESHRUN_UINT32,
	MESHRUN_UINT64,
	MESHRUN_FLOAT16,  /* IEEE binary16, summed in float, rounded to nearest even */
	MESHRUN_BFLOAT16, /* bfloat16, summed in float, rounded to nearest even */
	MESHRUN_FLOAT32,
	MESHRUN_FLOAT64,
	MESHRUN_DTYPE_COUNT
};

/* meshrun_init() flags */
#define MESHRUN_STRICT 1u /* no configured backend is an error, not a size-1 group */

/* *g is set only on success; free it with meshrun_free(). */
MESHRUN_API int meshrun_init(struct meshrun_group **g, enum meshrun_backend which,
			     unsigned flags, struct meshrun_err *err);
/* NULL is a no-op. Closes every connection; peers see the group end. */
MESHRUN_API void meshrun_free(struct meshrun_group *g);
MESHRUN_API int meshrun_rank(const struct meshrun_group *g);
MESHRUN_API int meshrun_size(const struct meshrun_group *g);
/* "ring", "none" (size-1 group), ... */
MESHRUN_API const char *meshrun_backend_name(const struct meshrun_group *g);
/* Bytes per element; 0 for an invalid dtype. */
MESHRUN_API size_t meshrun_dtype_size(enum meshrun_dtype dt);
/* "float16", ...; "invalid" for an invalid dtype. */
MESHRUN_API const char *meshrun_dtype_name(enum meshrun_dtype dt);

/* Element-wise reduction over all ranks of count elements; every rank gets
 * bit-identical results. */
MESHRUN_API int meshrun_all_sum(struct meshrun_group *g, const void *send, void *recv,
				size_t count, enum meshrun_dtype dt, struct meshrun_err *err);
MESHRUN_API int meshrun_all_max(struct meshrun_group *g, const void *send, void *recv,
				size_t count, enum meshrun_dtype dt, struct meshrun_err *err);
MESHRUN_API int meshrun_all_min(struct meshrun_group *g, const void *send, void *recv,
				size_t count, enum meshrun_dtype dt, struct meshrun_err *err);
/* send: count elements; recv: size*count elements, rank r's input at r*count.
 * send may lie anywhere inside recv (in place). */
MESHRUN_API int meshrun_all_gather(struct meshrun_group *g, const void *send, void *recv,
				   size_t count, enum meshrun_dtype dt, struct meshrun_err *err);
/* Reduce-scatter (sum): send holds size*count elements; recv gets the count
 * elements of block `rank` of the sum. recv may be send (result at its start). */
MESHRUN_API int meshrun_sum_scatter(struct meshrun_group *g, const void *send, void *recv,
				    size_t count, enum meshrun_dtype dt, struct meshrun_err *err);
/* Point to point, to any rank (forwarded through the ring when not a
 * neighbour). Messages from one source arrive in order; the receiver's count
 * must equal the sender's. send returns once the data has left this process. */
MESHRUN_API int meshrun_send(struct meshrun_group *g, const void *buf, size_t count,
			     enum meshrun_dtype dt, int dst, struct meshrun_err *err);
MESHRUN_API int meshrun_recv(struct meshrun_group *g, void *buf, size_t count,
			     enum meshrun_dtype dt, int src, struct meshrun_err *err);
MESHRUN_API int meshrun_barrier(struct meshrun_group *g, struct meshrun_err *err);

#ifdef __cplusplus
}
#endif
#endif
