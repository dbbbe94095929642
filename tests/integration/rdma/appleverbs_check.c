/*
 * appleverbs-check - the rules of meshsim's Apple RDMA layer, one verbs call
 * at a time, on a real soft-RoCE cable (run INSIDE the rxe guest, under
 * LD_PRELOAD=libmeshsim-appleverbs.so; tests/integration/rdma/guest_jaccl.sh,
 * case layer).
 *
 *   appleverbs-check noip DEV_A DEV_B   before the cable's interfaces have IPv4
 *   appleverbs-check ip DEV_A DEV_B     after (DEV_A and DEV_B: the two ends)
 *
 * noip: the device reports Apple's limits; GID 0 is link-local and GID 1
 * empty; RTR from GID 0 fails with ETIMEDOUT and from the empty GID 1 with
 * EINVAL; no completion channel; RC and UD refused (EOPNOTSUPP), two
 * scatter/gather entries refused; the 11th QP of a device EBUSY, the 101st
 * MR NULL; a RECV before RTS refused.
 * ip: GID 1 is the IPv4-mapped address; a UC pair connects through it;
 * WRITE, SEND_WITH_IMM, two SGEs and an oversized SEND are refused; a SEND
 * without a posted RECV is held until the peer posts one (apple) or lost
 * (uc-strict: MESHSIM_APPLE_VERBS, read here to know what to expect); a
 * SEND of another length than the RECV fails with IBV_WC_LOC_LEN_ERR and the
 * QP's next send flushes.
 * Prints "ok: ..." or "FAIL: ..." per check; exit 0 only when every check
 * passed, 1 otherwise, 2 on a usage error.
 */
#include "common/compat.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <time.h>
#include <unistd.h>

static int fails;

static void check(bool ok, const char *what, int e)
{
	if (ok)
		printf("ok: %s\n", what);
	else
		printf("FAIL: %s (errno %d: %s)\n", what, e, strerror(e));
	fails += !ok;
}

static struct ibv_context *open_dev(const char *name)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = NULL;

	for (int i = 0; l && i < n && !c; i++)
		if (strcmp(ibv_get_device_name(l[i]), name) == 0)
			c = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	return c;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
};

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type t, uint32_t sge)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = s->cq;
	a.recv_cq = s->cq;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = sge;
	a.cap.max_recv_sge = 1;
	a.qp_type = t;
	return ibv_create_qp(s->pd, &a);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid, int sgid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 7;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)sgid;
	a.ah_attr.grh.dgid = *dgid;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int post_send(struct side *s, enum ibv_wr_opcode op, uint32_t len, int nsge)
{
	struct ibv_sge sg[2] = { { (uintptr_t)s->buf, len, s->mr->lkey },
				 { (uintptr_t)s->buf + len, 8, s->mr->lkey } };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = len;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int post_recv(struct side *s, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)s->buf + 65536, len, s->mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	return ibv_post_recv(s->qp, &wr, &bad);
}

/* Poll s's CQ for up to ms: 1 and *wc when a completion came, 0 when none did. */
static int wait_wc(struct side *s, int ms, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(s->cq, 1, wc);
		if (n != 0)
			return n > 0;
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return 0;
}

static int open_side(struct side *s, const char *dev)
{
	s->ctx = open_dev(dev);
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
	s->buf = calloc(1, 1 << 20);
	s->mr = s->cq && s->buf ? ibv_reg_mr(s->pd, s->buf, 1 << 20, IBV_ACCESS_LOCAL_WRITE) : NULL;
	return s->mr ? 0 : -1;
}

