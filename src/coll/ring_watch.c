/*
 * ring_watch.c - the data connections' stall check, shared by the ring (ring.c)
 * and the mesh (tcpmesh.c): progress counted in whole units (a ring packet, a
 * mesh chunk), not in bytes (ring_impl.h, struct mr_rxwatch).
 *
 * Why units: under heavy packet loss (10-30% on a cable, or a flapping one) TCP
 * still delivers a segment now and then, and the control lanes' heartbeats,
 * small and retransmitted, keep arriving: the lanes' check ("no byte for
 * MESHRUN_TIMEOUT", ring_p2p.c) never fires and the job ended only at
 * meshrun's --timeout, naming nothing. A sender pushes a unit whole as soon as
 * it has it, so once a unit's first byte has arrived its rest is only the
 * link's business; a peer that has not entered the collective yet (busy
 * computing) sends no byte of it and never counts. So:
 *  - a unit begun and not complete after MR_RXWATCH_WARN_MS (or a quarter of
 *    MESHRUN_TIMEOUT, the smaller) is a degraded link: one warning line on
 *    stderr per peer, so that even a job that ends at --timeout names it;
 *  - after MESHRUN_TIMEOUT it is a failed link: the group fails naming the peer.
 * A peer whose heartbeats stopped as well (SIGSTOP, a hung host, an unplugged
 * cable) is left to the lanes' check, which names it "showed no sign of life".
 * The contract that follows: a link must carry one unit (at most 1 MiB) within
 * MESHRUN_TIMEOUT, i.e. 35 KB/s at the default 30 s.
 *
 * The unit clock misses a link that loses a tenth to a third of its packets
 * but still moves each unit within the warning time (small units, seen in the
 * chaos campaign: 25% loss on a ring8 cable, units of 16K taking 0.2-1 s, the
 * job at a crawl until --timeout). The sending side sees that loss directly:
 * TCP's count of retransmitted segments (Linux TCP_INFO, macOS
 * TCP_CONNECTION_INFO, through port.h; nothing elsewhere). mr_txwatch_check
 * samples it every MR_TXWATCH_TICK_MS of a collective (a fast collective never
 * pays a system call) and adds it up per peer; once MR_TXWATCH_MIN_BYTES were
 * sent, a tenth or more retransmitted warns (as above), and a link that stays
 * so for MESHRUN_TIMEOUT fails the group. A healthy link, even a rate-limited
 * one whose queue drops (tc tbf), retransmits far less, apart from a slow
 * start's overshoot, which lasts one window, not MESHRUN_TIMEOUT.
 */
#include "common/compat.h"
#include "coll/ring_impl.h"
#include "common/port.h"
#include "common/timeutil.h"

/* Lane whose heartbeats say whether peer is alive (ring: left or right). */
static struct mr_lane *lane_of_peer(struct mr_ring *r, int peer)
{
	if (r->direct)
		return &r->lane[mr_ring_lane_of(r, peer)];
	return &r->lane[peer == (r->rank + 1) % r->size ? MR_LANE_RIGHT : MR_LANE_LEFT];
}

int64_t mr_rxwatch_warn_ms(const struct mr_ring *r)
{
	return MR_MIN(r->timeout_ms / 4, (int64_t)MR_RXWATCH_WARN_MS);
}

