#include "common/compat.h"
#include "common/envmap.h"
#include "coll/accept.h"
#include "coll/env.h"
#include "coll/le.h"
#include "coll/nccl_boot.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/num.h"
#include "common/timeutil.h"

#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long one connection may take to send its request or answer. */
#define CONN_STEP_MS 5000

int mr_nccl_boot_from_env(struct mr_nccl_boot *b, struct meshrun_err *err)
{
	static const char *const need[] = { MR_ENV(NCCL_HOST_IP), MR_ENV(NCCL_PORT), MR_ENV(MLX_RANK),
					     MR_ENV(MLX_WORLD_SIZE) };
	const char *val[ARRAY_SIZE(need)];
	char missing[128] = "";
	int nmissing = 0;

	memset(b, 0, sizeof(*b));
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		val[i] = getenv(need[i]);
		if (val[i] && *val[i])
			continue;
		size_t len = strlen(missing);
		snprintf(missing + len, sizeof(missing) - len, "%s%s", nmissing ? ", " : "", need[i]);
		nmissing++;
	}
	if (nmissing)
		return mr_err_set(err, MESHRUN_E_BACKEND, "nccl: missing environment variable%s %s", nmissing > 1 ? "s" : "", missing);

	if (strlen(val[0]) >= sizeof(b->host))
		return mr_err_set(err, MESHRUN_E_PARSE, "nccl: NCCL_HOST_IP is longer than %zu bytes", sizeof(b->host) - 1);
	memcpy(b->host, val[0], strlen(val[0]) + 1);
	int port;
	if (mr_parse_int(val[1], 1, 65535, &port) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "nccl: environment variable NCCL_PORT='%s': expected a port number 1..65535", val[1]);
	b->port = (unsigned)port;
	if (mr_parse_int(val[3], 1, 1 << 20, &b->size) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "nccl: environment variable MLX_WORLD_SIZE='%s': expected an integer in 1..%d", val[3], 1 << 20);
	if (mr_parse_int(val[2], 0, b->size - 1, &b->rank) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "nccl: environment variable MLX_RANK='%s': expected an integer in 0..%d (MLX_WORLD_SIZE=%d)", val[2], b->size - 1, b->size);

	b->timeout_ms = MR_NCCL_DEFAULT_TIMEOUT_MS;
	const char *t = getenv(MR_ENV(MLX_NCCL_TIMEOUT));
	if (t && *t && mr_parse_i64(t, 1, INT64_C(7) * 24 * 3600 * 1000, &b->timeout_ms) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "nccl: environment variable MLX_NCCL_TIMEOUT='%s': expected milliseconds, e.g. 300000", t);

	return mr_env_job_token("nccl", b->token, sizeof(b->token), &b->token_len, err);
}

size_t mr_nccl_boot_req_encode(unsigned char *buf, int rank, int size, const char *token,
			       size_t token_len)
{
	memcpy(buf, MR_NCCL_BOOT_MAGIC, 4);
	mr_put_le16(buf + 4, MR_NCCL_BOOT_VERSION);
	mr_put_le16(buf + 6, (unsigned)token_len);
	mr_put_le32(buf + 8, (uint32_t)rank);
	mr_put_le32(buf + 12, (uint32_t)size);
	memcpy(buf + MR_NCCL_BOOT_REQ_FIXED, token, token_len);
	return MR_NCCL_BOOT_REQ_FIXED + token_len;
}

int mr_nccl_boot_req_decode(const unsigned char *buf, size_t len, int *rank, int *size,
			    const unsigned char **token, size_t *token_len, struct meshrun_err *err)
{
	if (len >= 4 && memcmp(buf, MR_NCCL_BOOT_MAGIC, 4) != 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "not a meshrun nccl bootstrap request (bad magic)");
	if (len < MR_NCCL_BOOT_REQ_FIXED)
		return MR_NCCL_BOOT_REQ_FIXED;
	if (mr_get_le16(buf + 4) != MR_NCCL_BOOT_VERSION)
		return mr_err_set(err, MESHRUN_E_PROTO, "bootstrap protocol version %u, expected %d", mr_get_le16(buf + 4), MR_NCCL_BOOT_VERSION);
	size_t tlen = mr_get_le16(buf + 6);
	if (tlen > MR_NCCL_BOOT_TOKEN_MAX)
		return mr_err_set(err, MESHRUN_E_PROTO, "job token of %zu bytes (at most %d)", tlen, MR_NCCL_BOOT_TOKEN_MAX);
	uint32_t r = mr_get_le32(buf + 8), s = mr_get_le32(buf + 12);
	if (r > INT32_MAX || s > INT32_MAX)
		return mr_err_set(err, MESHRUN_E_PROTO, "rank %" PRIu32 " / size %" PRIu32 " out of range", r, s);
	if (len < MR_NCCL_BOOT_REQ_FIXED + tlen)
		return (int)(MR_NCCL_BOOT_REQ_FIXED + tlen);
	*rank = (int)r;
	*size = (int)s;
	*token = buf + MR_NCCL_BOOT_REQ_FIXED;
	*token_len = tlen;
	return 0;
}

