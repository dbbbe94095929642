/*
 * mpi.c - the exported MPI calls and objects of libmeshrun-mpi (mpishim.h).
 * comm.c holds the collectives of split communicators.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "mpishim/comm.h"
#include "mpishim/mpishim.h"

#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "0"
#endif

/* The predefined objects: their addresses are the handles MLX resolves. */
EXPORT struct mrmpi_comm ompi_mpi_comm_world = { MRMPI_COMM, true, 0, 1, NULL, NULL };
EXPORT struct mrmpi_op ompi_mpi_op_sum = { .magic = MRMPI_OP, .builtin = MR_OP_SUM, .commute = 1 };
EXPORT struct mrmpi_op ompi_mpi_op_max = { .magic = MRMPI_OP, .builtin = MR_OP_MAX, .commute = 1 };
EXPORT struct mrmpi_op ompi_mpi_op_min = { .magic = MRMPI_OP, .builtin = MR_OP_MIN, .commute = 1 };

#define PREDEF(sym, dt, n, cplx)                                                            \
	EXPORT struct mrmpi_type sym = { MRMPI_TYPE, true, true, cplx, dt, n, 0, #sym };
PREDEF(ompi_mpi_c_bool, MESHRUN_BOOL, 1, false)
PREDEF(ompi_mpi_int8_t, MESHRUN_INT8, 1, false)
PREDEF(ompi_mpi_uint8_t, MESHRUN_UINT8, 1, false)
PREDEF(ompi_mpi_int16_t, MESHRUN_INT16, 1, false)
PREDEF(ompi_mpi_uint16_t, MESHRUN_UINT16, 1, false)
PREDEF(ompi_mpi_int32_t, MESHRUN_INT32, 1, false)
PREDEF(ompi_mpi_uint32_t, MESHRUN_UINT32, 1, false)
PREDEF(ompi_mpi_int64_t, MESHRUN_INT64, 1, false)
PREDEF(ompi_mpi_uint64_t, MESHRUN_UINT64, 1, false)
PREDEF(ompi_mpi_float, MESHRUN_FLOAT32, 1, false)
PREDEF(ompi_mpi_double, MESHRUN_FLOAT64, 1, false)
PREDEF(ompi_mpi_c_complex, MESHRUN_FLOAT32, 2, true)
#undef PREDEF

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static enum { ST_NEW, ST_READY, ST_DONE } state;

/*
 * Report on stderr (mpishim.h says why), then end the process with the code
 * as its exit status, as Open MPI's default handler (MPI_ERRORS_ARE_FATAL)
 * does: MLX dispatches MPI_Allreduce/Allgather/Send/Recv without looking at
 * what they return, so a returned error would let it go on with a buffer that
 * holds no result. MESHRUN_MPI_ERRORS=return gives the codes back instead
 * (MPI_ERRORS_RETURN) for a program that checks them.
 */
MR_PRINTF(3, 4)
static int fail(const char *fn, int code, const char *fmt, ...)
{
	char msg[MESHRUN_ERR_MSG_MAX + 128];
	const char *mode = getenv(MR_ENV(MESHRUN_MPI_ERRORS));
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "libmeshrun-mpi: %s: %s\n", fn, msg);
	if (mode && strcmp(mode, "return") == 0)
		return code;
	if (mode && *mode && strcmp(mode, "fatal") != 0)
		fprintf(stderr, "libmeshrun-mpi: MESHRUN_MPI_ERRORS='%.40s' is neither 'fatal' nor 'return': errors are fatal\n",
			mode);
	fprintf(stderr, "libmeshrun-mpi: errors are fatal (as Open MPI's MPI_ERRORS_ARE_FATAL; "
			"MESHRUN_MPI_ERRORS=return gives the codes back): exiting with status %d\n",
		code);
	fflush(NULL);
	/* _exit: the program's other threads may hold locks its atexit handlers need */
	_exit(code);
}

static int fail_coll(const char *fn, const struct meshrun_err *err)
{
	return fail(fn, MR_MPI_ERR_OTHER, "%s", err->msg[0] ? err->msg : meshrun_strerror(err->code));
}

static size_t type_size(const struct mrmpi_type *t)
{
	return t->size ? t->size : t->nbase * meshrun_dtype_size(t->base);
}

/* Handle checks: NULL when the handle is not one of ours, with the error reported. */
static struct mrmpi_comm *get_comm(const char *fn, void *h, int *rc)
{
	struct mrmpi_comm *c = h;

