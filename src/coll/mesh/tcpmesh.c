/*
 * tcpmesh.c - the mesh backend over TCP (tcpmesh.h): init, the data engine,
 * the collectives.
 *
 * Engine: a collective is one mesh step (mesh_plan.h); in a step every peer
 * gets one transfer each way, of one or two regions in a row: the
 * reduce-scatter's block, then (all-reduce) the all-gather's, so no rank
 * waits at a step boundary for the slowest and every cable stays busy from
 * the first byte to the last. A transfer is cut into chunks (step_chunk)
 * and chunk c travels on cable c % K of that peer, so K cables carry it side
 * by side; each cable's bytes are simply its chunks in order (both sides
 * know the lengths: no framing). The own block's chunk c goes out to every
 * peer once it is reduced; what arrives of the all-gather lands in place
 * (block p's chunk c only after our own chunk c of block p went to p: p
 * reduced it first). All sockets are
 * non-blocking and driven from one poll loop in the caller's thread; waiting
 * is only in poll(), which also watches the fail pipe (the control plane's
 * stall and abort detection, coll/tcp/p2p.c).
 *
 * Reduction order: received chunks land in per-cable slots (MR_MESH_DEPTH
 * deep) and chunk c of the own block is reduced once every peer's chunk c is
 * there, peers in ascending rank order, own data first: the same sequence of
 * operations on every run. A peer may run MR_MESH_DEPTH chunks per cable
 * ahead of the slowest; the slowest always has a free slot, so no rank waits
 * on a cycle. Copies (all-gather) land in place.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/coll.h"
#include "coll/mesh_plan.h"
#include "coll/mesh/tcpmesh.h"
#include "coll/tcp/conn.h"
#include "coll/tcp/tcp.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MR_MESH_TILE (16u << 10) /* reduce tile: a multiple of every dtype size */

/*
 * Schedule choice (MESHRUN_MESH_SCHEDULE, docs/contracts.md). Where the
 * processors bind rather than the cables (ranks outnumbering cores, unlimited
 * links), the mesh schedule moves the same bytes as the ring over half again
 * as many flows at once, and costs more processor time per all-reduce (16 MiB
 * on 4 ranks sharing 2 cores: about 12% more in the kernel's copies alone,
 * raw TCP without reductions); every rank also waits on every other, so one
 * descheduled rank stalls all. The ring schedule runs over the mesh's own
 * connections to the two ring neighbours (the engine's tcp/ring_sched.c,
 * mr_tcp_ring_all_reduce). With `auto` the first six all-reduces of each size
 * class alternate the mesh schedule and the ring's; the first of each only
 * warms it up (a schedule's first call of a size is several times slower than
 * its later ones: on 4 ranks sharing 2 cores, 15 ms against 1.4 ms at 1 MiB,
 * and timing that call chose the ring for every size there), the other two of
 * each are timed and the faster of the two counts: a call slowed by a
 * descheduled rank (a 20% blip is common on shared cores) once chose the mesh
 * at 16 MiB where it ran 0.82x the ring. The ranks take the larger time of
 * each (a two-double all-reduce, so all choose alike) and keep the mesh only
 * where it is at least 5% faster: on a near tie the ring, whose two flows per
 * rank cost less processor time. Links binding, the mesh wins by far (1.4x and
 * more): three ring calls per class are the price.
 */
enum { CLS_TRIAL_CALLS = 6, CLS_MESH = CLS_TRIAL_CALLS, CLS_RING };
#define CLS_MESH_MARGIN 0.95 /* the mesh's time at most this share of the ring's */
struct sched_class {
	unsigned char state;       /* trial calls made so far, then CLS_MESH or CLS_RING */
	int64_t t_us[2];           /* fastest timed call: [0] mesh, [1] ring */
};

struct mr_mesh {
	struct mr_tcp ctl;         /* control plane: env, lanes, progress thread, failure */
	struct mr_mesh_hosts hosts;
	int **fd;                  /* fd[p]: ncab[p] data connections (NULL for self) */
	int *ncab;
	int totcab;                /* sum of ncab */
	unsigned char *slots;      /* reduce slots: per peer, per cable, MR_MESH_DEPTH chunks */
	unsigned char *small;      /* direct all-reduce: size * MR_MESH_DIRECT */
	struct pollfd *pfd;        /* totcab + 1 */
	struct mr_mesh_xfer *plan; /* size */
	enum sched { SCHED_AUTO, SCHED_MESH, SCHED_RING } sched; /* MESHRUN_MESH_SCHEDULE */
	struct sched_class cls[64]; /* auto: per all-reduce size class (log2 of the bytes) */
};

