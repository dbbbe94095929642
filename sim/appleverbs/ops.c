/*
 * ops.c - meshsim's verbs interposer (appleverbs_impl.h): the ops every
 * context opened here gets in place of soft-RoCE's (libibverbs calls them
 * inline): each work request checked against the rules, SENDs handed to
 * delivery.c, RECVs counted into the shared table for the peer to see, the
 * completions the layer made returned before the real ones, and no
 * completion events nor extended QPs.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"

static int av_op_of(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return AV_OP_SEND;
	case IBV_WR_SEND_WITH_IMM: return AV_OP_SEND_IMM;
	case IBV_WR_RDMA_WRITE: return AV_OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM: return AV_OP_WRITE_IMM;
	case IBV_WR_RDMA_READ: return AV_OP_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return AV_OP_ATOMIC;
	default: return AV_OP_OTHER;
	}
}

/* Checks every work request shares: sge count and length bounds. 0 or errno. */
static int check_wr(struct lqp *q, const struct ibv_sge *sg, int nsge, uint32_t depth,
		    const char *what)
{
	uint32_t len = av_wr_len(sg, nsge);

	if (nsge > av_rules_in_force.max_sge)
		return av_refuse(AV_STAT_refused_sge, av_rules_in_force.max_sge_errno, "%s with %d scatter/gather entries on '%s' (at most %d)", what, nsge, q->c->name, av_rules_in_force.max_sge);
	if (len > av_rules_in_force.max_msg_bytes)
		return av_refuse(AV_STAT_refused_msg_size, av_rules_in_force.max_msg_errno, "%s of %u bytes on '%s' (at most %u)", what, len, q->c->name, av_rules_in_force.max_msg_bytes);
	if (av_rules_in_force.depth_frame_bytes && len > (uint64_t)depth * av_rules_in_force.depth_frame_bytes)
		return av_refuse(AV_STAT_refused_msg_size, av_rules_in_force.depth_frame_errno, "%s of %u bytes on '%s': the QP's depth of %u counts %u-byte frames", what, len, q->c->name, depth, av_rules_in_force.depth_frame_bytes);
	return 0;
}

/*
 * Take av_mu and find qp's record. NULL, av_mu released again, when the layer
 * did not create qp: *c is then its context's record (NULL: a context not
 * opened here either), whose real op the caller passes the request to.
 */
static struct lqp *lock_qp(struct ibv_qp *qp, struct lctx **c)
{
	pthread_mutex_lock(&av_mu);
	struct lqp *q = av_find_qp(qp);
	*c = av_find_ctx(qp->context);
	if (!q)
		pthread_mutex_unlock(&av_mu);
	return q;
}

int av_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct lctx *c;
	struct lqp *q = lock_qp(qp, &c);
	int rc = 0;

	if (!q)
		return c ? c->post_send(qp, wr, bad) : EINVAL;
	for (; wr && rc == 0; wr = wr->next) {
		int op = av_op_of(wr->opcode);
		if (!(av_rules_in_force.opcodes & (1u << op)))
			rc = av_refuse(AV_STAT_refused_opcode, av_rules_in_force.opcode_errno, "ibv_post_send of %s on '%s'", av_op_name(op), q->c->name);
		else if (q->state != IBV_QPS_RTS)
			rc = EINVAL;
		else
			rc = check_wr(q, wr->sg_list, wr->num_sge, q->send_depth, "a SEND");
		if (rc) {
			*bad = wr;
			break;
		}
		av_stat_add(av_shm, AV_STAT_sends);
		av_flush_held(q);
		int st = q->hn ? 0 : av_try_send(q, wr);
		if (st == 0)
			rc = av_hold(q, wr);
		else if (st < 0)
			rc = -st;
		if (rc)
			*bad = wr;
	}
	pthread_mutex_unlock(&av_mu);
	return rc;
}

int av_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct lctx *c;
	struct lqp *q = lock_qp(qp, &c);
	int rc = 0;

	if (!q)
		return c ? c->post_recv(qp, wr, bad) : EINVAL;
	struct av_qp *row = &av_shm->qps[q->slot];
	for (; wr && rc == 0; wr = wr->next) {
		if (q->state != IBV_QPS_RTS && !av_rules_in_force.post_recv_before_rts)
			rc = av_refuse(AV_STAT_refused_recv_before_rts, av_rules_in_force.post_recv_before_rts_errno, "ibv_post_recv on '%s' before RTS", q->c->name);
		else
			rc = check_wr(q, wr->sg_list, wr->num_sge, q->recv_depth, "a RECV");
		if (rc == 0 && row->posted - __atomic_load_n(&row->delivered, __ATOMIC_RELAXED) >= AV_RING)
			rc = ENOMEM; /* more outstanding RECVs than the layer remembers */
		if (rc == 0) {
			struct ibv_recv_wr one = *wr, *b = NULL;
			one.next = NULL;
			row->len[row->posted % AV_RING] = av_wr_len(wr->sg_list, wr->num_sge);
			rc = q->c->post_recv(qp, &one, &b);
			if (rc == 0)
				__atomic_store_n(&row->posted, row->posted + 1, __ATOMIC_RELEASE);
		}
		if (rc)
			*bad = wr;
	}
	pthread_mutex_unlock(&av_mu);
	return rc;
}

int av_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int got = 0;

	pthread_mutex_lock(&av_mu);
	struct lctx *c = av_find_ctx(cq->context);
	for (struct lqp *q = av_qps; q; q = q->next)
		if (q->qp->send_cq == cq && q->hn)
			av_flush_held(q);
	for (struct lwc **p = &av_wcs; *p && got < n;) {
		struct lwc *w = *p;
		if (w->cq != cq) {
			p = &w->next;
			continue;
		}
		wc[got++] = w->wc;
		*p = w->next;
		if (av_wcs_tail == &w->next)
			av_wcs_tail = p;
		free(w);
	}
	pthread_mutex_unlock(&av_mu);
	if (got == n || !c)
		return got;
	int k = c->poll_cq(cq, n - got, wc + got);
	return k < 0 ? (got ? got : k) : got + k;
}

int av_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return av_refuse(AV_STAT_refused_comp_channel, av_rules_in_force.comp_channel_errno, "ibv_req_notify_cq (no completion events)");
}

struct ibv_qp *av_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	(void)ctx;
	(void)a;
	av_refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_create_qp_ex (not known to exist on Apple's driver)");
	return NULL;
}
