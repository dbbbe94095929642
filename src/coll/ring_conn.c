/*
 * ring_conn.c - connection setup of the ring backend.
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
 */
#include "common/compat.h"
#include "coll/ring_impl.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PENDING_IN 64

enum pstate { P_WAIT, P_CONNECTING, P_SEND, P_RECV, P_DONE, P_DEAD };

struct pend {
	int fd;
	bool outgoing;
	unsigned lane;               /* outgoing: the lane we open */
	enum pstate state;
	int64_t retry_at;
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
	int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

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
	p->fd = socket(p->addr->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
			return mr_err_set(err, MESHRUN_E_PROTO, "connection closed during hello");
		return mr_err_sys(err, "recv hello");
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
	if (data && r->tcp_cc[0] &&
	    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, r->tcp_cc, (socklen_t)strlen(r->tcp_cc)) < 0)
		mr_ring_log(r, "TCP congestion control '%s' not set: %s (keeping the system's)", r->tcp_cc, strerror(errno));
	/* unacknowledged data for longer than the timeout fails the socket (a pulled cable) */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
	if (data && r->sndbuf > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &r->sndbuf, sizeof(r->sndbuf)) < 0)
		mr_ring_log(r, "send buffer of %d bytes not set: %s (keeping the kernel's autotuning)", r->sndbuf, strerror(errno));
}