static struct mr_mesh *mesh_of(struct meshrun_group *g)
{
	return g->impl;
}

static void mesh_release(struct meshrun_group *g)
{
	struct mr_mesh *m = mesh_of(g);

	if (!m)
		return;
	for (int p = 0; m->fd && p < m->ctl.size; p++) {
		for (int k = 0; m->fd[p] && k < m->ncab[p]; k++)
			mr_close(&m->fd[p][k]);
		free(m->fd[p]);
	}
	mr_tcp_ctl_release(&m->ctl);
	free(m->ctl.tmp);
	mr_mesh_hosts_free(&m->hosts);
	free(m->fd);
	free(m->ncab);
	free(m->slots);
	free(m->small);
	free(m->pfd);
	free(m->plan);
	free(m);
	g->impl = NULL;
}

/*
 * The control plane names peers by r->hosts (mr_tcp_peer_addr): one address
 * per rank, the peer's own end of the cable to us, so that messages read
 * "rank 2 (10.0.1.2:5002)". Ours: our end towards the first peer.
 */
static int peer_names(struct mr_mesh *m, struct meshrun_err *err)
{
	struct mr_tcp *r = &m->ctl;

	r->hosts.nranks = r->size;
	r->hosts.naddrs = 1;
	r->hosts.addrs = calloc((size_t)r->size, sizeof(*r->hosts.addrs));
	if (!r->hosts.addrs)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	for (int p = 0; p < r->size; p++) {
		int me = r->rank, other = p != me ? me : (me + 1) % r->size;
		r->hosts.addrs[p] = *MR_MESH_ADDR(&m->hosts, p, other, 0);
	}
	return 0;
}

static bool same_addr(const struct mr_ring_addr *a, const struct mr_ring_addr *b)
{
	return a->salen == b->salen && memcmp(&a->sa, &b->sa, a->salen) == 0;
}

/* Links to every peer (we call the lower ranks), listeners for the higher ones. */
static int mesh_connect(struct mr_mesh *m, struct meshrun_err *err)
{
	struct mr_tcp *r = &m->ctl;
	struct mr_conn_link *links = calloc((size_t)r->size, sizeof(*links));
	const struct mr_ring_addr **own = calloc((size_t)r->size * MR_MESH_MAX_CABLES, sizeof(*own));
	struct mr_conn_plan plan = {
		.rank = r->rank, .size = r->size, .token = r->token, .token_len = r->token_len,
		.timeout_ms = r->timeout_ms, .who = "mesh", .verbose = r->verbose,
	};
	int n = 0, nown = 0, rc;

	if (!links || !own) {
		free(links);
		free(own);
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	}
	for (int p = 0; p < r->size; p++) {
		if (p == r->rank)
			continue;
		struct mr_conn_link *lk = &links[n++];
		lk->peer = p;
		lk->outgoing = p < r->rank;
		lk->nconn = MR_MESH_HELLO_TAG + (uint32_t)m->ncab[p];
		lk->ndata = (unsigned)m->ncab[p];
		lk->addrs = MR_MESH_ADDR(&m->hosts, p, r->rank, 0);
		lk->data_fd = m->fd[p];
		lk->ctl_fd = &r->lane[mr_tcp_lane_of(r, p)].fd;
		lk->peer_text = mr_tcp_peer_addr(r, p);
		r->lane[mr_tcp_lane_of(r, p)].peer = p;
		for (int k = 0; !lk->outgoing && k < m->ncab[p]; k++) {
			const struct mr_ring_addr *a = MR_MESH_ADDR(&m->hosts, r->rank, p, k);
			bool dup = false;
			for (int i = 0; i < nown && !dup; i++)
				dup = same_addr(own[i], a);
			if (!dup)
				own[nown++] = a;
		}
	}
	plan.links = links;
	plan.nlinks = n;
	plan.listen = own;
	plan.nlisten = nown;
	rc = mr_conn_setup(&plan, err);
	free(links);
	free(own);
	if (rc < 0)
		return rc;
	for (int p = 0; p < r->size; p++) {
		if (p == r->rank)
			continue;
		for (int k = 0; k < m->ncab[p]; k++)
			mr_tcp_tune_socket(r, m->fd[p][k], true);
		mr_tcp_tune_socket(r, r->lane[mr_tcp_lane_of(r, p)].fd, false);
	}
	mr_tcp_log_tuning(r, m->fd[(r->rank + 1) % r->size][0]);
	mr_tcp_log(r, "connected to %d peers over %d data connection(s) plus control lanes", r->size - 1, m->totcab);
	return 0;
}

