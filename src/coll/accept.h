/*
 * accept.h - the accept gate of libmeshrun's TCP listeners, written once for
 * the three that take connections from the network: the ring and mesh setup
 * (tcp/conn.c), jaccl's coordinator on rank 0 (jaccl_side.c) and nccl's id server
 * on rank 0 (nccl_boot.c).
 *
 * A listener accepts whoever reaches its address; a connection counts only
 * once it said a whole, valid hello (nccl: request) with this job's token.
 * Until then it is *pending*, and the gate bounds what it can cost
 * (docs/contracts.md, "What another machine on the network can do"):
 *
 *  - Admit: a newcomer takes the first free slot of the caller's table; when
 *    none is free, the oldest pending connection (lowest seq, the accept
 *    order) is evicted for it: the caller closes it with MR_ACCEPT_EVICTED as
 *    the reason, so a slow-loris holding every slot cannot keep a rank out
 *    (a real peer's hello comes within a round trip, and an evicted real peer
 *    connects again). Slots past their hello (answering, handed over) are
 *    never evicted; when every slot is such a one, the newcomer itself is
 *    closed (mr_accept_pick() returns n).
 *  - Time: a pending connection must pass within MR_ACCEPT_WAIT_MS of its
 *    accept, else the caller closes it (mr_accept_expired());
 *    mr_accept_poll_ms() shortens a poll timeout to the first such deadline.
 *  - Memory: each slot has one fixed buffer, the largest valid hello; the
 *    token length is checked before the token is read (mr_hello_decode(),
 *    mr_nccl_boot_req_decode()), so nothing grows with what a stranger sends.
 *  - Token: the bytes and the length of the peer's job token against ours
 *    (MESHRUN_JOB_TOKEN, empty when unset), both must be equal; nccl compares
 *    with mr_accept_token_equal() (constant time), the hello through
 *    mr_hello_check() (wire.h). Our own hello, which a connecting side sends
 *    and an accepting side answers with once the peer's passed, comes from
 *    mr_accept_hello().
 *
 * Ownership: the gate owns nothing. The slots, their fds and buffers are the
 * caller's; mr_accept_pick() only reads them (through the caller's callback)
 * and mr_accept_admit() only stamps one. Closing, and logging or recording
 * why, is the caller's, so each keeps its own messages and error codes.
 */
#ifndef MR_COLL_ACCEPT_H
#define MR_COLL_ACCEPT_H

#include "common/compat.h"

/* How long a connection may take to say its hello once accepted: generous,
 * even on a loaded machine (a real peer that misses it connects again). */
#define MR_ACCEPT_WAIT_MS 2000
/* The pending slots of rank 0's coordinator (jaccl) and id server (nccl). */
#define MR_ACCEPT_SLOTS 32
/* The reason given for a connection evicted for a newcomer. */
#define MR_ACCEPT_EVICTED "too many pending connections (closed the oldest)"

/* When a pending connection was accepted, and in which order. */
struct mr_accept_stamp {
	int64_t since;                   /* mr_now_ms() at accept */
	uint64_t seq;                    /* accept order, from 1: the lowest is the oldest */
};

/* One listener's admissions (of one setup or serve call). */
struct mr_accept_gate {
	uint64_t accepted;               /* connections admitted so far */
};

/* What slot i of a caller's table holds, as the gate sees it. */
enum mr_accept_use {
	MR_ACCEPT_FREE,                  /* may take a newcomer */
	MR_ACCEPT_PENDING,               /* before its hello: may be evicted */
	MR_ACCEPT_BUSY,                  /* past its hello, or not the gate's */
};

/* The use of slot i; for MR_ACCEPT_PENDING its stamp in *st. */
typedef enum mr_accept_use mr_accept_use_fn(void *ctx, size_t i, const struct mr_accept_stamp **st);

/*
 * The slot of n for a newcomer: the first free one (*evict false), else the
 * oldest pending one (*evict true: the caller closes it, with
 * MR_ACCEPT_EVICTED, before it admits the newcomer there), else n (none: the
 * caller closes the newcomer).
 */
size_t mr_accept_pick(size_t n, mr_accept_use_fn *use, void *ctx, bool *evict);

/* Stamp a newcomer admitted now. */
void mr_accept_admit(struct mr_accept_gate *g, struct mr_accept_stamp *st, int64_t now);

/* Past its MR_ACCEPT_WAIT_MS? */
bool mr_accept_expired(const struct mr_accept_stamp *st, int64_t now);

/* timeout_ms (of a poll), shortened to st's deadline (0 when past). */
int mr_accept_poll_ms(const struct mr_accept_stamp *st, int64_t now, int timeout_ms);

/* Equal tokens (length and bytes), in a time that does not tell how much matched. */
bool mr_accept_token_equal(const unsigned char *a, size_t alen, const char *b, size_t blen);

/*
 * Our hello (coll/tcp/wire.h) into buf (MR_HELLO_MAX bytes): this rank, the group
 * size, the lane, the nconn value both sides must agree on, and the job
 * token (token_len <= MR_TOKEN_MAX). Returns its length.
 */
size_t mr_accept_hello(unsigned char *buf, int rank, int size, unsigned lane, uint32_t nconn,
		       const char *token, size_t token_len);

#endif
