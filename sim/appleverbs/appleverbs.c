/*
 * appleverbs.c - the LD_PRELOAD interposer of meshsim's Apple RDMA layer
 * (appleverbs.h: what it enforces and why).
 *
 * Every exported ibv_* here stands in front of libibverbs' own (dlsym
 * RTLD_NEXT); the hot-path verbs (post_send, post_recv, poll_cq,
 * req_notify_cq) are reached through the ops table of each context opened
 * here, which this file points at its own functions. The process's records
 * (contexts, QPs, completions it made up) are lists under one mutex: a rank
 * has a handful of each.
 */
#include "common/compat.h"
#include "sim/appleverbs/appleverbs.h"
#include "sim/appleverbs/rules.h"
#include "sim/appleverbs/state.h"
#include "common/errname.h"
#include "common/num.h"
#include "meshrun/err.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* verbs.h makes these macros around inline helpers; the layer defines the real entry points */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define AV_EXPORT __attribute__((visibility("default")))

#ifndef AV_DEFAULT_RULES
#define AV_DEFAULT_RULES "apple-rules.json"
#endif

/* ------------------------------------------------------------ the process */

static struct {
	struct ibv_device **(*get_device_list)(int *);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	struct ibv_srq *(*create_srq)(struct ibv_pd *, struct ibv_srq_init_attr *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*destroy_qp)(struct ibv_qp *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *(*reg_mr_iova)(struct ibv_pd *, void *, size_t, uint64_t, int);
	struct ibv_mr *(*reg_mr_iova2)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	int (*dereg_mr)(struct ibv_mr *);
} real;

/* A context opened here, with the ops it had. */
struct lctx {
	struct ibv_context *ctx;
	uint32_t dev;                       /* row in the shared table */
	char name[AV_DEVNAME];
	char netdev[64];
	int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
	int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
	int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
	struct lctx *next;
};

struct held {
	struct ibv_send_wr wr;
	struct ibv_sge sge;
};

/* A QP created here. */
struct lqp {
	struct ibv_qp *qp;
	struct lctx *c;
	int slot;                           /* its row in the shared table */
	enum ibv_qp_state state;
	uint32_t send_depth, recv_depth;    /* granted */
	int peer;                           /* the peer QP's row, -1: not known */
	uint32_t peer_pid;
	bool peer_dead_seen;
	bool broken;                        /* a length error put it in error */
	uint64_t sent;                      /* SENDs that left (MESHSIM_APPLE_LOSE) */
	struct held *held;                  /* apple: SENDs waiting for the peer's RECVs */
	size_t hhead, hn, hcap;
	struct lqp *next;
};

/* A completion the layer made (an error), delivered before the real ones. */
struct lwc {
	struct ibv_cq *cq;
	struct ibv_wc wc;
	struct lwc *next;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool ready;                          /* rules and table loaded */
static bool logging;
static uint64_t lose_nth;           /* MESHSIM_APPLE_LOSE, 0: none */
static struct av_rules rules;
static struct av_shared *shm;
static struct lctx *ctxs;
static struct lqp *qps;
static struct lwc *wcs, **wcs_tail = &wcs;
/* libibverbs calls its own exported entry points (ibv_reg_mr -> ibv_reg_mr_iova2):
 * only the outermost call of a thread is the application's */
static __thread int reentry;

static void say(const char *fmt, ...) MR_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n = MR_MIN(n, (int)sizeof(line) - 2);
	line[n++] = '\n';
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p)
		say("meshsim-appleverbs: libibverbs has no '%s' (is libibverbs loaded?)", name);
	return p;
}

