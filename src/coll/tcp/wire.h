/*
 * wire.h - the TCP engine's wire format: what the ring and the mesh (and jaccl's
 * side channel) put on a TCP connection besides raw data.
 *
 * Hello: the first bytes each side sends on every connection (little endian):
 *   off  size  field
 *    0    4    magic "MRNG"
 *    4    2    protocol version (MR_WIRE_VERSION)
 *    6    2    lane: 0..nconn-1 a data connection, MR_LANE_P2P the control lane
 *    8    4    sender's rank
 *   12    4    group size
 *   16    4    connections per neighbour (nconn)
 *   20    2    job token length (0..MR_TOKEN_MAX)
 *   22    2    reserved, 0
 *   24    n    job token bytes (MESHRUN_JOB_TOKEN; empty when unset)
 * The connecting side sends first; the accepting side checks it and answers
 * with its own hello, which the connecting side checks the same way. Anything
 * else (wrong magic, version, size, rank, token) is refused: the connection is
 * closed and the reason logged when verbose.
 *
 * Control-lane frame header (24 bytes, then len payload bytes):
 *    0  1 type (MR_FRAME_*), 1 3 reserved, 4 4 src rank, 8 4 dst rank,
 *   12  4 reserved, 16 8 payload length
 */
#ifndef MR_COLL_WIRE_H
#define MR_COLL_WIRE_H

#include "common/compat.h"
#include "meshrun/err.h"

#define MR_WIRE_MAGIC "MRNG"
#define MR_WIRE_VERSION 1
#define MR_LANE_P2P 0xffffu
#define MR_TOKEN_MAX 256
#define MR_HELLO_FIXED 24
#define MR_HELLO_MAX (MR_HELLO_FIXED + MR_TOKEN_MAX)

struct mr_hello {
	unsigned version;
	unsigned lane;
	uint32_t rank, size, nconn;
	size_t token_len;
	char token[MR_TOKEN_MAX];
};

/* Encode into buf (MR_HELLO_MAX bytes); returns the length. */
size_t mr_hello_encode(const struct mr_hello *h, unsigned char *buf);
/*
 * Decode from the len bytes received so far. Returns 0 and fills *h when a
 * whole hello is there, the total length needed (> len) when more bytes are
 * needed, or MESHRUN_E_PROTO with a message (bad magic, version, token length).
 */
int mr_hello_decode(const unsigned char *buf, size_t len, struct mr_hello *h,
		    struct meshrun_err *err);
/*
 * Check a decoded hello against what this side expects: same size and nconn,
 * the expected peer rank, a lane that is < nconn or MR_LANE_P2P, equal token.
 */
int mr_hello_check(const struct mr_hello *h, uint32_t want_rank, uint32_t size, uint32_t nconn,
		   const char *token, size_t token_len, struct meshrun_err *err);

enum { MR_FRAME_HB = 1, MR_FRAME_MSG = 2, MR_FRAME_ABORT = 3 };
#define MR_FRAME_HDR 24
#define MR_FRAME_MAX_ABORT 1024

struct mr_frame_hdr {
	unsigned type;
	uint32_t src, dst;
	uint64_t len;
};

void mr_frame_encode(const struct mr_frame_hdr *f, unsigned char *buf);
/* Decode a full MR_FRAME_HDR header; rejects unknown types and oversize
 * control payloads (MESHRUN_E_PROTO). */
int mr_frame_decode(const unsigned char *buf, uint32_t size, struct mr_frame_hdr *f,
		    struct meshrun_err *err);

#endif