static int mesh_alloc(struct mr_mesh *m, struct meshrun_err *err)
{
	struct mr_tcp *r = &m->ctl;
	size_t n = (size_t)r->size;

	m->fd = calloc(n, sizeof(*m->fd));
	m->ncab = calloc(n, sizeof(*m->ncab));
	m->plan = calloc(n, sizeof(*m->plan));
	if (!m->fd || !m->ncab || !m->plan)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	for (int p = 0; p < r->size; p++) {
		if (p == r->rank)
			continue;
		m->ncab[p] = MR_MESH_NCAB(&m->hosts, r->rank, p);
		m->totcab += m->ncab[p];
		m->fd[p] = malloc((size_t)m->ncab[p] * sizeof(int));
		if (!m->fd[p])
			return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
		for (int k = 0; k < m->ncab[p]; k++)
			m->fd[p][k] = -1;
	}
	m->slots = malloc((size_t)m->totcab * MR_MESH_DEPTH * MR_MESH_CHUNK);
	m->small = malloc(n * MR_MESH_DIRECT);
	m->pfd = calloc((size_t)m->totcab + 1, sizeof(*m->pfd));
	if (!m->slots || !m->small || !m->pfd)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory for %d cables", m->totcab);
	if (r->size >= 3 && m->sched != SCHED_MESH) {
		/* the ring schedule's view of our connections: its neighbours' cables
		 * (two ranks have one connection per cable, which the ring's pair
		 * layout cannot share: they keep the mesh schedule, the same bytes) */
		int left = (r->rank + r->size - 1) % r->size, right = (r->rank + 1) % r->size;
		r->left = m->fd[left];
		r->right = m->fd[right];
		r->nconn = MR_MIN(m->ncab[left], m->ncab[right]);
		r->tmp = malloc(mr_tcp_ring_tmp_bytes(r));
		if (!r->tmp)
			return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	}
	return 0;
}

/* MESHRUN_MESH_SCHEDULE: auto (default), mesh or ring (see struct sched_class). */
static int mesh_env_sched(struct mr_mesh *m, struct meshrun_err *err)
{
	const char *v = getenv(MR_ENV(MESHRUN_MESH_SCHEDULE));

	if (!v || !*v || strcmp(v, "auto") == 0)
		m->sched = SCHED_AUTO;
	else if (strcmp(v, "mesh") == 0)
		m->sched = SCHED_MESH;
	else if (strcmp(v, "ring") == 0)
		m->sched = SCHED_RING;
	else
		return mr_err_set(err, MESHRUN_E_PARSE, "mesh: MESHRUN_MESH_SCHEDULE='%s': expected auto, mesh or ring", v);
	return 0;
}

static int mesh_init(struct meshrun_group *g, unsigned flags, struct meshrun_err *err)
{
	const char *path = getenv(MR_ENV(MESHRUN_MESH_HOSTFILE));
	const char *which = NULL;
	int rank = -1, envsize = -1;
	int rc = mr_env_rank(&rank, &envsize, &which, err);

	(void)flags;
	if (rc < 0)
		return rc;
	if (rc == 0 || !path || !*path)
		return mr_err_set(err, MESHRUN_E_BACKEND, "mesh: needs MLX_RANK (or SLURM_PROCID, OMPI_COMM_WORLD_RANK) and MESHRUN_MESH_HOSTFILE, got MESHRUN_MESH_HOSTFILE='%s'", path ? path : "");

	struct mr_mesh *m = calloc(1, sizeof(*m));
	if (!m)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	struct mr_tcp *r = &m->ctl;
	g->impl = m;
	rc = mr_tcp_ctl_init(r, "mesh", err);
	if (rc < 0)
		goto fail;
	rc = mesh_env_sched(m, err);
	if (rc < 0)
		goto fail;
	rc = mr_mesh_hosts_load(path, &m->hosts, err);
	if (rc < 0) {
		mr_err_prefix(err, "mesh: MESHRUN_MESH_HOSTFILE");
		goto fail;
	}
	r->rank = rank;
	r->size = m->hosts.size;
	r->nconn = 1;
	r->direct = true;
	if (rank >= r->size) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "mesh: %s=%d but '%s' lists %d ranks", which, rank, path, r->size);
		goto fail;
	}
	if (envsize >= 0 && envsize != r->size) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "mesh: the environment says %d ranks but '%s' lists %d", envsize, path, r->size);
		goto fail;
	}
	g->rank = r->rank;
	g->size = r->size;
	if (r->size == 1)
		return 0;
	rc = mr_tcp_lanes_alloc(r, r->size - 1, err);
	if (rc == 0)
		rc = peer_names(m, err);
	if (rc == 0)
		rc = mesh_alloc(m, err);
	if (rc == 0)
		rc = mr_tcp_ctl_pipes(r, err);
	if (rc == 0)
		rc = mesh_connect(m, err);
	if (rc == 0)
		rc = mr_tcp_p2p_start(r, err);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	mesh_release(g);
	g->rank = 0;
	g->size = 1;
	return rc;
}

