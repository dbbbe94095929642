/*
 * jaccl.c - the JACCL backend's ops table and algorithms (mesh and ring).
 *
 * Mesh (every rank cabled to every other, one QP per peer):
 *   all-reduce, small (< MR_MESH_DIRECT bytes, or fewer elements than ranks):
 *     every rank sends its whole buffer to every peer and reduces the size
 *     inputs in rank order 0, 1, ..., size-1 - the same sequence of
 *     operations on every rank, so results are bit-identical;
 *   all-reduce, large: reduce-scatter (block p goes to rank p, which reduces
 *     its block in a fixed order: own data, then peers by ascending rank,
 *     chunk by chunk) then all-gather of the reduced blocks: each block is
 *     computed once, so every rank gets the same bits;
 *   all_gather: own block to every peer; send/recv: the direct QP; barrier:
 *     one byte to and from every peer.
 * Ring (jaccl-ring, K cables to each neighbour): the data is cut into K
 *   portions per direction (two directions when size > 2) and each portion
 *   runs the classic ring reduce-scatter + all-gather: step s sends block
 *   (v - s) and receives and reduces block (v - s - 1), v the rank's position
 *   in that direction, so all 2K rings move at once over all cables. Each
 *   block's sum is formed by one rank and then copied: bit-identical results.
 *   send/recv only between neighbours.
 * Every transfer moves in frames of the group's frame size, under credits
 * (jaccl_frames.c).
 * After a failure the group is broken: every later call returns the first
 * error, and the other ranks are told through the side channel.
 */
#include "common/compat.h"
#include "coll/coll.h"
#include "coll/jaccl_impl.h"
#include "coll/mesh_plan.h"
#include "common/err.h"

#define RING_ONE_JOB (64u * 1024u)

static struct mr_jaccl *J_of(struct meshrun_group *g)
{
	return g->impl;
}

static int broken(struct mr_jaccl *J, struct meshrun_err *err)
{
	if (!J->failed)
		return 0;
	return mr_err_set(err, J->ferr.code, "%s", J->ferr.msg);
}

/* Record the first failure, tell the others, copy it to err. */
static int fail(struct mr_jaccl *J, const char *what, int rc, const struct meshrun_err *e,
		struct meshrun_err *err)
{
	if (!J->failed) {
		J->failed = true;
		mr_err_set(&J->ferr, rc == MESHRUN_E_NOMEM ? rc : MESHRUN_E_PEER, "jaccl: rank %d: %s: %s", J->rank, what, e->msg);
		mr_jaccl_side_abort(&J->side, J->ferr.msg);
	}
	return mr_err_set(err, J->ferr.code, "%s", J->ferr.msg);
}

static int run(struct mr_jaccl *J, const char *what, struct mr_jxfer *x, int n, bool ordered,
	       enum mr_op op, enum meshrun_dtype dt, struct meshrun_err *err)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc = mr_jaccl_exchange(J, x, n, ordered, op, dt, &e);

	if (rc < 0) {
		/* the group's verdict (another rank's abort, a silent rank, a
		 * stall) already carries its full story */
		if (J->told) {
			if (!J->failed) {
				J->failed = true;
				mr_err_set(&J->ferr, MESHRUN_E_PEER, "%s", e.msg);
			}
			return mr_err_set(err, J->ferr.code, "%s", J->ferr.msg);
		}
		return fail(J, what, rc, &e, err);
	}
	return 0;
}

static struct mr_jxfer *xalloc(struct mr_jaccl *J, int n, struct meshrun_err *err)
{
	struct mr_jxfer *x = calloc((size_t)(n ? n : 1), sizeof(*x));

	(void)J;
	if (!x)
		mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	return x;
}

/* ------------------------------------------------------------------ mesh */

/*
 * Every peer at once, one block each way (the schedule of coll/mesh_plan.h,
 * shared with the TCP mesh). Blocks of elements of esz bytes: block b at
 * element off[b], len[b] long.
 */
