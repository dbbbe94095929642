/*
 * conn.c - connection setup shared by the ring and the mesh (conn.h).
 *
 * One pending slot per lane we open (the outgoing ones, first) and per
 * accepted connection (after them); each slot is a small state machine:
 * WAIT (retry due) -> CONNECTING -> SEND hello -> RECV answer -> DONE for
 * ours, RECV hello -> SEND answer -> DONE for theirs; a refused one is DEAD
 * and its slot reused.
 *
 * What an unauthenticated connection can cost (docs/contracts.md, "What
 * another machine on the network can do"): the listeners are bound to this
 * rank's own addresses from the backend's address file, never to every
 * address; past that, the accept gate (accept.h) decides: before its hello is
 * checked, a connection gets one fixed buffer of MR_HELLO_MAX bytes,
 * MR_ACCEPT_WAIT_MS to complete its hello, and one of MAX_PENDING_IN slots;
 * when they are all taken, the oldest unauthenticated one is closed for the
 * newcomer.
 * A connecting side whose connection is closed before the answer (evicted, or
 * the listener was not ready) tries again until the deadline.
 */
#include "common/compat.h"
#include "coll/accept.h"
#include "coll/tcp/conn.h"
#include "coll/tcp/wire.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PENDING_IN 64

enum pstate { P_WAIT, P_CONNECTING, P_SEND, P_RECV, P_DONE, P_DEAD };

struct pend {
	int fd;
	bool outgoing;
	int link;                    /* outgoing: index into plan->links; incoming: once known */
	unsigned lane;               /* outgoing: the lane we open */
	enum pstate state;
	int64_t retry_at;
	struct mr_accept_stamp stamp; /* incoming: when and in which order (accept.h) */
	int backoff;
	int last_errno;
	const struct mr_ring_addr *addr; /* outgoing: where to */
	unsigned char out[MR_HELLO_MAX];
	size_t outlen, outoff;
	unsigned char in[MR_HELLO_MAX];
	size_t inoff;
	struct mr_hello hello;       /* what the peer said */
};

/* The state of one mr_conn_setup() call. */
struct setup {
	const struct mr_conn_plan *p;
	unsigned nout, nin;          /* lanes we open, lanes we accept */
	int *listeners;              /* one per plan->listen address */
	struct pend *pend;           /* the nout outgoing first, then incoming ones */
	size_t npend, cap;
	struct pollfd *pfd;          /* the listeners, then one per pend */
	bool **have_in;              /* per incoming link, per lane (control last): connected */
	struct mr_accept_gate gate;  /* incoming connections so far */
	unsigned in_done, out_done;
};