/* ------------------------------------------------------------------ engine */

/* A run of bytes one peer transfer sends or receives; chunks of s->chunk. */
struct seg {
	unsigned char *p;
	size_t len, nch;
};

struct cab {
	int fd;
	size_t sj, so;   /* chunks sent on this cable, bytes of the current one */
	size_t rj, ro;   /* chunks received on this cable, bytes of the current one */
	bool swait, rwait;
	unsigned char *slot; /* reduce: MR_MESH_DEPTH chunk buffers */
	struct mr_rxwatch rxw; /* the chunk being received: a stalled cable (watch.c) */
	bool tx;         /* sent on fd in this step: what TCP retransmitted (watch.c) */
};

/*
 * One peer's stream each way: segment 0 then segment 1, chunk i of the
 * stream (segment 0's chunks first) on cable i % ncab. Receiving, segment 0
 * lands in the reduce slots when the step reduces, else in place; segment 1
 * always in place. Sending, segment 1 is the own block of a pipelined
 * all-reduce: its chunk j leaves once the reduction has passed it.
 */
struct xfer {
	int peer, ncab;
	struct seg snd[2], rcv[2];
	size_t snch, rnch;  /* chunks each way, both segments */
	struct cab cab[MR_MESH_MAX_CABLES];
};

struct step {
	struct mr_mesh *m;
	struct xfer *x;
	int nx;
	bool reduce;      /* segment 0's receives are reduced into red */
	bool gate;        /* segment 1's sends wait for the reduction */
	enum meshrun_dtype dt;
	enum mr_op op;
	size_t esz;
	size_t chunk;     /* bytes per chunk, a multiple of every dtype size */
	unsigned char *red; /* reduce: the own block */
	size_t red_len;
	size_t red_next;  /* reduce: next chunk of the own block to reduce */
	size_t red_nch;   /* reduce: chunks of the own block */
};

static size_t nchunks(const struct step *s, size_t bytes)
{
	return (bytes + s->chunk - 1) / s->chunk;
}

static size_t chunk_len(const struct step *s, size_t total, size_t c)
{
	return MR_MIN(s->chunk, total - c * s->chunk);
}

/* Stream chunk i of x's segments sg: where it is and how long. */
static unsigned char *stream_at(const struct step *s, const struct seg sg[2], size_t i, size_t *len,
				int *which)
{
	int w = i >= sg[0].nch;
	size_t c = w ? i - sg[0].nch : i;

	*len = chunk_len(s, sg[w].len, c);
	*which = w;
	return sg[w].p + c * s->chunk;
}

/* Stream chunk index of cable k's j-th chunk. */
static size_t chunk_of(const struct xfer *x, int k, size_t j)
{
	return (size_t)k + j * (size_t)x->ncab;
}

static bool cab_recv_pending(const struct step *s, const struct xfer *x, int k)
{
	const struct cab *cb = &x->cab[k];
	size_t c = chunk_of(x, k, cb->rj);

	if (c >= x->rnch)
		return false;
	/* reduce: the slot must be free (its previous chunk reduced) */
	return !s->reduce || c >= x->rcv[0].nch || c < s->red_next + (size_t)MR_MESH_DEPTH * (size_t)x->ncab;
}

static bool cab_send_done(const struct xfer *x, int k)
{
	return chunk_of(x, k, x->cab[k].sj) >= x->snch;
}

static bool cab_send_pending(const struct step *s, const struct xfer *x, int k)
{
	size_t c = chunk_of(x, k, x->cab[k].sj);

	if (c >= x->snch)
		return false;
	/* the own block's chunk leaves once reduced (pipelined all-reduce) */
	return !s->gate || c < x->snd[0].nch || c - x->snd[0].nch < s->red_next;
}