static void init(void)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *mode = getenv(AV_ENV_MODE), *path = getenv(AV_ENV_RULES), *st = getenv(AV_ENV_STATE);
	const char *lg = getenv(AV_ENV_LOG), *lose = getenv(AV_ENV_LOSE);

	logging = lg && strcmp(lg, "1") == 0;
	if (lose && *lose && mr_parse_u64(lose, 1, UINT32_MAX, &lose_nth) < 0) {
		say("meshsim-appleverbs: %s='%s': expected a count of SENDs: no RDMA device will open", AV_ENV_LOSE, lose);
		return;
	}
	*(void **)&real.get_device_list = sym("ibv_get_device_list");
	*(void **)&real.get_device_name = sym("ibv_get_device_name");
	*(void **)&real.open_device = sym("ibv_open_device");
	*(void **)&real.close_device = sym("ibv_close_device");
	*(void **)&real.query_device = sym("ibv_query_device");
	*(void **)&real.query_gid = sym("ibv_query_gid");
	*(void **)&real.create_comp_channel = sym("ibv_create_comp_channel");
	*(void **)&real.create_cq = sym("ibv_create_cq");
	*(void **)&real.create_srq = sym("ibv_create_srq");
	*(void **)&real.create_qp = sym("ibv_create_qp");
	*(void **)&real.destroy_qp = sym("ibv_destroy_qp");
	*(void **)&real.modify_qp = sym("ibv_modify_qp");
	*(void **)&real.reg_mr = sym("ibv_reg_mr");
	*(void **)&real.reg_mr_iova = sym("ibv_reg_mr_iova");
	*(void **)&real.reg_mr_iova2 = sym("ibv_reg_mr_iova2");
	*(void **)&real.reg_dmabuf_mr = sym("ibv_reg_dmabuf_mr");
	*(void **)&real.dereg_mr = sym("ibv_dereg_mr");
	if (!real.get_device_list || !real.get_device_name || !real.open_device || !real.create_qp ||
	    !real.modify_qp)
		return;
	av_rules_default(&rules);
	if (!path || !*path)
		path = AV_DEFAULT_RULES;
	if (av_rules_load(path, &rules, &err) < 0) {
		say("meshsim-appleverbs: %s (%s): no RDMA device will open", err.msg, AV_ENV_RULES);
		return;
	}
	if (mode && *mode) {
		if (strcmp(mode, "apple") == 0) {
			rules.send_without_recv = AV_HELD;
		} else if (strcmp(mode, "uc-strict") == 0) {
			rules.send_without_recv = AV_DROPPED;
		} else {
			say("meshsim-appleverbs: %s='%s': expected apple or uc-strict: no RDMA device will open", AV_ENV_MODE, mode);
			return;
		}
	}
	shm = av_state_open(st && *st ? st : AV_STATE_DEFAULT);
	if (!shm) {
		say("meshsim-appleverbs: cannot map the shared table '%s': %s: no RDMA device will open", st && *st ? st : AV_STATE_DEFAULT, strerror(errno));
		return;
	}
	ready = true;
}

static bool up(void)
{
	pthread_once(&once, init);
	if (!ready)
		errno = EINVAL;
	return ready;
}

/* Count a refusal, say it when asked, set errno; returns e. */
static int refuse(enum av_stat_id id, int e, const char *fmt, ...) MR_PRINTF(3, 4);
static int refuse(enum av_stat_id id, int e, const char *fmt, ...)
{
	if (shm)
		av_stat_add(shm, id);
	if (logging) {
		char what[400];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
		say("meshsim-appleverbs: refused %s: %s", what, mr_errno_name(e));
	}
	errno = e;
	return e;
}

static struct lctx *find_ctx(const struct ibv_context *ctx)
{
	for (struct lctx *c = ctxs; c; c = c->next)
		if (c->ctx == ctx)
			return c;
	return NULL;
}

static struct lqp *find_qp(const struct ibv_qp *qp)
{
	for (struct lqp *q = qps; q; q = q->next)
		if (q->qp == qp)
			return q;
	return NULL;
}

/* ------------------------------------------------------------------- GIDs */

static bool gid_is_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return false;
	return true;
}

