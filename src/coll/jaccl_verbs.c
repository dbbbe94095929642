/*
 * jaccl_verbs.c - the queue pairs of the JACCL backend: budget, creation,
 * connection, teardown. The wire protocol over them is jaccl_frames.c's.
 *
 * Setup per rank:
 *  1. open every conn's device, check its port, choose its GID;
 *  2. count what the job needs per device (one QP and one MR per cable end)
 *     against the smaller of ibv_query_device's limits and, for UC, Apple's
 *     (10 QPs, 100 MRs per device): over it, fail naming the device and the
 *     limit before any queue pair exists;
 *  3. PD, CQ, QP (UC, or RC with MESHRUN_JACCL_QP=rc), the buffer pool as one
 *     MR, INIT with MLX's access flags;
 *  4. publish (qpn, psn, lid, gid, mtu, frame size, depth, QP type) through
 *     the side channel; every pair must agree on frame size and QP type;
 *  5. RTR (path MTU at most 1024 for UC, hop limit 1, only the attributes of
 *     the QP type), RTS; then post the receives (Apple's driver may refuse
 *     them before RTS) and barrier on the side channel, so that no rank sends
 *     before every RECV of every rank is posted.
 *
 * GID: MESHRUN_IB_GID_INDEX when set (the escape hatch, e.g. soft-RoCE devices
 * in one namespace where only the link-local GID 0 works); otherwise the
 * IPv4-mapped GID (what MLX looks for: on a Mac index 1, present only while
 * the Thunderbolt interface has an IPv4 address). Without one the setup fails
 * naming the interface and telling the user to give it an IPv4 address: the
 * link-local GID 0 fails RTR on Apple's driver, so there is no fallback.
 */
#include "common/compat.h"
#include "coll/le.h"
#include "coll/jaccl_impl.h"
#include "common/envmap.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/timeutil.h"

#include <fcntl.h>
#include <unistd.h>

#define WIRE_ENTRY 48

