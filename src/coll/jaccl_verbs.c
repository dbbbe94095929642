/*
 * jaccl_verbs.c - queue pairs of the JACCL backend and the transfer engine.
 *
 * Setup per conn (rdma-core's rc_pingpong order): open the named device,
 * PD, completion channel, CQ, RC QP, one registered buffer pool; INIT; post
 * the receive buffers; publish (qpn, psn, lid, gid, mtu) through the side
 * channel; RTR with the peer's, RTS; side-channel barrier so that no rank
 * sends before every QP is ready to receive.
 *
 * GID: MESHRUN_IB_GID_INDEX when set (the escape hatch, e.g. rxe devices in
 * one namespace where only the link-local GID 0 works); otherwise the first
 * IPv4-mapped GID of the port (what MLX looks for, and what macOS's Thunderbolt
 * RDMA and RoCE v2 with an IPv4 address give); otherwise index 0. An all-zero
 * GID is "no usable GID", reported with the interface behind the device.
 *
 * Waiting: poll the CQs; after a short spin, arm them and sleep in poll() on
 * their completion channels and the side-channel sockets, at most 200 ms at a
 * time, so the stall timeout is checked without any busy loop.
 */
#include "common/compat.h"
#include "coll/le.h"
#include "coll/jaccl_impl.h"
#include "common/envmap.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#define WIRE_ENTRY 40

static size_t pool_bytes(void)
{
	return 2u * MR_JDEPTH * (size_t)MR_JACCL_MAX_CHUNK;
}

static unsigned char *rx_buf(struct mr_jconn *c, uint64_t seq)
{
	return c->pool + (size_t)(seq % MR_JDEPTH) * MR_JACCL_MAX_CHUNK;
}

static unsigned char *tx_buf(struct mr_jconn *c, uint64_t seq)
{
	return c->pool + (size_t)(MR_JDEPTH + seq % MR_JDEPTH) * MR_JACCL_MAX_CHUNK;
}

static int post_recv(struct mr_jconn *c, struct meshrun_err *err)
{
	struct ibv_sge sge = { (uintptr_t)rx_buf(c, c->rx_posted), MR_JACCL_MAX_CHUNK, c->mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = c->rx_posted;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	int rc = ibv_post_recv(c->qp, &wr, &bad);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_PEER, "jaccl: peer rank %d (device '%s'): ibv_post_recv", c->peer, c->dev);
	c->rx_posted++;
	return 0;
}

/* The netdev behind a GID (Linux sysfs); "" when unknown. */
static void gid_ifname(const char *dev, int idx, char *out, size_t n)
{
	char path[256];
	struct mr_buf b = MR_BUF_INIT;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d", dev, idx);
	if (mr_read_file(path, 256, &b, NULL) == 0) {
		const char *s = mr_buf_cstr(&b);
		size_t len = strcspn(s, "\n");
		snprintf(out, n, "%.*s", (int)MR_MIN(len, n - 1), s);
	}
	mr_buf_release(&b);
}

static bool gid_zero(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		if (g->raw[i])
			return false;
	return true;
}

static bool gid_v4mapped(const union ibv_gid *g)
{
	for (int i = 0; i < 10; i++)
		if (g->raw[i])
			return false;
	return g->raw[10] == 0xff && g->raw[11] == 0xff;
}

static int choose_gid(struct mr_jconn *c, const struct ibv_port_attr *pa, int want,
		      struct meshrun_err *err)
{
	char ifn[64];
	int n = MR_MIN(pa->gid_tbl_len, 32);

	if (want < 0) {
		want = 0;
		for (int i = 0; i < n; i++) {
			union ibv_gid g;
			if (ibv_query_gid(c->ctx, 1, i, &g) == 0 && gid_v4mapped(&g)) {
				want = i;
				break;
			}
		}
	}
	c->gid_index = want;
	if (ibv_query_gid(c->ctx, 1, want, &c->gid) != 0 || gid_zero(&c->gid)) {
		gid_ifname(c->dev, 0, ifn, sizeof(ifn));
		return mr_err_set(err, MESHRUN_E_CONNECT, "jaccl: device '%s' has no usable GID (index %d is empty, no IPv4-mapped GID): bring up and address its interface '%s' (give it an IPv4 address) or set MESHRUN_IB_GID_INDEX", c->dev, want, ifn[0] ? ifn : "?");
	}
	return 0;
}