/* The IPv4-mapped GID of netdev's first IPv4 address; false when it has none. */
static bool ipv4_gid(const char *netdev, union ibv_gid *g)
{
	struct ifaddrs *ifa = NULL;
	bool found = false;

	memset(g, 0, sizeof(*g));
	if (!netdev[0] || getifaddrs(&ifa) < 0)
		return false;
	for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, netdev) != 0)
			continue;
		const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
		g->raw[10] = 0xff;
		g->raw[11] = 0xff;
		memcpy(&g->raw[12], &sin->sin_addr, 4);
		found = true;
	}
	freeifaddrs(ifa);
	return found;
}

static void read_netdev(struct lctx *c)
{
	char path[256];
	int fd;

	c->netdev[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", c->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, c->netdev, sizeof(c->netdev) - 1);
	close(fd);
	c->netdev[n > 0 ? n : 0] = '\0';
	c->netdev[strcspn(c->netdev, "\n")] = '\0';
}

/* The GID Apple's table has at index idx (all zero where it has none). */
static void apple_gid(struct lctx *c, int idx, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (idx == 0) {
		memcpy(g->raw, shm->devs[c->dev].gid0, 16);
	} else if (idx == rules.gid_ipv4_index && ipv4_gid(c->netdev, g)) {
		av_state_lock(shm);
		memcpy(shm->devs[c->dev].gid_v4, g->raw, 16);
		av_state_unlock(shm);
	}
}

/* The real link-local GID of the device that presented gid, or NULL. */
static const uint8_t *real_gid_of(const uint8_t *gid)
{
	for (int i = 0; i < AV_MAX_DEV && shm->devs[i].name[0]; i++)
		if (memcmp(shm->devs[i].gid_v4, gid, 16) == 0 || memcmp(shm->devs[i].gid0, gid, 16) == 0)
			return shm->devs[i].gid0;
	return NULL;
}

/* --------------------------------------------------------------- delivery */

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
	*wcs_tail = w;
	wcs_tail = &w->next;
}

static uint32_t wr_len(const struct ibv_sge *sg, int n)
{
	uint32_t len = 0;

	for (int i = 0; i < n; i++)
		len += sg[i].length;
	return len;
}

/* The peer QP's row once the QP knows its peer; -1 while it does not. */
static int peer_row(struct lqp *q)
{
	if (q->peer >= 0 && shm->qps[q->peer].pid != q->peer_pid)
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
	struct av_qp *pq = &shm->qps[p];
	uint64_t posted = __atomic_load_n(&pq->posted, __ATOMIC_ACQUIRE);
	if (pq->delivered < posted) {
		*rlen = pq->len[pq->delivered % AV_RING];
		return V_SEND;
	}
	return rules.send_without_recv == AV_HELD ? V_WAIT : V_DROP;
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
static int try_send(struct lqp *q, struct ibv_send_wr *wr)
{
	uint32_t len = wr_len(wr->sg_list, wr->num_sge), rlen = 0;
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
			av_stat_add(shm, AV_STAT_to_dead_peer);
		q->peer_dead_seen = true;
		if (rules.send_without_recv == AV_HELD)
			return 0; /* Apple: nothing happens, ever */
		break;
	case V_DROP:
		av_stat_add(shm, AV_STAT_drops);
		break;
	case V_UNKNOWN:
		break;
	case V_SEND:
		if (rules.send_length == AV_LEN_EQUAL ? len != rlen : len > rlen) {
			refuse(AV_STAT_len_mismatch, EINVAL, "a SEND of %u bytes into a RECV of %u on QP %u of '%s'", len, rlen, q->qp->qp_num, q->c->name);
			q->broken = true;
			add_wc(q->qp->send_cq, wr, q->qp->qp_num, IBV_WC_LOC_LEN_ERR);
			return 1;
		}
		if (++q->sent == lose_nth) {
			/* lost on the cable: it left (its completion says so), nothing
			 * arrives, the peer's RECV waits for the next SEND */
			av_stat_add(shm, AV_STAT_lost);
			if (wr->send_flags & IBV_SEND_SIGNALED)
				add_wc(q->qp->send_cq, wr, q->qp->qp_num, IBV_WC_SUCCESS);
			return 1;
		}
		__atomic_store_n(&shm->qps[q->peer].delivered, shm->qps[q->peer].delivered + 1, __ATOMIC_RELEASE);
		break;
	}
	int rc = post_one(q, wr);
	return rc ? -rc : 1;
}