static void logf_(const struct mr_conn_plan *p, const char *fmt, ...) MR_PRINTF(2, 3);
static void logf_(const struct mr_conn_plan *p, const char *fmt, ...)
{
	va_list ap;

	if (!p->verbose)
		return;
	int saved = errno;
	fprintf(stderr, "[%s] rank %d: ", p->who, p->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	errno = saved;
}

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

static void hello_prepare(const struct mr_conn_plan *pl, struct pend *p, unsigned lane,
			  uint32_t nconn)
{
	p->outlen = mr_accept_hello(p->out, pl->rank, pl->size, lane, nconn, pl->token, pl->token_len);
	p->outoff = 0;
}

static void retry_later(struct pend *p, int e, int64_t now)
{
	p->last_errno = e;
	mr_close(&p->fd);
	p->state = P_WAIT;
	p->retry_at = now + p->backoff;
	p->backoff = MR_MIN(p->backoff * 2, 500);
}

/*
 * A connect to a port of this machine that nobody listens on can meet
 * itself: when the kernel picks that very port as the local one (it lies in
 * the ephemeral range), TCP's simultaneous open connects the socket to
 * itself, and the peer then "says" our own rank. That is a refused
 * connection, to be retried, not a peer.
 */
static bool connected_to_self(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t la = sizeof(a), lb = sizeof(b);

	if (getsockname(fd, (struct sockaddr *)&a, &la) < 0 || getpeername(fd, (struct sockaddr *)&b, &lb) < 0 ||
	    la != lb || a.ss_family != b.ss_family)
		return false;
	if (a.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&a, *y = (const void *)&b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a.ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)&a, *y = (const void *)&b;
		return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return false;
}

static void start_connect(struct pend *p, int64_t now)
{
	p->fd = mr_socket(p->addr->sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	if (p->fd < 0) {
		retry_later(p, errno, now);
		return;
	}
	if (connect(p->fd, (const struct sockaddr *)&p->addr->sa, p->addr->salen) == 0 ||
	    errno == EINPROGRESS) {
		p->state = P_CONNECTING;
		return;
	}
	retry_later(p, errno, now);
}

/* Read what is there of the peer's hello; 1 when complete, 0 for more, <0 refused. */
static int read_hello(struct pend *p, struct meshrun_err *err)
{
	for (;;) {
		int rc = mr_hello_decode(p->in, p->inoff, &p->hello, err);
		if (rc == 0)
			return 1;
		if (rc < 0)
			return rc;
		ssize_t n = recv(p->fd, p->in + p->inoff, (size_t)rc - p->inoff, 0);
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
		ssize_t n = mr_send_nosig(p->fd, p->out + p->outoff, p->outlen - p->outoff, MSG_DONTWAIT);
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

void mr_conn_peer_text(int fd, char *buf, size_t n)
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

/* Listen on every own address and start connecting every outgoing lane. */
static int setup_start(struct setup *s, struct meshrun_err *err)
{
	const struct mr_conn_plan *pl = s->p;
	int64_t now;
	int rc;

	s->listeners = malloc((size_t)MR_MAX(pl->nlisten, 1) * sizeof(*s->listeners));
	s->pend = calloc(s->cap, sizeof(*s->pend));
	s->pfd = calloc(s->cap + (size_t)pl->nlisten, sizeof(*s->pfd));
	s->have_in = calloc((size_t)MR_MAX(pl->nlinks, 1), sizeof(*s->have_in));
	for (int i = 0; s->listeners && i < pl->nlisten; i++)
		s->listeners[i] = -1; /* before any return: setup_release() closes them */
	if (!s->listeners || !s->pend || !s->pfd || !s->have_in)
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s setup: out of memory", pl->who);
	for (int i = 0; i < pl->nlinks; i++) {
		if (pl->links[i].outgoing)
			continue;
		s->have_in[i] = calloc(pl->links[i].ndata + 1, sizeof(bool));
		if (!s->have_in[i])
			return mr_err_set(err, MESHRUN_E_NOMEM, "%s setup: out of memory", pl->who);
	}
	for (int i = 0; i < pl->nlisten; i++) {
		rc = open_listener(pl->listen[i], err);
		if (rc < 0) {
			mr_err_prefix(err, "rank %d", pl->rank);
			return rc;
		}
		s->listeners[i] = rc;
	}
	now = mr_now_ms();
	for (int i = 0; i < pl->nlinks; i++) {
		const struct mr_conn_link *lk = &pl->links[i];
		if (!lk->outgoing)
			continue;
		for (unsigned l = 0; l <= lk->ndata; l++) {
			struct pend *p = &s->pend[s->npend++];
			p->fd = -1;
			p->outgoing = true;
			p->link = i;
			p->lane = l < lk->ndata ? l : MR_LANE_P2P;
			p->addr = &lk->addrs[l < lk->ndata ? l : 0];
			p->backoff = 20;
			hello_prepare(pl, p, p->lane, lk->nconn);
			start_connect(p, now);
		}
		logf_(pl, "connecting to rank %d at %s", lk->peer, lk->addrs[0].text);
	}
	logf_(pl, "listening on %d address(es)", pl->nlisten);
	return 0;
}

/* Wait (at most timeout ms, less for a retry due) for the listeners and the pending. */
static int setup_poll(struct setup *s, int timeout, struct meshrun_err *err)
{
	const struct mr_conn_plan *pl = s->p;
	int64_t now = mr_now_ms();
	size_t np = 0;

	for (int i = 0; i < pl->nlisten; i++) {
		s->pfd[np].fd = s->in_done < s->nin ? s->listeners[i] : -1;
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
			timeout = mr_accept_poll_ms(&p->stamp, now, timeout);
		np++;
	}
	if (poll(s->pfd, np, timeout) < 0 && errno != EINTR)
		return mr_err_sys(err, "rank %d: poll during %s setup", pl->rank, pl->who);
	return 0;
}

/* Close an incoming connection that has not passed its hello; logged. */
static void refuse(struct setup *s, struct pend *p, const char *why)
{
	char who[96];

	mr_conn_peer_text(p->fd, who, sizeof(who));
	logf_(s->p, "refused connection from %s: %s", who, why);
	mr_close(&p->fd);
	p->state = P_DEAD;
}

/* The incoming slots as the gate sees them: pend[nout + i], unused past npend. */
static enum mr_accept_use in_slot_use(void *ctx, size_t i, const struct mr_accept_stamp **st)
{
	struct setup *s = ctx;
	struct pend *p = &s->pend[s->nout + i];

	if (s->nout + i >= s->npend || p->state == P_DEAD)
		return MR_ACCEPT_FREE;
	*st = &p->stamp;
	return p->state == P_RECV ? MR_ACCEPT_PENDING : MR_ACCEPT_BUSY;
}

/* A slot for a new incoming connection (accept.h: a free one, else the oldest
 * still in its hello, closed for it), else s->cap. */
static size_t free_slot(struct setup *s)
{
	bool evict;
	size_t slot = s->nout + mr_accept_pick(s->cap - s->nout, in_slot_use, s, &evict);

	if (evict)
		refuse(s, &s->pend[slot], MR_ACCEPT_EVICTED);
	return slot;
}

/* Accept the new incoming connections into free pend slots (P_RECV: hello first). */
static void setup_accept(struct setup *s, int64_t now)
{
	const struct mr_conn_plan *pl = s->p;

	for (int i = 0; i < pl->nlisten; i++) {
		if (!(s->pfd[i].revents & POLLIN))
			continue;
		for (;;) {
			int fd = mr_accept(s->listeners[i], MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
			if (fd < 0)
				break;
			size_t slot = free_slot(s);
			if (slot == s->cap) { /* every slot is a connection past its hello */
				char who[96];
				mr_conn_peer_text(fd, who, sizeof(who));
				logf_(pl, "refused connection from %s: too many pending connections", who);
				close(fd);
				continue;
			}
			if (slot == s->npend)
				s->npend++;
			memset(&s->pend[slot], 0, sizeof(s->pend[slot]));
			s->pend[slot].fd = fd;
			s->pend[slot].link = -1;
			s->pend[slot].state = P_RECV;
			mr_accept_admit(&s->gate, &s->pend[slot].stamp, now);
		}
	}
}

/* The incoming link of that rank, or -1. */
static int incoming_link(const struct mr_conn_plan *pl, uint32_t rank)
{
	for (int i = 0; i < pl->nlinks; i++)
		if (!pl->links[i].outgoing && (uint32_t)pl->links[i].peer == rank)
			return i;
	return -1;
}

/* The peer's complete hello: the rank, size, token and lane we expect? */
static int check_hello(struct setup *s, struct pend *p, struct meshrun_err *e)
{
	const struct mr_conn_plan *pl = s->p;
	int li = p->outgoing ? p->link : incoming_link(pl, p->hello.rank);
	int ref = li;
	int st;

	/* an unknown rank is checked against the first incoming link, so that
	 * a wrong token or size is named before the rank */
	for (int i = 0; ref < 0 && i < pl->nlinks; i++)
		if (!pl->links[i].outgoing)
			ref = i;
	if (ref < 0)
		return mr_err_set(e, MESHRUN_E_PROTO, "no connection expected from any rank");
	const struct mr_conn_link *lk = &pl->links[ref];
	st = mr_hello_check(&p->hello, (uint32_t)lk->peer, (uint32_t)pl->size, lk->nconn, pl->token, pl->token_len, e);
	if (st == 0 && p->hello.lane != MR_LANE_P2P && p->hello.lane >= lk->ndata)
		st = mr_err_set(e, MESHRUN_E_PROTO, "lane %u out of range (%u data lanes)", p->hello.lane, lk->ndata);
	if (st == 0 && p->outgoing && p->hello.lane != p->lane)
		st = mr_err_set(e, MESHRUN_E_PROTO, "answer for lane %u on lane %u", p->hello.lane, p->lane);
	if (st == 0 && !p->outgoing) {
		unsigned lane = p->hello.lane == MR_LANE_P2P ? lk->ndata : p->hello.lane;
		if (s->have_in[li][lane])
			st = mr_err_set(e, MESHRUN_E_PROTO, "lane %u is already connected", p->hello.lane);
		else
			s->have_in[li][lane] = true;
		p->link = li;
	}
	return st;
}

static void place(const struct mr_conn_plan *pl, struct pend *p)
{
	const struct mr_conn_link *lk = &pl->links[p->link];
	unsigned lane = p->outgoing ? p->lane : p->hello.lane;

	if (lane == MR_LANE_P2P)
		*lk->ctl_fd = p->fd;
	else
		lk->data_fd[lane] = p->fd;
	p->fd = -1;
	p->state = P_DONE;
}

/*
 * Advance pend[i] as far as it goes without waiting: connect (outgoing), hellos
 * both ways, then its fd goes to its link. A refused incoming connection is
 * closed and logged; < 0 (err) only when a peer's address answers wrong.
 */
static int setup_step_pending(struct setup *s, size_t i, int64_t now, struct meshrun_err *err)
{
	const struct mr_conn_plan *pl = s->p;
	struct pend *p = &s->pend[i];
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int st;

	if (p->outgoing && p->state == P_WAIT && now >= p->retry_at) {
		start_connect(p, now);
		return 0;
	}
	if (!p->outgoing && (p->state == P_RECV || p->state == P_SEND) &&
	    mr_accept_expired(&p->stamp, now)) {
		char why[64];
		snprintf(why, sizeof(why), "no complete hello within %d ms", MR_ACCEPT_WAIT_MS);
		refuse(s, p, why);
		return 0;
	}
	if (p->state == P_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (!(s->pfd[(size_t)pl->nlisten + i].revents & (POLLOUT | POLLERR | POLLHUP)))
			return 0;
		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			retry_later(p, soerr, now);
			return 0;
		}
		if (connected_to_self(p->fd)) {
			retry_later(p, ECONNREFUSED, now);
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
			place(pl, p);
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
		 * the peer restarted its listener): connect again */
		retry_later(p, e.sys_errno ? e.sys_errno : ECONNRESET, now);
		return 0;
	}
	if (st < 0) {
		if (p->outgoing) /* whoever listens at the peer's address is not it: fatal */
			return mr_err_set(err, MESHRUN_E_PROTO, "rank %d: connection to rank %d at %s refused: %s", pl->rank, pl->links[p->link].peer, p->addr->text, e.msg);
		refuse(s, p, e.msg);
		return 0;
	}
	if (p->outgoing) {
		place(pl, p);
		s->out_done++;
		return 0;
	}
	hello_prepare(pl, p, p->hello.lane, pl->links[p->link].nconn);
	p->state = P_SEND;
	return setup_step_pending(s, i, now, err); /* write the answer right away */
}

/* Every lane connected both ways, else the error naming the first missing peer. */
static int setup_check(struct setup *s, struct meshrun_err *err)
{
	const struct mr_conn_plan *pl = s->p;

	if (s->out_done < s->nout) {
		const struct pend *p = NULL;
		for (unsigned l = 0; l < s->nout && !p; l++)
			if (s->pend[l].state != P_DONE)
				p = &s->pend[l];
		return mr_err_errno(err, p && p->last_errno ? p->last_errno : ETIMEDOUT, MESHRUN_E_CONNECT,
				    "rank %d: could not connect to rank %d at %s within %lld ms", pl->rank,
				    p ? pl->links[p->link].peer : -1, p ? p->addr->text : "?", (long long)pl->timeout_ms);
	}
	if (s->in_done < s->nin) {
		for (int i = 0; i < pl->nlinks; i++) {
			const struct mr_conn_link *lk = &pl->links[i];
			unsigned have = 0;
			if (lk->outgoing)
				continue;
			for (unsigned l = 0; l <= lk->ndata; l++)
				have += s->have_in[i][l];
			if (have < lk->ndata + 1)
				return mr_err_set(err, MESHRUN_E_CONNECT, "rank %d: rank %d (%s) did not connect within %lld ms (%u of %u connections)", pl->rank, lk->peer, lk->peer_text ? lk->peer_text : "?", (long long)pl->timeout_ms, have, lk->ndata + 1);
		}
		return mr_err_set(err, MESHRUN_E_CONNECT, "rank %d: %u of %u incoming connections within %lld ms", pl->rank, s->in_done, s->nin, (long long)pl->timeout_ms);
	}
	return 0;
}

static void setup_release(struct setup *s)
{
	for (size_t i = 0; s->pend && i < s->npend; i++)
		mr_close(&s->pend[i].fd);
	for (int i = 0; s->listeners && i < s->p->nlisten; i++)
		mr_close(&s->listeners[i]);
	for (int i = 0; s->have_in && i < s->p->nlinks; i++)
		free(s->have_in[i]);
	free(s->have_in);
	free(s->pfd);
	free(s->pend);
	free(s->listeners);
}

/* On failure: close whatever was placed, so the caller owns nothing. */
static void unplace_all(const struct mr_conn_plan *pl)
{
	for (int i = 0; i < pl->nlinks; i++) {
		for (unsigned l = 0; l < pl->links[i].ndata; l++)
			mr_close(&pl->links[i].data_fd[l]);
		mr_close(pl->links[i].ctl_fd);
	}
}

/* start -> (poll -> accept -> step every pending) until all lanes are up */
int mr_conn_setup(const struct mr_conn_plan *pl, struct meshrun_err *err)
{
	struct setup s = { .p = pl };
	int64_t deadline = mr_now_ms() + pl->timeout_ms;
	int rc;

	for (int i = 0; i < pl->nlinks; i++) {
		if (pl->links[i].outgoing)
			s.nout += pl->links[i].ndata + 1;
		else
			s.nin += pl->links[i].ndata + 1;
	}
	s.cap = s.nout + s.nin + MAX_PENDING_IN;
	rc = setup_start(&s, err);
	while (rc == 0 && (s.in_done < s.nin || s.out_done < s.nout)) {
		int timeout = mr_ms_left(deadline);
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
		rc = setup_check(&s, err);
	setup_release(&s);
	if (rc < 0)
		unplace_all(pl);
	return rc;
}
