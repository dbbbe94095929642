/*
 * jaccl_frames.c - JACCL's wire protocol (frames: jaccl_types.h) and the transfer
 * engine, the same for UC and RC queue pairs.
 *
 * Credits. Apple's driver is believed to hold a SEND until the peer posts a
 * RECV, soft-RoCE's UC drops it, RC retries it: the protocol relies on none of
 * these, a frame leaves only for a RECV the peer is known to have posted.
 * Each side counts the RECVs it posted (rx_posted, cumulative) and tells the
 * peer in every frame's header (credit); the peer may have sent frames
 * 0 .. credit-1. Data frames keep the last credit in reserve: a side can
 * always send a CREDIT frame (header only), which it does when the peer has
 * not heard of half its RECVs, or when the peer may be down to its reserve
 * (it cannot have more than rx_reported - rx_frames left). A CREDIT frame's
 * RECV is reposted at once; its own credit rides on the next frame, so credit
 * frames do not answer each other. Every side starts with depth RECVs posted
 * (before the setup's barrier) and knows the same of the peer.
 *
 * Receiving: frames arrive in order; each must carry the next sequence
 * number (a gap is a lost frame: UC does not retransmit, so it is an error
 * naming the cable, never mixed data), exactly the frame size, and, when
 * consumed, the length the receiving transfer expects (ranks whose calls
 * differ fail with a protocol error). DATA frames wait in arrival order until
 * a transfer takes them (a faster peer's frames of the next call wait too);
 * their RECV is reposted once consumed.
 *
 * A transfer is done when all its frames are sent, their sends completed
 * (on UC a completion means the frame left the queue: a rank must not leave
 * with frames still queued) and all its incoming frames consumed.
 *
 * Waiting: completions are polled. An idle rank polls its CQs for
 * MR_JSPIN_US, then naps between polls, 16 us at first, doubling up to 1 ms
 * (at most a quarter of the time it has been idle): a busy job runs at
 * polling speed, a waiting one costs little CPU. (On 2 emulated CPUs shared
 * by 4 ranks and soft-RoCE, spinning or a syscall per poll made all-reduces
 * several times slower, and 1 ms naps from the start took ten naps per
 * frame.) In RC mode where the
 * device has a completion channel the rank sleeps on it instead (with the
 * side channel, at most 200 ms a time), and the device's asynchronous events
 * end the job at once (a port gone down); UC mode reads no events: Apple's
 * driver is not known to send any.
 *
 * Failures: Apple's driver reports no dead, stopped or cut-off peer, so the
 * engine does not wait for it to. Between polls it reads the side channel
 * watcher's news (jaccl_types.h, watch mode): the group's failure (an abort, a
 * rank silent for half the timeout, two ranks waiting on each other), and
 * departures (a peer still needed a second after it left fails the call).
 * After half the timeout without progress it reports the peer it waits on
 * (blocker()) to rank 0, which names a cable when both its ends report each
 * other; after the whole timeout it fails naming that peer itself.
 */
#include "common/compat.h"
#include "coll/jaccl_impl.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#define MR_JSPIN_US 20
#define MR_JNAP_MIN_US 16
#define MR_JNAP_MAX_US 1000

static unsigned char *buf_of(const struct mr_jaccl *J, const struct mr_jconn *c, int b)
{
	return c->pool + (size_t)b * J->frame;
}

int mr_jaccl_post_recv(struct mr_jaccl *J, struct mr_jconn *c, int b, struct meshrun_err *err)
{
	struct ibv_sge sge = { (uintptr_t)buf_of(J, c, b), J->frame, c->mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)b;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	int rc = ibv_post_recv(c->qp, &wr, &bad);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_PEER, "jaccl: peer rank %d (device '%s'): ibv_post_recv", c->peer, c->dev);
	c->rx_posted++;
	return 0;
}

void mr_jaccl_conn_start(struct mr_jaccl *J, struct mr_jconn *c)
{
	c->rx_reported = c->rx_posted;
	c->tx_limit = (uint64_t)J->depth;
	c->tx_nfree = J->depth;
	for (int i = 0; i < J->depth; i++)
		c->tx_free[i] = J->depth + i;
}

/* ---------------------------------------------------------------- frames */

