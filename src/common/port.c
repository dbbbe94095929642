/*
 * port.c - the portability layer (see port.h): the one file that knows which
 * system interfaces this build has. Each function takes the Linux interface
 * where port_config.h says it is there, else the POSIX or macOS way.
 */
#include "common/compat.h"
#include "common/port.h"
#include "common/port_config.h"

#include <fcntl.h>
#include <netinet/in.h>
#if defined(__linux__)
/* the kernel's struct tcp_info: glibc's <netinet/tcp.h> stops before
 * tcpi_bytes_sent (mr_tcp_tx); it defines the same TCP_* options */
#include <linux/tcp.h>
#else
#include <netinet/tcp.h>
#endif
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#if MR_HAVE_GETRANDOM
#include <sys/random.h>
#endif
#if MR_HAVE_PIDFD_OPEN || MR_HAVE_CLOSE_RANGE
#include <sys/syscall.h>
#endif
#if MR_HAVE_SYS_VFS_H
#include <sys/vfs.h>
#else
#include <sys/param.h>
#include <sys/mount.h>
#endif
#if MR_HAVE_NSGETENVIRON
#include <crt_externs.h>
#else
extern char **environ;
#endif

const char *mr_port_flavour(void)
{
	return MR_PORTABLE_ONLY ? "portable" : "native";
}

static MR_UNUSED int set_fd_flags(int fd, int flags)
{
	int fl;

	if (flags & MR_SOCK_CLOEXEC) {
		fl = fcntl(fd, F_GETFD);
		if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
			return -1;
	}
	if (flags & MR_SOCK_NONBLOCK) {
		fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
			return -1;
	}
	return 0;
}

/* Close fd keeping errno (the error being reported is the earlier one). */
static MR_UNUSED int fail_close(int fd)
{
	int saved = errno;

	close(fd);
	errno = saved;
	return -1;
}

int mr_pipe_cloexec(int fds[2])
{
#if MR_HAVE_PIPE2
	return pipe2(fds, O_CLOEXEC);
#else
	/* not atomic: a fork() in another thread between the calls can inherit
	 * the pipe (libuv accepts the same on macOS); our fork()s run the exec
	 * children through mr_close_from() or posix_spawn's file actions. */
	if (pipe(fds) < 0)
		return -1;
	if (set_fd_flags(fds[0], MR_SOCK_CLOEXEC) < 0 || set_fd_flags(fds[1], MR_SOCK_CLOEXEC) < 0) {
		fail_close(fds[1]);
		return fail_close(fds[0]);
	}
	return 0;
#endif
}

/*
 * Where sockets have SO_NOSIGPIPE (macOS, BSD), set it even when send() has
 * MSG_NOSIGNAL: macOS's headers define MSG_NOSIGNAL only from macOS 12 on,
 * older kernels may not honour it, and write() on a socket knows no flags.
 */
static int set_nosigpipe(int fd)
{
#if MR_HAVE_SO_NOSIGPIPE
	int one = 1;

	return setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#else
	(void)fd;
	return 0;
#endif
}

