/*
 * meshrun-rdma-probe - record what an RDMA device's driver really does, as the
 * rules file meshsim's Apple RDMA layer loads (sim/appleverbs/rules.h):
 * written for Apple's Thunderbolt driver, which nobody outside Apple
 * documents (docs/guide-macs.md asks users to run it and send the file).
 *
 *   meshrun-rdma-probe --device rdma_en2 --listen 18515 --output m1.json     (on one Mac)
 *   meshrun-rdma-probe --device rdma_en3 --connect m1:18515 --output m2.json (on its peer)
 *
 * On the device alone: its and its port's attributes, the GID table, which
 * QP types create (and the errno of those that do not), how many UC QPs and
 * MRs it gives before it refuses (and with which errno), two SGEs, an SRQ, a
 * completion channel, a RECV before RTS, RTR from the link-local GID and from
 * an empty one, and the caps a UC QP is granted. With a peer (--listen on one
 * host, --connect on the other; the listener receives, the connector sends,
 * both write the whole file): the largest SEND that arrives (4 KiB doubling
 * to 1 MiB), whether a SEND for which no RECV is posted is held until one is
 * or lost, whether a SEND shorter than its RECV arrives, and immediates.
 * The QP and MR counts are per device whatever the process: run it while
 * nothing else uses the device.
 *
 * Output: JSON, format "meshrun-rdma-rules/1": "rules" holds each row it
 * measured (value, errno where one was seen, source: this probe, the host,
 * the date), "observed" the raw facts, "not_measured" the rows left to the
 * defaults. Exit 0 when every step ran, 1 when the device or the peer could
 * not be used (the message says why), 2 on a usage error.
 *
 * The program is a tool for users on Macs and Linux alike: it uses the verbs
 * API directly, and each step's failure is a result, not an error.
 */
#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/errname.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "common/port.h"
#include "common/timeutil.h"
#include "coll/le.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "0"
#endif

#define SRC "meshrun-rdma-probe"
#define MSG_MAX (1u << 20)   /* the largest SEND tried */
#define WAIT_MS 2000         /* how long a completion may take */

struct opts {
	const char *device;
	const char *listen;
	const char *connect;
	const char *output;
	int gid_index;
	int max_qps, max_mrs;
};

struct probe {
	struct opts o;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	int v4_index;               /* index of the IPv4-mapped GID, -1: none */
	struct mr_buf rules;        /* "name": {...} rows, comma-separated */
	struct mr_buf obs;          /* "name": value rows of "observed" */
	struct mr_buf missing;      /* names of the rows not measured */
	char source[256];
};

/* ------------------------------------------------------------- the file */

static void add(struct mr_buf *b, const char *fmt, ...) MR_PRINTF(2, 3);
static void add(struct mr_buf *b, const char *fmt, ...)
{
	va_list ap;

	if (b->len)
		mr_buf_puts(b, ",\n    ");
	va_start(ap, fmt);
	mr_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

/* A rules row: value is JSON text; e: the errno seen (0: none). */
static void rule(struct probe *p, const char *name, const char *value, int e)
{
	struct mr_buf src = MR_BUF_INIT;

	mr_json_quote(&src, p->source);
	if (e && mr_errno_from_name(mr_errno_name(e)) != e) /* a number without a name here */
		add(&p->rules, "\"%s\": {\"value\": %s, \"errno_number\": %d, \"source\": %s, \"confidence\": \"probe\"}", name, value, e, mr_buf_cstr(&src));
	else if (e)
		add(&p->rules, "\"%s\": {\"value\": %s, \"errno\": \"%s\", \"source\": %s, \"confidence\": \"probe\"}", name, value, mr_errno_name(e), mr_buf_cstr(&src));
	else
		add(&p->rules, "\"%s\": {\"value\": %s, \"source\": %s, \"confidence\": \"probe\"}", name, value, mr_buf_cstr(&src));
	mr_buf_release(&src);
}

static void not_measured(struct probe *p, const char *name)
{
	add(&p->missing, "\"%s\"", name);
}

/* "ok" or the errno's name, as JSON. */
static const char *verdict(int e)
{
	static char s[32];

	snprintf(s, sizeof(s), "\"%s\"", e ? mr_errno_name(e) : "ok");
	return s;
}

static void gid_text(const union ibv_gid *g, char *out, size_t n)
{
	if (!inet_ntop(AF_INET6, g->raw, out, (socklen_t)n))
		snprintf(out, n, "?");
}

/* ------------------------------------------------------------ the device */

static int open_dev(struct probe *p, struct meshrun_err *err)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (!l)
		return mr_err_sys(err, "ibv_get_device_list (is RDMA enabled? on a Mac: rdma_ctl enable, from recovery mode)");
	for (int i = 0; i < n && !p->ctx; i++)
		if (strcmp(ibv_get_device_name(l[i]), p->o.device) == 0)
			p->ctx = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	if (!p->ctx)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "RDMA device '%s' not found or not opened (ibv_devices lists them)", p->o.device);
	if (ibv_query_device(p->ctx, &p->da) != 0 || ibv_query_port(p->ctx, 1, &p->pa) != 0)
		return mr_err_sys(err, "query device '%s' and its port 1", p->o.device);
	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd)
		return mr_err_sys(err, "ibv_alloc_pd on '%s'", p->o.device);
	return 0;
}

