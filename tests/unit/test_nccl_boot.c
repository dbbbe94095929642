/*
 * Unit tests for src/coll/nccl_boot.c: the nccl backend's TCP id exchange,
 * with a fake 128-byte id between forked local processes on 127.0.0.1.
 * Every child gets MLX_NCCL_TIMEOUT of a few seconds, so a broken exchange
 * fails the test instead of hanging it.
 */
#include "common/compat.h"
#include "coll/le.h"
#include "coll/nccl_boot.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#define TOKEN "job-token-for-the-test"

/* Exit codes of a rank child. */
enum { CHILD_OK = 0, CHILD_ENV = 10, CHILD_EXCHANGE = 11, CHILD_WRONG_ID = 12, CHILD_NOT_REFUSED = 13 };

/* A port nobody listens on right now (bind to 0, read it back, close). */
static unsigned free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void fake_id(unsigned char *id, unsigned seed)
{
	for (int i = 0; i < MR_NCCL_ID_BYTES; i++)
		id[i] = (unsigned char)(seed * 31u + (unsigned)i * 7u + 1u);
}

static void set_env(unsigned port, int rank, int size, const char *token, const char *timeout_ms)
{
	char v[32];

	setenv("NCCL_HOST_IP", "127.0.0.1", 1);
	snprintf(v, sizeof(v), "%u", port);
	setenv("NCCL_PORT", v, 1);
	snprintf(v, sizeof(v), "%d", rank);
	setenv("MLX_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", size);
	setenv("MLX_WORLD_SIZE", v, 1);
	setenv("MLX_NCCL_TIMEOUT", timeout_ms, 1);
	if (token)
		setenv("MESHRUN_JOB_TOKEN", token, 1);
	else
		unsetenv("MESHRUN_JOB_TOKEN");
}

static void clear_env(void)
{
	static const char *const names[] = { "NCCL_HOST_IP", "NCCL_PORT", "MLX_RANK", "MLX_WORLD_SIZE",
					      "MLX_NCCL_TIMEOUT", "MESHRUN_JOB_TOKEN" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		unsetenv(names[i]);
}

/*
 * Fork one rank: it reads the environment and runs the exchange. Rank 0 serves
 * fake_id(seed); the others must receive exactly it. expect_auth: the child
 * must be refused for its token instead (an intruder).
 */
static pid_t start_rank(unsigned port, int rank, int size, const char *token, unsigned seed,
			bool expect_auth)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid > 0)
		return pid;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_nccl_boot b;
	unsigned char id[MR_NCCL_ID_BYTES], want[MR_NCCL_ID_BYTES];

	set_env(port, rank, size, token, "8000");
	fake_id(want, seed);
	if (mr_nccl_boot_from_env(&b, &err) < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		_exit(CHILD_ENV);
	}
	if (rank == 0)
		memcpy(id, want, sizeof(id));
	else
		memset(id, 0, sizeof(id));
	int rc = mr_nccl_boot_exchange(&b, id, &err);
	if (expect_auth) {
		if (rc == MESHRUN_E_AUTH && strstr(err.msg, "job token does not match") &&
		    strstr(err.msg, "127.0.0.1:"))
			_exit(CHILD_OK);
		fprintf(stderr, "intruder: rc %d: %s\n", rc, err.msg);
		_exit(CHILD_NOT_REFUSED);
	}
	if (rc < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, err.msg);
		_exit(CHILD_EXCHANGE);
	}
	_exit(memcmp(id, want, sizeof(id)) == 0 ? CHILD_OK : CHILD_WRONG_ID);
}

