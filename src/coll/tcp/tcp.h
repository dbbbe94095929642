/*
 * tcp.h - the TCP engine both TCP backends run on: the ring (coll/ring/) and
 * the mesh (coll/mesh/) include this header and never each other's (not a
 * public contract).
 *
 *   conn.c       connection setup: listen, connect, accept, hello exchange (conn.h)
 *   wire.c       the hello and the control-lane frames (wire.h)
 *   ctl.c        the control plane's init (its environment, the pipes) and release
 *   p2p.c        the progress thread: control lanes, point-to-point, aborts
 *   ring_sched.c the ring schedule on left/right: the ring backend's collectives
 *                and the all-reduce the mesh falls back to (layout: coll/ring.h)
 *   watch.c      the data connections' stall check in whole units (ring and mesh)
 *   io.c         the bottom: log line, peer address text, socket tuning,
 *                non-blocking send
 *
 * A backend owns a struct mr_tcp (the mesh embeds one as its control plane):
 * lanes in ring order (two, MR_LANE_LEFT/MR_LANE_RIGHT, peers beyond them
 * reached by forwarding) or, with `direct` set, one per peer (the mesh).
 * The backend makes its own data connections (over conn.h) and fills
 * left/right where it runs the ring schedule.
 *
 * Calls go down: backend -> ring_sched.c / p2p.c / watch.c -> io.c.
 *
 * Threads: the caller's thread runs the collectives on the data connections
 * (left[i], right[i]); one progress thread owns the control lanes (the two
 * to the left and right neighbour, or one per peer): heartbeats,
 * point-to-point messages (delivered or forwarded), and abort notices. mu
 * guards everything below it. When the group fails, `failed` is set once,
 * ferr keeps the first message, fail_pipe becomes readable (so a caller
 * waiting in poll wakes up) and an abort notice is flooded on the lanes so
 * that every rank names the same culprit.
 */
#ifndef MR_COLL_TCP_TCP_H
#define MR_COLL_TCP_TCP_H

#include "common/compat.h"
#include "coll/dtype.h"
#include "coll/env.h"
#include "coll/tcp/wire.h"
#include "meshrun/err.h"

#include <pthread.h>

struct mr_ring_layout; /* coll/ring.h */

#define MR_TCP_CC_MAX 16 /* TCP_CA_NAME_MAX */
#define MR_TCP_CC_DEFAULT "reno"

struct mr_frame {
	struct mr_frame *next;
	unsigned char hdr[MR_FRAME_HDR];
	const unsigned char *data; /* payload: caller's buffer or owned */
	size_t len;                /* payload bytes */
	size_t off;                /* bytes written of hdr + payload */
	unsigned char *owned;      /* freed with the frame */
	int *done;                 /* caller's flag: 1 sent, -1 dropped; NULL for ours */
};

struct mr_msg {
	struct mr_msg *next;
	uint32_t src;
	size_t len;
	unsigned char *data;
};

enum { MR_LANE_LEFT = 0, MR_LANE_RIGHT = 1 };

#define MR_TXWATCH_SOCKS 16

struct mr_lane {
	int fd;
	int peer;
	bool dead;                 /* no more I/O on it */
	bool closed;               /* the peer closed it (EOF or reset): not a fault by itself */
	bool degraded;             /* watch.c warned: data from the peer trickles */
	bool lossy_warned;         /* watch.c warned: TCP retransmits to the peer */
	/* watch.c, the sending side: TCP's counts per data socket to the
	 * peer at its last sample (kept across collectives; a lane has more
	 * sockets than this only on a 2-rank ring of many connections, whose
	 * others share the same cable and go unwatched) */
	struct mr_txsock {
		int fd;
		uint64_t sent, retr;   /* TCP's byte counts at the last sample */
		int64_t at;            /* when; 0: slot free */
	} txs[MR_TXWATCH_SOCKS];
	uint64_t tx_sent, tx_retr; /* bytes TCP sent to the peer since the last batch, retransmitted */
	int64_t tx_eval_at;        /* when the last batch was judged */
	uint64_t spell_sent, spell_retr; /* the same over the lossy spell */
	int64_t lossy_since;       /* retransmitting >= 10% since; 0: not */
	int64_t lossy_last;        /* the last batch of the spell */
	char why[160];             /* "closed the connection" for later messages */
	struct mr_frame *head, *tail; /* out queue */
	int64_t last_rx, last_tx;
	unsigned char hdr[MR_FRAME_HDR];
	size_t hoff;
	struct mr_frame_hdr fh;
	unsigned char *payload;
	size_t poff;
	bool in_payload;
};