static struct ibv_qp *make_qp(struct probe *p, struct ibv_cq *cq, enum ibv_qp_type t, uint32_t wr,
			      uint32_t sge, struct ibv_qp_cap *granted)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.cap.max_send_wr = wr;
	a.cap.max_recv_wr = wr;
	a.cap.max_send_sge = sge;
	a.cap.max_recv_sge = 1;
	a.qp_type = t;
	errno = 0;
	qp = ibv_create_qp(p->pd, &a);
	if (qp && granted)
		*granted = a.cap;
	if (!qp && !errno)
		errno = EIO;
	return qp;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, uint32_t dqpn, uint32_t psn, const union ibv_gid *dgid, int sgid,
		  enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = psn;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)sgid;
	a.ah_attr.grh.dgid = *dgid;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
}

static int to_rts(struct ibv_qp *qp, uint32_t psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static bool gid_zero(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		if (g->raw[i])
			return false;
	return true;
}

/* The device, its port and its GID table, as observed. */
static void probe_attrs(struct probe *p)
{
	char g[64];
	struct mr_buf t = MR_BUF_INIT;
	int empty = -1, n = MR_MIN(p->pa.gid_tbl_len, 64);

	char fw[sizeof(p->da.fw_ver) + 1];
	snprintf(fw, sizeof(fw), "%s", p->da.fw_ver);
	mr_json_quote(&t, p->o.device);
	mr_buf_puts(&t, ", \"fw_ver\": ");
	if (mr_json_quote(&t, fw) < 0)
		mr_buf_puts(&t, "\"?\"");
	add(&p->obs, "\"device\": {\"name\": %s, \"vendor_id\": %u, \"vendor_part_id\": %u, \"max_qp\": %d, \"max_qp_wr\": %d, \"max_sge\": %d, \"max_cq\": %d, \"max_cqe\": %d, \"max_mr\": %d, \"max_mr_size\": %llu, \"max_pd\": %d, \"max_srq\": %d, \"max_qp_rd_atom\": %d}",
	    mr_buf_cstr(&t), p->da.vendor_id, p->da.vendor_part_id, p->da.max_qp, p->da.max_qp_wr, p->da.max_sge, p->da.max_cq, p->da.max_cqe, p->da.max_mr, (unsigned long long)p->da.max_mr_size, p->da.max_pd, p->da.max_srq, p->da.max_qp_rd_atom);
	mr_buf_reset(&t);
	add(&p->obs, "\"port\": {\"state\": \"%s\", \"active_mtu\": %d, \"max_mtu\": %d, \"lid\": %u, \"gid_tbl_len\": %d, \"link_layer\": %u, \"max_msg_sz\": %u}",
	    ibv_port_state_str(p->pa.state), 128 << p->pa.active_mtu, 128 << p->pa.max_mtu, p->pa.lid, p->pa.gid_tbl_len, (unsigned)p->pa.link_layer, p->pa.max_msg_sz);
	p->v4_index = -1;
	for (int i = 0; i < n; i++) {
		union ibv_gid gid;
		if (ibv_query_gid(p->ctx, 1, i, &gid) != 0 || gid_zero(&gid)) {
			if (empty < 0)
				empty = i;
			continue;
		}
		gid_text(&gid, g, sizeof(g));
		mr_buf_printf(&t, "%s{\"index\": %d, \"gid\": \"%s\"}", t.len ? ", " : "", i, g);
		if (p->v4_index < 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff && !gid.raw[0])
			p->v4_index = i;
	}
	add(&p->obs, "\"gids\": [%s]", mr_buf_cstr(&t));
	mr_buf_release(&t);
	if (p->v4_index >= 0) {
		char v[16];
		snprintf(v, sizeof(v), "%d", p->v4_index);
		rule(p, "gid_ipv4_index", v, 0);
	} else {
		not_measured(p, "gid_ipv4_index");
	}
	char mtu[16];
	snprintf(mtu, sizeof(mtu), "%d", 128 << p->pa.active_mtu);
	rule(p, "max_path_mtu", mtu, 0);
}

/* QP types, SGEs, SRQ, completion channel, and the caps a UC QP gets. */
static void probe_kinds(struct probe *p, struct ibv_cq *cq)
{
	static const struct { enum ibv_qp_type t; const char *name; } types[] = {
		{ IBV_QPT_RC, "RC" }, { IBV_QPT_UC, "UC" }, { IBV_QPT_UD, "UD" },
	};
	struct mr_buf ok = MR_BUF_INIT, seen = MR_BUF_INIT;
	struct ibv_qp_cap cap;
	int refused = 0;

	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		struct ibv_qp *qp = make_qp(p, cq, types[i].t, 8, 1, NULL);
		int e = qp ? 0 : errno;
		mr_buf_printf(&seen, "%s\"%s\": %s", seen.len ? ", " : "", types[i].name, verdict(e));
		if (qp) {
			mr_buf_printf(&ok, "%s\"%s\"", ok.len ? ", " : "", types[i].name);
			ibv_destroy_qp(qp);
		} else if (!refused) {
			refused = e;
		}
	}
	add(&p->obs, "\"qp_create\": {%s}", mr_buf_cstr(&seen));
	mr_buf_reset(&seen);
	mr_buf_printf(&seen, "[%s]", mr_buf_cstr(&ok));
	rule(p, "qp_types", mr_buf_cstr(&seen), refused);
	mr_buf_release(&ok);
	mr_buf_release(&seen);

	struct ibv_qp *qp = make_qp(p, cq, IBV_QPT_UC, 8, 2, NULL);
	int e = qp ? 0 : errno;
	if (qp)
		ibv_destroy_qp(qp);
	rule(p, "max_sge", qp ? (p->da.max_sge >= 2 ? "2" : "1") : "1", e);

	qp = make_qp(p, cq, IBV_QPT_UC, 1024, 1, &cap);
	if (!qp)
		qp = make_qp(p, cq, IBV_QPT_UC, 32, 1, &cap);
	if (qp) {
		add(&p->obs, "\"uc_caps_granted\": {\"max_send_wr\": %u, \"max_recv_wr\": %u, \"max_send_sge\": %u, \"max_recv_sge\": %u, \"max_inline_data\": %u}", cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data);
		/* a RECV while the QP is in INIT */
		static unsigned char buf[64];
		struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		if (mr && to_init(qp) == 0) {
			struct ibv_sge sg = { (uintptr_t)buf, sizeof(buf), mr->lkey };
			struct ibv_recv_wr wr, *bad = NULL;
			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sg;
			wr.num_sge = 1;
			e = ibv_post_recv(qp, &wr, &bad);
			rule(p, "post_recv_before_rts", e ? "false" : "true", e);
		} else {
			not_measured(p, "post_recv_before_rts");
		}
		ibv_destroy_qp(qp);
		if (mr)
			ibv_dereg_mr(mr);
	}

	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(p->pd, &sa);
	e = srq ? 0 : (errno ? errno : EIO);
	if (srq)
		ibv_destroy_srq(srq);
	rule(p, "srq", srq ? "true" : "false", e);

	errno = 0;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(p->ctx);
	e = ch ? 0 : (errno ? errno : EIO);
	if (ch)
		ibv_destroy_comp_channel(ch);
	rule(p, "comp_channel", ch ? "true" : "false", e);
}

