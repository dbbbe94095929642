/*
 * Unit tests for src/common/port.c, the portability layer. The same tests run
 * in the native build (Linux interfaces) and in the portable-only build (the
 * fallbacks a Mac uses): each checks the behaviour callers rely on, whichever
 * interface gives it.
 */
#include "common/compat.h"
#include "common/port.h"

#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static bool is_cloexec(int fd)
{
	return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

static bool is_nonblock(int fd)
{
	return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

static bool portable(void)
{
	return !strcmp(mr_port_flavour(), "portable");
}

static void test_pipe_and_socketpair(void **state)
{
	int p[2], sv[2];

	(void)state;
	assert_int_equal(mr_pipe_cloexec(p), 0);
	assert_true(is_cloexec(p[0]) && is_cloexec(p[1]));
	assert_false(is_nonblock(p[0]));
	close(p[0]);
	close(p[1]);

	assert_int_equal(mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, sv), 0);
	assert_true(is_cloexec(sv[0]) && is_cloexec(sv[1]));
	assert_false(is_nonblock(sv[0]) || is_nonblock(sv[1]));
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK, sv), 0);
	assert_true(is_nonblock(sv[0]) && is_nonblock(sv[1]));
	close(sv[0]);
	close(sv[1]);
}

/* A loopback listener on an ephemeral port; *addr gets its address. */
static int listener(struct sockaddr_in *addr, int flags)
{
	socklen_t len = sizeof(*addr);
	int fd = mr_socket(AF_INET, SOCK_STREAM, flags);

	assert_true(fd >= 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)addr, &len), 0);
	return fd;
}

static void test_accept_flags(void **state)
{
	struct sockaddr_in a;
	int lfd, c1, c2, s;

	(void)state;
	/* a non-blocking listener: BSD's accept() would pass O_NONBLOCK on */
	lfd = listener(&a, MR_SOCK_CLOEXEC | MR_SOCK_NONBLOCK);
	assert_true(is_cloexec(lfd) && is_nonblock(lfd));
	assert_int_equal(mr_accept(lfd, MR_SOCK_CLOEXEC), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);

	c1 = mr_socket(AF_INET, SOCK_STREAM, MR_SOCK_CLOEXEC);
	c2 = mr_socket(AF_INET, SOCK_STREAM, MR_SOCK_CLOEXEC);
	assert_int_equal(connect(c1, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(connect(c2, (struct sockaddr *)&a, sizeof(a)), 0);
	s = mr_accept(lfd, MR_SOCK_CLOEXEC);
	assert_true(s >= 0);
	assert_true(is_cloexec(s));
	assert_false(is_nonblock(s)); /* only what was asked for */
	close(s);
	s = mr_accept(lfd, MR_SOCK_NONBLOCK);
	assert_true(s >= 0);
	assert_true(is_nonblock(s));
	assert_false(is_cloexec(s));
	close(s);
	close(c1);
	close(c2);
	close(lfd);
}

static void test_send_nosig(void **state)
{
	char buf[4096] = { 0 };
	struct sigaction dfl = { 0 }, old;
	int sv[2];
	ssize_t n = 0;

	(void)state;
	/* SIGPIPE at its default: if any path raised it, this test process dies */
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &dfl, &old);
	assert_int_equal(mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, sv), 0);
	assert_int_equal(mr_send_nosig(sv[0], "x", 1, 0), 1);
	close(sv[1]);
	for (int i = 0; i < 4 && n >= 0; i++)
		n = mr_send_nosig(sv[0], buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, -1);
	assert_int_equal(errno, EPIPE);
	close(sv[0]);
	sigaction(SIGPIPE, &old, NULL);
}