static int post_frame(struct mr_jaccl *J, struct mr_jconn *c, unsigned type,
		      const unsigned char *src, size_t len, struct meshrun_err *err)
{
	int b = c->tx_free[--c->tx_nfree];
	unsigned char *p = buf_of(J, c, b);
	struct mr_jaccl_fhdr h = { type, (uint32_t)c->tx_seq, (uint32_t)c->rx_posted, (uint32_t)len };
	struct ibv_sge sge = { (uintptr_t)p, J->frame, c->mr->lkey };
	struct ibv_send_wr wr, *bad = NULL;

	mr_jaccl_fhdr_encode(&h, p);
	if (len)
		memcpy(p + MR_JACCL_HDR, src, len);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)b;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	int rc = ibv_post_send(c->qp, &wr, &bad);
	if (rc) {
		c->tx_free[c->tx_nfree++] = b;
		return mr_err_errno(err, rc, MESHRUN_E_PEER, "peer rank %d (device '%s'): ibv_post_send", c->peer, c->dev);
	}
	c->tx_seq++;
	c->tx_posted++;
	c->rx_reported = c->rx_posted;
	return 0;
}

/* A send buffer is free and the peer has a RECV for frame tx_seq + need - 1. */
static bool may_send(const struct mr_jconn *c, unsigned need)
{
	return c->tx_nfree > 0 && c->tx_limit >= (uint64_t)c->tx_seq + need;
}

/* The peer should hear of our RECVs now (see the top of the file). */
static bool owes_credit(const struct mr_jaccl *J, const struct mr_jconn *c)
{
	uint64_t unheard = c->rx_posted - c->rx_reported;

	return unheard && (unheard >= (uint64_t)J->depth / 2 || c->rx_reported - c->rx_frames < 2);
}

/* A frame arrived in receive buffer b: check it, take its credit, queue or repost it. */
static int frame_in(struct mr_jaccl *J, struct mr_jconn *c, int b, uint32_t byte_len,
		    struct meshrun_err *err)
{
	struct mr_jaccl_fhdr h;
	struct meshrun_err e = MESHRUN_ERR_INIT;

	if (b < 0 || b >= J->depth)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): a receive completion for no buffer of ours", c->peer, c->dev);
	if (byte_len != J->frame)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): a SEND of %u bytes arrived where frames are %u bytes (do all ranks set MESHRUN_JACCL_FRAME alike?)", c->peer, c->dev, byte_len, J->frame);
	if (mr_jaccl_fhdr_decode(buf_of(J, c, b), J->frame, &h, &e) < 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): %s", c->peer, c->dev, e.msg);
	if (h.seq != c->rx_expect)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): frame %u arrived where frame %u was expected: %u frame(s) lost on the cable (unreliable queue pairs do not retransmit)", c->peer, c->dev, h.seq, c->rx_expect, h.seq - c->rx_expect);
	c->rx_expect++;
	c->rx_frames++;
	uint32_t more = h.credit - (uint32_t)c->tx_limit; /* credits are cumulative, sent mod 2^32 */
	if (more < 0x80000000u)
		c->tx_limit += more;
	if (h.type == MR_JF_CREDIT)
		return mr_jaccl_post_recv(J, c, b, err);
	c->rx_len[b] = h.len;
	c->rx_q[(c->rx_qh + c->rx_qn++) % MR_JDEPTH_MAX] = b;
	return 0;
}

static int poll_conn(struct mr_jaccl *J, struct mr_jconn *c, bool *progress,
		     struct meshrun_err *err)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(c->cq, (int)ARRAY_SIZE(wc), wc)) > 0) {
		*progress = true;
		for (int i = 0; i < n; i++) {
			bool is_recv = wc[i].opcode & IBV_WC_RECV;
			if (wc[i].status != IBV_WC_SUCCESS)
				return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): %s work completion failed: %s (status %d, vendor error 0x%x)", c->peer, c->dev, wc[i].status == IBV_WC_WR_FLUSH_ERR ? "a" : is_recv ? "receive" : "send", ibv_wc_status_str(wc[i].status), (int)wc[i].status, wc[i].vendor_err);
			if (is_recv) {
				int rc = frame_in(J, c, (int)wc[i].wr_id, wc[i].byte_len, err);
				if (rc < 0)
					return rc;
			} else {
				c->tx_free[c->tx_nfree++] = (int)wc[i].wr_id;
				c->tx_done++;
			}
		}
	}
	if (n < 0)
		return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): ibv_poll_cq failed", c->peer, c->dev);
	return 0;
}

/* ---------------------------------------------------------------- engine */

static int post_sends(struct mr_jaccl *J, struct mr_jxfer *x, bool *progress,
		      struct meshrun_err *err)
{
	struct mr_jconn *c = x->c;

	while (x->soff < x->slen && may_send(c, 2)) {
		size_t len = MR_MIN(J->payload, x->slen - x->soff);
		int rc = post_frame(J, c, MR_JF_DATA, x->src + x->soff, len, err);
		if (rc < 0)
			return rc;
		x->soff += len;
		*progress = true;
	}
	return 0;
}

