/*
 * ring_conn.h - the ring backend's connections (ring_conn.c), over the TCP
 * engine (coll/tcp/tcp.h, coll/tcp/conn.h).
 *
 * Before: r's control plane initialised (mr_tcp_ctl_init), two lanes
 * allocated (mr_tcp_lanes_alloc), r->hosts loaded, rank/size/nconn set and
 * r->left/r->right holding nconn slots each. On success left[]/right[] hold
 * the data connections to the two neighbours and lane[MR_LANE_LEFT/RIGHT]
 * the control lanes (peers set), all tuned (mr_tcp_tune_socket) and owned by
 * r; on failure none is set (conn.h's contract), err names the neighbour.
 */
#ifndef MR_COLL_RING_RING_CONN_H
#define MR_COLL_RING_RING_CONN_H

#include "common/compat.h"
#include "coll/tcp/tcp.h"
#include "meshrun/err.h"

int mr_ring_connect_all(struct mr_tcp *r, struct meshrun_err *err);

#endif
