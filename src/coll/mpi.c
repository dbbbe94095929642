/*
 * mpi.c - libmeshrun's mpi backend: collectives handed to Open MPI, loaded
 * with dlopen at init (mpi_abi.h declares what is used), so libmeshrun does
 * not depend on libmpi.
 *
 * init:
 *   1. not started by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK)
 *      and MPI not already initialised by the program: MESHRUN_E_BACKEND
 *      without loading anything (a singleton MPI_Init would only give the
 *      size-1 world that case 5 refuses anyway);
 *   2. dlopen MLX_MPI_LIBNAME, else libmpi.so, libmpi.so.40 (RTLD_GLOBAL:
 *      Open MPI's own plugins resolve libmpi's symbols through it);
 *   3. MPI_Get_library_version must name Open MPI (its handles are pointers
 *      to exported objects; MPICH's are integers): else MESHRUN_E_BACKEND;
 *   4. MPI_Init unless the program already did (MPI_Initialized);
 *   5. a world of size 1 is no group (MESHRUN_E_BACKEND, as MLX: `any` then
 *      falls through);
 *   6. our own communicator (MPI_Comm_dup of the world, so our messages never
 *      match the program's) with MPI_ERRORS_RETURN: failures come back as
 *      codes and MPI_Error_string text instead of aborting the process.
 *
 * Types: the fixed-width integers and float/double are Open MPI's; bool,
 * float16 and bfloat16 are contiguous byte types with user-defined
 * commutative ops that call mr_reduce (coll/dtype.h), so their results equal
 * the other backends' bit for bit. MPI counts are int: all-reduce, send and
 * recv are cut into pieces of at most 2^30 elements; all_gather and
 * sum_scatter blocks above INT_MAX elements are refused (MESHRUN_E_UNSUPPORTED).
 *
 * Process state: MPI itself is per process, so whether we called MPI_Init,
 * the loaded symbol table and the number of live mpi groups are kept once per
 * process (under a mutex); MPI_Finalize runs when the last group is freed,
 * and only when we initialised MPI. MPI cannot be initialised twice: a group
 * asked for after that fails with a message saying so.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/coll.h"
#include "coll/dl.h"
#include "coll/mpi_abi.h"
#include "common/err.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#define PIECE (1 << 30) /* elements (or bytes) per MPI call */
#define P2P_TAG 7

enum { CT_BOOL, CT_F16, CT_BF16, CT_COUNT };

struct mpi_group {
	mr_mpi_handle comm;
	mr_mpi_handle custom_type[CT_COUNT];
	mr_mpi_handle custom_op[CT_COUNT][3]; /* [type][enum mr_op] */
};

static struct {
	pthread_mutex_t mu;
	struct mr_mpi_api api;
	bool loaded;      /* api filled */
	bool we_init;     /* we called MPI_Init */
	bool finalized;   /* we called MPI_Finalize */
	int groups;       /* live mpi groups */
} proc = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The user-defined reductions: one function per (type, op), since MPI passes
 * no user data to them. */
#define USER_OP(fn, dt, op)                                                       \
	static void fn(void *in, void *inout, int *len, mr_mpi_handle *type)     \
	{                                                                         \
		(void)type;                                                       \
		mr_reduce(op, dt, inout, in, (size_t)*len);                       \
	}
USER_OP(bool_sum, MESHRUN_BOOL, MR_OP_SUM)
USER_OP(bool_max, MESHRUN_BOOL, MR_OP_MAX)
USER_OP(bool_min, MESHRUN_BOOL, MR_OP_MIN)
USER_OP(f16_sum, MESHRUN_FLOAT16, MR_OP_SUM)
USER_OP(f16_max, MESHRUN_FLOAT16, MR_OP_MAX)
USER_OP(f16_min, MESHRUN_FLOAT16, MR_OP_MIN)
USER_OP(bf16_sum, MESHRUN_BFLOAT16, MR_OP_SUM)
USER_OP(bf16_max, MESHRUN_BFLOAT16, MR_OP_MAX)
USER_OP(bf16_min, MESHRUN_BFLOAT16, MR_OP_MIN)