/* Apple: post what the peer has RECVs for now, in order. */
static void flush_held(struct lqp *q)
{
	while (q->hn) {
		struct held *h = &q->held[q->hhead];
		h->wr.sg_list = &h->sge;
		if (try_send(q, &h->wr) == 0)
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
		pthread_mutex_lock(&mu);
		any = false;
		for (struct lqp *q = qps; q; q = q->next) {
			flush_held(q);
			any = any || q->hn;
		}
		if (!any)
			flusher_running = false;
		pthread_mutex_unlock(&mu);
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

static int hold(struct lqp *q, const struct ibv_send_wr *wr)
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
	av_stat_add(shm, AV_STAT_held);
	start_flusher();
	return 0;
}

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
	uint32_t len = wr_len(sg, nsge);

	if (nsge > rules.max_sge)
		return refuse(AV_STAT_refused_sge, rules.max_sge_errno, "%s with %d scatter/gather entries on '%s' (at most %d)", what, nsge, q->c->name, rules.max_sge);
	if (len > rules.max_msg_bytes)
		return refuse(AV_STAT_refused_msg_size, rules.max_msg_errno, "%s of %u bytes on '%s' (at most %u)", what, len, q->c->name, rules.max_msg_bytes);
	if (rules.depth_frame_bytes && len > (uint64_t)depth * rules.depth_frame_bytes)
		return refuse(AV_STAT_refused_msg_size, rules.depth_frame_errno, "%s of %u bytes on '%s': the QP's depth of %u counts %u-byte frames", what, len, q->c->name, depth, rules.depth_frame_bytes);
	return 0;
}

static int av_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int rc = 0;

	pthread_mutex_lock(&mu);
	struct lqp *q = find_qp(qp);
	struct lctx *c = find_ctx(qp->context);
	if (!q) {
		pthread_mutex_unlock(&mu);
		return c ? c->post_send(qp, wr, bad) : EINVAL;
	}
	for (; wr && rc == 0; wr = wr->next) {
		int op = av_op_of(wr->opcode);
		if (!(rules.opcodes & (1u << op)))
			rc = refuse(AV_STAT_refused_opcode, rules.opcode_errno, "ibv_post_send of %s on '%s'", av_op_name(op), q->c->name);
		else if (q->state != IBV_QPS_RTS)
			rc = EINVAL;
		else
			rc = check_wr(q, wr->sg_list, wr->num_sge, q->send_depth, "a SEND");
		if (rc) {
			*bad = wr;
			break;
		}
		av_stat_add(shm, AV_STAT_sends);
		flush_held(q);
		int st = q->hn ? 0 : try_send(q, wr);
		if (st == 0)
			rc = hold(q, wr);
		else if (st < 0)
			rc = -st;
		if (rc)
			*bad = wr;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static int av_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int rc = 0;

	pthread_mutex_lock(&mu);
	struct lqp *q = find_qp(qp);
	struct lctx *c = find_ctx(qp->context);
	if (!q) {
		pthread_mutex_unlock(&mu);
		return c ? c->post_recv(qp, wr, bad) : EINVAL;
	}
	struct av_qp *row = &shm->qps[q->slot];
	for (; wr && rc == 0; wr = wr->next) {
		if (q->state != IBV_QPS_RTS && !rules.post_recv_before_rts)
			rc = refuse(AV_STAT_refused_recv_before_rts, rules.post_recv_before_rts_errno, "ibv_post_recv on '%s' before RTS", q->c->name);
		else
			rc = check_wr(q, wr->sg_list, wr->num_sge, q->recv_depth, "a RECV");
		if (rc == 0 && row->posted - __atomic_load_n(&row->delivered, __ATOMIC_RELAXED) >= AV_RING)
			rc = ENOMEM; /* more outstanding RECVs than the layer remembers */
		if (rc == 0) {
			struct ibv_recv_wr one = *wr, *b = NULL;
			one.next = NULL;
			row->len[row->posted % AV_RING] = wr_len(wr->sg_list, wr->num_sge);
			rc = q->c->post_recv(qp, &one, &b);
			if (rc == 0)
				__atomic_store_n(&row->posted, row->posted + 1, __ATOMIC_RELEASE);
		}
		if (rc)
			*bad = wr;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static int av_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int got = 0;

	pthread_mutex_lock(&mu);
	struct lctx *c = find_ctx(cq->context);
	for (struct lqp *q = qps; q; q = q->next)
		if (q->qp->send_cq == cq && q->hn)
			flush_held(q);
	for (struct lwc **p = &wcs; *p && got < n;) {
		struct lwc *w = *p;
		if (w->cq != cq) {
			p = &w->next;
			continue;
		}
		wc[got++] = w->wc;
		*p = w->next;
		if (wcs_tail == &w->next)
			wcs_tail = p;
		free(w);
	}
	pthread_mutex_unlock(&mu);
	if (got == n || !c)
		return got;
	int k = c->poll_cq(cq, n - got, wc + got);
	return k < 0 ? (got ? got : k) : got + k;
}

static int av_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return refuse(AV_STAT_refused_comp_channel, rules.comp_channel_errno, "ibv_req_notify_cq (no completion events)");
}