int mr_socket(int domain, int type, int flags)
{
	int fd;

#if MR_HAVE_SOCK_CLOEXEC
	fd = socket(domain, type | (flags & MR_SOCK_CLOEXEC ? SOCK_CLOEXEC : 0) |
				    (flags & MR_SOCK_NONBLOCK ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
#else
	fd = socket(domain, type, 0);
	if (fd < 0)
		return -1;
	if (set_fd_flags(fd, flags) < 0)
		return fail_close(fd);
#endif
	if (set_nosigpipe(fd) < 0)
		return fail_close(fd);
	return fd;
}

int mr_socketpair(int domain, int type, int flags, int sv[2])
{
#if MR_HAVE_SOCK_CLOEXEC
	if (socketpair(domain, type | (flags & MR_SOCK_CLOEXEC ? SOCK_CLOEXEC : 0) |
				       (flags & MR_SOCK_NONBLOCK ? SOCK_NONBLOCK : 0), 0, sv) < 0)
		return -1;
#else
	if (socketpair(domain, type, 0, sv) < 0)
		return -1;
	if (set_fd_flags(sv[0], flags) < 0 || set_fd_flags(sv[1], flags) < 0)
		goto fail;
#endif
	if (set_nosigpipe(sv[0]) < 0 || set_nosigpipe(sv[1]) < 0)
		goto fail;
	return 0;
fail:
	fail_close(sv[1]);
	return fail_close(sv[0]);
}

int mr_accept(int lfd, int flags)
{
	int fd;

#if MR_HAVE_ACCEPT4
	do
		fd = accept4(lfd, NULL, NULL, (flags & MR_SOCK_CLOEXEC ? SOCK_CLOEXEC : 0) |
						      (flags & MR_SOCK_NONBLOCK ? SOCK_NONBLOCK : 0));
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -1;
#else
	do
		fd = accept(lfd, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -1;
	/* BSD accept() inherits O_NONBLOCK from the listener, Linux's does not:
	 * set both flags to what was asked either way */
	if (set_fd_flags(fd, flags) < 0)
		return fail_close(fd);
	if (!(flags & MR_SOCK_NONBLOCK)) {
		int fl = fcntl(fd, F_GETFL);

		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return fail_close(fd);
	}
#endif
	if (set_nosigpipe(fd) < 0)
		return fail_close(fd);
	return fd;
}

#if !MR_HAVE_MSG_NOSIGNAL && !MR_HAVE_SO_NOSIGPIPE
/*
 * Neither knob (the portable build on Linux): block SIGPIPE in this thread
 * around the send, and take a SIGPIPE that the send raised off the pending
 * set before unblocking (the way curl's sigpipe_ignore and OpenSSL's
 * BIO_sock do it). A SIGPIPE that was already pending stays pending.
 */
static ssize_t send_sigpipe_blocked(int fd, const void *buf, size_t len, int flags)
{
	sigset_t pipe_set, old, pending;
	bool was_pending;
	ssize_t n;
	int e, sig;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	n = send(fd, buf, len, flags);
	e = errno;
	if (n < 0 && e == EPIPE && !was_pending) {
		sigpending(&pending);
		if (sigismember(&pending, SIGPIPE))
			sigwait(&pipe_set, &sig);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return n;
}
#endif

ssize_t mr_send_nosig(int fd, const void *buf, size_t len, int flags)
{
	ssize_t n;

	do {
#if MR_HAVE_MSG_NOSIGNAL
		n = send(fd, buf, len, flags | MSG_NOSIGNAL);
#elif MR_HAVE_SO_NOSIGPIPE
		n = send(fd, buf, len, flags); /* SO_NOSIGPIPE set by mr_socket & co */
#else
		n = send_sigpipe_blocked(fd, buf, len, flags);
#endif
	} while (n < 0 && errno == EINTR);
	return n;
}

int mr_tcp_set_cc(int fd, const char *name)
{
#if MR_HAVE_TCP_CONGESTION
	return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
#else
	(void)fd;
	(void)name;
	errno = ENOTSUP;
	return -1;
#endif
}

int mr_tcp_get_cc(int fd, char *buf, size_t n)
{
#if MR_HAVE_TCP_CONGESTION
	socklen_t len = (socklen_t)(n ? n - 1 : 0);

	if (!n || getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) < 0)
		return -1;
	buf[MR_MIN((size_t)len, n - 1)] = '\0';
	return 0;
#else
	(void)fd;
	(void)buf;
	(void)n;
	errno = ENOTSUP;
	return -1;
#endif
}

int mr_tcp_quickack(int fd)
{
#if MR_HAVE_TCP_QUICKACK
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
#else
	(void)fd;
	errno = ENOTSUP;
	return -1;
#endif
}

int mr_tcp_user_timeout(int fd, unsigned ms)
{
#if MR_HAVE_TCP_USER_TIMEOUT
	return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
#else
	(void)fd;
	(void)ms;
	errno = ENOTSUP;
	return -1;
#endif
}

int mr_tcp_tx(int fd, struct mr_tcp_tx *t)
{
#if MR_HAVE_TCP_INFO && defined(__linux__)
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	/* the byte counts came with Linux 4.19; before, a shorter struct */
	if (len < offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof(ti.tcpi_bytes_retrans)) {
		errno = ENOTSUP;
		return -1;
	}
	t->sent = ti.tcpi_bytes_sent;
	t->retrans = ti.tcpi_bytes_retrans;
	t->in_flight = ti.tcpi_unacked;
	t->ack_age_ms = ti.tcpi_last_ack_recv;
	return 0;
#elif MR_HAVE_TCP_CONNECTION_INFO
	struct tcp_connection_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONNECTION_INFO, &ti, &len) < 0)
		return -1;
	t->sent = ti.tcpi_txbytes;
	t->retrans = ti.tcpi_txretransmitbytes;
	t->in_flight = 0;
	t->ack_age_ms = -1;
	return 0;
#else
	(void)fd;
	memset(t, 0, sizeof(*t));
	t->ack_age_ms = -1;
	errno = ENOTSUP;
	return -1;
#endif
}

int64_t mr_stat_mtime_ns(const struct stat *st)
{
#if !MR_HAVE_STAT_MTIM
	return (int64_t)st->st_mtimespec.tv_sec * 1000000000 + st->st_mtimespec.tv_nsec;
#else
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
#endif
}

int mr_peer_uid(int fd, uid_t *uid)
{
#if MR_HAVE_GETPEEREID
	gid_t gid;

	return getpeereid(fd, uid, &gid);
#elif MR_HAVE_SO_PEERCRED
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -1;
	*uid = cred.uid;
	return 0;
#else
	(void)fd;
	(void)uid;
	errno = ENOSYS;
	return -1;
#endif
}

int mr_random_bytes(void *buf, size_t n)
{
#if MR_HAVE_GETRANDOM
	unsigned char *p = buf;

	while (n) {
		ssize_t got = getrandom(p, n, 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got;
		n -= (size_t)got;
	}
	return 0;
#elif MR_HAVE_ARC4RANDOM_BUF
	arc4random_buf(buf, n);
	return 0;
#else
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	unsigned char *p = buf;

	if (fd < 0)
		return -1;
	while (n) {
		ssize_t got = read(fd, p, n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got == 0)
				errno = EIO;
			return fail_close(fd);
		}
		p += got;
		n -= (size_t)got;
	}
	close(fd);
	return 0;
#endif
}

void *mr_memrchr(const void *s, int c, size_t n)
{
#if MR_HAVE_MEMRCHR
	return memrchr(s, c, n);
#else
	const unsigned char *p = s;

	while (n--)
		if (p[n] == (unsigned char)c)
			return (void *)(p + n);
	return NULL;
#endif
}

const char *mr_strchrnul(const char *s, int c)
{
#if MR_HAVE_STRCHRNUL
	return strchrnul(s, c);
#else
	const char *p = strchr(s, c);

	return p ? p : s + strlen(s);
#endif
}

const char *mr_sigdescr(int sig)
{
#if MR_HAVE_SIGDESCR_NP
	return sigdescr_np(sig);
#else
	/* strsignal() answers "Unknown signal N" for what it does not know */
	const char *d = sig > 0 && sig < NSIG ? strsignal(sig) : NULL;

	return d && strncmp(d, "Unknown signal", 14) ? d : NULL;
#endif
}

char **mr_environ(void)
{
#if MR_HAVE_NSGETENVIRON
	return *_NSGetEnviron();
#else
	return environ;
#endif
}

long mr_cpu_count(void)
{
	long n;

#if MR_HAVE_SCHED_GETAFFINITY
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set))
		return CPU_COUNT(&set);