/* "host:port", or "[v6]:port". */
static void addr_text(const struct mr_nccl_boot *b, char *out, size_t cap)
{
	if (strchr(b->host, ':'))
		snprintf(out, cap, "[%s]:%u", b->host, b->port);
	else
		snprintf(out, cap, "%s:%u", b->host, b->port);
}

static int resolve(const struct mr_nccl_boot *b, const char *addr, struct sockaddr_storage *sa,
		   socklen_t *salen, struct meshrun_err *err)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8];

	snprintf(port, sizeof(port), "%u", b->port);
	int rc = getaddrinfo(b->host, port, &hints, &res);
	if (rc != 0)
		return mr_err_set(err, MESHRUN_E_CONNECT, "nccl: resolve NCCL_HOST_IP '%s': %s", addr, gai_strerror(rc));
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*salen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Wait for events on fd until the deadline: 1 ready, 0 not yet (a signal:
 * call again), or -1 with errno (ETIMEDOUT once the deadline has passed). */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int left = mr_ms_left(deadline);

	if (left == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	int n = poll(&p, 1, left);
	if (n < 0 && errno != EINTR)
		return -1;
	return n > 0;
}

/* Read exactly n bytes from a non-blocking fd before the deadline: 0, or -1
 * with errno (ETIMEDOUT on the deadline, ECONNRESET on end of stream). */
static int read_until(int fd, void *buf, size_t n, int64_t deadline)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = mr_read_some(fd, (char *)buf + got, n - got);
		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (k == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if ((errno != EAGAIN && errno != EWOULDBLOCK) || wait_fd(fd, POLLIN, deadline) < 0)
			return -1;
	}
	return 0;
}