static int wait_rank(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void run_job(int size)
{
	unsigned port = free_port();
	pid_t pids[8];

	/* Start the fetching ranks first: they must retry until rank 0 listens. */
	for (int r = size - 1; r >= 0; r--)
		pids[r] = start_rank(port, r, size, TOKEN, 42, false);
	for (int r = 0; r < size; r++)
		assert_int_equal(wait_rank(pids[r]), CHILD_OK);
}

static void test_exchange_2(void **state)
{
	(void)state;
	run_job(2);
}

static void test_exchange_4(void **state)
{
	(void)state;
	run_job(4);
}

/* A connection that sends garbage, then one with a wrong token (claiming a
 * real rank) are refused; the job's own ranks still get the id. */
static void test_wrong_token_refused(void **state)
{
	unsigned port = free_port();
	(void)state;

	pid_t r0 = start_rank(port, 0, 3, TOKEN, 7, false);
	/* garbage: retry the connect until rank 0 listens */
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = -1;
	for (int i = 0; i < 200; i++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(20000);
	}
	assert_true(fd >= 0);
	static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
	assert_int_equal(mr_write_full(fd, junk, sizeof(junk) - 1), 0);
	char c;
	assert_true(read(fd, &c, 1) <= 0); /* closed without an answer (EOF or reset) */
	close(fd);

	pid_t intruder = start_rank(port, 1, 3, "another-job", 7, true);
	assert_int_equal(wait_rank(intruder), CHILD_OK);
	pid_t no_token = start_rank(port, 2, 3, NULL, 7, true);
	assert_int_equal(wait_rank(no_token), CHILD_OK);

	pid_t r1 = start_rank(port, 1, 3, TOKEN, 7, false);
	pid_t r2 = start_rank(port, 2, 3, TOKEN, 7, false);
	assert_int_equal(wait_rank(r1), CHILD_OK);
	assert_int_equal(wait_rank(r2), CHILD_OK);
	assert_int_equal(wait_rank(r0), CHILD_OK);
}

static void test_missing_vars_named(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_nccl_boot b;
	(void)state;

	clear_env();
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), MESHRUN_E_BACKEND);
	assert_non_null(strstr(err.msg, "NCCL_HOST_IP, NCCL_PORT, MLX_RANK, MLX_WORLD_SIZE"));

	mr_err_clear(&err);
	setenv("NCCL_HOST_IP", "127.0.0.1", 1);
	setenv("MLX_RANK", "0", 1);
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), MESHRUN_E_BACKEND);
	assert_string_equal(err.msg, "nccl: missing environment variables NCCL_PORT, MLX_WORLD_SIZE");

	static const struct { const char *port, *rank, *size, *timeout, *want; } bad[] = {
		{ "abc", "0", "2", "10", "NCCL_PORT='abc'" },
		{ "70000", "0", "2", "10", "NCCL_PORT='70000'" },
		{ "5000", "2", "2", "10", "MLX_RANK='2'" },
		{ "5000", "-1", "2", "10", "MLX_RANK='-1'" },
		{ "5000", "0", "0", "10", "MLX_WORLD_SIZE='0'" },
		{ "5000", "0", "2", "soon", "MLX_NCCL_TIMEOUT='soon'" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		setenv("NCCL_PORT", bad[i].port, 1);
		setenv("MLX_RANK", bad[i].rank, 1);
		setenv("MLX_WORLD_SIZE", bad[i].size, 1);
		setenv("MLX_NCCL_TIMEOUT", bad[i].timeout, 1);
		mr_err_clear(&err);
		assert_int_equal(mr_nccl_boot_from_env(&b, &err), MESHRUN_E_PARSE);
		if (!strstr(err.msg, bad[i].want))
			fail_msg("case %zu: '%s' does not name %s", i, err.msg, bad[i].want);
	}

	set_env(5000, 1, 4, TOKEN, "1500");
	mr_err_clear(&err);
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), 0);
	assert_string_equal(b.host, "127.0.0.1");
	assert_int_equal(b.port, 5000);
	assert_int_equal(b.rank, 1);
	assert_int_equal(b.size, 4);
	assert_int_equal(b.timeout_ms, 1500);
	assert_int_equal(b.token_len, strlen(TOKEN));
	unsetenv("MLX_NCCL_TIMEOUT");
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), 0);
	assert_int_equal(b.timeout_ms, MR_NCCL_DEFAULT_TIMEOUT_MS);
	clear_env();
}

/* Rank 0 never comes: the fetching rank gives up at the timeout and names
 * the address it tried. */
static void test_rank0_absent_times_out(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_nccl_boot b;
	unsigned char id[MR_NCCL_ID_BYTES];
	char want[64];
	unsigned port = free_port();
	(void)state;

	set_env(port, 1, 2, TOKEN, "400");
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), 0);
	assert_int_equal(mr_nccl_boot_exchange(&b, id, &err), MESHRUN_E_TIMEOUT);
	snprintf(want, sizeof(want), "rank 0 at '127.0.0.1:%u'", port);
	if (!strstr(err.msg, want) || !strstr(err.msg, "Connection refused"))
		fail_msg("message '%s' does not name %s and the cause", err.msg, want);
	clear_env();
}

