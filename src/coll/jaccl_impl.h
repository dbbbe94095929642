/*
 * jaccl_impl.h - state shared by jaccl_verbs.c, jaccl_frames.c and jaccl.c
 * (not a contract).
 *
 * One queue pair per cable end ("conn"): UC by default (Apple's Thunderbolt
 * driver creates nothing else), RC on request; each with its own device
 * context, PD, CQ and one registered pool of 2 * depth frames (depth:
 * mr_jaccl_depth): the first depth are receive buffers, each always posted
 * except while its frame waits to be consumed, the rest send buffers. The
 * wire protocol (frames of a fixed size, an in-band header with sequence,
 * length and credit; jaccl_types.h) is jaccl_frames.c's. Completions are polled;
 * a completion channel exists only in RC mode and only where the device has
 * one (never on Apple's driver).
 */
#ifndef MR_COLL_JACCL_IMPL_H
#define MR_COLL_JACCL_IMPL_H

#include "common/compat.h"
#include "coll/dtype.h"
#include "coll/jaccl_types.h"

#include <infiniband/verbs.h>

#define MR_JDEPTH_MAX 32

enum mr_jside { MR_JSIDE_MESH = 0, MR_JSIDE_RIGHT = 1, MR_JSIDE_LEFT = 2 };

struct mr_jconn {
	int peer;                   /* the rank at the other end */
	int side;                   /* enum mr_jside */
	int idx;                    /* cable index on that side */
	char dev[MR_JACCL_DEVNAME_MAX];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* RC mode where the device has one, else NULL */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *pool;        /* depth receive frames, then depth send frames */
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	uint32_t psn;
	enum ibv_mtu mtu;
	bool armed;
	/* receive side (buffers 0 .. depth-1, wr_id = buffer) */
	uint32_t rx_expect;         /* seq of the next frame to arrive */
	uint64_t rx_posted;         /* RECVs posted so far: the credit granted */
	uint64_t rx_reported;       /* rx_posted as the peer last heard it */
	uint64_t rx_frames;         /* frames arrived so far */
	int rx_q[MR_JDEPTH_MAX];    /* DATA frames arrived, not consumed: buffers, in order */
	uint32_t rx_len[MR_JDEPTH_MAX]; /* payload bytes of the frame in each buffer */
	unsigned rx_qh, rx_qn;
	/* send side (buffers depth .. 2*depth-1, wr_id = buffer) */
	uint64_t tx_seq;            /* frames sent so far */
	uint64_t tx_limit;          /* the peer's credit: frames it has RECVs for, in total */
	int tx_free[MR_JDEPTH_MAX]; /* send buffers not in flight */
	int tx_nfree;
	uint64_t tx_posted, tx_done;
};

struct mr_jaccl {
	int rank, size;
	int topo;                   /* MR_JACCL_MESH / MR_JACCL_RING */
	int ncables;                /* ring: cables per neighbour */
	int nconn;
	struct mr_jconn *conn;      /* nconn */
	struct mr_jconn **peer;     /* mesh: peer[r] (NULL for self) */
	struct mr_jconn **right, **left; /* ring: ncables each (same for size 2) */
	struct mr_jaccl_side side;
	int qp_type;                /* IBV_QPT_UC or IBV_QPT_RC */
	uint32_t frame;             /* bytes per SEND and RECV */
	size_t payload;             /* frame - header */
	int depth;                  /* frames per queue pair, each way */
	int64_t timeout_ms;
	bool failed;
	bool told;                  /* the last exchange failed on the group's verdict
	                               (side channel): its message is whole */
	struct meshrun_err ferr;
};

/* One transfer over one conn in an exchange: send src (slen bytes) and/or
 * receive dlen bytes into dst, copied or reduced (op, dt) into place. */
enum { MR_JX_COPY = 0, MR_JX_REDUCE = 1 };
struct mr_jxfer {
	struct mr_jconn *c;
	const unsigned char *src;
	size_t slen;
	unsigned char *dst;
	size_t dlen;
	int mode;
	/* engine state */
	size_t soff, dnchunks, ddone_chunks;
};

/* Open every conn of this rank, exchange addresses, connect, barrier. */
int mr_jaccl_verbs_setup(struct mr_jaccl *J, const struct mr_jaccl_matrix *m,
			 const struct mr_jaccl_env *env, struct meshrun_err *err);
void mr_jaccl_verbs_teardown(struct mr_jaccl *J);
/* Post one RECV of a frame into receive buffer b (jaccl_frames.c). */
int mr_jaccl_post_recv(struct mr_jaccl *J, struct mr_jconn *c, int b, struct meshrun_err *err);
/* The protocol's starting state once the peer posted its RECVs (jaccl_frames.c). */
void mr_jaccl_conn_start(struct mr_jaccl *J, struct mr_jconn *c);
/*
 * Run n transfers at once, frame by frame, until every frame was sent (and its
 * send completed) and received. ordered: deliver received frame k of transfer
 * i only after frame k of transfers 0..i-1 (a fixed reduction order). Fails
 * (MESHRUN_E_PEER/TIMEOUT/PROTO, peer named) on an error completion, a lost
 * or foreign frame, an abort from another rank, a peer whose side channel
 * closed while we need it, or no progress for the timeout.
 */
int mr_jaccl_exchange(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, enum mr_op op,
		      enum meshrun_dtype dt, struct meshrun_err *err);

#endif
