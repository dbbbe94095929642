/*
 * nccl.c - libmeshrun's nccl backend: collectives on NVIDIA GPUs through NCCL.
 *
 * Nothing of CUDA or NCCL is linked: libcudart and libnccl are loaded with
 * dlopen at init, and the few types and prototypes used are declared below
 * (values from nccl.h 2.x and driver_types.h; both ABIs have been stable since
 * NCCL 2.0 / CUDA 10). So libmeshrun builds and runs on machines without CUDA,
 * and this backend just reports itself unavailable there.
 *
 * init:
 *   1. environment (nccl_boot.h): missing variables -> MESHRUN_E_BACKEND;
 *   2. dlopen libcudart, cudaGetDeviceCount: no runtime, no driver or no
 *      device -> MESHRUN_E_BACKEND "nccl: no CUDA device: ..." (`any` moves on);
 *   3. dlopen libnccl.so.2 -> MESHRUN_E_BACKEND "nccl: cannot load ...";
 *   4. cudaSetDevice(rank % devices), as MLX does;
 *   5. rank 0 ncclGetUniqueId, the TCP exchange of the id (nccl_boot.c),
 *      ncclCommInitRank, a stream of our own.
 *
 * Buffers: the backend receives the caller's pointers. Device (or managed)
 * memory, as told by cudaPointerGetAttributes, is used directly; host memory
 * goes through a device staging buffer (cudaMemcpy in, the NCCL call, out),
 * kept between calls and grown as needed. group.c's copies between send and
 * recv (out of place calls, sum_scatter's work buffer) go through nccl_copy
 * (cudaMemcpy with cudaMemcpyDefault), so device pointers work in and out of
 * place; send and recv must not partly overlap.
 *
 * Types NCCL lacks (bool, int16, uint16) are reduced by gathering every
 * rank's block (ncclAllGather of bytes) and combining them on the host in
 * rank order with mr_reduce, so every rank gets the same bits.
 *
 * Waiting: each call waits for its stream with cudaStreamQuery, checking
 * ncclCommGetAsyncError, until MESHRUN_TIMEOUT; an error or the timeout
 * aborts the communicator (ncclCommAbort) and breaks the group: that call
 * and every later one fail with the first message.
 */
#include "common/compat.h"
#include "coll/coll.h"
#include "coll/dl.h"
#include "coll/env.h"
#include "coll/nccl_boot.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <dlfcn.h>
#include <time.h>

/* --- the declarations of CUDA and NCCL we use (see the header comment) --- */
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_READY = 600 };
enum { CUDA_MEMCPY_H2D = 1, CUDA_MEMCPY_D2H = 2, CUDA_MEMCPY_DEFAULT = 4 };
enum { CUDA_MEMORY_DEVICE = 2, CUDA_MEMORY_MANAGED = 3 };

struct cuda_pointer_attributes {
	int type;               /* enum cudaMemoryType */
	int device;
	void *device_pointer;
	void *host_pointer;
	long reserved[8];
	long slack[8];          /* room should a later CUDA grow the struct */
};

enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7 };
enum { NCCL_SUM = 0, NCCL_MAX = 2, NCCL_MIN = 3 };
enum {
	NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_UINT32 = 3, NCCL_INT64 = 4,
	NCCL_UINT64 = 5, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9,
	NCCL_NO_TYPE = -1
};

struct nccl_unique_id {
	char internal[MR_NCCL_ID_BYTES];
};

struct nccl_api {
	void *cudart, *nccl;
	int (*cudaGetDeviceCount)(int *count);
	int (*cudaSetDevice)(int dev);
	int (*cudaMalloc)(void **p, size_t n);
	int (*cudaFree)(void *p);
	int (*cudaMemcpy)(void *dst, const void *src, size_t n, int kind);
	const char *(*cudaGetErrorString)(int e);
	int (*cudaPointerGetAttributes)(struct cuda_pointer_attributes *a, const void *p);
	int (*cudaStreamCreate)(void **s);
	int (*cudaStreamDestroy)(void *s);
	int (*cudaStreamQuery)(void *s);