static mr_mpi_user_fn *const user_fns[CT_COUNT][3] = {
	[CT_BOOL] = { bool_sum, bool_max, bool_min },
	[CT_F16] = { f16_sum, f16_max, f16_min },
	[CT_BF16] = { bf16_sum, bf16_max, bf16_min },
};

static int custom_index(enum meshrun_dtype dt)
{
	switch (dt) {
	case MESHRUN_BOOL: return CT_BOOL;
	case MESHRUN_FLOAT16: return CT_F16;
	case MESHRUN_BFLOAT16: return CT_BF16;
	default: return -1;
	}
}

/* "MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated" */
static int mpi_fail(struct meshrun_err *err, int code, const char *what, int mrc)
{
	char s[MR_MPI_MAX_STRING + 1] = "";
	int len = 0;

	if (proc.api.error_string && proc.api.error_string(mrc, s, &len) == MR_MPI_SUCCESS &&
	    len >= 0 && len <= MR_MPI_MAX_STRING)
		s[len] = '\0';
	else
		snprintf(s, sizeof(s), "error %d", mrc);
	return mr_err_set(err, code, "mpi: %s: %s", what, s);
}

static bool launched_by_mpirun(void)
{
	static const char *const vars[] = { MR_ENV(OMPI_COMM_WORLD_SIZE), MR_ENV(PMIX_RANK),
					     MR_ENV(PMI_RANK), MR_ENV(PMI_SIZE) };

	for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
		if (getenv(vars[i]))
			return true;
	return false;
}

/* Open libmpi (flags: RTLD_NOLOAD to only find an already loaded one). */
static void *open_lib(int extra, const char **name, char *why, size_t cap)
{
	static const char *const defaults[] = { "libmpi.so", "libmpi.so.40" };
	const char *env = getenv(MR_ENV(MLX_MPI_LIBNAME));
	const char *const *names = defaults;
	size_t n = ARRAY_SIZE(defaults);

	if (env && *env) {
		names = &env;
		n = 1;
	}
	return mr_dl_open_first(names, n, RTLD_NOW | RTLD_GLOBAL | extra, name, why, cap);
}

/* Fill proc.api (with proc.mu held). */
static int load_api(struct meshrun_err *err)
{
	struct mr_mpi_api *a = &proc.api;
	const char *name;
	char why[512] = "";

	if (proc.loaded)
		return 0;
	if (!launched_by_mpirun()) {
		/* Only a program that initialised MPI itself can have a world here. */
		void *h = open_lib(RTLD_NOLOAD, &name, why, sizeof(why));
		int flag = 0;
		int (*initialized)(int *) = h ? (int (*)(int *))dlsym(h, "MPI_Initialized") : NULL;
		if (!initialized || initialized(&flag) != MR_MPI_SUCCESS || !flag) {
			if (h)
				dlclose(h); /* only drops the reference NOLOAD took */
			return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: not started by mpirun (no OMPI_COMM_WORLD_SIZE or PMIX_RANK in the environment)");
		}
		a->lib = h;
	} else {
		a->lib = open_lib(0, &name, why, sizeof(why));
		if (!a->lib)
			return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: cannot load '%s' (MLX_MPI_LIBNAME): %s", name, why);
	}

	/* Which MPI is it? Only Open MPI's handles are what mpi_abi.h says. */
	int (*version)(char *, int *) = (int (*)(char *, int *))dlsym(a->lib, "MPI_Get_library_version");
	char v[MR_MPI_MAX_STRING + 1] = "";
	int vlen = 0;
	if (!version)
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: '%s' has no MPI_Get_library_version: not an MPI-3 library", name);
	if (version(v, &vlen) != MR_MPI_SUCCESS || vlen < 0 || vlen > MR_MPI_MAX_STRING)
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: MPI_Get_library_version of '%s' failed", name);
	v[vlen] = '\0';
	v[strcspn(v, "\n,")] = '\0';
	if (!strstr(v, "Open MPI"))
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: '%s' is '%.80s', not Open MPI: only Open MPI's ABI is supported (point MLX_MPI_LIBNAME at Open MPI's libmpi.so)", name, v);

