/*
 * coll/ring.c - the ring backend (not topo/ring.c, the ring search): environment,
 * collectives on the data connections.
 *
 * All-reduce (see ring.h for the layout): every channel is a small state
 * machine (next packet to send / to receive, bytes done of each) and all
 * channels of all connections are driven from one poll() loop in the
 * caller's thread: sockets are non-blocking, a rank never blocks in send()
 * while its neighbour blocks in send(), and waiting is only in poll(), so
 * ranks sharing cores do not spin. Receives of the reduce-scatter land in a
 * per-channel packet buffer and are reduced into the data when complete;
 * all-gather receives land in place.
 *
 * Faults: EOF, a socket error or a protocol violation on a data connection
 * fails the group naming the neighbour; the progress thread (ring_p2p.c)
 * fails it when a neighbour shows no sign of life for MESHRUN_TIMEOUT or an
 * abort notice arrives; the fail pipe wakes this loop in either case.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/coll.h"
#include "coll/ring.h"
#include "coll/ring_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Size of r->tmp: a packet buffer per channel (reduce-scatter receives), also
 * the scratch buffer of the small all-reduce. */
size_t mr_ring_tmp_bytes(const struct mr_ring *r)
{
	return (size_t)MR_MIN(2 * r->nconn, MR_RING_MAX_CHAN) * MR_RING_PKT_MAX;
}

static struct mr_ring *ring_of(struct meshrun_group *g)
{
	return g->impl;
}

void mr_ring_ctl_release(struct mr_ring *r)
{
	mr_ring_p2p_stop(r);
	for (int i = 0; r->lane && i < r->nlanes; i++)
		mr_close(&r->lane[i].fd);
	free(r->lane);
	r->lane = NULL;
	mr_close(&r->wake_pipe[0]);
	mr_close(&r->wake_pipe[1]);
	mr_close(&r->fail_pipe[0]);
	mr_close(&r->fail_pipe[1]);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	mr_ring_hosts_free(&r->hosts);
}

static void ring_release(struct meshrun_group *g)
{
	struct mr_ring *r = ring_of(g);

	if (!r)
		return;
	for (int i = 0; r->left && i < r->nconn; i++)
		mr_close(&r->left[i]);
	for (int i = 0; r->right && i < r->nconn; i++)
		mr_close(&r->right[i]);
	mr_ring_ctl_release(r);
	free(r->tmp);
	free(r->left);
	free(r->right);
	free(r);
	g->impl = NULL;
}

/* MESHRUN_RING_TCP_CC: a congestion control name for the data connections,
 * "system" to keep the system's; default MR_RING_CC_DEFAULT (ring_conn.c). */