/* How many UC QPs, then MRs, the device gives before it refuses. */
static void probe_limits(struct probe *p, struct ibv_cq *cq)
{
	struct ibv_qp **q = calloc((size_t)p->o.max_qps, sizeof(*q));
	struct ibv_mr **m = calloc((size_t)p->o.max_mrs, sizeof(*m));
	unsigned char *mb = calloc((size_t)p->o.max_mrs, 64);
	char v[32];
	int n = 0, e = 0;

	if (!q || !m || !mb) {
		not_measured(p, "max_qp_per_device");
		not_measured(p, "max_mr_per_device");
		goto out;
	}
	while (n < p->o.max_qps && (q[n] = make_qp(p, cq, IBV_QPT_UC, 8, 1, NULL)))
		n++;
	e = n < p->o.max_qps ? errno : 0;
	add(&p->obs, "\"uc_qps_created\": %d, \"uc_qp_refusal\": %s", n, verdict(e));
	snprintf(v, sizeof(v), "%d", e ? n : 0); /* 0: no limit up to --max-qps */
	rule(p, "max_qp_per_device", v, e);
	while (n > 0)
		ibv_destroy_qp(q[--n]);
	while (n < p->o.max_mrs && (m[n] = ibv_reg_mr(p->pd, mb + 64 * (size_t)n, 64, IBV_ACCESS_LOCAL_WRITE)))
		n++;
	e = n < p->o.max_mrs ? (errno ? errno : ENOMEM) : 0;
	add(&p->obs, "\"mrs_registered\": %d, \"mr_refusal\": %s", n, verdict(e));
	snprintf(v, sizeof(v), "%d", e ? n : 0);
	rule(p, "max_mr_per_device", v, e);
	while (n > 0)
		ibv_dereg_mr(m[--n]);
out:
	free(q);
	free(m);
	free(mb);
}

