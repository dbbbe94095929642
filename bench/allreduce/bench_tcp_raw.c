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
 *
 * --mesh: the mesh backend's links instead (MESHRUN_MESH_HOSTFILE, the
 * address matrix of tcpmesh.h; the first cable of each pair): every rank
 * connects to every lower rank and accepts the higher ones, then sends 2S/n
 * bytes to every peer and receives as much from each, all at once - the
 * bytes a mesh all-reduce of S moves over each cable, without reductions or
 * steps. The same per-rank total as the ring, B = 2(n-1)/n * S, spread over
 * n-1 cables. --pair: only ranks 0 and 1 exchange, S bytes each way over
 * their one cable (a single flow per direction on one link; the others
 * idle): the rate one shaped cable gives TCP.
 */
#include "common/compat.h"
#include "bench_common.h"
#include "coll/env.h"
#include "coll/mesh/tcpmesh.h"
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
	bool mesh, pair;
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

#define MESH_LINKS_MAX 64

/*
 * Every link sends len bytes and receives len, all at once: each round of the
 * loop moves what the sockets take and hold (until EAGAIN) on every link,
 * then waits in poll for the ones not done - the same I/O pattern as
 * libmeshrun's ring and mesh, so the bound is not loosened by extra poll
 * rounds. The ring's rows use it with its two links (left, right).
 */
static int exchange_n(struct link *lk, int n, size_t len, int rank)
{
	struct pollfd p[MESH_LINKS_MAX];

	for (int i = 0; i < n; i++)
		lk[i].soff = lk[i].roff = 0;
	for (;;) {
		bool busy = false;
		for (int i = 0; i < n; i++) {
			while (lk[i].roff < len) {
				ssize_t r = recv(lk[i].fd, lk[i].rbuf + lk[i].roff, len - lk[i].roff, MSG_DONTWAIT);
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
			while (lk[i].soff < len) {
				ssize_t s = send(lk[i].fd, lk[i].sbuf + lk[i].soff, len - lk[i].soff, MSG_DONTWAIT | MSG_NOSIGNAL);
				if (s < 0) {
					if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
						break;
					return die("send", rank);
				}
				lk[i].soff += (size_t)s;
			}
		}
		for (int i = 0; i < n; i++) {
			p[i].fd = lk[i].fd;
			p[i].events = (short)((lk[i].soff < len ? POLLOUT : 0) | (lk[i].roff < len ? POLLIN : 0));
			p[i].revents = 0;
			busy = busy || p[i].events;
		}
		if (!busy)
			return 0;
		int k = poll(p, (nfds_t)n, IO_TIMEOUT_MS);
		if (k == 0) {
			errno = ETIMEDOUT;
			return die("exchange", rank);
		}
		if (k < 0 && errno != EINTR)
			return die("poll", rank);
	}
}

/* ------------------------------------------------------------ --mesh */

/* One socket to every peer over the first cable of the pair; fd[p] (-1 for us). */
static int mesh_setup(const struct mr_mesh_hosts *h, int rank, const char *cc, int sndbuf, int *fd)
{
	int64_t deadline = mr_now_ms() + SETUP_TIMEOUT_MS;
	int ls[MESH_LINKS_MAX], nls = 0, one = 1, want = h->size - 1 - rank, got = 0;

	for (int p = 0; p < h->size; p++)
		fd[p] = -1;
	/* listen on each distinct own address towards the higher ranks */
	for (int p = rank + 1; p < h->size; p++) {
		const struct mr_ring_addr *a = MR_MESH_ADDR(h, rank, p, 0);
		bool dup = false;
		for (int q = rank + 1; q < p && !dup; q++) {
			const struct mr_ring_addr *b = MR_MESH_ADDR(h, rank, q, 0);
			dup = a->salen == b->salen && memcmp(&a->sa, &b->sa, a->salen) == 0;
		}
		if (dup)
			continue;
		ls[nls] = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (ls[nls] < 0)
			return die("socket", rank);
		setsockopt(ls[nls], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls[nls], (const struct sockaddr *)&a->sa, a->salen) < 0 || listen(ls[nls], 16) < 0) {
			fprintf(stderr, "bench-tcp-raw: rank %d: listen on '%s': %s\n", rank, a->text, strerror(errno));
			close(ls[nls]);
			goto fail;
		}
		nls++;
	}
	/* connect to the lower ranks, saying who we are */
	for (int p = 0; p < rank; p++) {
		const struct mr_ring_addr *a = MR_MESH_ADDR(h, p, rank, 0);
		uint32_t me = (uint32_t)rank;
		for (;;) {
			fd[p] = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd[p] < 0) {
				die("socket", rank);
				goto fail;
			}
			if (connect(fd[p], (const struct sockaddr *)&a->sa, a->salen) == 0)
				break;
			mr_close(&fd[p]);
			if (mr_now_ms() > deadline) {
				fprintf(stderr, "bench-tcp-raw: rank %d: connect to '%s': %s\n", rank, a->text, strerror(errno));
				goto fail;
			}
			mr_sleep_ms(20);
		}
		if (mr_write_full(fd[p], &me, sizeof(me)) < 0) {
			die("hello", rank);
			goto fail;
		}
	}
	while (got < want) {
		struct pollfd pf[MESH_LINKS_MAX];
		for (int i = 0; i < nls; i++)
			pf[i] = (struct pollfd){ .fd = ls[i], .events = POLLIN };
		if (poll(pf, (nfds_t)nls, (int)MR_MAX(deadline - mr_now_ms(), 1)) <= 0) {
			fprintf(stderr, "bench-tcp-raw: rank %d: %d of %d higher ranks connected within %d ms\n", rank, got, want, SETUP_TIMEOUT_MS);
			goto fail;
		}
		for (int i = 0; i < nls; i++) {
			uint32_t who = 0;
			int c;
			if (!(pf[i].revents & POLLIN) || (c = accept4(ls[i], NULL, NULL, SOCK_CLOEXEC)) < 0)
				continue;
			if (mr_read_full(c, &who, sizeof(who)) != sizeof(who) || who <= (uint32_t)rank ||
			    who >= (uint32_t)h->size || fd[who] >= 0) {
				fprintf(stderr, "bench-tcp-raw: rank %d: a connection with a bad hello\n", rank);
				close(c);
				goto fail;
			}
			fd[who] = c;
			got++;
		}
	}
	for (int i = 0; i < nls; i++)
		close(ls[i]);
	for (int p = 0; p < h->size; p++)
		if (fd[p] >= 0)
			tune(fd[p], cc, sndbuf);
	return 0;