struct mr_tcp {
	const char *who;           /* "ring", or "mesh" for the mesh's control plane */
	int rank, size, nconn;
	bool verbose;
	int64_t timeout_ms;
	char token[MR_TOKEN_MAX];
	size_t token_len;
	char tcp_cc[MR_TCP_CC_MAX];   /* data connections' congestion control; "" = system's */
	int sndbuf;                /* data connections' SO_SNDBUF; 0 = kernel autotuning */
	struct mr_ring_hosts hosts;
	int *left, *right;         /* nconn data connections each */
	unsigned char *tmp;        /* 2*nconn receive buffers of MR_RING_PKT_MAX */

	pthread_t thread;
	bool thread_started;
	int wake_pipe[2];          /* caller -> thread */
	int fail_pipe[2];          /* readable once failed */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool failed;
	bool abort_pending;        /* flood an abort notice on the lanes */
	bool abort_done;           /* flooded (or lanes dead) */
	struct meshrun_err ferr;
	/* control lanes: the ring's two (MR_LANE_LEFT, MR_LANE_RIGHT), or with
	 * direct set (the mesh, mesh/tcpmesh.c) one per peer, lane[mr_tcp_lane_of(p)] */
	struct mr_lane *lane;
	int nlanes;
	bool direct;
	struct mr_msg *mbox_head, *mbox_tail;
};

/*
 * ctl.c: the control plane's part of init, for both backends: mutex, pipes
 * at -1, and the environment (MLX_RING_VERBOSE, MESHRUN_TIMEOUT, the job token,
 * MESHRUN_RING_TCP_CC, MESHRUN_RING_SNDBUF); then the pipes. Release stops the
 * progress thread and closes the lanes, the pipes and frees hosts (the
 * caller's data connections are its own).
 */
int mr_tcp_ctl_init(struct mr_tcp *r, const char *who, struct meshrun_err *err);
int mr_tcp_ctl_pipes(struct mr_tcp *r, struct meshrun_err *err);
void mr_tcp_ctl_release(struct mr_tcp *r);

struct meshrun_group;
/*
 * ctl.c: the barrier of both TCP backends: an all-gather of one byte per rank
 * through the group's own all_gather op (g->ops), so it waits for every rank.
 */
int mr_tcp_barrier(struct meshrun_group *g, struct meshrun_err *err);

/*
 * ring_sched.c: the ring all-reduce over r's data connections (left/right, nconn
 * each, size >= 3 or a ring's own pair), scratch r->tmp of
 * mr_tcp_ring_tmp_bytes(r); also run by the mesh over its connections to its two
 * ring neighbours when that schedule is the faster (mesh/tcpmesh.c).
 */
int mr_tcp_ring_all_reduce(struct mr_tcp *r, void *buf, size_t count, enum meshrun_dtype dt,
			   enum mr_op op, struct meshrun_err *err);
size_t mr_tcp_ring_tmp_bytes(const struct mr_tcp *r);
/* ring_sched.c: steps [s0, s0+nsteps) of layout l (coll/ring.h) over buf, on
 * all its channels: the ring backend's reduce-scatter (reduce) and all-gather. */
int mr_tcp_ring_run(struct mr_tcp *r, unsigned char *buf, const struct mr_ring_layout *l,
		    size_t esz, enum meshrun_dtype dt, enum mr_op op, bool reduce, int s0,
		    int nsteps, struct meshrun_err *err);

/* io.c: "rank 2 (127.0.0.1:5002)" text helper: the rank's first listen address. */
const char *mr_tcp_peer_addr(const struct mr_tcp *r, int rank);
void mr_tcp_log(const struct mr_tcp *r, const char *fmt, ...) MR_PRINTF(2, 3);

