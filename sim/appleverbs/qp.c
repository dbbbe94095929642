/*
 * qp.c - meshsim's verbs interposer (appleverbs_impl.h): completion
 * channels, CQs, SRQs and QPs. Creating a QP takes a row of the shared table
 * (the device's QP budget, all processes together); RTR applies Apple's GID
 * and MTU rules, gives soft-RoCE the real GIDs and finds the peer's row.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs_impl.h"

#include <unistd.h>

AV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	if (!av_up())
		return NULL;
	if (!av_rules_in_force.comp_channel) {
		av_refuse(AV_STAT_refused_comp_channel, av_rules_in_force.comp_channel_errno, "ibv_create_comp_channel");
		return NULL;
	}
	return av_real.create_comp_channel(ctx);
}

AV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
				       struct ibv_comp_channel *ch, int vec)
{
	if (!av_up())
		return NULL;
	if (ch && !av_rules_in_force.comp_channel) {
		av_refuse(AV_STAT_refused_comp_channel, av_rules_in_force.comp_channel_errno, "ibv_create_cq with a completion channel");
		return NULL;
	}
	return av_real.create_cq(ctx, cqe, cq_ctx, ch, vec);
}

AV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	if (!av_up())
		return NULL;
	if (!av_rules_in_force.srq) {
		av_refuse(AV_STAT_refused_srq, av_rules_in_force.srq_errno, "ibv_create_srq");
		return NULL;
	}
	return av_real.create_srq(pd, a);
}

static int av_qpt_of(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? AV_QPT_RC : t == IBV_QPT_UC ? AV_QPT_UC : t == IBV_QPT_UD ? AV_QPT_UD : AV_QPT_OTHER;
}

/* Under the lock: a free QP row for this process on dev, -1 when none. */
static int take_qp_row(uint32_t dev)
{
	for (int i = 0; i < AV_MAX_QP; i++) {
		struct av_qp *r = &av_shm->qps[i];
		if (r->pid && !av_pid_alive(r->pid))
			r->pid = 0;
		if (!r->pid) {
			r->pid = (uint32_t)getpid();
			r->dev = dev;
			r->qpn = 0;
			r->posted = 0;
			r->delivered = 0;
			return i;
		}
	}
	return -1;
}

AV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct lqp *q = NULL;
	struct ibv_qp *qp;
	int t, row;

	if (!av_up())
		return NULL;
	pthread_mutex_lock(&av_mu);
	struct lctx *c = av_find_ctx(pd->context);
	pthread_mutex_unlock(&av_mu);
	if (!c)
		return av_real.create_qp(pd, a);
	t = av_qpt_of(a->qp_type);
	if (!(av_rules_in_force.qp_types & (1u << t))) {
		av_refuse(AV_STAT_refused_qp_type, av_rules_in_force.qp_type_errno, "ibv_create_qp of type %s on '%s'", av_qpt_name(t), c->name);
		return NULL;
	}
	if (a->srq && !av_rules_in_force.srq) {
		av_refuse(AV_STAT_refused_srq, av_rules_in_force.srq_errno, "a QP with an SRQ on '%s'", c->name);
		return NULL;
	}
	if ((int)a->cap.max_send_sge > av_rules_in_force.max_sge || (int)a->cap.max_recv_sge > av_rules_in_force.max_sge) {
		av_refuse(AV_STAT_refused_sge, av_rules_in_force.max_sge_errno, "a QP with %u/%u scatter/gather entries on '%s' (at most %d)", a->cap.max_send_sge, a->cap.max_recv_sge, c->name, av_rules_in_force.max_sge);
		return NULL;
	}
	if (a->cap.max_recv_wr > AV_RING) {
		errno = EINVAL; /* the layer's own bound: it remembers AV_RING RECVs per QP */
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	av_state_lock(av_shm);
	int n = av_count_qps(av_shm, c->dev);
	row = av_rules_in_force.max_qp && n >= av_rules_in_force.max_qp ? -2 : take_qp_row(c->dev);
	av_state_unlock(av_shm);
	if (row == -2) {
		free(q);
		av_refuse(AV_STAT_refused_qp_limit, av_rules_in_force.max_qp_errno, "QP %d on '%s' (at most %d per device)", n + 1, c->name, av_rules_in_force.max_qp);
		return NULL;
	}
	if (row < 0) {
		free(q);
		errno = ENOSPC;
		return NULL;
	}
	qp = av_real.create_qp(pd, a);
	if (!qp) {
		int e = errno;
		av_shm->qps[row].pid = 0;
		free(q);
		errno = e;
		return NULL;
	}
	av_shm->qps[row].qpn = qp->qp_num;
	q->qp = qp;
	q->c = c;
	q->slot = row;
	q->state = IBV_QPS_RESET;
	q->send_depth = a->cap.max_send_wr;
	q->recv_depth = a->cap.max_recv_wr;
	q->peer = -1;
	pthread_mutex_lock(&av_mu);
	q->next = av_qps;
	av_qps = q;
	pthread_mutex_unlock(&av_mu);
	return qp;
}

