/*
 * mpishim.h - libmeshrun-mpi: the part of Open MPI's ABI that MLX's mpi backend
 * (mlx/distributed/mpi/mpi.cpp) loads, implemented on libmeshrun's public API,
 * so that an unchanged MLX program runs its collectives on libmeshrun
 * (`meshrun --backend mpi --mpi-impl meshrun`, or MLX_MPI_LIBNAME pointing here).
 *
 * What is exported (symbols.txt is the list; the link exports nothing else and
 * the test unit/mpishim_exports checks the built library against it with nm):
 *   MPI_Get_library_version  "libmeshrun-mpi X.Y.Z: meshrun's shim implementing the
 *                            Open MPI ABI subset MLX's mpi backend uses, over
 *                            libmeshrun (BACKEND)": MLX looks for "Open MPI"
 *   MPI_Init / MPI_Finalize  meshrun_init(ANY) / meshrun_free: the backend is
 *                            whatever libmeshrun's environment selects (the mesh
 *                            from MESHRUN_MESH_HOSTFILE, the ring from MLX_HOSTFILE
 *                            or MESHRUN_HOSTFILE, jaccl from JACCL_*: meshrun's
 *                            --mpi-impl meshrun sets one of them); no backend
 *                            configured gives a world of size 1, as Open MPI's
 *                            singleton does (MLX then uses no group)
 *   MPI_Comm_rank/size/split/free, MPI_Allreduce, MPI_Allgather, MPI_Send,
 *   MPI_Recv, MPI_Type_contiguous, MPI_Type_commit, MPI_Op_create
 *   objects: ompi_mpi_comm_world, ompi_mpi_op_sum|max|min, ompi_mpi_c_bool,
 *   ompi_mpi_[u]int{8,16,32,64}_t, ompi_mpi_float, ompi_mpi_double,
 *   ompi_mpi_c_complex. As in Open MPI, a handle (MPI_Comm, MPI_Datatype,
 *   MPI_Op) is the address of such an object; objects made by the calls
 *   (types, ops, split communicators) are malloc'ed structs of the same kinds.
 *
 * Data path: a contiguous buffer of a predefined type (or a contiguous type of
 * one) with MPI_SUM/MAX/MIN goes straight to meshrun_all_sum/max/min on the
 * caller's buffers (in place for MPI_IN_PLACE): no copy of ours. A user op on
 * a 2-byte type (MLX's float16 and bfloat16) is probed once on fixed inputs:
 * when its results match IEEE half or bfloat16 sum/max/min exactly, libmeshrun
 * reduces natively in that type; any other user op (MLX's complex64 max/min)
 * is applied by calling the user function: every rank's buffer is gathered
 * and folded in rank order (x0 op (x1 op ...)), the same order on every rank,
 * so the results are bit-identical and a non-commutative op is right too.
 *
 * Communicators: MPI_Comm_split exchanges (color, key) with an all-gather. A
 * split that keeps every rank in order shares the world's libmeshrun group; a
 * rank alone gets a size-1 communicator; any other split makes a communicator
 * over the world group's point-to-point messages (gathers by send/recv, pair
 * by pair in one global order since a send may wait for its receiver, the
 * reduction done locally in rank order). On jaccl-ring, point-to-point
 * messages reach ring neighbours only: MPI_Send/MPI_Recv, and a split's
 * collectives, between other ranks fail naming them. libmeshrun has no tags:
 * messages between two ranks are matched in the order they are sent, whatever
 * their communicator and tag (MPI would match by communicator and tag).
 *
 * Not supported, each failing with MPI_ERR_* and a message naming the call:
 * MPI_ANY_SOURCE, a send to oneself, color MPI_UNDEFINED, a receive count that
 * differs from the sender's, MPI_MAX/MIN on complex, a type not committed.
 *
 * Errors: every failing call writes one line "libmeshrun-mpi: MPI_Allreduce:
 * <libmeshrun's message>" to stderr and, by default, ends the process with the
 * Open MPI error class as its exit status, as Open MPI's default handler
 * (MPI_ERRORS_ARE_FATAL) does: MLX ignores the codes its collectives return,
 * so a returned error would leave it computing on a buffer that holds no
 * result. With MESHRUN_MPI_ERRORS=return the call returns the class instead
 * (MPI_ERRORS_RETURN). After a peer fails, libmeshrun's group is broken and
 * every later collective fails within MESHRUN_TIMEOUT; meshrun then sees the
 * rank's non-zero exit and stops the job naming it.
 *
 * Threads: calls are serialised by one mutex (MLX issues them from its
 * communication stream's thread).
 */
