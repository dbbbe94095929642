/*
 * fakempi.c - a fake libmpi with Open MPI's ABI as src/coll/mpi_abi.h declares it,
 * for tests/unit/test_coll_mpi.c: a world of 2 ranks in one process, this one
 * rank FAKEMPI_RANK (default 0), the other a mirror that contributes the same
 * data (so a sum doubles, max and min keep it), and messages sent to it come back.
 *
 *   FAKEMPI_VERSION  what MPI_Get_library_version says (default Open MPI's)
 *   FAKEMPI_FAIL     the MPI_* function that fails with error 15 (MPI_ERR_TRUNCATE)
 */
#include "common/compat.h"
#include "coll/mpi_abi.h"

/* The prototypes come from the ABI table: a signature that drifts fails here. */
#define FAKE_DECL(slot, args, sym) int sym args;
MR_MPI_FUNCS(FAKE_DECL)
#undef FAKE_DECL

enum kind { K_BYTES, K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64, K_F32, K_F64 };
enum opk { O_SUM, O_MAX, O_MIN, O_USER };

struct fake_type {
	size_t size;
	enum kind kind;
};
struct fake_op {
	enum opk kind;
	mr_mpi_user_fn *fn;
};

#define FAKE_TYPE(sym, sz, k) struct fake_type sym = { sz, k };
FAKE_TYPE(ompi_mpi_byte, 1, K_BYTES)
FAKE_TYPE(ompi_mpi_int8_t, 1, K_I8)
FAKE_TYPE(ompi_mpi_uint8_t, 1, K_U8)
FAKE_TYPE(ompi_mpi_int16_t, 2, K_I16)
FAKE_TYPE(ompi_mpi_uint16_t, 2, K_U16)
FAKE_TYPE(ompi_mpi_int32_t, 4, K_I32)
FAKE_TYPE(ompi_mpi_uint32_t, 4, K_U32)
FAKE_TYPE(ompi_mpi_int64_t, 8, K_I64)
FAKE_TYPE(ompi_mpi_uint64_t, 8, K_U64)
FAKE_TYPE(ompi_mpi_float, 4, K_F32)
FAKE_TYPE(ompi_mpi_double, 8, K_F64)
struct fake_op ompi_mpi_op_sum = { O_SUM, NULL };
struct fake_op ompi_mpi_op_max = { O_MAX, NULL };
struct fake_op ompi_mpi_op_min = { O_MIN, NULL };
int ompi_mpi_comm_world = 1;
int ompi_mpi_errors_return = 1;

#define ERR_TRUNCATE 15
static int inited, finalized;
static unsigned char *mailbox;
static size_t mailbox_len;

static int fails(const char *sym)
{
	const char *f = getenv("FAKEMPI_FAIL");

	return f && !strcmp(f, sym) ? ERR_TRUNCATE : MR_MPI_SUCCESS;
}

static int my_rank(void)
{
	const char *r = getenv("FAKEMPI_RANK");

	return r && *r == '1' ? 1 : 0;
}

int MPI_Get_library_version(char *v, int *len)
{
	const char *s = getenv("FAKEMPI_VERSION");

	snprintf(v, MR_MPI_MAX_STRING, "%s", s ? s : "Open MPI v4.1.6, package: fakempi");
	*len = (int)strlen(v);
	return MR_MPI_SUCCESS;
}

int MPI_Initialized(int *flag) { *flag = inited; return MR_MPI_SUCCESS; }
int MPI_Finalized(int *flag) { *flag = finalized; return MR_MPI_SUCCESS; }

int MPI_Init(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	inited = 1;
	return fails("MPI_Init");
}

int MPI_Finalize(void)
{
	finalized = 1;
	free(mailbox);
	mailbox = NULL;
	return MR_MPI_SUCCESS;
}

int MPI_Comm_rank(mr_mpi_handle c, int *r) { (void)c; *r = my_rank(); return MR_MPI_SUCCESS; }
int MPI_Comm_size(mr_mpi_handle c, int *s) { (void)c; *s = 2; return fails("MPI_Comm_size"); }

int MPI_Comm_dup(mr_mpi_handle c, mr_mpi_handle *out)
{
	(void)c;
	*out = malloc(1);
	return *out ? MR_MPI_SUCCESS : ERR_TRUNCATE;
}

int MPI_Comm_free(mr_mpi_handle *c) { free(*c); *c = NULL; return MR_MPI_SUCCESS; }
int MPI_Comm_set_errhandler(mr_mpi_handle c, mr_mpi_handle eh) { (void)c; (void)eh; return MR_MPI_SUCCESS; }

int MPI_Error_string(int code, char *s, int *len)
{
	snprintf(s, MR_MPI_MAX_STRING, "%s", code == ERR_TRUNCATE ? "MPI_ERR_TRUNCATE: message truncated" : "MPI_ERR_UNKNOWN");
	*len = (int)strlen(s);
	return MR_MPI_SUCCESS;
}

int MPI_Type_contiguous(int n, mr_mpi_handle old, mr_mpi_handle *out)
{
	struct fake_type *t = malloc(sizeof(*t));

	if (!t)
		return ERR_TRUNCATE;
	t->size = (size_t)n * ((struct fake_type *)old)->size;
	t->kind = K_BYTES;
	*out = t;
	return MR_MPI_SUCCESS;
}