static int write_until(int fd, const void *buf, size_t n, int64_t deadline)
{
	size_t put = 0;

	while (put < n) {
		ssize_t k = mr_write_some(fd, (const char *)buf + put, n - put);
		if (k > 0) {
			put += (size_t)k;
			continue;
		}
		if ((k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || wait_fd(fd, POLLOUT, deadline) < 0)
			return -1;
	}
	return 0;
}

static int64_t step_deadline(int64_t deadline)
{
	return MR_MIN(deadline, mr_now_ms() + CONN_STEP_MS);
}

unsigned mr_nccl_boot_judge(const struct mr_nccl_boot *b, const bool *served, int rank, int size,
			    const unsigned char *token, size_t token_len)
{
	if (!mr_accept_token_equal(token, token_len, b->token, b->token_len))
		return MR_NCCL_BOOT_BAD_TOKEN;
	if (size != b->size)
		return MR_NCCL_BOOT_BAD_SIZE;
	if (rank < 1 || rank >= size)
		return MR_NCCL_BOOT_BAD_RANK;
	if (served[rank])
		return MR_NCCL_BOOT_DUP_RANK;
	return MR_NCCL_BOOT_OK;
}

int mr_nccl_boot_reply_decode(const unsigned char *hdr, unsigned *status, struct meshrun_err *err)
{
	if (memcmp(hdr, MR_NCCL_BOOT_MAGIC, 4) != 0 || mr_get_le16(hdr + 4) != MR_NCCL_BOOT_VERSION)
		return mr_err_set(err, MESHRUN_E_PROTO, "not a meshrun nccl bootstrap server (bad answer header)");
	*status = mr_get_le16(hdr + 6);
	if (*status == MR_NCCL_BOOT_OK && mr_get_le32(hdr + 8) != MR_NCCL_ID_BYTES)
		return mr_err_set(err, MESHRUN_E_PROTO, "an id of %" PRIu32 " bytes, expected %d", mr_get_le32(hdr + 8), MR_NCCL_ID_BYTES);
	return 0;
}

/*
 * Rank 0's connections that have not sent a whole request yet, served side by
 * side from one poll; what each may cost (one fixed buffer, MR_ACCEPT_WAIT_MS,
 * one of MR_ACCEPT_SLOTS slots, the oldest evicted for a newcomer) is the
 * accept gate's (accept.h).
 */
struct pending {
	int fd;                 /* -1: free slot */
	struct mr_accept_stamp stamp;
	size_t have, need;
	unsigned char req[MR_NCCL_BOOT_REQ_FIXED + MR_NCCL_BOOT_TOKEN_MAX];
};

struct serve_state {
	const struct mr_nccl_boot *b;
	const unsigned char *id;
	bool *served;		/* size entries */
	int left;		/* ranks still to serve */
	int refused;		/* connections refused so far */
	char last_refusal[160];
	struct mr_accept_gate gate; /* connections accepted so far */
	struct pending pend[MR_ACCEPT_SLOTS];
};

static enum mr_accept_use pending_use(void *ctx, size_t i, const struct mr_accept_stamp **st)
{
	struct serve_state *ss = ctx;

	*st = &ss->pend[i].stamp;
	return ss->pend[i].fd < 0 ? MR_ACCEPT_FREE : MR_ACCEPT_PENDING;
}

static void refuse(struct serve_state *st, struct pending *p, const char *why)
{
	snprintf(st->last_refusal, sizeof(st->last_refusal), "%.150s", why);
	st->refused++;
	mr_close(&p->fd);
}

/* The whole request of p is in: answer it and close the connection. */
static void answer(struct serve_state *st, struct pending *p, int rank, int size,
		   const unsigned char *token, size_t token_len)
{
	unsigned char reply[MR_NCCL_BOOT_REPLY_FIXED + MR_NCCL_ID_BYTES];
	unsigned status = mr_nccl_boot_judge(st->b, st->served, rank, size, token, token_len);
	char why[160];

	memcpy(reply, MR_NCCL_BOOT_MAGIC, 4);
	mr_put_le16(reply + 4, MR_NCCL_BOOT_VERSION);
	mr_put_le16(reply + 6, status);
	mr_put_le32(reply + 8, status == MR_NCCL_BOOT_OK ? MR_NCCL_ID_BYTES : 0);
	size_t n = MR_NCCL_BOOT_REPLY_FIXED;
	if (status == MR_NCCL_BOOT_OK) {
		memcpy(reply + n, st->id, MR_NCCL_ID_BYTES);
		n += MR_NCCL_ID_BYTES;
	}
	/* 140 bytes into a fresh connection: the deadline only guards a full buffer */
	if (write_until(p->fd, reply, n, mr_now_ms() + MR_ACCEPT_WAIT_MS) < 0) {
		snprintf(why, sizeof(why), "answer to rank %d: %s", rank, strerror(errno));
		refuse(st, p, why);
		return;
	}
	if (status != MR_NCCL_BOOT_OK) {
		snprintf(why, sizeof(why), "refused a request claiming rank %d of %d (status %u)", rank, size, status);
		refuse(st, p, why);
		return;
	}
	st->served[rank] = true;
	st->left--;
	mr_close(&p->fd);
}

/* p is readable: read what is there of its request, answer it once whole. */
static void serve_conn(struct serve_state *st, struct pending *p)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	const unsigned char *token = NULL;
	size_t token_len = 0;
	int rank = -1, size = -1;
	char why[160];

	for (;;) {
		ssize_t k = mr_read_some(p->fd, p->req + p->have, p->need - p->have);
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			snprintf(why, sizeof(why), "a connection sent no complete request: %s", k < 0 ? strerror(errno) : "closed");
			refuse(st, p, why);
			return;
		}
		p->have += (size_t)k;
		if (p->have < p->need)
			continue;
		int rc = mr_nccl_boot_req_decode(p->req, p->have, &rank, &size, &token, &token_len, &e);
		if (rc < 0) {
			refuse(st, p, e.msg);
			return;
		}
		if (rc == 0)
			break;
		p->need = (size_t)rc;
	}
	answer(st, p, rank, size, token, token_len);
}

