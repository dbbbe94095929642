/*
 * Unit tests for src/coll/ring/ring_conn.c: mr_ring_connect_all() on loopback with one
 * thread per rank: every lane joins the right neighbour, strays and foreign jobs
 * are refused without ending setup, a wrong answer at the neighbour's address and
 * an absent neighbour fail naming it.
 */
#include "common/compat.h"
#include "coll/ring/ring_conn.h"
#include "coll/tcp/tcp.h"
#include "coll/tcp/wire.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define MAXR 4
#define MAXC 2

static unsigned seed;

/* port on ip bound then released: 0 when free, else an errno. */
static int try_bind(const char *ip, int port)
{
	struct sockaddr_in a;
	int fd, rc;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
	close(fd);
	return rc;
}

/*
 * The job's address: a random 127.x.y.z (all of 127/8 is loopback on Linux), so
 * that tests running beside this one never reach its ranks; 127.0.0.1 where only
 * that one exists (macOS).
 */
static void job_ip(char *ip, size_t n)
{
	if (!seed) { /* two copies of this test started in the same ms must differ */
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (fd < 0 || read(fd, &seed, sizeof(seed)) != (ssize_t)sizeof(seed))
			seed = (unsigned)getpid() * 2654435761u;
		if (fd >= 0)
			close(fd);
	}
	snprintf(ip, n, "127.%u.%u.%u", 1 + rand_r(&seed) % 250, rand_r(&seed) % 250,
		 1 + rand_r(&seed) % 250);
	if (try_bind(ip, 0) == EADDRNOTAVAIL)
		snprintf(ip, n, "127.0.0.1");
}

/*
 * A free port on ip, not yet used by this job: picked at random below the
 * ephemeral range (32768 and up), so that no connect() of the ranks takes it
 * before its rank binds it.
 */
static int free_port(const char *ip, const int *taken, int ntaken)
{
	for (;;) {
		int port = 20000 + (int)(rand_r(&seed) % 12000), k = 0;

		while (k < ntaken && taken[k] != port)
			k++;
		if (k == ntaken && try_bind(ip, port) == 0)
			return port;
	}
}

struct job {
	int size, nconn;
	struct mr_ring_addr addrs[MAXR * MAXC];
	struct mr_tcp r[MAXR];
	int left[MAXR][MAXC], right[MAXR][MAXC];
	int rc[MAXR];
	struct meshrun_err err[MAXR];
};

struct rank_arg {
	struct job *j;
	int rank;
};

/* size ranks with nconn addresses each on the job's address, token "job-1". */
static void job_init(struct job *j, int size, int nconn, int64_t timeout_ms)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	memset(j, 0, sizeof(*j));
	j->size = size;
	j->nconn = nconn;
	int ports[MAXR * MAXC];
	char ip[32];

	job_ip(ip, sizeof(ip));
	for (int k = 0; k < size * nconn; k++) {
		char text[64];

		ports[k] = free_port(ip, ports, k);
		snprintf(text, sizeof(text), "%s:%d", ip, ports[k]);
		assert_int_equal(mr_ring_parse_addr(text, &j->addrs[k], &err), 0);
	}
	for (int k = 0; k < size; k++) {
		struct mr_tcp *r = &j->r[k];

		r->rank = k;
		r->size = size;
		r->nconn = nconn;
		r->timeout_ms = timeout_ms;
		r->token_len = 5;
		memcpy(r->token, "job-1", 5);
		r->hosts.nranks = size;
		r->hosts.naddrs = nconn;
		r->hosts.addrs = j->addrs;
		r->left = j->left[k];
		r->right = j->right[k];
		for (int c = 0; c < nconn; c++)
			r->left[c] = r->right[c] = -1;
		assert_int_equal(mr_tcp_lanes_alloc(r, 2, &err), 0);
		j->err[k] = (struct meshrun_err)MESHRUN_ERR_INIT;
	}
}

