#include "common/compat.h"
#include "coll/coll.h"
#include "common/err.h"
#include "common/port.h"

#include <unistd.h>

bool mr_coll_have_gpu(void)
{
	return mr_have_nvidia_gpu();
}

/* Append "; msg" (or msg) to the reasons, cut at the buffer's end. */
static void why_append(char *why, size_t cap, const char *msg)
{
	size_t len = strlen(why);

	if (len && len + 2 < cap) {
		memcpy(why + len, "; ", 3);
		len += 2;
	}
	size_t n = MR_MIN(strlen(msg), cap - 1 - len);
	memcpy(why + len, msg, n);
	why[len + n] = '\0';
}

static int try_backend(struct meshrun_group *g, const struct mr_coll_ops *ops, unsigned flags,
		       struct meshrun_err *err)
{
	g->ops = ops;
	int rc = ops->init(g, flags, err);
	if (rc < 0)
		g->ops = NULL;
	return rc;
}

int meshrun_init(struct meshrun_group **out, enum meshrun_backend which, unsigned flags,
		 struct meshrun_err *err)
{
	const struct mr_coll_ops *order[5];
	size_t n = 0;
	char why[MESHRUN_ERR_MSG_MAX] = "";
	int rc = 0;

	if (!out)
		return mr_err_set(err, MESHRUN_E_INVAL, "meshrun_init: NULL group pointer");
	*out = NULL;
	switch (which) {
	case MESHRUN_BACKEND_ANY:
		if (mr_coll_have_gpu())
			order[n++] = &mr_coll_nccl_ops;
		order[n++] = &mr_coll_mesh_ops; /* before the ring: meshrun sets both on a full mesh */
		order[n++] = &mr_coll_ring_ops;
		order[n++] = &mr_coll_mpi_ops;
		order[n++] = &mr_coll_jaccl_ops;
		break;
	case MESHRUN_BACKEND_RING: order[n++] = &mr_coll_ring_ops; break;
	case MESHRUN_BACKEND_JACCL: order[n++] = &mr_coll_jaccl_ops; break;
	case MESHRUN_BACKEND_NCCL: order[n++] = &mr_coll_nccl_ops; break;
	case MESHRUN_BACKEND_MPI: order[n++] = &mr_coll_mpi_ops; break;
	case MESHRUN_BACKEND_MESH: order[n++] = &mr_coll_mesh_ops; break;
	default:
		return mr_err_set(err, MESHRUN_E_INVAL, "meshrun_init: unknown backend %d", (int)which);
	}

	struct meshrun_group *g = calloc(1, sizeof(*g));
	if (!g)
		return mr_err_set(err, MESHRUN_E_NOMEM, "meshrun_init: out of memory");
	g->rank = 0;
	g->size = 1;
	for (size_t i = 0; i < n; i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		rc = try_backend(g, order[i], flags, &e);
		if (rc == 0)
			break;
		if (rc != MESHRUN_E_BACKEND) { /* configured but failed: that is the answer */
			mr_err_set(err, e.code, "%s", e.msg);
			goto out_free;
		}
		why_append(why, sizeof(why), e.msg);
	}
	if (rc < 0) {
		if (flags & MESHRUN_STRICT) {
			mr_err_set(err, MESHRUN_E_BACKEND, "no distributed backend available: %s", why);
			goto out_free;
		}
		g->ops = NULL; /* size-1 group */
		g->rank = 0;
		g->size = 1;
		rc = 0;
	}
	*out = g;
	return 0;

out_free:
	free(g);
	return rc;
}

void meshrun_free(struct meshrun_group *g)
{
	if (!g)
		return;
	if (g->ops && g->ops->release)
		g->ops->release(g);
	free(g);
}

int meshrun_rank(const struct meshrun_group *g)
{
	return g ? g->rank : 0;
}

int meshrun_size(const struct meshrun_group *g)
{
	return g ? g->size : 1;
}

const char *meshrun_backend_name(const struct meshrun_group *g)
{
	return g && g->ops ? g->ops->name : "none";
}

static int check_args(struct meshrun_group *g, const char *what, const void *a, const void *b,
		      size_t count, enum meshrun_dtype dt, struct meshrun_err *err)
{
	if (!g)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: NULL group", what);
	if (!mr_dtype_valid((int)dt))
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: invalid dtype %d", what, (int)dt);
	if (count && (!a || !b))
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: NULL buffer for %zu elements", what, count);
	if (count > SIZE_MAX / mr_dtype_size((int)dt) / (size_t)g->size)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: %zu elements overflow size_t", what, count);
	return 0;
}