	int (*ncclGetUniqueId)(struct nccl_unique_id *id);
	int (*ncclCommInitRank)(void **comm, int nranks, struct nccl_unique_id id, int rank);
	int (*ncclCommDestroy)(void *comm);
	int (*ncclCommAbort)(void *comm);
	int (*ncclCommGetAsyncError)(void *comm, int *async);
	const char *(*ncclGetErrorString)(int r);
	int (*ncclAllReduce)(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st);
	int (*ncclReduceScatter)(const void *s, void *r, size_t n, int dt, int op, void *comm, void *st);
	int (*ncclAllGather)(const void *s, void *r, size_t n, int dt, void *comm, void *st);
	int (*ncclSend)(const void *s, size_t n, int dt, int peer, void *comm, void *st);
	int (*ncclRecv)(void *r, size_t n, int dt, int peer, void *comm, void *st);
};

struct nccl_group {
	struct nccl_api api;
	void *comm;             /* ncclComm_t */
	void *stream;           /* cudaStream_t */
	void *stage;            /* device staging buffer for host pointers */
	size_t stage_cap;
	int device;
	int64_t timeout_ms;
	bool broken;
	struct meshrun_err fail; /* why the group broke */
};

#define SYM(api, name) { #name, (void **)&(api)->name }

struct sym {
	const char *name;
	void **slot;
};

static int load_syms(void *h, const struct sym *syms, size_t n, const char *lib,
		     struct meshrun_err *err)
{
	for (size_t i = 0; i < n; i++) {
		dlerror();
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot)
			return mr_err_set(err, MESHRUN_E_BACKEND, "nccl: %s has no symbol '%s' (too old?)", lib, syms[i].name);
	}
	return 0;
}

/*
 * The libraries stay loaded once loaded (no dlclose): the CUDA runtime and
 * NCCL register process-exit handlers and threads that must not outlive
 * their code.
 */
static int load_cudart(struct nccl_api *a, struct meshrun_err *err)
{
	static const char *const names[] = { "libcudart.so", "libcudart.so.13", "libcudart.so.12",
					     "libcudart.so.11.0" };
	const struct sym syms[] = {
		SYM(a, cudaGetDeviceCount), SYM(a, cudaSetDevice), SYM(a, cudaMalloc),
		SYM(a, cudaFree), SYM(a, cudaMemcpy), SYM(a, cudaGetErrorString),
		SYM(a, cudaPointerGetAttributes), SYM(a, cudaStreamCreate),
		SYM(a, cudaStreamDestroy), SYM(a, cudaStreamQuery),
	};

	char why[512];

	a->cudart = mr_dl_open_first(names, ARRAY_SIZE(names), RTLD_NOW | RTLD_LOCAL, NULL, why,
				     sizeof(why));
	if (!a->cudart)
		return mr_err_set(err, MESHRUN_E_BACKEND, "nccl: no CUDA device: cannot load the CUDA runtime: %s", why);
	return load_syms(a->cudart, syms, ARRAY_SIZE(syms), "libcudart", err);
}

static int load_nccl(struct nccl_api *a, struct meshrun_err *err)
{
	static const char *const names[] = { "libnccl.so.2", "libnccl.so" };
	const struct sym syms[] = {
		SYM(a, ncclGetUniqueId), SYM(a, ncclCommInitRank), SYM(a, ncclCommDestroy),
		SYM(a, ncclCommAbort), SYM(a, ncclCommGetAsyncError), SYM(a, ncclGetErrorString),
		SYM(a, ncclAllReduce), SYM(a, ncclReduceScatter), SYM(a, ncclAllGather),
		SYM(a, ncclSend), SYM(a, ncclRecv),
	};

	char why[512];

	a->nccl = mr_dl_open_first(names, ARRAY_SIZE(names), RTLD_NOW | RTLD_LOCAL, NULL, why,
				   sizeof(why));
	if (!a->nccl)
		return mr_err_set(err, MESHRUN_E_BACKEND, "nccl: cannot load libnccl.so.2: %s", why);
	return load_syms(a->nccl, syms, ARRAY_SIZE(syms), "libnccl.so.2", err);
}

