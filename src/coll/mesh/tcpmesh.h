/*
 * tcpmesh.h - libmeshrun's mesh backend: the mesh schedule (mesh_plan.h) over
 * TCP, every cable of a fully cabled cluster busy at once.
 *
 * Environment (set by `meshrun --backend mesh`, the default on a hostfile
 * with a complete "mesh_ips" matrix):
 *   MESHRUN_MESH_HOSTFILE  path of the address matrix below; unset or empty:
 *                          the backend counts as absent (MESHRUN_E_BACKEND)
 *   MLX_RANK (or SLURM_PROCID, OMPI_COMM_WORLD_RANK), MESHRUN_JOB_TOKEN,
 *   MESHRUN_TIMEOUT, MLX_RING_VERBOSE, MESHRUN_RING_TCP_CC, MESHRUN_RING_SNDBUF
 *                          as for the ring (the same socket tuning)
 *   MESHRUN_MESH_SCHEDULE  auto (default), mesh or ring: the all-reduce's
 *                          schedule; auto warms up and times both on each
 *                          size class's first six calls and keeps the
 *                          mesh where it is 5% faster, else the ring
 *                          (tcpmesh.c)
 *
 * Address matrix: JSON, a list of size rows of size cells. Cell [i][j] is
 * null on the diagonal, else the "ip:port" where rank i is reached by rank j:
 * rank i's address on the cable joining i and j, as a string or a list of
 * strings (one per cable: several cables between two hosts are striped).
 * Cells [i][j] and [j][i] list the same number of cables.
 *   [[null, ["10.0.0.1:5000"]], [["10.0.0.2:5001"], null]]
 *
 * Connections: for each pair i < j, rank j connects to each address of cell
 * [i][j] (data lane k to the k-th), plus a control lane on the first; rank i
 * listens on its distinct addresses in cells [i][j] for the higher ranks
 * (rank 0 listens for everyone, the last rank for nobody). The hello (coll/tcp/wire.h) carries nconn = MR_MESH_HELLO_TAG +
 * cables, so a ring connection or another job is refused (coll/tcp/conn.c).
 *
 * Progress: the caller's thread moves all data from one poll loop over every
 * peer's connections; transfers are cut into chunks (MR_MESH_CHUNK, or a
 * quarter of a smaller block but at least MR_MESH_CHUNK_MIN), chunk c on
 * cable c % K of that peer. An all-reduce is one pipelined step: each chunk
 * of the own block goes out to every peer as soon as it is reduced. The TCP
 * engine's progress thread (coll/tcp/p2p.c) runs the control lanes, one per
 * peer: heartbeats and the stall timeout (MESHRUN_TIMEOUT), send/recv messages (direct, no forwarding), and the
 * abort notice every peer gets when the group fails.
 *
 * Ownership: mr_mesh_hosts_free() releases what parse/load allocated.
 */
#ifndef MR_COLL_TCPMESH_H
#define MR_COLL_TCPMESH_H

#include "common/compat.h"
#include "coll/env.h"
#include "meshrun/err.h"

#define MR_MESH_HELLO_TAG 0x4d534800u /* "MSH\0" + number of cables */
#define MR_MESH_MAX_CABLES 16
#define MR_MESH_CHUNK (256u << 10)     /* chunk of a large transfer */
#define MR_MESH_CHUNK_MIN (32u << 10)  /* the smallest: a quarter block, at least this */
#define MR_MESH_DEPTH 4 /* chunks a peer may run ahead per cable while reducing */

struct mr_mesh_hosts {
	int size;
	int *ncab;                 /* size*size: cables of cell [i][j] (0 on the diagonal) */
	struct mr_ring_addr **cell; /* size*size: ncab addresses each (NULL on the diagonal) */
};

#define MR_MESH_NCAB(h, i, j) ((h)->ncab[(size_t)(i) * (size_t)(h)->size + (size_t)(j)])
#define MR_MESH_ADDR(h, i, j, k) (&(h)->cell[(size_t)(i) * (size_t)(h)->size + (size_t)(j)][k])

/* Parse the matrix text; name prefixes errors ("mesh.json: [1][2][0]: ..."). */
int mr_mesh_hosts_parse(const char *text, size_t len, const char *name, struct mr_mesh_hosts *out,
			struct meshrun_err *err);
int mr_mesh_hosts_load(const char *path, struct mr_mesh_hosts *out, struct meshrun_err *err);
void mr_mesh_hosts_free(struct mr_mesh_hosts *h);

#endif
