/*
 * port.h - the portability layer: Linux and macOS behind one set of calls.
 *
 * Every interface the tree needs that one of its systems lacks is called
 * through here, and only port.c knows which one this build uses. The choice
 * is made at configure time by feature checks (cmake/port.cmake writes
 * MR_HAVE_* into port_config.h), never by OS name, in the manner of libuv's
 * uv__make_pipe / uv__cloexec and curl's curlx_ helpers. The build option
 * MESHRUN_PORTABLE_ONLY=ON turns off every Linux-only interface that has a
 * fallback, so CI on Linux runs the code that runs on a Mac.
 *
 * Conventions: actions return 0 (or an fd / a count) and -1 with errno, like
 * the system calls they replace; nothing here allocates or logs.
 */
#ifndef MR_PORT_H
#define MR_PORT_H

#include "common/compat.h"

#include <sys/socket.h>

/* Flags of mr_socket(), mr_socketpair() and mr_accept(). */
#define MR_SOCK_CLOEXEC 0x1
#define MR_SOCK_NONBLOCK 0x2

/* A pipe whose both ends are close-on-exec (pipe2, else pipe + fcntl). */
int mr_pipe_cloexec(int fds[2]);

/*
 * socket()/socketpair()/accept() with MR_SOCK_* flags applied atomically where
 * the system can (SOCK_CLOEXEC, accept4), else right after creation. Where
 * sockets have SO_NOSIGPIPE (macOS), it is set on every socket made here, so
 * neither mr_send_nosig() nor a write() on it can raise SIGPIPE.
 */
int mr_socket(int domain, int type, int flags);
int mr_socketpair(int domain, int type, int flags, int sv[2]);
int mr_accept(int lfd, int flags);

/*
 * send() that fails with EPIPE instead of raising SIGPIPE (a library must not
 * change the process's signal dispositions). flags are send()'s (MSG_DONTWAIT).
 * Retries on EINTR.
 */
ssize_t mr_send_nosig(int fd, const void *buf, size_t len, int flags);

/*
 * TCP knobs that only some kernels have. Each returns -1 with errno ENOTSUP
 * where this build has no such option (callers log it at debug level and go
 * on: they tune, they do not decide correctness).
 *   mr_tcp_set_cc/get_cc  congestion control by name (TCP_CONGESTION)
 *   mr_tcp_quickack       acknowledge at once (TCP_QUICKACK; no macOS knob)
 *   mr_tcp_user_timeout   fail a socket whose data stays unacknowledged ms
 *   mr_tcp_tx             what this end's TCP sent (struct mr_tcp_tx): bytes on the
 *                         wire so far, retransmissions included, and of them
 *                         retransmitted (Linux 4.19+ TCP_INFO tcpi_bytes_sent/_retrans;
 *                         macOS TCP_CONNECTION_INFO tcpi_txbytes/_txretransmitbytes):
 *                         not bytes written, which run a send buffer ahead; on Linux
 *                         also the segments in flight and the time since the last
 *                         acknowledgement (elsewhere 0 and -1: unknown)
 */
int mr_tcp_set_cc(int fd, const char *name);
int mr_tcp_get_cc(int fd, char *buf, size_t n);
int mr_tcp_quickack(int fd);
int mr_tcp_user_timeout(int fd, unsigned ms);
struct mr_tcp_tx {
	uint64_t sent, retrans;    /* bytes on the wire, of them retransmitted */
	uint32_t in_flight;        /* segments sent, not acknowledged; 0: none or unknown */
	int64_t ack_age_ms;        /* since the last acknowledgement; -1: unknown */
};
int mr_tcp_tx(int fd, struct mr_tcp_tx *t);

/*
 * The effective uid of the process at the other end of a connected unix
 * socket (getpeereid where the system has it: macOS, BSD; else SO_PEERCRED).
 * -1 with errno ENOSYS where this build has neither: callers refuse the peer.
 */
int mr_peer_uid(int fd, uid_t *uid);

struct stat;
/* A file's modification time in nanoseconds (st_mtim on Linux, st_mtimespec on macOS). */
int64_t mr_stat_mtime_ns(const struct stat *st);

/* n bytes from the system's random source (getrandom, arc4random_buf, /dev/urandom). */
int mr_random_bytes(void *buf, size_t n);

/* The last c in s[0..n), or NULL. */
void *mr_memrchr(const void *s, int c, size_t n);
/* The first c in s, or the terminating '\0' (never NULL). */
const char *mr_strchrnul(const char *s, int c);
/* A signal's description ("Killed"), or NULL when unknown. Not thread-safe
 * where it falls back to strsignal(). */
const char *mr_sigdescr(int sig);

/* This process's environment; in a shared library on macOS `environ` is not
 * linkable, so always ask here. */
char **mr_environ(void);

/* Processors this process may run on (its affinity where the system says), >= 1. */
long mr_cpu_count(void);

/*
 * The type of the filesystem holding path: its name where it is one other
 * hosts can mount ("nfs", "smbfs", "lustre", ...: *network true), else a name
 * or "0x<magic>" (*network false). -1 with errno when path cannot be stat'ed.
 */
int mr_fs_type(const char *path, char *name, size_t n, bool *network);

/* Is an NVIDIA GPU driver present on this machine? (No /proc needed; false on a Mac.) */
bool mr_have_nvidia_gpu(void);

/* A pidfd for pid (readable once it exits), or -1 with errno ENOSYS where the
 * kernel or this build has none (callers then poll waitpid on a tick). */
int mr_pidfd_open(pid_t pid);

/* Close every fd >= lowfd. Async-signal-safe: for a forked child before exec. */
void mr_close_from(int lowfd);

/*
 * A descriptor that poll() can wait on for fd's input. Where poll() works on
 * fd, that is fd itself (*relay stays NULL). Where it does not (macOS's poll()
 * answers POLLNVAL for a terminal, a character device: see its man page under
 * BUGS), a thread reads fd and writes what it read into a socket pair whose
 * other end is returned (libuv's select() thread for ttys solves the same).
 * The relay's end of the pair closes at fd's EOF or error.
 * mr_input_relay_free() stops the thread and closes the returned fd.
 * The portable-only build relays every terminal, so Linux CI runs that path.
 */
struct mr_input_relay;
int mr_pollable_input(int fd, int *out_fd, struct mr_input_relay **relay);
void mr_input_relay_free(struct mr_input_relay *relay);

/* "native" or "portable": which set of interfaces this build uses (for --version / logs). */
const char *mr_port_flavour(void);

#endif