/* Accept one connection into a free slot, closing the oldest pending one when none is. */
static void serve_accept(struct serve_state *st, int lfd, int64_t now)
{
	int fd = mr_accept(lfd, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	bool evict;

	if (fd < 0)
		return;
	size_t slot = mr_accept_pick(MR_ACCEPT_SLOTS, pending_use, st, &evict);
	if (evict)
		refuse(st, &st->pend[slot], MR_ACCEPT_EVICTED);
	st->pend[slot].fd = fd;
	mr_accept_admit(&st->gate, &st->pend[slot].stamp, now);
	st->pend[slot].have = 0;
	st->pend[slot].need = MR_NCCL_BOOT_REQ_FIXED;
}

static int serve(const struct mr_nccl_boot *b, const char *addr, const unsigned char *id,
		 struct meshrun_err *err)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	int one = 1, rc;
	int64_t start = mr_now_ms(), deadline = start + b->timeout_ms;

	if (b->size == 1)
		return 0;
	if ((rc = resolve(b, addr, &sa, &salen, err)) < 0)
		return rc;
	int lfd = mr_socket(sa.ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	if (lfd < 0)
		return mr_err_sys(err, "nccl: socket for '%s'", addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, salen) < 0) {
		rc = mr_err_sys(err, "nccl: rank 0: bind '%s' (NCCL_HOST_IP, NCCL_PORT)", addr);
		goto out_close;
	}
	/* room in the accept queue beyond the job's ranks: with a backlog of just
	 * size, a burst of stray connections fills it and the ranks' SYNs are
	 * dropped, each costing them a 1 s, then 3 s retransmit */
	if (listen(lfd, b->size + 2 * MR_ACCEPT_SLOTS) < 0) {
		rc = mr_err_sys(err, "nccl: rank 0: listen on '%s'", addr);
		goto out_close;
	}
	bool *served = calloc((size_t)b->size, sizeof(*served));
	if (!served) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "nccl: out of memory");
		goto out_close;
	}
	struct serve_state *st = calloc(1, sizeof(*st)); /* 9 KiB of slots: not on the stack */
	if (!st) {
		free(served);
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "nccl: out of memory");
		goto out_close;
	}
	st->b = b;
	st->id = id;
	st->served = served;
	st->left = b->size - 1;
	for (int i = 0; i < MR_ACCEPT_SLOTS; i++)
		st->pend[i].fd = -1;
	rc = 0;
	while (st->left > 0) {
		int left = mr_ms_left(deadline);
		int64_t now = mr_now_ms();
		struct pollfd p[MR_ACCEPT_SLOTS + 1];
		if (left == 0)
			break;
		p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < MR_ACCEPT_SLOTS; i++) {
			p[i + 1] = (struct pollfd){ .fd = st->pend[i].fd, .events = POLLIN };
			if (st->pend[i].fd >= 0)
				left = mr_accept_poll_ms(&st->pend[i].stamp, now, left);
		}
		if (poll(p, MR_ACCEPT_SLOTS + 1, left) < 0) {
			if (errno == EINTR)
				continue;
			rc = mr_err_sys(err, "nccl: rank 0: poll on '%s'", addr);
			break;
		}
		now = mr_now_ms();
		for (int i = 0; i < MR_ACCEPT_SLOTS; i++) {
			struct pending *pc = &st->pend[i];
			if (pc->fd < 0)
				continue;
			if (p[i + 1].revents)
				serve_conn(st, pc);
			if (pc->fd >= 0 && mr_accept_expired(&pc->stamp, now)) {
				char why[96];
				snprintf(why, sizeof(why), "a connection sent no complete request within %d ms", MR_ACCEPT_WAIT_MS);
				refuse(st, pc, why);
			}
		}
		if (p[0].revents & POLLIN)
			serve_accept(st, lfd, now);
	}
	if (rc == 0 && st->left > 0) {
		char ranks[256] = "";
		size_t len = 0;
		for (int r = 1; r < b->size && len + 16 < sizeof(ranks); r++)
			if (!served[r])
				len += (size_t)snprintf(ranks + len, sizeof(ranks) - len, "%s%d", len ? ", " : "", r);
		rc = mr_err_set(err, MESHRUN_E_TIMEOUT, "nccl: rank 0 serving the NCCL id on '%s': timed out after %lld ms, %d rank%s never fetched it: %s%s%s%s", addr,
				(long long)b->timeout_ms, st->left, st->left > 1 ? "s" : "", ranks,
				st->refused ? " (refused connections: " : "", st->refused ? st->last_refusal : "", st->refused ? ")" : "");
	}
	for (int i = 0; i < MR_ACCEPT_SLOTS; i++)
		mr_close(&st->pend[i].fd);
	free(st);
	free(served);
out_close:
	mr_close(&lfd);
	return rc;
}

/* Connect before the deadline: a connected non-blocking fd, or -1 with errno. */
static int connect_until(const struct sockaddr_storage *sa, socklen_t salen, int64_t deadline)
{
	int fd = mr_socket(sa->ss_family, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, salen) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EINTR)
		goto fail;
	for (;;) {
		int n = wait_fd(fd, POLLOUT, deadline);
		if (n < 0)
			goto fail;
		if (n > 0)
			break;
	}
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		goto fail;
	if (soerr) {
		errno = soerr;
		goto fail;
	}
	return fd;