/* ------------------------------------------------------------ the peer */

/*
 * The two probes talk over TCP in 40-byte messages: kind, a, b, c (u32 each),
 * gid[16], d, e (u32), little-endian.
 */
enum { M_HELLO = 1, M_POSTED, M_SENT, M_RESULT, M_DONE };
struct msg {
	uint32_t kind, a, b, c;
	union ibv_gid gid;
	uint32_t d, e;
};

static int msg_send(int fd, const struct msg *m)
{
	unsigned char b[40];

	mr_put_le32(b, m->kind);
	mr_put_le32(b + 4, m->a);
	mr_put_le32(b + 8, m->b);
	mr_put_le32(b + 12, m->c);
	memcpy(b + 16, m->gid.raw, 16);
	mr_put_le32(b + 32, m->d);
	mr_put_le32(b + 36, m->e);
	return mr_write_full(fd, b, sizeof(b));
}

static int msg_recv(int fd, struct msg *m, uint32_t kind, struct meshrun_err *err)
{
	unsigned char b[40];

	if (mr_read_full(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
		return mr_err_set(err, MESHRUN_E_PEER, "the peer probe closed the connection");
	m->kind = mr_get_le32(b);
	m->a = mr_get_le32(b + 4);
	m->b = mr_get_le32(b + 8);
	m->c = mr_get_le32(b + 12);
	memcpy(m->gid.raw, b + 16, 16);
	m->d = mr_get_le32(b + 32);
	m->e = mr_get_le32(b + 36);
	if (m->kind != kind)
		return mr_err_set(err, MESHRUN_E_PROTO, "the peer probe sent message %u where %u was due (the same version on both hosts?)", m->kind, kind);
	return 0;
}

static int tcp_pair(const struct opts *o, struct meshrun_err *err)
{
	const char *spec = o->listen ? o->listen : o->connect;
	char host[256] = "";
	const char *port = spec;
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints, *ai = NULL;
	int fd = -1, one = 1;

	if (colon) {
		snprintf(host, sizeof(host), "%.*s", (int)MR_MIN((size_t)(colon - spec), sizeof(host) - 1), spec);
		port = colon + 1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = o->listen ? AI_PASSIVE : 0;
	if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0 || !ai)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected [HOST:]PORT", spec);
	fd = mr_socket(ai->ai_family, SOCK_STREAM, MR_SOCK_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (o->listen) {
		int lfd = fd;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, 1) < 0)
			goto fail;
		fd = mr_accept(lfd, MR_SOCK_CLOEXEC);
		close(lfd);
		if (fd < 0)
			goto fail;
	} else {
		for (int i = 0; connect(fd, ai->ai_addr, ai->ai_addrlen) < 0; i++) {
			if (i == 100)
				goto fail;
			close(fd);
			mr_sleep_ms(100); /* the listener may start later */
			fd = mr_socket(ai->ai_family, SOCK_STREAM, MR_SOCK_CLOEXEC);
			if (fd < 0)
				goto fail;
		}
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	freeaddrinfo(ai);
	return fd;
fail:
	mr_err_sys(err, "%s '%s'", o->listen ? "listen on" : "connect to", spec);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return -1;
}

struct pair {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;         /* 2 x MSG_MAX: receive at 0, send at MSG_MAX */
	uint32_t depth;
};

/* Wait up to ms for one completion: 1 (wc filled), 0 none. */
static int wait_wc(struct pair *q, int ms, struct ibv_wc *wc)
{
	int64_t end = mr_now_ms() + ms;

	do {
		int n = ibv_poll_cq(q->cq, 1, wc);
		if (n)
			return n > 0;
		mr_sleep_ms(1);
	} while (mr_now_ms() < end);
	return 0;
}

/* The bytes a SEND of len carries: checked where it arrives. */
static unsigned char pattern(uint32_t len, size_t i)
{
	return (unsigned char)(i * 7u + len);
}

static bool arrived_whole(const struct pair *q, uint32_t len)
{
	for (size_t i = 0; i < len; i++)
		if (q->buf[i] != pattern(len, i))
			return false;
	return true;
}

static int post_recv(struct pair *q, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)q->buf, len, q->mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	return ibv_post_recv(q->qp, &wr, &bad);
}

static int post_send(struct pair *q, uint32_t len, enum ibv_wr_opcode op)
{
	struct ibv_sge sg = { (uintptr_t)q->buf + MSG_MAX, len, q->mr->lkey };
	struct ibv_send_wr wr, *bad = NULL;

	for (size_t i = 0; i < len; i++)
		q->buf[MSG_MAX + i] = pattern(len, i);
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x4a43434cu);
	return ibv_post_send(q->qp, &wr, &bad);
}

