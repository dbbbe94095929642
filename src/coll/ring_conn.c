/*
 * ring_conn.c - connection setup of the ring backend (ring_impl.h).
 *
 * Each rank listens on all its own addresses and connects to every address of
 * its right neighbour (one data connection per address, plus the control lane
 * on the first address); coll/conn.c runs both from one poll loop, with the
 * hello check, retries and refusals. The sockets are tuned here (also for the
 * mesh's connections, tcpmesh.c).
 */
#include "common/compat.h"
#include "coll/conn.h"
#include "coll/ring_impl.h"
#include "common/err.h"
#include "common/port.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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
void mr_ring_tune_socket(const struct mr_ring *r, int fd, bool data)
{
	int one = 1;
	/* a margin after MESHRUN_TIMEOUT: the ring's own checks (ring_watch.c,
	 * the lanes' heartbeats) fire at the timeout and name the link and its
	 * direction; the kernel's "Connection timed out" is the backstop (at the
	 * same moment it won that race about one run in five) */
	int64_t uto_ms = r->timeout_ms + MR_MAX(r->timeout_ms / 2, (int64_t)1000);
	unsigned int uto = (unsigned int)MR_MIN(uto_ms, (int64_t)UINT32_MAX);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* ENOTSUP where the kernel has no such option (macOS): logged, not fatal */
	if (data && r->tcp_cc[0] && mr_tcp_set_cc(fd, r->tcp_cc) < 0)
		mr_ring_log(r, "TCP congestion control '%s' not set: %s (keeping the system's)", r->tcp_cc, strerror(errno));
	/* unacknowledged data for longer than that fails the socket (a pulled
	 * cable); without the option the ring's stall timer still does */
	(void)mr_tcp_user_timeout(fd, uto);
	if (data && r->sndbuf > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &r->sndbuf, sizeof(r->sndbuf)) < 0)
		mr_ring_log(r, "send buffer of %d bytes not set: %s (keeping the kernel's autotuning)", r->sndbuf, strerror(errno));
}


void mr_ring_log_tuning(const struct mr_ring *r, int fd)
{
	char name[MR_RING_CC_MAX + 1], cc[MR_RING_CC_MAX + 3];
	int sb = 0;
	socklen_t sl = sizeof(sb);

	if (!r->verbose)
		return;
	if (mr_tcp_get_cc(fd, name, sizeof(name)) == 0)
		snprintf(cc, sizeof(cc), "'%s'", name);
	else /* no such option (macOS): the system's, whatever it is */
		snprintf(cc, sizeof(cc), "the system's");
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, &sl);
	mr_ring_log(r, "data connections use TCP congestion control %s, send buffer %d bytes (%s)", cc, sb, r->sndbuf > 0 ? "fixed" : "autotuned");
}

int mr_ring_connect_all(struct mr_ring *r, struct meshrun_err *err)
{
	const int right = (r->rank + 1) % r->size, left = (r->rank + r->size - 1) % r->size;
	const struct mr_ring_addr **own = malloc((size_t)r->nconn * sizeof(*own));
	struct mr_conn_link links[2] = {
		{ .peer = right, .outgoing = true, .nconn = (uint32_t)r->nconn, .ndata = (unsigned)r->nconn,
		  .addrs = MR_RING_ADDR(&r->hosts, right, 0), .data_fd = r->right, .ctl_fd = &r->lane[MR_LANE_RIGHT].fd,
		  .peer_text = mr_ring_peer_addr(r, right) },
		{ .peer = left, .outgoing = false, .nconn = (uint32_t)r->nconn, .ndata = (unsigned)r->nconn,
		  .data_fd = r->left, .ctl_fd = &r->lane[MR_LANE_LEFT].fd,
		  .peer_text = mr_ring_peer_addr(r, left) },
	};
	struct mr_conn_plan plan = {
		.rank = r->rank, .size = r->size, .token = r->token, .token_len = r->token_len,
		.timeout_ms = r->timeout_ms, .who = "ring", .verbose = r->verbose,
		.listen = own, .nlisten = r->nconn, .links = links, .nlinks = 2,
	};
	int rc;

	if (!own)
		return mr_err_set(err, MESHRUN_E_NOMEM, "ring setup: out of memory");
	for (int i = 0; i < r->nconn; i++)
		own[i] = MR_RING_ADDR(&r->hosts, r->rank, i);
	rc = mr_conn_setup(&plan, err);
	free(own);
	if (rc < 0)
		return rc;
	for (int i = 0; i < r->nconn; i++) {
		mr_ring_tune_socket(r, r->left[i], true);
		mr_ring_tune_socket(r, r->right[i], true);
	}
	mr_ring_tune_socket(r, r->lane[MR_LANE_LEFT].fd, false);
	mr_ring_tune_socket(r, r->lane[MR_LANE_RIGHT].fd, false);
	mr_ring_log_tuning(r, r->left[0]);
	r->lane[MR_LANE_LEFT].peer = left;
	r->lane[MR_LANE_RIGHT].peer = right;
	mr_ring_log(r, "connected: %d data connection(s) each way plus control lanes", r->nconn);
	return 0;
}