static void limits(struct side *a)
{
	struct ibv_qp *q[11];
	struct ibv_mr *m[101];
	static unsigned char mb[101][64];
	int n, e;

	for (n = 0; n < 10 && (q[n] = make_qp(a, IBV_QPT_UC, 1)); n++)
		;
	check(n == 10, "ten UC QPs create on one device", errno);
	q[10] = make_qp(a, IBV_QPT_UC, 1);
	e = errno;
	check(!q[10] && e == EBUSY, "the 11th QP on the device fails with EBUSY", e);
	for (int i = 0; i < n; i++)
		ibv_destroy_qp(q[i]);
	/* the pool's MR is the first of the device's 100 */
	for (n = 0; n < 99 && (m[n] = ibv_reg_mr(a->pd, mb[n], 64, IBV_ACCESS_LOCAL_WRITE)); n++)
		;
	check(n == 99, "100 MRs register on one device", errno);
	m[99] = ibv_reg_mr(a->pd, mb[99], 64, IBV_ACCESS_LOCAL_WRITE);
	e = errno;
	check(!m[99], "the 101st MR on the device is refused (NULL)", e);
	for (int i = 0; i < n; i++)
		ibv_dereg_mr(m[i]);
}

static int phase_noip(struct side *a, struct side *b)
{
	struct ibv_device_attr da;
	union ibv_gid g0, g1, zero;
	struct ibv_qp *qp;
	int e;

	memset(&zero, 0, sizeof(zero));
	check(ibv_query_device(a->ctx, &da) == 0 && da.max_qp == 10 && da.max_mr == 100 && da.max_sge == 1 && da.max_srq == 0, "ibv_query_device reports 10 QPs, 100 MRs, 1 SGE, no SRQ", errno);
	check(ibv_query_gid(a->ctx, 1, 0, &g0) == 0 && g0.raw[0] == 0xfe && g0.raw[1] == 0x80, "GID 0 is the link-local fe80:: GID", errno);
	check(ibv_query_gid(a->ctx, 1, 1, &g1) == 0 && memcmp(&g1, &zero, sizeof(zero)) == 0, "GID 1 is empty while the interface has no IPv4 address", errno);
	errno = 0;
	check(!ibv_create_comp_channel(a->ctx) && errno == EOPNOTSUPP, "no completion channel (EOPNOTSUPP)", errno);
	check(ibv_req_notify_cq(a->cq, 0) == EOPNOTSUPP, "ibv_req_notify_cq refused", 0);
	qp = make_qp(a, IBV_QPT_RC, 1);
	e = errno;
	check(!qp && e == EOPNOTSUPP, "an RC QP fails to create with EOPNOTSUPP", e);
	qp = make_qp(a, IBV_QPT_UD, 1);
	e = errno;
	check(!qp && e == EOPNOTSUPP, "a UD QP fails to create with EOPNOTSUPP", e);
	qp = make_qp(a, IBV_QPT_UC, 2);
	e = errno;
	check(!qp && e == EINVAL, "a QP with two scatter/gather entries is refused", e);
	limits(a);
	a->qp = make_qp(a, IBV_QPT_UC, 1);
	b->qp = make_qp(b, IBV_QPT_UC, 1);
	check(a->qp && b->qp && to_init(a->qp) == 0 && to_init(b->qp) == 0, "a UC pair reaches INIT", errno);
	if (!a->qp || !b->qp)
		return fails;
	check(post_recv(a, 4096) == EINVAL, "a RECV before RTS is refused", 0);
	ibv_query_gid(b->ctx, 1, 0, &g0);
	check(to_rtr(a->qp, b->qp->qp_num, &g0, 0) == ETIMEDOUT, "RTR from the link-local GID (index 0) fails with ETIMEDOUT", 0);
	check(to_rtr(a->qp, b->qp->qp_num, &g0, 1) == EINVAL, "RTR from the empty GID 1 fails with EINVAL", 0);
	return fails;
}

