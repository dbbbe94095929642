/*
 * jaccl.h - libmeshrun's JACCL backend (RDMA verbs), internal contract.
 *
 * Environment (JACCL_* first, then MLX_*, as MLX's jaccl reads them):
 *   JACCL_RANK / MLX_RANK              this rank (else SLURM_PROCID, OMPI_...)
 *   JACCL_COORDINATOR / MLX_JACCL_COORDINATOR   "ip:port" where rank 0 listens
 *   JACCL_IBV_DEVICES / MLX_IBV_DEVICES         path of the device matrix
 *   JACCL_RING / MLX_JACCL_RING        present: prefer the ring over the mesh
 *   MESHRUN_JOB_TOKEN, MESHRUN_TIMEOUT (stall timeout), MESHRUN_IB_GID_INDEX
 * The backend counts as absent (MESHRUN_E_BACKEND) unless the device matrix
 * and the coordinator are both set.
 *
 * Device matrix: JSON list of size rows, each a list of size cells; a cell is
 * null, a device name, or a list of device names (one per cable). Row r,
 * column c names the devices on rank r that are cabled to rank c. Validity is
 * MLX's: a mesh has a null diagonal and every off-diagonal cell set (the first
 * name is used); a ring has, on every rank, left and right cells with the
 * count of cell [0][1] (>= 1) devices. With JACCL_RING a valid ring wins,
 * otherwise a valid mesh wins over a ring. The diagonal must be null in both
 * (MLX's ring check does not look at it; a set diagonal is a wiring error).
 *
 * Files: jaccl_cfg.c (this parsing, chunk arithmetic; no verbs), jaccl_side.c
 * (TCP side channel; no verbs), jaccl_verbs.c (queue pairs and the pipelined
 * transfer engine), jaccl.c (ops table and algorithms), jaccl_stub.c (the ops
 * table when libibverbs was not found at build time).
 */
#ifndef MR_COLL_JACCL_H
#define MR_COLL_JACCL_H

#include "common/compat.h"
#include "coll/wire.h"
#include "meshrun/err.h"

#define MR_JACCL_MAX_RANKS 1024
#define MR_JACCL_MAX_CABLES 16
#define MR_JACCL_DEVNAME_MAX 64

/* ---------------------------------------------------------------- matrix */

struct mr_jaccl_cell {
	int n;                                    /* 0: null */
	char (*names)[MR_JACCL_DEVNAME_MAX];      /* n names */
};

struct mr_jaccl_matrix {
	int size;
	struct mr_jaccl_cell *cells;              /* size*size, row-major */
};

#define MR_JACCL_CELL(m, r, c) (&(m)->cells[(size_t)(r) * (size_t)(m)->size + (size_t)(c)])

enum mr_jaccl_topo { MR_JACCL_MESH = 1, MR_JACCL_RING = 2 };

/* Parse the matrix text; name prefixes errors ("devs.json: rank 1, column 2: ..."). */
int mr_jaccl_matrix_parse(const char *text, size_t len, const char *name,
			  struct mr_jaccl_matrix *out, struct meshrun_err *err);
int mr_jaccl_matrix_load(const char *path, struct mr_jaccl_matrix *out, struct meshrun_err *err);
void mr_jaccl_matrix_free(struct mr_jaccl_matrix *m);

/*
 * Mesh or ring (see above). Returns MR_JACCL_MESH or MR_JACCL_RING, or
 * MESHRUN_E_PARSE with a message naming the first rank and column at fault
 * for the mesh and for the ring. *ncables: 1 for a mesh, the ring's count.
 */
int mr_jaccl_matrix_topology(const struct mr_jaccl_matrix *m, bool prefer_ring, int *ncables,
			     const char *name, struct meshrun_err *err);

/* ------------------------------------------------------------ environment */

struct mr_jaccl_env {
	int rank;
	const char *devices_path;   /* getenv() pointers, valid while env is unchanged */
	const char *coordinator;
	bool prefer_ring;
	const char *which_rank;     /* the rank variable's name */
	int gid_index;              /* MESHRUN_IB_GID_INDEX, -1 when unset */
	int64_t timeout_ms;
	char token[MR_TOKEN_MAX];
	size_t token_len;
};

/* MESHRUN_E_BACKEND when not configured (message says which variable is missing). */
int mr_jaccl_env_read(struct mr_jaccl_env *e, struct meshrun_err *err);

/* ------------------------------------------------------- chunk arithmetic */

#define MR_JACCL_MIN_CHUNK 4096u
#define MR_JACCL_MAX_CHUNK (128u * 1024u)

/*
 * Chunk size for pipelining a transfer of `bytes`: the largest
 * MIN_CHUNK * 2^k that is <= bytes / 2 (so at least two chunks are in flight),
 * at least MIN_CHUNK, at most MAX_CHUNK; always a multiple of 8.
 */
