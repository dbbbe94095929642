/*
 * coll.h - libmeshrun's group and the ops table every backend fills.
 *
 * group.c checks arguments, handles size-1 groups and in/out-of-place copies,
 * then calls the backend with one in-place buffer:
 *   all_reduce(buf, count)          buf: count elements, reduced in place
 *   all_gather(buf, bytes)          buf: size*bytes, own block already at rank*bytes
 *   reduce_scatter(buf, count)      buf: size*count elements; afterwards block
 *                                   `rank` holds the sum (other blocks: scratch)
 *   send/recv(bytes, peer)          any peer != rank
 * A backend that is not configured in the environment (or not built) returns
 * MESHRUN_E_BACKEND from init, so `any` moves on to the next one.
 *
 * The module's files (each backend's own header maps its files further):
 *   group.c      the public API (meshrun_*): argument checks, backend choice
 *   dtype.c      element types and reductions (dtype.h)
 *   env.c        the environment libmeshrun reads (env.h; names: common/envmap.h)
 *   tcp/         the TCP engine both TCP backends run on (tcp/tcp.h maps its
 *                files): connections (conn.h), wire format (wire.h), control
 *                plane and progress thread, stall watch, I/O, the ring schedule
 *   ring/        the ring backend over the engine (ring/ring.c; ring_conn.h)
 *   ring_plan.c  the ring schedule's layout (ring.h), pure arithmetic
 *   mesh/        the mesh backend over the engine, every cable at once
 *                (mesh/tcpmesh.h); it falls back to the engine's ring schedule
 *   mesh_plan.c  the mesh schedule shared by mesh/tcpmesh.c and jaccl.c (mesh_plan.h)
 *   accept.c     the accept gate of every TCP listener (tcp/conn.c, jaccl_side.c,
 *                nccl_boot.c): slots, eviction, hello deadline, token (accept.h)
 *   jaccl*.c     the jaccl and jaccl-ring backends over RDMA verbs (jaccl_types.h)
 *   nccl.c       the nccl backend; nccl_boot.c its id exchange (nccl_boot.h)
 *   mpi.c        the mpi backend over a dlopen'ed libmpi (mpi_abi.h)
 * Backends call down into env.c, dtype.c, the plans and the TCP engine
 * (coll/tcp/tcp.h, its conn.h and wire.h), never into each other.
 */
#ifndef MR_COLL_COLL_H
#define MR_COLL_COLL_H

#include "common/compat.h"
#include "coll/dtype.h"
#include "meshrun/meshrun.h"

struct meshrun_group;

struct mr_coll_ops {
	const char *name;
	int (*init)(struct meshrun_group *g, unsigned flags, struct meshrun_err *err);
	void (*release)(struct meshrun_group *g);
	int (*all_reduce)(struct meshrun_group *g, void *buf, size_t count,
			  enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err);
	int (*all_gather)(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err);
	int (*reduce_scatter)(struct meshrun_group *g, void *buf, size_t count,
			      enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err);
	int (*send)(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		    struct meshrun_err *err);
	int (*recv)(struct meshrun_group *g, void *buf, size_t bytes, int src,
		    struct meshrun_err *err);
	int (*barrier)(struct meshrun_group *g, struct meshrun_err *err);
	/* Optional: copy bytes between the caller's buffers (group.c's moves
	 * between send and recv) where they may be device memory (nccl);
	 * NULL: memmove. */
	int (*copy)(struct meshrun_group *g, void *dst, const void *src, size_t bytes,
		    struct meshrun_err *err);
};

struct meshrun_group {
	const struct mr_coll_ops *ops; /* NULL: the size-1 group */
	int rank, size;
	void *impl;                    /* the backend's state */
};

extern const struct mr_coll_ops mr_coll_ring_ops;  /* ring/ring.c */
extern const struct mr_coll_ops mr_coll_mesh_ops;  /* mesh/tcpmesh.c */
extern const struct mr_coll_ops mr_coll_jaccl_ops; /* jaccl.c, or jaccl_stub.c without libibverbs */
extern const struct mr_coll_ops mr_coll_mpi_ops;  /* mpi.c */
extern const struct mr_coll_ops mr_coll_nccl_ops; /* nccl.c */

/* True when this machine has an NVIDIA GPU (nccl is tried only then). */
bool mr_coll_have_gpu(void);

#endif