static void job_close(struct job *j)
{
	for (int k = 0; k < j->size; k++) {
		for (int c = 0; c < j->nconn; c++) {
			mr_close(&j->left[k][c]);
			mr_close(&j->right[k][c]);
		}
		mr_close(&j->r[k].lane[0].fd);
		mr_close(&j->r[k].lane[1].fd);
		free(j->r[k].lane);
		j->r[k].lane = NULL;
	}
}

static void *rank_main(void *p)
{
	struct rank_arg *a = p;

	a->j->rc[a->rank] = mr_ring_connect_all(&a->j->r[a->rank], &a->j->err[a->rank]);
	return NULL;
}

/* A byte written on a's fd arrives on b's. */
static void assert_joined(int a, int b)
{
	char c = 0;

	assert_true(a >= 0 && b >= 0);
	assert_int_equal(mr_set_nonblock(b, false), 0); /* the ring's sockets are non-blocking */
	assert_int_equal(write(a, "x", 1), 1);
	assert_int_equal(mr_read_full(b, &c, 1), 1);
	assert_int_equal(c, 'x');
}

static void assert_ring(struct job *j)
{
	for (int k = 0; k < j->size; k++) {
		int right = (k + 1) % j->size;

		assert_int_equal(j->rc[k], 0);
		for (int c = 0; c < j->nconn; c++)
			assert_joined(j->right[k][c], j->left[right][c]);
		assert_joined(j->r[k].lane[MR_LANE_RIGHT].fd, j->r[right].lane[MR_LANE_LEFT].fd);
		assert_int_equal(j->r[k].lane[MR_LANE_RIGHT].peer, right);
		assert_int_equal(j->r[right].lane[MR_LANE_LEFT].peer, k);
	}
}

static void run_ranks(struct job *j, int first, int n, pthread_t *t, struct rank_arg *a)
{
	for (int k = first; k < first + n; k++) {
		a[k].j = j;
		a[k].rank = k;
		assert_int_equal(pthread_create(&t[k], NULL, rank_main, &a[k]), 0);
	}
}

static void test_rings(void **state)
{
	static const int shapes[][2] = { { 2, 1 }, { 2, 2 }, { 3, 1 }, { 4, 2 } };

	(void)state;
	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
		struct job j;
		struct rank_arg a[MAXR];
		pthread_t t[MAXR];

		job_init(&j, shapes[s][0], shapes[s][1], 10000);
		run_ranks(&j, 0, j.size, t, a);
		for (int k = 0; k < j.size; k++)
			pthread_join(t[k], NULL);
		for (int k = 0; k < j.size; k++)
			if (j.rc[k])
				fail_msg("%d ranks, %d conns: rank %d: %s", j.size, j.nconn, k, j.err[k].msg);
		assert_ring(&j);
		job_close(&j);
	}
}

/* Connect to addr (retrying until it listens); -1 after 5 s. */
static int connect_to(const struct mr_ring_addr *addr)
{
	int64_t end = mr_now_ms() + 5000;

	while (mr_now_ms() < end) {
		int fd = socket(addr->sa.ss_family, SOCK_STREAM, 0);

		if (fd >= 0 && connect(fd, (const struct sockaddr *)&addr->sa, addr->salen) == 0)
			return fd;
		if (fd >= 0)
			close(fd);
		mr_sleep_ms(10);
	}
	return -1;
}

/* Send bytes on a fresh connection to addr; true when the rank closes it. */
static bool refused(const struct mr_ring_addr *addr, const void *bytes, size_t len)
{
	int fd = connect_to(addr);
	char c;
	bool closed;

	assert_true(fd >= 0);
	assert_int_equal(mr_write_full(fd, bytes, len), 0);
	closed = read(fd, &c, 1) <= 0; /* EOF, or a reset when it left bytes unread */
	close(fd);
	return closed;
}