/*
 * meshsim's simulated Macs set MESHSIM_PRETEND_RDMA in their ssh sessions when
 * `meshsim up --pretend-rdma` made ibv_devices list devices that do not exist:
 * say so where the device is missing, not only "no RDMA support".
 */
static const char *pretend_note(void)
{
	const char *v = getenv(MR_ENV(MESHSIM_PRETEND_RDMA));

	return v && *v ? "; this host is simulated by `meshsim up --pretend-rdma`, whose ibv_devices lists RDMA devices that do not exist (bring the cluster up without --pretend-rdma, or use --backend ring)" : "";
}

static int open_device(struct mr_jconn *c, const char *where, struct meshrun_err *err)
{
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	char avail[300] = "";
	size_t alen = 0;

	if (!list)
		return mr_err_sys(err, "jaccl: ibv_get_device_list (no RDMA support: is the rdma_rxe or a NIC driver loaded?%s)", pretend_note());
	for (int i = 0; i < num && !c->ctx; i++) {
		const char *name = ibv_get_device_name(list[i]);
		if (strcmp(name, c->dev) == 0) {
			c->ctx = ibv_open_device(list[i]);
			if (!c->ctx) {
				ibv_free_device_list(list);
				return mr_err_sys(err, "jaccl: open RDMA device '%s'", c->dev);
			}
		} else if (alen + strlen(name) + 2 < sizeof(avail)) {
			alen += (size_t)snprintf(avail + alen, sizeof(avail) - alen, "%s%s", alen ? " " : "", name);
		}
	}
	ibv_free_device_list(list);
	if (!c->ctx)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "jaccl: RDMA device '%s' (%s) not found; devices here: %s%s", c->dev, where, avail[0] ? avail : "none", pretend_note());
	return 0;
}