static int mesh_blocks(struct mr_jaccl *J, unsigned char *buf, const size_t *off,
		       const size_t *len, size_t esz, bool reduce, enum meshrun_dtype dt,
		       enum mr_op op, const char *what, struct meshrun_err *err)
{
	struct mr_jxfer *x = xalloc(J, J->size - 1, err);
	struct mr_mesh_xfer *plan = calloc((size_t)J->size, sizeof(*plan));
	int n;

	if (!x || !plan) {
		free(x);
		free(plan);
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	}
	n = mr_mesh_blocks(J->rank, J->size, reduce, plan);
	for (int i = 0; i < n; i++) {
		int sb = plan[i].sblk, rb = plan[i].rblk;
		x[i].c = J->peer[plan[i].peer];
		x[i].src = buf + off[sb] * esz;
		x[i].slen = len[sb] * esz;
		x[i].dst = buf + off[rb] * esz;
		x[i].dlen = len[rb] * esz;
		x[i].mode = reduce ? MR_JX_REDUCE : MR_JX_COPY;
	}
	int rc = run(J, what, x, n, reduce, op, dt, err);
	free(plan);
	free(x);
	return rc;
}

static int mesh_reduce_scatter(struct mr_jaccl *J, unsigned char *buf, const size_t *off,
			       const size_t *cnt, enum meshrun_dtype dt, enum mr_op op,
			       const char *what, struct meshrun_err *err)
{
	return mesh_blocks(J, buf, off, cnt, mr_dtype_size((int)dt), true, dt, op, what, err);
}

/* Blocks in bytes. */
static int mesh_all_gather_blocks(struct mr_jaccl *J, unsigned char *buf, const size_t *off,
				  const size_t *len, const char *what, struct meshrun_err *err)
{
	return mesh_blocks(J, buf, off, len, 1, false, MESHRUN_UINT8, MR_OP_SUM, what, err);
}

static int mesh_all_reduce_direct(struct mr_jaccl *J, unsigned char *buf, size_t count,
				  enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	size_t bytes = count * mr_dtype_size((int)dt);
	unsigned char *all = malloc(bytes * (size_t)J->size);
	struct mr_jxfer *x = xalloc(J, J->size - 1, err);
	int n = 0, rc;

	if (!x || !all) {
		free(x);
		free(all);
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	}
	for (int p = 0; p < J->size; p++) {
		if (p == J->rank)
			continue;
		x[n].c = J->peer[p];
		x[n].src = buf;
		x[n].slen = bytes;
		x[n].dst = all + (size_t)p * bytes;
		x[n].dlen = bytes;
		n++;
	}
	rc = run(J, mr_op_name(op), x, n, false, op, dt, err);
	if (rc == 0) {
		memcpy(all + (size_t)J->rank * bytes, buf, bytes);
		memcpy(buf, all, bytes);
		for (int p = 1; p < J->size; p++)
			mr_reduce(op, dt, buf, all + (size_t)p * bytes, count);
	}
	free(x);
	free(all);
	return rc;
}

static int mesh_all_reduce(struct mr_jaccl *J, unsigned char *buf, size_t count,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	size_t esz = mr_dtype_size((int)dt), n = (size_t)J->size;

	if (mr_mesh_direct(count, esz, J->size))
		return mesh_all_reduce_direct(J, buf, count, dt, op, err);
	size_t *off = calloc(4 * n, sizeof(*off));
	if (!off)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	size_t *cnt = off + n, *boff = off + 2 * n, *blen = off + 3 * n;
	for (size_t i = 0; i < n; i++) {
		mr_jaccl_split(count, n, i, &off[i], &cnt[i]);
		boff[i] = off[i] * esz;
		blen[i] = cnt[i] * esz;
	}
	int rc = mesh_reduce_scatter(J, buf, off, cnt, dt, op, mr_op_name(op), err);
	if (rc == 0)
		rc = mesh_all_gather_blocks(J, buf, boff, blen, mr_op_name(op), err);
	free(off);
	return rc;
}

/* ------------------------------------------------------------------ ring */

/*
 * One ring "job" per (direction, cable): vreg[vb] is the region (bytes) of the
 * block at virtual position vb. Direction 0 sends right, direction 1 left.
 */
struct job {
	size_t *off, *len; /* size each, indexed by virtual position */
};

