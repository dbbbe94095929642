/*
 * p2p.c - the TCP engine's progress thread and control lanes (tcp.h).
 *
 * One thread per group owns the two control lanes (to the left and right
 * neighbour). It
 *  - sends a heartbeat on an idle lane every hb ms (timeout/8, 50..1000 ms)
 *    and fails the group when a neighbour shows no sign of life (no byte) for
 *    MESHRUN_TIMEOUT: a stopped, hung or unplugged peer is noticed even while
 *    this rank is busy computing, and a peer busy computing is not a stall;
 *  - carries point-to-point messages: a frame for another rank is forwarded
 *    (store and forward) in the shorter ring direction, so any rank reaches
 *    any rank, as MLX's ring cannot; frames for us go to a mailbox that
 *    meshrun_recv() takes from, in order per source;
 *  - floods an abort notice once when the group fails, so that ranks not
 *    next to the dead peer report the same cause ("rank 2 (ip:port) closed
 *    the connection") instead of a neighbour that merely went away.
 * The thread holds mu while it works and never while it waits in poll.
 */
#include "common/compat.h"
#include "coll/tcp/tcp.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int hb_ms(const struct mr_tcp *r)
{
	int64_t v = r->timeout_ms / 8;

	return (int)MR_MAX((int64_t)50, MR_MIN(v, (int64_t)1000));
}

static void wake(int fd)
{
	char c = 1;
	ssize_t n = write(fd, &c, 1); /* a full pipe already wakes the reader */
	(void)n;
}

static void frame_free(struct mr_frame *f)
{
	free(f->owned);
	free(f);
}

static void lane_push(struct mr_lane *ln, struct mr_frame *f)
{
	f->next = NULL;
	if (ln->tail)
		ln->tail->next = f;
	else
		ln->head = f;
	ln->tail = f;
}

static struct mr_frame *frame_new(unsigned type, uint32_t src, uint32_t dst, const void *data,
				  size_t len, bool copy)
{
	struct mr_frame *f = calloc(1, sizeof(*f));
	struct mr_frame_hdr h = { type, src, dst, len };

	if (!f)
		return NULL;
	mr_frame_encode(&h, f->hdr);
	f->len = len;
	f->data = data;
	if (copy && len) {
		f->owned = malloc(len);
		if (!f->owned) {
			free(f);
			return NULL;
		}
		memcpy(f->owned, data, len);
		f->data = f->owned;
	}
	return f;
}

/* Under mu. Record the failure once; detach caller buffers from the queues. */
static void fail_locked(struct mr_tcp *r, const char *msg)
{
	if (r->failed)
		return;
	r->failed = true;
	mr_err_set(&r->ferr, MESHRUN_E_PEER, "%s", msg);
	r->abort_pending = true;
	for (int i = 0; i < r->nlanes; i++) {
		struct mr_lane *ln = &r->lane[i];
		struct mr_frame **pp = &ln->head;
		ln->tail = NULL;
		while (*pp) {
			struct mr_frame *f = *pp;
			if (f->off == 0 && f->done) { /* not started: drop, tell the caller */
				*f->done = -1;
				*pp = f->next;
				frame_free(f);
				continue;
			}
			if (f->done) { /* partly written: keep our own copy of the rest */
				size_t from = f->off > MR_FRAME_HDR ? f->off - MR_FRAME_HDR : 0;
				unsigned char *rest = malloc(f->len + 1);
				if (rest) {
					memcpy(rest + from, f->data + from, f->len - from);
					f->owned = rest; /* only rest[from..len) is ever read */
					f->data = rest;
				} else {
					ln->dead = true; /* cannot finish the frame: stop using the lane */
				}
				*f->done = -1;
				f->done = NULL;
			}
			ln->tail = f;
			pp = &f->next;
		}
	}
	wake(r->fail_pipe[1]);
	wake(r->wake_pipe[1]);
	pthread_cond_broadcast(&r->cv);
}