/* Everything up to INIT with the receive buffers posted. */
static int conn_open(struct mr_jconn *c, const char *where, int gid_want, struct meshrun_err *err)
{
	struct ibv_port_attr pa;
	int rc = open_device(c, where, err);

	if (rc < 0)
		return rc;
	if (ibv_query_port(c->ctx, 1, &pa) != 0)
		return mr_err_sys(err, "jaccl: query port 1 of '%s'", c->dev);
	if (pa.state != IBV_PORT_ACTIVE)
		return mr_err_set(err, MESHRUN_E_CONNECT, "jaccl: device '%s' port 1 is %s, not active (is its interface up?)", c->dev, ibv_port_state_str(pa.state));
	c->lid = pa.lid;
	c->mtu = pa.active_mtu;
	rc = choose_gid(c, &pa, gid_want, err);
	if (rc < 0)
		return rc;
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd)
		return mr_err_sys(err, "jaccl: ibv_alloc_pd on '%s'", c->dev);
	c->ch = ibv_create_comp_channel(c->ctx);
	if (!c->ch)
		return mr_err_sys(err, "jaccl: ibv_create_comp_channel on '%s'", c->dev);
	mr_set_nonblock(c->ch->fd, true);
	mr_set_nonblock(c->ctx->async_fd, true); /* polled with the rest in wait_events() */
	c->cq = ibv_create_cq(c->ctx, 2 * MR_JDEPTH + 4, NULL, c->ch, 0);
	if (!c->cq)
		return mr_err_sys(err, "jaccl: ibv_create_cq on '%s'", c->dev);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.cap.max_send_wr = MR_JDEPTH;
	ia.cap.max_recv_wr = MR_JDEPTH;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_RC;
	c->qp = ibv_create_qp(c->pd, &ia);
	if (!c->qp)
		return mr_err_sys(err, "jaccl: ibv_create_qp (RC) on '%s'", c->dev);
	if (posix_memalign((void **)&c->pool, 4096, pool_bytes()) != 0) {
		c->pool = NULL;
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: cannot allocate %zu bytes of buffers", pool_bytes());
	}
	c->mr = ibv_reg_mr(c->pd, c->pool, pool_bytes(), IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return mr_err_sys(err, "jaccl: ibv_reg_mr of %zu bytes on '%s' (memlock limit?)", pool_bytes(), c->dev);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	rc = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_CONNECT, "jaccl: QP of '%s' to INIT", c->dev);
	c->psn = (uint32_t)((mr_now_us() ^ ((int64_t)getpid() << 8) ^ (int64_t)c->qp->qp_num) & 0xffffff);
	for (int i = 0; i < MR_JDEPTH; i++) {
		rc = post_recv(c, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void conn_close(struct mr_jconn *c)
{
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	free(c->pool);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->ch)
		ibv_destroy_comp_channel(c->ch);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	memset(c, 0, sizeof(*c));
}

/* Wire entry: peer, side, idx, qpn, psn (u32 each), lid u16, mtu u8, 0, gid[16]. */
static void encode_conn(const struct mr_jconn *c, unsigned char *p)
{
	mr_put_le32(p, (uint32_t)c->peer);
	mr_put_le32(p + 4, (uint32_t)c->side);
	mr_put_le32(p + 8, (uint32_t)c->idx);
	mr_put_le32(p + 12, c->qp->qp_num);
	mr_put_le32(p + 16, c->psn);
	p[20] = (unsigned char)c->lid;
	p[21] = (unsigned char)(c->lid >> 8);
	p[22] = (unsigned char)c->mtu;
	p[23] = 0;
	memcpy(p + 24, c->gid.raw, 16);
}

static int side_pair(const struct mr_jaccl *J, int side)
{
	if (side == MR_JSIDE_MESH || J->size == 2)
		return side;
	return side == MR_JSIDE_RIGHT ? MR_JSIDE_LEFT : MR_JSIDE_RIGHT;
}

static int conn_connect(struct mr_jconn *c, const unsigned char *e, struct meshrun_err *err)
{
	struct ibv_qp_attr a;
	enum ibv_mtu rmtu = (enum ibv_mtu)e[22];
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = rmtu < c->mtu ? rmtu : c->mtu;
	a.dest_qp_num = mr_get_le32(e + 12);
	a.rq_psn = mr_get_le32(e + 16) & 0xffffff;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12; /* 0.64 ms: RNR is our flow control (receiver behind) */
	a.ah_attr.dlid = (uint16_t)(e[20] | e[21] << 8);
	a.ah_attr.port_num = 1;
	memcpy(a.ah_attr.grh.dgid.raw, e + 24, 16);
	if (!gid_zero(&a.ah_attr.grh.dgid)) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
	}
	rc = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_CONNECT, "jaccl: QP of '%s' to RTR (peer rank %d, GID index %d)", c->dev, c->peer, c->gid_index);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	/* 1.07 s per try: shorter ack timeouts made soft-RoCE under emulation
	 * retransmit spuriously, and its 6.1 retransmit path then failed QPs
	 * (local QP operation error) or delivered a SEND twice. A dead peer is
	 * seen sooner through the side channel anyway. */
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;  /* infinite: the stall timeout bounds it */
	a.sq_psn = c->psn;
	a.max_rd_atomic = 1;
	rc = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_CONNECT, "jaccl: QP of '%s' to RTS (peer rank %d)", c->dev, c->peer);
	return 0;
}

/* Find the entry of rank p's blob that pairs with conn c. */
static const unsigned char *find_entry(const struct mr_jaccl *J, const struct mr_jaccl_blob *b,
				       const struct mr_jconn *c, struct meshrun_err *err)
{
	const struct mr_jaccl_blob *pb = &b[c->peer];

	if (pb->len < 4 || (pb->len - 4) / WIRE_ENTRY < mr_get_le32(pb->data) || (pb->len - 4) % WIRE_ENTRY)
		return mr_err_set(err, MESHRUN_E_PROTO, "jaccl: rank %d sent a malformed queue-pair table", c->peer), NULL;
	uint32_t n = mr_get_le32(pb->data);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *e = pb->data + 4 + (size_t)i * WIRE_ENTRY;
		if (mr_get_le32(e) == (uint32_t)J->rank && mr_get_le32(e + 4) == (uint32_t)side_pair(J, c->side) &&
		    mr_get_le32(e + 8) == (uint32_t)c->idx)
			return e;
	}
	mr_err_set(err, MESHRUN_E_PROTO, "jaccl: rank %d has no queue pair for cable %d to rank %d (do all ranks read the same MLX_IBV_DEVICES?)", c->peer, c->idx, J->rank);
	return NULL;
}

