/*
 * watch.c - the data connections' stall check, shared by the ring schedule
 * (ring_sched.c) and the mesh (mesh/tcpmesh.c): progress counted in whole
 * units (a ring packet, a mesh chunk), not in bytes (tcp.h, struct mr_rxwatch).
 *
 * Why units: under heavy packet loss (10-30% on a cable, or a flapping one) TCP
 * still delivers a segment now and then, and the control lanes' heartbeats,
 * small and retransmitted, keep arriving: the lanes' check ("no byte for
 * MESHRUN_TIMEOUT", p2p.c) never fires and the job ended only at
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
 * the bytes TCP put on the wire and how many of them were retransmissions
 * (Linux TCP_INFO tcpi_bytes_sent/_retrans, macOS TCP_CONNECTION_INFO, through
 * port.h; nothing elsewhere). Bytes written are no measure: they run a send
 * buffer ahead of the wire. mr_txwatch_check samples each data socket at most
 * every MR_TXWATCH_TICK_MS, from its baseline kept across collectives: a job
 * of many small collectives, each under a tick and each slowed by a
 * retransmission timeout, crawled to --timeout unseen when the baseline was
 * taken anew in every collective (chaos campaign, mesh4 at 15% loss). A batch
 * of MR_TXWATCH_MIN_BYTES with a twentieth or more retransmitted warns (as
 * above), a tenth or more starts a lossy spell, judged on all it sent; a spell that lasts
 * MESHRUN_TIMEOUT fails the group. A healthy link, even a rate-limited one
 * whose queue drops (tc tbf), retransmits far less, apart from a slow
 * start's overshoot, which the traffic after it outweighs within a window or
 * two, long before MESHRUN_TIMEOUT.
 */
#include "common/compat.h"
#include "coll/tcp/tcp.h"
#include "common/port.h"
#include "common/timeutil.h"

/* Lane whose heartbeats say whether peer is alive (ring: left or right). */
static struct mr_lane *lane_of_peer(struct mr_tcp *r, int peer)
{
	if (r->direct)
		return &r->lane[mr_tcp_lane_of(r, peer)];
	return &r->lane[peer == (r->rank + 1) % r->size ? MR_LANE_RIGHT : MR_LANE_LEFT];
}

int64_t mr_rxwatch_warn_ms(const struct mr_tcp *r)
{
	return MR_MIN(r->timeout_ms / 4, (int64_t)MR_RXWATCH_WARN_MS);
}

int mr_rxwatch_check(struct mr_tcp *r, struct mr_rxwatch *w, int peer, size_t unit,
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
			r->who, r->rank, peer, mr_tcp_peer_addr(r, peer), r->rank, got, len, (long long)age, (long long)r->timeout_ms);
	}
	pthread_mutex_unlock(&r->mu);
	if (age < r->timeout_ms)
		return 0;
	return mr_tcp_fail(r, err, "rank %d (%s): the data link to rank %d stalls: %zu of %zu bytes of a packet came in %lld ms while its heartbeats still arrive (packet loss or a flapping link; MESHRUN_TIMEOUT)", peer, mr_tcp_peer_addr(r, peer), r->rank, got, len, (long long)age);
}

/* The socket's slot in the lane (a free one the first time); NULL when full. */
static struct mr_txsock *txsock_of(struct mr_lane *ln, int fd)
{
	struct mr_txsock *free_slot = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(ln->txs); i++) {
		if (ln->txs[i].at && ln->txs[i].fd == fd)
			return &ln->txs[i];
		if (!ln->txs[i].at && !free_slot)
			free_slot = &ln->txs[i];
	}
	if (free_slot)
		free_slot->fd = fd;
	return free_slot;
}

/* Once per peer, with r->mu held: the link to it loses packets. */
static void txwatch_warn(struct mr_tcp *r, struct mr_lane *ln, int peer, uint64_t re, uint64_t sent)
{
	if (ln->lossy_warned)
		return;
	ln->lossy_warned = true;
	fprintf(stderr, "%s: rank %d: warning: the link from rank %d to rank %d (%s) is degraded: TCP retransmitted %llu of %llu bytes sent (packet loss? MESHRUN_TIMEOUT is %lld ms)\n",
		r->who, r->rank, r->rank, peer, mr_tcp_peer_addr(r, peer), (unsigned long long)re, (unsigned long long)sent, (long long)r->timeout_ms);
}

