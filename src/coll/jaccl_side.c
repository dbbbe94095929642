/*
 * jaccl_side.c - the JACCL backend's TCP side channel (a star around rank 0).
 *
 * Used to exchange queue-pair addresses (all-gather through rank 0), for the
 * barrier that separates "every QP is ready to receive" from the first send,
 * and, while collectives run, to spread a failure: a rank that fails sends an
 * abort to rank 0, which forwards it to everyone; a rank whose process dies
 * closes its socket, which rank 0 sees at once (and the others see when rank 0
 * dies). During setup a rank that fails (a device that does not exist) still
 * takes part in the all-gather, with an abort instead of its addresses; rank 0
 * reads every rank's contribution before it answers (closing a socket with
 * unread data would reset it and could lose the answer), then answers every
 * rank with the first failure, so each rank reports the real cause rather
 * than "Broken pipe". Sockets are blocking; every wait is a poll() against a
 * deadline and sends are bounded by SO_SNDTIMEO.
 */
#include "common/compat.h"
#include "coll/le.h"
#include "coll/accept.h"
#include "coll/env.h"
#include "coll/jaccl_types.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/timeutil.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

size_t mr_jaccl_blobs_encode(const struct mr_jaccl_blob *b, int n, unsigned char *buf)
{
	size_t off = 0;

	for (int i = 0; i < n; i++) {
		mr_put_le32(buf + off, (uint32_t)b[i].len);
		off += 4;
		if (b[i].len)
			memcpy(buf + off, b[i].data, b[i].len);
		off += b[i].len;
	}
	return off;
}

void mr_jaccl_blobs_free(struct mr_jaccl_blob *b, int n)
{
	if (!b)
		return;
	for (int i = 0; i < n; i++)
		free(b[i].data);
	free(b);
}

int mr_jaccl_blobs_decode(const unsigned char *buf, size_t len, int n, struct mr_jaccl_blob **out,
			  struct meshrun_err *err)
{
	struct mr_jaccl_blob *b = calloc((size_t)n, sizeof(*b));
	size_t off = 0;

	if (!b)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	for (int i = 0; i < n; i++) {
		if (len - off < 4) {
			mr_jaccl_blobs_free(b, n);
			return mr_err_set(err, MESHRUN_E_PROTO, "jaccl side channel: all-gather reply cut short at rank %d", i);
		}
		size_t bl = mr_get_le32(buf + off);
		off += 4;
		if (bl > MR_JACCL_MAX_BLOB || bl > len - off) {
			mr_jaccl_blobs_free(b, n);
			return mr_err_set(err, MESHRUN_E_PROTO, "jaccl side channel: rank %d's entry of %zu bytes overruns the all-gather reply", i, bl);
		}
		b[i].data = malloc(bl ? bl : 1);
		if (!b[i].data) {
			mr_jaccl_blobs_free(b, n);
			return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		}
		memcpy(b[i].data, buf + off, bl);
		b[i].len = bl;
		off += bl;
	}
	if (off != len) {
		mr_jaccl_blobs_free(b, n);
		return mr_err_set(err, MESHRUN_E_PROTO, "jaccl side channel: %zu stray bytes after the all-gather reply", len - off);
	}
	*out = b;
	return 0;
}

/* ------------------------------------------------------------------ I/O */

/* Read n bytes before the deadline; 0, MESHRUN_E_TIMEOUT, or MESHRUN_E_PEER on EOF/error. */
static int read_deadline(int fd, void *buf, size_t n, int64_t deadline, const char *who,
			 struct meshrun_err *err)
{
	unsigned char *p = buf;