static void add_conn(struct mr_jaccl *J, int peer, int side, int idx, const char *dev)
{
	struct mr_jconn *c = &J->conn[J->nconn++];

	c->peer = peer;
	c->side = side;
	c->idx = idx;
	snprintf(c->dev, sizeof(c->dev), "%s", dev);
}

int mr_jaccl_verbs_setup(struct mr_jaccl *J, const struct mr_jaccl_matrix *m,
			 const struct mr_jaccl_env *env, struct meshrun_err *err)
{
	const int r = J->rank, n = J->size;
	const int right = (r + 1) % n, left = (r + n - 1) % n;
	struct mr_jaccl_blob *all = NULL;
	unsigned char *blob = NULL;
	char where[300];
	int rc = 0;

	int max = J->topo == MR_JACCL_MESH ? n - 1 : 2 * J->ncables;
	J->conn = calloc((size_t)max, sizeof(*J->conn));
	J->peer = calloc((size_t)n, sizeof(*J->peer));
	J->right = calloc((size_t)J->ncables, sizeof(*J->right));
	J->left = calloc((size_t)J->ncables, sizeof(*J->left));
	if (!J->conn || !J->peer || !J->right || !J->left)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	if (J->topo == MR_JACCL_MESH) {
		for (int p = 0; p < n; p++) {
			if (p == r)
				continue;
			add_conn(J, p, MR_JSIDE_MESH, 0, MR_JACCL_CELL(m, r, p)->names[0]);
			J->peer[p] = &J->conn[J->nconn - 1];
		}
	} else {
		for (int j = 0; j < J->ncables; j++) {
			add_conn(J, right, MR_JSIDE_RIGHT, j, MR_JACCL_CELL(m, r, right)->names[j]);
			J->right[j] = &J->conn[J->nconn - 1];
		}
		for (int j = 0; j < J->ncables; j++) {
			if (n == 2) {
				J->left[j] = J->right[j];
				continue;
			}
			add_conn(J, left, MR_JSIDE_LEFT, j, MR_JACCL_CELL(m, r, left)->names[j]);
			J->left[j] = &J->conn[J->nconn - 1];
		}
		J->peer[right] = J->right[0];
		J->peer[left] = J->left[0];
	}
	for (int i = 0; i < J->nconn; i++) {
		struct mr_jconn *c = &J->conn[i];
		snprintf(where, sizeof(where), "rank %d, column %d of '%s'", r, c->peer, env->devices_path);
		rc = conn_open(c, where, env->gid_index, err);
		if (rc < 0) {
			/* the others are in (or on their way to) the all-gather below:
			 * tell them why, so that they do not fail with a broken pipe */
			mr_err_prefix(err, "rank %d", r);
			mr_jaccl_side_fail(&J->side, err ? err->msg : "jaccl: setup failed");
			return rc;
		}
	}
	size_t blen = 4 + (size_t)J->nconn * WIRE_ENTRY;
	blob = malloc(blen);
	if (!blob)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	mr_put_le32(blob, (uint32_t)J->nconn);
	for (int i = 0; i < J->nconn; i++)
		encode_conn(&J->conn[i], blob + 4 + (size_t)i * WIRE_ENTRY);
	rc = mr_jaccl_side_allgather(&J->side, blob, blen, &all, err);
	if (rc < 0)
		goto out;
	for (int i = 0; i < J->nconn && rc == 0; i++) {
		const unsigned char *e = find_entry(J, all, &J->conn[i], err);
		rc = e ? conn_connect(&J->conn[i], e, err) : MESHRUN_E_PROTO;
	}
	mr_jaccl_blobs_free(all, n);
	all = NULL;
	if (rc < 0) {
		mr_err_prefix(err, "rank %d", r);
		mr_jaccl_side_fail(&J->side, err ? err->msg : "jaccl: setup failed");
	} else {
		/* nobody sends before every QP of every rank is ready to receive */
		rc = mr_jaccl_side_allgather(&J->side, "", 0, &all, err);
	}
out:
	mr_jaccl_blobs_free(all, n);
	free(blob);
	return rc;
}