static int post_credit(struct mr_jaccl *J, struct mr_jconn *c, bool *progress,
		       struct meshrun_err *err)
{
	if (!owes_credit(J, c) || !may_send(c, 1))
		return 0;
	*progress = true;
	return post_frame(J, c, MR_JF_CREDIT, NULL, 0, err);
}

/* Deliver frame number x->ddone_chunks if it is there: 1 delivered, 0 not yet. */
static int deliver_one(struct mr_jaccl *J, struct mr_jxfer *x, enum mr_op op,
		       enum meshrun_dtype dt, struct meshrun_err *err)
{
	struct mr_jconn *c = x->c;

	if (x->ddone_chunks == x->dnchunks || c->rx_qn == 0)
		return 0;
	size_t off = x->ddone_chunks * J->payload;
	size_t want = MR_MIN(J->payload, x->dlen - off);
	int b = c->rx_q[c->rx_qh];
	if (c->rx_len[b] != want)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): a frame of %u bytes arrived where %zu bytes were expected (do all ranks make the same calls?)", c->peer, c->dev, c->rx_len[b], want);
	const unsigned char *p = buf_of(J, c, b) + MR_JACCL_HDR;
	if (x->mode == MR_JX_REDUCE)
		mr_reduce(op, dt, x->dst + off, p, want / mr_dtype_size((int)dt));
	else
		memcpy(x->dst + off, p, want);
	c->rx_qh = (c->rx_qh + 1) % MR_JDEPTH_MAX;
	c->rx_qn--;
	x->ddone_chunks++;
	int rc = mr_jaccl_post_recv(J, c, b, err);
	return rc < 0 ? rc : 1;
}

static bool xfer_done(const struct mr_jxfer *x)
{
	return x->soff == x->slen && x->c->tx_done == x->c->tx_posted && x->ddone_chunks == x->dnchunks;
}

/*
 * A rank whose side channel closed is fatal only when a pending transfer still
 * needs it after MR_JGONE_GRACE_MS: a peer that finished its last collective
 * exits as soon as its sends complete, so the closed channel can be seen here
 * before our receive completions for its final frames are polled.
 */
#define MR_JGONE_GRACE_MS 1000

/* The first pending transfer whose peer has left, or NULL. */
static const struct mr_jxfer *pending_gone(const struct mr_jaccl *J, const struct mr_jxfer *x, int n)
{
	for (int i = 0; i < n; i++)
		if (mr_jaccl_side_gone(&J->side, x[i].c->peer) && !xfer_done(&x[i]))
			return &x[i];
	return NULL;
}

/*
 * RC mode: the device's asynchronous events. A port that went down (cable
 * pulled, interface down) or a fatal error ends the connection at once,
 * naming the cable, rather than after the retries or the stall timeout.
 */
static int async_events(struct mr_jconn *c, struct meshrun_err *err)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(c->ctx, &ev) == 0) {
		enum ibv_event_type t = ev.event_type;

		ibv_ack_async_event(&ev);
		switch (t) {
		case IBV_EVENT_PORT_ERR:
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): the port went down (cable pulled or interface down?)", c->peer, c->dev);
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): %s", c->peer, c->dev, ibv_event_type_str(t));
		default:
			break; /* port active, GID change, ...: nothing lost */
		}
	}
	return 0;
}

/* Sleep a little, the longer the longer nothing happened (see the top of the file). */
static void nap(int64_t idle_us)
{
	long us = MR_JNAP_MIN_US;
	struct timespec ts;

	while (us < MR_JNAP_MAX_US && us < idle_us / 4)
		us *= 2;
	ts.tv_sec = 0;
	ts.tv_nsec = us * 1000;
	nanosleep(&ts, NULL);
}

/* Whether every conn of the exchange can sleep on a completion channel. */
static bool can_sleep(const struct mr_jxfer *x, int n)
{
	for (int i = 0; i < n; i++)
		if (!x[i].c->ch)
			return false;
	return n > 0;
}

/*
 * RC mode with completion channels: sleep up to ms on them, the devices'
 * asynchronous events and the side channel watcher's wake-up, and take what
 * came. (The watcher's news itself is read by the caller.)
 */
static int sleep_events(struct mr_jaccl *J, struct mr_jxfer *x, int n, struct pollfd *pfd, int ms,
			struct meshrun_err *err)
{
	int np = 0;