static void test_strays_refused(void **state)
{
	struct job j;
	struct rank_arg a[2];
	pthread_t t[2];
	struct mr_hello h;
	unsigned char buf[MR_HELLO_MAX];
	size_t len;

	(void)state;
	job_init(&j, 2, 1, 10000);
	run_ranks(&j, 0, 1, t, a); /* rank 0 alone: it listens and waits for rank 1 */
	/* garbage, then a well-formed hello of another job: both closed, setup goes on */
	assert_true(refused(MR_RING_ADDR(&j.r[0].hosts, 0, 0),
			    "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", 35));
	memset(&h, 0, sizeof(h));
	h.version = MR_WIRE_VERSION;
	h.lane = 0;
	h.rank = 1;
	h.size = 2;
	h.nconn = 1;
	h.token_len = 5;
	memcpy(h.token, "job-2", 5);
	len = mr_hello_encode(&h, buf);
	assert_true(refused(MR_RING_ADDR(&j.r[0].hosts, 0, 0), buf, len));
	run_ranks(&j, 1, 1, t, a);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	for (int k = 0; k < 2; k++)
		if (j.rc[k])
			fail_msg("rank %d: %s", k, j.err[k].msg);
	assert_ring(&j);
	job_close(&j);
}

struct impostor {
	const struct mr_ring_addr *addr;
	int lfd;
};

/* Listens at rank 1's address and answers every hello as rank 1 of another job. */
static void *impostor_main(void *p)
{
	struct impostor *im = p;
	unsigned char in[MR_HELLO_MAX], out[MR_HELLO_MAX];
	struct mr_hello h;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int fd = accept(im->lfd, NULL, NULL);
	size_t got = 0;
	int need;

	if (fd < 0)
		return NULL;
	while ((need = mr_hello_decode(in, got, &h, &err)) > 0) {
		ssize_t n = read(fd, in + got, (size_t)need - got);
		if (n <= 0)
			goto out;
		got += (size_t)n;
	}
	h.rank = 1;
	h.token_len = 5;
	memcpy(h.token, "job-2", 5);
	(void)mr_write_full(fd, out, mr_hello_encode(&h, out));
	mr_sleep_ms(200); /* let the rank read it before the close */
out:
	close(fd);
	return NULL;
}

static void test_wrong_neighbour(void **state)
{
	struct job j;
	struct rank_arg a[1];
	pthread_t t[1], ti;
	struct impostor im;
	int one = 1;

	(void)state;
	job_init(&j, 2, 1, 5000);
	im.addr = MR_RING_ADDR(&j.r[0].hosts, 1, 0);
	im.lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(im.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(im.lfd, (const struct sockaddr *)&im.addr->sa, im.addr->salen), 0);
	assert_int_equal(listen(im.lfd, 4), 0);
	assert_int_equal(pthread_create(&ti, NULL, impostor_main, &im), 0);
	run_ranks(&j, 0, 1, t, a);
	pthread_join(t[0], NULL);
	shutdown(im.lfd, SHUT_RDWR);
	pthread_join(ti, NULL);
	close(im.lfd);
	assert_int_equal(j.rc[0], MESHRUN_E_PROTO);
	assert_non_null(strstr(j.err[0].msg, "rank 0: connection to rank 1 at"));
	assert_non_null(strstr(j.err[0].msg, "refused"));
	job_close(&j);
}

static void test_absent_neighbour(void **state)
{
	struct job j;
	struct rank_arg a[1];
	pthread_t t[1];
	int64_t t0 = mr_now_ms();

	(void)state;
	job_init(&j, 2, 2, 300);
	run_ranks(&j, 0, 1, t, a);
	pthread_join(t[0], NULL);
	assert_int_equal(j.rc[0], MESHRUN_E_CONNECT);
	assert_non_null(strstr(j.err[0].msg, "rank 0: could not connect to rank 1 at 127."));
	assert_non_null(strstr(j.err[0].msg, "within 300 ms"));
	assert_true(mr_now_ms() - t0 < 5000);
	job_close(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rings),
		cmocka_unit_test(test_strays_refused),
		cmocka_unit_test(test_wrong_neighbour),
		cmocka_unit_test(test_absent_neighbour),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