static int cab_recv(struct step *s, struct xfer *x, int k, struct meshrun_err *err)
{
	struct cab *cb = &x->cab[k];
	struct mr_tcp *r = &s->m->ctl;

	while (!cb->rwait && cab_recv_pending(s, x, k)) {
		size_t len;
		int w;
		unsigned char *dst = stream_at(s, x->rcv, chunk_of(x, k, cb->rj), &len, &w);
		if (s->reduce && w == 0)
			dst = cb->slot + (cb->rj % MR_MESH_DEPTH) * s->chunk;
		ssize_t n = recv(cb->fd, dst + cb->ro, len - cb->ro, MSG_DONTWAIT);
		if (n == 0)
			return mr_tcp_fail(r, err, "rank %d (%s) closed the connection", x->peer, mr_tcp_peer_addr(r, x->peer));
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				cb->rwait = true;
				return 0;
			}
			if (errno == EINTR)
				return 0;
			return mr_tcp_fail(r, err, "recv from rank %d (%s): %s", x->peer, mr_tcp_peer_addr(r, x->peer), strerror(errno));
		}
		cb->ro += (size_t)n;
		if (cb->ro == len) {
			cb->rj++;
			cb->ro = 0;
		}
	}
	return 0;
}

static int cab_send(struct step *s, struct xfer *x, int k, struct meshrun_err *err)
{
	struct cab *cb = &x->cab[k];
	struct mr_tcp *r = &s->m->ctl;

	while (!cb->swait && cab_send_pending(s, x, k)) {
		size_t len;
		int w;
		const unsigned char *src = stream_at(s, x->snd, chunk_of(x, k, cb->sj), &len, &w);
		ssize_t n = mr_tcp_send_some(cb->fd, src + cb->so, len - cb->so);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				cb->swait = true;
				return 0;
			}
			if (errno == EINTR)
				return 0;
			return mr_tcp_fail(r, err, "send to rank %d (%s): %s", x->peer, mr_tcp_peer_addr(r, x->peer), strerror(errno));
		}
		cb->so += (size_t)n;
		cb->tx = true;
		if (cb->so == len) {
			cb->sj++;
			cb->so = 0;
		}
	}
	return 0;
}

/* Has peer transfer x received chunk c of segment 0 completely? */
static bool have_chunk(const struct xfer *x, size_t c)
{
	int k = (int)(c % (size_t)x->ncab);

	return x->cab[k].rj > c / (size_t)x->ncab;
}

/* Reduce every chunk that all peers delivered, peers in ascending order. */
static bool reduce_ready(struct step *s)
{
	size_t before = s->red_next;

	while (s->red_next < s->red_nch) {
		size_t c = s->red_next;
		for (int i = 0; i < s->nx; i++)
			if (!have_chunk(&s->x[i], c))
				return s->red_next != before;
		size_t len = chunk_len(s, s->red_len, c);
		/* tile by tile, every peer's input into a tile while it is in the
		 * first-level cache: the same order per element as chunk by chunk */
		for (size_t t = 0; t < len; t += MR_MESH_TILE) {
			unsigned char *acc = s->red + c * s->chunk + t;
			size_t n = MR_MIN((size_t)MR_MESH_TILE, len - t) / s->esz;
			for (int i = 0; i < s->nx; i++) {
				const struct xfer *x = &s->x[i];
				const struct cab *cb = &x->cab[c % (size_t)x->ncab];
				size_t j = c / (size_t)x->ncab;
				mr_reduce(s->op, s->dt, acc, cb->slot + (j % MR_MESH_DEPTH) * s->chunk + t, n);
			}
		}
		s->red_next++;
	}
	return s->red_next != before;
}

static bool step_busy(const struct step *s)
{
	if (s->reduce && s->red_next < s->red_nch)
		return true;
	for (int i = 0; i < s->nx; i++)
		for (int k = 0; k < s->x[i].ncab; k++)
			if (chunk_of(&s->x[i], k, s->x[i].cab[k].rj) < s->x[i].rnch ||
			    !cab_send_done(&s->x[i], k))
				return true;
	return false;
}

/* The stall check of every cable's chunk being received, and what TCP
 * retransmitted of its sends (watch.c). */
