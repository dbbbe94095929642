/* Unit tests for src/coll/jaccl_side.c: all-gather framing, and the TCP star on loopback with threads. */
#include "common/compat.h"
#include "coll/jaccl_types.h"
#include "coll/le.h"
#include "coll/tcp/wire.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

static void test_blobs_roundtrip(void **state)
{
	struct mr_jaccl_blob in[3] = { { (unsigned char *)"abc", 3 }, { (unsigned char *)"", 0 },
				       { (unsigned char *)"0123456789", 10 } };
	unsigned char buf[64];
	struct mr_jaccl_blob *out = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	size_t len = mr_jaccl_blobs_encode(in, 3, buf);
	assert_int_equal(len, 12 + 13);
	assert_int_equal(mr_jaccl_blobs_decode(buf, len, 3, &out, &err), 0);
	assert_int_equal(out[0].len, 3);
	assert_memory_equal(out[0].data, "abc", 3);
	assert_int_equal(out[1].len, 0);
	assert_memory_equal(out[2].data, "0123456789", 10);
	mr_jaccl_blobs_free(out, 3);

	/* every truncation is an error, never an overrun (ASan watches) */
	for (size_t cut = 0; cut < len; cut++) {
		unsigned char *t = malloc(cut ? cut : 1);
		memcpy(t, buf, cut);
		out = NULL;
		memset(&err, 0, sizeof(err));
		assert_int_equal(mr_jaccl_blobs_decode(t, cut, 3, &out, &err), MESHRUN_E_PROTO);
		assert_null(out);
		free(t);
	}
	/* a length field that points past the end, and trailing garbage */
	buf[0] = 0xff;
	assert_int_equal(mr_jaccl_blobs_decode(buf, len, 3, &out, &err), MESHRUN_E_PROTO);
	buf[0] = 3;
	memset(&err, 0, sizeof(err));
	assert_int_equal(mr_jaccl_blobs_decode(buf, len, 2, &out, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "stray bytes"));
}

/* A free loopback port (bound then released). */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

struct rank_arg {
	int rank, size;
	char coord[64];
	const char *token;
	int rc;
	char msg[MESHRUN_ERR_MSG_MAX];
	char got[64];
	const char *fail;   /* join the first all-gather as this failure */
	int fail_round;     /* ... in round 0 (addresses) or 1 (barrier) */
	int timeout_ms;     /* 0: 5000 */
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	struct mr_jaccl_side s;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_jaccl_blob *all = NULL;
	char mine[16];

	a->rc = mr_jaccl_side_open(&s, a->rank, a->size, a->coord, a->token, strlen(a->token),
				   a->timeout_ms ? a->timeout_ms : 5000, &err);
	if (a->rc == 0 && a->fail && a->fail_round == 0) {
		mr_jaccl_side_fail(&s, a->fail);
		mr_jaccl_side_close(&s);
		a->rc = MESHRUN_E_NOTFOUND;
	} else if (a->rc == 0) {
		snprintf(mine, sizeof(mine), "r%d", a->rank);
		a->rc = mr_jaccl_side_allgather(&s, mine, strlen(mine), &all, &err);
		if (a->rc == 0) {
			size_t off = 0;
			for (int r = 0; r < a->size; r++) {
				memcpy(a->got + off, all[r].data, all[r].len);
				off += all[r].len;
			}
			a->got[off] = '\0';
			mr_jaccl_blobs_free(all, a->size);
			all = NULL;
			/* and a barrier: empty blobs */
			if (a->fail) {
				mr_jaccl_side_fail(&s, a->fail);
				a->rc = MESHRUN_E_NOTFOUND;
			} else {
				a->rc = mr_jaccl_side_allgather(&s, "", 0, &all, &err);
				mr_jaccl_blobs_free(all, a->size);
			}
		}
		mr_jaccl_side_close(&s);
	}
	snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	return NULL;
}