static const char *cuda_str(const struct nccl_api *a, int e)
{
	const char *s = a->cudaGetErrorString ? a->cudaGetErrorString(e) : NULL;
	return s ? s : "unknown CUDA error";
}

static const char *nccl_str(const struct nccl_api *a, int r)
{
	const char *s = a->ncclGetErrorString ? a->ncclGetErrorString(r) : NULL;
	return s ? s : "unknown NCCL error";
}

static int nccl_type(enum meshrun_dtype dt)
{
	switch (dt) {
	case MESHRUN_INT8: return NCCL_INT8;
	case MESHRUN_UINT8: return NCCL_UINT8;
	case MESHRUN_INT32: return NCCL_INT32;
	case MESHRUN_UINT32: return NCCL_UINT32;
	case MESHRUN_INT64: return NCCL_INT64;
	case MESHRUN_UINT64: return NCCL_UINT64;
	case MESHRUN_FLOAT16: return NCCL_FLOAT16;
	case MESHRUN_BFLOAT16: return NCCL_BFLOAT16;
	case MESHRUN_FLOAT32: return NCCL_FLOAT32;
	case MESHRUN_FLOAT64: return NCCL_FLOAT64;
	default: return NCCL_NO_TYPE; /* bool, int16, uint16 */
	}
}

static int nccl_op(enum mr_op op)
{
	return op == MR_OP_MAX ? NCCL_MAX : op == MR_OP_MIN ? NCCL_MIN : NCCL_SUM;
}

/* Record why the group broke; every later call returns it. */
static int break_group(struct nccl_group *n, struct meshrun_err *err, int code, const char *what,
		       const char *detail)
{
	if (!n->broken) {
		mr_err_set(&n->fail, code, "nccl: %s: %s", what, detail);
		n->broken = true;
		if (n->comm) {
			n->api.ncclCommAbort(n->comm);
			n->comm = NULL;
		}
	}
	return mr_err_set(err, n->fail.code, "%s", n->fail.msg);
}

static int check_nccl(struct nccl_group *n, int r, const char *what, struct meshrun_err *err)
{
	if (r == NCCL_SUCCESS || r == NCCL_IN_PROGRESS)
		return 0;
	return break_group(n, err, MESHRUN_E_PEER, what, nccl_str(&n->api, r));
}

static int check_cuda(struct nccl_group *n, int e, const char *what, struct meshrun_err *err)
{
	if (e == CUDA_SUCCESS)
		return 0;
	return break_group(n, err, MESHRUN_E_SYS, what, cuda_str(&n->api, e));
}

/* Wait for the stream, watching for NCCL's asynchronous errors and the timeout. */
static int wait_stream(struct nccl_group *n, const char *what, struct meshrun_err *err)
{
	int64_t deadline = mr_now_ms() + n->timeout_ms, nap_us = 20;

	for (;;) {
		int e = n->api.cudaStreamQuery(n->stream);
		if (e == CUDA_SUCCESS)
			return 0;
		if (e != CUDA_ERROR_NOT_READY)
			return check_cuda(n, e, what, err);
		int async = NCCL_SUCCESS;
		if (n->api.ncclCommGetAsyncError(n->comm, &async) == NCCL_SUCCESS &&
		    async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS)
			return break_group(n, err, MESHRUN_E_PEER, what, nccl_str(&n->api, async));
		if (mr_now_ms() >= deadline) {
			char d[128];
			snprintf(d, sizeof(d), "not complete after %lld ms (MESHRUN_TIMEOUT): a peer died or stalled", (long long)n->timeout_ms);
			return break_group(n, err, MESHRUN_E_TIMEOUT, what, d);
		}
		struct timespec ts = { 0, (long)nap_us * 1000 };
		nanosleep(&ts, NULL);
		nap_us = MR_MIN(nap_us * 2, (int64_t)1000);
	}
}

