/*
 * ring_sched.c - the TCP engine's ring schedule (tcp.h): the collectives of the
 * ring backend (coll/ring/) and the all-reduce the mesh (coll/mesh/) runs over
 * its connections to its two ring neighbours, on r->left/r->right.
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
 * fails the group naming the neighbour; the progress thread (p2p.c)
 * fails it when a neighbour shows no sign of life for MESHRUN_TIMEOUT or an
 * abort notice arrives; the fail pipe wakes this loop in either case.
 */
#include "common/compat.h"
#include "coll/ring.h"
#include "coll/tcp/tcp.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Size of r->tmp: a packet buffer per channel (reduce-scatter receives), also
 * the scratch buffer of the small all-reduce. */
size_t mr_tcp_ring_tmp_bytes(const struct mr_tcp *r)
{
	return (size_t)MR_MIN(2 * r->nconn, MR_RING_MAX_CHAN) * MR_RING_PKT_MAX;
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
	struct mr_rxwatch rxw; /* the packet being received: a stalled link (watch.c) */
	bool tx;               /* sent on sfd in this run: what TCP retransmitted (watch.c) */
};

struct run {
	struct mr_tcp *r;
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
				return mr_tcp_fail(u->r, err, "rank %d (%s) closed the connection", c->rpeer, mr_tcp_peer_addr(u->r, c->rpeer));
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					c->rwait = true;
					c->rwant = len - c->ro;
					return 0;
				}
				if (errno == EINTR)
					return 0;
				return mr_tcp_fail(u->r, err, "recv from rank %d (%s): %s", c->rpeer, mr_tcp_peer_addr(u->r, c->rpeer), strerror(errno));
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
			ssize_t n = mr_tcp_send_some(c->sfd, u->data + off + c->so, len - c->so);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					c->swait = true;
					return 0;
				}
				return mr_tcp_fail(u->r, err, "send to rank %d (%s): %s", c->speer, mr_tcp_peer_addr(u->r, c->speer), strerror(errno));
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
static void chan_init(const struct mr_tcp *r, struct chan *h, int conn, int dir, int slice,
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
 * retransmitted of its sends (watch.c). */
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
	struct mr_tcp *r = u->r;
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
				 * stall check in whole packets (watch.c) counts from
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
			return mr_tcp_fail(r, err, "rank %d: poll: %s", r->rank, strerror(errno));
		for (int k = 0; n > 0 && k < nw; k++)
			if (pfd[k].revents)
				*wake[k] = false;
		rc = mr_tcp_check_failed(r, err);
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
int mr_tcp_ring_run(struct mr_tcp *r, unsigned char *buf, const struct mr_ring_layout *l,
		    size_t esz, enum meshrun_dtype dt, enum mr_op op, bool reduce, int s0,
		    int nsteps, struct meshrun_err *err)
{
	struct run u = { r, l, buf, esz, dt, op, reduce, s0 };
	struct chan ch[MR_RING_MAX_CHAN];
	int nch = MR_MIN(l->nchan, (int)ARRAY_SIZE(ch));
	int rc = mr_tcp_check_failed(r, err);

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
static int gather_both_ways(struct mr_tcp *r, unsigned char *buf, size_t bytes,
			    struct meshrun_err *err)
{
	struct mr_ring_layout l;
	struct chan ch[2];
	int up = r->size / 2, down = (r->size - 1) / 2; /* steps of each direction */
	int rc = mr_tcp_check_failed(r, err);

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
static int all_reduce_small(struct mr_tcp *r, unsigned char *buf, size_t count,
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
static int swap_side(struct mr_tcp *r, int side, const unsigned char *out, unsigned char *in,
		     size_t bytes, struct meshrun_err *err)
{
	int fd = side > 0 ? r->right[0] : r->left[0];
	int peer = (r->rank + r->size + side) % r->size;
	size_t so = 0, ro = 0;
	struct mr_rxwatch rxw = { 0, 0 };

	for (;;) {
		while (so < bytes) {
			ssize_t n = mr_tcp_send_some(fd, out + so, bytes - so);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					break;
				return mr_tcp_fail(r, err, "send to rank %d (%s): %s", peer, mr_tcp_peer_addr(r, peer), strerror(errno));
			}
			so += (size_t)n;
		}
		while (ro < bytes) {
			ssize_t n = recv(fd, in + ro, bytes - ro, MSG_DONTWAIT);
			if (n == 0)
				return mr_tcp_fail(r, err, "rank %d (%s) closed the connection", peer, mr_tcp_peer_addr(r, peer));
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					break;
				return mr_tcp_fail(r, err, "recv from rank %d (%s): %s", peer, mr_tcp_peer_addr(r, peer), strerror(errno));
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
			return mr_tcp_fail(r, err, "rank %d: poll: %s", r->rank, strerror(errno));
		int rc = mr_tcp_check_failed(r, err);
		int64_t now = mr_now_ms();
		if (rc == 0 && ro > 0)
			rc = mr_rxwatch_check(r, &rxw, peer, 0, ro, bytes, now, err);
		/* what TCP retransmitted of ours (watch.c): 4 ranks' jobs of
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
static int all_reduce_four(struct mr_tcp *r, unsigned char *buf, size_t count, size_t esz,
			   enum meshrun_dtype dt, enum mr_op op, struct meshrun_err *err)
{
	size_t bytes = count * esz;
	unsigned char *peer = r->tmp;
	int side = r->rank % 2 == 0 ? 1 : -1; /* the first partner: rank ^ 1 */
	int rc = mr_tcp_check_failed(r, err);

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

int mr_tcp_ring_all_reduce(struct mr_tcp *r, void *buf, size_t count, enum meshrun_dtype dt,
			   enum mr_op op, struct meshrun_err *err)
{
	struct mr_ring_layout l;
	size_t esz = mr_dtype_size((int)dt);

	if (r->size == 1)
		return 0;
	if (count > 0 && count * esz <= mr_ring_small_limit(r->size) &&
	    (size_t)r->size * count * esz <= mr_tcp_ring_tmp_bytes(r)) {
		if (r->size == 4)
			return all_reduce_four(r, buf, count, esz, dt, op, err);
		return all_reduce_small(r, buf, count, esz, dt, op, err);
	}
	mr_ring_layout_init(&l, r->size, count, 0, esz, 2 * r->nconn);
	return mr_tcp_ring_run(r, buf, &l, esz, dt, op, true, 0, 2 * (r->size - 1), err);
}