/* The interface behind a device: Linux sysfs; else Apple's naming (rdma_en5 -> en5). */
static void dev_ifname(const char *dev, char *out, size_t n)
{
	char path[256];
	struct mr_buf b = MR_BUF_INIT;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
	if (mr_read_file(path, 256, &b, NULL) == 0) {
		const char *s = mr_buf_cstr(&b);
		size_t len = strcspn(s, "\n");
		snprintf(out, n, "%.*s", (int)MR_MIN(len, n - 1), s);
	} else if (strncmp(dev, "rdma_", 5) == 0) {
		snprintf(out, n, "%s", dev + 5);
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

	if (want >= 0) {
		c->gid_index = want;
		if (ibv_query_gid(c->ctx, 1, want, &c->gid) == 0 && !gid_zero(&c->gid))
			return 0;
		dev_ifname(c->dev, ifn, sizeof(ifn));
		return mr_err_set(err, MESHRUN_E_CONNECT, "jaccl: device '%s' has no GID at index %d (MESHRUN_IB_GID_INDEX; its interface '%s' is down or has no address?)", c->dev, want, ifn[0] ? ifn : "?");
	}
	for (int i = 0; i < n; i++) {
		if (ibv_query_gid(c->ctx, 1, i, &c->gid) == 0 && gid_v4mapped(&c->gid)) {
			c->gid_index = i;
			return 0;
		}
	}
	dev_ifname(c->dev, ifn, sizeof(ifn));
	return mr_err_set(err, MESHRUN_E_CONNECT, "jaccl: device '%s' has no IPv4-mapped GID: give its interface '%s' an IPv4 address (meshconfig --auto-setup does; on a Mac it can take minutes after boot or a relink), or set MESHRUN_IB_GID_INDEX", c->dev, ifn[0] ? ifn : "?");
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

/* Step 1: the device, its port, the GID. */
static int conn_open(struct mr_jaccl *J, struct mr_jconn *c, const char *where, int gid_want,
		     struct meshrun_err *err)
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
	if (J->qp_type == IBV_QPT_UC && c->mtu > IBV_MTU_1024)
		c->mtu = IBV_MTU_1024;
	return choose_gid(c, &pa, gid_want, err);
}

/* Step 2: what this rank needs of each device, against its limits. */
static int check_budget(struct mr_jaccl *J, struct meshrun_err *err)
{
	for (int i = 0; i < J->nconn; i++) {
		struct mr_jconn *c = &J->conn[i];
		struct ibv_device_attr da;
		int uses = 0, first = i;
		for (int k = 0; k < J->nconn; k++) {
			if (strcmp(J->conn[k].dev, c->dev) != 0)
				continue;
			uses++;
			first = MR_MIN(first, k);
		}
		if (first != i)
			continue; /* counted at the device's first conn */
		if (ibv_query_device(c->ctx, &da) != 0)
			return mr_err_sys(err, "jaccl: ibv_query_device on '%s'", c->dev);
		int max_qp = da.max_qp, max_mr = da.max_mr;
		const char *who = "the device's own";
		if (J->qp_type == IBV_QPT_UC && (max_qp > MR_JACCL_APPLE_MAX_QP || max_mr > MR_JACCL_APPLE_MAX_MR)) {
			max_qp = MR_MIN(max_qp, MR_JACCL_APPLE_MAX_QP);
			max_mr = MR_MIN(max_mr, MR_JACCL_APPLE_MAX_MR);
			who = "Apple's Thunderbolt RDMA driver's";
		}
		if (uses > max_qp)
			return mr_err_set(err, MESHRUN_E_UNSUPPORTED, "jaccl: rank %d needs %d queue pairs on device '%s' (one per cable end using it), more than %s limit of %d per device: name fewer cables on it in MLX_IBV_DEVICES", J->rank, uses, c->dev, who, max_qp);
		if (uses > max_mr)
			return mr_err_set(err, MESHRUN_E_UNSUPPORTED, "jaccl: rank %d needs %d memory regions on device '%s' (one per cable end using it), more than %s limit of %d per device: name fewer cables on it in MLX_IBV_DEVICES", J->rank, uses, c->dev, who, max_mr);
	}
	return 0;
}

static size_t pool_bytes(const struct mr_jaccl *J)
{
	return 2u * (size_t)J->depth * J->frame;
}

/* Step 3: everything up to INIT. */
static int conn_create(struct mr_jaccl *J, struct mr_jconn *c, struct meshrun_err *err)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	/* Apple's driver counts a queue's depth in 4 KiB frames: a frame of F bytes
	 * takes F / 4 KiB entries, and each entry must hold a whole frame */
	uint32_t wr = (uint32_t)MR_MAX((uint32_t)J->depth, J->frame / 4096u);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int rc;

	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd)
		return mr_err_sys(err, "jaccl: ibv_alloc_pd on '%s'", c->dev);
	if (J->qp_type == IBV_QPT_RC) {
		/* where the device has one, it lets an idle rank sleep; not needed */
		c->ch = ibv_create_comp_channel(c->ctx);
		if (c->ch) {
			mr_set_nonblock(c->ch->fd, true);
			mr_set_nonblock(c->ctx->async_fd, true);
		}
	}
	c->cq = ibv_create_cq(c->ctx, 2 * J->depth + 8, NULL, c->ch, 0);
	if (!c->cq)
		return mr_err_sys(err, "jaccl: ibv_create_cq on '%s'", c->dev);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.cap.max_send_wr = wr;
	ia.cap.max_recv_wr = wr;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = (enum ibv_qp_type)J->qp_type;
	c->qp = ibv_create_qp(c->pd, &ia);
	if (!c->qp)
		return mr_err_sys(err, "jaccl: ibv_create_qp (%s) on '%s'", J->qp_type == IBV_QPT_UC ? "UC" : "RC", c->dev);
	if (posix_memalign((void **)&c->pool, 4096, pool_bytes(J)) != 0) {
		c->pool = NULL;
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: cannot allocate %zu bytes of buffers", pool_bytes(J));
	}
	memset(c->pool, 0, pool_bytes(J));
	c->mr = ibv_reg_mr(c->pd, c->pool, pool_bytes(J), access);
	if (!c->mr)
		return mr_err_sys(err, "jaccl: ibv_reg_mr of %zu bytes on '%s' (memlock limit?)", pool_bytes(J), c->dev);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = access;
	rc = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_CONNECT, "jaccl: QP of '%s' to INIT", c->dev);
	c->psn = (uint32_t)((mr_now_us() ^ ((int64_t)getpid() << 8) ^ (int64_t)c->qp->qp_num) & 0xffffff);
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