AV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct lqp *q = NULL;

	if (!av_up())
		return EINVAL;
	pthread_mutex_lock(&av_mu);
	for (struct lqp **p = &av_qps; *p; p = &(*p)->next) {
		if ((*p)->qp == qp) {
			q = *p;
			*p = q->next;
			break;
		}
	}
	/* its made-up completions go with it */
	for (struct lwc **p = &av_wcs; *p;) {
		struct lwc *w = *p;
		if (q && w->wc.qp_num == qp->qp_num && w->cq == qp->send_cq) {
			*p = w->next;
			free(w);
		} else {
			p = &w->next;
		}
	}
	for (av_wcs_tail = &av_wcs; *av_wcs_tail; av_wcs_tail = &(*av_wcs_tail)->next)
		;
	pthread_mutex_unlock(&av_mu);
	int rc = av_real.destroy_qp(qp);
	if (q) {
		__atomic_store_n(&av_shm->qps[q->slot].pid, 0, __ATOMIC_RELEASE);
		free(q->held);
		free(q);
	}
	return rc;
}

static int mtu_bytes(enum ibv_mtu m)
{
	return 128 << (int)m; /* IBV_MTU_256 = 1 */
}

/* Under mu: the peer QP's row, by its real GID and number (-1 when not here). */
static int find_peer(const uint8_t *gid0, uint32_t qpn, uint32_t *pid)
{
	for (int i = 0; i < AV_MAX_QP; i++) {
		struct av_qp *r = &av_shm->qps[i];
		if (r->pid && r->qpn == qpn && memcmp(av_shm->devs[r->dev].gid0, gid0, 16) == 0) {
			*pid = r->pid;
			return i;
		}
	}
	return -1;
}

AV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct ibv_qp_attr a;
	int rc;

	if (!av_up())
		return EINVAL;
	pthread_mutex_lock(&av_mu);
	struct lqp *q = av_find_qp(qp);
	pthread_mutex_unlock(&av_mu);
	if (!q)
		return av_real.modify_qp(qp, attr, mask);
	a = *attr;
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR) {
		if ((mask & IBV_QP_PATH_MTU) && mtu_bytes(attr->path_mtu) > av_rules_in_force.max_path_mtu)
			return av_refuse(AV_STAT_refused_mtu, av_rules_in_force.max_path_mtu_errno, "RTR on '%s' with path MTU %d (at most %d)", q->c->name, mtu_bytes(attr->path_mtu), av_rules_in_force.max_path_mtu);
		if ((mask & IBV_QP_AV) && attr->ah_attr.is_global) {
			union ibv_gid sg;
			int si = attr->ah_attr.grh.sgid_index;
			if (si == 0 && !av_rules_in_force.rtr_link_local)
				return av_refuse(AV_STAT_refused_gid, av_rules_in_force.rtr_link_local_errno, "RTR on '%s' from the link-local GID (index 0)", q->c->name);
			av_apple_gid(q->c, si, &sg);
			if (av_gid_is_zero(sg.raw) || av_gid_is_zero(attr->ah_attr.grh.dgid.raw))
				return av_refuse(AV_STAT_refused_gid, av_rules_in_force.rtr_unset_gid_errno, "RTR on '%s' with an unset GID (source index %d%s)", q->c->name, si, av_gid_is_zero(sg.raw) ? ", empty: the interface has no IPv4 address" : "");
			/* the wire: soft-RoCE's link-local GIDs (see appleverbs.h) */
			const uint8_t *peer = av_real_gid_of(attr->ah_attr.grh.dgid.raw);
			if (peer) {
				a.ah_attr.grh.sgid_index = 0;
				memcpy(a.ah_attr.grh.dgid.raw, peer, 16);
			}
			if (peer && (mask & IBV_QP_DEST_QPN)) {
				pthread_mutex_lock(&av_mu);
				q->peer = find_peer(peer, attr->dest_qp_num, &q->peer_pid);
				pthread_mutex_unlock(&av_mu);
			}
		}
	}
	rc = av_real.modify_qp(qp, &a, mask);
	if (rc == 0 && (mask & IBV_QP_STATE)) {
		pthread_mutex_lock(&av_mu);
		q->state = attr->qp_state;
		pthread_mutex_unlock(&av_mu);
	}
	return rc;
}