	for (int i = 0; i < n; i++)
		pfd[np++] = (struct pollfd){ x[i].c->ch->fd, POLLIN, 0 };
	for (int i = 0; i < n; i++)
		pfd[np++] = (struct pollfd){ x[i].c->ctx->async_fd, POLLIN, 0 };
	pfd[np++] = (struct pollfd){ mr_jaccl_side_wake_fd(&J->side), POLLIN, 0 };
	int rc = poll(pfd, (nfds_t)np, ms);
	if (rc < 0 && errno != EINTR)
		return mr_err_sys(err, "jaccl: poll");
	for (int k = 0; rc > 0 && k < np; k++) {
		if (!pfd[k].revents || pfd[k].fd < 0)
			continue;
		if (k < n) {
			struct mr_jconn *c = x[k].c;
			struct ibv_cq *cq;
			void *ctx;
			while (ibv_get_cq_event(c->ch, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				c->armed = false;
			}
		} else if (k < 2 * n) {
			int e = async_events(x[k - n].c, err);
			if (e < 0)
				return e;
		} else {
			char buf[64];
			while (read(pfd[k].fd, buf, sizeof(buf)) > 0)
				;
		}
	}
	return 0;
}

/* One round of work on every transfer; *progress when anything moved. */
static int step(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, enum mr_op op,
		enum meshrun_dtype dt, size_t maxc, size_t *k, int *oi, bool *progress,
		struct meshrun_err *err)
{
	int rc = 0;

	for (int i = 0; i < n && rc == 0; i++)
		rc = post_sends(J, &x[i], progress, err);
	for (int i = 0; i < n && rc == 0; i++)
		rc = poll_conn(J, x[i].c, progress, err);
	if (rc < 0)
		return rc;
	if (ordered) {
		for (;;) {
			if (*oi == n) {
				*oi = 0;
				(*k)++;
			}
			if (*k >= maxc)
				break;
			if (*k >= x[*oi].dnchunks) {
				(*oi)++;
				continue;
			}
			rc = deliver_one(J, &x[*oi], op, dt, err);
			if (rc <= 0)
				break;
			*progress = true;
			(*oi)++;
		}
	} else {
		for (int i = 0; i < n && rc >= 0; i++)
			while ((rc = deliver_one(J, &x[i], op, dt, err)) > 0)
				*progress = true;
	}
	if (rc < 0)
		return rc;
	rc = 0;
	for (int i = 0; i < n && rc == 0; i++)
		rc = post_credit(J, x[i].c, progress, err);
	return rc;
}

/*
 * The transfer whose peer this exchange waits on: in ordered delivery the one
 * whose frame k is next; else the first that misses frames not yet there;
 * else the first waiting for the peer's credit. NULL when it waits on no
 * peer (only on its own sends' completions).
 */
static const struct mr_jxfer *blocker(const struct mr_jxfer *x, int n, bool ordered, size_t k,
				      int oi)
{
	if (ordered && oi < n && k < x[oi].dnchunks && x[oi].c->rx_qn == 0)
		return &x[oi];
	for (int i = 0; !ordered && i < n; i++)
		if (x[i].ddone_chunks < x[i].dnchunks && x[i].c->rx_qn == 0)
			return &x[i];
	for (int i = 0; i < n; i++)
		if (x[i].soff < x[i].slen && !may_send(x[i].c, 2))
			return &x[i];
	return NULL;
}

static int stall_error(struct mr_jaccl *J, const struct mr_jxfer *b, const struct mr_jxfer *x,
		       int n, struct meshrun_err *err)
{
	for (int i = 0; !b && i < n; i++)
		if (!xfer_done(&x[i]))
			b = &x[i];
	if (!b)
		return 0;
	return mr_err_set(err, MESHRUN_E_TIMEOUT, "peer rank %d (device '%s') stopped answering: no progress for %lld ms (sent %zu of %zu bytes, received %zu of %zu frames)", b->c->peer, b->c->dev, (long long)J->timeout_ms, b->soff, b->slen, b->ddone_chunks, b->dnchunks);
}

/*
 * The loop's idle side: naps or sleeps, the side channel's verdicts, the grace
 * for a departed peer, the stall report (at half the timeout) and the stall
 * verdict (at the timeout). 0 to go on, or the error.
 */
struct idle {
	int64_t last;            /* last progress (ms) */
	int64_t idle_us;         /* since then, in us */
	int64_t gone_deadline;   /* a peer we need has left: fail after the grace */
	int reported;            /* the peer a stall was reported on, -1: none */
};

static int idle_round(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, size_t k,
		      int oi, bool sleep, struct pollfd *pfd, struct idle *d, struct meshrun_err *err)
{
	int64_t idle = mr_now_us() - d->idle_us;
	int rc = mr_jaccl_side_failed(&J->side, err);

	if (rc < 0) {
		J->told = true;
		return rc;
	}
	if (!d->gone_deadline && pending_gone(J, x, n))
		d->gone_deadline = mr_now_ms() + MR_JGONE_GRACE_MS;
	if (d->gone_deadline && mr_ms_left(d->gone_deadline) == 0) {
		const struct mr_jxfer *g = pending_gone(J, x, n);
		if (g)
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d closed its side channel (process exited or killed?)", g->c->peer);
		d->gone_deadline = 0;
	}
	const struct mr_jxfer *b = blocker(x, n, ordered, k, oi);
	int64_t deadline = d->last + J->timeout_ms;
	if (mr_ms_left(deadline) == 0)
		return stall_error(J, b, x, n, err);
	if (d->reported < 0 && b && mr_now_ms() - d->last >= J->timeout_ms / 2) {
		d->reported = b->c->peer;
		mr_jaccl_side_stall(&J->side, b->c->peer, b->c->dev);
	}
	if (!sleep) {
		nap(idle);
		return 0;
	}
	if (d->gone_deadline)
		deadline = MR_MIN(deadline, d->gone_deadline);
	return sleep_events(J, x, n, pfd, (int)MR_MIN(mr_ms_left(deadline), (int64_t)200), err);
}

static int exchange_loop(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered,
			 enum mr_op op, enum meshrun_dtype dt, struct pollfd *pfd, size_t maxc,
			 struct meshrun_err *err)
{
	struct idle d = { mr_now_ms(), mr_now_us(), 0, -1 };
	size_t k = 0; /* ordered: frame index being delivered */
	int oi = 0;   /* ordered: transfer whose frame k is next */
	bool sleep = can_sleep(x, n);
	int rc = 0;