/*
 * Wire entry (48 bytes): peer, side, idx, qpn, psn (u32 each), lid u16, mtu u8,
 * QP type u8, gid[16], frame u32, depth u32.
 */
static void encode_conn(const struct mr_jaccl *J, const struct mr_jconn *c, unsigned char *p)
{
	memset(p, 0, WIRE_ENTRY);
	mr_put_le32(p, (uint32_t)c->peer);
	mr_put_le32(p + 4, (uint32_t)c->side);
	mr_put_le32(p + 8, (uint32_t)c->idx);
	mr_put_le32(p + 12, c->qp->qp_num);
	mr_put_le32(p + 16, c->psn);
	p[20] = (unsigned char)c->lid;
	p[21] = (unsigned char)(c->lid >> 8);
	p[22] = (unsigned char)c->mtu;
	p[23] = (unsigned char)J->qp_type;
	memcpy(p + 24, c->gid.raw, 16);
	mr_put_le32(p + 40, J->frame);
	mr_put_le32(p + 44, (uint32_t)J->depth);
}

static int side_pair(const struct mr_jaccl *J, int side)
{
	if (side == MR_JSIDE_MESH || J->size == 2)
		return side;
	return side == MR_JSIDE_RIGHT ? MR_JSIDE_LEFT : MR_JSIDE_RIGHT;
}

static const char *qpt_name(int t)
{
	return t == IBV_QPT_UC ? "UC" : t == IBV_QPT_RC ? "RC" : "?";
}

/* Step 5: RTR with the peer's entry e, then RTS. */
static int conn_connect(struct mr_jaccl *J, struct mr_jconn *c, const unsigned char *e,
			struct meshrun_err *err)
{
	struct ibv_qp_attr a;
	enum ibv_mtu rmtu = (enum ibv_mtu)e[22];
	uint32_t pframe = mr_get_le32(e + 40);
	int mask, rc;