int mr_ring_connect_all(struct mr_ring *r, struct meshrun_err *err)
{
	const int right = (r->rank + 1) % r->size;
	const int left = (r->rank + r->size - 1) % r->size;
	const unsigned nlanes = (unsigned)r->nconn + 1; /* data lanes + control lane */
	int64_t deadline = mr_now_ms() + r->timeout_ms;
	int *listeners = NULL;
	struct pend *pend = NULL;
	size_t npend = 0, cap = nlanes + MAX_PENDING_IN;
	struct pollfd *pfd = NULL;
	bool *have_in = NULL;
	unsigned in_done = 0, out_done = 0;
	int rc = 0;

	listeners = malloc((size_t)r->nconn * sizeof(*listeners));
	pend = calloc(cap, sizeof(*pend));
	pfd = calloc(cap + (size_t)r->nconn, sizeof(*pfd));
	have_in = calloc(nlanes, sizeof(*have_in));
	if (!listeners || !pend || !pfd || !have_in) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "ring setup: out of memory");
		goto out;
	}
	for (int i = 0; i < r->nconn; i++)
		listeners[i] = -1;
	for (int i = 0; i < r->nconn; i++) {
		rc = open_listener(MR_RING_ADDR(&r->hosts, r->rank, i), err);
		if (rc < 0) {
			mr_err_prefix(err, "rank %d", r->rank);
			goto out;
		}
		listeners[i] = rc;
		rc = 0;
	}
	int64_t now = mr_now_ms();
	for (unsigned l = 0; l < nlanes; l++) {
		struct pend *p = &pend[npend++];
		p->fd = -1;
		p->outgoing = true;
		p->lane = l < (unsigned)r->nconn ? l : MR_LANE_P2P;
		p->addr = MR_RING_ADDR(&r->hosts, right, l < (unsigned)r->nconn ? l : 0);
		p->backoff = 20;
		hello_prepare(r, p, p->lane);
		start_connect(p, now);
	}
	mr_ring_log(r, "listening on %d address(es), connecting to rank %d at %s", r->nconn, right,
		    pend[0].addr->text);

	while (in_done < nlanes || out_done < nlanes) {
		size_t np = 0;
		int timeout = mr_ms_left(deadline);
		now = mr_now_ms();
		if (timeout == 0)
			break;
		for (int i = 0; i < r->nconn; i++) {
			pfd[np].fd = in_done < nlanes ? listeners[i] : -1;
			pfd[np].events = POLLIN;
			pfd[np].revents = 0;
			np++;
		}
		for (size_t i = 0; i < npend; i++) {
			struct pend *p = &pend[i];
			pfd[np].fd = -1;
			pfd[np].events = 0;
			pfd[np].revents = 0;
			if (p->state == P_WAIT) {
				timeout = (int)MR_MIN((int64_t)timeout, MR_MAX(p->retry_at - now, (int64_t)0));
			} else if (p->state == P_CONNECTING || p->state == P_SEND) {
				pfd[np].fd = p->fd;
				pfd[np].events = POLLOUT;
			} else if (p->state == P_RECV) {
				pfd[np].fd = p->fd;
				pfd[np].events = POLLIN;
			}
			np++;
		}
		if (poll(pfd, np, timeout) < 0 && errno != EINTR) {
			rc = mr_err_sys(err, "rank %d: poll during ring setup", r->rank);
			goto out;
		}
		now = mr_now_ms();
		/* new incoming connections */
		for (int i = 0; i < r->nconn; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			for (;;) {
				int fd = accept4(listeners[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
				if (fd < 0)
					break;
				size_t slot = npend;
				for (size_t k = nlanes; k < npend; k++)
					if (pend[k].state == P_DEAD) {
						slot = k;
						break;
					}
				if (slot == cap) {
					char who[96];
					peer_text(fd, who, sizeof(who));
					mr_ring_log(r, "refused connection from %s: too many pending connections", who);
					close(fd);
					continue;
				}
				if (slot == npend)
					npend++;
				memset(&pend[slot], 0, sizeof(pend[slot]));
				pend[slot].fd = fd;
				pend[slot].state = P_RECV;
			}
		}
		for (size_t i = 0; i < npend; i++) {
			struct pend *p = &pend[i];
			struct meshrun_err e = MESHRUN_ERR_INIT;
			int st;

			if (p->outgoing && p->state == P_WAIT && now >= p->retry_at) {
				start_connect(p, now);
				continue;
			}
			if (p->state == P_CONNECTING) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);
				if (!(pfd[r->nconn + (int)i].revents & (POLLOUT | POLLERR | POLLHUP)))
					continue;
				getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
				if (soerr) {
					retry_later(p, soerr, now);
					continue;
				}
				p->state = P_SEND;
			}
			if (p->state == P_SEND) {
				st = write_hello(p, &e);
				if (st < 0 && p->outgoing) {
					retry_later(p, e.sys_errno ? e.sys_errno : EPIPE, now);
					continue;
				}
				if (st == 0)
					continue;
				if (st > 0 && !p->outgoing) { /* our answer is out: incoming lane done */
					if (st > 0) {
						unsigned lane = p->hello.lane == MR_LANE_P2P ? (unsigned)r->nconn : p->hello.lane;
						if (lane < (unsigned)r->nconn)
							r->left[lane] = p->fd;
						else
							r->lane[MR_LANE_LEFT].fd = p->fd;
						p->fd = -1;
						p->state = P_DONE;
						in_done++;
					}
					continue;
				}
				if (st < 0) {
					mr_close(&p->fd);
					p->state = P_DEAD;
					continue;
				}
				p->state = P_RECV;
			}
			if (p->state != P_RECV)
				continue;
			st = read_hello(p, &e);
			if (st == 0)
				continue;
			if (st > 0) {
				int want = p->outgoing ? right : left;
				st = mr_hello_check(&p->hello, (uint32_t)want, (uint32_t)r->size,
						    (uint32_t)r->nconn, r->token, r->token_len, &e);
				if (st == 0 && p->outgoing && p->hello.lane != p->lane)
					st = mr_err_set(&e, MESHRUN_E_PROTO, "answer for lane %u on lane %u", p->hello.lane, p->lane);
				if (st == 0 && !p->outgoing) {
					unsigned lane = p->hello.lane == MR_LANE_P2P ? (unsigned)r->nconn : p->hello.lane;
					if (have_in[lane])
						st = mr_err_set(&e, MESHRUN_E_PROTO, "lane %u is already connected", p->hello.lane);
					else
						have_in[lane] = true;
				}
			}
			if (st < 0) {
				char who[96];
				peer_text(p->fd, who, sizeof(who));
				if (p->outgoing) {
					/* whoever listens at the neighbour's address is not it: fatal */
					rc = mr_err_set(err, MESHRUN_E_PROTO, "rank %d: connection to rank %d at %s refused: %s", r->rank, right, p->addr->text, e.msg);
					goto out;
				}
				mr_ring_log(r, "refused connection from %s: %s", who, e.msg);
				mr_close(&p->fd);
				p->state = P_DEAD;
				continue;
			}
			if (p->outgoing) {
				if (p->lane == MR_LANE_P2P)
					r->lane[MR_LANE_RIGHT].fd = p->fd;
				else
					r->right[p->lane] = p->fd;
				p->fd = -1;
				p->state = P_DONE;
				out_done++;
			} else {
				hello_prepare(r, p, p->hello.lane);
				p->state = P_SEND;
				i--; /* write the answer right away */
			}
		}
	}
	if (out_done < nlanes) {
		const struct pend *p = NULL;
		for (unsigned l = 0; l < nlanes; l++)
			if (pend[l].state != P_DONE)
				p = &pend[l];
		rc = mr_err_errno(err, p && p->last_errno ? p->last_errno : ETIMEDOUT, MESHRUN_E_CONNECT,
				  "rank %d: could not connect to rank %d at %s within %lld ms", r->rank,
				  right, p ? p->addr->text : "?", (long long)r->timeout_ms);
		goto out;
	}
	if (in_done < nlanes) {
		rc = mr_err_set(err, MESHRUN_E_CONNECT, "rank %d: rank %d (%s) did not connect within %lld ms (%u of %u connections)", r->rank, left, mr_ring_peer_addr(r, left), (long long)r->timeout_ms, in_done, nlanes);
		goto out;
	}
	for (int i = 0; i < r->nconn; i++) {
		tune_socket(r, r->left[i], true);
		tune_socket(r, r->right[i], true);
	}
	tune_socket(r, r->lane[0].fd, false);
	tune_socket(r, r->lane[1].fd, false);
	if (r->verbose) {
		char cc[MR_RING_CC_MAX + 1] = "?";
		socklen_t cl = MR_RING_CC_MAX;
		if (getsockopt(r->left[0], IPPROTO_TCP, TCP_CONGESTION, cc, &cl) == 0)
			cc[MR_MIN((size_t)cl, (size_t)MR_RING_CC_MAX)] = '\0';
		int sb = 0;
		socklen_t sl = sizeof(sb);
		getsockopt(r->left[0], SOL_SOCKET, SO_SNDBUF, &sb, &sl);
		mr_ring_log(r, "data connections use TCP congestion control '%s', send buffer %d bytes (%s)", cc, sb, r->sndbuf > 0 ? "fixed" : "autotuned");
	}
	r->lane[MR_LANE_LEFT].peer = left;
	r->lane[MR_LANE_RIGHT].peer = right;
	mr_ring_log(r, "connected: %d data connection(s) each way plus control lanes", r->nconn);
out:
	for (size_t i = 0; pend && i < npend; i++)
		mr_close(&pend[i].fd);
	for (int i = 0; listeners && i < r->nconn; i++)
		mr_close(&listeners[i]);
	free(have_in);
	free(pfd);
	free(pend);
	free(listeners);
	return rc;
}