static int njobs_for(const struct mr_jaccl *J, size_t bytes)
{
	int dirs = J->size == 2 ? 1 : 2;

	return bytes < RING_ONE_JOB ? 1 : dirs * J->ncables;
}

static int vpos(const struct mr_jaccl *J, int dir)
{
	return dir == 0 ? J->rank : (J->size - J->rank) % J->size;
}

static int actual(const struct mr_jaccl *J, int dir, int vb)
{
	return dir == 0 ? vb : (J->size - vb) % J->size;
}

static size_t modn(long v, int n)
{
	return (size_t)(((v % n) + n) % n);
}

/*
 * Run `steps` ring steps over nj jobs: at step s, job q sends its block
 * (v + sb - s) and receives block (v + sb - s - 1) (copied or reduced).
 */
static int ring_steps(struct mr_jaccl *J, unsigned char *buf, struct job *jobs, int nj, int sb,
		      int mode, enum meshrun_dtype dt, enum mr_op op, const char *what,
		      struct meshrun_err *err)
{
	struct mr_jxfer *x = xalloc(J, J->nconn, err);
	int rc = 0;

	if (!x)
		return MESHRUN_E_NOMEM;
	for (int s = 0; s < J->size - 1 && rc == 0; s++) {
		memset(x, 0, (size_t)J->nconn * sizeof(*x));
		for (int q = 0; q < nj; q++) {
			int dir = q % 2 == 0 || J->size == 2 ? 0 : 1;
			int cab = J->size == 2 ? q : q / 2;
			int v = vpos(J, dir);
			size_t sbk = modn((long)v + sb - s, J->size), rbk = modn((long)v + sb - s - 1, J->size);
			struct mr_jconn *to = dir == 0 ? J->right[cab] : J->left[cab];
			struct mr_jconn *from = dir == 0 ? J->left[cab] : J->right[cab];
			struct mr_jxfer *xs = &x[to - J->conn], *xr = &x[from - J->conn];
			xs->c = to;
			xs->src = buf + jobs[q].off[sbk];
			xs->slen = jobs[q].len[sbk];
			xr->c = from;
			xr->dst = buf + jobs[q].off[rbk];
			xr->dlen = jobs[q].len[rbk];
			xr->mode = mode;
		}
		int n = 0;
		for (int i = 0; i < J->nconn; i++)
			if (x[i].c)
				x[n++] = x[i];
		rc = run(J, what, x, n, false, op, dt, err);
	}
	free(x);
	return rc;
}

/* nj jobs with room for size regions each. */
static struct job *jobs_new(struct mr_jaccl *J, int nj)
{
	struct job *jobs = calloc((size_t)nj, sizeof(*jobs));

	if (!jobs)
		return NULL;
	for (int q = 0; q < nj; q++) {
		jobs[q].off = calloc(2 * (size_t)J->size, sizeof(size_t));
		if (!jobs[q].off) {
			for (int k = 0; k < q; k++)
				free(jobs[k].off);
			free(jobs);
			return NULL;
		}
		jobs[q].len = jobs[q].off + J->size;
	}
	return jobs;
}

static void jobs_free(struct job *jobs, int nj)
{
	for (int q = 0; jobs && q < nj; q++)
		free(jobs[q].off);
	free(jobs);
}

static int job_dir(const struct mr_jaccl *J, int q)
{
	return q % 2 == 0 || J->size == 2 ? 0 : 1;
}

/* All-reduce layout: portion q of the buffer, cut into size blocks. */
static void layout_allreduce(struct mr_jaccl *J, struct job *jobs, int nj, size_t count, size_t esz)
{
	for (int q = 0; q < nj; q++) {
		size_t po, pn;
		mr_jaccl_split(count, (size_t)nj, (size_t)q, &po, &pn);
		for (int vb = 0; vb < J->size; vb++) {
			size_t bo, bn;
			mr_jaccl_split(pn, (size_t)J->size, (size_t)vb, &bo, &bn);
			jobs[q].off[vb] = (po + bo) * esz;
			jobs[q].len[vb] = bn * esz;
		}
	}
}