#ifndef MR_MPISHIM_MPISHIM_H
#define MR_MPISHIM_MPISHIM_H

#include "common/compat.h"
#include "coll/dtype.h" /* the arithmetic: libmeshrun's own, compiled in */
#include "meshrun/meshrun.h"

/* Open MPI's values (mpi.h) */
#define MR_MPI_SUCCESS 0
#define MR_MPI_ERR_COUNT 2
#define MR_MPI_ERR_TYPE 3
#define MR_MPI_ERR_COMM 5
#define MR_MPI_ERR_RANK 6
#define MR_MPI_ERR_OP 10
#define MR_MPI_ERR_ARG 13
#define MR_MPI_ERR_TRUNCATE 15
#define MR_MPI_ERR_OTHER 16
#define MR_MPI_ANY_SOURCE (-1)
#define MR_MPI_UNDEFINED (-32766)
#define MR_MPI_IN_PLACE ((void *)1)
#define MR_MPI_MAX_LIBRARY_VERSION_STRING 256

/* struct ompi_status_public_t */
struct mrmpi_status {
	int source, tag, error, cancelled;
	size_t ucount;
};

typedef void mrmpi_user_fn(void *in, void *inout, int *len, void **dt);

enum mrmpi_magic {
	MRMPI_COMM = 0x4d52434d, /* "MRCM" */
	MRMPI_TYPE = 0x4d525459,
	MRMPI_OP = 0x4d524f50,
};

struct mrmpi_comm {
	uint32_t magic;
	bool world;              /* ompi_mpi_comm_world */
	int rank, size;          /* in this communicator */
	int *members;            /* world rank of each member; NULL: the world's order */
	struct meshrun_group *g; /* the world's group (owned by the world) */
};

/* A datatype: size bytes = nbase elements of base (bool, ints, floats). */
struct mrmpi_type {
	uint32_t magic;
	bool predefined, committed;
	bool complex; /* pairs of float32: sum is native, max/min is not defined */
	enum meshrun_dtype base;
	size_t nbase; /* base elements per element */
	size_t size;  /* bytes per element */
	const char *name;
};

struct mrmpi_op {
	uint32_t magic;
	bool user;           /* MPI_Op_create: fn */
	enum mr_op builtin;  /* !user: sum, max, min */
	mrmpi_user_fn *fn;
	int commute;
	bool probed;         /* the 2-byte probe ran: native_dt/native_op say */
	int native_dt;       /* MESHRUN_FLOAT16 / MESHRUN_BFLOAT16, or -1: call fn */
	enum mr_op native_op;
};

/* The exported calls (mpi.c), in MLX's declarations: every handle is a pointer. */
int MPI_Get_library_version(char *version, int *len);
int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Comm_rank(void *comm, int *rank);
int MPI_Comm_size(void *comm, int *size);
int MPI_Comm_split(void *comm, int color, int key, void **newcomm);
int MPI_Comm_free(void **comm);
int MPI_Type_contiguous(int count, void *oldtype, void **newtype);
int MPI_Type_commit(void **type);
int MPI_Op_create(mrmpi_user_fn *fn, int commute, void **op);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, void *datatype, void *op,
		  void *comm);
int MPI_Allgather(const void *sendbuf, int sendcount, void *sendtype, void *recvbuf,
		  int recvcount, void *recvtype, void *comm);
int MPI_Send(const void *buf, int count, void *datatype, int dest, int tag, void *comm);
int MPI_Recv(void *buf, int count, void *datatype, int source, int tag, void *comm,
	     struct mrmpi_status *status);

/* The exported objects (mpi.c): their addresses are the predefined handles. */
extern struct mrmpi_comm ompi_mpi_comm_world;
extern struct mrmpi_op ompi_mpi_op_sum, ompi_mpi_op_max, ompi_mpi_op_min;
extern struct mrmpi_type ompi_mpi_c_bool, ompi_mpi_int8_t, ompi_mpi_uint8_t, ompi_mpi_int16_t,
	ompi_mpi_uint16_t, ompi_mpi_int32_t, ompi_mpi_uint32_t, ompi_mpi_int64_t,
	ompi_mpi_uint64_t, ompi_mpi_float, ompi_mpi_double, ompi_mpi_c_complex;

/*
 * probe.c: run a user op on 2-byte elements of type (the handle the user
 * function is given) once, and set op->native_dt/native_op when its results
 * equal libmeshrun's half or bfloat16 sum, max or min on every probe pair.
 */
void mrmpi_probe_op(struct mrmpi_op *op, void *type);

#endif