size_t mr_jaccl_chunk_size(size_t bytes);
/* Chunks a transfer of bytes is cut into (0 for 0 bytes). */
size_t mr_jaccl_nchunks(size_t bytes, size_t chunk);
/*
 * Split count elements into parts near-equal pieces: piece i starts at
 * *off and has *n elements (the first count % parts pieces get one more).
 */
void mr_jaccl_split(size_t count, size_t parts, size_t i, size_t *off, size_t *n);

/* ------------------------------------------------------------ side channel */

/*
 * Rank 0 serves a TCP star on the coordinator address; every other rank
 * connects (retrying with backoff until the deadline, also when rank 0
 * closes the connection before its answer: it closes the oldest of too
 * many unauthenticated connections, see jaccl_side.c's serve()). Each connection starts
 * with the ring backend's hello (coll/wire.h: magic, version, rank, size, job
 * token) with lane MR_LANE_P2P and nconn MR_JACCL_HELLO_TAG, so a ring-backend
 * connection, a stray client or another job is refused. After that, frames
 * (coll/wire.h header): MR_FRAME_MSG carries all-gather payloads, and
 * MR_FRAME_ABORT a failure message that rank 0 forwards to every rank.
 */
#define MR_JACCL_HELLO_TAG 0x4a43434cu /* "JCCL" */
#define MR_JACCL_MAX_BLOB (1u << 20)

struct mr_jaccl_side {
	int rank, size;
	int *fd;                    /* rank 0: fd[r] for r >= 1; others: fd[0] */
	bool *gone;                 /* the peer closed its side channel */
	bool aborted;               /* a failure was sent or received: abort no more */
	int64_t timeout_ms;
	char token[MR_TOKEN_MAX];
	size_t token_len;
};

int mr_jaccl_side_open(struct mr_jaccl_side *s, int rank, int size, const char *coordinator,
		       const char *token, size_t token_len, int64_t timeout_ms,
		       struct meshrun_err *err);
void mr_jaccl_side_close(struct mr_jaccl_side *s);
/*
 * All-gather of one blob per rank (each <= MR_JACCL_MAX_BLOB). On success
 * *out is a malloc'ed array of size blobs (out[r].data malloc'ed, freed by
 * mr_jaccl_blobs_free). With len 0 everywhere this is a barrier. When a rank
 * joined it with mr_jaccl_side_fail(), every rank gets MESHRUN_E_PEER with
 * that rank's message; when rank 0 loses a rank, it tells the others why.
 */
struct mr_jaccl_blob {
	unsigned char *data;
	size_t len;
};
int mr_jaccl_side_allgather(struct mr_jaccl_side *s, const void *mine, size_t len,
			    struct mr_jaccl_blob **out, struct meshrun_err *err);
void mr_jaccl_blobs_free(struct mr_jaccl_blob *b, int n);
/*
 * While collectives run, the side channel carries only aborts and closes:
 * call this when side fd idx is readable. Returns 0 (nothing to do), 1 when
 * that peer closed its side channel (*gone gets its rank; the fd is closed),
 * or MESHRUN_E_PEER with the abort message another rank sent. Rank 0 forwards
 * an abort to every other rank before returning it.
 */
int mr_jaccl_side_event(struct mr_jaccl_side *s, int idx, int *gone, struct meshrun_err *err);
/* Tell the others (through rank 0) that this rank failed with msg; best effort. */
void mr_jaccl_side_abort(struct mr_jaccl_side *s, const char *msg);
/*
 * This rank failed during setup (msg says why, naming the device): take part
 * in the all-gather every other rank is in, as a failure. Rank 0 still
 * collects every rank's contribution and then answers each rank with the
 * first failure (its own or one another rank sent), so every rank's
 * mr_jaccl_side_allgather() fails with that message (MESHRUN_E_PEER) instead
 * of with a broken pipe. Best effort, bounded by the timeout.
 */
void mr_jaccl_side_fail(struct mr_jaccl_side *s, const char *msg);

/*
 * The pure checks of what arrives on the side channel (fuzzed, tests/fuzz):
 * a frame header (coll/wire.h) from a group of size ranks whose payload may be
 * at most max bytes (heartbeats are not expected here), and, on rank 0, a
 * decoded hello from a connecting rank: the job token, size and tag first,
 * then a rank 1..size-1 that has no connection yet (s->fd[rank] < 0).
 * MESHRUN_E_AUTH / MESHRUN_E_PROTO with the reason.
 */
int mr_jaccl_frame_check(const unsigned char *hdr, int size, size_t max, struct mr_frame_hdr *f,
			 struct meshrun_err *err);
int mr_jaccl_side_check_hello(const struct mr_jaccl_side *s, const struct mr_hello *h,
			      struct meshrun_err *err);

/* Framing of the all-gather result rank 0 sends: n x (u32 len, bytes). */
size_t mr_jaccl_blobs_encode(const struct mr_jaccl_blob *b, int n, unsigned char *buf);
int mr_jaccl_blobs_decode(const unsigned char *buf, size_t len, int n, struct mr_jaccl_blob **out,
			  struct meshrun_err *err);

#endif