void mr_jaccl_verbs_teardown(struct mr_jaccl *J)
{
	for (int i = 0; i < J->nconn; i++)
		conn_close(&J->conn[i]);
	MR_FREE(J->conn);
	MR_FREE(J->peer);
	MR_FREE(J->right);
	MR_FREE(J->left);
	J->nconn = 0;
}

/* ---------------------------------------------------------------- engine */

static int post_sends(struct mr_jxfer *x, bool *progress, struct meshrun_err *err)
{
	struct mr_jconn *c = x->c;

	while (x->soff < x->slen && c->tx_posted - c->tx_done < MR_JDEPTH) {
		size_t len = MR_MIN(x->schunk, x->slen - x->soff);
		unsigned char *b = tx_buf(c, c->tx_posted);
		memcpy(b, x->src + x->soff, len);
		struct ibv_sge sge = { (uintptr_t)b, (uint32_t)len, c->mr->lkey };
		struct ibv_send_wr wr, *bad = NULL;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = c->tx_posted;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = htonl(c->tx_seq);
		int rc = ibv_post_send(c->qp, &wr, &bad);
		if (rc)
			return mr_err_errno(err, rc, MESHRUN_E_PEER, "peer rank %d (device '%s'): ibv_post_send", c->peer, c->dev);
		c->tx_seq++;
		c->tx_posted++;
		x->soff += len;
		*progress = true;
	}
	return 0;
}

static int poll_conn(struct mr_jconn *c, bool *progress, struct meshrun_err *err)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(c->cq, (int)ARRAY_SIZE(wc), wc)) > 0) {
		*progress = true;
		for (int i = 0; i < n; i++) {
			bool is_recv = wc[i].opcode & IBV_WC_RECV;
			if (wc[i].status != IBV_WC_SUCCESS)
				return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): %s work completion failed: %s (status %d, vendor error 0x%x)", c->peer, c->dev, wc[i].status == IBV_WC_WR_FLUSH_ERR ? "a" : is_recv ? "receive" : "send", ibv_wc_status_str(wc[i].status), (int)wc[i].status, wc[i].vendor_err);
			if (is_recv) {
				if (wc[i].wr_id != c->rx_arrived || !(wc[i].wc_flags & IBV_WC_WITH_IMM))
					return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): unexpected receive completion", c->peer, c->dev);
				c->rx_len[c->rx_arrived % MR_JDEPTH] = wc[i].byte_len;
				c->rx_imm[c->rx_arrived % MR_JDEPTH] = ntohl(wc[i].imm_data);
				c->rx_arrived++;
			} else {
				c->tx_done++;
			}
		}
	}
	if (n < 0)
		return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): ibv_poll_cq failed", c->peer, c->dev);
	return 0;
}

/* Deliver chunk number x->ddone_chunks if it is there: 1 delivered, 0 not yet. */
static int deliver_one(struct mr_jxfer *x, enum mr_op op, enum meshrun_dtype dt,
		       struct meshrun_err *err)
{
	struct mr_jconn *c = x->c;

	if (x->ddone_chunks == x->dnchunks || c->rx_used == c->rx_arrived)
		return 0;
	size_t off = x->ddone_chunks * x->dchunk;
	size_t want = MR_MIN(x->dchunk, x->dlen - off);
	uint32_t len = c->rx_len[c->rx_used % MR_JDEPTH], imm = c->rx_imm[c->rx_used % MR_JDEPTH];
	if (imm != c->rx_expect || len != want)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer rank %d (device '%s'): chunk %u of %u bytes arrived where chunk %u of %zu bytes was expected (do all ranks make the same calls?)", c->peer, c->dev, imm, len, c->rx_expect, want);
	const unsigned char *p = rx_buf(c, c->rx_used);
	if (x->mode == MR_JX_REDUCE)
		mr_reduce(op, dt, x->dst + off, p, want / mr_dtype_size((int)dt));
	else
		memcpy(x->dst + off, p, want);
	c->rx_expect++;
	c->rx_used++;
	x->ddone_chunks++;
	int rc = post_recv(c, err);
	return rc < 0 ? rc : 1;
}

