/*
 * bench-tcp-raw - raw TCP throughput over the ring's own links, both
 * directions at once: the bound a ring all-reduce can reach.
 *
 * Launched like a libmeshrun rank (MLX_RANK + MLX_HOSTFILE, the same file and
 * addresses the ring uses). Rank r listens on its first address, connects to
 * its right neighbour's and accepts its left neighbour, so exactly the links
 * the ring uses carry the bytes. For a buffer of S bytes every rank sends
 * B = S * 2(n-1)/n bytes, half to each neighbour, and receives as much, all
 * at once from one poll loop over non-blocking sockets with the settings
 * libmeshrun's ring gives its data connections (TCP_NODELAY; --cc, default
 * reno, "system" keeps the namespace's default; --sndbuf, default 512K,
 * "system" for autotuning)
 * - the bytes a ring all-reduce of S must move, without the
 * reductions or the step structure. Rows (bench_common.h) name "tcp-raw"; the
 * driver's busbw of a row, S/t * 2(n-1)/n = B/t, is the per-rank TCP
 * throughput when every rank sends and receives at once, i.e. the busbw
 * bound (on a machine with fewer cores than ranks it is the aggregate TCP
 * throughput divided by n).
 */
#include "common/compat.h"
#include "bench_common.h"
#include "coll/env.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/timeutil.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define SETUP_TIMEOUT_MS 30000
#define IO_TIMEOUT_MS 30000

struct opts {
	const char *sizes;
	const char *label;
	const char *cc;
	const char *sndbuf;
	int repeats;
};

struct link {
	int fd;
	size_t soff, roff;
	unsigned char *sbuf, *rbuf;
};

static int die(const char *what, int rank)
{
	fprintf(stderr, "bench-tcp-raw: rank %d: %s: %s\n", rank, what, strerror(errno));
	return -1;
}

static void tune(int fd, const char *cc, int sndbuf)
{
	int one = 1;

	if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		fprintf(stderr, "bench-tcp-raw: send buffer %d: %s (keeping the kernel's autotuning)\n", sndbuf, strerror(errno));

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (strcmp(cc, "system") != 0 &&
	    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0)
		fprintf(stderr, "bench-tcp-raw: TCP congestion control '%s': %s (keeping the system's)\n", cc, strerror(errno));
}