static int ring_env_cc(struct mr_ring *r, struct meshrun_err *err)
{
	const char *cc = getenv(MR_ENV(MESHRUN_RING_TCP_CC));
	size_t len;

	if (!cc || !*cc)
		cc = MR_RING_CC_DEFAULT;
	if (strcmp(cc, "system") == 0)
		cc = "";
	len = strlen(cc);
	if (len >= sizeof(r->tcp_cc) || strspn(cc, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: MESHRUN_RING_TCP_CC='%s': expected a congestion control name like reno or cubic (at most %d characters), or 'system'", r->who, cc, (int)sizeof(r->tcp_cc) - 1);
	memcpy(r->tcp_cc, cc, len + 1);
	return 0;
}

int mr_ring_ctl_init(struct mr_ring *r, const char *who, struct meshrun_err *err)
{
	char what[64];
	int rc;

	r->who = who;
	r->wake_pipe[0] = r->wake_pipe[1] = r->fail_pipe[0] = r->fail_pipe[1] = -1;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->verbose = getenv(MR_ENV(MLX_RING_VERBOSE)) != NULL;
	rc = mr_env_timeout_ms(&r->timeout_ms, err);
	if (rc < 0)
		return rc;
	rc = mr_env_job_token(who, r->token, sizeof(r->token), &r->token_len, err);
	if (rc < 0)
		return rc;
	rc = ring_env_cc(r, err);
	if (rc < 0)
		return rc;
	snprintf(what, sizeof(what), "%s: MESHRUN_RING_SNDBUF", who);
	return mr_env_sndbuf(what, getenv(MR_ENV(MESHRUN_RING_SNDBUF)), &r->sndbuf, err);
}

int mr_ring_ctl_pipes(struct mr_ring *r, struct meshrun_err *err)
{
	if (mr_pipe_cloexec(r->wake_pipe) < 0 || mr_pipe_cloexec(r->fail_pipe) < 0)
		return mr_err_sys(err, "%s: pipe", r->who);
	mr_set_nonblock(r->wake_pipe[0], true);
	mr_set_nonblock(r->wake_pipe[1], true);
	mr_set_nonblock(r->fail_pipe[1], true);
	return 0;
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

	struct mr_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ring: out of memory");
	g->impl = r;
	rc = mr_ring_ctl_init(r, "ring", err);
	if (rc < 0)
		goto fail;
	rc = mr_ring_lanes_alloc(r, 2, err);
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
	r->tmp = malloc(mr_ring_tmp_bytes(r));
	if (!r->left || !r->right || !r->tmp) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "ring: out of memory");
		goto fail;
	}
	for (int i = 0; i < r->nconn; i++)
		r->left[i] = r->right[i] = -1;
	rc = mr_ring_ctl_pipes(r, err);
	if (rc < 0)
		goto fail;
	rc = mr_ring_connect_all(r, err);
	if (rc < 0)
		goto fail;
	rc = mr_ring_p2p_start(r, err);
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

/* One channel of a collective (see ring.h). */
struct chan {
	int dir;
	int sfd, rfd;          /* sockets */
	int speer, rpeer;      /* ranks at their other ends */
	size_t si, so;         /* packet being sent, bytes of it sent */
	size_t ri, ro;         /* packet being received, bytes of it received */
	size_t m;              /* packets this channel moves in this run */
	int slice;             /* which slice of each segment (mr_ring_packet's c) */
	unsigned char *tmp;    /* reduce-scatter receive buffer */
	bool rwait, swait;     /* recv/send hit EAGAIN: wait for poll() to say ready */
	size_t rwant;          /* bytes the packet being received still lacks (at EAGAIN) */
	int lowat;             /* SO_RCVLOWAT set on rfd (1: the default) */
	struct mr_rxwatch rxw; /* the packet being received: a stalled link (ring_watch.c) */
	bool tx;               /* sent on sfd in this run: what TCP retransmitted (ring_watch.c) */
};

struct run {
	struct mr_ring *r;
	const struct mr_ring_layout *l;
	unsigned char *data;
	size_t esz;
	enum meshrun_dtype dt;
	enum mr_op op;
	bool reduce;           /* reduce-scatter steps reduce what they receive */
	int s0;                /* first step */
};

static void packet_at(const struct run *u, const struct chan *c, int ci, size_t i, bool recv,
		      size_t *off, size_t *len, bool *rs)
{
	int step = u->s0 + (int)(i / u->l->npk);
	int k = mr_ring_seg(u->r->rank, u->r->size, c->dir, step, recv);

	mr_ring_packet(u->l, k, ci, i % u->l->npk, off, len);
	*off *= u->esz;
	*len *= u->esz;
	*rs = u->reduce && step < u->r->size - 1;
}

/* Returns 0, or <0 after a data-connection failure (group failed). */
static int chan_recv(struct run *u, struct chan *c, int ci, struct meshrun_err *err)
{
	while (c->ri < c->m) {
		size_t off, len;
		bool rs;
		packet_at(u, c, ci, c->ri, true, &off, &len, &rs);
		if (c->ro < len) {
			unsigned char *dst = rs ? c->tmp : u->data + off;
			if (c->rwait)
				return 0;
			ssize_t n = recv(c->rfd, dst + c->ro, len - c->ro, MSG_DONTWAIT);
			if (n == 0)
				return mr_ring_fail(u->r, err, "rank %d (%s) closed the connection", c->rpeer, mr_ring_peer_addr(u->r, c->rpeer));
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					c->rwait = true;
					c->rwant = len - c->ro;
					return 0;
				}
				if (errno == EINTR)
					return 0;
				return mr_ring_fail(u->r, err, "recv from rank %d (%s): %s", c->rpeer, mr_ring_peer_addr(u->r, c->rpeer), strerror(errno));
			}
			c->ro += (size_t)n;
			if (c->ro < len)
				continue;
		}
		if (rs && len)
			mr_reduce(u->op, u->dt, u->data + off, c->tmp, len / u->esz);
		c->ri++;
		c->ro = 0;
	}
	return 0;
}