/*
 * One exchange: the receiver posts a RECV of rlen (recv_late: only half a
 * second after the SEND) and says so; the sender posts a SEND of slen (op)
 * and reports its completion; the receiver reports what arrived. Returns the
 * receiver's result: RT_OK the message arrived whole (an immediate with it),
 * RT_NONE nothing arrived, RT_WRONG something else did; -errno a post was
 * refused, -1000 - status a completion failed; RT_GONE: the peer probe is
 * gone (err says how).
 */
enum { RT_NONE = 0, RT_OK = 1, RT_WRONG = 2, RT_GONE = -100000 };

static int gone(struct meshrun_err *err)
{
	mr_err_set(err, MESHRUN_E_PEER, "the connection to the peer probe broke");
	return RT_GONE;
}

static int round_trip(struct probe *p, struct pair *q, int fd, uint32_t rlen, uint32_t slen,
		      enum ibv_wr_opcode op, bool recv_late, struct meshrun_err *err)
{
	struct msg m;
	struct ibv_wc wc;
	int rc;

	memset(&m, 0, sizeof(m));
	if (p->o.listen) { /* the receiver */
		memset(q->buf, 0, rlen);
		rc = recv_late ? 0 : post_recv(q, rlen);
		m.kind = M_POSTED;
		if (msg_send(fd, &m) < 0 || msg_recv(fd, &m, M_SENT, err) < 0)
			return gone(err);
		if (recv_late) {
			mr_sleep_ms(500);
			rc = post_recv(q, rlen);
		}
		int got = rc ? 0 : wait_wc(q, WAIT_MS, &wc);
		int res = rc ? -rc : !got ? RT_NONE : wc.status != IBV_WC_SUCCESS ? -(int)wc.status - 1000
			  : wc.byte_len == slen && arrived_whole(q, slen) ? RT_OK : RT_WRONG;
		if (got && op == IBV_WR_SEND_WITH_IMM && res == RT_OK &&
		    (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != 0x4a43434cu))
			res = RT_WRONG;
		m.kind = M_RESULT;
		m.a = (uint32_t)res;
		if (msg_send(fd, &m) < 0)
			return gone(err);
		return res;
	}
	if (msg_recv(fd, &m, M_POSTED, err) < 0)
		return gone(err);
	rc = post_send(q, slen, op);
	/* a SEND held for a RECV posted later completes only then */
	int sent = rc ? -rc : wait_wc(q, recv_late ? 200 : WAIT_MS, &wc) ? (wc.status == IBV_WC_SUCCESS ? 1 : -(int)wc.status - 1000) : 0;
	m.kind = M_SENT;
	m.a = (uint32_t)sent;
	if (msg_send(fd, &m) < 0 || msg_recv(fd, &m, M_RESULT, err) < 0)
		return gone(err);
	if (sent == 0 && rc == 0)
		(void)wait_wc(q, WAIT_MS, &wc); /* its completion, so that the next round starts clean */
	if (sent < 0 && sent > -1000)
		return sent; /* the post itself failed */
	return (int)(int32_t)m.a;
}

static const char *result_name(int r)
{
	static char s[48];

	if (r == RT_OK)
		return "arrived";
	if (r == RT_NONE)
		return "nothing arrived";
	if (r == RT_WRONG)
		return "arrived wrong";
	if (r <= -1000)
		snprintf(s, sizeof(s), "failed: %s", ibv_wc_status_str((enum ibv_wc_status)(-r - 1000)));
	else
		snprintf(s, sizeof(s), "refused: %s", mr_errno_name(-r));
	return s;
}