/* Listen on me, connect to right, accept left; both fds blocking, NODELAY, cc, sndbuf. */
static int setup(const struct mr_ring_hosts *h, int rank, const char *cc, int sndbuf, int *lfd,
		 int *rfd)
{
	const struct mr_ring_addr *me = MR_RING_ADDR(h, rank, 0);
	const struct mr_ring_addr *right = MR_RING_ADDR(h, (rank + 1) % h->nranks, 0);
	int one = 1, ls = socket(me->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int64_t deadline = mr_now_ms() + SETUP_TIMEOUT_MS;

	if (ls < 0)
		return die("socket", rank);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (const struct sockaddr *)&me->sa, me->salen) < 0 || listen(ls, 4) < 0) {
		close(ls);
		fprintf(stderr, "bench-tcp-raw: rank %d: listen on '%s': %s\n", rank, me->text, strerror(errno));
		return -1;
	}
	for (;;) {
		*rfd = socket(right->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (*rfd < 0) {
			die("socket", rank);
			close(ls);
			return -1;
		}
		if (connect(*rfd, (const struct sockaddr *)&right->sa, right->salen) == 0)
			break;
		mr_close(rfd);
		if (mr_now_ms() > deadline) {
			fprintf(stderr, "bench-tcp-raw: rank %d: connect to '%s': %s\n", rank, right->text, strerror(errno));
			close(ls);
			return -1;
		}
		mr_sleep_ms(20);
	}
	struct pollfd p = { .fd = ls, .events = POLLIN };
	if (poll(&p, 1, SETUP_TIMEOUT_MS) != 1 || (*lfd = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		fprintf(stderr, "bench-tcp-raw: rank %d: no connection from the left neighbour within %d ms\n", rank, SETUP_TIMEOUT_MS);
		close(ls);
		mr_close(rfd);
		return -1;
	}
	close(ls);
	tune(*lfd, cc, sndbuf);
	tune(*rfd, cc, sndbuf);
	return 0;
}

/* A ring barrier: n-1 times a byte to the right, a byte from the left. */
static int barrier(int lfd, int rfd, int n, int rank)
{
	char c = 0;

	for (int i = 0; i < n - 1; i++) {
		if (mr_write_full(rfd, &c, 1) < 0 || mr_read_full(lfd, &c, 1) != 1)
			return die("barrier", rank);
	}
	return 0;
}

/*
 * Send half bytes on each link and receive half from each, all at once: each
 * round of the loop moves what the sockets take and hold (until EAGAIN) on
 * both links, then waits in poll for the ones not done - the same I/O pattern
 * as libmeshrun's ring, so the bound is not loosened by extra poll rounds.
 */
static int exchange(struct link lk[2], size_t half, int rank)
{
	for (int i = 0; i < 2; i++)
		lk[i].soff = lk[i].roff = 0;
	for (;;) {
		struct pollfd p[2];
		bool busy = false;
		for (int i = 0; i < 2; i++) {
			while (lk[i].roff < half) {
				ssize_t r = recv(lk[i].fd, lk[i].rbuf + lk[i].roff, half - lk[i].roff, MSG_DONTWAIT);
				if (r == 0) {
					errno = ECONNRESET;
					return die("recv", rank);
				}
				if (r < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
						break;
					return die("recv", rank);
				}
				lk[i].roff += (size_t)r;
			}
			while (lk[i].soff < half) {
				ssize_t s = send(lk[i].fd, lk[i].sbuf + lk[i].soff, half - lk[i].soff, MSG_DONTWAIT | MSG_NOSIGNAL);
				if (s < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
						break;
					return die("send", rank);
				}
				lk[i].soff += (size_t)s;
			}
		}
		for (int i = 0; i < 2; i++) {
			p[i].fd = lk[i].fd;
			p[i].events = (short)((lk[i].soff < half ? POLLOUT : 0) | (lk[i].roff < half ? POLLIN : 0));
			p[i].revents = 0;
			busy = busy || p[i].events;
		}
		if (!busy)
			return 0;
		int k = poll(p, 2, IO_TIMEOUT_MS);
		if (k == 0) {
			errno = ETIMEDOUT;
			return die("exchange", rank);
		}
		if (k < 0 && errno != EINTR)
			return die("poll", rank);
	}
}

static int run(const struct opts *o, const struct bench_sizes *sz, int rank, int n, int lfd, int rfd)
{
	size_t maxb = 0;
	int rc = -1;

	for (size_t i = 0; i < sz->n; i++)
		maxb = MR_MAX(maxb, sz->bytes[i]);
	size_t maxhalf = maxb / (size_t)n * (size_t)(n - 1) + 1;
	/* each link sends its own bytes, as an all-reduce does: one buffer sent
	 * on both links would be read from memory once and from cache once */
	struct link lk[2] = { { .fd = lfd, .sbuf = malloc(maxhalf), .rbuf = malloc(maxhalf) },
			      { .fd = rfd, .sbuf = malloc(maxhalf), .rbuf = malloc(maxhalf) } };
	if (!lk[0].sbuf || !lk[1].sbuf || !lk[0].rbuf || !lk[1].rbuf) {
		fprintf(stderr, "bench-tcp-raw: out of memory\n");
		goto out;
	}
	/* real pages: an untouched calloc'd buffer maps the one zero page, and
	 * sending it would copy from a cache-hot page, not from memory */
	memset(lk[0].sbuf, 0x5a, maxhalf);
	memset(lk[1].sbuf, 0xa5, maxhalf);
	for (size_t s = 0; s < sz->n; s++) {
		size_t bytes = sz->bytes[s];
		size_t half = bytes / (size_t)n * (size_t)(n - 1); /* B/2 = S(n-1)/n */
		int iters = bench_iters(bytes);
		for (int round = -1; round < o->repeats; round++) {
			if (barrier(lfd, rfd, n, rank) < 0)
				goto out;
			double t0 = bench_now();
			for (int i = 0; i < iters; i++)
				if (exchange(lk, half, rank) < 0)
					goto out;
			double dt = (bench_now() - t0) / iters;
			if (rank == 0 && round >= 0)
				bench_row(o->label, n, bytes, round, dt);
		}
	}
	rc = 0;
out:
	free(lk[0].rbuf);
	free(lk[1].rbuf);
	free(lk[0].sbuf);
	free(lk[1].sbuf);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { BENCH_DEFAULT_SIZES, "tcp-raw", "reno", MR_RING_SNDBUF_DEFAULT, 5 };
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o.sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o.repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o.label, "NAME", "tcp-raw", "name in the rows"),
		MR_OPT_STRING_D(0, "cc", &o.cc, "NAME", "reno", "TCP congestion control of the links (as libmeshrun's ring; 'system': the default)"),
		MR_OPT_STRING_D(0, "sndbuf", &o.sndbuf, "SIZE", MR_RING_SNDBUF_DEFAULT, "send buffer of the links (as libmeshrun's ring, MESHRUN_RING_SNDBUF; 'system': autotuned)"),
		MR_OPT_END(),
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_ring_hosts hosts = { 0 };
	struct bench_sizes sz;
	const char *hf = getenv("MLX_HOSTFILE"), *rs = getenv("MLX_RANK");
	int rank, sndbuf, lfd = -1, rfd = -1, rc;

	rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "MLX_RANK=R MLX_HOSTFILE=F bench-tcp-raw [--sizes LIST] [--repeats N]", table, NULL);
		return 0;
	}
	if (rc != MR_OPT_OK || bench_sizes_parse(o.sizes, &sz, &err) < 0 ||
	    mr_env_sndbuf("--sndbuf", o.sndbuf, &sndbuf, &err) < 0) {
		fprintf(stderr, "bench-tcp-raw: %s\n", err.msg);
		return 2;
	}
	if (!hf || !rs || mr_parse_int(rs, 0, 1 << 20, &rank) < 0) {
		fprintf(stderr, "bench-tcp-raw: needs MLX_RANK and MLX_HOSTFILE\n");
		return 2;
	}
	if (mr_ring_hosts_load(hf, &hosts, &err) < 0) {
		fprintf(stderr, "bench-tcp-raw: %s\n", err.msg);
		return 2;
	}
	rc = 1;
	if (rank >= hosts.nranks || hosts.nranks < 2) {
		fprintf(stderr, "bench-tcp-raw: MLX_RANK=%d but '%s' lists %d ranks (need >= 2)\n", rank, hf, hosts.nranks);
		goto out;
	}
	if (setup(&hosts, rank, o.cc, sndbuf, &lfd, &rfd) < 0)
		goto out;
	rc = run(&o, &sz, rank, hosts.nranks, lfd, rfd) < 0 ? 1 : 0;
out:
	mr_close(&lfd);
	mr_close(&rfd);
	mr_ring_hosts_free(&hosts);
	return rc;
}