static bool send_ready(const struct run *u, const struct chan *c)
{
	return c->si < c->m && (c->si < u->l->npk || c->ri > c->si - u->l->npk);
}

static int chan_send(struct run *u, struct chan *c, int ci, struct meshrun_err *err)
{
	while (send_ready(u, c)) {
		size_t off, len;
		bool rs;
		packet_at(u, c, ci, c->si, false, &off, &len, &rs);
		if (c->so < len) {
			if (c->swait)
				return 0;
			ssize_t n = mr_ring_send_some(c->sfd, u->data + off + c->so, len - c->so);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					c->swait = true;
					return 0;
				}
				return mr_ring_fail(u->r, err, "send to rank %d (%s): %s", c->speer, mr_ring_peer_addr(u->r, c->speer), strerror(errno));
			}
			c->so += (size_t)n;
			c->tx = true;
			if (c->so < len)
				continue;
		}
		c->si++;
		c->so = 0;
	}
	return 0;
}

/* Channel on data connection conn in direction dir, moving m packets of slice. */
static void chan_init(const struct mr_ring *r, struct chan *h, int conn, int dir, int slice,
		      size_t m)
{
	const int right = (r->rank + 1) % r->size, left = (r->rank + r->size - 1) % r->size;

	memset(h, 0, sizeof(*h));
	h->dir = dir;
	/* direction +1 receives from the right and sends to the left */
	h->rfd = dir > 0 ? r->right[conn] : r->left[conn];
	h->sfd = dir > 0 ? r->left[conn] : r->right[conn];
	/* two ranks: left and right are the same peer; one connection both ways (ring.h) */
	if (r->size == 2)
		h->rfd = h->sfd = mr_ring_pair_opened(r->rank, dir) ? r->right[conn] : r->left[conn];
	h->rpeer = dir > 0 ? right : left;
	h->speer = dir > 0 ? left : right;
	h->m = m;
	h->slice = slice;
	h->lowat = 1;
}

/*
 * Wake for a whole packet, not for every segment of it: once a packet has
 * begun, with SO_RCVLOWAT at what it still lacks (at most MR_RING_LOWAT_MAX), poll() reports the
 * socket readable once that much has arrived (or EOF, or an error), so a rank
 * sleeps once per packet instead of once per burst of segments. On a loaded
 * machine every sleep costs a wait for the processor. The receive is copied
 * out whole and then reduced either way, so nothing is lost by waking later.
 * A kernel that refuses the option keeps waking early, which is only slower.
 */
