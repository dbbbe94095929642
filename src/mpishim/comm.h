/*
 * comm.h - libmeshrun-mpi's communicators beyond the world's own collectives
 * (comm.c): MPI_Comm_split, the all-gather of a split communicator over the
 * world group's point-to-point messages, and the all-reduce that gathers every
 * rank's buffer and folds it locally (user ops, split communicators).
 * Called with mpi.c's mutex held. Errors fill err; nothing is printed here.
 */
#ifndef MR_MPISHIM_COMM_H
#define MR_MPISHIM_COMM_H

#include "common/compat.h"
#include "mpishim/mpishim.h"

/* How to fold one rank's buffer into the accumulator. */
struct mrmpi_fold {
	bool call;              /* call fn(in, acc, &count, &type), else mr_reduce */
	mrmpi_user_fn *fn;
	void *type;             /* the MPI_Datatype handle fn is given */
	int count;              /* elements of type */
	enum meshrun_dtype dt;  /* !call: n elements of dt, op */
	enum mr_op op;
	size_t n;
};

/* *out: a new communicator (free with MPI_Comm_free), only on success. */
int mrmpi_comm_split(struct mrmpi_comm *c, int color, int key, struct mrmpi_comm **out,
		     struct meshrun_err *err);
/* recv[rank*bytes..] = every member's send block; send may lie inside recv. */
int mrmpi_comm_allgather(struct mrmpi_comm *c, const void *send, void *recv, size_t bytes,
			 struct meshrun_err *err);
/* recv = send_0 op (send_1 op (... op send_{n-1})) on every rank; send may be recv. */
int mrmpi_comm_allreduce(struct mrmpi_comm *c, const void *send, void *recv, size_t bytes,
			 const struct mrmpi_fold *f, struct meshrun_err *err);

#endif