	while (n) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int left = mr_ms_left(deadline);
		int rc = poll(&pfd, 1, left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return mr_err_sys(err, "jaccl side channel: poll");
		if (rc == 0)
			return mr_err_set(err, MESHRUN_E_TIMEOUT, "jaccl side channel: %s sent nothing for the timeout", who);
		ssize_t k = recv(fd, p, n, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k == 0)
			return mr_err_set(err, MESHRUN_E_PEER, "jaccl side channel: %s closed the connection", who);
		if (k < 0)
			return mr_err_errno(err, errno, MESHRUN_E_PEER, "jaccl side channel: recv from %s", who);
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t n, const char *who, struct meshrun_err *err)
{
	const unsigned char *p = buf;

	while (n) {
		ssize_t k = mr_send_nosig(fd, p, n, 0);
		if (k < 0)
			return mr_err_errno(err, errno, MESHRUN_E_PEER, "jaccl side channel: send to %s", who);
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int send_frame(int fd, unsigned type, uint32_t src, uint32_t dst, const void *data,
		      size_t len, const char *who, struct meshrun_err *err)
{
	unsigned char hdr[MR_FRAME_HDR];
	struct mr_frame_hdr f = { type, src, dst, len };

	mr_frame_encode(&f, hdr);
	int rc = write_all(fd, hdr, sizeof(hdr), who, err);
	if (rc == 0 && len)
		rc = write_all(fd, data, len, who, err);
	return rc;
}

int mr_jaccl_frame_check(const unsigned char *hdr, int size, size_t max, struct mr_frame_hdr *f,
			 struct meshrun_err *err)
{
	int rc = mr_frame_decode(hdr, (uint32_t)size, f, err);

	if (rc < 0)
		return rc;
	if (f->type == MR_FRAME_HB || f->len > max)
		return mr_err_set(err, MESHRUN_E_PROTO, "unexpected frame (type %u, %llu bytes)", f->type, (unsigned long long)f->len);
	return 0;
}

/* Read one frame; *data malloc'ed (len + 1 bytes, NUL-terminated). */
static int recv_frame(const struct mr_jaccl_side *s, int fd, struct mr_frame_hdr *f,
		      unsigned char **data, size_t max, int64_t deadline, const char *who,
		      struct meshrun_err *err)
{
	unsigned char hdr[MR_FRAME_HDR];
	int rc = read_deadline(fd, hdr, sizeof(hdr), deadline, who, err);

	*data = NULL;
	if (rc < 0)
		return rc;
	rc = mr_jaccl_frame_check(hdr, s->size, max, f, err);
	if (rc < 0) {
		mr_err_prefix(err, "jaccl side channel: from %s", who);
		return rc;
	}
	*data = malloc((size_t)f->len + 1);
	if (!*data)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	rc = read_deadline(fd, *data, (size_t)f->len, deadline, who, err);
	if (rc < 0) {
		MR_FREE(*data);
		return rc;
	}
	(*data)[f->len] = '\0';
	return 0;
}

/* ---------------------------------------------------------------- hello */

static void make_hello(const struct mr_jaccl_side *s, unsigned char *buf, size_t *len)
{
	*len = mr_accept_hello(buf, s->rank, s->size, MR_LANE_P2P, MR_JACCL_HELLO_TAG, s->token,
			       s->token_len);
}

static int read_hello(int fd, struct mr_hello *h, int64_t deadline, const char *who,
		      struct meshrun_err *err)
{
	unsigned char buf[MR_HELLO_MAX];
	int rc = read_deadline(fd, buf, MR_HELLO_FIXED, deadline, who, err);

	if (rc < 0)
		return rc;
	rc = mr_hello_decode(buf, MR_HELLO_FIXED, h, err);
	if (rc <= 0)
		return rc;
	size_t need = (size_t)rc;
	rc = read_deadline(fd, buf + MR_HELLO_FIXED, need - MR_HELLO_FIXED, deadline, who, err);
	if (rc < 0)
		return rc;
	return mr_hello_decode(buf, need, h, err);
}

int mr_jaccl_side_check_hello(const struct mr_jaccl_side *s, const struct mr_hello *h,
			      struct meshrun_err *err)
{
	int rc = mr_hello_check(h, h->rank, (uint32_t)s->size, MR_JACCL_HELLO_TAG, s->token,
				s->token_len, err);

	if (rc < 0)
		return rc;
	if (h->rank == 0 || h->rank >= (uint32_t)s->size)
		return mr_err_set(err, MESHRUN_E_PROTO, "rank %u out of range", h->rank);
	if (s->fd[h->rank] >= 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "rank %u connected twice", h->rank);
	return 0;
}

static void tune(int fd, int64_t timeout_ms)
{
	int one = 1;
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * Rank 0's connections that have not said their hello yet, served side by
 * side from one poll; what each may cost (a fixed buffer of MR_HELLO_MAX,
 * MR_ACCEPT_WAIT_MS, one of MR_ACCEPT_SLOTS slots, the oldest evicted for a
 * newcomer) is the accept gate's (accept.h).
 */
struct gate_conn {
	int fd;                          /* -1: free slot */
	struct mr_accept_stamp stamp;
	size_t have;
	unsigned char buf[MR_HELLO_MAX];
};

static enum mr_accept_use gate_use(void *ctx, size_t i, const struct mr_accept_stamp **st)
{
	struct gate_conn *g = ctx;

	*st = &g[i].stamp;
	return g[i].fd < 0 ? MR_ACCEPT_FREE : MR_ACCEPT_PENDING;
}

static void gate_refuse(struct gate_conn *c, const char *why, char *last, size_t cap)
{
	snprintf(last, cap, "%s", why);
	mr_close(&c->fd);
}

/* Read what is there of c's hello: 1 complete and valid (rank in *h), 0 more, -1 refused. */
static int gate_read(struct mr_jaccl_side *s, struct gate_conn *c, struct mr_hello *h,
		     struct meshrun_err *e)
{
	int rc = mr_hello_decode(c->buf, c->have, h, e);
	size_t want = rc > 0 ? (size_t)rc : MR_HELLO_FIXED;

	if (rc < 0)
		return -1;
	ssize_t k = recv(c->fd, c->buf + c->have, want - c->have, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (k <= 0) {
		mr_err_errno(e, k < 0 ? errno : ECONNRESET, MESHRUN_E_PEER, "a connection closed during its hello");
		return -1;
	}
	c->have += (size_t)k;
	rc = mr_hello_decode(c->buf, c->have, h, e);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return 0;
	return mr_jaccl_side_check_hello(s, h, e) < 0 ? -1 : 1;
}

static void answer_abort(struct mr_jaccl_side *s, const char *msg);

/* Rank 0: accept until every other rank said a valid hello. */
static int serve(struct mr_jaccl_side *s, const struct mr_ring_addr *a, int64_t deadline,
		 struct meshrun_err *err)
{
	int one = 1, lfd, rc = 0, have = 0;
	struct mr_accept_gate gate = { 0 };
	unsigned char out[MR_HELLO_MAX];
	size_t outlen;
	char last[MESHRUN_ERR_MSG_MAX] = "";
	struct gate_conn *g = calloc(MR_ACCEPT_SLOTS, sizeof(*g));
	struct pollfd pfd[MR_ACCEPT_SLOTS + 1];

	if (!g)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	for (int i = 0; i < MR_ACCEPT_SLOTS; i++)
		g[i].fd = -1;
	lfd = mr_socket(a->sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC);
	if (lfd < 0) {
		free(g);
		return mr_err_sys(err, "jaccl: socket for coordinator '%s'", a->text);
	}
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)&a->sa, a->salen) < 0 || listen(lfd, 128) < 0) {
		rc = mr_err_sys(err, "jaccl: listen on coordinator '%s' (rank 0 must own that address)", a->text);
		goto out;
	}
	make_hello(s, out, &outlen);
	while (have < s->size - 1) {
		int left = mr_ms_left(deadline);
		int64_t now = mr_now_ms();
		if (left == 0) {
			/* name who is missing (a rank stopped or slow before it
			 * connected), and tell the ranks that did connect, which
			 * would otherwise only see rank 0 go away */
			char miss[160] = "";
			size_t off = 0;
			for (int r = 1; r < s->size && off < sizeof(miss); r++)
				if (s->fd[r] < 0)
					off += (size_t)snprintf(miss + off, sizeof(miss) - off, "%s%d", off ? ", " : "", r);
			rc = mr_err_set(err, MESHRUN_E_TIMEOUT, "jaccl: rank 0: only %d of %d ranks connected to the coordinator '%s' within the timeout (missing: rank %s)%s%s", have + 1, s->size, a->text, miss, last[0] ? "; last refused: " : "", last);
			answer_abort(s, err->msg);
			goto out;
		}
		pfd[0] = (struct pollfd){ lfd, POLLIN, 0 };
		for (int i = 0; i < MR_ACCEPT_SLOTS; i++) {
			pfd[i + 1] = (struct pollfd){ g[i].fd, POLLIN, 0 };
			if (g[i].fd >= 0)
				left = mr_accept_poll_ms(&g[i].stamp, now, left);
		}
		if (poll(pfd, MR_ACCEPT_SLOTS + 1, left) < 0 && errno != EINTR) {
			rc = mr_err_sys(err, "jaccl: rank 0: poll on coordinator '%s'", a->text);
			goto out;
		}
		now = mr_now_ms();
		for (int i = 0; i < MR_ACCEPT_SLOTS; i++) {
			struct gate_conn *c = &g[i];
			struct mr_hello h;
			struct meshrun_err e = MESHRUN_ERR_INIT;
			if (c->fd < 0)
				continue;
			int st = pfd[i + 1].revents ? gate_read(s, c, &h, &e) : 0;
			if (st < 0) {
				gate_refuse(c, e.msg, last, sizeof(last));
			} else if (st > 0) {
				tune(c->fd, s->timeout_ms);
				if (write_all(c->fd, out, outlen, "a connecting rank", &e) < 0) {
					gate_refuse(c, e.msg, last, sizeof(last));
					continue;
				}
				s->fd[h.rank] = c->fd;
				c->fd = -1;
				have++;
			} else if (mr_accept_expired(&c->stamp, now)) {
				snprintf(e.msg, sizeof(e.msg), "a connection sent no complete hello within %d ms", MR_ACCEPT_WAIT_MS);
				gate_refuse(c, e.msg, last, sizeof(last));
			}
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		int fd = mr_accept(lfd, MR_SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		bool evict;
		size_t slot = mr_accept_pick(MR_ACCEPT_SLOTS, gate_use, g, &evict);
		if (evict)
			gate_refuse(&g[slot], MR_ACCEPT_EVICTED, last, sizeof(last));
		g[slot].fd = fd;
		mr_accept_admit(&gate, &g[slot].stamp, now);
		g[slot].have = 0;
	}
out:
	for (int i = 0; i < MR_ACCEPT_SLOTS; i++)
		mr_close(&g[i].fd);
	free(g);
	close(lfd);
	return rc;
}

static int join(struct mr_jaccl_side *s, const struct mr_ring_addr *a, int64_t deadline,
		struct meshrun_err *err)
{
	int backoff = 20, last_errno = 0;
	unsigned char out[MR_HELLO_MAX];
	size_t outlen;

	make_hello(s, out, &outlen);
	for (;;) {
		int fd = mr_socket(a->sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC);
		if (fd < 0)
			return mr_err_sys(err, "jaccl: socket");
		if (connect(fd, (const struct sockaddr *)&a->sa, a->salen) == 0) {
			struct mr_hello h;
			struct meshrun_err e = MESHRUN_ERR_INIT;
			tune(fd, s->timeout_ms);
			int rc = write_all(fd, out, outlen, "rank 0", &e);
			if (rc == 0)
				rc = read_hello(fd, &h, deadline, "rank 0 (the coordinator)", &e);
			if (rc == 0)
				rc = mr_hello_check(&h, 0, (uint32_t)s->size, MR_JACCL_HELLO_TAG, s->token, s->token_len, &e);
			if (rc == 0) {
				s->fd[0] = fd;
				return 0;
			}
			/* closed before the answer (rank 0 closed it as the oldest of
			 * many pending connections, or refused our hello): again */
			if (rc != MESHRUN_E_PEER || mr_ms_left(deadline) == 0) {
				close(fd);
				mr_err_set(err, e.code, "%s", e.msg);
				mr_err_prefix(err, "jaccl: rank %d: coordinator '%s'", s->rank, a->text);
				return rc;
			}
			errno = e.sys_errno ? e.sys_errno : ECONNRESET;
		}
		last_errno = errno;
		close(fd);
		if (mr_ms_left(deadline) == 0)
			return mr_err_errno(err, last_errno, MESHRUN_E_CONNECT, "jaccl: rank %d: connect to the coordinator '%s' (rank 0) failed until the timeout", s->rank, a->text);
		mr_sleep_ms(MR_MIN(backoff, mr_ms_left(deadline)));
		backoff = MR_MIN(backoff * 2, 500);
	}
}

int mr_jaccl_side_open(struct mr_jaccl_side *s, int rank, int size, const char *coordinator,
		       const char *token, size_t token_len, int64_t timeout_ms,
		       struct meshrun_err *err)
{
	struct mr_ring_addr a;
	int rc;

	memset(s, 0, sizeof(*s));
	s->rank = rank;
	s->size = size;
	s->timeout_ms = timeout_ms;
	s->token_len = MR_MIN(token_len, (size_t)MR_TOKEN_MAX);
	memcpy(s->token, token, s->token_len);
	rc = mr_ring_parse_addr(coordinator, &a, err);
	if (rc < 0) {
		mr_err_prefix(err, "jaccl: MLX_JACCL_COORDINATOR");
		return rc;
	}
	s->fd = malloc((size_t)size * sizeof(*s->fd));
	s->gone = calloc((size_t)size, sizeof(*s->gone));
	if (!s->fd || !s->gone) {
		mr_jaccl_side_close(s);
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	}
	for (int i = 0; i < size; i++)
		s->fd[i] = -1;
	int64_t deadline = mr_now_ms() + timeout_ms;
	rc = rank == 0 ? serve(s, &a, deadline, err) : join(s, &a, deadline, err);
	if (rc < 0)
		mr_jaccl_side_close(s);
	return rc;
}

static void watch_stop(struct mr_jaccl_side *s);

void mr_jaccl_side_close(struct mr_jaccl_side *s)
{
	watch_stop(s);
	if (s->fd)
		for (int i = 0; i < s->size; i++)
			mr_close(&s->fd[i]);
	MR_FREE(s->fd);
	MR_FREE(s->gone);
}

static const char *who(int r, char *buf, size_t n)
{
	snprintf(buf, n, "rank %d", r);
	return buf;
}

/* Rank 0 answers every other rank with an abort carrying msg (best effort). */
static void answer_abort(struct mr_jaccl_side *s, const char *msg)
{
	size_t len = MR_MIN(strlen(msg), (size_t)MR_FRAME_MAX_ABORT);
	char w[32];

	for (int r = 1; r < s->size; r++)
		if (s->fd[r] >= 0)
			(void)send_frame(s->fd[r], MR_FRAME_ABORT, 0, (uint32_t)r, msg, len,
					 who(r, w, sizeof(w)), NULL);
	s->aborted = true;
}

/* Rank 0's side of the all-gather; failure: this rank's own setup failure, or NULL. */
static int gather_root(struct mr_jaccl_side *s, const void *mine, size_t len, const char *failure,
		       struct mr_jaccl_blob **out, struct meshrun_err *err)
{
	int64_t deadline = mr_now_ms() + s->timeout_ms;
	struct mr_jaccl_blob *b = NULL;
	unsigned char *buf = NULL;
	const char *first = failure; /* the failure everyone is told about */
	struct meshrun_err local = MESHRUN_ERR_INIT;
	char w[32];
	int rc = 0;

	if (!err)
		err = &local;
	b = calloc((size_t)s->size, sizeof(*b));
	if (!b)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	b[0].data = malloc(len ? len : 1);
	if (!b[0].data) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		goto out;
	}
	if (len)
		memcpy(b[0].data, mine, len);
	b[0].len = len;
	size_t total = 4 + len;
	/* Read every rank's contribution, also after one reported a failure:
	 * closing a socket with unread data would reset it, and the abort
	 * queued for that rank could be lost with it. */
	for (int r = 1; r < s->size; r++) {
		struct mr_frame_hdr f;
		rc = recv_frame(s, s->fd[r], &f, &b[r].data, MR_JACCL_MAX_BLOB, deadline, who(r, w, sizeof(w)), err);
		if (rc < 0) {
			mr_err_prefix(err, "jaccl: rank 0: setup");
			answer_abort(s, err->msg);
			goto out;
		}
		if (f.type == MR_FRAME_ABORT && !first)
			first = (const char *)b[r].data;
		b[r].len = (size_t)f.len;
		total += 4 + b[r].len;
	}
	if (first) {
		rc = mr_err_set(err, MESHRUN_E_PEER, "%s", first);
		answer_abort(s, first);
		goto out;
	}
	buf = malloc(total);
	if (!buf) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		answer_abort(s, err->msg);
		goto out;
	}
	mr_jaccl_blobs_encode(b, s->size, buf);
	for (int r = 1; r < s->size && rc == 0; r++)
		rc = send_frame(s->fd[r], MR_FRAME_MSG, 0, (uint32_t)r, buf, total, who(r, w, sizeof(w)), err);
	if (rc == 0) {
		*out = b;
		b = NULL;
	}
out:
	free(buf);
	mr_jaccl_blobs_free(b, s->size);
	return rc;
}

/* Read rank 0's answer: the all-gather result, or the failure it tells us about. */
static int read_answer(struct mr_jaccl_side *s, int64_t deadline, struct mr_jaccl_blob **out,
		       struct meshrun_err *err)
{
	size_t max = (size_t)s->size * (4 + (size_t)MR_JACCL_MAX_BLOB);
	struct mr_frame_hdr f;
	unsigned char *buf = NULL;
	int rc = recv_frame(s, s->fd[0], &f, &buf, max, deadline, "rank 0", err);

	if (rc == 0 && f.type == MR_FRAME_ABORT) {
		s->aborted = true;
		rc = mr_err_set(err, MESHRUN_E_PEER, "%s", (char *)buf);
	} else if (rc == 0 && out) {
		rc = mr_jaccl_blobs_decode(buf, (size_t)f.len, s->size, out, err);
	}
	free(buf);
	return rc;
}

int mr_jaccl_side_allgather(struct mr_jaccl_side *s, const void *mine, size_t len,
			    struct mr_jaccl_blob **out, struct meshrun_err *err)
{
	if (len > MR_JACCL_MAX_BLOB)
		return mr_err_set(err, MESHRUN_E_INVAL, "jaccl: side-channel blob of %zu bytes is too large", len);
	if (s->rank == 0)
		return gather_root(s, mine, len, NULL, out, err);

	struct meshrun_err serr = MESHRUN_ERR_INIT;
	int rc = send_frame(s->fd[0], MR_FRAME_MSG, (uint32_t)s->rank, 0, mine, len, "rank 0", &serr);
	if (rc < 0) {
		/* rank 0 may have failed and left; its answer may still be queued */
		struct meshrun_err aerr = MESHRUN_ERR_INIT;
		if (read_answer(s, mr_now_ms() + 1000, NULL, &aerr) < 0 && s->aborted)
			return mr_err_set(err, aerr.code, "%s", aerr.msg);
		return mr_err_set(err, serr.code, "%s", serr.msg);
	}
	return read_answer(s, mr_now_ms() + s->timeout_ms, out, err);
}

void mr_jaccl_side_fail(struct mr_jaccl_side *s, const char *msg)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_jaccl_blob *b = NULL;

	if (!s->fd || s->aborted)
		return;
	if (s->rank == 0) {
		(void)gather_root(s, "", 0, msg, &b, &e);
		mr_jaccl_blobs_free(b, s->size);
		return;
	}
	(void)send_frame(s->fd[0], MR_FRAME_ABORT, (uint32_t)s->rank, 0, msg,
			 MR_MIN(strlen(msg), (size_t)MR_FRAME_MAX_ABORT), "rank 0", &e);
	s->aborted = true;
}

/* Send an abort to every other rank this one is connected to (caller holds mu when watching). */
static void abort_all(struct mr_jaccl_side *s, const char *msg, int except)
{
	unsigned char hdr[MR_FRAME_HDR];
	size_t len = MR_MIN(strlen(msg), (size_t)MR_FRAME_MAX_ABORT);

	for (int r = 0; r < s->size; r++) {
		if (s->fd[r] < 0 || r == except || atomic_load_explicit(&s->gone[r], memory_order_relaxed))
			continue;
		struct mr_frame_hdr f = { MR_FRAME_ABORT, (uint32_t)s->rank, (uint32_t)r, len };
		mr_frame_encode(&f, hdr);
		/* best effort and never blocking: the group is failing anyway */
		if (mr_send_nosig(s->fd[r], hdr, sizeof(hdr), MSG_DONTWAIT) == (ssize_t)sizeof(hdr))
			(void)mr_send_nosig(s->fd[r], msg, len, MSG_DONTWAIT);
	}
}

void mr_jaccl_side_abort(struct mr_jaccl_side *s, const char *msg)
{
	if (!s->fd)
		return;
	if (s->watching)
		pthread_mutex_lock(&s->mu);
	if (!s->aborted) {
		s->aborted = true;
		abort_all(s, msg, -1);
	}
	if (s->watching)
		pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------ watch mode */

/* Notices rank 0 and the others exchange in watch mode, as MR_FRAME_MSG. */
#define NOTE_LEFT 'L'   /* + u32 rank: that rank closed its side channel */
#define NOTE_STALL 'S'  /* + i32 peer + device name: waits on peer (-1: no more) */

static int hb_ms(const struct mr_jaccl_side *s)
{
	return (int)MR_MAX((int64_t)50, MR_MIN(s->timeout_ms / 8, (int64_t)1000));
}

static void wake_sleepers(struct mr_jaccl_side *s)
{
	char c = 1;
	ssize_t n = write(s->wake[1], &c, 1); /* a full pipe already wakes them */
	(void)n;
}

/* The group's failure, once; tell: pass it to every other rank (but except). */
static void set_verdict(struct mr_jaccl_side *s, const char *msg, bool tell, int except)
{
	pthread_mutex_lock(&s->mu);
	if (!s->verdict[0]) {
		snprintf(s->verdict, sizeof(s->verdict), "%s", msg);
		if (tell && !s->aborted) {
			s->aborted = true;
			abort_all(s, msg, except);
		}
	}
	pthread_mutex_unlock(&s->mu);
	wake_sleepers(s);
}

/* A notice to rank r (caller holds mu). */
static void send_note(struct mr_jaccl_side *s, int r, const unsigned char *note, size_t len)
{
	char w[32];

	(void)send_frame(s->fd[r], MR_FRAME_MSG, (uint32_t)s->rank, (uint32_t)r, note, len,
			 who(r, w, sizeof(w)), NULL);
}

/* Rank r's socket closed (or broke): it has left; rank 0 tells the others. */
static void left(struct mr_jaccl_side *s, int r)
{
	unsigned char note[5] = { NOTE_LEFT };

	pthread_mutex_lock(&s->mu);
	mr_close(&s->fd[r]);
	atomic_store_explicit(&s->gone[r], true, memory_order_release);
	mr_put_le32(note + 1, (uint32_t)r);
	for (int k = 1; s->rank == 0 && k < s->size; k++)
		if (s->fd[k] >= 0)
			send_note(s, k, note, sizeof(note));
	pthread_mutex_unlock(&s->mu);
	wake_sleepers(s);
}

/* Rank 0: two ranks that wait on each other name the cable between them. */
static void check_mutual(struct mr_jaccl_side *s)
{
	char msg[MESHRUN_ERR_MSG_MAX] = "";

	pthread_mutex_lock(&s->mu);
	for (int a = 0; a < s->size && !msg[0]; a++) {
		int b = s->stall[a].peer;
		if (b > a && b < s->size && s->stall[b].peer == a)
			snprintf(msg, sizeof(msg), "jaccl: rank %d (device '%s') and rank %d (device '%s') wait on each other while both still answer on the side channel: the cable between them is down or lost frames", a, s->stall[a].dev, b, s->stall[b].dev);
	}
	pthread_mutex_unlock(&s->mu);
	if (msg[0])
		set_verdict(s, msg, true, -1);
}

static void record_stall(struct mr_jaccl_side *s, int r, int peer, const char *dev, size_t len)
{
	pthread_mutex_lock(&s->mu);
	s->stall[r].peer = peer >= 0 && peer < s->size ? peer : -1;
	snprintf(s->stall[r].dev, sizeof(s->stall[r].dev), "%.*s", (int)MR_MIN(len, sizeof(s->stall[r].dev) - 1), dev);
	pthread_mutex_unlock(&s->mu);
}

/* Read one frame from rank r (readable) and act on it. */
static void watch_read(struct mr_jaccl_side *s, int r)
{
	unsigned char hdr[MR_FRAME_HDR], *data = NULL;
	struct mr_frame_hdr f;
	char w[32];
	int64_t deadline = mr_now_ms() + 500; /* a frame comes whole; this bounds watch_stop */
	int rc = read_deadline(s->fd[r], hdr, sizeof(hdr), deadline, who(r, w, sizeof(w)), NULL);

	if (rc == 0)
		rc = mr_frame_decode(hdr, (uint32_t)s->size, &f, NULL);
	if (rc == 0 && f.len > MR_FRAME_MAX_ABORT)
		rc = MESHRUN_E_PROTO;
	if (rc == 0 && !(data = malloc((size_t)f.len + 1)))
		return; /* try again on the next round */
	if (rc == 0)
		rc = read_deadline(s->fd[r], data, (size_t)f.len, deadline, w, NULL);
	if (rc < 0) {
		/* EOF, reset or garbage: that rank is gone for us */
		free(data);
		left(s, r);
		return;
	}
	data[f.len] = '\0';
	s->last_rx[r] = mr_now_ms();
	if (f.type == MR_FRAME_ABORT) {
		set_verdict(s, (const char *)data, s->rank == 0, r);
	} else if (f.type == MR_FRAME_MSG && f.len >= 5 && data[0] == NOTE_LEFT && s->rank != 0) {
		uint32_t k = mr_get_le32(data + 1);
		if (k < (uint32_t)s->size) {
			atomic_store_explicit(&s->gone[k], true, memory_order_release);
			wake_sleepers(s);
		}
	} else if (f.type == MR_FRAME_MSG && f.len >= 5 && data[0] == NOTE_STALL && s->rank == 0) {
		record_stall(s, r, (int)(int32_t)mr_get_le32(data + 1), (const char *)data + 5, (size_t)f.len - 5);
		check_mutual(s);
	}
	free(data);
}

/* Heartbeats to every rank this one talks to; a failed send is a departure. */
static void heartbeat(struct mr_jaccl_side *s)
{
	unsigned char hdr[MR_FRAME_HDR];

	for (int r = 0; r < s->size; r++) {
		bool broke = false;
		pthread_mutex_lock(&s->mu);
		if (s->fd[r] >= 0) {
			struct mr_frame_hdr f = { MR_FRAME_HB, (uint32_t)s->rank, (uint32_t)r, 0 };
			mr_frame_encode(&f, hdr);
			broke = write_all(s->fd[r], hdr, sizeof(hdr), "a peer", NULL) < 0;
		}
		pthread_mutex_unlock(&s->mu);
		if (broke)
			left(s, r);
	}
}

/* A rank this one talks to that sent nothing for half the timeout. */
static void check_silence(struct mr_jaccl_side *s, int64_t now)
{
	int64_t quiet = s->timeout_ms / 2;

	for (int r = 0; r < s->size; r++) {
		if (s->fd[r] < 0 || now - s->last_rx[r] <= quiet)
			continue;
		char msg[MESHRUN_ERR_MSG_MAX];
		snprintf(msg, sizeof(msg), "jaccl: rank %d: rank %d showed no sign of life for %lld ms (stopped, hung, or its host cut off from rank 0's side channel)", s->rank, r, (long long)(now - s->last_rx[r]));
		set_verdict(s, msg, true, r);
		return;
	}
}

static void *watch_main(void *arg)
{
	struct mr_jaccl_side *s = arg;
	struct pollfd *pfd = calloc((size_t)s->size + 1, sizeof(*pfd));
	int *rank_of = calloc((size_t)s->size + 1, sizeof(*rank_of));
	int64_t next_hb = mr_now_ms();

	if (!pfd || !rank_of) {
		set_verdict(s, "jaccl: the side channel's watcher is out of memory", true, -1);
		free(pfd);
		free(rank_of);
		return NULL;
	}
	for (;;) {
		int n = 0;
		pfd[n++] = (struct pollfd){ s->stop[0], POLLIN, 0 };
		for (int r = 0; r < s->size; r++) {
			if (s->fd[r] < 0)
				continue;
			rank_of[n] = r;
			pfd[n++] = (struct pollfd){ s->fd[r], POLLIN, 0 };
		}
		int rc = poll(pfd, (nfds_t)n, (int)MR_MAX(next_hb - mr_now_ms(), (int64_t)0));
		if (rc < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		for (int k = 1; rc > 0 && k < n; k++)
			if (pfd[k].revents && s->fd[rank_of[k]] >= 0)
				watch_read(s, rank_of[k]);
		int64_t now = mr_now_ms();
		if (now >= next_hb) {
			heartbeat(s);
			next_hb = now + hb_ms(s);
		}
		pthread_mutex_lock(&s->mu);
		bool settled = s->verdict[0] != '\0';
		pthread_mutex_unlock(&s->mu);
		if (!settled)
			check_silence(s, now);
	}
	free(pfd);
	free(rank_of);
	return NULL;
}

int mr_jaccl_side_watch(struct mr_jaccl_side *s, struct meshrun_err *err)
{
	int rc;

	s->last_rx = calloc((size_t)s->size, sizeof(*s->last_rx));
	s->stall = calloc((size_t)s->size, sizeof(*s->stall));
	if (!s->last_rx || !s->stall) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
		goto out_free;
	}
	for (int r = 0; r < s->size; r++) {
		s->last_rx[r] = mr_now_ms();
		s->stall[r].peer = -1;
	}
	if (mr_pipe_cloexec(s->stop) < 0) {
		rc = mr_err_sys(err, "jaccl: pipe");
		goto out_free;
	}
	if (mr_pipe_cloexec(s->wake) < 0) {
		rc = mr_err_sys(err, "jaccl: pipe");
		goto out_close_stop;
	}
	mr_set_nonblock(s->wake[0], true);
	mr_set_nonblock(s->wake[1], true);
	pthread_mutex_init(&s->mu, NULL);
	s->watching = true;
	rc = pthread_create(&s->thread, NULL, watch_main, s);
	if (rc == 0)
		return 0;
	s->watching = false;
	pthread_mutex_destroy(&s->mu);
	rc = mr_err_errno(err, rc, MESHRUN_E_SYS, "jaccl: pthread_create");
	mr_close(&s->wake[0]);
	mr_close(&s->wake[1]);
out_close_stop:
	mr_close(&s->stop[0]);
	mr_close(&s->stop[1]);
out_free:
	MR_FREE(s->last_rx);
	MR_FREE(s->stall);
	return rc;
}

static void watch_stop(struct mr_jaccl_side *s)
{
	char c = 1;

	if (!s->watching)
		return;
	if (write(s->stop[1], &c, 1) == 1)
		pthread_join(s->thread, NULL);
	s->watching = false;
	pthread_mutex_destroy(&s->mu);
	mr_close(&s->stop[0]);
	mr_close(&s->stop[1]);
	mr_close(&s->wake[0]);
	mr_close(&s->wake[1]);
	MR_FREE(s->last_rx);
	MR_FREE(s->stall);
}

int mr_jaccl_side_failed(struct mr_jaccl_side *s, struct meshrun_err *err)
{
	int rc = 0;

	if (!s->watching)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (s->verdict[0])
		rc = mr_err_set(err, MESHRUN_E_PEER, "%s", s->verdict);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

bool mr_jaccl_side_gone(const struct mr_jaccl_side *s, int r)
{
	return atomic_load_explicit(&s->gone[r], memory_order_acquire);
}

int mr_jaccl_side_wake_fd(const struct mr_jaccl_side *s)
{
	return s->watching ? s->wake[0] : -1;
}

void mr_jaccl_side_stall(struct mr_jaccl_side *s, int peer, const char *dev)
{
	unsigned char note[5 + MR_JACCL_DEVNAME_MAX] = { NOTE_STALL };
	size_t len = strlen(dev);

	if (!s->watching)
		return;
	if (s->rank == 0) {
		record_stall(s, 0, peer, dev, len);
		check_mutual(s);
		return;
	}
	len = MR_MIN(len, (size_t)MR_JACCL_DEVNAME_MAX - 1);
	mr_put_le32(note + 1, (uint32_t)peer);
	memcpy(note + 5, dev, len);
	pthread_mutex_lock(&s->mu);
	if (s->fd[0] >= 0)
		send_note(s, 0, note, 5 + len);
	pthread_mutex_unlock(&s->mu);
}