static struct ibv_qp *av_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	(void)ctx;
	(void)a;
	refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_create_qp_ex (not known to exist on Apple's driver)");
	return NULL;
}

/* ------------------------------------------------------------ entry points */

AV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	if (!up()) {
		if (num)
			*num = 0;
		return NULL;
	}
	return real.get_device_list(num);
}

AV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *ctx;
	struct lctx *c;
	union ibv_gid g;

	if (!up())
		return NULL;
	ctx = real.open_device(device);
	if (!ctx)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		real.close_device(ctx);
		errno = ENOMEM;
		return NULL;
	}
	c->ctx = ctx;
	snprintf(c->name, sizeof(c->name), "%s", real.get_device_name(device));
	read_netdev(c);
	av_state_lock(shm);
	int dev = av_dev_find_add(shm, c->name);
	if (dev >= 0 && real.query_gid(ctx, 1, 0, &g) == 0)
		memcpy(shm->devs[dev].gid0, g.raw, 16);
	av_state_unlock(shm);
	if (dev < 0) {
		free(c);
		real.close_device(ctx);
		errno = ENOSPC;
		return NULL;
	}
	c->dev = (uint32_t)dev;
	pthread_mutex_lock(&mu);
	c->post_send = ctx->ops.post_send;
	c->post_recv = ctx->ops.post_recv;
	c->poll_cq = ctx->ops.poll_cq;
	ctx->ops.post_send = av_post_send;
	ctx->ops.post_recv = av_post_recv;
	ctx->ops.poll_cq = av_poll_cq;
	if (!rules.comp_channel)
		ctx->ops.req_notify_cq = av_req_notify_cq;
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, create_qp_ex);
	if (vctx)
		vctx->create_qp_ex = av_create_qp_ex;
	c->next = ctxs;
	ctxs = c;
	pthread_mutex_unlock(&mu);
	return ctx;
}