	for (;;) {
		bool progress = false, done = true;
		rc = step(J, x, n, ordered, op, dt, maxc, &k, &oi, &progress, err);
		if (rc < 0)
			break;
		for (int i = 0; i < n; i++)
			done = done && xfer_done(&x[i]);
		if (done)
			break;
		if (progress) {
			d.last = mr_now_ms();
			d.idle_us = mr_now_us();
			if (d.reported >= 0)
				mr_jaccl_side_stall(&J->side, -1, "");
			d.reported = -1;
			continue;
		}
		if (mr_now_us() - d.idle_us < MR_JSPIN_US)
			continue;
		if (sleep) {
			/* arm, then look once more: a completion between the last poll
			 * and the arming would otherwise raise no event */
			for (int i = 0; i < n; i++)
				if (!x[i].c->armed && ibv_req_notify_cq(x[i].c->cq, 0) == 0)
					x[i].c->armed = true;
			for (int i = 0; i < n && rc == 0; i++)
				rc = poll_conn(J, x[i].c, &progress, err);
			if (rc < 0)
				break;
			if (progress)
				continue;
		}
		rc = idle_round(J, x, n, ordered, k, oi, sleep, pfd, &d, err);
		if (rc < 0)
			break;
	}
	if (d.reported >= 0 && rc == 0)
		mr_jaccl_side_stall(&J->side, -1, "");
	return rc;
}

int mr_jaccl_exchange(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, enum mr_op op,
		      enum meshrun_dtype dt, struct meshrun_err *err)
{
	size_t maxc = 0;
	struct pollfd *pfd = NULL;
	int rc;

	/* the group's failure first: a peer that failed and left has its abort
	 * read before its departure, and that names the cause */
	J->told = false;
	rc = mr_jaccl_side_failed(&J->side, err);
	if (rc < 0) {
		J->told = true;
		return rc;
	}
	for (int i = 0; i < n; i++) {
		x[i].dnchunks = mr_jaccl_nchunks(x[i].dlen, J->payload);
		x[i].soff = 0;
		x[i].ddone_chunks = 0;
		maxc = MR_MAX(maxc, x[i].dnchunks);
		/* nothing more can go to a rank that has left; what it sent before it
		 * left may still be ours to poll (exchange_loop's grace) */
		if (mr_jaccl_side_gone(&J->side, x[i].c->peer) && x[i].slen)
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d has left the group (its side channel closed)", x[i].c->peer);
	}
	pfd = calloc(2 * (size_t)n + 1, sizeof(*pfd));
	if (!pfd)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	rc = exchange_loop(J, x, n, ordered, op, dt, pfd, maxc, err);
	free(pfd);
	return rc;
}
