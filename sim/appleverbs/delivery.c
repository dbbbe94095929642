/*
 * delivery.c - meshsim's verbs interposer (appleverbs_impl.h): what becomes
 * of a SEND. Apple (held): it waits, in order, until the peer has a RECV
 * posted for it, posted from the sender's next verb or by the flusher
 * thread; uc-strict (dropped): it leaves at once and is counted as lost. A
 * length that differs from the RECV's breaks the QP; MESHSIM_APPLE_LOSE
 * loses one on purpose. Completions the layer makes wait in av_wcs.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"

#include <time.h>

static void add_wc(struct ibv_cq *cq, const struct ibv_send_wr *wr, uint32_t qpn,
		   enum ibv_wc_status st)
{
	struct lwc *w = calloc(1, sizeof(*w));

	if (!w)
		return;
	w->cq = cq;
	w->wc.wr_id = wr->wr_id;
	w->wc.status = st;
	w->wc.opcode = IBV_WC_SEND;
	w->wc.qp_num = qpn;
	*av_wcs_tail = w;
	av_wcs_tail = &w->next;
}

uint32_t av_wr_len(const struct ibv_sge *sg, int n)
{
	uint32_t len = 0;

	for (int i = 0; i < n; i++)
		len += sg[i].length;
	return len;
}

/* The peer QP's row once the QP knows its peer; -1 while it does not. */
static int peer_row(struct lqp *q)
{
	if (q->peer >= 0 && av_shm->qps[q->peer].pid != q->peer_pid)
		return -2; /* the row was freed: the peer is gone */
	return q->peer;
}

enum verdict { V_SEND, V_WAIT, V_DROP, V_DEAD, V_UNKNOWN };

/*
 * May a SEND of len bytes leave now? V_SEND (a RECV is posted for it: *rlen
 * its length), V_WAIT / V_DROP (none: held or lost, by the rules), V_DEAD
 * (the peer's process is gone), V_UNKNOWN (the peer is not under the layer).
 */
static enum verdict judge(struct lqp *q, uint32_t *rlen)
{
	int p = peer_row(q);

	if (p == -1)
		return V_UNKNOWN;
	if (p == -2 || !av_pid_alive(q->peer_pid))
		return V_DEAD;
	struct av_qp *pq = &av_shm->qps[p];
	uint64_t posted = __atomic_load_n(&pq->posted, __ATOMIC_ACQUIRE);
	if (pq->delivered < posted) {
		*rlen = pq->len[pq->delivered % AV_RING];
		return V_SEND;
	}
	return av_rules_in_force.send_without_recv == AV_HELD ? V_WAIT : V_DROP;
}

/* Post one SEND (a copy: next = NULL) to soft-RoCE. */
static int post_one(struct lqp *q, struct ibv_send_wr *wr)
{
	struct ibv_send_wr one = *wr, *bad = NULL;

	one.next = NULL;
	return q->c->post_send(q->qp, &one, &bad);
}

/*
 * A SEND whose turn has come (apple: the head of the held queue; otherwise at
 * once): 1 posted or failed for good, 0 must wait, or an errno of the real
 * post (the caller reports it).
 */
int av_try_send(struct lqp *q, struct ibv_send_wr *wr)
{
	uint32_t len = av_wr_len(wr->sg_list, wr->num_sge), rlen = 0;
	enum verdict v = q->broken ? V_SEND : judge(q, &rlen);

	if (q->broken) {
		add_wc(q->qp->send_cq, wr, q->qp->qp_num, IBV_WC_WR_FLUSH_ERR);
		return 1;
	}
	switch (v) {
	case V_WAIT:
		return 0;
	case V_DEAD:
		if (!q->peer_dead_seen)
			av_stat_add(av_shm, AV_STAT_to_dead_peer);
		q->peer_dead_seen = true;
		if (av_rules_in_force.send_without_recv == AV_HELD)
			return 0; /* Apple: nothing happens, ever */
		break;
	case V_DROP:
		av_stat_add(av_shm, AV_STAT_drops);
		break;
	case V_UNKNOWN:
		break;
	case V_SEND:
		if (av_rules_in_force.send_length == AV_LEN_EQUAL ? len != rlen : len > rlen) {
			av_refuse(AV_STAT_len_mismatch, EINVAL, "a SEND of %u bytes into a RECV of %u on QP %u of '%s'", len, rlen, q->qp->qp_num, q->c->name);
			q->broken = true;
			add_wc(q->qp->send_cq, wr, q->qp->qp_num, IBV_WC_LOC_LEN_ERR);
			return 1;
		}
		if (++q->sent == av_lose_nth) {
			/* lost on the cable: it left (its completion says so), nothing
			 * arrives, the peer's RECV waits for the next SEND */
			av_stat_add(av_shm, AV_STAT_lost);
			if (wr->send_flags & IBV_SEND_SIGNALED)
				add_wc(q->qp->send_cq, wr, q->qp->qp_num, IBV_WC_SUCCESS);
			return 1;
		}
		__atomic_store_n(&av_shm->qps[q->peer].delivered, av_shm->qps[q->peer].delivered + 1, __ATOMIC_RELEASE);
		break;
	}
	int rc = post_one(q, wr);
	return rc ? -rc : 1;
}

/* Apple: post what the peer has RECVs for now, in order. */
void av_flush_held(struct lqp *q)
{
	while (q->hn) {
		struct held *h = &q->held[q->hhead];
		h->wr.sg_list = &h->sge;
		if (av_try_send(q, &h->wr) == 0)
			return;
		q->hhead = (q->hhead + 1) % q->hcap;
		q->hn--;
	}
}

/*
 * Apple's hardware delivers a held SEND by itself once the peer posts its
 * RECV, whatever the sender does meanwhile (it may be blocked elsewhere, as
 * meshrun-rdma-probe is, on its socket): while any SEND is held, a thread
 * of the layer posts what it can every millisecond.
 */
static bool flusher_running;

static void *flusher(void *arg)
{
	struct timespec ts = { 0, 1000000 };
	bool any = true;

	(void)arg;
	while (any) {
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&av_mu);
		any = false;
		for (struct lqp *q = av_qps; q; q = q->next) {
			av_flush_held(q);
			any = any || q->hn;
		}
		if (!any)
			flusher_running = false;
		pthread_mutex_unlock(&av_mu);
	}
	return NULL;
}

/* Under mu: make sure the flusher runs. */
static void start_flusher(void)
{
	pthread_t t;
	pthread_attr_t a;

	if (flusher_running)
		return;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	flusher_running = pthread_create(&t, &a, flusher, NULL) == 0;
	pthread_attr_destroy(&a);
}

int av_hold(struct lqp *q, const struct ibv_send_wr *wr)
{
	if (q->hn == q->hcap) {
		size_t cap = q->hcap ? 2 * q->hcap : 16;
		struct held *h = calloc(cap, sizeof(*h));
		if (!h)
			return ENOMEM;
		for (size_t i = 0; i < q->hn; i++)
			h[i] = q->held[(q->hhead + i) % q->hcap];
		free(q->held);
		q->held = h;
		q->hhead = 0;
		q->hcap = cap;
	}
	struct held *h = &q->held[(q->hhead + q->hn) % q->hcap];
	h->wr = *wr;
	h->wr.next = NULL;
	if (wr->num_sge)
		h->sge = wr->sg_list[0];
	h->wr.sg_list = &h->sge;
	q->hn++;
	av_stat_add(av_shm, AV_STAT_held);
	start_flusher();
	return 0;
}