#define LOAD_FN(slot, args, sym)                                                                  \
	if (!(*(void **)&a->slot = dlsym(a->lib, #sym)))                                          \
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: '%s' has no symbol '%s'", name, #sym);
	MR_MPI_FUNCS(LOAD_FN)
#undef LOAD_FN
#define LOAD_OBJ(slot, sym)                                                                       \
	if (!(a->slot = dlsym(a->lib, #sym)))                                                     \
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: '%s' has no symbol '%s'", name, #sym);
	MR_MPI_OBJECTS(LOAD_OBJ)
#undef LOAD_OBJ
	proc.loaded = true;
	return 0;
}

/* MPI_Init unless done (with proc.mu held). */
static int init_mpi(struct meshrun_err *err)
{
	int flag = 0, rc;

	if (proc.api.finalized(&flag) == MR_MPI_SUCCESS && flag)
		return mr_err_set(err, MESHRUN_E_BACKEND, "mpi: MPI was already finalized in this process and cannot be initialised again");
	if (proc.api.initialized(&flag) == MR_MPI_SUCCESS && flag)
		return 0;
	if ((rc = proc.api.init(NULL, NULL)) != MR_MPI_SUCCESS)
		return mpi_fail(err, MESHRUN_E_BACKEND, "MPI_Init", rc);
	proc.we_init = true;
	return 0;
}

/* Finalize when we initialised and no group is left (with proc.mu held). */
static void maybe_finalize(void)
{
	if (proc.groups == 0 && proc.we_init && !proc.finalized) {
		proc.api.finalize();
		proc.finalized = true;
	}
}

static void free_group(struct mpi_group *m)
{
	const struct mr_mpi_api *a = &proc.api;

	for (int t = 0; t < CT_COUNT; t++) {
		for (int o = 0; o < 3; o++)
			if (m->custom_op[t][o])
				a->op_free(&m->custom_op[t][o]);
		if (m->custom_type[t])
			a->type_free(&m->custom_type[t]);
	}
	if (m->comm)
		a->comm_free(&m->comm);
	free(m);
}

static int make_custom(struct mpi_group *m, struct meshrun_err *err)
{
	const struct mr_mpi_api *a = &proc.api;
	static const int width[CT_COUNT] = { [CT_BOOL] = 1, [CT_F16] = 2, [CT_BF16] = 2 };
	int rc;

	for (int t = 0; t < CT_COUNT; t++) {
		if ((rc = a->type_contiguous(width[t], a->t_byte, &m->custom_type[t])) != MR_MPI_SUCCESS) {
			m->custom_type[t] = NULL;
			return mpi_fail(err, MESHRUN_E_SYS, "MPI_Type_contiguous", rc);
		}
		if ((rc = a->type_commit(&m->custom_type[t])) != MR_MPI_SUCCESS)
			return mpi_fail(err, MESHRUN_E_SYS, "MPI_Type_commit", rc);
		for (int o = 0; o < 3; o++) {
			if ((rc = a->op_create(user_fns[t][o], 1, &m->custom_op[t][o])) != MR_MPI_SUCCESS) {
				m->custom_op[t][o] = NULL;
				return mpi_fail(err, MESHRUN_E_SYS, "MPI_Op_create", rc);
			}
		}
	}
	return 0;
}

static int mpi_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	const struct mr_mpi_api *a = &proc.api;
	struct mpi_group *m = NULL;
	int rc, mrc, size = 0, rank = 0;
	(void)flags;

	pthread_mutex_lock(&proc.mu);
	if ((rc = load_api(err)) < 0 || (rc = init_mpi(err)) < 0)
		goto out_unlock;
	if ((mrc = a->comm_size(a->comm_world, &size)) != MR_MPI_SUCCESS) {
		rc = mpi_fail(err, MESHRUN_E_SYS, "MPI_Comm_size", mrc);
		goto out_finalize;
	}
	if (size < 2) {
		rc = mr_err_set(err, MESHRUN_E_BACKEND, "mpi: the MPI world has %d rank (no mpi group; start the program with mpirun -n N, N > 1)", size);
		goto out_finalize;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "mpi: out of memory");
		goto out_finalize;
	}
	if ((mrc = a->comm_dup(a->comm_world, &m->comm)) != MR_MPI_SUCCESS) {
		m->comm = NULL;
		rc = mpi_fail(err, MESHRUN_E_SYS, "MPI_Comm_dup", mrc);
		goto out_free;
	}
	if ((mrc = a->comm_set_errhandler(m->comm, a->errors_return)) != MR_MPI_SUCCESS) {
		rc = mpi_fail(err, MESHRUN_E_SYS, "MPI_Comm_set_errhandler", mrc);
		goto out_free;
	}
	if ((rc = make_custom(m, err)) < 0)
		goto out_free;
	if ((mrc = a->comm_rank(m->comm, &rank)) != MR_MPI_SUCCESS) {
		rc = mpi_fail(err, MESHRUN_E_SYS, "MPI_Comm_rank", mrc);
		goto out_free;
	}
	g->impl = m;
	g->rank = rank;
	g->size = size;
	proc.groups++;
	pthread_mutex_unlock(&proc.mu);
	return 0;

out_free:
	free_group(m);
out_finalize:
	maybe_finalize();
out_unlock:
	pthread_mutex_unlock(&proc.mu);
	return rc;
}

static void mpi_release(struct meshrun_group *g)
{
	struct mpi_group *m = g->impl;

	if (!m)
		return;
	pthread_mutex_lock(&proc.mu);
	free_group(m);
	g->impl = NULL;
	proc.groups--;
	maybe_finalize();
	pthread_mutex_unlock(&proc.mu);
}

static mr_mpi_handle builtin_type(enum meshrun_dtype dt)
{
	const struct mr_mpi_api *a = &proc.api;

	switch (dt) {
	case MESHRUN_INT8: return a->t_int8;
	case MESHRUN_INT16: return a->t_int16;
	case MESHRUN_INT32: return a->t_int32;
	case MESHRUN_INT64: return a->t_int64;
	case MESHRUN_UINT8: return a->t_uint8;
	case MESHRUN_UINT16: return a->t_uint16;
	case MESHRUN_UINT32: return a->t_uint32;
	case MESHRUN_UINT64: return a->t_uint64;
	case MESHRUN_FLOAT32: return a->t_float;
	case MESHRUN_FLOAT64: return a->t_double;
	default: return NULL;
	}
}

/* The MPI type and op for (dt, op). */
static void type_op(const struct mpi_group *m, enum meshrun_dtype dt, enum mr_op op,
		    mr_mpi_handle *type, mr_mpi_handle *mop)
{
	const struct mr_mpi_api *a = &proc.api;
	int c = custom_index(dt);

	if (c >= 0) {
		*type = m->custom_type[c];
		*mop = m->custom_op[c][op];
		return;
	}
	*type = builtin_type(dt);
	*mop = op == MR_OP_MAX ? a->op_max : op == MR_OP_MIN ? a->op_min : a->op_sum;
}

static int mpi_all_reduce(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
			  enum mr_op op, struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	size_t esz = mr_dtype_size((int)dt);
	mr_mpi_handle type, mop;

	type_op(m, dt, op, &type, &mop);
	for (size_t off = 0; off < count; off += PIECE) {
		int n = (int)MR_MIN(count - off, (size_t)PIECE);
		int rc = proc.api.allreduce(MR_MPI_IN_PLACE, (char *)buf + off * esz, n, type, mop, m->comm);
		if (rc != MR_MPI_SUCCESS)
			return mpi_fail(err, MESHRUN_E_PEER, "MPI_Allreduce", rc);
	}
	return 0;
}

static int mpi_all_gather(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	const struct mr_mpi_api *a = &proc.api;

	if (bytes > INT_MAX)
		return mr_err_set(err, MESHRUN_E_UNSUPPORTED, "mpi: all_gather of %zu bytes per rank: at most %d", bytes, INT_MAX);
	int rc = a->allgather(MR_MPI_IN_PLACE, 0, a->t_byte, buf, (int)bytes, a->t_byte, m->comm);
	if (rc != MR_MPI_SUCCESS)
		return mpi_fail(err, MESHRUN_E_PEER, "MPI_Allgather", rc);
	return 0;
}

static int mpi_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			      enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	size_t bytes = count * mr_dtype_size((int)dt);
	mr_mpi_handle type, mop;

	if (count > INT_MAX)
		return mr_err_set(err, MESHRUN_E_UNSUPPORTED, "mpi: sum_scatter of %zu elements per rank: at most %d", count, INT_MAX);
	type_op(m, dt, op, &type, &mop);
	int rc = proc.api.reduce_scatter_block(MR_MPI_IN_PLACE, buf, (int)count, type, mop, m->comm);
	if (rc != MR_MPI_SUCCESS)
		return mpi_fail(err, MESHRUN_E_PEER, "MPI_Reduce_scatter_block", rc);
	/* In place, MPI leaves this rank's block at the start; ours is at rank. */
	if (g->rank)
		memmove((char *)buf + (size_t)g->rank * bytes, buf, bytes);
	return 0;
}

static int mpi_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		    struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	size_t off = 0;

	do { /* a 0-byte message is still one message */
		int n = (int)MR_MIN(bytes - off, (size_t)PIECE);
		int rc = proc.api.send((const char *)buf + off, n, proc.api.t_byte, dst, P2P_TAG, m->comm);
		if (rc != MR_MPI_SUCCESS)
			return mpi_fail(err, MESHRUN_E_PEER, "MPI_Send", rc);
		off += (size_t)n;
	} while (off < bytes);
	return 0;
}

static int mpi_recv(struct meshrun_group *g, void *buf, size_t bytes, int src,
		    struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	size_t off = 0;

	do {
		struct mr_mpi_status st;
		int n = (int)MR_MIN(bytes - off, (size_t)PIECE), got = -1;
		int rc = proc.api.recv((char *)buf + off, n, proc.api.t_byte, src, P2P_TAG, m->comm, &st);
		if (rc != MR_MPI_SUCCESS)
			return mpi_fail(err, MESHRUN_E_PEER, "MPI_Recv", rc);
		if (proc.api.get_count(&st, proc.api.t_byte, &got) != MR_MPI_SUCCESS || got != n)
			return mr_err_set(err, MESHRUN_E_PROTO, "mpi: recv from rank %d: got %d bytes, expected %d (the sender's count differs)", src, got, n);
		off += (size_t)n;
	} while (off < bytes);
	return 0;
}

static int mpi_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	struct mpi_group *m = g->impl;
	int rc = proc.api.barrier(m->comm);

	if (rc != MR_MPI_SUCCESS)
		return mpi_fail(err, MESHRUN_E_PEER, "MPI_Barrier", rc);
	return 0;
}

const struct mr_coll_ops mr_coll_mpi_ops = {
	.name = "mpi",
	.init = mpi_init,
	.release = mpi_release,
	.all_reduce = mpi_all_reduce,
	.all_gather = mpi_all_gather,
	.reduce_scatter = mpi_reduce_scatter,
	.send = mpi_send,
	.recv = mpi_recv,
	.barrier = mpi_barrier,
};