static int pair_open(struct probe *p, struct pair *q, struct meshrun_err *err)
{
	struct ibv_qp_cap cap;

	q->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	q->buf = calloc(2, MSG_MAX);
	if (!q->cq || !q->buf)
		return mr_err_sys(err, "a CQ and %u bytes of buffers on '%s'", 2 * MSG_MAX, p->o.device);
	q->mr = ibv_reg_mr(p->pd, q->buf, 2 * MSG_MAX, IBV_ACCESS_LOCAL_WRITE);
	if (!q->mr)
		return mr_err_sys(err, "ibv_reg_mr of %u bytes on '%s'", 2 * MSG_MAX, p->o.device);
	/* a depth of a 1 MiB message in 4 KiB frames (Apple's driver counts so),
	 * or whatever the device grants */
	q->qp = make_qp(p, q->cq, IBV_QPT_UC, MSG_MAX / 4096, 1, &cap);
	if (!q->qp)
		q->qp = make_qp(p, q->cq, IBV_QPT_UC, 32, 1, &cap);
	if (!q->qp)
		return mr_err_sys(err, "ibv_create_qp (UC) on '%s'", p->o.device);
	q->depth = cap.max_recv_wr;
	return to_init(q->qp) ? mr_err_sys(err, "UC QP of '%s' to INIT", p->o.device) : 0;
}

static void pair_close(struct pair *q)
{
	if (q->qp)
		ibv_destroy_qp(q->qp);
	if (q->mr)
		ibv_dereg_mr(q->mr);
	if (q->cq)
		ibv_destroy_cq(q->cq);
	free(q->buf);
}

/* RTR from the link-local GID 0, and from an empty GID, on a scratch QP. */
static void probe_rtr(struct probe *p, struct ibv_cq *cq, const struct msg *peer)
{
	union ibv_gid zero;
	int empty = -1;

	memset(&zero, 0, sizeof(zero));
	for (int i = 1; i < MR_MIN(p->pa.gid_tbl_len, 64) && empty < 0; i++) {
		union ibv_gid g;
		if (ibv_query_gid(p->ctx, 1, i, &g) != 0 || gid_zero(&g))
			empty = i;
	}
	for (int k = 0; k < 2; k++) {
		struct ibv_qp *qp = make_qp(p, cq, IBV_QPT_UC, 8, 1, NULL);
		int sgid = k == 0 ? 0 : empty;
		if (!qp || to_init(qp) != 0 || sgid < 0) {
			not_measured(p, k == 0 ? "rtr_link_local_gid" : "rtr_unset_gid");
		} else {
			int e = to_rtr(qp, peer->a, peer->b, &peer->gid, sgid, IBV_MTU_1024);
			rule(p, k == 0 ? "rtr_link_local_gid" : "rtr_unset_gid", e ? "false" : "true", e);
		}
		if (qp)
			ibv_destroy_qp(qp);
	}
}