static bool is_device_ptr(struct nccl_group *n, const void *p)
{
	struct cuda_pointer_attributes a;

	memset(&a, 0, sizeof(a));
	if (n->api.cudaPointerGetAttributes(&a, p) != CUDA_SUCCESS)
		return false;
	return a.type == CUDA_MEMORY_DEVICE || a.type == CUDA_MEMORY_MANAGED;
}

/* A device buffer of at least bytes: the caller's own, or the staging one. */
static int stage(struct nccl_group *n, size_t bytes, void **out, struct meshrun_err *err)
{
	if (bytes > n->stage_cap) {
		if (n->stage)
			n->api.cudaFree(n->stage);
		n->stage = NULL;
		n->stage_cap = 0;
		int e = n->api.cudaMalloc(&n->stage, bytes);
		if (e != CUDA_SUCCESS) {
			n->stage = NULL;
			return mr_err_set(err, MESHRUN_E_NOMEM, "nccl: cudaMalloc of %zu bytes: %s", bytes, cuda_str(&n->api, e));
		}
		n->stage_cap = bytes;
	}
	*out = n->stage;
	return 0;
}

static int copy(struct nccl_group *n, void *dst, const void *src, size_t bytes, int kind,
		struct meshrun_err *err)
{
	if (!bytes)
		return 0;
	return check_cuda(n, n->api.cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy", err);
}

static int usable(struct nccl_group *n, struct meshrun_err *err)
{
	if (n->broken)
		return mr_err_set(err, n->fail.code, "%s", n->fail.msg);
	return 0;
}

/* Reduction by gathering every block and combining on the host (types NCCL lacks). */
static int reduce_by_gather(struct meshrun_group *g, void *buf, size_t count,
			    enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	size_t bytes = count * mr_dtype_size((int)dt), total = bytes * (size_t)g->size;
	bool dev = is_device_ptr(n, buf);
	void *d;
	int rc;

	unsigned char *all = malloc(total);
	if (!all)
		return mr_err_set(err, MESHRUN_E_NOMEM, "nccl: %s: cannot allocate %zu bytes", mr_op_name(op), total);
	if ((rc = stage(n, total, &d, err)) < 0)
		goto out;
	char *mine = (char *)d + (size_t)g->rank * bytes;
	if ((rc = copy(n, mine, buf, bytes, dev ? CUDA_MEMCPY_DEFAULT : CUDA_MEMCPY_H2D, err)) < 0 ||
	    (rc = check_nccl(n, n->api.ncclAllGather(mine, d, bytes, NCCL_UINT8, n->comm, n->stream), "ncclAllGather", err)) < 0 ||
	    (rc = wait_stream(n, mr_op_name(op), err)) < 0 ||
	    (rc = copy(n, all, d, total, CUDA_MEMCPY_D2H, err)) < 0)
		goto out;
	for (int r = 1; r < g->size; r++)
		mr_reduce(op, dt, all, all + (size_t)r * bytes, count);
	if (dev)
		rc = copy(n, buf, all, bytes, CUDA_MEMCPY_H2D, err);
	else
		memcpy(buf, all, bytes);
out:
	free(all);
	return rc;
}

static int nccl_all_reduce(struct meshrun_group *g, void *buf, size_t count,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	size_t bytes = count * mr_dtype_size((int)dt);
	int t = nccl_type(dt), rc;
	void *d = buf;

	if ((rc = usable(n, err)) < 0)
		return rc;
	if (t == NCCL_NO_TYPE)
		return reduce_by_gather(g, buf, count, dt, op, err);
	bool dev = is_device_ptr(n, buf);
	if (!dev && ((rc = stage(n, bytes, &d, err)) < 0 || (rc = copy(n, d, buf, bytes, CUDA_MEMCPY_H2D, err)) < 0))
		return rc;
	if ((rc = check_nccl(n, n->api.ncclAllReduce(d, d, count, t, nccl_op(op), n->comm, n->stream), "ncclAllReduce", err)) < 0 ||
	    (rc = wait_stream(n, mr_op_name(op), err)) < 0)
		return rc;
	return dev ? 0 : copy(n, buf, d, bytes, CUDA_MEMCPY_D2H, err);
}

static int nccl_all_gather(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	size_t total = bytes * (size_t)g->size, off = (size_t)g->rank * bytes;
	void *d = buf;
	int rc;

	if ((rc = usable(n, err)) < 0)
		return rc;
	bool dev = is_device_ptr(n, buf);
	if (!dev && ((rc = stage(n, total, &d, err)) < 0 ||
		     (rc = copy(n, (char *)d + off, (char *)buf + off, bytes, CUDA_MEMCPY_H2D, err)) < 0))
		return rc;
	if ((rc = check_nccl(n, n->api.ncclAllGather((char *)d + off, d, bytes, NCCL_UINT8, n->comm, n->stream), "ncclAllGather", err)) < 0 ||
	    (rc = wait_stream(n, "all_gather", err)) < 0)
		return rc;
	return dev ? 0 : copy(n, buf, d, total, CUDA_MEMCPY_D2H, err);
}

static int nccl_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			       enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	size_t bytes = count * mr_dtype_size((int)dt), total = bytes * (size_t)g->size;
	size_t off = (size_t)g->rank * bytes;
	int t = nccl_type(dt), rc;
	void *d = buf;

