/*
 * jaccl_types.h - the JACCL backend's (RDMA verbs) shared types and the
 * calls on them that coll and the tests use: the device matrix, the
 * environment, the frame header and its arithmetic, the TCP side channel.
 * No verbs here: the queue-pair state shared by jaccl.c, jaccl_verbs.c and
 * jaccl_frames.c is jaccl_impl.h's.
 *
 * Environment (JACCL_* first, then MLX_*, as MLX's jaccl reads them):
 *   JACCL_RANK / MLX_RANK              this rank (else SLURM_PROCID, OMPI_...)
 *   JACCL_COORDINATOR / MLX_JACCL_COORDINATOR   "ip:port" where rank 0 listens
 *   JACCL_IBV_DEVICES / MLX_IBV_DEVICES         path of the device matrix
 *   JACCL_RING / MLX_JACCL_RING        present: prefer the ring over the mesh
 *   MESHRUN_JOB_TOKEN, MESHRUN_TIMEOUT (stall timeout), MESHRUN_IB_GID_INDEX
 *   MESHRUN_JACCL_QP                   auto (default: uc) | uc | rc
 *   MESHRUN_JACCL_FRAME                frame size, a power of two 4K..512K (4K)
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
 * Files: jaccl_cfg.c (this parsing, the frame header and arithmetic; no
 * verbs), jaccl_side.c (TCP side channel; no verbs), jaccl_verbs.c (queue
 * pairs: budget, creation, connection), jaccl_frames.c (the wire protocol:
 * frames, credits and the transfer engine), jaccl.c (ops table and
 * algorithms), jaccl_stub.c (the ops table when libibverbs was not found at
 * build time).
 */
#ifndef MR_COLL_JACCL_TYPES_H
#define MR_COLL_JACCL_TYPES_H

#include "common/compat.h"
#include "coll/tcp/wire.h"
#include "meshrun/err.h"

#include <pthread.h>
#include <stdatomic.h>

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
	int qp;                     /* MESHRUN_JACCL_QP: enum mr_jaccl_qp */
	uint32_t frame;             /* MESHRUN_JACCL_FRAME: bytes per SEND and RECV */
	int64_t timeout_ms;
	char token[MR_TOKEN_MAX];
	size_t token_len;
};

/* MESHRUN_E_BACKEND when not configured (message says which variable is missing). */
int mr_jaccl_env_read(struct mr_jaccl_env *e, struct meshrun_err *err);

/* ------------------------------------------------- queue pairs and frames */

/* MESHRUN_JACCL_QP: auto is UC (Apple's driver has nothing else; the credits
 * below make RC's retries and RNR flow control unnecessary elsewhere). */
enum mr_jaccl_qp { MR_JACCL_QP_AUTO, MR_JACCL_QP_UC, MR_JACCL_QP_RC };

/*
 * Apple's Thunderbolt RDMA driver: at most 10 queue pairs and about 100
 * memory regions per device, whatever the number of processes (ml-explore/mlx
 * #4209, #3162). A job's needs per device are checked against the smaller of
 * these and what ibv_query_device says, before any queue pair is created.
 */
#define MR_JACCL_APPLE_MAX_QP 10
#define MR_JACCL_APPLE_MAX_MR 100
/* and its path MTU (MLX's JACCL uses 1024) */
#define MR_JACCL_UC_MTU_BYTES 1024

/*
 * The wire protocol: every SEND is one frame of exactly the group's frame size
 * (MESHRUN_JACCL_FRAME, the same on every rank, checked at setup), which is
 * also the size of every RECV posted for it; Apple's driver counts queue depth
 * in 4 KiB frames and wants a SEND and its RECV to span the same frames (4 KiB
 * before macOS 26.3, up to 512 KiB from 26.3). A frame starts with a 16-byte
 * header, little-endian:
 *   u8 magic 'J', u8 type (DATA, CREDIT), u16 0,
 *   u32 seq      frames this side sent on the queue pair before this one,
 *   u32 credit   RECVs this side has posted on it so far (cumulative),
 *   u32 len      payload bytes (DATA: 1 .. frame - 16; CREDIT: 0).
 * No immediates (unverified on Apple's driver). seq catches a lost frame (UC
 * has no retransmission: a gap is a named error, never mixed data); credit is
 * the flow control: a side sends frame n only once the peer's credit says a
 * RECV is posted for it (see jaccl_frames.c).
 */
#define MR_JACCL_FRAME_MIN 4096u
#define MR_JACCL_FRAME_MAX (512u * 1024u)
#define MR_JACCL_FRAME_DEFAULT 4096u
#define MR_JACCL_HDR 16u
#define MR_JACCL_MAGIC 0x4a
enum mr_jaccl_ftype { MR_JF_DATA = 1, MR_JF_CREDIT = 2 };