int mr_tcp_check_failed(struct mr_tcp *r, struct meshrun_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (r->failed)
		rc = mr_err_set(err, r->ferr.code, "%s", r->ferr.msg);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static void abs_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int mr_tcp_fail(struct mr_tcp *r, struct meshrun_err *err, const char *fmt, ...)
{
	char msg[MESHRUN_ERR_MSG_MAX];
	struct timespec ts;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&r->mu);
	if (!r->failed && r->thread_started) {
		/* A neighbour that went away may only be the messenger: give an
		 * abort notice naming the real culprit a moment to arrive. */
		abs_deadline(&ts, 300);
		while (!r->failed && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0)
			;
	}
	fail_locked(r, msg);
	if (r->thread_started) {
		abs_deadline(&ts, 1000);
		while (!r->abort_done && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0)
			;
	}
	int rc = mr_err_set(err, r->ferr.code, "%s", r->ferr.msg);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* Next lane towards dst: the shorter way round (right on a tie); direct: dst's own. */
static int route(const struct mr_tcp *r, uint32_t dst)
{
	int d = ((int)dst - r->rank + r->size) % r->size;

	if (r->direct)
		return mr_tcp_lane_of(r, (int)dst);
	return d <= r->size / 2 ? MR_LANE_RIGHT : MR_LANE_LEFT;
}

/* Under mu: a whole frame arrived on lane li. */
static void deliver(struct mr_tcp *r, int li, struct mr_lane *ln)
{
	struct mr_frame_hdr *h = &ln->fh;
	unsigned char *payload = ln->payload;

	ln->payload = NULL;
	if (h->type == MR_FRAME_HB) {
		free(payload);
		return;
	}
	if (h->type == MR_FRAME_ABORT) {
		char msg[MR_FRAME_MAX_ABORT + 1];
		memcpy(msg, payload ? (const char *)payload : "", h->len);
		msg[h->len] = '\0';
		free(payload);
		if (!r->failed)
			mr_tcp_log(r, "abort notice from rank %u: %s", h->src, msg);
		fail_locked(r, msg);
		return;
	}
	if (r->failed) {
		free(payload);
		return;
	}
	if ((int)h->dst != r->rank) {
		struct mr_frame *f = frame_new(MR_FRAME_MSG, h->src, h->dst, NULL, 0, false);
		if (!f) {
			free(payload);
			fail_locked(r, "out of memory forwarding a message");
			return;
		}
		mr_frame_encode(h, f->hdr);
		f->len = h->len;
		f->owned = payload;
		f->data = payload;
		lane_push(&r->lane[route(r, h->dst)], f);
		(void)li;
		return;
	}
	struct mr_msg *m = calloc(1, sizeof(*m));
	if (!m) {
		free(payload);
		fail_locked(r, "out of memory receiving a message");
		return;
	}
	m->src = h->src;
	m->len = h->len;
	m->data = payload;
	if (r->mbox_tail)
		r->mbox_tail->next = m;
	else
		r->mbox_head = m;
	r->mbox_tail = m;
	pthread_cond_broadcast(&r->cv);
}

static void lane_fail(struct mr_tcp *r, struct mr_lane *ln, const char *what)
{
	char msg[MESHRUN_ERR_MSG_MAX + 256];

	ln->dead = true;
	snprintf(msg, sizeof(msg), "rank %d (%s) %s", ln->peer, mr_tcp_peer_addr(r, ln->peer), what);
	fail_locked(r, msg);
}

/* Under mu: read whatever is there. */
static void lane_read(struct mr_tcp *r, int li)
{
	struct mr_lane *ln = &r->lane[li];

	while (!ln->dead) {
		ssize_t n;
		if (!ln->in_payload) {
			n = recv(ln->fd, ln->hdr + ln->hoff, MR_FRAME_HDR - ln->hoff, MSG_DONTWAIT);
		} else {
			n = recv(ln->fd, ln->payload + ln->poff, ln->fh.len - ln->poff, MSG_DONTWAIT);
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			/* A neighbour that is done with the group closes it: a fault
			 * only for what still needs this lane (see lane_needed). */
			ln->dead = ln->closed = true;
			snprintf(ln->why, sizeof(ln->why), "closed the connection");
			pthread_cond_broadcast(&r->cv);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			char what[256];
			snprintf(what, sizeof(what), "connection failed: %s", strerror(errno));
			lane_fail(r, ln, what);
			return;
		}
		ln->last_rx = mr_now_ms();
		if (!ln->in_payload) {
			ln->hoff += (size_t)n;
			if (ln->hoff < MR_FRAME_HDR)
				continue;
			struct meshrun_err e = MESHRUN_ERR_INIT;
			if (mr_frame_decode(ln->hdr, (uint32_t)r->size, &ln->fh, &e) < 0) {
				char what[MESHRUN_ERR_MSG_MAX + 32];
				snprintf(what, sizeof(what), "sent a bad frame: %s", e.msg);
				lane_fail(r, ln, what);
				return;
			}
			ln->hoff = 0;
			ln->poff = 0;
			if (ln->fh.len) {
				ln->payload = malloc(ln->fh.len);
				if (!ln->payload) {
					fail_locked(r, "out of memory for an incoming message");
					ln->dead = true;
					return;
				}
				ln->in_payload = true;
				continue;
			}
		} else {
			ln->poff += (size_t)n;
			if (ln->poff < ln->fh.len)
				continue;
			ln->in_payload = false;
		}
		deliver(r, li, ln);
	}
}

/* Under mu: write what the socket takes. */
static void lane_write(struct mr_tcp *r, struct mr_lane *ln)
{
	while (!ln->dead && ln->head) {
		struct mr_frame *f = ln->head;
		const void *p;
		size_t left;
		if (f->off < MR_FRAME_HDR) {
			p = f->hdr + f->off;
			left = MR_FRAME_HDR - f->off;
		} else {
			p = f->data + (f->off - MR_FRAME_HDR);
			left = f->len - (f->off - MR_FRAME_HDR);
		}
		if (left) {
			ssize_t n = mr_tcp_send_some(ln->fd, p, left);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return;
				char what[256];
				snprintf(what, sizeof(what), "connection failed: %s", strerror(errno));
				lane_fail(r, ln, what);
				return;
			}
			f->off += (size_t)n;
			ln->last_tx = mr_now_ms();
			if (f->off < MR_FRAME_HDR + f->len)
				continue;
		}
		ln->head = f->next;
		if (!ln->head)
			ln->tail = NULL;
		if (f->done) {
			*f->done = 1;
			pthread_cond_broadcast(&r->cv);
		}
		frame_free(f);
	}
}