/* Between the caller's buffers: memmove, or the backend's copy (GPU memory). */
static int move(struct meshrun_group *g, void *dst, const void *src, size_t bytes,
		struct meshrun_err *err)
{
	if (dst == src || !bytes)
		return 0;
	if (g->ops && g->ops->copy)
		return g->ops->copy(g, dst, src, bytes, err);
	memmove(dst, src, bytes);
	return 0;
}

static int all_reduce(struct meshrun_group *g, const void *send, void *recv, size_t count,
		      enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	int rc = check_args(g, mr_op_name(op), send, recv, count, dt, err);

	if (rc < 0 || (rc = move(g, recv, send, count * mr_dtype_size((int)dt), err)) < 0)
		return rc;
	if (!g->ops || count == 0)
		return 0;
	return g->ops->all_reduce(g, recv, count, dt, op, err);
}

int meshrun_all_sum(struct meshrun_group *g, const void *send, void *recv, size_t count,
		    enum meshrun_dtype dt, struct meshrun_err *err)
{
	return all_reduce(g, send, recv, count, dt, MR_OP_SUM, err);
}

int meshrun_all_max(struct meshrun_group *g, const void *send, void *recv, size_t count,
		    enum meshrun_dtype dt, struct meshrun_err *err)
{
	return all_reduce(g, send, recv, count, dt, MR_OP_MAX, err);
}

int meshrun_all_min(struct meshrun_group *g, const void *send, void *recv, size_t count,
		    enum meshrun_dtype dt, struct meshrun_err *err)
{
	return all_reduce(g, send, recv, count, dt, MR_OP_MIN, err);
}

int meshrun_all_gather(struct meshrun_group *g, const void *send, void *recv, size_t count,
		       enum meshrun_dtype dt, struct meshrun_err *err)
{
	int rc = check_args(g, "all_gather", send, recv, count, dt, err);

	if (rc < 0)
		return rc;
	size_t bytes = count * mr_dtype_size((int)dt);
	char *mine = (char *)recv + (size_t)g->rank * bytes;
	if ((rc = move(g, mine, send, bytes, err)) < 0)
		return rc;
	if (!g->ops || bytes == 0)
		return 0;
	return g->ops->all_gather(g, recv, bytes, err);
}

int meshrun_sum_scatter(struct meshrun_group *g, const void *send, void *recv, size_t count,
			enum meshrun_dtype dt, struct meshrun_err *err)
{
	int rc = check_args(g, "sum_scatter", send, recv, count, dt, err);

	if (rc < 0)
		return rc;
	size_t esz = mr_dtype_size((int)dt);
	size_t bytes = count * esz;
	if (!g->ops || bytes == 0)
		return move(g, recv, send, bytes, err);
	/* The backend reduces in place over all size blocks: work on a copy (in
	 * host memory; move() reaches device buffers) so the caller's send buffer
	 * stays untouched (it is const). */
	char *work = malloc(bytes * (size_t)g->size);
	if (!work)
		return mr_err_set(err, MESHRUN_E_NOMEM, "sum_scatter: cannot allocate %zu bytes", bytes * (size_t)g->size);
	rc = move(g, work, send, bytes * (size_t)g->size, err);
	if (rc == 0)
		rc = g->ops->reduce_scatter(g, work, count, dt, MR_OP_SUM, err);
	if (rc == 0)
		rc = move(g, recv, work + (size_t)g->rank * bytes, bytes, err);
	free(work);
	return rc;
}

static int check_peer(struct meshrun_group *g, const char *what, int peer, struct meshrun_err *err)
{
	if (peer < 0 || peer >= g->size)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: rank %d is not in the group of %d", what, peer, g->size);
	if (peer == g->rank)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: rank %d is this rank", what, peer);
	return 0;
}

int meshrun_send(struct meshrun_group *g, const void *buf, size_t count, enum meshrun_dtype dt,
		 int dst, struct meshrun_err *err)
{
	int rc = check_args(g, "send", buf, buf, count, dt, err);

	if (rc == 0)
		rc = check_peer(g, "send", dst, err);
	if (rc < 0)
		return rc;
	return g->ops->send(g, buf, count * mr_dtype_size((int)dt), dst, err);
}

int meshrun_recv(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
		 int src, struct meshrun_err *err)
{
	int rc = check_args(g, "recv", buf, buf, count, dt, err);

	if (rc == 0)
		rc = check_peer(g, "recv", src, err);
	if (rc < 0)
		return rc;
	return g->ops->recv(g, buf, count * mr_dtype_size((int)dt), src, err);
}

int meshrun_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	if (!g)
		return mr_err_set(err, MESHRUN_E_INVAL, "barrier: NULL group");
	if (!g->ops)
		return 0;
	return g->ops->barrier(g, err);
}
