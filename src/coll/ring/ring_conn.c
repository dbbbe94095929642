/*
 * ring_conn.c - connection setup of the ring backend (ring_conn.h).
 *
 * Each rank listens on all its own addresses and connects to every address of
 * its right neighbour (one data connection per address, plus the control lane
 * on the first address); coll/tcp/conn.c runs both from one poll loop, with the
 * hello check, retries and refusals. The sockets are tuned by the engine
 * (tcp/io.c, as the mesh's are).
 */
#include "common/compat.h"
#include "coll/ring/ring_conn.h"
#include "coll/tcp/conn.h"
#include "common/err.h"

int mr_ring_connect_all(struct mr_tcp *r, struct meshrun_err *err)
{
	const int right = (r->rank + 1) % r->size, left = (r->rank + r->size - 1) % r->size;
	const struct mr_ring_addr **own = malloc((size_t)r->nconn * sizeof(*own));
	struct mr_conn_link links[2] = {
		{ .peer = right, .outgoing = true, .nconn = (uint32_t)r->nconn, .ndata = (unsigned)r->nconn,
		  .addrs = MR_RING_ADDR(&r->hosts, right, 0), .data_fd = r->right, .ctl_fd = &r->lane[MR_LANE_RIGHT].fd,
		  .peer_text = mr_tcp_peer_addr(r, right) },
		{ .peer = left, .outgoing = false, .nconn = (uint32_t)r->nconn, .ndata = (unsigned)r->nconn,
		  .data_fd = r->left, .ctl_fd = &r->lane[MR_LANE_LEFT].fd,
		  .peer_text = mr_tcp_peer_addr(r, left) },
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
		mr_tcp_tune_socket(r, r->left[i], true);
		mr_tcp_tune_socket(r, r->right[i], true);
	}
	mr_tcp_tune_socket(r, r->lane[MR_LANE_LEFT].fd, false);
	mr_tcp_tune_socket(r, r->lane[MR_LANE_RIGHT].fd, false);
	mr_tcp_log_tuning(r, r->left[0]);
	r->lane[MR_LANE_LEFT].peer = left;
	r->lane[MR_LANE_RIGHT].peer = right;
	mr_tcp_log(r, "connected: %d data connection(s) each way plus control lanes", r->nconn);
	return 0;
}