	if ((rc = usable(n, err)) < 0)
		return rc;
	if (t == NCCL_NO_TYPE) /* every block reduced; block `rank` is the answer */
		return reduce_by_gather(g, buf, count * (size_t)g->size, dt, op, err);
	bool dev = is_device_ptr(n, buf);
	if (!dev && ((rc = stage(n, total, &d, err)) < 0 || (rc = copy(n, d, buf, total, CUDA_MEMCPY_H2D, err)) < 0))
		return rc;
	if ((rc = check_nccl(n, n->api.ncclReduceScatter(d, (char *)d + off, count, t, nccl_op(op), n->comm, n->stream), "ncclReduceScatter", err)) < 0 ||
	    (rc = wait_stream(n, "sum_scatter", err)) < 0)
		return rc;
	return dev ? 0 : copy(n, (char *)buf + off, (char *)d + off, bytes, CUDA_MEMCPY_D2H, err);
}

static int nccl_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		     struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	const void *d = buf;
	void *s;
	int rc;

	if ((rc = usable(n, err)) < 0)
		return rc;
	if (!is_device_ptr(n, buf)) {
		if ((rc = stage(n, bytes, &s, err)) < 0 || (rc = copy(n, s, buf, bytes, CUDA_MEMCPY_H2D, err)) < 0)
			return rc;
		d = s;
	}
	if ((rc = check_nccl(n, n->api.ncclSend(d, bytes, NCCL_UINT8, dst, n->comm, n->stream), "ncclSend", err)) < 0)
		return rc;
	return wait_stream(n, "send", err);
}

static int nccl_recv(struct meshrun_group *g, void *buf, size_t bytes, int src,
		     struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	void *d = buf;
	int rc;

	if ((rc = usable(n, err)) < 0)
		return rc;
	bool dev = is_device_ptr(n, buf);
	if (!dev && (rc = stage(n, bytes, &d, err)) < 0)
		return rc;
	if ((rc = check_nccl(n, n->api.ncclRecv(d, bytes, NCCL_UINT8, src, n->comm, n->stream), "ncclRecv", err)) < 0 ||
	    (rc = wait_stream(n, "recv", err)) < 0)
		return rc;
	return dev ? 0 : copy(n, buf, d, bytes, CUDA_MEMCPY_D2H, err);
}

/* NCCL has no barrier: an all-reduce of one int is one. */
static int nccl_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	int32_t one = 1;

	return nccl_all_reduce(g, &one, 1, MESHRUN_INT32, MR_OP_SUM, err);
}

