/*
 * mpi_abi.h - the part of Open MPI's ABI that the mpi backend uses, declared
 * here so that libmeshrun neither includes mpi.h nor links libmpi: the
 * library is loaded with dlopen (mpi.c) and these slots are filled by dlsym.
 *
 * Open MPI's handles (MPI_Comm, MPI_Datatype, MPI_Op, MPI_Errhandler) are
 * pointers to global objects that libmpi exports: MPI_COMM_WORLD is
 * &ompi_mpi_comm_world, MPI_FLOAT is &ompi_mpi_float, and so on. dlsym of the
 * object's name gives exactly the handle (MLX's mpi backend does the same).
 * This is Open MPI's ABI only (stable across 1.x..5.x for what is used here);
 * MPICH-family libraries use integer handles and are refused by name at init
 * (MPI_Get_library_version), before any of this is used.
 */
#ifndef MR_COLL_MPI_ABI_H
#define MR_COLL_MPI_ABI_H

#include "common/compat.h"

typedef void *mr_mpi_handle; /* MPI_Comm, MPI_Datatype, MPI_Op, MPI_Errhandler */

#define MR_MPI_SUCCESS 0
#define MR_MPI_IN_PLACE ((void *)1)
#define MR_MPI_MAX_STRING 256 /* MPI_MAX_ERROR_STRING, MPI_MAX_LIBRARY_VERSION_STRING */

/* struct ompi_status_public_t */
struct mr_mpi_status {
	int source, tag, error, cancelled;
	size_t ucount;
};

typedef void mr_mpi_user_fn(void *in, void *inout, int *len, mr_mpi_handle *dt);

/* X(slot, (parameters), symbol): the functions, all returning int. */
#define MR_MPI_FUNCS(X) \
	X(get_library_version, (char *v, int *len), MPI_Get_library_version) \
	X(initialized, (int *flag), MPI_Initialized) \
	X(finalized, (int *flag), MPI_Finalized) \
	X(init, (int *argc, char ***argv), MPI_Init) \
	X(finalize, (void), MPI_Finalize) \
	X(comm_rank, (mr_mpi_handle c, int *r), MPI_Comm_rank) \
	X(comm_size, (mr_mpi_handle c, int *s), MPI_Comm_size) \
	X(comm_dup, (mr_mpi_handle c, mr_mpi_handle *out), MPI_Comm_dup) \
	X(comm_free, (mr_mpi_handle *c), MPI_Comm_free) \
	X(comm_set_errhandler, (mr_mpi_handle c, mr_mpi_handle eh), MPI_Comm_set_errhandler) \
	X(error_string, (int code, char *s, int *len), MPI_Error_string) \
	X(type_contiguous, (int n, mr_mpi_handle old, mr_mpi_handle *out), MPI_Type_contiguous) \
	X(type_commit, (mr_mpi_handle *t), MPI_Type_commit) \
	X(type_free, (mr_mpi_handle *t), MPI_Type_free) \
	X(op_create, (mr_mpi_user_fn *fn, int commute, mr_mpi_handle *op), MPI_Op_create) \
	X(op_free, (mr_mpi_handle *op), MPI_Op_free) \
	X(allreduce, (const void *s, void *r, int n, mr_mpi_handle dt, mr_mpi_handle op, mr_mpi_handle c), MPI_Allreduce) \
	X(allgather, (const void *s, int sn, mr_mpi_handle sdt, void *r, int rn, mr_mpi_handle rdt, mr_mpi_handle c), MPI_Allgather) \
	X(reduce_scatter_block, (const void *s, void *r, int n, mr_mpi_handle dt, mr_mpi_handle op, mr_mpi_handle c), MPI_Reduce_scatter_block) \
	X(send, (const void *b, int n, mr_mpi_handle dt, int dst, int tag, mr_mpi_handle c), MPI_Send) \
	X(recv, (void *b, int n, mr_mpi_handle dt, int src, int tag, mr_mpi_handle c, struct mr_mpi_status *st), MPI_Recv) \
	X(get_count, (const struct mr_mpi_status *st, mr_mpi_handle dt, int *n), MPI_Get_count) \
	X(barrier, (mr_mpi_handle c), MPI_Barrier)

/* X(slot, symbol): the predefined objects whose addresses are the handles. */
#define MR_MPI_OBJECTS(X)                                                                     \
	X(comm_world, ompi_mpi_comm_world)                                                     \
	X(errors_return, ompi_mpi_errors_return)                                               \
	X(t_byte, ompi_mpi_byte)                                                               \
	X(t_int8, ompi_mpi_int8_t)                                                             \
	X(t_uint8, ompi_mpi_uint8_t)                                                           \
	X(t_int16, ompi_mpi_int16_t)                                                           \
	X(t_uint16, ompi_mpi_uint16_t)                                                         \
	X(t_int32, ompi_mpi_int32_t)                                                           \
	X(t_uint32, ompi_mpi_uint32_t)                                                         \
	X(t_int64, ompi_mpi_int64_t)                                                           \
	X(t_uint64, ompi_mpi_uint64_t)                                                         \
	X(t_float, ompi_mpi_float)                                                             \
	X(t_double, ompi_mpi_double)                                                           \
	X(op_sum, ompi_mpi_op_sum)                                                             \
	X(op_max, ompi_mpi_op_max)                                                             \
	X(op_min, ompi_mpi_op_min)

struct mr_mpi_api {
	void *lib; /* dlopen handle; never closed (Open MPI cannot be unloaded safely) */
#define MR_MPI_FN_SLOT(slot, args, sym) int(*slot) args;
	MR_MPI_FUNCS(MR_MPI_FN_SLOT)
#undef MR_MPI_FN_SLOT
#define MR_MPI_OBJ_SLOT(slot, sym) mr_mpi_handle slot;
	MR_MPI_OBJECTS(MR_MPI_OBJ_SLOT)
#undef MR_MPI_OBJ_SLOT
};

#endif