static int phase_ip(struct side *a, struct side *b)
{
	union ibv_gid ga, gb;
	struct ibv_wc wc;
	const char *mode = getenv("MESHSIM_APPLE_VERBS");
	bool held = !mode || strcmp(mode, "uc-strict") != 0;

	a->qp = make_qp(a, IBV_QPT_UC, 1);
	b->qp = make_qp(b, IBV_QPT_UC, 1);
	if (!a->qp || !b->qp) {
		check(false, "a UC pair creates", errno);
		return fails;
	}
	check(ibv_query_gid(a->ctx, 1, 1, &ga) == 0 && ga.raw[10] == 0xff && ga.raw[11] == 0xff && ga.raw[12], "GID 1 is IPv4-mapped once the interface has an address", errno);
	ibv_query_gid(b->ctx, 1, 1, &gb);
	int rc = to_init(a->qp);
	rc = rc ? rc : to_init(b->qp);
	rc = rc ? rc : to_rtr(a->qp, b->qp->qp_num, &gb, 1);
	rc = rc ? rc : to_rtr(b->qp, a->qp->qp_num, &ga, 1);
	rc = rc ? rc : to_rts(a->qp);
	rc = rc ? rc : to_rts(b->qp);
	check(rc == 0, "the UC pair connects through GID 1 (MTU 1024, hop limit 1)", rc);
	check(post_send(a, IBV_WR_RDMA_WRITE, 64, 1) == EINVAL, "RDMA WRITE is refused", 0);
	check(post_send(a, IBV_WR_SEND_WITH_IMM, 64, 1) == EINVAL, "SEND_WITH_IMM is refused", 0);
	check(post_send(a, IBV_WR_SEND, 64, 2) == EINVAL, "a SEND with two SGEs is refused", 0);
	check(post_send(a, IBV_WR_SEND, 40000, 1) == EINVAL, "a SEND longer than the QP's depth of 8 frames of 4 KiB is refused", 0);

	/* a SEND without a RECV on the other end */
	memset(a->buf, 0x5a, 4096);
	check(post_send(a, IBV_WR_SEND, 4096, 1) == 0, "a SEND of 4096 bytes posts", errno);
	if (held) {
		check(wait_wc(a, 300, &wc) == 0, "apple: it does not complete while the peer has no RECV", 0);
		check(post_recv(b, 4096) == 0, "the peer posts a RECV of 4096", errno);
		check(wait_wc(a, 3000, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "apple: then the held SEND completes", 0);
		check(wait_wc(b, 3000, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 4096 && b->buf[65536] == 0x5a, "apple: and the RECV got its 4096 bytes", 0);
	} else {
		check(wait_wc(a, 3000, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "uc-strict: it completes at once", 0);
		check(post_recv(b, 4096) == 0, "the peer posts a RECV of 4096", errno);
		check(wait_wc(b, 300, &wc) == 0, "uc-strict: that RECV gets nothing (the SEND was lost)", 0);
		/* the RECV is still there: the next SEND fills it */
		check(post_send(a, IBV_WR_SEND, 4096, 1) == 0 && wait_wc(a, 3000, &wc) == 1 && wait_wc(b, 3000, &wc) == 1 && wc.byte_len == 4096, "uc-strict: a SEND with the RECV posted arrives", 0);
	}
	/* a SEND shorter than the RECV it would land in */
	check(post_recv(b, 4096) == 0, "the peer posts another RECV of 4096", errno);
	check(post_send(a, IBV_WR_SEND, 2048, 1) == 0 && wait_wc(a, 3000, &wc) == 1 && wc.status == IBV_WC_LOC_LEN_ERR, "a SEND of 2048 into a RECV of 4096 fails (IBV_WC_LOC_LEN_ERR)", 0);
	check(post_send(a, IBV_WR_SEND, 4096, 1) == 0 && wait_wc(a, 3000, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR, "and the QP's next SEND is flushed", 0);
	return fails;
}

int main(int argc, char **argv)
{
	struct side a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (argc != 4 || (strcmp(argv[1], "noip") != 0 && strcmp(argv[1], "ip") != 0)) {
		fprintf(stderr, "usage: appleverbs-check noip|ip DEV_A DEV_B\n");
		return 2;
	}
	if (open_side(&a, argv[2]) < 0 || open_side(&b, argv[3]) < 0) {
		printf("FAIL: open '%s' and '%s' with a PD, a CQ and an MR: %s\n", argv[2], argv[3], strerror(errno));
		return 1;
	}
	if (strcmp(argv[1], "noip") == 0)
		phase_noip(&a, &b);
	else
		phase_ip(&a, &b);
	printf("appleverbs-check %s: %d failed\n", argv[1], fails);
	return fails ? 1 : 0;
}