static void chan_lowat(struct chan *c, int want)
{
	if (want == c->lowat)
		return;
	if (setsockopt(c->rfd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
		c->lowat = want;
}

/* Back to the default on the way out: the next user of the socket (another
 * collective, the small paths' swaps) waits for single bytes again. */
static void chans_lowat_reset(struct chan *ch, int nch)
{
	for (int c = 0; c < nch; c++)
		chan_lowat(&ch[c], 1);
}

/* The stall check of every channel's packet being received, and what TCP
 * retransmitted of its sends (ring_watch.c). */
static int watch_packets(struct run *u, struct chan *ch, int nch, struct meshrun_err *err)
{
	int64_t now = 0;

	for (int c = 0; c < nch; c++) {
		struct chan *h = &ch[c];
		size_t off, len;
		bool rs;
		if (h->tx) {
			if (!now)
				now = mr_now_ms();
			int rc = mr_txwatch_check(u->r, h->sfd, h->speer, now, err);
			if (rc < 0)
				return rc;
		}
		if (h->ro == 0) {
			h->rxw.since = 0;
			continue;
		}
		if (!now)
			now = mr_now_ms();
		packet_at(u, h, h->slice, h->ri, true, &off, &len, &rs);
		int rc = mr_rxwatch_check(u->r, &h->rxw, h->rpeer, h->ri, h->ro, len, now, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Drive the channels from one poll loop until each has moved its packets.
 * A socket that said EAGAIN is not tried again until poll() reports it ready:
 * on small buffers the wasted recv()/send() calls were a measurable part of
 * the latency.
 */
static int drive_loop(struct run *u, struct chan *ch, int nch, struct meshrun_err *err)
{
	struct mr_ring *r = u->r;
	struct pollfd pfd[2 * MR_RING_MAX_CHAN + 1];
	bool *wake[2 * MR_RING_MAX_CHAN]; /* the flag each pfd entry clears */
	int rc;

	for (;;) {
		bool busy = false;
		int np = 0;
		for (int c = 0; c < nch; c++) {
			rc = chan_recv(u, &ch[c], ch[c].slice, err);
			if (rc == 0)
				rc = chan_send(u, &ch[c], ch[c].slice, err);
			if (rc == 0)
				rc = chan_recv(u, &ch[c], ch[c].slice, err); /* a send may unblock nothing, a recv may unblock sends */
			if (rc < 0)
				return rc;
		}
		for (int c = 0; c < nch; c++) {
			struct chan *h = &ch[c];
			if (h->ri < h->m) {
				/* a packet not yet begun wakes us at its first byte: the
				 * stall check in whole packets (ring_watch.c) counts from
				 * there, and behind a threshold it would not see a packet
				 * that trickles in (coll/fault_loss_local) */
				if (h->rwait)
					chan_lowat(h, h->ro == 0 ? 1 : (int)MR_MIN(MR_MAX(h->rwant, (size_t)1), (size_t)MR_RING_LOWAT_MAX));
				wake[np] = &h->rwait;
				pfd[np++] = (struct pollfd){ .fd = h->rfd, .events = POLLIN };
				busy = true;
			}
			if (send_ready(u, h)) {
				wake[np] = &h->swait;
				pfd[np++] = (struct pollfd){ .fd = h->sfd, .events = POLLOUT };
				busy = true;
			} else if (h->si < h->m) {
				busy = true;
			}
		}
		if (!busy)
			return 0;
		int nw = np;
		pfd[np++] = (struct pollfd){ .fd = r->fail_pipe[0], .events = POLLIN };
		int n = poll(pfd, (nfds_t)np, 1000);
		if (n < 0 && errno != EINTR)
			return mr_ring_fail(r, err, "rank %d: poll: %s", r->rank, strerror(errno));
		for (int k = 0; n > 0 && k < nw; k++)
			if (pfd[k].revents)
				*wake[k] = false;
		rc = mr_ring_check_failed(r, err);
		if (rc == 0)
			rc = watch_packets(u, ch, nch, err);
		if (rc < 0)
			return rc;
	}
}

static int drive(struct run *u, struct chan *ch, int nch, struct meshrun_err *err)
{
	int rc = drive_loop(u, ch, nch, err);

	chans_lowat_reset(ch, nch);
	return rc;
}

/* Run steps [s0, s0+nsteps) of the layout over buf, on all its channels. */
static int ring_run(struct mr_ring *r, unsigned char *buf, const struct mr_ring_layout *l,
		    size_t esz, enum meshrun_dtype dt, enum mr_op op, bool reduce, int s0,
		    int nsteps, struct meshrun_err *err)
{
	struct run u = { r, l, buf, esz, dt, op, reduce, s0 };
	struct chan ch[MR_RING_MAX_CHAN];
	int nch = MR_MIN(l->nchan, (int)ARRAY_SIZE(ch));
	int rc = mr_ring_check_failed(r, err);

	if (rc < 0)
		return rc;
	for (int c = 0; c < nch; c++) {
		chan_init(r, &ch[c], c / 2, c % 2 == 0 ? 1 : -1, c, (size_t)nsteps * l->npk);
		ch[c].tmp = r->tmp + (size_t)c * MR_RING_PKT_MAX;
	}
	return drive(&u, ch, nch, err);
}

/*
 * All-gather of blocks of `bytes` in both ring directions at once, each block
 * whole on each side: direction +1 brings rank+1, rank+2, ... from the right,
 * direction -1 brings rank-1, rank-2, ... from the left, so every block has
 * arrived after ceil((n-1)/2) hops instead of n-1 (latency of small buffers).
 */
static int gather_both_ways(struct mr_ring *r, unsigned char *buf, size_t bytes,
			    struct meshrun_err *err)
{
	struct mr_ring_layout l;
	struct chan ch[2];
	int up = r->size / 2, down = (r->size - 1) / 2; /* steps of each direction */
	int rc = mr_ring_check_failed(r, err);

	if (rc < 0)
		return rc;
	mr_ring_layout_init(&l, r->size, bytes * (size_t)r->size, bytes, 1, 1);
	struct run u = { r, &l, buf, 1, MESHRUN_UINT8, MR_OP_SUM, false, r->size - 1 };
	chan_init(r, &ch[0], 0, 1, 0, (size_t)up * l.npk);
	chan_init(r, &ch[1], 0, -1, 0, (size_t)down * l.npk);
	return drive(&u, ch, down > 0 ? 2 : 1, err);
}


/*
 * Small buffers: latency, not bandwidth, decides, and reduce-scatter plus
 * all-gather costs 2(n-1) neighbour hops. Gathering every rank's buffer both
 * ways round the ring (ceil((n-1)/2) hops, into the scratch buffer r->tmp)
 * and reducing the n copies locally in rank order cuts that to 1 hop for 2 or
 * 3 ranks and 2 for 4 or 5.
 * Every rank combines the same inputs in the same order, so results stay
 * bit-identical across ranks.
 */
static int all_reduce_small(struct mr_ring *r, unsigned char *buf, size_t count,
			    size_t esz, enum meshrun_dtype dt, enum mr_op op,
			    struct meshrun_err *err)
{
	size_t bytes = count * esz;
	unsigned char *all = r->tmp;
	int rc;

	memcpy(all + (size_t)r->rank * bytes, buf, bytes);
	rc = gather_both_ways(r, all, bytes, err);
	if (rc < 0)
		return rc;
	memcpy(buf, all, bytes);
	for (int k = 1; k < r->size; k++)
		mr_reduce(op, dt, buf, all + (size_t)k * bytes, count);
	return 0;
}

/*
 * Send out to the neighbour on `side` (+1 right, -1 left) and receive as many
 * bytes from it into in, both at once, on the first data connection.
 */
static int swap_side(struct mr_ring *r, int side, const unsigned char *out, unsigned char *in,
		     size_t bytes, struct meshrun_err *err)
{
	int fd = side > 0 ? r->right[0] : r->left[0];
	int peer = (r->rank + r->size + side) % r->size;
	size_t so = 0, ro = 0;
	struct mr_rxwatch rxw = { 0, 0 };

	for (;;) {
		while (so < bytes) {
			ssize_t n = mr_ring_send_some(fd, out + so, bytes - so);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					break;
				return mr_ring_fail(r, err, "send to rank %d (%s): %s", peer, mr_ring_peer_addr(r, peer), strerror(errno));
			}
			so += (size_t)n;
		}
		while (ro < bytes) {
			ssize_t n = recv(fd, in + ro, bytes - ro, MSG_DONTWAIT);
			if (n == 0)
				return mr_ring_fail(r, err, "rank %d (%s) closed the connection", peer, mr_ring_peer_addr(r, peer));
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					break;
				return mr_ring_fail(r, err, "recv from rank %d (%s): %s", peer, mr_ring_peer_addr(r, peer), strerror(errno));
			}
			ro += (size_t)n;
		}
		if (so == bytes && ro == bytes)
			return 0;
		struct pollfd pfd[2] = {
			{ .fd = fd, .events = (short)((so < bytes ? POLLOUT : 0) | (ro < bytes ? POLLIN : 0)) },
			{ .fd = r->fail_pipe[0], .events = POLLIN },
		};
		if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
			return mr_ring_fail(r, err, "rank %d: poll: %s", r->rank, strerror(errno));
		int rc = mr_ring_check_failed(r, err);
		int64_t now = mr_now_ms();
		if (rc == 0 && ro > 0)
			rc = mr_rxwatch_check(r, &rxw, peer, 0, ro, bytes, now, err);
		/* what TCP retransmitted of ours (ring_watch.c): 4 ranks' jobs of
		 * small buffers take this path alone */
		if (rc == 0 && so > 0)
			rc = mr_txwatch_check(r, fd, peer, now, err);
		if (rc < 0)
			return rc;
	}
}

/*
 * Small buffers on 4 ranks: recursive doubling mapped onto the ring, whose
 * pairs are all neighbours: ranks 0-1 and 2-3 swap their buffers, then 0-3
 * and 1-2 swap their pair's result. Two hops like gathering both ways, but two
 * messages per rank instead of three: with 4 ranks on few cores, the CPU time
 * per message decides the latency. Every rank computes (x0 op x1) op (x2 op x3)
 * with the lower operand first, so results are bit-identical across ranks.
 */
static int all_reduce_four(struct mr_ring *r, unsigned char *buf, size_t count, size_t esz,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	size_t bytes = count * esz;
	unsigned char *peer = r->tmp;
	int side = r->rank % 2 == 0 ? 1 : -1; /* the first partner: rank ^ 1 */
	int rc = mr_ring_check_failed(r, err);

	for (int step = 0; rc == 0 && step < 2; step++, side = -side) {
		/* the lower operand: ours in step 0 on even ranks, in step 1 on ranks 0, 1 */
		bool low = step == 0 ? r->rank % 2 == 0 : r->rank < 2;
		rc = swap_side(r, side, buf, peer, bytes, err);
		if (rc < 0)
			break;
		if (low) {
			mr_reduce(op, dt, buf, peer, count);
		} else {
			mr_reduce(op, dt, peer, buf, count);
			memcpy(buf, peer, bytes);
		}
	}
	return rc;
}

int mr_ring_all_reduce(struct mr_ring *r, void *buf, size_t count, enum meshrun_dtype dt,
		       enum mr_op op, struct meshrun_err *err)
{
	struct mr_ring_layout l;
	size_t esz = mr_dtype_size((int)dt);

	if (r->size == 1)
		return 0;
	if (count > 0 && count * esz <= mr_ring_small_limit(r->size) &&
	    (size_t)r->size * count * esz <= mr_ring_tmp_bytes(r)) {
		if (r->size == 4)
			return all_reduce_four(r, buf, count, esz, dt, op, err);
		return all_reduce_small(r, buf, count, esz, dt, op, err);
	}
	mr_ring_layout_init(&l, r->size, count, 0, esz, 2 * r->nconn);
	return ring_run(r, buf, &l, esz, dt, op, true, 0, 2 * (r->size - 1), err);
}

static int ring_all_reduce(struct meshrun_group *g, void *buf, size_t count,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	return mr_ring_all_reduce(ring_of(g), buf, count, dt, op, err);
}

static int ring_reduce_scatter(struct meshrun_group *g, void *buf, size_t count,
			       enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	struct mr_ring *r = ring_of(g);
	struct mr_ring_layout l;
	size_t esz = mr_dtype_size((int)dt);

	if (r->size == 1)
		return 0;
	mr_ring_layout_init(&l, r->size, count * (size_t)r->size, count, esz, 2 * r->nconn);
	return ring_run(r, buf, &l, esz, dt, op, true, 0, r->size - 1, err);
}

static int ring_all_gather(struct meshrun_group *g, void *buf, size_t bytes,
			   struct meshrun_err *err)
{
	struct mr_ring *r = ring_of(g);
	struct mr_ring_layout l;

	if (r->size == 1)
		return 0;
	mr_ring_layout_init(&l, r->size, bytes * (size_t)r->size, bytes, 1, 2 * r->nconn);
	return ring_run(r, buf, &l, 1, MESHRUN_UINT8, MR_OP_SUM, false, r->size - 1,
			r->size - 1, err);
}

static int ring_barrier(struct meshrun_group *g, struct meshrun_err *err)
{
	struct mr_ring *r = ring_of(g);
	unsigned char stack[256];
	unsigned char *b = stack;
	int rc;

	if (r->size == 1)
		return 0;
	if ((size_t)r->size > sizeof(stack)) {
		b = calloc((size_t)r->size, 1);
		if (!b)
			return mr_err_set(err, MESHRUN_E_NOMEM, "barrier: out of memory");
	}
	b[r->rank] = 1;
	rc = ring_all_gather(g, b, 1, err);
	if (b != stack)
		free(b);
	return rc;
}

static int ring_send(struct meshrun_group *g, const void *buf, size_t bytes, int dst,
		     struct meshrun_err *err)
{
	return mr_ring_p2p_send(ring_of(g), buf, bytes, dst, err);
}

static int ring_recv(struct meshrun_group *g, void *buf, size_t bytes, int src,
		     struct meshrun_err *err)
{
	return mr_ring_p2p_recv(ring_of(g), buf, bytes, src, err);
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
	.barrier = ring_barrier,
};
