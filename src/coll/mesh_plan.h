/*
 * mesh_plan.h - the mesh schedule, shared by jaccl (RDMA verbs, jaccl.c) and
 * the TCP mesh (tcpmesh.c): pure arithmetic, unit tested (test_coll_mesh_plan).
 *
 * On a full mesh every rank exchanges its blocks directly with every peer,
 * each over its own cable, all peers at once. A buffer of count elements is
 * cut into size near-equal blocks (mr_mesh_split: block i starts at *off and
 * has *n elements, the first count % size blocks one more). Then
 *   reduce-scatter: rank r sends block p to peer p and reduces the blocks
 *                   every peer sends it into its own block r, in ascending
 *                   peer order (own data first), so the sum's order is fixed;
 *   all-gather:     rank r sends its block r to every peer and receives
 *                   block p from peer p;
 *   all-reduce:     reduce-scatter then all-gather, so each block is summed
 *                   once by its owner and copied: every rank gets the same
 *                   bits. Below MR_MESH_DIRECT bytes (or fewer elements than
 *                   ranks) every rank sends its whole buffer to every peer
 *                   instead and reduces all size inputs in rank order
 *                   (one hop instead of two).
 * Every rank moves 2(n-1)/n of the buffer each way, spread over n-1 cables:
 * when links bind, (n-1)/2 times the bidirectional ring's rate per rank.
 */
#ifndef MR_COLL_MESH_PLAN_H
#define MR_COLL_MESH_PLAN_H

#include "common/compat.h"

#define MR_MESH_DIRECT (32u * 1024u)

/* One peer's part of a mesh step: which block goes to it, which comes from it. */
struct mr_mesh_xfer {
	int peer;
	int sblk;  /* block sent to peer */
	int rblk;  /* block received from peer (reduced into place when reducing) */
};

/*
 * The size-1 transfers of one step for rank, in ascending peer order:
 * reduce (reduce-scatter) sends block peer and receives block rank; otherwise
 * (all-gather) sends block rank and receives block peer. Returns size-1.
 */
int mr_mesh_blocks(int rank, int size, bool reduce, struct mr_mesh_xfer *out);

/* Split count elements into parts near-equal pieces (see above). */
void mr_mesh_split(size_t count, size_t parts, size_t i, size_t *off, size_t *n);

/* True when an all-reduce of count elements of esz bytes on size ranks sends
 * the whole buffer to every peer (small) rather than reduce-scatter + all-gather. */
bool mr_mesh_direct(size_t count, size_t esz, int size);

#endif