static void test_star_allgather(void **state)
{
	struct rank_arg a[4];
	pthread_t t[4];
	int port = free_port();

	(void)state;
	/* the others start first: they retry until rank 0 listens */
	for (int r = 3; r >= 0; r--) {
		memset(&a[r], 0, sizeof(a[r]));
		a[r].rank = r;
		a[r].size = 4;
		a[r].token = "job-1";
		snprintf(a[r].coord, sizeof(a[r].coord), "127.0.0.1:%d", port);
		assert_int_equal(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
		if (r == 1)
			mr_sleep_ms(100);
	}
	for (int r = 0; r < 4; r++) {
		pthread_join(t[r], NULL);
		if (a[r].rc != 0)
			fail_msg("rank %d: %s", r, a[r].msg);
		assert_string_equal(a[r].got, "r0r1r2r3");
	}
}

/* A rank that never connects (stopped before it did): rank 0 names it when
 * its wait ends, and the rank that did connect hears that from rank 0 rather
 * than "Connection reset by peer" (seen in the jaccl chaos campaign). */
static void test_missing_rank_named(void **state)
{
	struct rank_arg a[2];
	pthread_t t[2];
	int port = free_port();

	(void)state;
	memset(a, 0, sizeof(a));
	for (int r = 0; r < 2; r++) {
		a[r].rank = r;
		a[r].size = 3; /* rank 2 never comes */
		a[r].token = "job-1";
		a[r].timeout_ms = r ? 4000 : 600;
		snprintf(a[r].coord, sizeof(a[r].coord), "127.0.0.1:%d", port);
		assert_int_equal(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
	}
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	assert_int_equal(a[0].rc, MESHRUN_E_TIMEOUT);
	if (!strstr(a[0].msg, "only 2 of 3 ranks connected") || !strstr(a[0].msg, "(missing: rank 2)"))
		fail_msg("rank 0: %s", a[0].msg);
	assert_int_not_equal(a[1].rc, 0);
	if (!strstr(a[1].msg, "(missing: rank 2)"))
		fail_msg("rank 1: %s", a[1].msg);
}

static void test_foreign_refused(void **state)
{
	struct rank_arg a[2];
	pthread_t t[2];
	int port = free_port();

	(void)state;
	memset(a, 0, sizeof(a));
	for (int r = 0; r < 2; r++) {
		a[r].rank = r;
		a[r].size = 2;
		a[r].token = r ? "other-job" : "job-1";
		snprintf(a[r].coord, sizeof(a[r].coord), "127.0.0.1:%d", port);
	}
	assert_int_equal(pthread_create(&t[0], NULL, rank_main, &a[0]), 0);
	assert_int_equal(pthread_create(&t[1], NULL, rank_main, &a[1]), 0);
	/* a stray client that sends garbage is refused too */
	mr_sleep_ms(200);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		assert_true(write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18);
	pthread_join(t[1], NULL);
	pthread_join(t[0], NULL);
	close(fd);
	/* rank 1 (wrong token) sees rank 0 close on it; rank 0 times out naming why */
	assert_int_not_equal(a[1].rc, 0);
	assert_int_equal(a[0].rc, MESHRUN_E_TIMEOUT);
	assert_non_null(strstr(a[0].msg, "only 1 of 2 ranks"));
	assert_non_null(strstr(a[0].msg, "last refused"));
}

/*
 * A rank whose setup fails (a device that does not exist) joins the
 * all-gather as a failure: every other rank fails with its message, not with
 * a broken pipe, whether the failing rank is the coordinator or not and in
 * either round.
 */
static void test_setup_failure_reaches_everyone(void **state)
{
	static const struct { int size, who, round; } cases[] = {
		{ 4, 0, 0 }, { 4, 2, 0 }, { 3, 1, 1 }, { 3, 0, 1 }, { 2, 0, 0 },
	};

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
		struct rank_arg a[4];
		pthread_t t[4];
		char why[96];
		int n = cases[k].size, port = free_port();

		snprintf(why, sizeof(why), "rank %d: jaccl: RDMA device 'rxe_nope' not found", cases[k].who);
		memset(a, 0, sizeof(a));
		for (int r = 0; r < n; r++) {
			a[r].rank = r;
			a[r].size = n;
			a[r].token = "job-f";
			a[r].fail = r == cases[k].who ? why : NULL;
			a[r].fail_round = cases[k].round;
			snprintf(a[r].coord, sizeof(a[r].coord), "127.0.0.1:%d", port);
			assert_int_equal(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
		}
		for (int r = 0; r < n; r++)
			pthread_join(t[r], NULL);
		for (int r = 0; r < n; r++) {
			if (r == cases[k].who) {
				assert_int_equal(a[r].rc, MESHRUN_E_NOTFOUND);
				continue;
			}
			if (a[r].rc != MESHRUN_E_PEER || !strstr(a[r].msg, why))
				fail_msg("case %zu, rank %d: rc %d, '%s'", k, r, a[r].rc, a[r].msg);
		}
	}
}

static void test_bad_coordinator(void **state)
{
	struct mr_jaccl_side s;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_jaccl_side_open(&s, 1, 2, "nohost:1", "", 0, 100, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "MLX_JACCL_COORDINATOR"));
}

/* A connection to 127.0.0.1:port, retried for 3 s while nobody listens; -1 after that. */
static int connect_retry(int port)
{
	for (int i = 0; i < 300; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		mr_sleep_ms(10);
	}
	return -1;
}

/*
 * What another machine can throw at the coordinator port while the job sets
 * up: 40 slow-loris connections (one byte, then silence; more than the 32
 * pending slots), garbage, a hello claiming a 65535-byte token and one with
 * another job's token, all held open. The job's ranks still get in at once:
 * the oldest pending connections are closed for newcomers, nothing waits
 * on a silent one.
 */
static void test_slow_and_hostile_clients(void **state)
{
	static const unsigned char hello[] = "MRNG\x01\x00\xff\xff\x01\x00\x00\x00\x03\x00\x00\x00"
					     "LCCJ";
	struct rank_arg a[3];
	pthread_t t[3];
	int port = free_port(), fds[43], nfd = 0;
	unsigned char buf[64];

	(void)state;
	memset(a, 0, sizeof(a));
	for (int r = 0; r < 3; r++) {
		a[r].rank = r;
		a[r].size = 3;
		a[r].token = "job-1";
		snprintf(a[r].coord, sizeof(a[r].coord), "127.0.0.1:%d", port);
	}
	assert_int_equal(pthread_create(&t[0], NULL, rank_main, &a[0]), 0);
	for (int i = 0; i < 40; i++) {
		fds[nfd] = connect_retry(port);
		assert_true(fds[nfd] >= 0);
		assert_true(write(fds[nfd++], "M", 1) == 1);
	}
	fds[nfd] = connect_retry(port);
	assert_true(write(fds[nfd++], "GET / HTTP/1.0\r\n\r\n", 18) == 18);
	memcpy(buf, hello, 20);
	mr_put_le32(buf + 16, MR_JACCL_HELLO_TAG);
	buf[20] = 0xff, buf[21] = 0xff, buf[22] = 0, buf[23] = 0; /* token length 65535 */
	fds[nfd] = connect_retry(port);
	assert_true(write(fds[nfd++], buf, 24) == 24);
	buf[20] = 5, buf[21] = 0;
	memcpy(buf + 24, "job-2", 5);
	fds[nfd] = connect_retry(port);
	assert_true(write(fds[nfd++], buf, 29) == 29);

	int64_t start = mr_now_ms();
	for (int r = 1; r < 3; r++)
		assert_int_equal(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
	for (int r = 0; r < 3; r++) {
		pthread_join(t[r], NULL);
		if (a[r].rc != 0)
			fail_msg("rank %d: %s", r, a[r].msg);
		assert_string_equal(a[r].got, "r0r1r2");
	}
	int64_t took = mr_now_ms() - start;
	if (took >= 1900) /* the 2 s hello bound: they waited for a slot to expire */
		fail_msg("the ranks took %lld ms to get in past the slow connections", (long long)took);
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
}

/* The pure checks of serve() and recv_frame() (fuzzed: tests/fuzz/fuzz_jaccl_side.c). */
static void test_hello_and_frame_checks(void **state)
{
	struct mr_jaccl_side s;
	int fds[3] = { -1, -1, 7 };
	struct mr_hello h;
	struct mr_frame_hdr f;
	unsigned char hdr[MR_FRAME_HDR];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	(void)state;

	memset(&s, 0, sizeof(s));
	s.size = 3;
	s.fd = fds;
	memcpy(s.token, "tok", 3);
	s.token_len = 3;
	memset(&h, 0, sizeof(h));
	h.version = MR_WIRE_VERSION;
	h.lane = MR_LANE_P2P;
	h.rank = 1;
	h.size = 3;
	h.nconn = MR_JACCL_HELLO_TAG;
	h.token_len = 3;
	memcpy(h.token, "tok", 3);
	assert_int_equal(mr_jaccl_side_check_hello(&s, &h, &err), 0);
	h.rank = 2; /* has a connection already */
	assert_int_equal(mr_jaccl_side_check_hello(&s, &h, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "connected twice"));
	mr_err_clear(&err);
	h.rank = 0;
	assert_int_equal(mr_jaccl_side_check_hello(&s, &h, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	h.rank = 1;
	h.nconn = 1; /* a ring-backend hello */
	assert_int_equal(mr_jaccl_side_check_hello(&s, &h, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	h.nconn = MR_JACCL_HELLO_TAG;
	h.token[0] = 'T';
	assert_int_equal(mr_jaccl_side_check_hello(&s, &h, &err), MESHRUN_E_AUTH);
	mr_err_clear(&err);

	struct mr_frame_hdr in = { MR_FRAME_MSG, 1, 0, MR_JACCL_MAX_BLOB };
	mr_frame_encode(&in, hdr);
	assert_int_equal(mr_jaccl_frame_check(hdr, 3, MR_JACCL_MAX_BLOB, &f, &err), 0);
	/* a claimed length over the cap is refused before anything is allocated */
	assert_int_equal(mr_jaccl_frame_check(hdr, 3, MR_FRAME_MAX_ABORT, &f, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	in.type = MR_FRAME_HB;
	in.len = 0;
	mr_frame_encode(&in, hdr);
	assert_int_equal(mr_jaccl_frame_check(hdr, 3, MR_JACCL_MAX_BLOB, &f, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	in.type = MR_FRAME_ABORT;
	in.src = 3; /* outside the group */
	mr_frame_encode(&in, hdr);
	assert_int_equal(mr_jaccl_frame_check(hdr, 3, MR_JACCL_MAX_BLOB, &f, &err), MESHRUN_E_PROTO);
}

/* ------------------------------------------------------------ watch mode */

enum role { WATCH, MUTE, STALL, LEAVE, ABORT };

struct watch_arg {
	int rank, size, port, timeout_ms;
	enum role role;
	int peer;            /* STALL: the rank it waits on */
	int wait_ms;         /* how long to watch (MUTE: stay silent) */
	int rc;              /* mr_jaccl_side_failed's */
	char msg[MESHRUN_ERR_MSG_MAX];
	bool gone[4];
	int64_t took_ms;     /* until the verdict */
};

static void *watch_rank(void *p)
{
	struct watch_arg *a = p;
	struct mr_jaccl_side s;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_jaccl_blob *all = NULL;
	char coord[64];
	int64_t t0;

	snprintf(coord, sizeof(coord), "127.0.0.1:%d", a->port);
	a->rc = mr_jaccl_side_open(&s, a->rank, a->size, coord, "job", 3, a->timeout_ms, &err);
	if (a->rc == 0)
		a->rc = mr_jaccl_side_allgather(&s, "", 0, &all, &err);
	mr_jaccl_blobs_free(all, a->size);
	if (a->rc == 0 && a->role != MUTE)
		a->rc = mr_jaccl_side_watch(&s, &err);
	if (a->rc < 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		return NULL;
	}
	t0 = mr_now_ms();
	if (a->role == STALL)
		mr_jaccl_side_stall(&s, a->peer, a->rank == 1 ? "devA" : "devB");
	if (a->role == ABORT) {
		mr_sleep_ms(100);
		mr_jaccl_side_abort(&s, "jaccl: rank 2: boom");
	}
	while (a->role != LEAVE && mr_now_ms() - t0 < a->wait_ms) {
		if (a->role != MUTE && (a->rc = mr_jaccl_side_failed(&s, &err)) < 0)
			break;
		mr_sleep_ms(20);
	}
	a->took_ms = mr_now_ms() - t0;
	for (int r = 0; r < a->size && a->role != MUTE; r++)
		a->gone[r] = mr_jaccl_side_gone(&s, r);
	snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	mr_jaccl_side_close(&s);
	return NULL;
}

static void run_watch(struct watch_arg *a, int n)
{
	pthread_t t[4];
	int port = free_port();

	for (int r = 0; r < n; r++) {
		a[r].rank = r;
		a[r].size = n;
		a[r].port = port;
		assert_int_equal(pthread_create(&t[r], NULL, watch_rank, &a[r]), 0);
	}
	for (int r = 0; r < n; r++)
		pthread_join(t[r], NULL);
}

/* A stopped rank (its socket open, nothing sent): named by rank 0 after half
 * the timeout, and by every other rank through rank 0. */
static void test_watch_silent_rank(void **state)
{
	struct watch_arg a[3] = {
		{ .role = WATCH, .timeout_ms = 2000, .wait_ms = 4000 },
		{ .role = WATCH, .timeout_ms = 2000, .wait_ms = 4000 },
		{ .role = MUTE, .timeout_ms = 2000, .wait_ms = 3000 },
	};

	(void)state;
	run_watch(a, 3);
	for (int r = 0; r < 2; r++) {
		assert_int_equal(a[r].rc, MESHRUN_E_PEER);
		if (!strstr(a[r].msg, "rank 2 showed no sign of life"))
			fail_msg("rank %d: '%s'", r, a[r].msg);
		if (a[r].took_ms > 2000)
			fail_msg("rank %d: the verdict took %lld ms, more than the timeout", r, (long long)a[r].took_ms);
	}
}

/* Two ranks waiting on each other (a cable down) are named by every rank;
 * a rank waiting on one of them is not a culprit. */
static void test_watch_mutual_stall(void **state)
{
	struct watch_arg a[4] = {
		{ .role = STALL, .peer = 1, .timeout_ms = 8000, .wait_ms = 3000 },
		{ .role = STALL, .peer = 2, .timeout_ms = 8000, .wait_ms = 3000 },
		{ .role = STALL, .peer = 1, .timeout_ms = 8000, .wait_ms = 3000 },
		{ .role = WATCH, .timeout_ms = 8000, .wait_ms = 3000 },
	};

	(void)state;
	run_watch(a, 4);
	for (int r = 0; r < 4; r++) {
		assert_int_equal(a[r].rc, MESHRUN_E_PEER);
		if (!strstr(a[r].msg, "rank 1 (device 'devA') and rank 2 (device 'devB') wait on each other"))
			fail_msg("rank %d: '%s'", r, a[r].msg);
	}
}

/* A rank that leaves is a departure everyone hears of, not a failure; an
 * abort reaches everyone. */
static void test_watch_leave_and_abort(void **state)
{
	struct watch_arg l[3] = {
		{ .role = WATCH, .timeout_ms = 4000, .wait_ms = 800 },
		{ .role = WATCH, .timeout_ms = 4000, .wait_ms = 800 },
		{ .role = LEAVE, .timeout_ms = 4000 },
	};
	struct watch_arg b[3] = {
		{ .role = WATCH, .timeout_ms = 4000, .wait_ms = 2000 },
		{ .role = WATCH, .timeout_ms = 4000, .wait_ms = 2000 },
		{ .role = ABORT, .timeout_ms = 4000 },
	};

	(void)state;
	run_watch(l, 3);
	for (int r = 0; r < 2; r++) {
		if (l[r].rc != 0)
			fail_msg("rank %d: '%s'", r, l[r].msg);
		assert_true(l[r].gone[2]);
	}
	run_watch(b, 3);
	for (int r = 0; r < 2; r++) {
		assert_int_equal(b[r].rc, MESHRUN_E_PEER);
		assert_string_equal(b[r].msg, "jaccl: rank 2: boom");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blobs_roundtrip),
		cmocka_unit_test(test_hello_and_frame_checks),
		cmocka_unit_test(test_slow_and_hostile_clients),
		cmocka_unit_test(test_star_allgather),
		cmocka_unit_test(test_missing_rank_named),
		cmocka_unit_test(test_foreign_refused),
		cmocka_unit_test(test_setup_failure_reaches_everyone),
		cmocka_unit_test(test_bad_coordinator),
		cmocka_unit_test(test_watch_silent_rank),
		cmocka_unit_test(test_watch_mutual_stall),
		cmocka_unit_test(test_watch_leave_and_abort),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
