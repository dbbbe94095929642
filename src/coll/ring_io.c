/*
 * ring_io.c - the bottom of the ring backend: its log line and socket helpers, used
 * by ring.c, ring_conn.c and ring_p2p.c (ring_impl.h).
 */
#include "common/compat.h"
#include "coll/ring_impl.h"
#include "common/port.h"

#include <sys/socket.h>

void mr_ring_log(const struct mr_ring *r, const char *fmt, ...)
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

const char *mr_ring_peer_addr(const struct mr_ring *r, int rank)
{
	return MR_RING_ADDR(&r->hosts, rank, 0)->text;
}

ssize_t mr_ring_send_some(int fd, const void *buf, size_t len)
{
	return mr_send_nosig(fd, buf, len, MSG_DONTWAIT);
}