static void test_tcp_knobs(void **state)
{
	char cc[32] = "";
	int fd = mr_socket(AF_INET, SOCK_STREAM, MR_SOCK_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	if (portable()) {
		/* the macOS answer: no such option, said as ENOTSUP */
		assert_int_equal(mr_tcp_set_cc(fd, "reno"), -1);
		assert_int_equal(errno, ENOTSUP);
		assert_int_equal(mr_tcp_get_cc(fd, cc, sizeof(cc)), -1);
		assert_int_equal(mr_tcp_quickack(fd), -1);
		assert_int_equal(mr_tcp_user_timeout(fd, 1000), -1);
		assert_int_equal(errno, ENOTSUP);
	} else {
		assert_int_equal(mr_tcp_set_cc(fd, "reno"), 0);
		assert_int_equal(mr_tcp_get_cc(fd, cc, sizeof(cc)), 0);
		assert_string_equal(cc, "reno");
		assert_int_equal(mr_tcp_set_cc(fd, "no-such-cc"), -1);
		assert_int_equal(mr_tcp_user_timeout(fd, 1000), 0);
	}
	close(fd);
}

static void test_strings_and_signals(void **state)
{
	const char s[] = "a/b/c";

	(void)state;
	assert_ptr_equal(mr_memrchr(s, '/', 5), s + 3);
	assert_ptr_equal(mr_memrchr(s, '/', 3), s + 1);
	assert_null(mr_memrchr(s, '/', 1));
	assert_null(mr_memrchr(s, 'x', 0));
	assert_ptr_equal(mr_strchrnul(s, '/'), s + 1);
	assert_ptr_equal(mr_strchrnul(s, 'x'), s + 5);
	assert_non_null(mr_sigdescr(SIGKILL));
	assert_string_equal(mr_sigdescr(SIGKILL), "Killed");
	assert_null(mr_sigdescr(0));
}

static void test_system(void **state)
{
	unsigned char a[32] = { 0 }, b[32] = { 0 };
	char name[64];
	bool network = true;
	char **env;
	bool found = false;

	(void)state;
	assert_int_equal(mr_random_bytes(a, sizeof(a)), 0);
	assert_int_equal(mr_random_bytes(b, sizeof(b)), 0);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_true(mr_cpu_count() >= 1);

	assert_int_equal(mr_fs_type("/", name, sizeof(name), &network), 0);
	assert_true(name[0] != '\0');
	assert_int_equal(mr_fs_type("/no/such/dir", name, sizeof(name), &network), -1);
	assert_int_equal(errno, ENOENT);

	setenv("MR_PORT_TEST", "42", 1);
	env = mr_environ();
	for (size_t i = 0; env && env[i]; i++)
		found |= !strcmp(env[i], "MR_PORT_TEST=42");
	assert_true(found);
}

static void test_close_from(void **state)
{
	int p[2];
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(mr_pipe_cloexec(p), 0);
	pid = fork();
	if (pid == 0) {
		int low = p[0] < p[1] ? p[0] : p[1];

		mr_close_from(low);
		_exit(fcntl(p[0], F_GETFD) < 0 && fcntl(p[1], F_GETFD) < 0 && errno == EBADF ? 0 : 1);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(p[0]);
	close(p[1]);
}

/* A terminal's input through mr_pollable_input(): the fd itself where poll()
 * works on terminals, a relay in the portable build (as on macOS). */
static void test_pollable_tty(void **state)
{
	struct mr_input_relay *relay = NULL;
	struct pollfd p;
	char buf[16];
	int m, s, fd;
	ssize_t n;

	(void)state;
	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		skip(); /* no ptys in this container */
	}
	s = open(ptsname(m), O_RDWR | O_NOCTTY);
	assert_true(s >= 0);
	assert_int_equal(mr_pollable_input(s, &fd, &relay), 0);
	if (portable()) {
		assert_non_null(relay);
		assert_int_not_equal(fd, s);
	} else {
		assert_null(relay);
		assert_int_equal(fd, s);
	}
	assert_int_equal(write(m, "hi\n", 3), 3);
	p.fd = fd;
	p.events = POLLIN;
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_true(p.revents & POLLIN);
	n = read(fd, buf, sizeof(buf));
	assert_int_equal(n, 3);
	assert_memory_equal(buf, "hi\n", 3);
	/* the relay thread now waits in read() on the terminal: free must end it */
	mr_input_relay_free(relay);
	close(s);
	close(m);

	/* a pipe: poll() works on it everywhere, so no relay */
	{
		int pp[2];

		assert_int_equal(mr_pipe_cloexec(pp), 0);
		assert_int_equal(mr_pollable_input(pp[0], &fd, &relay), 0);
		assert_null(relay);
		assert_int_equal(fd, pp[0]);
		close(pp[0]);
		close(pp[1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipe_and_socketpair),
		cmocka_unit_test(test_accept_flags),
		cmocka_unit_test(test_send_nosig),
		cmocka_unit_test(test_tcp_knobs),
		cmocka_unit_test(test_strings_and_signals),
		cmocka_unit_test(test_system),
		cmocka_unit_test(test_close_from),
		cmocka_unit_test(test_pollable_tty),
	};

	printf("port flavour: %s\n", mr_port_flavour());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
