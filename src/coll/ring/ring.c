/*
 * coll/ring/ring.c - the ring backend (not topo/ring.c, the ring search): its
 * environment (MLX_HOSTFILE, the rank), setup (ring_conn.c) and the ops table
 * over the TCP engine (coll/tcp/tcp.h): the collectives run the engine's ring
 * schedule (tcp/ring_sched.c) on the connections to the two neighbours,
 * send/recv its control lanes (tcp/p2p.c).
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/coll.h"
#include "coll/ring.h"
#include "coll/ring/ring_conn.h"
#include "coll/tcp/tcp.h"
#include "common/err.h"
#include "common/fdio.h"

static struct mr_tcp *ring_of(struct meshrun_group *g)
{
	return g->impl;
}

static void ring_release(struct meshrun_group *g)
{
	struct mr_tcp *r = ring_of(g);

	if (!r)
		return;
	for (int i = 0; r->left && i < r->nconn; i++)
		mr_close(&r->left[i]);
	for (int i = 0; r->right && i < r->nconn; i++)
		mr_close(&r->right[i]);
	mr_tcp_ctl_release(r);
	free(r->tmp);
	free(r->left);
	free(r->right);
	free(r);
	g->impl = NULL;
}

static int ring_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	const char *hostfile = getenv(MR_ENV(MLX_HOSTFILE));
	const char *which = NULL;

	/* meshrun --mpi-impl meshrun names it so, to keep MLX's own ring away */
	if (!hostfile || !*hostfile)
		hostfile = getenv(MR_ENV(MESHRUN_HOSTFILE));
	int rank = -1, envsize = -1;
	int rc = mr_env_rank(&rank, &envsize, &which, err);

	if (rc < 0)
		return rc;
	if (rc == 0 || !hostfile || !*hostfile)
		return mr_err_set(err, MESHRUN_E_BACKEND, "ring: needs MLX_RANK (or SLURM_PROCID, OMPI_COMM_WORLD_RANK) and MLX_HOSTFILE (or MESHRUN_HOSTFILE), got MLX_RANK='%s' MLX_HOSTFILE='%s'", getenv(MR_ENV(MLX_RANK)) ? getenv(MR_ENV(MLX_RANK)) : "", hostfile ? hostfile : "");

	struct mr_tcp *r = calloc(1, sizeof(*r));
	if (!r)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ring: out of memory");
	g->impl = r;
	rc = mr_tcp_ctl_init(r, "ring", err);
	if (rc < 0)
		goto fail;
	rc = mr_tcp_lanes_alloc(r, 2, err);
	if (rc < 0)
		goto fail;
	rc = mr_ring_hosts_load(hostfile, &r->hosts, err);
	if (rc < 0) {
		mr_err_prefix(err, "ring: MLX_HOSTFILE");
		goto fail;
	}
	r->rank = rank;
	r->size = r->hosts.nranks;
	r->nconn = r->hosts.naddrs;
	if (rank >= r->size) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "ring: %s=%d but hostfile '%s' lists %d ranks", which, rank, hostfile, r->size);
		goto fail;
	}
	if (envsize >= 0 && envsize != r->size) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "ring: the environment says %d ranks but hostfile '%s' lists %d", envsize, hostfile, r->size);
		goto fail;
	}
	g->rank = r->rank;
	g->size = r->size;
	if (r->size == 1)
		return 0;
	r->left = malloc((size_t)r->nconn * sizeof(*r->left));
	r->right = malloc((size_t)r->nconn * sizeof(*r->right));
	r->tmp = malloc(mr_tcp_ring_tmp_bytes(r));
	if (!r->left || !r->right || !r->tmp) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "ring: out of memory");
		goto fail;
	}
	for (int i = 0; i < r->nconn; i++)
		r->left[i] = r->right[i] = -1;
	rc = mr_tcp_ctl_pipes(r, err);
	if (rc < 0)
		goto fail;
	rc = mr_ring_connect_all(r, err);
	if (rc < 0)
		goto fail;
	rc = mr_tcp_p2p_start(r, err);
	if (rc < 0)
		goto fail;
	(void)flags;
	return 0;
fail:
	ring_release(g);
	g->rank = 0;
	g->size = 1;
	return rc;
}

static int ring_all_reduce(struct meshrun_group *g, void *buf, size_t count,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	return mr_tcp_ring_all_reduce(ring_of(g), buf, count, dt, op, err);
}

static int ring_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			       enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct mr_tcp *r = ring_of(g);
	struct mr_ring_layout l;
	size_t esz = mr_dtype_size((int)dt);

	if (r->size == 1)
		return 0;
	mr_ring_layout_init(&l, r->size, count * (size_t)r->size, count, esz, 2 * r->nconn);
	return mr_tcp_ring_run(r, buf, &l, esz, dt, op, true, 0, r->size - 1, err);
}

static int ring_all_gather(struct meshrun_group *g, void *buf, size_t bytes,
			   struct meshrun_err *err)
{
	struct mr_tcp *r = ring_of(g);
	struct mr_ring_layout l;

	if (r->size == 1)
		return 0;
	mr_ring_layout_init(&l, r->size, bytes * (size_t)r->size, bytes, 1, 2 * r->nconn);
	return mr_tcp_ring_run(r, buf, &l, 1, MESHRUN_UINT8, MR_OP_SUM, false, r->size - 1,
			       r->size - 1, err);
}

static int ring_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		     struct meshrun_err *err)
{
	return mr_tcp_p2p_send(ring_of(g), buf, bytes, dst, err);
}

static int ring_recv(struct meshrun_group *g, void *buf, size_t bytes, int src,
		     struct meshrun_err *err)
{
	return mr_tcp_p2p_recv(ring_of(g), buf, bytes, src, err);
}

const struct mr_coll_ops mr_coll_ring_ops = {
	.name = "ring",
	.init = ring_init,
	.release = ring_release,
	.all_reduce = ring_all_reduce,
	.all_gather = ring_all_gather,
	.reduce_scatter = ring_reduce_scatter,
	.send = ring_send,
	.recv = ring_recv,
	.barrier = mr_tcp_barrier,
};