static void nccl_release(struct meshrun_group *g)
{
	struct nccl_group *n = g->impl;

	if (!n)
		return;
	if (n->stage)
		n->api.cudaFree(n->stage);
	if (n->stream)
		n->api.cudaStreamDestroy(n->stream);
	if (n->comm)
		n->api.ncclCommDestroy(n->comm);
	free(n);
	g->impl = NULL;
}

static int nccl_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	struct mr_nccl_boot boot;
	struct nccl_unique_id id;
	int ndev = 0, e, rc;
	(void)flags;

	if ((rc = mr_nccl_boot_from_env(&boot, err)) < 0)
		return rc;
	struct nccl_group *n = calloc(1, sizeof(*n));
	if (!n)
		return mr_err_set(err, MESHRUN_E_NOMEM, "nccl: out of memory");
	g->impl = n;
	if ((rc = mr_env_timeout_ms(&n->timeout_ms, err)) < 0 || (rc = load_cudart(&n->api, err)) < 0)
		goto fail;
	e = n->api.cudaGetDeviceCount(&ndev);
	if (e != CUDA_SUCCESS || ndev < 1) {
		if (e != CUDA_SUCCESS)
			rc = mr_err_set(err, MESHRUN_E_BACKEND, "nccl: no CUDA device: cudaGetDeviceCount: %s", cuda_str(&n->api, e));
		else
			rc = mr_err_set(err, MESHRUN_E_BACKEND, "nccl: no CUDA device: cudaGetDeviceCount found none");
		goto fail;
	}
	if ((rc = load_nccl(&n->api, err)) < 0)
		goto fail;
	n->device = boot.rank % ndev;
	if ((e = n->api.cudaSetDevice(n->device)) != CUDA_SUCCESS) {
		rc = mr_err_set(err, MESHRUN_E_SYS, "nccl: cudaSetDevice(%d): %s", n->device, cuda_str(&n->api, e));
		goto fail;
	}
	memset(&id, 0, sizeof(id));
	if (boot.rank == 0 && (e = n->api.ncclGetUniqueId(&id)) != NCCL_SUCCESS) {
		rc = mr_err_set(err, MESHRUN_E_SYS, "nccl: ncclGetUniqueId: %s", nccl_str(&n->api, e));
		goto fail;
	}
	if ((rc = mr_nccl_boot_exchange(&boot, (unsigned char *)id.internal, err)) < 0)
		goto fail;
	if ((e = n->api.ncclCommInitRank(&n->comm, boot.size, id, boot.rank)) != NCCL_SUCCESS) {
		n->comm = NULL;
		rc = mr_err_set(err, MESHRUN_E_PEER, "nccl: ncclCommInitRank (rank %d of %d, device %d): %s", boot.rank, boot.size, n->device, nccl_str(&n->api, e));
		goto fail;
	}
	if ((e = n->api.cudaStreamCreate(&n->stream)) != CUDA_SUCCESS) {
		n->stream = NULL;
		rc = mr_err_set(err, MESHRUN_E_SYS, "nccl: cudaStreamCreate: %s", cuda_str(&n->api, e));
		goto fail;
	}
	g->rank = boot.rank;
	g->size = boot.size;
	return 0;

fail:
	nccl_release(g);
	return rc;
}

/* group.c's moves between the caller's buffers, host or device alike (UVA). */
static int nccl_copy(struct meshrun_group *g, void *dst, const void *src, size_t bytes,
		     struct meshrun_err *err)
{
	struct nccl_group *n = g->impl;
	int rc = usable(n, err);

	return rc < 0 ? rc : copy(n, dst, src, bytes, CUDA_MEMCPY_DEFAULT, err);
}

const struct mr_coll_ops mr_coll_nccl_ops = {
	.name = "nccl",
	.init = nccl_init,
	.release = nccl_release,
	.all_reduce = nccl_all_reduce,
	.all_gather = nccl_all_gather,
	.reduce_scatter = nccl_reduce_scatter,
	.send = nccl_send,
	.recv = nccl_recv,
	.barrier = nccl_barrier,
	.copy = nccl_copy,
};