	*rc = MR_MPI_SUCCESS;
	if (!c || c->magic != MRMPI_COMM) {
		*rc = fail(fn, MR_MPI_ERR_COMM, "invalid communicator %p", h);
		return NULL;
	}
	if (state != ST_READY) {
		*rc = fail(fn, MR_MPI_ERR_OTHER, "%s", state == ST_NEW ? "called before MPI_Init" : "called after MPI_Finalize");
		return NULL;
	}
	return c;
}

static struct mrmpi_type *get_type(const char *fn, void *h, int *rc)
{
	struct mrmpi_type *t = h;

	if (!t || t->magic != MRMPI_TYPE) {
		*rc = fail(fn, MR_MPI_ERR_TYPE, "invalid datatype %p (libmeshrun-mpi has the predefined types MLX uses and MPI_Type_contiguous)", h);
		return NULL;
	}
	if (!t->committed) {
		*rc = fail(fn, MR_MPI_ERR_TYPE, "datatype %p is not committed (MPI_Type_commit)", h);
		return NULL;
	}
	return t;
}

static bool count_ok(const char *fn, int count, int *rc)
{
	if (count < 0) {
		*rc = fail(fn, MR_MPI_ERR_COUNT, "negative count %d", count);
		return false;
	}
	return true;
}

EXPORT int MPI_Get_library_version(char *version, int *len)
{
	pthread_mutex_lock(&mu);
	int n = snprintf(version, MR_MPI_MAX_LIBRARY_VERSION_STRING,
			 "libmeshrun-mpi %s: meshrun's shim implementing the Open MPI ABI subset MLX's mpi backend uses, over libmeshrun (%s)",
			 MESHRUN_VERSION,
			 state == ST_READY ? meshrun_backend_name(ompi_mpi_comm_world.g) : "not initialised");
	pthread_mutex_unlock(&mu);
	*len = MR_MIN(n, MR_MPI_MAX_LIBRARY_VERSION_STRING - 1);
	return MR_MPI_SUCCESS;
}