int MPI_Type_commit(mr_mpi_handle *t) { (void)t; return MR_MPI_SUCCESS; }
int MPI_Type_free(mr_mpi_handle *t) { free(*t); *t = NULL; return MR_MPI_SUCCESS; }

int MPI_Op_create(mr_mpi_user_fn *fn, int commute, mr_mpi_handle *op)
{
	struct fake_op *o = malloc(sizeof(*o));

	(void)commute;
	if (!o)
		return ERR_TRUNCATE;
	o->kind = O_USER;
	o->fn = fn;
	*op = o;
	return MR_MPI_SUCCESS;
}

int MPI_Op_free(mr_mpi_handle *op) { free(*op); *op = NULL; return MR_MPI_SUCCESS; }

#define COMBINE(T)                                                                        \
	for (int i = 0; i < n; i++) {                                                     \
		T a = ((const T *)in)[i], *b = &((T *)inout)[i];                          \
		*b = o->kind == O_SUM ? (T)(a + *b) : o->kind == O_MAX ? (a > *b ? a : *b) \
									: (a < *b ? a : *b); \
	}

/* inout = op(in, inout) for n elements of dt: the mirror rank's part of a reduction. */
static void combine(mr_mpi_handle dt, mr_mpi_handle op, const void *in, void *inout, int n)
{
	const struct fake_type *t = dt;
	const struct fake_op *o = op;

	if (o->kind == O_USER) {
		o->fn((void *)in, inout, &n, &dt);
		return;
	}
	switch (t->kind) {
	case K_I8: COMBINE(int8_t) break;
	case K_U8: COMBINE(uint8_t) break;
	case K_I16: COMBINE(int16_t) break;
	case K_U16: COMBINE(uint16_t) break;
	case K_I32: COMBINE(int32_t) break;
	case K_U32: COMBINE(uint32_t) break;
	case K_I64: COMBINE(int64_t) break;
	case K_U64: COMBINE(uint64_t) break;
	case K_F32: COMBINE(float) break;
	case K_F64: COMBINE(double) break;
	case K_BYTES: break;
	}
}

static int reduce_with_mirror(void *buf, int n, mr_mpi_handle dt, mr_mpi_handle op)
{
	size_t bytes = (size_t)n * ((struct fake_type *)dt)->size;
	void *mirror = malloc(bytes ? bytes : 1);

	if (!mirror)
		return ERR_TRUNCATE;
	memcpy(mirror, buf, bytes);
	combine(dt, op, mirror, buf, n);
	free(mirror);
	return MR_MPI_SUCCESS;
}

int MPI_Allreduce(const void *s, void *r, int n, mr_mpi_handle dt, mr_mpi_handle op, mr_mpi_handle c)
{
	(void)c;
	if (fails("MPI_Allreduce"))
		return ERR_TRUNCATE;
	if (s != MR_MPI_IN_PLACE)
		memcpy(r, s, (size_t)n * ((struct fake_type *)dt)->size);
	return reduce_with_mirror(r, n, dt, op);
}

int MPI_Allgather(const void *s, int sn, mr_mpi_handle sdt, void *r, int rn, mr_mpi_handle rdt,
		  mr_mpi_handle c)
{
	size_t block = (size_t)rn * ((struct fake_type *)rdt)->size;
	int me = my_rank();

	(void)s;
	(void)sn;
	(void)sdt;
	(void)c;
	memcpy((char *)r + (size_t)(1 - me) * block, (char *)r + (size_t)me * block, block);
	return fails("MPI_Allgather");
}

int MPI_Reduce_scatter_block(const void *s, void *r, int n, mr_mpi_handle dt, mr_mpi_handle op,
			     mr_mpi_handle c)
{
	size_t block = (size_t)n * ((struct fake_type *)dt)->size;

	(void)s;
	(void)c;
	/* in place: this rank's block of the result goes to the start */
	memmove(r, (char *)r + (size_t)my_rank() * block, block);
	return reduce_with_mirror(r, n, dt, op);
}

int MPI_Send(const void *b, int n, mr_mpi_handle dt, int dst, int tag, mr_mpi_handle c)
{
	size_t bytes = (size_t)n * ((struct fake_type *)dt)->size;
	unsigned char *m = malloc(bytes ? bytes : 1);

	(void)dst;
	(void)tag;
	(void)c;
	if (!m)
		return ERR_TRUNCATE;
	memcpy(m, b, bytes);
	free(mailbox);
	mailbox = m;
	mailbox_len = bytes;
	return fails("MPI_Send");
}

int MPI_Recv(void *b, int n, mr_mpi_handle dt, int src, int tag, mr_mpi_handle c,
	     struct mr_mpi_status *st)
{
	size_t cap = (size_t)n * ((struct fake_type *)dt)->size;

	(void)c;
	if (!mailbox || mailbox_len > cap)
		return ERR_TRUNCATE;
	memcpy(b, mailbox, mailbox_len);
	st->source = src;
	st->tag = tag;
	st->error = 0;
	st->ucount = mailbox_len;
	free(mailbox);
	mailbox = NULL;
	return MR_MPI_SUCCESS;
}

int MPI_Get_count(const struct mr_mpi_status *st, mr_mpi_handle dt, int *n)
{
	*n = (int)(st->ucount / ((struct fake_type *)dt)->size);
	return MR_MPI_SUCCESS;
}

int MPI_Barrier(mr_mpi_handle c) { (void)c; return fails("MPI_Barrier"); }