static int watch_chunks(struct step *s, struct meshrun_err *err)
{
	int64_t now = 0;

	for (int i = 0; i < s->nx; i++)
		for (int k = 0; k < s->x[i].ncab; k++) {
			struct xfer *x = &s->x[i];
			struct cab *cb = &x->cab[k];
			if (cb->tx) {
				if (!now)
					now = mr_now_ms();
				int rc = mr_txwatch_check(&s->m->ctl, cb->fd, x->peer, now, err);
				if (rc < 0)
					return rc;
			}
			if (cb->ro == 0) {
				cb->rxw.since = 0;
				continue;
			}
			if (!now)
				now = mr_now_ms();
			size_t len;
			int w;
			(void)stream_at(s, x->rcv, chunk_of(x, k, cb->rj), &len, &w);
			int rc = mr_rxwatch_check(&s->m->ctl, &cb->rxw, x->peer, cb->rj, cb->ro, len, now, err);
			if (rc < 0)
				return rc;
		}
	return 0;
}

/* Move every transfer of the step from one poll loop until all are done. */
static int step_run(struct step *s, struct meshrun_err *err)
{
	struct mr_mesh *m = s->m;
	struct mr_tcp *r = &m->ctl;
	int rc = mr_tcp_check_failed(r, err);

	while (rc == 0) {
		for (int i = 0; i < s->nx && rc == 0; i++)
			for (int k = 0; k < s->x[i].ncab && rc == 0; k++) {
				rc = cab_recv(s, &s->x[i], k, err);
				if (rc == 0)
					rc = cab_send(s, &s->x[i], k, err);
			}
		if (rc < 0)
			return rc;
		/* slots freed or own chunks ready to send: move more before waiting */
		if (s->reduce && reduce_ready(s))
			continue;
		if (!step_busy(s))
			return 0;
		int np = 0;
		for (int i = 0; i < s->nx; i++)
			for (int k = 0; k < s->x[i].ncab; k++) {
				struct xfer *x = &s->x[i];
				short ev = (short)((cab_recv_pending(s, x, k) ? POLLIN : 0) |
						   (cab_send_pending(s, x, k) ? POLLOUT : 0));
				m->pfd[np++] = (struct pollfd){ .fd = ev ? x->cab[k].fd : -1, .events = ev };
			}
		m->pfd[np++] = (struct pollfd){ .fd = r->fail_pipe[0], .events = POLLIN };
		int n = poll(m->pfd, (nfds_t)np, 1000);
		if (n < 0 && errno != EINTR)
			return mr_tcp_fail(r, err, "rank %d: poll: %s", r->rank, strerror(errno));
		np = 0;
		for (int i = 0; i < s->nx; i++)
			for (int k = 0; k < s->x[i].ncab; k++, np++) {
				short re = m->pfd[np].revents;
				if (re & (POLLIN | POLLERR | POLLHUP))
					s->x[i].cab[k].rwait = false;
				if (re & (POLLOUT | POLLERR | POLLHUP))
					s->x[i].cab[k].swait = false;
			}
		rc = mr_tcp_check_failed(r, err);
		if (rc == 0)
			rc = watch_chunks(s, err);
	}
	return rc;
}

/*
 * Chunk size of a step whose largest block is blk bytes: MR_MESH_CHUNK, or
 * for smaller blocks about a quarter of one (at least MR_MESH_CHUNK_MIN), so
 * a pipelined all-reduce forwards its first reduced chunks while the rest of
 * the block still arrives. A multiple of 4096 (of every dtype size).
 */
static size_t step_chunk(size_t blk)
{
	size_t c = blk / 4;

	c = (c + 4095) & ~(size_t)4095;
	return MR_MAX((size_t)MR_MESH_CHUNK_MIN, MR_MIN(c, (size_t)MR_MESH_CHUNK));
}

enum step_kind {
	STEP_REDUCE_SCATTER, /* send block p to p, reduce what comes into block rank */
	STEP_ALL_GATHER,     /* send block rank to all, block p from p in place */
	STEP_ALL_REDUCE,     /* both, the own block's chunks forwarded once reduced */
	STEP_DIRECT,         /* send the whole buf to all, peer p's into dst_all + p * len */
};

/*
 * One mesh step over buf: blocks of bytes (block b at boff[b], blen[b] bytes),
 * schedule from mesh_plan.h. dst_all: STEP_DIRECT's gather buffer (block p of
 * blen[0] bytes at dst_all + p * blen[0]), every peer sent the whole buf.
 */