EXPORT int MPI_Init(int *argc, char ***argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	int rc = MR_MPI_SUCCESS;

	(void)argc;
	(void)argv;
	pthread_mutex_lock(&mu);
	if (state != ST_NEW) {
		rc = fail("MPI_Init", MR_MPI_ERR_OTHER, "%s", state == ST_READY ? "called twice" : "called after MPI_Finalize");
		goto out;
	}
	if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0) {
		rc = fail_coll("MPI_Init", &err);
		goto out;
	}
	ompi_mpi_comm_world.g = g;
	ompi_mpi_comm_world.rank = meshrun_rank(g);
	ompi_mpi_comm_world.size = meshrun_size(g);
	state = ST_READY;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Finalize(void)
{
	int rc = MR_MPI_SUCCESS;

	pthread_mutex_lock(&mu);
	if (state != ST_READY) {
		rc = fail("MPI_Finalize", MR_MPI_ERR_OTHER, "%s", state == ST_NEW ? "called before MPI_Init" : "called twice");
	} else {
		meshrun_free(ompi_mpi_comm_world.g);
		ompi_mpi_comm_world.g = NULL;
		state = ST_DONE;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Comm_rank(void *comm, int *rank)
{
	int rc;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm("MPI_Comm_rank", comm, &rc);
	if (c)
		*rank = c->rank;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Comm_size(void *comm, int *size)
{
	int rc;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm("MPI_Comm_size", comm, &rc);
	if (c)
		*size = c->size;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Comm_split(void *comm, int color, int key, void **newcomm)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rc;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm("MPI_Comm_split", comm, &rc);
	if (!c)
		goto out;
	if (color == MR_MPI_UNDEFINED || color < 0) {
		rc = fail("MPI_Comm_split", MR_MPI_ERR_ARG, "color %d: MPI_UNDEFINED and negative colors are not supported by libmeshrun-mpi", color);
		goto out;
	}
	struct mrmpi_comm *nc = NULL;
	if (mrmpi_comm_split(c, color, key, &nc, &err) < 0) {
		rc = fail_coll("MPI_Comm_split", &err);
		goto out;
	}
	*newcomm = nc;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Comm_free(void **comm)
{
	int rc;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm("MPI_Comm_free", comm ? *comm : NULL, &rc);
	if (c && c->world) {
		rc = fail("MPI_Comm_free", MR_MPI_ERR_COMM, "MPI_COMM_WORLD cannot be freed");
	} else if (c) {
		c->magic = 0;
		free(c->members);
		free(c);
		*comm = NULL; /* MPI_COMM_NULL */
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Type_contiguous(int count, void *oldtype, void **newtype)
{
	int rc = MR_MPI_SUCCESS;

	pthread_mutex_lock(&mu);
	struct mrmpi_type *old = get_type("MPI_Type_contiguous", oldtype, &rc);
	if (!old || !count_ok("MPI_Type_contiguous", count, &rc))
		goto out;
	struct mrmpi_type *t = calloc(1, sizeof(*t));
	if (!t) {
		rc = fail("MPI_Type_contiguous", MR_MPI_ERR_OTHER, "out of memory");
		goto out;
	}
	*t = *old;
	t->predefined = false;
	t->committed = false;
	t->nbase = old->nbase * (size_t)count;
	t->size = type_size(old) * (size_t)count;
	t->name = "MPI_Type_contiguous";
	*newtype = t;
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Type_commit(void **type)
{
	struct mrmpi_type *t = type ? *type : NULL;
	int rc = MR_MPI_SUCCESS;

	pthread_mutex_lock(&mu);
	if (!t || t->magic != MRMPI_TYPE)
		rc = fail("MPI_Type_commit", MR_MPI_ERR_TYPE, "invalid datatype %p", (void *)t);
	else
		t->committed = true;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Op_create(mrmpi_user_fn *fn, int commute, void **op)
{
	if (!fn || !op)
		return fail("MPI_Op_create", MR_MPI_ERR_ARG, "NULL function or op");
	struct mrmpi_op *o = calloc(1, sizeof(*o));
	if (!o)
		return fail("MPI_Op_create", MR_MPI_ERR_OTHER, "out of memory");
	o->magic = MRMPI_OP;
	o->user = true;
	o->fn = fn;
	o->commute = commute;
	o->native_dt = -1;
	*op = o;
	return MR_MPI_SUCCESS;
}

/* How to reduce: natively (*dt, *mop over *n elements) or by calling op->fn. */
static int plan_reduce(const char *fn, struct mrmpi_type *t, struct mrmpi_op *op, void *type,
		       int count, enum meshrun_dtype *dt, enum mr_op *mop, size_t *n, bool *call)
{
	*call = false;
	if (!op->user) {
		if (t->complex && op->builtin != MR_OP_SUM)
			return fail(fn, MR_MPI_ERR_OP, "MPI_MAX/MPI_MIN are not defined on complex (%s)", t->name);
		*dt = t->base;
		*mop = op->builtin;
		*n = (size_t)count * t->nbase;
		return MR_MPI_SUCCESS;
	}
	if (type_size(t) == 2 && !t->complex) {
		if (!op->probed)
			mrmpi_probe_op(op, type);
		if (op->native_dt >= 0) {
			*dt = (enum meshrun_dtype)op->native_dt;
			*mop = op->native_op;
			*n = (size_t)count;
			return MR_MPI_SUCCESS;
		}
	}
	*call = true;
	return MR_MPI_SUCCESS;
}

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, void *datatype, void *op,
			 void *comm)
{
	static const char fn[] = "MPI_Allreduce";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mrmpi_op *o = op;
	enum meshrun_dtype dt = MESHRUN_UINT8;
	enum mr_op mop = MR_OP_SUM;
	size_t n = 0;
	bool call = false;
	int rc;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm(fn, comm, &rc);
	struct mrmpi_type *t = c ? get_type(fn, datatype, &rc) : NULL;
	if (!t || !count_ok(fn, count, &rc))
		goto out;
	if (!o || o->magic != MRMPI_OP) {
		rc = fail(fn, MR_MPI_ERR_OP, "invalid op %p", op);
		goto out;
	}
	if ((rc = plan_reduce(fn, t, o, datatype, count, &dt, &mop, &n, &call)) != MR_MPI_SUCCESS)
		goto out;
	const void *s = sendbuf == MR_MPI_IN_PLACE ? recvbuf : sendbuf;
	if (!call && !c->members) {
		/* the caller's buffers straight to libmeshrun: no copy of ours */
		int (*f)(struct meshrun_group *, const void *, void *, size_t, enum meshrun_dtype,
			 struct meshrun_err *) = mop == MR_OP_SUM ? meshrun_all_sum
						 : mop == MR_OP_MAX ? meshrun_all_max
								    : meshrun_all_min;
		if (f(c->g, s, recvbuf, n, dt, &err) < 0)
			rc = fail_coll(fn, &err);
		goto out;
	}
	struct mrmpi_fold fold = { .call = call, .fn = o->fn, .type = datatype, .count = count,
				   .dt = dt, .op = mop, .n = n };
	if (mrmpi_comm_allreduce(c, s, recvbuf, (size_t)count * type_size(t), &fold, &err) < 0)
		rc = fail_coll(fn, &err);
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, void *sendtype, void *recvbuf,
			 int recvcount, void *recvtype, void *comm)
{
	static const char fn[] = "MPI_Allgather";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rc = MR_MPI_SUCCESS;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm(fn, comm, &rc);
	struct mrmpi_type *rt = c ? get_type(fn, recvtype, &rc) : NULL;
	if (!rt || !count_ok(fn, recvcount, &rc))
		goto out;
	size_t bytes = (size_t)recvcount * type_size(rt);
	const void *s = (const char *)recvbuf + (size_t)c->rank * bytes;
	if (sendbuf != MR_MPI_IN_PLACE) {
		struct mrmpi_type *st = get_type(fn, sendtype, &rc);
		if (!st || !count_ok(fn, sendcount, &rc))
			goto out;
		if ((size_t)sendcount * type_size(st) != bytes) {
			rc = fail(fn, MR_MPI_ERR_TRUNCATE, "sends %zu bytes per rank but receives %zu", (size_t)sendcount * type_size(st), bytes);
			goto out;
		}
		s = sendbuf;
	}
	if ((c->members ? mrmpi_comm_allgather(c, s, recvbuf, bytes, &err)
			: meshrun_all_gather(c->g, s, recvbuf, bytes, MESHRUN_UINT8, &err)) < 0)
		rc = fail_coll(fn, &err);
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

/* The world rank of peer in c, or -1 (reported). */
static int world_peer(const char *fn, const struct mrmpi_comm *c, int peer, int *rc)
{
	if (peer == MR_MPI_ANY_SOURCE) {
		*rc = fail(fn, MR_MPI_ERR_RANK, "MPI_ANY_SOURCE is not supported by libmeshrun-mpi: name the source rank");
		return -1;
	}
	if (peer < 0 || peer >= c->size) {
		*rc = fail(fn, MR_MPI_ERR_RANK, "rank %d is not in the communicator (size %d)", peer, c->size);
		return -1;
	}
	if (peer == c->rank) {
		*rc = fail(fn, MR_MPI_ERR_RANK, "rank %d is this rank: a blocking message to oneself is not supported", peer);
		return -1;
	}
	return c->members ? c->members[peer] : peer;
}

EXPORT int MPI_Send(const void *buf, int count, void *datatype, int dest, int tag, void *comm)
{
	static const char fn[] = "MPI_Send";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rc, peer;

	(void)tag; /* libmeshrun has no tags: messages match in order (mpishim.h) */
	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm(fn, comm, &rc);
	struct mrmpi_type *t = c ? get_type(fn, datatype, &rc) : NULL;
	if (!t || !count_ok(fn, count, &rc) || (peer = world_peer(fn, c, dest, &rc)) < 0)
		goto out;
	if (meshrun_send(c->g, buf, (size_t)count * type_size(t), MESHRUN_UINT8, peer, &err) < 0)
		rc = fail_coll(fn, &err);
out:
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT int MPI_Recv(void *buf, int count, void *datatype, int source, int tag, void *comm,
		    struct mrmpi_status *status)
{
	static const char fn[] = "MPI_Recv";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int rc, peer;

	pthread_mutex_lock(&mu);
	struct mrmpi_comm *c = get_comm(fn, comm, &rc);
	struct mrmpi_type *t = c ? get_type(fn, datatype, &rc) : NULL;
	if (!t || !count_ok(fn, count, &rc) || (peer = world_peer(fn, c, source, &rc)) < 0)
		goto out;
	size_t bytes = (size_t)count * type_size(t);
	if (meshrun_recv(c->g, buf, bytes, MESHRUN_UINT8, peer, &err) < 0) {
		rc = fail_coll(fn, &err);
		goto out;
	}
	if (status) { /* not MPI_STATUS_IGNORE */
		status->source = source;
		status->tag = tag < 0 ? 0 : tag;
		status->error = MR_MPI_SUCCESS;
		status->cancelled = 0;
		status->ucount = bytes;
	}
out:
	pthread_mutex_unlock(&mu);
	return rc;
}