/* Rank 0 alone: times out naming the ranks that never fetched the id. */
static void test_rank0_names_missing_ranks(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_nccl_boot b;
	unsigned char id[MR_NCCL_ID_BYTES];
	unsigned port = free_port();
	(void)state;

	fake_id(id, 3);
	set_env(port, 0, 3, TOKEN, "300");
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), 0);
	assert_int_equal(mr_nccl_boot_exchange(&b, id, &err), MESHRUN_E_TIMEOUT);
	if (!strstr(err.msg, "2 ranks never fetched it: 1, 2") || !strstr(err.msg, "127.0.0.1:"))
		fail_msg("message: %s", err.msg);
	/* size 1: nothing to serve */
	set_env(port, 0, 1, TOKEN, "300");
	assert_int_equal(mr_nccl_boot_from_env(&b, &err), 0);
	mr_err_clear(&err);
	assert_int_equal(mr_nccl_boot_exchange(&b, id, &err), 0);
	clear_env();
}

static void test_request_decode_bounds(void **state)
{
	unsigned char buf[MR_NCCL_BOOT_REQ_FIXED + MR_NCCL_BOOT_TOKEN_MAX + 8];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const unsigned char *tok;
	size_t tlen, n;
	int rank, size;
	(void)state;

	n = mr_nccl_boot_req_encode(buf, 3, 4, "abc", 3);
	assert_int_equal(n, MR_NCCL_BOOT_REQ_FIXED + 3);
	assert_int_equal(mr_nccl_boot_req_decode(buf, 0, &rank, &size, &tok, &tlen, &err), MR_NCCL_BOOT_REQ_FIXED);
	assert_int_equal(mr_nccl_boot_req_decode(buf, 10, &rank, &size, &tok, &tlen, &err), MR_NCCL_BOOT_REQ_FIXED);
	assert_int_equal(mr_nccl_boot_req_decode(buf, n - 1, &rank, &size, &tok, &tlen, &err), (int)n);
	assert_int_equal(mr_nccl_boot_req_decode(buf, n, &rank, &size, &tok, &tlen, &err), 0);
	assert_int_equal(rank, 3);
	assert_int_equal(size, 4);
	assert_int_equal(tlen, 3);
	assert_memory_equal(tok, "abc", 3);

	buf[6] = 0xff, buf[7] = 0xff; /* token length 65535 */
	assert_int_equal(mr_nccl_boot_req_decode(buf, n, &rank, &size, &tok, &tlen, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "job token of 65535 bytes"));
	mr_err_clear(&err);
	n = mr_nccl_boot_req_encode(buf, 1, 2, "", 0);
	buf[4] = 9; /* version */
	assert_int_equal(mr_nccl_boot_req_decode(buf, n, &rank, &size, &tok, &tlen, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	n = mr_nccl_boot_req_encode(buf, 1, 2, "", 0);
	buf[15] = 0x80; /* size > INT32_MAX */
	assert_int_equal(mr_nccl_boot_req_decode(buf, n, &rank, &size, &tok, &tlen, &err), MESHRUN_E_PROTO);
	mr_err_clear(&err);
	assert_int_equal(mr_nccl_boot_req_decode((const unsigned char *)"GET ", 4, &rank, &size, &tok, &tlen, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "bad magic"));
}

/* A connection to 127.0.0.1:port, retried for 3 s while nobody listens. */
static int connect_retry(unsigned port)
{
	for (int i = 0; i < 300; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	return -1;
}

/*
 * What another machine can throw at rank 0's id server while the job starts:
 * 40 slow-loris connections (one byte, then silence; more than the 32
 * pending slots), garbage, a request claiming a 65535-byte token and one
 * with another job's token claiming rank 1, all held open. The job's ranks
 * still get the id at once (the oldest pending connections are closed for
 * newcomers) and the intruder gets no id.
 */
static void test_slow_and_hostile_clients(void **state)
{
	unsigned port = free_port();
	unsigned char req[MR_NCCL_BOOT_REQ_FIXED + 16], reply[MR_NCCL_BOOT_REPLY_FIXED];
	int fds[43], nfd = 0;
	pid_t pids[3];
	(void)state;

	pids[0] = start_rank(port, 0, 3, TOKEN, 7, false);
	for (int i = 0; i < 40; i++) {
		fds[nfd] = connect_retry(port);
		assert_true(fds[nfd] >= 0);
		assert_true(write(fds[nfd++], "M", 1) == 1);
	}
	fds[nfd] = connect_retry(port);
	assert_true(write(fds[nfd++], "GET / HTTP/1.0\r\n\r\n", 18) == 18);
	size_t n = mr_nccl_boot_req_encode(req, 1, 3, "", 0);
	req[6] = 0xff, req[7] = 0xff; /* token length 65535 */
	fds[nfd] = connect_retry(port);
	assert_true(write(fds[nfd++], req, n) == (ssize_t)n);
	n = mr_nccl_boot_req_encode(req, 1, 3, "other-job", 9);
	int intruder = connect_retry(port);
	assert_true(write(intruder, req, n) == (ssize_t)n);
	fds[nfd++] = intruder;

	int64_t start = mr_now_ms();
	for (int r = 1; r < 3; r++)
		pids[r] = start_rank(port, r, 3, TOKEN, 7, false);
	for (int r = 0; r < 3; r++)
		assert_int_equal(wait_rank(pids[r]), CHILD_OK);
	int64_t took = mr_now_ms() - start;
	if (took >= 1900) /* the 2 s request bound: they waited for a slot to expire */
		fail_msg("the ranks took %lld ms to get the id past the slow connections", (long long)took);
	/* the intruder was answered with a refusal (or closed), never the id */
	ssize_t k = read(intruder, reply, sizeof(reply));
	if (k == (ssize_t)sizeof(reply))
		assert_int_not_equal(mr_get_le16(reply + 6), MR_NCCL_BOOT_OK);
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
}

/* The pure halves of serve_conn() and fetch_once() (fuzzed: tests/fuzz/fuzz_nccl_boot.c). */
static void test_judge_and_reply(void **state)
{
	struct mr_nccl_boot b;
	bool served[4] = { false, false, true, false };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	unsigned char hdr[MR_NCCL_BOOT_REPLY_FIXED];
	unsigned status = 99;
	(void)state;

	memset(&b, 0, sizeof(b));
	b.size = 4;
	memcpy(b.token, "tok", 3);
	b.token_len = 3;
	assert_int_equal(mr_nccl_boot_judge(&b, served, 1, 4, (const unsigned char *)"tok", 3), MR_NCCL_BOOT_OK);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 1, 4, (const unsigned char *)"to", 2), MR_NCCL_BOOT_BAD_TOKEN);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 1, 4, (const unsigned char *)"tokx", 4), MR_NCCL_BOOT_BAD_TOKEN);
	/* the token is judged before anything the peer claims */
	assert_int_equal(mr_nccl_boot_judge(&b, served, 9, 9, (const unsigned char *)"bad", 3), MR_NCCL_BOOT_BAD_TOKEN);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 1, 5, (const unsigned char *)"tok", 3), MR_NCCL_BOOT_BAD_SIZE);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 0, 4, (const unsigned char *)"tok", 3), MR_NCCL_BOOT_BAD_RANK);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 4, 4, (const unsigned char *)"tok", 3), MR_NCCL_BOOT_BAD_RANK);
	assert_int_equal(mr_nccl_boot_judge(&b, served, 2, 4, (const unsigned char *)"tok", 3), MR_NCCL_BOOT_DUP_RANK);

	memcpy(hdr, "MRNB\x01\x00\x00\x00\x80\x00\x00\x00", sizeof(hdr));
	assert_int_equal(mr_nccl_boot_reply_decode(hdr, &status, &err), 0);
	assert_int_equal(status, MR_NCCL_BOOT_OK);
	hdr[8] = 0x7f; /* an OK answer announcing 127 id bytes */
	assert_int_equal(mr_nccl_boot_reply_decode(hdr, &status, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "127 bytes"));
	mr_err_clear(&err);
	memcpy(hdr, "MRNB\x01\x00\x01\x00\x00\x00\x00\x00", sizeof(hdr));
	assert_int_equal(mr_nccl_boot_reply_decode(hdr, &status, &err), 0);
	assert_int_equal(status, MR_NCCL_BOOT_BAD_TOKEN);
	memcpy(hdr, "HTTP/1.0 200", sizeof(hdr));
	assert_int_equal(mr_nccl_boot_reply_decode(hdr, &status, &err), MESHRUN_E_PROTO);
	assert_non_null(strstr(err.msg, "bad answer header"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_decode_bounds),
		cmocka_unit_test(test_judge_and_reply),
		cmocka_unit_test(test_slow_and_hostile_clients),
		cmocka_unit_test(test_missing_vars_named),
		cmocka_unit_test(test_exchange_2),
		cmocka_unit_test(test_exchange_4),
		cmocka_unit_test(test_wrong_token_refused),
		cmocka_unit_test(test_rank0_absent_times_out),
		cmocka_unit_test(test_rank0_names_missing_ranks),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