static void *progress_main(void *arg)
{
	struct mr_tcp *r = arg;
	const int hb = hb_ms(r);

	struct pollfd *pfd = calloc((size_t)r->nlanes + 1, sizeof(*pfd));

	pthread_mutex_lock(&r->mu);
	if (!pfd) {
		fail_locked(r, "out of memory in the progress thread");
		r->abort_done = true;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		return NULL;
	}
	for (int i = 0; i < r->nlanes; i++)
		r->lane[i].last_rx = r->lane[i].last_tx = mr_now_ms();
	while (!r->stop) {
		int np = 0;
		int64_t now = mr_now_ms();

		if (r->abort_pending) {
			for (int i = 0; i < r->nlanes; i++) {
				if (r->lane[i].dead)
					continue;
				size_t len = strlen(r->ferr.msg);
				struct mr_frame *f = frame_new(MR_FRAME_ABORT, (uint32_t)r->rank, (uint32_t)r->rank, r->ferr.msg, MR_MIN(len, (size_t)MR_FRAME_MAX_ABORT), true);
				if (f)
					lane_push(&r->lane[i], f);
			}
			r->abort_pending = false;
		}
		bool flushed = true;
		for (int i = 0; i < r->nlanes; i++) {
			struct mr_lane *ln = &r->lane[i];
			if (ln->dead)
				continue;
			if (!ln->head && now - ln->last_tx >= hb) {
				struct mr_frame *f = frame_new(MR_FRAME_HB, (uint32_t)r->rank, (uint32_t)ln->peer, NULL, 0, false);
				if (f)
					lane_push(ln, f);
			}
			lane_write(r, ln);
			if (!r->failed && now - ln->last_rx > r->timeout_ms) {
				char what[128];
				snprintf(what, sizeof(what), "showed no sign of life for %lld ms (MESHRUN_TIMEOUT)", (long long)(now - ln->last_rx));
				lane_fail(r, ln, what);
			}
		}
		for (int i = 0; i < r->nlanes; i++)
			if (!r->lane[i].dead && r->lane[i].head)
				flushed = false;
		if (r->failed && !r->abort_done && flushed) {
			r->abort_done = true;
			pthread_cond_broadcast(&r->cv);
		}
		pfd[np++] = (struct pollfd){ .fd = r->wake_pipe[0], .events = POLLIN };
		for (int i = 0; i < r->nlanes; i++) {
			struct mr_lane *ln = &r->lane[i];
			short ev = ln->dead ? 0 : (short)(POLLIN | (ln->head ? POLLOUT : 0));
			pfd[np++] = (struct pollfd){ .fd = ln->dead ? -1 : ln->fd, .events = ev };
		}
		pthread_mutex_unlock(&r->mu);
		poll(pfd, (nfds_t)np, hb);
		pthread_mutex_lock(&r->mu);
		if (pfd[0].revents & POLLIN) {
			char drain[64];
			while (read(r->wake_pipe[0], drain, sizeof(drain)) > 0)
				;
		}
		for (int i = 0; i < r->nlanes; i++)
			if (pfd[1 + i].revents)
				lane_read(r, i);
	}
	pthread_mutex_unlock(&r->mu);
	free(pfd);
	return NULL;
}

