/*
 * nccl_boot.h - the nccl backend's bootstrap: rank 0 hands an opaque 128-byte
 * id (NCCL's ncclUniqueId) to every other rank over TCP. Nothing here needs
 * CUDA or NCCL, so the exchange is tested with a fake id on any machine.
 *
 * Environment (MLX's nccl backend names; mlx.launch and meshrun set them):
 *   NCCL_HOST_IP       address rank 0 listens on (numeric or a host name)
 *   NCCL_PORT          its port, 1..65535
 *   MLX_RANK           this rank, 0..MLX_WORLD_SIZE-1
 *   MLX_WORLD_SIZE     number of ranks, >= 1
 *   MLX_NCCL_TIMEOUT   milliseconds to wait for the exchange (default 300000)
 *   MESHRUN_JOB_TOKEN  job token (optional; empty when unset; <= 256 bytes)
 *
 * Protocol (little endian). The fetching rank connects and sends a request:
 *    0 4 magic "MRNB", 4 2 version (MR_NCCL_BOOT_VERSION), 6 2 token length,
 *    8 4 rank, 12 4 world size, 16 n token bytes
 * rank 0 answers with a 12-byte reply header, then on success the id:
 *    0 4 magic "MRNB", 4 2 version, 6 2 status (MR_NCCL_BOOT_*), 8 4 id length
 *   12 n id bytes (n = MR_NCCL_ID_BYTES, only when status is OK)
 * A request with a wrong token, world size or rank, or a rank that already got
 * the id, is answered with a refusal status and does not count; rank 0 keeps
 * serving until every rank 1..size-1 got the id, or the timeout passes. A
 * connection that sends garbage (wrong magic or version, oversize token) or
 * no whole request within 2 s is closed without an answer; up to 32
 * connections are read side by side (the oldest is closed for a newcomer),
 * each into a fixed buffer, so stray or slow clients cannot starve a rank.
 * The id is sent only after the token matched.
 *
 * Fetching ranks retry (backoff 50 ms doubling to 1 s) while rank 0 is not
 * listening yet, until the timeout; a refusal is final (MESHRUN_E_AUTH for a
 * token, MESHRUN_E_PROTO otherwise).
 */
#ifndef MR_COLL_NCCL_BOOT_H
#define MR_COLL_NCCL_BOOT_H

#include "common/compat.h"
#include "meshrun/err.h"

#define MR_NCCL_ID_BYTES 128
#define MR_NCCL_BOOT_MAGIC "MRNB"
#define MR_NCCL_BOOT_VERSION 1
#define MR_NCCL_BOOT_TOKEN_MAX 256
#define MR_NCCL_BOOT_REQ_FIXED 16
#define MR_NCCL_BOOT_REPLY_FIXED 12
#define MR_NCCL_DEFAULT_TIMEOUT_MS 300000

enum {
	MR_NCCL_BOOT_OK = 0,
	MR_NCCL_BOOT_BAD_TOKEN = 1,
	MR_NCCL_BOOT_BAD_SIZE = 2,
	MR_NCCL_BOOT_BAD_RANK = 3,
	MR_NCCL_BOOT_DUP_RANK = 4,
};

struct mr_nccl_boot {
	char host[256];                       /* NCCL_HOST_IP */
	unsigned port;                        /* NCCL_PORT */
	int rank, size;                       /* MLX_RANK, MLX_WORLD_SIZE */
	int64_t timeout_ms;                   /* MLX_NCCL_TIMEOUT */
	size_t token_len;
	char token[MR_NCCL_BOOT_TOKEN_MAX];   /* MESHRUN_JOB_TOKEN */
};

/*
 * Fill b from the environment. Missing variables: MESHRUN_E_BACKEND with every
 * missing name in the message (so `any` moves on); malformed values:
 * MESHRUN_E_PARSE naming the variable and its value.
 */
int mr_nccl_boot_from_env(struct mr_nccl_boot *b, struct meshrun_err *err);

/*
 * The exchange. Rank 0: id holds the id to serve; returns once ranks
 * 1..size-1 all have it (size 1: at once). Other ranks: id receives it.
 * Errors name the address and, on rank 0, the ranks that never came.
 */
int mr_nccl_boot_exchange(const struct mr_nccl_boot *b, unsigned char id[MR_NCCL_ID_BYTES],
			  struct meshrun_err *err);

/* Wire helpers, exposed for the unit tests. Encode returns the length. */
size_t mr_nccl_boot_req_encode(unsigned char *buf, int rank, int size, const char *token,
			       size_t token_len);
/*
 * Decode a request from the len bytes received so far: 0 when complete, the
 * total length needed (> len) when more bytes are needed, MESHRUN_E_PROTO when
 * the bytes cannot be a request.
 */
int mr_nccl_boot_req_decode(const unsigned char *buf, size_t len, int *rank, int *size,
			    const unsigned char **token, size_t *token_len, struct meshrun_err *err);

/*
 * Rank 0's answer to a decoded request, given which ranks were served already
 * (served[size] entries): MR_NCCL_BOOT_OK, or the refusal status. The token is
 * compared first, in constant time.
 */
unsigned mr_nccl_boot_judge(const struct mr_nccl_boot *b, const bool *served, int rank, int size,
			    const unsigned char *token, size_t token_len);
/*
 * Decode the MR_NCCL_BOOT_REPLY_FIXED bytes of rank 0's answer: 0 with *status
 * (an OK answer announces exactly MR_NCCL_ID_BYTES), or MESHRUN_E_PROTO.
 */
int mr_nccl_boot_reply_decode(const unsigned char *hdr, unsigned *status, struct meshrun_err *err);

#endif