static int probe_peer(struct probe *p, struct meshrun_err *err)
{
	struct pair q = { 0 };
	struct msg me, peer;
	int fd, rc, best = 0;
	struct mr_buf t = MR_BUF_INIT;
	uint32_t psn = 7;
	char v[32];

	fd = tcp_pair(&p->o, err);
	if (fd < 0)
		return MESHRUN_E_CONNECT;
	rc = pair_open(p, &q, err);
	if (rc < 0)
		goto out;
	memset(&me, 0, sizeof(me));
	me.kind = M_HELLO;
	me.a = q.qp->qp_num;
	me.b = psn;
	me.c = (uint32_t)(p->o.gid_index >= 0 ? p->o.gid_index : p->v4_index >= 0 ? p->v4_index : 0);
	if (ibv_query_gid(p->ctx, 1, (int)me.c, &me.gid) != 0) {
		rc = mr_err_sys(err, "GID %u of '%s'", me.c, p->o.device);
		goto out;
	}
	if (msg_send(fd, &me) < 0 || msg_recv(fd, &peer, M_HELLO, err) < 0) {
		rc = mr_err_set(err, MESHRUN_E_PEER, "the hello with the peer probe failed");
		goto out;
	}
	probe_rtr(p, q.cq, &peer);
	enum ibv_mtu mtu = MR_MIN(p->pa.active_mtu, IBV_MTU_1024);
	if ((rc = to_rtr(q.qp, peer.a, peer.b, &peer.gid, (int)me.c, mtu)) != 0 || (rc = to_rts(q.qp, psn)) != 0) {
		rc = mr_err_errno(err, rc, MESHRUN_E_CONNECT, "UC QP of '%s' to RTR/RTS with GID index %u (give the interface an IPv4 address, or --gid-index)", p->o.device, me.c);
		goto out;
	}
	/* the largest SEND that arrives */
	for (uint32_t len = 4096; len <= MSG_MAX; len *= 2) {
		int r = round_trip(p, &q, fd, len, len, IBV_WR_SEND, false, err);
		if (r == RT_GONE) {
			rc = MESHRUN_E_PEER;
			goto out;
		}
		mr_buf_printf(&t, "%s{\"bytes\": %u, \"result\": \"%s\"}", t.len ? ", " : "", len, result_name(r));
		if (r != RT_OK)
			break;
		best = (int)len;
	}
	add(&p->obs, "\"sends\": [%s]", mr_buf_cstr(&t));
	snprintf(v, sizeof(v), "%d", best);
	if (best)
		rule(p, "max_msg_bytes", v, 0);
	/* a SEND posted before its RECV */
	rc = round_trip(p, &q, fd, 4096, 4096, IBV_WR_SEND, true, err);
	if (rc == RT_GONE) {
		rc = MESHRUN_E_PEER;
		goto out;
	}
	add(&p->obs, "\"send_before_recv\": \"%s\"", result_name(rc));
	rule(p, "send_without_recv", rc == RT_OK ? "\"held\"" : "\"dropped\"", 0);
	/* immediates */
	rc = round_trip(p, &q, fd, 4096, 4096, IBV_WR_SEND_WITH_IMM, false, err);
	if (rc == RT_GONE) {
		rc = MESHRUN_E_PEER;
		goto out;
	}
	add(&p->obs, "\"send_with_imm\": \"%s\"", result_name(rc));
	rule(p, "opcodes", rc == RT_OK ? "[\"SEND\", \"SEND_WITH_IMM\"]" : "[\"SEND\"]", 0);
	not_measured(p, "opcodes: RDMA_WRITE, RDMA_READ, ATOMIC");
	/* a SEND shorter than its RECV, last: a failure may leave the QP in error */
	rc = round_trip(p, &q, fd, 4096, 2048, IBV_WR_SEND, false, err);
	if (rc == RT_GONE) {
		rc = MESHRUN_E_PEER;
		goto out;
	}
	add(&p->obs, "\"shorter_send\": \"%s\"", result_name(rc));
	rule(p, "send_length", rc == RT_OK ? "\"at_most\"" : "\"equal\"", 0);
	rc = 0;
out:
	mr_buf_release(&t);
	pair_close(&q);
	close(fd);
	return rc;
}

/* ------------------------------------------------------------------ main */

static int write_out(struct probe *p, struct meshrun_err *err)
{
	struct mr_buf f = MR_BUF_INIT;
	int rc;

	not_measured(p, "depth_frame_bytes");
	mr_buf_printf(&f, "{\n  \"format\": \"meshrun-rdma-rules/1\",\n  \"about\": ");
	mr_json_quote(&f, p->source);
	mr_buf_printf(&f, ",\n  \"rules\": {\n    %s\n  },\n  \"observed\": {\n    %s\n  },\n  \"not_measured\": [\n    %s\n  ]\n}\n",
		      mr_buf_cstr(&p->rules), mr_buf_cstr(&p->obs), mr_buf_cstr(&p->missing));
	if (!p->o.output || strcmp(p->o.output, "-") == 0)
		rc = fwrite(f.p, 1, f.len, stdout) == f.len ? 0 : mr_err_sys(err, "write to stdout");
	else
		rc = mr_write_file(p->o.output, f.p, f.len, 0644, err);
	mr_buf_release(&f);
	return rc;
}

static const struct mr_opt *options(struct opts *o)
{
	static struct mr_opt t[8];
	const struct mr_opt table[] = {
		MR_OPT_STRING(0, "device", &o->device, "DEV", "the RDMA device to probe (ibv_devices lists them; on a Mac rdma_en2, ...)"),
		MR_OPT_STRING(0, "listen", &o->listen, "[HOST:]PORT", "wait for the peer probe on PORT (that host receives)"),
		MR_OPT_STRING(0, "connect", &o->connect, "HOST:PORT", "reach the peer probe there (this host sends)"),
		MR_OPT_STRING_D('o', "output", &o->output, "FILE", "-", "write the rules file there ('-': stdout)"),
		MR_OPT_INT(0, "gid-index", &o->gid_index, "N", 0, 255, "GID index for the connection (default: the IPv4-mapped GID)"),
		MR_OPT_INT_D(0, "max-qps", &o->max_qps, "N", 1, 4096, "64", "stop counting the QPs a device gives at N"),
		MR_OPT_INT_D(0, "max-mrs", &o->max_mrs, "N", 1, 65536, "512", "stop counting the MRs a device gives at N"),
		MR_OPT_END(),
	};
	memcpy(t, table, sizeof(table));
	return t;
}

