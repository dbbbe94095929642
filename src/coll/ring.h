/*
 * ring.h - the ring backend's data layout (pure arithmetic, unit tested).
 *
 * The buffer is cut into `size` segments of seg elements (the last ones may be
 * shorter or empty: segment k covers [k*seg, min((k+1)*seg, total))). Each
 * segment is cut the same way into nchan channel slices of `sub` elements,
 * and each slice into npk packets of pk elements. Channel c runs its own ring
 * over connection c/2, in direction +1 (receive from rank+1, send to rank-1)
 * for even c and -1 for odd c, so both directions of every connection carry
 * data (2 ranks: channel c sends and receives on one connection, see
 * MR_RING_PAIR_PKT_MIN). An all-reduce is 2(size-1) steps per channel: reduce-scatter (steps
 * 0..size-2) then all-gather (steps size-1..2size-3). At step s a rank sends
 * segment rank + d(s+1) and receives segment rank + d(s+2) (mod size), so after
 * the reduce-scatter rank r holds the full sum of segment r (what sum_scatter
 * returns) and the all-gather starts by sending it.
 *
 * Pipelining: packet j of step s may be sent once packet j of step s-1 has
 * been received (and reduced), so a packet travels on while the next one
 * arrives. Sum order is fixed by the ring (acc = own + incoming) and the
 * all-gather copies the one fully reduced segment, so all ranks get the same
 * bits. Empty packets (count < size, uneven tails) are skipped by both sides.
 *
 * Small all-reduces (mr_ring_small_limit, below) do not use this layout:
 * coll/tcp/ring_sched.c gathers every rank's buffer both ways round the ring
 * (ceil((n-1)/2) hops instead of 2(n-1)) and reduces the copies locally in rank order, the
 * same order on every rank; on exactly 4 ranks, whose recursive-doubling
 * pairs (0-1, 2-3, then 0-3, 1-2) are all ring neighbours, it swaps buffers
 * twice instead (two hops, two messages per rank rather than three).
 */
#ifndef MR_COLL_RING_H
#define MR_COLL_RING_H

#include "common/compat.h"

/*
 * Every channel and every packet costs wakeups and system calls. Below a few
 * MiB per segment they cost more than a second direction and finer
 * pipelining gain: with 256K per channel and 64K packets, a 1 MiB all-reduce
 * on 2 ranks took 610 us, with one channel and one packet 220 us (raw TCP on
 * the same links: 210 us; bench/allreduce, 2 cores). Segments of 4 MiB and
 * more (2 ranks from 8 MiB, 4 from 16 MiB) still use both directions.
 */
#define MR_RING_MIN_CHAN_BYTES (2u << 20) /* per segment, before splitting over channels */
#define MR_RING_PKT_MIN (512u << 10)
#define MR_RING_PKT_MAX (1u << 20)
/*
 * Two ranks (a pair): both neighbours are the same rank, so a channel sends
 * and receives on ONE connection (mr_ring_pair_opened) instead of one
 * direction of each: the TCP acknowledgements ride on the data going the
 * other way instead of travelling as packets of their own. Its packets are
 * smaller (a slice / MR_RING_PAIR_PKT_DIV, at least MR_RING_PAIR_PKT_MIN),
 * so a reduced packet goes back out while it is still in the caches, and a
 * rank that waits for its peer waits for less.
 */
#define MR_RING_PAIR_PKT_MIN (128u << 10)
#define MR_RING_PAIR_PKT_DIV 8
/*
 * Measured and rejected for two ranks (issue 19 part 5): one exchange of the
 * whole buffers, each rank reducing the peer's chunks as they arrive (no
 * all-gather packet waits for the other rank's reduction). It slept far less
 * (1 MiB: 0.3-0.7 context switches per all-reduce, the ring 1.8-3.7) but
 * reduces the whole buffer instead of half of it, and on 2 cores the
 * processor, not the wait, bounds 1-16 MiB: alternated with the ring round
 * by round in one process (same load for both), 15 rounds, it took 1.3x the
 * ring's time at 512K, 1M, 2M, 4M and 16M. Packets of 512K instead of 128K
 * made no difference (1M, 4M, 16M within 3%); of 64K, 1.1-1.3x slower.
 */
/* The most a receiver waits for before poll() wakes it (SO_RCVLOWAT,
 * tcp/ring_sched.c): a packet or this much of it. */
#define MR_RING_LOWAT_MAX (512u << 10)
#define MR_RING_MAX_CHAN 128 /* channels per collective, whatever nconn is */
/*
 * All-reduces that skip the layout (tcp/ring_sched.c, mr_ring_small_limit): at
 * most MR_RING_SMALL_BYTES, or as long as a rank receives at most
 * MR_RING_SMALL_RECV in all (n-1 buffers gathered), or at most
 * MR_RING_SMALL_FOUR on 4 ranks (two swaps). Measured on loopback, 2 cores:
 * gathering beat the ring up to 256K on 2 ranks, 128K on 3, 64K on 5, and the
 * swaps up to 256K on 4 (64K: 150 vs 330 us).
 */
#define MR_RING_SMALL_BYTES (32u << 10)
#define MR_RING_SMALL_RECV (256u << 10)
#define MR_RING_SMALL_FOUR (256u << 10)

/* The largest all-reduce (bytes) that size ranks do without the layout. */
size_t mr_ring_small_limit(int size);

struct mr_ring_layout {
	int size;
	size_t total;  /* elements in the buffer */
	size_t seg;    /* elements per segment */
	int nchan;     /* channels used (<= 2 * nconn) */
	size_t sub;    /* elements per channel slice of a segment */
	size_t pk;     /* elements per packet */
	size_t npk;    /* packets per slice */
};

/* seg = 0 means ceil(total / size) (all-reduce); sum_scatter/all_gather pass
 * the block size with total = size * seg. maxchan = 2 * nconn. */
void mr_ring_layout_init(struct mr_ring_layout *l, int size, size_t total, size_t seg,
			 size_t esz, int maxchan);
/*
 * Two ranks: whether rank's channels of direction dir use the connection it
 * opened (its right[] one) rather than the one it accepted (left[]); the two
 * ranks pick the same connection for each direction, and the two directions
 * pick different ones.
 */
bool mr_ring_pair_opened(int rank, int dir);
/* Segment sent (recv = false) or received at step s by rank in direction d. */
int mr_ring_seg(int rank, int size, int dir, int step, bool recv);
/* Element range of packet j of channel c within segment k (len may be 0). */
void mr_ring_packet(const struct mr_ring_layout *l, int k, int c, size_t j, size_t *off,
		    size_t *len);

#endif