int mr_rxwatch_check(struct mr_ring *r, struct mr_rxwatch *w, int peer, size_t unit,
		     size_t got, size_t len, int64_t now, struct meshrun_err *err)
{
	struct mr_lane *ln;
	int64_t age, heard;

	if (got == 0 || got >= len) {
		w->since = 0;
		return 0;
	}
	if (!w->since || w->unit != unit) {
		w->unit = unit;
		w->since = now;
		return 0;
	}
	age = now - w->since;
	if (age < mr_rxwatch_warn_ms(r))
		return 0;
	pthread_mutex_lock(&r->mu);
	ln = lane_of_peer(r, peer);
	heard = now - ln->last_rx;
	/* failed already (the caller's poll loop reports it), or the peer is
	 * silent on its lane too: the lanes' check names that */
	if (r->failed || ln->dead || heard > r->timeout_ms / 2) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	if (!ln->degraded) {
		ln->degraded = true;
		fprintf(stderr, "%s: rank %d: warning: the link from rank %d (%s) to rank %d is degraded: %zu of %zu bytes of a packet came in %lld ms (packet loss? MESHRUN_TIMEOUT is %lld ms)\n",
			r->who, r->rank, peer, mr_ring_peer_addr(r, peer), r->rank, got, len, (long long)age, (long long)r->timeout_ms);
	}
	pthread_mutex_unlock(&r->mu);
	if (age < r->timeout_ms)
		return 0;
	return mr_ring_fail(r, err, "rank %d (%s): the data link to rank %d stalls: %zu of %zu bytes of a packet came in %lld ms while its heartbeats still arrive (packet loss or a flapping link; MESHRUN_TIMEOUT)", peer, mr_ring_peer_addr(r, peer), r->rank, got, len, (long long)age);
}

int mr_txwatch_check(struct mr_ring *r, struct mr_txwatch *w, int fd, int peer, int64_t now,
		     struct meshrun_err *err)
{
	struct mr_lane *ln;
	uint64_t retr;
	int64_t lossy = 0;

	if (!w->sent || (w->at && now - w->at < MR_TXWATCH_TICK_MS))
		return 0;
	if (mr_tcp_retrans(fd, &retr) < 0) {
		w->at = now; /* not on this platform: look again next tick, no more */
		return 0;
	}
	if (!w->at || retr < w->base_retr) {
		w->at = now;
		w->base_retr = retr;
		w->base_sent = w->sent;
		return 0;
	}
	pthread_mutex_lock(&r->mu);
	ln = lane_of_peer(r, peer);
	ln->tx_sent += w->sent - w->base_sent;
	ln->tx_retr += retr - w->base_retr;
	w->at = now;
	w->base_retr = retr;
	w->base_sent = w->sent;
	if (r->failed || ln->tx_sent < MR_TXWATCH_MIN_BYTES) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	uint64_t sent = ln->tx_sent, re = ln->tx_retr;
	ln->tx_sent = ln->tx_retr = 0;
	mr_ring_log(r, "to rank %d: TCP retransmitted %llu of %llu bytes sent", peer, (unsigned long long)re, (unsigned long long)sent);
	if (re * 10 < sent) {
		ln->lossy_since = 0;
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	/* a lossy sample long after the last one (the job computed in between; a
	 * slow start's overshoot after the idle time) starts a new spell */
	if (!ln->lossy_since || now - ln->lossy_last > r->timeout_ms)
		ln->lossy_since = now;
	ln->lossy_last = now;
	lossy = now - ln->lossy_since;
	if (!ln->lossy_warned) {
		ln->lossy_warned = true;
		fprintf(stderr, "%s: rank %d: warning: the link from rank %d to rank %d (%s) is degraded: TCP retransmitted %llu of %llu bytes sent (packet loss? MESHRUN_TIMEOUT is %lld ms)\n",
			r->who, r->rank, r->rank, peer, mr_ring_peer_addr(r, peer), (unsigned long long)re, (unsigned long long)sent, (long long)r->timeout_ms);
	}
	pthread_mutex_unlock(&r->mu);
	if (lossy < r->timeout_ms)
		return 0;
	return mr_ring_fail(r, err, "rank %d (%s): the data link from rank %d loses packets: TCP retransmitted %llu of the last %llu bytes, a tenth or more for %lld ms (MESHRUN_TIMEOUT)", peer, mr_ring_peer_addr(r, peer), r->rank, (unsigned long long)re, (unsigned long long)sent, (long long)lossy);
}