fail:
	for (int i = 0; i < nls; i++)
		close(ls[i]);
	for (int p = 0; p < h->size; p++)
		mr_close(&fd[p]);
	return -1;
}

/* An all-to-all byte: every rank has heard from every other. */
static int barrier_n(struct link *lk, int n, int rank)
{
	char c = 0;

	for (int i = 0; i < n; i++)
		if (mr_write_full(lk[i].fd, &c, 1) < 0)
			return die("barrier", rank);
	for (int i = 0; i < n; i++)
		if (mr_read_full(lk[i].fd, &c, 1) != 1)
			return die("barrier", rank);
	return 0;
}

static int run_mesh(const struct opts *o, const struct bench_sizes *sz, int rank, int size, int *fd)
{
	struct link lk[MESH_LINKS_MAX];
	size_t maxb = 0;
	int n = 0, rc = -1;

	for (size_t i = 0; i < sz->n; i++)
		maxb = MR_MAX(maxb, sz->bytes[i]);
	size_t maxlen = o->pair ? maxb : 2 * maxb / (size_t)size + 1;
	memset(lk, 0, sizeof(lk));
	for (int p = 0; p < size; p++) {
		if (fd[p] < 0 || (o->pair && (rank > 1 || p > 1)))
			continue;
		lk[n].fd = fd[p];
		lk[n].sbuf = malloc(maxlen);
		lk[n].rbuf = malloc(maxlen);
		if (!lk[n].sbuf || !lk[n].rbuf) {
			fprintf(stderr, "bench-tcp-raw: out of memory\n");
			n++;
			goto out;
		}
		memset(lk[n].sbuf, 0x5a + n, maxlen); /* real pages, as in run() */
		n++;
	}
	for (size_t s = 0; s < sz->n; s++) {
		size_t bytes = sz->bytes[s];
		size_t len = o->pair ? bytes : 2 * bytes / (size_t)size;
		for (int round = -1; round < o->repeats; round++) {
			int iters = bench_round_iters(bytes, round);
			if (n > 0 && barrier_n(lk, n, rank) < 0)
				goto out;
			double t0 = bench_now();
			for (int i = 0; i < iters; i++)
				if (n > 0 && exchange_n(lk, n, len, rank) < 0)
					goto out;
			double dt = (bench_now() - t0) / iters;
			if (rank == 0 && round >= 0)
				bench_row(o->label, size, bytes, round, dt);
		}
	}
	rc = 0;
out:
	for (int i = 0; i < n; i++) {
		free(lk[i].sbuf);
		free(lk[i].rbuf);
	}
	return rc;
}