AV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	if (!up())
		return EINVAL;
	pthread_mutex_lock(&mu);
	for (struct lctx **p = &ctxs; *p; p = &(*p)->next) {
		if ((*p)->ctx == ctx) {
			struct lctx *c = *p;
			*p = c->next;
			ctx->ops.post_send = c->post_send;
			ctx->ops.post_recv = c->post_recv;
			ctx->ops.poll_cq = c->poll_cq;
			free(c);
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return real.close_device(ctx);
}

AV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	if (!up())
		return EINVAL;
	int rc = real.query_device(ctx, a);
	if (rc)
		return rc;
	if (rules.max_qp)
		a->max_qp = MR_MIN(a->max_qp, rules.max_qp);
	if (rules.max_mr)
		a->max_mr = MR_MIN(a->max_mr, rules.max_mr);
	a->max_sge = MR_MIN(a->max_sge, rules.max_sge);
	a->max_qp_wr = MR_MIN(a->max_qp_wr, AV_RING);
	if (!rules.srq)
		a->max_srq = 0;
	return 0;
}

AV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (!up())
		return EINVAL;
	pthread_mutex_lock(&mu);
	struct lctx *c = find_ctx(ctx);
	pthread_mutex_unlock(&mu);
	if (!c)
		return real.query_gid(ctx, port, index, gid);
	if (port != 1 || index < 0)
		return EINVAL;
	apple_gid(c, index, gid);
	return 0;
}

AV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	(void)ctx, (void)port, (void)index, (void)entry, (void)flags, (void)entry_size;
	return refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_query_gid_ex (use ibv_query_gid)");
}

AV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	(void)ctx, (void)entries, (void)max_entries, (void)flags, (void)entry_size;
	return -refuse(AV_STAT_refused_ex_verb, EOPNOTSUPP, "ibv_query_gid_table (use ibv_query_gid)");
}

AV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	if (!up())
		return NULL;
	if (!rules.comp_channel) {
		refuse(AV_STAT_refused_comp_channel, rules.comp_channel_errno, "ibv_create_comp_channel");
		return NULL;
	}
	return real.create_comp_channel(ctx);
}

AV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
				       struct ibv_comp_channel *ch, int vec)
{
	if (!up())
		return NULL;
	if (ch && !rules.comp_channel) {
		refuse(AV_STAT_refused_comp_channel, rules.comp_channel_errno, "ibv_create_cq with a completion channel");
		return NULL;
	}
	return real.create_cq(ctx, cqe, cq_ctx, ch, vec);
}

AV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	if (!up())
		return NULL;
	if (!rules.srq) {
		refuse(AV_STAT_refused_srq, rules.srq_errno, "ibv_create_srq");
		return NULL;
	}
	return real.create_srq(pd, a);
}

static int av_qpt_of(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? AV_QPT_RC : t == IBV_QPT_UC ? AV_QPT_UC : t == IBV_QPT_UD ? AV_QPT_UD : AV_QPT_OTHER;
}