static bool xfer_done(const struct mr_jxfer *x)
{
	return x->soff == x->slen && x->c->tx_done == x->c->tx_posted && x->ddone_chunks == x->dnchunks;
}

/*
 * A rank whose side channel closed is fatal only when a pending transfer still
 * needs it after MR_JGONE_GRACE_MS: a peer that finished its last collective
 * exits as soon as its sends are acknowledged, so the closed channel can be
 * seen here before our receive completions for its final chunks are polled.
 */
#define MR_JGONE_GRACE_MS 1000

/* The first pending transfer whose peer has left, or NULL. */
static const struct mr_jxfer *pending_gone(const struct mr_jaccl *J, const struct mr_jxfer *x, int n)
{
	for (int i = 0; i < n; i++)
		if (J->side.gone[x[i].c->peer] && !xfer_done(&x[i]))
			return &x[i];
	return NULL;
}

/*
 * The device's asynchronous events: a port that went down (cable pulled,
 * interface down) or a fatal error ends the connection at once, naming the
 * cable, rather than after the retries or the stall timeout.
 */
static int async_events(struct mr_jconn *c, struct meshrun_err *err)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(c->ctx, &ev) == 0) {
		enum ibv_event_type t = ev.event_type;

		ibv_ack_async_event(&ev);
		switch (t) {
		case IBV_EVENT_PORT_ERR:
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): the port went down (cable pulled or interface down?)", c->peer, c->dev);
		case IBV_EVENT_DEVICE_FATAL:
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_CQ_ERR:
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d (device '%s'): %s", c->peer, c->dev, ibv_event_type_str(t));
		default:
			break; /* port active, GID change, ...: nothing lost */
		}
	}
	return 0;
}