/* Blocked layout (block b = rank b's, count elements): sub-part q of each block. */
static void layout_blocks(struct mr_jaccl *J, struct job *jobs, int nj, size_t count, size_t esz)
{
	for (int q = 0; q < nj; q++) {
		size_t so, sn;
		mr_jaccl_split(count, (size_t)nj, (size_t)q, &so, &sn);
		for (int vb = 0; vb < J->size; vb++) {
			int b = actual(J, job_dir(J, q), vb);
			jobs[q].off[vb] = ((size_t)b * count + so) * esz;
			jobs[q].len[vb] = sn * esz;
		}
	}
}

static int ring_all_reduce(struct mr_jaccl *J, unsigned char *buf, size_t count,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	size_t esz = mr_dtype_size((int)dt);
	int nj = njobs_for(J, count * esz);
	struct job *jobs = jobs_new(J, nj);

	if (!jobs)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	layout_allreduce(J, jobs, nj, count, esz);
	int rc = ring_steps(J, buf, jobs, nj, 0, MR_JX_REDUCE, dt, op, mr_op_name(op), err);
	if (rc == 0) /* rank at position v owns block v + 1 */
		rc = ring_steps(J, buf, jobs, nj, 1, MR_JX_COPY, dt, op, mr_op_name(op), err);
	jobs_free(jobs, nj);
	return rc;
}

/* Offsets then lengths (size each) of size blocks of n units, block i at
 * i * n: what the mesh ops take for the equal blocks of the public ops. */
static size_t *equal_blocks(struct mr_jaccl *J, size_t n, struct meshrun_err *err)
{
	size_t *off = calloc(2 * (size_t)J->size, sizeof(*off));

	if (!off) {
		mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		return NULL;
	}
	for (int i = 0; i < J->size; i++) {
		off[i] = (size_t)i * n;
		off[J->size + i] = n;
	}
	return off;
}

/* Ring steps (from sb) over the blocked layout: size blocks of count elements. */
static int ring_blocks(struct mr_jaccl *J, unsigned char *buf, size_t count, size_t esz, int sb,
		       int mode, enum meshrun_dtype dt, enum mr_op op, const char *what,
		       struct meshrun_err *err)
{
	int nj = njobs_for(J, count * esz * (size_t)J->size);
	struct job *jobs = jobs_new(J, nj);

	if (!jobs)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	layout_blocks(J, jobs, nj, count, esz);
	int rc = ring_steps(J, buf, jobs, nj, sb, mode, dt, op, what, err);
	jobs_free(jobs, nj);
	return rc;
}

/* ---------------------------------------------------------------- ops */

static int j_all_reduce(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
			enum mr_op op, struct meshrun_err *err)
{
	struct mr_jaccl *J = J_of(g);

	if (broken(J, err) < 0)
		return J->ferr.code;
	if (J->topo == MR_JACCL_MESH)
		return mesh_all_reduce(J, buf, count, dt, op, err);
	return ring_all_reduce(J, buf, count, dt, op, err);
}

static int j_reduce_scatter(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
			    enum mr_op op, struct meshrun_err *err)
{
	struct mr_jaccl *J = J_of(g);
	size_t esz = mr_dtype_size((int)dt);
	int rc;

	if (broken(J, err) < 0)
		return J->ferr.code;
	if (J->topo == MR_JACCL_MESH) {
		size_t *off = equal_blocks(J, count, err);
		if (!off)
			return MESHRUN_E_NOMEM;
		rc = mesh_reduce_scatter(J, buf, off, off + J->size, dt, op, "sum_scatter", err);
		free(off);
		return rc;
	}
	/* shifted by one so that position v ends with block v, i.e. its own */
	return ring_blocks(J, buf, count, esz, -1, MR_JX_REDUCE, dt, op, "sum_scatter", err);
}

static int j_all_gather(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err)
{
	struct mr_jaccl *J = J_of(g);
	int rc;

	if (broken(J, err) < 0)
		return J->ferr.code;
	if (J->topo == MR_JACCL_MESH) {
		size_t *off = equal_blocks(J, bytes, err);
		if (!off)
			return MESHRUN_E_NOMEM;
		rc = mesh_all_gather_blocks(J, buf, off, off + J->size, "all_gather", err);
		free(off);
		return rc;
	}
	return ring_blocks(J, buf, bytes, 1, 0, MR_JX_COPY, MESHRUN_UINT8, MR_OP_SUM, "all_gather", err);
}