int mr_txwatch_check(struct mr_tcp *r, int fd, int peer, int64_t now, struct meshrun_err *err)
{
	struct mr_lane *ln = lane_of_peer(r, peer);
	struct mr_txsock *w = txsock_of(ln, fd);
	struct mr_tcp_tx t;
	uint64_t sent, retr;
	int64_t lossy;

	/* the slots and their sockets are the collective caller's alone; the
	 * lane's counts below are shared with the progress thread's messages */
	if (!w || (w->at && now - w->at < MR_TXWATCH_TICK_MS))
		return 0;
	if (mr_tcp_tx(fd, &t) < 0) {
		w->at = now; /* not on this platform: look again next tick, no more */
		w->sent = w->retr = UINT64_MAX;
		return 0;
	}
	sent = t.sent;
	retr = t.retrans;
	/* data in flight and no acknowledgement for a while: the link drops
	 * all (a flapping cable's down time: its local drops are no
	 * retransmissions, and units of a few segments never begin at the
	 * receiver, whose check sees nothing). A stopped or busy peer still
	 * acknowledges (its kernel does) until its window closes, and then
	 * nothing is in flight. A warning: TCP_USER_TIMEOUT ends a link that
	 * stays so (io.c) */
	if (t.in_flight && t.ack_age_ms >= mr_rxwatch_warn_ms(r) && !ln->lossy_warned) {
		pthread_mutex_lock(&r->mu);
		if (!ln->lossy_warned && !r->failed) {
			ln->lossy_warned = true;
			fprintf(stderr, "%s: rank %d: warning: the link from rank %d to rank %d (%s) is degraded: no acknowledgement for %lld ms with %u segments in flight (packet loss or a flapping link? MESHRUN_TIMEOUT is %lld ms)\n",
				r->who, r->rank, r->rank, peer, mr_tcp_peer_addr(r, peer), (long long)t.ack_age_ms, t.in_flight, (long long)r->timeout_ms);
		}
		pthread_mutex_unlock(&r->mu);
	}
	/* first look (or a new socket at this fd): the baseline */
	if (!w->at || sent < w->sent || retr < w->retr) {
		w->at = now;
		w->sent = sent;
		w->retr = retr;
		return 0;
	}
	pthread_mutex_lock(&r->mu);
	ln->tx_sent += sent - w->sent;
	ln->tx_retr += retr - w->retr;
	w->at = now;
	w->sent = sent;
	w->retr = retr;
	/* judge a batch: MR_TXWATCH_MIN_BYTES (so that a few segments of small
	 * collectives, a tail-loss probe among them, never start a spell); in a
	 * spell also what a second brought, however little: a link that loses
	 * a lot sends little */
	if (r->failed || !ln->tx_sent ||
	    (ln->tx_sent < MR_TXWATCH_MIN_BYTES && (!ln->lossy_since || now - ln->tx_eval_at < MR_TXWATCH_EVAL_MS))) {
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	bool big = ln->tx_sent >= MR_TXWATCH_MIN_BYTES;
	uint64_t bsent = ln->tx_sent, bre = ln->tx_retr;
	ln->tx_sent = ln->tx_retr = 0;
	ln->tx_eval_at = now;
	mr_tcp_log(r, "to rank %d: TCP retransmitted %llu of %llu bytes sent", peer, (unsigned long long)bre, (unsigned long long)bsent);
	/* a twentieth warns already: a link that loses 5% of its packets fails
	 * no check, but a job of many small collectives crawls over it, each
	 * loss a retransmission timeout, and may end at --timeout: the user
	 * must learn which link it was */
	if (big && bre * 20 >= bsent)
		txwatch_warn(r, ln, peer, bre, bsent);
	/* a spell whose last batch is long gone (the job computed in between;
	 * a slow start's overshoot after the idle time) is over */
	if (ln->lossy_since && now - ln->lossy_last > r->timeout_ms)
		ln->lossy_since = 0;
	if (!ln->lossy_since) {
		if (!big || bre * 10 < bsent) {
			pthread_mutex_unlock(&r->mu);
			return 0;
		}
		ln->lossy_since = now;
		ln->spell_sent = ln->spell_retr = 0;
	}
	/* the spell is judged on all it sent: one lucky batch (a tenth is a
	 * few segments in a small one) does not end it, a healthy link's
	 * traffic after a slow start's overshoot soon does */
	ln->spell_sent += bsent;
	ln->spell_retr += bre;
	if (ln->spell_retr * 10 < ln->spell_sent) {
		ln->lossy_since = 0;
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	ln->lossy_last = now;
	lossy = now - ln->lossy_since;
	txwatch_warn(r, ln, peer, bre, bsent);
	uint64_t ssent = ln->spell_sent, sre = ln->spell_retr;
	pthread_mutex_unlock(&r->mu);
	if (lossy < r->timeout_ms)
		return 0;
	return mr_tcp_fail(r, err, "rank %d (%s): the data link from rank %d loses packets: TCP retransmitted %llu of the last %llu bytes, a tenth or more for %lld ms (MESHRUN_TIMEOUT)", peer, mr_tcp_peer_addr(r, peer), r->rank, (unsigned long long)sre, (unsigned long long)ssent, (long long)lossy);
}