	if (e[23] != J->qp_type || pframe != J->frame || mr_get_le32(e + 44) != (uint32_t)J->depth)
		return mr_err_set(err, MESHRUN_E_PROTO, "jaccl: rank %d uses %s queue pairs and frames of %u bytes, rank %d %s and %u (set MESHRUN_JACCL_QP and MESHRUN_JACCL_FRAME alike on every rank)", c->peer, qpt_name(e[23]), pframe, J->rank, qpt_name(J->qp_type), J->frame);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = rmtu < c->mtu ? rmtu : c->mtu;
	a.dest_qp_num = mr_get_le32(e + 12);
	a.rq_psn = mr_get_le32(e + 16) & 0xffffff;
	a.ah_attr.dlid = (uint16_t)(e[20] | e[21] << 8);
	a.ah_attr.port_num = 1;
	memcpy(a.ah_attr.grh.dgid.raw, e + 24, 16);
	if (!gid_zero(&a.ah_attr.grh.dgid)) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1; /* one cable, no router (MLX does the same) */
		a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
	}
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (J->qp_type == IBV_QPT_RC) {
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	rc = ibv_modify_qp(c->qp, &a, mask);
	if (rc)
		return mr_err_errno(err, rc, MESHRUN_E_CONNECT, "jaccl: QP of '%s' to RTR (peer rank %d, GID index %d)", c->dev, c->peer, c->gid_index);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (J->qp_type == IBV_QPT_RC) {
		/* 1.07 s per try: shorter ack timeouts made soft-RoCE under
		 * emulation retransmit spuriously. The credits keep RNR away. */
		a.timeout = 18;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	rc = ibv_modify_qp(c->qp, &a, mask);
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

static int plan_conns(struct mr_jaccl *J, const struct mr_jaccl_matrix *m, struct meshrun_err *err)
{
	const int r = J->rank, n = J->size;
	const int right = (r + 1) % n, left = (r + n - 1) % n;
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
		return 0;
	}
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
	return 0;
}

/* Steps 1-3 for every conn. */
static int create_all(struct mr_jaccl *J, const struct mr_jaccl_env *env, struct meshrun_err *err)
{
	char where[300];
	int rc = 0;

	for (int i = 0; i < J->nconn && rc == 0; i++) {
		struct mr_jconn *c = &J->conn[i];
		snprintf(where, sizeof(where), "rank %d, column %d of '%s'", J->rank, c->peer, env->devices_path);
		rc = conn_open(J, c, where, env->gid_index, err);
	}
	if (rc == 0)
		rc = check_budget(J, err);
	for (int i = 0; i < J->nconn && rc == 0; i++)
		rc = conn_create(J, &J->conn[i], err);
	return rc;
}

/* Step 5: connect every conn, then post its receives. */
static int connect_all(struct mr_jaccl *J, const struct mr_jaccl_blob *all, struct meshrun_err *err)
{
	int rc = 0;

	for (int i = 0; i < J->nconn && rc == 0; i++) {
		const unsigned char *e = find_entry(J, all, &J->conn[i], err);
		rc = e ? conn_connect(J, &J->conn[i], e, err) : MESHRUN_E_PROTO;
	}
	for (int i = 0; i < J->nconn && rc == 0; i++) {
		for (int b = 0; b < J->depth && rc == 0; b++)
			rc = mr_jaccl_post_recv(J, &J->conn[i], b, err);
		mr_jaccl_conn_start(J, &J->conn[i]);
	}
	return rc;
}

int mr_jaccl_verbs_setup(struct mr_jaccl *J, const struct mr_jaccl_matrix *m,
			 const struct mr_jaccl_env *env, struct meshrun_err *err)
{
	struct mr_jaccl_blob *all = NULL;
	unsigned char *blob = NULL;
	int rc;

	J->qp_type = env->qp == MR_JACCL_QP_RC ? IBV_QPT_RC : IBV_QPT_UC;
	J->frame = env->frame;
	J->payload = mr_jaccl_payload(env->frame);
	J->depth = mr_jaccl_depth(env->frame);
	rc = plan_conns(J, m, err);
	if (rc < 0)
		return rc;
	rc = create_all(J, env, err);
	if (rc < 0) {
		/* the others are in (or on their way to) the all-gather below:
		 * tell them why, so that they do not fail with a broken pipe */
		mr_err_prefix(err, "rank %d", J->rank);
		mr_jaccl_side_fail(&J->side, err ? err->msg : "jaccl: setup failed");
		return rc;
	}
	size_t blen = 4 + (size_t)J->nconn * WIRE_ENTRY;
	blob = malloc(blen);
	if (!blob)
		return mr_err_set(err, MESHRUN_E_NOMEM, "jaccl: out of memory");
	mr_put_le32(blob, (uint32_t)J->nconn);
	for (int i = 0; i < J->nconn; i++)
		encode_conn(J, &J->conn[i], blob + 4 + (size_t)i * WIRE_ENTRY);
	rc = mr_jaccl_side_allgather(&J->side, blob, blen, &all, err);
	if (rc < 0)
		goto out;
	rc = connect_all(J, all, err);
	mr_jaccl_blobs_free(all, J->size);
	all = NULL;
	if (rc < 0) {
		mr_err_prefix(err, "rank %d", J->rank);
		mr_jaccl_side_fail(&J->side, err ? err->msg : "jaccl: setup failed");
	} else {
		/* nobody sends before every RECV of every rank is posted */
		rc = mr_jaccl_side_allgather(&J->side, "", 0, &all, err);
	}
out:
	mr_jaccl_blobs_free(all, J->size);
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