int mr_tcp_lanes_alloc(struct mr_tcp *r, int nlanes, struct meshrun_err *err)
{
	r->lane = calloc((size_t)nlanes, sizeof(*r->lane));
	if (!r->lane)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory for %d control lanes", nlanes);
	r->nlanes = nlanes;
	for (int i = 0; i < nlanes; i++)
		r->lane[i].fd = -1;
	return 0;
}

int mr_tcp_p2p_start(struct mr_tcp *r, struct meshrun_err *err)
{
	int rc = pthread_create(&r->thread, NULL, progress_main, r);

	if (rc != 0)
		return mr_err_errno(err, rc, MESHRUN_E_SYS, "ring: pthread_create");
	r->thread_started = true;
	return 0;
}

void mr_tcp_p2p_stop(struct mr_tcp *r)
{
	if (r->thread_started) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_mutex_unlock(&r->mu);
		wake(r->wake_pipe[1]);
		pthread_join(r->thread, NULL);
		r->thread_started = false;
	}
	for (int i = 0; i < r->nlanes; i++) {
		struct mr_lane *ln = &r->lane[i];
		while (ln->head) {
			struct mr_frame *f = ln->head;
			ln->head = f->next;
			frame_free(f);
		}
		ln->tail = NULL;
		MR_FREE(ln->payload);
	}
	while (r->mbox_head) {
		struct mr_msg *m = r->mbox_head;
		r->mbox_head = m->next;
		free(m->data);
		free(m);
	}
	r->mbox_tail = NULL;
}

int mr_tcp_p2p_send(struct mr_tcp *r, const void *buf, size_t len, int dst,
		    struct meshrun_err *err)
{
	int done = 0;
	int rc = 0;
	struct mr_frame *f = frame_new(MR_FRAME_MSG, (uint32_t)r->rank, (uint32_t)dst, buf, len, false);

	if (!f)
		return mr_err_set(err, MESHRUN_E_NOMEM, "send: out of memory");
	f->done = &done;
	pthread_mutex_lock(&r->mu);
	if (r->failed) {
		rc = mr_err_set(err, r->ferr.code, "%s", r->ferr.msg);
		pthread_mutex_unlock(&r->mu);
		frame_free(f);
		return rc;
	}
	struct mr_lane *ln = &r->lane[route(r, (uint32_t)dst)];
	if (ln->dead) {
		rc = mr_err_set(err, MESHRUN_E_PEER, "send to rank %d: rank %d (%s) %s", dst, ln->peer, mr_tcp_peer_addr(r, ln->peer), ln->closed ? ln->why : "is unreachable");
		pthread_mutex_unlock(&r->mu);
		frame_free(f);
		return rc;
	}
	lane_push(ln, f);
	wake(r->wake_pipe[1]);
	while (done == 0 && !r->failed && !ln->dead)
		pthread_cond_wait(&r->cv, &r->mu);
	if (done == 0 && !r->failed) { /* the lane went away under our frame */
		char msg[MESHRUN_ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "rank %d (%s) closed the connection during a send", ln->peer, mr_tcp_peer_addr(r, ln->peer));
		fail_locked(r, msg);
	}
	if (done != 1)
		rc = mr_err_set(err, r->ferr.code ? r->ferr.code : MESHRUN_E_PEER, "send to rank %d: %s", dst, r->ferr.msg);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

int mr_tcp_p2p_recv(struct mr_tcp *r, void *buf, size_t len, int src, struct meshrun_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct mr_msg **pp = &r->mbox_head, *prev = NULL;
		while (*pp && (*pp)->src != (uint32_t)src) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp) {
			struct mr_msg *m = *pp;
			*pp = m->next;
			if (r->mbox_tail == m)
				r->mbox_tail = prev;
			if (m->len != len)
				rc = mr_err_set(err, MESHRUN_E_PROTO, "recv from rank %d: expected %zu bytes, the message has %zu", src, len, m->len);
			else if (len)
				memcpy(buf, m->data, len);
			free(m->data);
			free(m);
			break;
		}
		if (r->failed) {
			rc = mr_err_set(err, r->ferr.code, "recv from rank %d: %s", src, r->ferr.msg);
			break;
		}
		/* src's frames reach us on the lane opposite to the way it routes */
		int d = (r->rank - src + r->size) % r->size;
		struct mr_lane *in = &r->lane[r->direct ? mr_tcp_lane_of(r, src) : d <= r->size / 2 ? MR_LANE_LEFT : MR_LANE_RIGHT];
		if (in->dead && !in->in_payload) {
			rc = mr_err_set(err, MESHRUN_E_PEER, "recv from rank %d: rank %d (%s) %s", src, in->peer, mr_tcp_peer_addr(r, in->peer), in->closed ? in->why : "is unreachable");
			break;
		}
		pthread_cond_wait(&r->cv, &r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}
