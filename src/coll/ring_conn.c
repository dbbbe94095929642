/*
 * ring_conn.c - connection setup of the ring backend (ring_impl.h).
 *
 * Each rank listens on all its own addresses and, at the same time, connects
 * to every address of its right neighbour (one data connection per address,
 * plus the control lane on the first address), all from one poll loop: no
 * accept-before-connect ordering is needed, so no rank waits on another.
 * Connects that fail (the neighbour is not listening yet) are retried with
 * backoff (20 ms doubling to 500 ms) until the deadline (MESHRUN_TIMEOUT).
 * Incoming connections are checked by their hello; a stray, garbage or
 * foreign-job connection is refused (closed, logged when verbose) and setup
 * goes on.
 *
 * What an unauthenticated connection can cost (docs/contracts.md, "What
 * another machine on the network can do"): the listeners are bound to this
 * rank's own addresses from MLX_HOSTFILE, never to every address; before its
 * hello checked, a connection gets one fixed buffer of MR_HELLO_MAX bytes
 * (the hello's token length is checked before it is read), HELLO_WAIT_MS to
 * complete its hello, and one of MAX_PENDING_IN slots; when they are all
 * taken, the oldest unauthenticated one is closed for the newcomer, so a
 * slow-loris holding many connections cannot lock the neighbour out. A
 * connecting side whose connection is closed before the answer (evicted, or
 * the listener was not ready) tries again until the deadline.
 */
#include "common/compat.h"
#include "coll/ring_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PENDING_IN 64
/* A peer sends its hello as soon as it is connected: 2 s is generous, even on
 * a loaded machine (a real peer that misses it connects again). */
#define HELLO_WAIT_MS 2000

enum pstate { P_WAIT, P_CONNECTING, P_SEND, P_RECV, P_DONE, P_DEAD };

struct pend {
	int fd;
	bool outgoing;
	unsigned lane;               /* outgoing: the lane we open */
	enum pstate state;
	int64_t retry_at;
	int64_t accepted_at;         /* incoming: when; the hello is due HELLO_WAIT_MS later */
	uint64_t seq;                /* incoming: accept order (the lowest is the oldest) */
	int backoff;
	int last_errno;
	const struct mr_ring_addr *addr; /* outgoing: where to */
	unsigned char out[MR_HELLO_MAX];
	size_t outlen, outoff;
	unsigned char in[MR_HELLO_MAX];
	size_t inoff;
	struct mr_hello hello;       /* what the peer said */
};

static int open_listener(const struct mr_ring_addr *a, struct meshrun_err *err)
{
	int one = 1;
	int fd = mr_socket(a->sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);

	if (fd < 0)
		return mr_err_sys(err, "socket for '%s'", a->text);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->sa, a->salen) < 0) {
		mr_err_sys(err, "bind '%s'", a->text);
		close(fd);
		return MESHRUN_E_SYS;
	}
	if (listen(fd, 64) < 0) {
		mr_err_sys(err, "listen on '%s'", a->text);
		close(fd);
		return MESHRUN_E_SYS;
	}
	return fd;
}

static void hello_prepare(const struct mr_ring *r, struct pend *p, unsigned lane)
{
	struct mr_hello h;

	memset(&h, 0, sizeof(h));
	h.version = MR_WIRE_VERSION;
	h.lane = lane;
	h.rank = (uint32_t)r->rank;
	h.size = (uint32_t)r->size;
	h.nconn = (uint32_t)r->nconn;
	h.token_len = r->token_len;
	memcpy(h.token, r->token, r->token_len);
	p->outlen = mr_hello_encode(&h, p->out);
	p->outoff = 0;
}

