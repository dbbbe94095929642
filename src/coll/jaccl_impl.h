/*
 * jaccl_impl.h - state shared by jaccl_verbs.c and jaccl.c (not a contract).
 *
 * One RC queue pair per cable end ("conn"), each with its own device context,
 * PD, completion channel, CQ and one registered pool of 2*MR_JDEPTH buffers of
 * MR_JACCL_MAX_CHUNK bytes: the first MR_JDEPTH are receive buffers, kept
 * posted all the time (reposted as soon as their chunk was consumed), the rest
 * are send buffers. Data moves as SEND_WITH_IMM chunks; the immediate is the
 * connection's chunk sequence number, checked on arrival together with the
 * length, so two ranks that disagree on the call sequence fail with a protocol
 * error instead of mixing data. A sender that runs ahead of the receiver's
 * posted buffers is held by RNR retries (infinite), i.e. flow control.
 */
#ifndef MR_COLL_JACCL_IMPL_H
#define MR_COLL_JACCL_IMPL_H

#include "common/compat.h"
#include "coll/dtype.h"
#include "coll/jaccl.h"

#include <infiniband/verbs.h>

#define MR_JDEPTH 8

enum mr_jside { MR_JSIDE_MESH = 0, MR_JSIDE_RIGHT = 1, MR_JSIDE_LEFT = 2 };

struct mr_jconn {
	int peer;                   /* the rank at the other end */
	int side;                   /* enum mr_jside */
	int idx;                    /* cable index on that side */
	char dev[MR_JACCL_DEVNAME_MAX];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *pool;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	uint32_t psn;
	enum ibv_mtu mtu;
	bool armed;
	/* receive side: slot = seq % MR_JDEPTH; completions arrive in order */
	uint64_t rx_posted, rx_arrived, rx_used;
	uint32_t rx_len[MR_JDEPTH];
	uint32_t rx_imm[MR_JDEPTH];
	uint32_t rx_expect;         /* next immediate expected */
	/* send side */
	uint64_t tx_posted, tx_done;
	uint32_t tx_seq;
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
	int64_t timeout_ms;
	bool failed;
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
	size_t schunk, dchunk, soff, sdone_chunks, snchunks, dnchunks, ddone_chunks;
	uint64_t tx_base;
};

/* Open every conn of this rank, exchange addresses, connect, barrier. */
int mr_jaccl_verbs_setup(struct mr_jaccl *J, const struct mr_jaccl_matrix *m,
			 const struct mr_jaccl_env *env, struct meshrun_err *err);
void mr_jaccl_verbs_teardown(struct mr_jaccl *J);
/*
 * Run n transfers at once, pipelined in chunks, until every chunk was sent
 * (and acknowledged) and received. ordered: deliver received chunk k of
 * transfer i only after chunk k of transfers 0..i-1 (a fixed reduction order).
 * Fails (MESHRUN_E_PEER/TIMEOUT/PROTO, peer named) on an error completion, an
 * abort from another rank, a peer whose side channel closed while we need it,
 * or no progress for the timeout.
 */
int mr_jaccl_exchange(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, enum mr_op op,
		      enum meshrun_dtype dt, struct meshrun_err *err);

#endif