static int p2p(struct meshrun_group *g, const char *what, const void *sbuf, void *rbuf,
	       size_t bytes, int peer, struct meshrun_err *err)
{
	struct mr_jaccl *J = J_of(g);
	struct mr_jxfer x;

	if (broken(J, err) < 0)
		return J->ferr.code;
	if (!J->peer[peer])
		return mr_err_set(err, MESHRUN_E_UNSUPPORTED, "jaccl-ring: %s: rank %d is not a neighbour of rank %d (the ring connects neighbours only)", what, peer, J->rank);
	memset(&x, 0, sizeof(x));
	x.c = J->peer[peer];
	x.src = sbuf;
	x.slen = sbuf ? bytes : 0;
	x.dst = rbuf;
	x.dlen = rbuf ? bytes : 0;
	return run(J, what, &x, 1, false, MR_OP_SUM, MESHRUN_UINT8, err);
}

static int j_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		  struct meshrun_err *err)
{
	return p2p(g, "send", buf, NULL, bytes, dst, err);
}

static int j_recv(struct meshrun_group *g, void *buf, size_t bytes, int src, struct meshrun_err *err)
{
	return p2p(g, "recv", NULL, buf, bytes, src, err);
}

static int j_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	struct mr_jaccl *J = J_of(g);
	unsigned char *b = calloc((size_t)J->size, 1);

	if (!b)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	int rc = j_all_gather(g, b, 1, err);
	free(b);
	return rc;
}

static void j_release(struct meshrun_group *g)
{
	struct mr_jaccl *J = J_of(g);

	if (!J)
		return;
	mr_jaccl_verbs_teardown(J);
	mr_jaccl_side_close(&J->side);
	free(J);
	g->impl = NULL;
}

static int j_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	struct mr_jaccl_env env;
	struct mr_jaccl_matrix m = { 0, NULL };
	struct mr_jaccl *J = NULL;
	int rc, ncables = 0;

	(void)flags;
	rc = mr_jaccl_env_read(&env, err);
	if (rc < 0)
		return rc;
	rc = mr_jaccl_matrix_load(env.devices_path, &m, err);
	if (rc < 0)
		goto out;
	if (env.rank >= m.size) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "jaccl: %s=%d but '%s' has %d ranks", env.which_rank, env.rank, env.devices_path, m.size);
		goto out;
	}
	rc = mr_jaccl_matrix_topology(&m, env.prefer_ring, &ncables, env.devices_path, err);
	if (rc < 0)
		goto out;
	J = calloc(1, sizeof(*J));
	if (!J) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		goto out;
	}
	J->rank = env.rank;
	J->size = m.size;
	J->topo = rc;
	J->ncables = ncables;
	J->timeout_ms = env.timeout_ms;
	g->impl = J;
	rc = mr_jaccl_side_open(&J->side, J->rank, J->size, env.coordinator, env.token,
				env.token_len, env.timeout_ms, err);
	if (rc < 0)
		goto out_free;
	rc = mr_jaccl_verbs_setup(J, &m, &env, err);
	if (rc == 0)
		rc = mr_jaccl_side_watch(&J->side, err);
	if (rc < 0)
		goto out_free;
	g->rank = J->rank;
	g->size = J->size;
	mr_jaccl_matrix_free(&m);
	return 0;

out_free:
	if (J->side.fd)
		mr_jaccl_side_abort(&J->side, err && err->msg[0] ? err->msg : "jaccl: setup failed");
	j_release(g);
out:
	mr_jaccl_matrix_free(&m);
	return rc;
}

const struct mr_coll_ops mr_coll_jaccl_ops = {
	.name = "jaccl",
	.init = j_init,
	.release = j_release,
	.all_reduce = j_all_reduce,
	.all_gather = j_all_gather,
	.reduce_scatter = j_reduce_scatter,
	.send = j_send,
	.recv = j_recv,
	.barrier = j_barrier,
};