static int wait_events(struct mr_jaccl *J, struct mr_jxfer *x, int n, struct pollfd *pfd,
		       int64_t deadline, int64_t *gone_deadline, struct meshrun_err *err)
{
	int np = 0;

	for (int i = 0; i < n; i++) {
		pfd[np].fd = x[i].c->ch->fd;
		pfd[np].events = POLLIN;
		pfd[np++].revents = 0;
	}
	for (int i = 0; i < n; i++) {
		pfd[np].fd = x[i].c->ctx->async_fd;
		pfd[np].events = POLLIN;
		pfd[np++].revents = 0;
	}
	for (int r = 0; r < J->size; r++) {
		pfd[np].fd = J->side.fd[r]; /* -1 is ignored by poll() */
		pfd[np].events = POLLIN;
		pfd[np++].revents = 0;
	}
	int rc = poll(pfd, (nfds_t)np, MR_MIN(mr_ms_left(deadline), 200));
	if (rc < 0 && errno != EINTR)
		return mr_err_sys(err, "jaccl: poll");
	for (int k = 0; rc > 0 && k < np; k++) {
		if (!pfd[k].revents || pfd[k].fd < 0)
			continue;
		if (k < n) {
			struct mr_jconn *c = x[k].c;
			struct ibv_cq *cq;
			void *ctx;
			while (ibv_get_cq_event(c->ch, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				c->armed = false;
			}
			continue;
		}
		if (k < 2 * n) {
			int e = async_events(x[k - n].c, err);
			if (e < 0)
				return e;
			continue;
		}
		int gone = -1;
		int e = mr_jaccl_side_event(&J->side, k - 2 * n, &gone, err);
		if (e < 0)
			return e;
		if (e == 1 && pending_gone(J, x, n))
			*gone_deadline = mr_now_ms() + MR_JGONE_GRACE_MS;
	}
	return 0;
}

static int exchange_loop(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered,
			 enum mr_op op, enum meshrun_dtype dt, struct pollfd *pfd, size_t maxc,
			 struct meshrun_err *err)
{
	int64_t last = mr_now_ms();
	int spins = 0, rc = 0;
	size_t k = 0; /* ordered: chunk index being delivered */
	int oi = 0;   /* ordered: transfer whose chunk k is next */
	/* set while a rank we need has left: a receive from a rank that left during
	 * an earlier call (its final send acknowledged, its exit seen) gets the same grace */
	int64_t gone_deadline = pending_gone(J, x, n) ? mr_now_ms() + MR_JGONE_GRACE_MS : 0;

	for (;;) {
		bool progress = false, done = true;
		for (int i = 0; i < n && rc == 0; i++)
			rc = post_sends(&x[i], &progress, err);
		for (int i = 0; i < n && rc == 0; i++)
			rc = poll_conn(x[i].c, &progress, err);
		if (rc < 0)
			return rc;
		if (ordered) {
			for (;;) {
				if (oi == n) {
					oi = 0;
					k++;
				}
				if (k >= maxc)
					break;
				if (k >= x[oi].dnchunks) {
					oi++;
					continue;
				}
				rc = deliver_one(&x[oi], op, dt, err);
				if (rc <= 0)
					break;
				progress = true;
				oi++;
			}
		} else {
			for (int i = 0; i < n && rc >= 0; i++)
				while ((rc = deliver_one(&x[i], op, dt, err)) > 0)
					progress = true;
		}
		if (rc < 0)
			return rc;
		rc = 0;
		for (int i = 0; i < n; i++)
			done = done && xfer_done(&x[i]);
		if (done)
			return 0;
		if (progress) {
			last = mr_now_ms();
			spins = 0;
			continue;
		}
		if (++spins < 64) {
			if (spins > 8)
				sched_yield();
			continue;
		}
		/* arm, then look once more: a completion between the last poll and
		 * the arming would otherwise raise no event */
		for (int i = 0; i < n; i++) {
			if (!x[i].c->armed && ibv_req_notify_cq(x[i].c->cq, 0) == 0)
				x[i].c->armed = true;
		}
		for (int i = 0; i < n && rc == 0; i++)
			rc = poll_conn(x[i].c, &progress, err);
		if (rc < 0)
			return rc;
		if (progress)
			continue;
		if (gone_deadline && mr_ms_left(gone_deadline) == 0) {
			const struct mr_jxfer *g = pending_gone(J, x, n);
			if (g)
				return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d closed its side channel (process exited or killed?)", g->c->peer);
			gone_deadline = 0;
		}
		int64_t deadline = last + J->timeout_ms;
		if (mr_ms_left(deadline) == 0) {
			for (int i = 0; i < n; i++)
				if (!xfer_done(&x[i]))
					return mr_err_set(err, MESHRUN_E_TIMEOUT, "peer rank %d (device '%s') stopped answering: no progress for %lld ms (sent %zu of %zu bytes, received %zu of %zu chunks)", x[i].c->peer, x[i].c->dev, (long long)J->timeout_ms, x[i].soff, x[i].slen, x[i].ddone_chunks, x[i].dnchunks);
		}
		if (gone_deadline)
			deadline = MR_MIN(deadline, gone_deadline);
		rc = wait_events(J, x, n, pfd, deadline, &gone_deadline, err);
		if (rc < 0)
			return rc;
	}
}

int mr_jaccl_exchange(struct mr_jaccl *J, struct mr_jxfer *x, int n, bool ordered, enum mr_op op,
		      enum meshrun_dtype dt, struct meshrun_err *err)
{
	size_t maxc = 0;
	struct pollfd *pfd = NULL;
	int rc;

	for (int i = 0; i < n; i++) {
		x[i].schunk = mr_jaccl_chunk_size(x[i].slen);
		x[i].dchunk = mr_jaccl_chunk_size(x[i].dlen);
		x[i].snchunks = mr_jaccl_nchunks(x[i].slen, x[i].schunk);
		x[i].dnchunks = mr_jaccl_nchunks(x[i].dlen, x[i].dchunk);
		x[i].soff = 0;
		x[i].ddone_chunks = 0;
		maxc = MR_MAX(maxc, x[i].dnchunks);
		/* nothing more can go to a rank that has left; what it sent before it
		 * left may still be ours to poll (exchange_loop's grace) */
		if (J->side.gone[x[i].c->peer] && x[i].slen)
			return mr_err_set(err, MESHRUN_E_PEER, "peer rank %d has left the group (its side channel closed)", x[i].c->peer);
	}
	pfd = calloc(2 * (size_t)n + (size_t)J->size, sizeof(*pfd));
	if (!pfd)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	rc = exchange_loop(J, x, n, ordered, op, dt, pfd, maxc, err);
	free(pfd);
	return rc;
}