static void start_connect(struct pend *p, int64_t now)
{
	p->fd = mr_socket(p->addr->sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	if (p->fd < 0) {
		p->last_errno = errno;
		p->state = P_WAIT;
		p->retry_at = now + p->backoff;
		return;
	}
	if (connect(p->fd, (const struct sockaddr *)&p->addr->sa, p->addr->salen) == 0 ||
	    errno == EINPROGRESS) {
		p->state = P_CONNECTING;
		return;
	}
	p->last_errno = errno;
	mr_close(&p->fd);
	p->state = P_WAIT;
	p->retry_at = now + p->backoff;
	p->backoff = MR_MIN(p->backoff * 2, 500);
}

static void retry_later(struct pend *p, int e, int64_t now)
{
	p->last_errno = e;
	mr_close(&p->fd);
	p->state = P_WAIT;
	p->retry_at = now + p->backoff;
	p->backoff = MR_MIN(p->backoff * 2, 500);
}

/* Read what is there of the peer's hello; 1 when complete, 0 for more, <0 refused. */
static int read_hello(struct pend *p, struct meshrun_err *err)
{
	for (;;) {
		size_t want = MR_HELLO_FIXED;
		int rc = mr_hello_decode(p->in, p->inoff, &p->hello, err);
		if (rc == 0)
			return 1;
		if (rc < 0)
			return rc;
		want = (size_t)rc;
		ssize_t n = recv(p->fd, p->in + p->inoff, want - p->inoff, 0);
		if (n > 0) {
			p->inoff += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		if (n == 0)
			return mr_err_errno(err, ECONNRESET, MESHRUN_E_PEER, "connection closed during hello");
		return mr_err_errno(err, errno, MESHRUN_E_PEER, "recv hello");
	}
}

/* Write what fits of our hello; 1 when all is out, 0 for more, <0 error. */
static int write_hello(struct pend *p, struct meshrun_err *err)
{
	while (p->outoff < p->outlen) {
		ssize_t n = mr_ring_send_some(p->fd, p->out + p->outoff, p->outlen - p->outoff);
		if (n > 0) {
			p->outoff += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return mr_err_sys(err, "send hello");
	}
	return 1;
}

static void peer_text(int fd, char *buf, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[64] = "?";
	unsigned port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
			port = ntohs(s4->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
			port = ntohs(s6->sin6_port);
		}
	}
	snprintf(buf, n, "%s:%u", host, port);
}

/*
 * Data connections get r->tcp_cc (MESHRUN_RING_TCP_CC, default "reno"): a ring
 * link is a dedicated neighbour link, and a loss-based congestion control
 * without pacing lets cwnd grow to the receive window at once. BBR (a common
 * system default) paces every socket from a timer, which on a veth or a
 * cable costs about a fifth of the CPU per byte and a third of the
 * throughput on 2 cores (bench/allreduce). Failure (a kernel without it, or
 * a name not in tcp_allowed_congestion_control for non-root) keeps the
 * system's choice.
 *
 * They also get a fixed send buffer (r->sndbuf, MESHRUN_RING_SNDBUF, default
 * 512K: 1 MiB once the kernel doubles it). Autotuned, a send buffer grows to
 * net.ipv4.tcp_wmem's maximum (4 MiB), so megabytes per connection queue up
 * at the receiver and have left the caches by the time it copies them out:
 * on the bench machine (bench/allreduce, 2 cores) the receive copies cost
 * 1.5-2x as much per byte, and 16 MiB all-reduces were 36% (2 ranks) and 49%
 * (4 ranks) slower than with the fixed buffer. A megabyte in flight still
 * fills a 40 Gb/s link with up to 200 us round trips (the kernel caps the
 * request at net.core.wmem_max, 208K on many distributions: 416K in flight,
 * 80 us).
 */
static void tune_socket(const struct mr_ring *r, int fd, bool data)
{
	int one = 1;
	unsigned int uto = (unsigned int)MR_MIN(r->timeout_ms, (int64_t)UINT32_MAX);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* ENOTSUP where the kernel has no such option (macOS): logged, not fatal */
	if (data && r->tcp_cc[0] && mr_tcp_set_cc(fd, r->tcp_cc) < 0)
		mr_ring_log(r, "TCP congestion control '%s' not set: %s (keeping the system's)", r->tcp_cc, strerror(errno));
	/* unacknowledged data for longer than the timeout fails the socket (a
	 * pulled cable); without the option the ring's stall timer still does */
	(void)mr_tcp_user_timeout(fd, uto);
	if (data && r->sndbuf > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &r->sndbuf, sizeof(r->sndbuf)) < 0)
		mr_ring_log(r, "send buffer of %d bytes not set: %s (keeping the kernel's autotuning)", r->sndbuf, strerror(errno));
}

/* The state of one mr_ring_connect_all() call. */
struct setup {
	struct mr_ring *r;
	int right, left;
	unsigned nlanes;             /* data lanes + control lane */
	int64_t deadline;
	int *listeners;              /* one per own address (r->nconn) */
	struct pend *pend;           /* the nlanes outgoing first, then incoming ones */
	size_t npend, cap;
	struct pollfd *pfd;          /* the listeners, then one per pend */
	bool *have_in;               /* per incoming lane: connected already */
	uint64_t accepted;           /* incoming connections so far */
	unsigned in_done, out_done;
};

/* Listen on every own address and start connecting every lane to the right. */
static int setup_start(struct setup *s, struct meshrun_err *err)
{
	struct mr_ring *r = s->r;
	int64_t now;
	int rc;

	s->listeners = malloc((size_t)r->nconn * sizeof(*s->listeners));
	s->pend = calloc(s->cap, sizeof(*s->pend));
	s->pfd = calloc(s->cap + (size_t)r->nconn, sizeof(*s->pfd));
	s->have_in = calloc(s->nlanes, sizeof(*s->have_in));
	for (int i = 0; s->listeners && i < r->nconn; i++)
		s->listeners[i] = -1; /* before any return: setup_release() closes them */
	if (!s->listeners || !s->pend || !s->pfd || !s->have_in)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ring setup: out of memory");
	for (int i = 0; i < r->nconn; i++) {
		rc = open_listener(MR_RING_ADDR(&r->hosts, r->rank, i), err);
		if (rc < 0) {
			mr_err_prefix(err, "rank %d", r->rank);
			return rc;
		}
		s->listeners[i] = rc;
	}
	now = mr_now_ms();
	for (unsigned l = 0; l < s->nlanes; l++) {
		struct pend *p = &s->pend[s->npend++];
		p->fd = -1;
		p->outgoing = true;
		p->lane = l < (unsigned)r->nconn ? l : MR_LANE_P2P;
		p->addr = MR_RING_ADDR(&r->hosts, s->right, l < (unsigned)r->nconn ? l : 0);
		p->backoff = 20;
		hello_prepare(r, p, p->lane);
		start_connect(p, now);
	}
	mr_ring_log(r, "listening on %d address(es), connecting to rank %d at %s", r->nconn, s->right,
		    s->pend[0].addr->text);
	return 0;
}

/* Wait (at most timeout ms, less for a retry due) for the listeners and the pending. */
static int setup_poll(struct setup *s, int timeout, struct meshrun_err *err)
{
	struct mr_ring *r = s->r;
	int64_t now = mr_now_ms();
	size_t np = 0;

	for (int i = 0; i < r->nconn; i++) {
		s->pfd[np].fd = s->in_done < s->nlanes ? s->listeners[i] : -1;
		s->pfd[np].events = POLLIN;
		s->pfd[np].revents = 0;
		np++;
	}
	for (size_t i = 0; i < s->npend; i++) {
		struct pend *p = &s->pend[i];
		s->pfd[np].fd = -1;
		s->pfd[np].events = 0;
		s->pfd[np].revents = 0;
		if (p->state == P_WAIT) {
			timeout = (int)MR_MIN((int64_t)timeout, MR_MAX(p->retry_at - now, (int64_t)0));
		} else if (p->state == P_CONNECTING || p->state == P_SEND) {
			s->pfd[np].fd = p->fd;
			s->pfd[np].events = POLLOUT;
		} else if (p->state == P_RECV) {
			s->pfd[np].fd = p->fd;
			s->pfd[np].events = POLLIN;
		}
		if (!p->outgoing && (p->state == P_RECV || p->state == P_SEND))
			timeout = (int)MR_MIN((int64_t)timeout,
					      MR_MAX(p->accepted_at + HELLO_WAIT_MS - now, (int64_t)0));
		np++;
	}
	if (poll(s->pfd, np, timeout) < 0 && errno != EINTR)
		return mr_err_sys(err, "rank %d: poll during ring setup", r->rank);
	return 0;
}

/* Close an incoming connection that has not passed its hello; logged. */
static void refuse(struct setup *s, struct pend *p, const char *why)
{
	char who[96];

	peer_text(p->fd, who, sizeof(who));
	mr_ring_log(s->r, "refused connection from %s: %s", who, why);
	mr_close(&p->fd);
	p->state = P_DEAD;
}

/*
 * A slot for a new incoming connection: a free one, else the oldest incoming
 * one still in its hello (closed: a slow-loris holding every slot cannot
 * keep the neighbour out, whose hello comes within a round trip), else none.
 */
static size_t free_slot(struct setup *s)
{
	size_t oldest = s->cap;

	for (size_t k = s->nlanes; k < s->npend; k++) {
		struct pend *p = &s->pend[k];
		if (p->state == P_DEAD)
			return k;
		if (p->state == P_RECV && (oldest == s->cap || p->seq < s->pend[oldest].seq))
			oldest = k;
	}
	if (s->npend < s->cap)
		return s->npend;
	if (oldest < s->cap)
		refuse(s, &s->pend[oldest], "too many pending connections (closed the oldest)");
	return oldest;
}

/* Accept the new incoming connections into free pend slots (P_RECV: hello first). */
static void setup_accept(struct setup *s, int64_t now)
{
	struct mr_ring *r = s->r;

	for (int i = 0; i < r->nconn; i++) {
		if (!(s->pfd[i].revents & POLLIN))
			continue;
		for (;;) {
			int fd = mr_accept(s->listeners[i], MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
			if (fd < 0)
				break;
			size_t slot = free_slot(s);
			if (slot == s->cap) { /* every slot is a connection past its hello */
				char who[96];
				peer_text(fd, who, sizeof(who));
				mr_ring_log(r, "refused connection from %s: too many pending connections", who);
				close(fd);
				continue;
			}
			if (slot == s->npend)
				s->npend++;
			memset(&s->pend[slot], 0, sizeof(s->pend[slot]));
			s->pend[slot].fd = fd;
			s->pend[slot].state = P_RECV;
			s->pend[slot].accepted_at = now;
			s->pend[slot].seq = ++s->accepted;
		}
	}
}

/* The peer's complete hello: the rank, size, token and lane we expect? */
static int check_hello(struct setup *s, struct pend *p, struct meshrun_err *e)
{
	struct mr_ring *r = s->r;
	int want = p->outgoing ? s->right : s->left;
	int st = mr_hello_check(&p->hello, (uint32_t)want, (uint32_t)r->size, (uint32_t)r->nconn,
				r->token, r->token_len, e);

	if (st == 0 && p->outgoing && p->hello.lane != p->lane)
		st = mr_err_set(e, MESHRUN_E_PROTO, "answer for lane %u on lane %u", p->hello.lane, p->lane);
	if (st == 0 && !p->outgoing) {
		unsigned lane = p->hello.lane == MR_LANE_P2P ? (unsigned)r->nconn : p->hello.lane;
		if (s->have_in[lane])
			st = mr_err_set(e, MESHRUN_E_PROTO, "lane %u is already connected", p->hello.lane);
		else
			s->have_in[lane] = true;
	}
	return st;
}

/*
 * Advance pend[i] as far as it goes without waiting: connect (outgoing), hellos
 * both ways, then its fd becomes a lane of r. A refused incoming connection is
 * closed and logged; < 0 (err) only when the neighbour's address answers wrong.
 */
static int setup_step_pending(struct setup *s, size_t i, int64_t now, struct meshrun_err *err)
{
	struct mr_ring *r = s->r;
	struct pend *p = &s->pend[i];
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int st;

	if (p->outgoing && p->state == P_WAIT && now >= p->retry_at) {
		start_connect(p, now);
		return 0;
	}
	if (!p->outgoing && (p->state == P_RECV || p->state == P_SEND) &&
	    now - p->accepted_at >= HELLO_WAIT_MS) {
		char why[64];
		snprintf(why, sizeof(why), "no complete hello within %d ms", HELLO_WAIT_MS);
		refuse(s, p, why);
		return 0;
	}
	if (p->state == P_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (!(s->pfd[(size_t)r->nconn + i].revents & (POLLOUT | POLLERR | POLLHUP)))
			return 0;
		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			retry_later(p, soerr, now);
			return 0;
		}
		p->state = P_SEND;
	}
	if (p->state == P_SEND) {
		st = write_hello(p, &e);
		if (st < 0 && p->outgoing) {
			retry_later(p, e.sys_errno ? e.sys_errno : EPIPE, now);
			return 0;
		}
		if (st == 0)
			return 0;
		if (st > 0 && !p->outgoing) { /* our answer is out: incoming lane done */
			unsigned lane = p->hello.lane == MR_LANE_P2P ? (unsigned)r->nconn : p->hello.lane;
			if (lane < (unsigned)r->nconn)
				r->left[lane] = p->fd;
			else
				r->lane[MR_LANE_LEFT].fd = p->fd;
			p->fd = -1;
			p->state = P_DONE;
			s->in_done++;
			return 0;
		}
		if (st < 0) {
			mr_close(&p->fd);
			p->state = P_DEAD;
			return 0;
		}
		p->state = P_RECV;
	}
	if (p->state != P_RECV)
		return 0;
	st = read_hello(p, &e);
	if (st == 0)
		return 0;
	if (st > 0)
		st = check_hello(s, p, &e);
	if (st < 0 && p->outgoing && e.code == MESHRUN_E_PEER) {
		/* closed before its answer (evicted as the oldest pending, or
		 * the neighbour restarted its listener): connect again */
		retry_later(p, e.sys_errno ? e.sys_errno : ECONNRESET, now);
		return 0;
	}
	if (st < 0) {
		if (p->outgoing) /* whoever listens at the neighbour's address is not it: fatal */
			return mr_err_set(err, MESHRUN_E_PROTO, "rank %d: connection to rank %d at %s refused: %s", r->rank, s->right, p->addr->text, e.msg);
		refuse(s, p, e.msg);
		return 0;
	}
	if (p->outgoing) {
		if (p->lane == MR_LANE_P2P)
			r->lane[MR_LANE_RIGHT].fd = p->fd;
		else
			r->right[p->lane] = p->fd;
		p->fd = -1;
		p->state = P_DONE;
		s->out_done++;
		return 0;
	}
	hello_prepare(r, p, p->hello.lane);
	p->state = P_SEND;
	return setup_step_pending(s, i, now, err); /* write the answer right away */
}

/* Every lane connected both ways (else the error naming the neighbour): tune them. */
static int setup_finish(struct setup *s, struct meshrun_err *err)
{
	struct mr_ring *r = s->r;

	if (s->out_done < s->nlanes) {
		const struct pend *p = NULL;
		for (unsigned l = 0; l < s->nlanes; l++)
			if (s->pend[l].state != P_DONE)
				p = &s->pend[l];
		return mr_err_errno(err, p && p->last_errno ? p->last_errno : ETIMEDOUT, MESHRUN_E_CONNECT,
				    "rank %d: could not connect to rank %d at %s within %lld ms", r->rank,
				    s->right, p ? p->addr->text : "?", (long long)r->timeout_ms);
	}
	if (s->in_done < s->nlanes)
		return mr_err_set(err, MESHRUN_E_CONNECT, "rank %d: rank %d (%s) did not connect within %lld ms (%u of %u connections)", r->rank, s->left, mr_ring_peer_addr(r, s->left), (long long)r->timeout_ms, s->in_done, s->nlanes);
	for (int i = 0; i < r->nconn; i++) {
		tune_socket(r, r->left[i], true);
		tune_socket(r, r->right[i], true);
	}
	tune_socket(r, r->lane[0].fd, false);
	tune_socket(r, r->lane[1].fd, false);
	if (r->verbose) {
		char name[MR_RING_CC_MAX + 1], cc[MR_RING_CC_MAX + 3];
		if (mr_tcp_get_cc(r->left[0], name, sizeof(name)) == 0)
			snprintf(cc, sizeof(cc), "'%s'", name);
		else /* no such option (macOS): the system's, whatever it is */
			snprintf(cc, sizeof(cc), "the system's");
		int sb = 0;
		socklen_t sl = sizeof(sb);
		getsockopt(r->left[0], SOL_SOCKET, SO_SNDBUF, &sb, &sl);
		mr_ring_log(r, "data connections use TCP congestion control %s, send buffer %d bytes (%s)", cc, sb, r->sndbuf > 0 ? "fixed" : "autotuned");
	}
	r->lane[MR_LANE_LEFT].peer = s->left;
	r->lane[MR_LANE_RIGHT].peer = s->right;
	mr_ring_log(r, "connected: %d data connection(s) each way plus control lanes", r->nconn);
	return 0;
}

static void setup_release(struct setup *s)
{
	for (size_t i = 0; s->pend && i < s->npend; i++)
		mr_close(&s->pend[i].fd);
	for (int i = 0; s->listeners && i < s->r->nconn; i++)
		mr_close(&s->listeners[i]);
	free(s->have_in);
	free(s->pfd);
	free(s->pend);
	free(s->listeners);
}

/* start -> (poll -> accept -> step every pending) until all lanes are up -> finish */
int mr_ring_connect_all(struct mr_ring *r, struct meshrun_err *err)
{
	struct setup s = {
		.r = r,
		.right = (r->rank + 1) % r->size,
		.left = (r->rank + r->size - 1) % r->size,
		.nlanes = (unsigned)r->nconn + 1,
		.deadline = mr_now_ms() + r->timeout_ms,
	};
	int rc;

	s.cap = s.nlanes + MAX_PENDING_IN;
	rc = setup_start(&s, err);
	while (rc == 0 && (s.in_done < s.nlanes || s.out_done < s.nlanes)) {
		int timeout = mr_ms_left(s.deadline);
		int64_t now;

		if (timeout == 0)
			break;
		rc = setup_poll(&s, timeout, err);
		if (rc < 0)
			break;
		now = mr_now_ms();
		setup_accept(&s, now);
		for (size_t i = 0; i < s.npend && rc == 0; i++)
			rc = setup_step_pending(&s, i, now, err);
	}
	if (rc == 0)
		rc = setup_finish(&s, err);
	setup_release(&s);
	return rc;
}