fail:
	mr_close(&fd);
	return -1;
}

static const char *status_text(unsigned status)
{
	switch (status) {
	case MR_NCCL_BOOT_BAD_TOKEN: return "the job token does not match (MESHRUN_JOB_TOKEN: a rank of another job?)";
	case MR_NCCL_BOOT_BAD_SIZE: return "the world size differs from rank 0's (MLX_WORLD_SIZE)";
	case MR_NCCL_BOOT_BAD_RANK: return "this rank is not in rank 0's world (MLX_RANK)";
	case MR_NCCL_BOOT_DUP_RANK: return "another process already fetched the id as this rank (MLX_RANK)";
	}
	return "unknown refusal";
}

/*
 * One attempt: 1 on a retryable failure (errno set: rank 0 not there yet, or
 * the connection dropped), 0 with the id, or a negative code (refusal,
 * garbage answer).
 */
static int fetch_once(const struct mr_nccl_boot *b, const char *addr,
		      const struct sockaddr_storage *sa, socklen_t salen, unsigned char *id,
		      int64_t deadline, struct meshrun_err *err)
{
	unsigned char req[MR_NCCL_BOOT_REQ_FIXED + MR_NCCL_BOOT_TOKEN_MAX];
	unsigned char hdr[MR_NCCL_BOOT_REPLY_FIXED];
	int rc = 1;
	int fd = connect_until(sa, salen, step_deadline(deadline));

	if (fd < 0)
		return 1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	size_t n = mr_nccl_boot_req_encode(req, b->rank, b->size, b->token, b->token_len);
	int64_t dl = step_deadline(deadline);
	if (write_until(fd, req, n, dl) < 0 || read_until(fd, hdr, sizeof(hdr), dl) < 0)
		goto out; /* retryable: errno says why */
	unsigned status = MR_NCCL_BOOT_OK;
	rc = mr_nccl_boot_reply_decode(hdr, &status, err);
	if (rc < 0) {
		mr_err_prefix(err, "nccl: rank %d: '%s'", b->rank, addr);
		goto out;
	}
	if (status != MR_NCCL_BOOT_OK) {
		rc = mr_err_set(err, status == MR_NCCL_BOOT_BAD_TOKEN ? MESHRUN_E_AUTH : MESHRUN_E_PROTO,
				"nccl: rank %d: rank 0 at '%s' refused the id request: %s", b->rank, addr, status_text(status));
		goto out;
	}
	rc = 1; /* a connection dropped while the id comes: retryable */
	if (read_until(fd, id, MR_NCCL_ID_BYTES, dl) < 0)
		goto out;
	rc = 0;
out:
	mr_close(&fd);
	return rc;
}

static int fetch(const struct mr_nccl_boot *b, const char *addr, unsigned char *id,
		 struct meshrun_err *err)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	int64_t deadline = mr_now_ms() + b->timeout_ms, backoff = 50;
	int rc = resolve(b, addr, &sa, &salen, err);

	if (rc < 0)
		return rc;
	/* The cause reported at the timeout: the last error that is not the
	 * deadline itself cutting an attempt short ("Connection refused"). */
	int cause = 0;
	for (;;) {
		errno = 0;
		rc = fetch_once(b, addr, &sa, salen, id, deadline, err);
		if (rc <= 0)
			return rc;
		if (errno && (errno != ETIMEDOUT || !cause))
			cause = errno;
		int left = mr_ms_left(deadline);
		if (left == 0)
			return mr_err_set(err, MESHRUN_E_TIMEOUT, "nccl: rank %d: no NCCL id from rank 0 at '%s' (NCCL_HOST_IP:NCCL_PORT) within %lld ms (MLX_NCCL_TIMEOUT): %s",
					  b->rank, addr, (long long)b->timeout_ms, cause ? strerror(cause) : "no answer");
		mr_sleep_ms(MR_MIN((int64_t)left, backoff));
		backoff = MR_MIN(backoff * 2, (int64_t)1000);
	}
}

int mr_nccl_boot_exchange(const struct mr_nccl_boot *b, unsigned char id[MR_NCCL_ID_BYTES],
			  struct meshrun_err *err)
{
	char addr[300];

	addr_text(b, addr, sizeof(addr));
	return b->rank == 0 ? serve(b, addr, id, err) : fetch(b, addr, id, err);
}