static int main_mesh(const struct opts *o, const struct bench_sizes *sz, int rank, int sndbuf)
{
	const char *mf = getenv("MESHRUN_MESH_HOSTFILE");
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_mesh_hosts h = { 0 };
	int fd[MESH_LINKS_MAX], rc = 1;

	if (!mf || !*mf) {
		fprintf(stderr, "bench-tcp-raw: --mesh needs MESHRUN_MESH_HOSTFILE (meshrun sets it on a hostfile with mesh_ips)\n");
		return 2;
	}
	if (mr_mesh_hosts_load(mf, &h, &err) < 0) {
		fprintf(stderr, "bench-tcp-raw: %s\n", err.msg);
		return 2;
	}
	if (rank >= h.size || h.size < 2 || h.size > MESH_LINKS_MAX) {
		fprintf(stderr, "bench-tcp-raw: MLX_RANK=%d but '%s' lists %d ranks (need 2..%d)\n", rank, mf, h.size, MESH_LINKS_MAX);
		goto out;
	}
	if (mesh_setup(&h, rank, o->cc, sndbuf, fd) < 0)
		goto out;
	rc = run_mesh(o, sz, rank, h.size, fd) < 0 ? 1 : 0;
	for (int p = 0; p < h.size; p++)
		mr_close(&fd[p]);
out:
	mr_mesh_hosts_free(&h);
	return rc;
}

/* ------------------------------------------------------------- ring */

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
		for (int round = -1; round < o->repeats; round++) {
			int iters = bench_round_iters(bytes, round);
			if (barrier(lfd, rfd, n, rank) < 0)
				goto out;
			double t0 = bench_now();
			for (int i = 0; i < iters; i++)
				if (exchange_n(lk, 2, half, rank) < 0)
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
	struct opts o = { BENCH_DEFAULT_SIZES, "tcp-raw", "reno", MR_RING_SNDBUF_DEFAULT, 5, false, false };
	const struct mr_opt table[] = {
		MR_OPT_STRING_D(0, "sizes", &o.sizes, "LIST", BENCH_DEFAULT_SIZES, "buffer sizes in bytes (K/M/G suffixes)"),
		MR_OPT_INT_D(0, "repeats", &o.repeats, "N", 1, 1000, "5", "timed rounds per size"),
		MR_OPT_STRING_D(0, "label", &o.label, "NAME", "tcp-raw", "name in the rows"),
		MR_OPT_STRING_D(0, "cc", &o.cc, "NAME", "reno", "TCP congestion control of the links (as libmeshrun's ring; 'system': the default)"),
		MR_OPT_STRING_D(0, "sndbuf", &o.sndbuf, "SIZE", MR_RING_SNDBUF_DEFAULT, "send buffer of the links (as libmeshrun's ring, MESHRUN_RING_SNDBUF; 'system': autotuned)"),
		MR_OPT_BOOL(0, "mesh", &o.mesh, "the mesh backend's links (MESHRUN_MESH_HOSTFILE): 2S/n to and from every peer at once"),
		MR_OPT_BOOL(0, "pair", &o.pair, "with --mesh: only ranks 0 and 1, S bytes each way over their one cable"),
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
	if (o.mesh) {
		if (!rs || mr_parse_int(rs, 0, 1 << 20, &rank) < 0) {
			fprintf(stderr, "bench-tcp-raw: needs MLX_RANK\n");
			return 2;
		}
		return main_mesh(&o, &sz, rank, sndbuf);
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