static const char usage[] = "meshrun-rdma-probe --device DEV [--listen [HOST:]PORT | --connect HOST:PORT] [-o FILE]";
static const char trailer[] =
	"Records what the RDMA driver does (QP types, per-device QP and MR limits, GID\n"
	"table, completion channel; with a peer: the largest SEND, a SEND without a\n"
	"posted RECV, immediates) as a rules file for meshsim's Apple RDMA layer\n"
	"(MESHSIM_APPLE_RULES). Run it while nothing else uses the device.\n"
	"\n"
	"Exit status:\n"
	"  0  every step ran (what the driver refused is a result, not an error)\n"
	"  1  the device or the peer probe could not be used\n"
	"  2  usage error\n";

int main(int argc, char **argv)
{
	struct probe p;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct utsname u;
	struct ibv_cq *cq = NULL;
	char when[32];
	time_t now = time(NULL);
	int rc;

	memset(&p, 0, sizeof(p));
	p.o.gid_index = -1;
	p.o.max_qps = 64;
	p.o.max_mrs = 512;
	const struct mr_opt *table = options(&p.o);
	const struct mr_optdoc_cmd cmd = { NULL, usage, NULL, table, trailer, NULL };
	const struct mr_optdoc doc = { "meshrun-rdma-probe", MESHRUN_VERSION,
				       "record what an RDMA driver does, as meshsim's rules file", &cmd, 1, false };
	if ((rc = mr_optdoc_main(argc, argv, &doc)) >= 0)
		return rc;
	rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, usage, table, trailer);
		return 0;
	}
	if (rc == MR_OPT_VERSION) {
		printf("meshrun-rdma-probe %s\n", MESHRUN_VERSION);
		return 0;
	}
	if (rc == MR_OPT_OK && !p.o.device)
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "--device is required");
	if (rc == MR_OPT_OK && p.o.listen && p.o.connect)
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "--listen and --connect: one or the other");
	if (rc != MR_OPT_OK) {
		fprintf(stderr, "meshrun-rdma-probe: %s\nmeshrun-rdma-probe: try 'meshrun-rdma-probe --help'\n", err.msg);
		return 2;
	}
	if (uname(&u) != 0)
		snprintf(u.nodename, sizeof(u.nodename), "?");
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	snprintf(p.source, sizeof(p.source), SRC " %s on %.64s (%.32s %.32s), device %s%s%s, %s", MESHRUN_VERSION, u.nodename, u.sysname, u.release, p.o.device, p.o.listen || p.o.connect ? ", peer " : "", p.o.listen ? p.o.listen : p.o.connect ? p.o.connect : "", when);
	rc = open_dev(&p, &err);
	if (rc == 0 && !(cq = ibv_create_cq(p.ctx, 64, NULL, NULL, 0)))
		rc = mr_err_sys(&err, "ibv_create_cq on '%s'", p.o.device);
	if (rc == 0) {
		probe_attrs(&p);
		probe_kinds(&p, cq);
		probe_limits(&p, cq);
		if (p.o.listen || p.o.connect) {
			rc = probe_peer(&p, &err);
		} else {
			static const char *const peer_rows[] = { "max_msg_bytes", "send_without_recv", "opcodes", "send_length", "rtr_link_local_gid", "rtr_unset_gid" };
			for (size_t i = 0; i < ARRAY_SIZE(peer_rows); i++)
				not_measured(&p, peer_rows[i]);
		}
	}
	if (rc == 0)
		rc = write_out(&p, &err);
	if (rc < 0)
		fprintf(stderr, "meshrun-rdma-probe: %s\n", err.msg);
	if (cq)
		ibv_destroy_cq(cq);
	if (p.pd)
		ibv_dealloc_pd(p.pd);
	if (p.ctx)
		ibv_close_device(p.ctx);
	mr_buf_release(&p.rules);
	mr_buf_release(&p.obs);
	mr_buf_release(&p.missing);
	return rc < 0 ? 1 : 0;
}