struct mr_jaccl_fhdr {
	unsigned type;
	uint32_t seq, credit, len;
};

void mr_jaccl_fhdr_encode(const struct mr_jaccl_fhdr *h, unsigned char *p);
/* Decode and check a frame's header: magic, type, len fits the frame and
 * matches the type. MESHRUN_E_PROTO with the reason. */
int mr_jaccl_fhdr_decode(const unsigned char *p, uint32_t frame, struct mr_jaccl_fhdr *h,
			 struct meshrun_err *err);
/* Payload bytes of one frame (a multiple of 16: whole elements of every dtype). */
size_t mr_jaccl_payload(uint32_t frame);
/*
 * RECVs (and send buffers) a queue pair keeps for frames of this size: 32
 * frames of 4 KiB, fewer of larger ones (about 512 KiB in flight, at least 4).
 */
int mr_jaccl_depth(uint32_t frame);
/* Frames a transfer of bytes is cut into (0 for 0 bytes). */
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
 * with the ring backend's hello (coll/tcp/wire.h: magic, version, rank, size, job
 * token) with lane MR_LANE_P2P and nconn MR_JACCL_HELLO_TAG, so a ring-backend
 * connection, a stray client or another job is refused. After that, frames
 * (coll/tcp/wire.h header): MR_FRAME_MSG carries all-gather payloads, and
 * MR_FRAME_ABORT a failure message that rank 0 forwards to every rank.
 */
#define MR_JACCL_HELLO_TAG 0x4a43434cu /* "JCCL" */
#define MR_JACCL_MAX_BLOB (1u << 20)

struct mr_jaccl_stall {
	int peer;                   /* the rank it waits on, -1: none */
	char dev[MR_JACCL_DEVNAME_MAX];
};

struct mr_jaccl_side {
	int rank, size;
	int *fd;                    /* rank 0: fd[r] for r >= 1; others: fd[0] */
	atomic_bool *gone;          /* the peer closed its side channel (set by the watcher) */
	bool aborted;               /* a failure was sent or received: abort no more */
	int64_t timeout_ms;
	char token[MR_TOKEN_MAX];
	size_t token_len;
	/* watch mode (mr_jaccl_side_watch) */
	bool watching;
	pthread_t thread;
	pthread_mutex_t mu;         /* every socket write, fd[], verdict and stall */
	int stop[2];                /* a byte: the watcher returns */
	int wake[2];                /* a byte per verdict or departure: sleepers wake */
	int64_t *last_rx;           /* when a byte last came from rank r (ms) */
	char verdict[MESHRUN_ERR_MSG_MAX]; /* the group's failure, "" while none */
	struct mr_jaccl_stall *stall; /* rank 0: what every rank reported waiting on */
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
 * Watch mode, once the queue pairs are set up and until mr_jaccl_side_close:
 * a thread owns the sockets' reading. Every hb ms (MESHRUN_TIMEOUT / 8, 50 ..
 * 1000) it sends a heartbeat on each socket (rank 0 to every rank, the
 * others to rank 0), so that a rank busy computing is never taken for a
 * stopped one, and it reads what comes:
 *  - a closed socket: that rank has left (gone); rank 0 passes the news on,
 *    so that every rank can tell whether it still needed it;
 *  - an abort: the group failed (rank 0 passes it on);
 *  - (rank 0) stall reports: which peer a rank's data path waits on.
 * Its verdicts fail the group, everywhere (the same message on every rank):
 *  - a rank that sent nothing for MESHRUN_TIMEOUT / 2 "showed no sign of
 *    life" (SIGSTOP, a hung host, the coordinator's network cut): rank 0
 *    names it; the other ranks name rank 0 when it falls silent;
 *  - (rank 0) two ranks that wait on each other while both still send
 *    heartbeats: the cable between them is down or lost a frame, which
 *    nothing else would say on Apple's driver (no error, no event).
 * The data path's own verdict (MESHRUN_TIMEOUT without progress) comes later
 * than both, so that the culprit is named, not a rank that waits on it.
 */
int mr_jaccl_side_watch(struct mr_jaccl_side *s, struct meshrun_err *err);
/* MESHRUN_E_PEER with the group's failure (a verdict or an abort), 0 while none. */
int mr_jaccl_side_failed(struct mr_jaccl_side *s, struct meshrun_err *err);
bool mr_jaccl_side_gone(const struct mr_jaccl_side *s, int r);
/* Readable when a verdict or a departure came: for a rank that sleeps (-1 before watch mode). */
int mr_jaccl_side_wake_fd(const struct mr_jaccl_side *s);
/* This rank's data path waits on peer over dev (peer -1: it moves again). */
void mr_jaccl_side_stall(struct mr_jaccl_side *s, int peer, const char *dev);
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
 * a frame header (coll/tcp/wire.h) from a group of size ranks whose payload may be
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