static int mesh_step(struct mr_mesh *m, unsigned char *buf, const size_t *boff, const size_t *blen,
		     enum step_kind kind, enum meshrun_dtype dt, enum mr_op op, unsigned char *dst_all,
		     struct meshrun_err *err)
{
	struct mr_tcp *r = &m->ctl;
	struct xfer *x = calloc((size_t)r->size, sizeof(*x));
	bool reduce = kind == STEP_REDUCE_SCATTER || kind == STEP_ALL_REDUCE;
	struct step s = { .m = m, .x = x, .reduce = reduce, .gate = kind == STEP_ALL_REDUCE, .dt = dt,
			  .op = op, .esz = mr_dtype_size((int)dt) };
	size_t slot = 0, maxblk = 0;
	int rc;

	if (!x)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	for (int b = 0; b < r->size; b++)
		maxblk = MR_MAX(maxblk, blen[b]);
	s.chunk = step_chunk(maxblk);
	s.nx = mr_mesh_blocks(r->rank, r->size, reduce, m->plan);
	for (int i = 0; i < s.nx; i++) {
		const struct mr_mesh_xfer *pl = &m->plan[i];
		struct xfer *t = &x[i];
		t->peer = pl->peer;
		t->ncab = m->ncab[pl->peer];
		t->snd[0] = (struct seg){ buf + boff[pl->sblk], blen[pl->sblk], 0 };
		t->rcv[0] = (struct seg){ dst_all ? dst_all + (size_t)pl->peer * blen[0] : buf + boff[pl->rblk],
					  blen[pl->rblk], 0 };
		if (kind == STEP_ALL_REDUCE) {
			/* then the all-gather: the own block out, the peer's block in */
			t->snd[1] = (struct seg){ buf + boff[r->rank], blen[r->rank], 0 };
			t->rcv[1] = (struct seg){ buf + boff[pl->peer], blen[pl->peer], 0 };
		}
		for (int w = 0; w < 2; w++) {
			t->snd[w].nch = nchunks(&s, t->snd[w].len);
			t->rcv[w].nch = nchunks(&s, t->rcv[w].len);
		}
		t->snch = t->snd[0].nch + t->snd[1].nch;
		t->rnch = t->rcv[0].nch + t->rcv[1].nch;
		for (int k = 0; k < t->ncab; k++) {
			t->cab[k].fd = m->fd[pl->peer][k];
			t->cab[k].slot = m->slots + slot * MR_MESH_DEPTH * MR_MESH_CHUNK;
			slot++;
		}
	}
	if (reduce) {
		s.red = buf + boff[r->rank];
		s.red_len = blen[r->rank];
		s.red_nch = nchunks(&s, s.red_len);
	}
	rc = step_run(&s, err);
	free(x);
	return rc;
}

/* ------------------------------------------------------------- collectives */

static int mesh_all_reduce_mesh(struct meshrun_group *g, void *vbuf, size_t count, enum meshrun_dtype dt,
				enum mr_op op, struct meshrun_err *err)
{
	struct mr_mesh *m = mesh_of(g);
	size_t esz = mr_dtype_size((int)dt), n = (size_t)g->size;
	unsigned char *buf = vbuf;
	int rc;

	if (g->size == 1 || count == 0)
		return 0;
	size_t *off = calloc(2 * n, sizeof(*off));
	if (!off)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	size_t *len = off + n;
	if (mr_mesh_direct(count, esz, g->size)) {
		/* every peer gets the whole buffer; all reduce the n inputs in rank order */
		size_t bytes = count * esz;
		for (size_t i = 0; i < n; i++) {
			off[i] = 0;
			len[i] = bytes;
		}
		rc = mesh_step(m, buf, off, len, STEP_DIRECT, dt, op, m->small, err);
		if (rc == 0) {
			memcpy(m->small + (size_t)g->rank * bytes, buf, bytes);
			memcpy(buf, m->small, bytes);
			for (int p = 1; p < g->size; p++)
				mr_reduce(op, dt, buf, m->small + (size_t)p * bytes, count);
		}
		free(off);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		size_t o, c;
		mr_mesh_split(count, n, i, &o, &c);
		off[i] = o * esz;
		len[i] = c * esz;
	}
	rc = mesh_step(m, buf, off, len, STEP_ALL_REDUCE, dt, op, NULL, err);
	free(off);
	return rc;
}

static int log2_floor(size_t v)
{
	int l = 0;

	while (v >>= 1)
		l++;
	return l;
}

/* auto: warm up and time both schedules on a class's first calls, agree, keep the faster */
static int mesh_all_reduce(struct meshrun_group *g, void *buf, size_t count, enum meshrun_dtype dt,
			   enum mr_op op, struct meshrun_err *err)
{
	struct mr_mesh *m = mesh_of(g);
	size_t bytes = count * mr_dtype_size((int)dt);