#endif
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

#if MR_HAVE_STATFS_FSTYPENAME
/* f_fstypename of filesystems that other hosts can mount (macOS, BSD). */
static const char *const network_fs[] = {
	"nfs", "smbfs", "afpfs", "webdav", "cifs", "lustre", "ceph", "9p", "osxfuse", "macfuse",
};
#else
/* statfs f_type of filesystems that other hosts can mount (linux/magic.h). */
static const struct {
	unsigned long magic;
	const char *name;
} network_fs[] = {
	{ 0x6969, "nfs" },	  { 0x517B, "smb" },	     { 0xFF534D42, "cifs" },
	{ 0xFE534D42, "smb2" },	  { 0x0BD00BD0, "lustre" },  { 0x47504653, "gpfs" },
	{ 0x19830326, "beegfs" }, { 0x00C36400, "ceph" },    { 0x5346414F, "afs" },
	{ 0x01021997, "9p" },	  { 0x65735546, "fuse" },    { 0x7461636F, "ocfs2" },
	{ 0x01161970, "gfs2" },	  { 0x20030528, "orangefs" },
};
#endif

int mr_fs_type(const char *path, char *name, size_t n, bool *network)
{
	struct statfs sf;

	*network = false;
	if (statfs(path, &sf) < 0)
		return -1;
#if MR_HAVE_STATFS_FSTYPENAME
	snprintf(name, n, "%s", sf.f_fstypename);
	for (size_t i = 0; i < ARRAY_SIZE(network_fs); i++)
		if (!strcmp(sf.f_fstypename, network_fs[i]))
			*network = true;
#else
	snprintf(name, n, "0x%lx", (unsigned long)sf.f_type);
	for (size_t i = 0; i < ARRAY_SIZE(network_fs); i++) {
		if ((unsigned long)sf.f_type == network_fs[i].magic) {
			snprintf(name, n, "%s", network_fs[i].name);
			*network = true;
		}
	}
#endif
	return 0;
}

