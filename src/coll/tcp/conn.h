/*
 * conn.h - connection setup shared by the TCP backends (ring and mesh).
 *
 * A rank listens on its own addresses and, from one poll loop, connects to
 * the peers it calls while accepting the peers that call it: no ordering
 * between ranks, so none waits on another. Every connection starts with the
 * hello of coll/tcp/wire.h (job token, group size, rank, lane): a stray, garbage
 * or foreign-job connection is refused (closed, logged) and setup goes on;
 * whoever answers at a peer's address with a wrong hello fails the setup.
 * Connects that fail (the peer is not listening yet) are retried with
 * backoff (20 ms doubling to 500 ms) until timeout_ms (MESHRUN_TIMEOUT).
 *
 * The plan names each peer link: the peer's rank, the direction (we call, or
 * it calls), the hello's nconn value both sides must agree on, and ndata data
 * lanes plus one control lane (MR_LANE_P2P). Outgoing lane k goes to
 * addrs[k] (the control lane to addrs[0]). Two links with the same peer are
 * fine as long as their directions differ (the ring of two ranks).
 *
 * Ownership: the plan's arrays are the caller's. On success every data_fd[k]
 * and *ctl_fd holds a connected non-blocking socket the caller now owns; on
 * failure none is set (the fds stay -1).
 */
#ifndef MR_COLL_CONN_H
#define MR_COLL_CONN_H

#include "common/compat.h"
#include "coll/env.h"
#include "meshrun/err.h"

struct mr_conn_link {
	int peer;                        /* rank at the other end */
	bool outgoing;                   /* we connect (true) or accept (false) */
	uint32_t nconn;                  /* the hello's nconn on this link */
	unsigned ndata;                  /* data lanes 0..ndata-1 */
	const struct mr_ring_addr *addrs; /* outgoing: ndata addresses (lane k -> addrs[k]) */
	int *data_fd;                    /* ndata slots, filled on success */
	int *ctl_fd;                     /* the control lane, filled on success */
	const char *peer_text;           /* the peer's address in messages */
};

struct mr_conn_plan {
	int rank, size;
	const char *token;
	size_t token_len;
	int64_t timeout_ms;
	const char *who;                 /* "ring", "mesh": prefixes log lines and errors */
	bool verbose;                    /* log refusals and progress to stderr */
	const struct mr_ring_addr *const *listen; /* own addresses to listen on */
	int nlisten;
	struct mr_conn_link *links;
	int nlinks;
};

/* Connect every lane of every link (see above). Errors name the peer and address. */
int mr_conn_setup(const struct mr_conn_plan *p, struct meshrun_err *err);

/* "10.0.0.2:5000" of the socket's peer into buf ("?:0" when unknown). */
void mr_conn_peer_text(int fd, char *buf, size_t n);

#endif