	if (g->size < 3 || count == 0 || m->sched == SCHED_MESH || mr_mesh_direct(count, mr_dtype_size((int)dt), g->size))
		return mesh_all_reduce_mesh(g, buf, count, dt, op, err);
	if (m->sched == SCHED_RING)
		return mr_tcp_ring_all_reduce(&m->ctl, buf, count, dt, op, err);
	struct sched_class *c = &m->cls[log2_floor(bytes)];
	if (c->state == CLS_MESH)
		return mesh_all_reduce_mesh(g, buf, count, dt, op, err);
	if (c->state == CLS_RING)
		return mr_tcp_ring_all_reduce(&m->ctl, buf, count, dt, op, err);
	/* even trial calls run the mesh schedule, odd ones the ring's; 0 and 1 warm up */
	int call = c->state++;
	bool ring = call % 2 == 1;
	int64_t t0 = mr_now_us();
	int rc = ring ? mr_tcp_ring_all_reduce(&m->ctl, buf, count, dt, op, err)
		      : mesh_all_reduce_mesh(g, buf, count, dt, op, err);
	int64_t t = mr_now_us() - t0;
	if (rc < 0 || call < 2)
		return rc;
	if (call < 4 || t < c->t_us[ring])
		c->t_us[ring] = t;
	if (call < CLS_TRIAL_CALLS - 1)
		return 0;
	double tt[2] = { (double)c->t_us[0], (double)c->t_us[1] };
	/* every rank the same verdict: the slowest rank's times */
	rc = mesh_all_reduce_mesh(g, tt, 2, MESHRUN_FLOAT64, MR_OP_MAX, err);
	if (rc < 0)
		return rc;
	c->state = tt[0] <= CLS_MESH_MARGIN * tt[1] ? CLS_MESH : CLS_RING;
	mr_tcp_log(&m->ctl, "all-reduce of %zu bytes (class 2^%d): mesh schedule %.0f us, ring schedule %.0f us: the %s schedule from now on (MESHRUN_MESH_SCHEDULE=auto)",
		   bytes, log2_floor(bytes), tt[0], tt[1], c->state == CLS_RING ? "ring" : "mesh");
	return 0;
}

static int mesh_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			       enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct mr_mesh *m = mesh_of(g);
	size_t esz = mr_dtype_size((int)dt), n = (size_t)g->size;
	size_t *off;
	int rc;

	if (g->size == 1 || count == 0)
		return 0;
	off = calloc(2 * n, sizeof(*off));
	if (!off)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	for (size_t i = 0; i < n; i++) {
		off[i] = i * count * esz;
		off[n + i] = count * esz;
	}
	rc = mesh_step(m, buf, off, off + n, STEP_REDUCE_SCATTER, dt, op, NULL, err);
	free(off);
	return rc;
}

static int mesh_all_gather(struct meshrun_group *g, void *buf, size_t bytes, struct meshrun_err *err)
{
	struct mr_mesh *m = mesh_of(g);
	size_t n = (size_t)g->size;
	size_t *off;
	int rc;

	if (g->size == 1 || bytes == 0)
		return 0;
	off = calloc(2 * n, sizeof(*off));
	if (!off)
		return mr_err_set(err, MESHRUN_E_NOMEM, "mesh: out of memory");
	for (size_t i = 0; i < n; i++) {
		off[i] = i * bytes;
		off[n + i] = bytes;
	}
	rc = mesh_step(m, buf, off, off + n, STEP_ALL_GATHER, MESHRUN_UINT8, MR_OP_SUM, NULL, err);
	free(off);
	return rc;
}

static int mesh_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		     struct meshrun_err *err)
{
	return mr_tcp_p2p_send(&mesh_of(g)->ctl, buf, bytes, dst, err);
}

static int mesh_recv(struct meshrun_group *g, void *buf, size_t bytes, int src,
		     struct meshrun_err *err)
{
	return mr_tcp_p2p_recv(&mesh_of(g)->ctl, buf, bytes, src, err);
}

const struct mr_coll_ops mr_coll_mesh_ops = {
	.name = "mesh",
	.init = mesh_init,
	.release = mesh_release,
	.all_reduce = mesh_all_reduce,
	.all_gather = mesh_all_gather,
	.reduce_scatter = mesh_reduce_scatter,
	.send = mesh_send,
	.recv = mesh_recv,
	.barrier = mr_tcp_barrier,
};