bool mr_have_nvidia_gpu(void)
{
	/* the device node the driver creates; /proc's entry is a second witness
	 * where there is a /proc (containers without /dev passthrough have it) */
	return access("/dev/nvidia0", F_OK) == 0 || access("/proc/driver/nvidia/version", R_OK) == 0;
}

struct mr_input_relay {
	pthread_t thread;
	int src;      /* the caller's fd, read by the thread (not ours to close) */
	int fds[2];   /* [0] returned to the caller, [1] written by the thread */
};

static void *relay_main(void *arg)
{
	struct mr_input_relay *r = arg;
	char buf[4096];

	for (;;) {
		ssize_t n = read(r->src, buf, sizeof(buf)); /* a cancellation point */

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = mr_send_nosig(r->fds[1], buf + off, (size_t)(n - off), 0);

			if (w < 0) /* the caller closed its end */
				goto out;
			off += w;
		}
	}
out:
	shutdown(r->fds[1], SHUT_WR); /* EOF to the reader; the fd is closed by free */
	return NULL;
}

/* Does poll() report fd as unusable (POLLNVAL) although fd is open? */
static bool poll_refuses(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLNVAL) && fcntl(fd, F_GETFD) >= 0;
}

int mr_pollable_input(int fd, int *out_fd, struct mr_input_relay **relay)
{
	struct mr_input_relay *r;
	int rc;

	*relay = NULL;
	*out_fd = fd;
	if (!(MR_PORTABLE_ONLY && isatty(fd)) && !poll_refuses(fd))
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	r->src = fd;
	if (mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, r->fds) < 0) {
		free(r);
		return -1;
	}
	rc = pthread_create(&r->thread, NULL, relay_main, r);
	if (rc != 0) {
		close(r->fds[0]);
		close(r->fds[1]);
		free(r);
		errno = rc;
		return -1;
	}
	*out_fd = r->fds[0];
	*relay = r;
	return 0;
}

void mr_input_relay_free(struct mr_input_relay *r)
{
	if (!r)
		return;
	/* the thread may sit in read() on a terminal nobody types into */
	pthread_cancel(r->thread);
	pthread_join(r->thread, NULL);
	close(r->fds[0]);
	close(r->fds[1]);
	free(r);
}

int mr_pidfd_open(pid_t pid)
{
#if MR_HAVE_PIDFD_OPEN
	return (int)syscall(SYS_pidfd_open, pid, 0); /* always close-on-exec */
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

void mr_close_from(int lowfd)
{
	long max;

#if MR_HAVE_CLOSE_RANGE
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
#endif
	max = sysconf(_SC_OPEN_MAX);
	for (int fd = lowfd; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
		(void)close(fd);
}
