/*
 * io.c - the bottom of the TCP engine (tcp.h): its log line, peer address text,
 * the tuning of every connection's socket (the ring's and the mesh's) and the
 * non-blocking send, used by the engine's other files and both TCP backends.
 */
#include "common/compat.h"
#include "coll/tcp/tcp.h"
#include "common/port.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

void mr_tcp_log(const struct mr_tcp *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->verbose)
		return;
	int saved = errno;
	fprintf(stderr, "[%s] rank %d: ", r->who ? r->who : "ring", r->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	errno = saved;
}

const char *mr_tcp_peer_addr(const struct mr_tcp *r, int rank)
{
	return MR_RING_ADDR(&r->hosts, rank, 0)->text;
}

ssize_t mr_tcp_send_some(int fd, const void *buf, size_t len)
{
	return mr_send_nosig(fd, buf, len, MSG_DONTWAIT);
}

/*
 * Data connections get r->tcp_cc (MESHRUN_RING_TCP_CC, default "reno"): a ring
 * link is a dedicated neighbour link, and a loss-based congestion control
 * without pacing lets cwnd grow to the receive window at once. BBR (a common
 * system default) paces every socket from a timer, which on a veth or a
 * cable costs about a fifth of the CPU per byte and a third of the
 * throughput on 2 cores (bench/allreduce). Failure (a kernel without it, or
 * a name not in tcp_allowed_congestion_control for non-root) keeps the
 * system's choice.
 *
 * They also get a fixed send buffer (r->sndbuf, MESHRUN_RING_SNDBUF, default
 * 512K: 1 MiB once the kernel doubles it). Autotuned, a send buffer grows to
 * net.ipv4.tcp_wmem's maximum (4 MiB), so megabytes per connection queue up
 * at the receiver and have left the caches by the time it copies them out:
 * on the bench machine (bench/allreduce, 2 cores) the receive copies cost
 * 1.5-2x as much per byte, and 16 MiB all-reduces were 36% (2 ranks) and 49%
 * (4 ranks) slower than with the fixed buffer. A megabyte in flight still
 * fills a 40 Gb/s link with up to 200 us round trips (the kernel caps the
 * request at net.core.wmem_max, 208K on many distributions: 416K in flight,
 * 80 us).
 */
void mr_tcp_tune_socket(const struct mr_tcp *r, int fd, bool data)
{
	int one = 1;
	/* a margin after MESHRUN_TIMEOUT: the ring's own checks (watch.c,
	 * the lanes' heartbeats) fire at the timeout and name the link and its
	 * direction; the kernel's "Connection timed out" is the backstop (at the
	 * same moment it won that race about one run in five) */
	int64_t uto_ms = r->timeout_ms + MR_MAX(r->timeout_ms / 2, (int64_t)1000);
	unsigned int uto = (unsigned int)MR_MIN(uto_ms, (int64_t)UINT32_MAX);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* ENOTSUP where the kernel has no such option (macOS): logged, not fatal */
	if (data && r->tcp_cc[0] && mr_tcp_set_cc(fd, r->tcp_cc) < 0)
		mr_tcp_log(r, "TCP congestion control '%s' not set: %s (keeping the system's)", r->tcp_cc, strerror(errno));
	/* unacknowledged data for longer than that fails the socket (a pulled
	 * cable); without the option the ring's stall timer still does */
	(void)mr_tcp_user_timeout(fd, uto);
	if (data && r->sndbuf > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &r->sndbuf, sizeof(r->sndbuf)) < 0)
		mr_tcp_log(r, "send buffer of %d bytes not set: %s (keeping the kernel's autotuning)", r->sndbuf, strerror(errno));
}


void mr_tcp_log_tuning(const struct mr_tcp *r, int fd)
{
	char name[MR_TCP_CC_MAX + 1], cc[MR_TCP_CC_MAX + 3];
	int sb = 0;
	socklen_t sl = sizeof(sb);

	if (!r->verbose)
		return;
	if (mr_tcp_get_cc(fd, name, sizeof(name)) == 0)
		snprintf(cc, sizeof(cc), "'%s'", name);
	else /* no such option (macOS): the system's, whatever it is */
		snprintf(cc, sizeof(cc), "the system's");
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, &sl);
	mr_tcp_log(r, "data connections use TCP congestion control %s, send buffer %d bytes (%s)", cc, sb, r->sndbuf > 0 ? "fixed" : "autotuned");
}