/* io.c: nodelay, congestion control, send buffer, user timeout (data: the
 * first two only for data connections), on the ring's and the mesh's sockets. */
void mr_tcp_tune_socket(const struct mr_tcp *r, int fd, bool data);
/* io.c, verbose: log what a data connection got (congestion control, buffer). */
void mr_tcp_log_tuning(const struct mr_tcp *r, int fd);
/* p2p.c: allocate nlanes control lanes (fds -1); 0 or MESHRUN_E_NOMEM. */
int mr_tcp_lanes_alloc(struct mr_tcp *r, int nlanes, struct meshrun_err *err);
/* Direct lanes: the lane index of peer p (p != rank). */
static inline int mr_tcp_lane_of(const struct mr_tcp *r, int p)
{
	return p < r->rank ? p : p - 1;
}

/* Progress thread (p2p.c). */
int mr_tcp_p2p_start(struct mr_tcp *r, struct meshrun_err *err);
void mr_tcp_p2p_stop(struct mr_tcp *r);
int mr_tcp_p2p_send(struct mr_tcp *r, const void *buf, size_t len, int dst,
		    struct meshrun_err *err);
int mr_tcp_p2p_recv(struct mr_tcp *r, void *buf, size_t len, int src,
		    struct meshrun_err *err);
/* Mark the group failed with msg (unless it already is), flood the abort and
 * wait (bounded) until the notice left; copy the group's message into err. */
int mr_tcp_fail(struct mr_tcp *r, struct meshrun_err *err, const char *fmt, ...)
	MR_PRINTF(3, 4);
/* If failed, copy the message to err and return MESHRUN_E_PEER; else 0. */
int mr_tcp_check_failed(struct mr_tcp *r, struct meshrun_err *err);
/* io.c: non-blocking send that never raises SIGPIPE, retrying on EINTR; -1/errno like send(2). */
ssize_t mr_tcp_send_some(int fd, const void *buf, size_t len);


/*
 * watch.c: the stall check of a receive stream on a data connection, in
 * units (a packet, a chunk) that the sender pushes whole: one begun and not
 * complete after mr_rxwatch_warn_ms() warns once per peer on stderr ("the link
 * from rank P (addr) is degraded"), after MESHRUN_TIMEOUT fails the group
 * naming the peer, unless the peer's lane is silent too (p2p.c's check).
 */
#define MR_RXWATCH_WARN_MS 2000
struct mr_rxwatch {
	size_t unit;               /* the unit partly received at `since` */
	int64_t since;             /* when first seen partly received; 0: none */
};
/* The sending side (TCP_INFO, TCP_CONNECTION_INFO; nothing where neither
 * exists): the share of the bytes TCP put on the wire to a peer that were
 * retransmissions, each data socket sampled at most every MR_TXWATCH_TICK_MS
 * while collectives send on it (its baseline kept across collectives, in the
 * peer's lane): a batch of MR_TXWATCH_MIN_BYTES with >= 5% warns as above,
 * with >= 10% starts a lossy spell; the spell goes on, judged on all it sent (a batch
 * at least every MR_TXWATCH_EVAL_MS, however little went out), while that
 * share stays >= 10%, and after MESHRUN_TIMEOUT fails the group naming the
 * link. From a collective's poll loop after each wakeup, per data socket fd
 * that sent in it, peer = the rank at its other end: 0, or <0 after failing
 * the group (err set). */
#define MR_TXWATCH_TICK_MS 250
#define MR_TXWATCH_EVAL_MS 1000
#define MR_TXWATCH_MIN_BYTES (64u << 10)
int mr_txwatch_check(struct mr_tcp *r, int fd, int peer, int64_t now, struct meshrun_err *err);
int64_t mr_rxwatch_warn_ms(const struct mr_tcp *r);
/* From a collective's poll loop after each wakeup, per receive stream: unit =
 * index of the unit being received, got = its bytes in, len = its size, peer =
 * the sender. 0, or <0 after failing the group (err set). */
int mr_rxwatch_check(struct mr_tcp *r, struct mr_rxwatch *w, int peer, size_t unit,
		     size_t got, size_t len, int64_t now, struct meshrun_err *err);

#endif