/* Under the lock: a free QP row for this process on dev, -1 when none. */
static int take_qp_row(uint32_t dev)
{
	for (int i = 0; i < AV_MAX_QP; i++) {
		struct av_qp *r = &shm->qps[i];
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

	if (!up())
		return NULL;
	pthread_mutex_lock(&mu);
	struct lctx *c = find_ctx(pd->context);
	pthread_mutex_unlock(&mu);
	if (!c)
		return real.create_qp(pd, a);
	t = av_qpt_of(a->qp_type);
	if (!(rules.qp_types & (1u << t))) {
		refuse(AV_STAT_refused_qp_type, rules.qp_type_errno, "ibv_create_qp of type %s on '%s'", av_qpt_name(t), c->name);
		return NULL;
	}
	if (a->srq && !rules.srq) {
		refuse(AV_STAT_refused_srq, rules.srq_errno, "a QP with an SRQ on '%s'", c->name);
		return NULL;
	}
	if ((int)a->cap.max_send_sge > rules.max_sge || (int)a->cap.max_recv_sge > rules.max_sge) {
		refuse(AV_STAT_refused_sge, rules.max_sge_errno, "a QP with %u/%u scatter/gather entries on '%s' (at most %d)", a->cap.max_send_sge, a->cap.max_recv_sge, c->name, rules.max_sge);
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
	av_state_lock(shm);
	int n = av_count_qps(shm, c->dev);
	row = rules.max_qp && n >= rules.max_qp ? -2 : take_qp_row(c->dev);
	av_state_unlock(shm);
	if (row == -2) {
		free(q);
		refuse(AV_STAT_refused_qp_limit, rules.max_qp_errno, "QP %d on '%s' (at most %d per device)", n + 1, c->name, rules.max_qp);
		return NULL;
	}
	if (row < 0) {
		free(q);
		errno = ENOSPC;
		return NULL;
	}
	qp = real.create_qp(pd, a);
	if (!qp) {
		int e = errno;
		shm->qps[row].pid = 0;
		free(q);
		errno = e;
		return NULL;
	}
	shm->qps[row].qpn = qp->qp_num;
	q->qp = qp;
	q->c = c;
	q->slot = row;
	q->state = IBV_QPS_RESET;
	q->send_depth = a->cap.max_send_wr;
	q->recv_depth = a->cap.max_recv_wr;
	q->peer = -1;
	pthread_mutex_lock(&mu);
	q->next = qps;
	qps = q;
	pthread_mutex_unlock(&mu);
	return qp;
}

AV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct lqp *q = NULL;

	if (!up())
		return EINVAL;
	pthread_mutex_lock(&mu);
	for (struct lqp **p = &qps; *p; p = &(*p)->next) {
		if ((*p)->qp == qp) {
			q = *p;
			*p = q->next;
			break;
		}
	}
	/* its made-up completions go with it */
	for (struct lwc **p = &wcs; *p;) {
		struct lwc *w = *p;
		if (q && w->wc.qp_num == qp->qp_num && w->cq == qp->send_cq) {
			*p = w->next;
			free(w);
		} else {
			p = &w->next;
		}
	}
	for (wcs_tail = &wcs; *wcs_tail; wcs_tail = &(*wcs_tail)->next)
		;
	pthread_mutex_unlock(&mu);
	int rc = real.destroy_qp(qp);
	if (q) {
		__atomic_store_n(&shm->qps[q->slot].pid, 0, __ATOMIC_RELEASE);
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
		struct av_qp *r = &shm->qps[i];
		if (r->pid && r->qpn == qpn && memcmp(shm->devs[r->dev].gid0, gid0, 16) == 0) {
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

	if (!up())
		return EINVAL;
	pthread_mutex_lock(&mu);
	struct lqp *q = find_qp(qp);
	pthread_mutex_unlock(&mu);
	if (!q)
		return real.modify_qp(qp, attr, mask);
	a = *attr;
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR) {
		if ((mask & IBV_QP_PATH_MTU) && mtu_bytes(attr->path_mtu) > rules.max_path_mtu)
			return refuse(AV_STAT_refused_mtu, rules.max_path_mtu_errno, "RTR on '%s' with path MTU %d (at most %d)", q->c->name, mtu_bytes(attr->path_mtu), rules.max_path_mtu);
		if ((mask & IBV_QP_AV) && attr->ah_attr.is_global) {
			union ibv_gid sg;
			int si = attr->ah_attr.grh.sgid_index;
			if (si == 0 && !rules.rtr_link_local)
				return refuse(AV_STAT_refused_gid, rules.rtr_link_local_errno, "RTR on '%s' from the link-local GID (index 0)", q->c->name);
			apple_gid(q->c, si, &sg);
			if (gid_is_zero(sg.raw) || gid_is_zero(attr->ah_attr.grh.dgid.raw))
				return refuse(AV_STAT_refused_gid, rules.rtr_unset_gid_errno, "RTR on '%s' with an unset GID (source index %d%s)", q->c->name, si, gid_is_zero(sg.raw) ? ", empty: the interface has no IPv4 address" : "");
			/* the wire: soft-RoCE's link-local GIDs (see appleverbs.h) */
			const uint8_t *peer = real_gid_of(attr->ah_attr.grh.dgid.raw);
			if (peer) {
				a.ah_attr.grh.sgid_index = 0;
				memcpy(a.ah_attr.grh.dgid.raw, peer, 16);
			}
			if (peer && (mask & IBV_QP_DEST_QPN)) {
				pthread_mutex_lock(&mu);
				q->peer = find_peer(peer, attr->dest_qp_num, &q->peer_pid);
				pthread_mutex_unlock(&mu);
			}
		}
	}
	rc = real.modify_qp(qp, &a, mask);
	if (rc == 0 && (mask & IBV_QP_STATE)) {
		pthread_mutex_lock(&mu);
		q->state = attr->qp_state;
		pthread_mutex_unlock(&mu);
	}
	return rc;
}

/* Reserve an MR row on ctx's device: its index, or -1 (errno set). */
static int mr_reserve(struct ibv_pd *pd)
{
	pthread_mutex_lock(&mu);
	struct lctx *c = find_ctx(pd->context);
	pthread_mutex_unlock(&mu);
	if (!c)
		return -2;
	av_state_lock(shm);
	int n = av_count_mrs(shm, c->dev), row = -1;
	if (!rules.max_mr || n < rules.max_mr) {
		for (int i = 0; i < AV_MAX_MR && row < 0; i++) {
			struct av_mr *m = &shm->mrs[i];
			if (m->pid && !av_pid_alive(m->pid))
				m->pid = 0;
			if (!m->pid) {
				m->pid = (uint32_t)getpid();
				m->dev = c->dev;
				m->handle = 0;
				row = i;
			}
		}
	}
	av_state_unlock(shm);
	if (rules.max_mr && n >= rules.max_mr) {
		refuse(AV_STAT_refused_mr_limit, rules.max_mr_errno, "MR %d on '%s' (at most %d per device)", n + 1, c->name, rules.max_mr);
		return -1;
	}
	if (row < 0)
		errno = ENOSPC;
	return row;
}

static struct ibv_mr *mr_done(int row, struct ibv_mr *mr)
{
	int e = errno;

	reentry--;
	if (row >= 0 && !mr)
		shm->mrs[row].pid = 0;
	else if (row >= 0)
		shm->mrs[row].handle = (uint64_t)(uintptr_t)mr;
	errno = e;
	return mr;
}

/*
 * The application's registration (call: the real one): the device's MR row
 * first, then the real call, which keeps the row or gives it back. Calls
 * libibverbs makes to its own entry points from inside pass straight on.
 */
#define REG_MR(pd, call)                           \
	do {                                       \
		if (!up())                         \
			return NULL;               \
		if (reentry)                       \
			return call;               \
		int row_ = mr_reserve(pd);         \
		if (row_ == -1)                    \
			return NULL;               \
		reentry++;                         \
		struct ibv_mr *mr_ = call;         \
		return mr_done(row_, mr_);         \
	} while (0)

AV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	REG_MR(pd, real.reg_mr(pd, addr, len, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
					 int access)
{
	REG_MR(pd, real.reg_mr_iova(pd, addr, len, iova, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
					  unsigned int access)
{
	REG_MR(pd, real.reg_mr_iova2(pd, addr, len, iova, access));
}

AV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len,
					   uint64_t iova, int fd, int access)
{
	REG_MR(pd, real.reg_dmabuf_mr(pd, off, len, iova, fd, access));
}

AV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	if (!up())
		return EINVAL;
	uint64_t h = (uint64_t)(uintptr_t)mr;
	uint32_t me = (uint32_t)getpid();
	int rc = real.dereg_mr(mr);
	if (rc == 0) {
		av_state_lock(shm);
		for (int i = 0; i < AV_MAX_MR; i++)
			if (shm->mrs[i].pid == me && shm->mrs[i].handle == h) {
				shm->mrs[i].pid = 0;
				break;
			}
		av_state_unlock(shm);
	}
	return rc;
}
