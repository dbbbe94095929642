/*
 * appleverbs_impl.h - how the files of meshsim's verbs interposer
 * (appleverbs.h: what it enforces and why) divide the work. Only the
 * LD_PRELOAD library includes it; it needs libibverbs' headers.
 *
 * Every exported ibv_* stands in front of libibverbs' own (dlsym
 * RTLD_NEXT); the hot-path verbs (post_send, post_recv, poll_cq,
 * req_notify_cq) are reached through the ops table of each context opened
 * here, which device.c points at ops.c's functions.
 *
 * Who owns what:
 *  appleverbs.c  the process: the real entry points (av_real), the rules in
 *                force and the mapped shared table, loaded once (av_up);
 *                refusals (av_refuse); the lists of records below and their
 *                mutex (av_mu), with the look-ups
 *  device.c      devices and GIDs: ibv_get_device_list, ibv_open_device
 *                (makes a struct lctx and installs ops.c's ops),
 *                ibv_close_device (puts the real ops back and frees it),
 *                ibv_query_device, ibv_query_gid (Apple's GID table)
 *  qp.c          CQs, SRQs, completion channels and QPs: what creates, the
 *                device's QP budget (a row of the shared table per QP),
 *                RTR's GID and MTU rules and the peer's row; ibv_destroy_qp
 *                frees the struct lqp and its made-up completions
 *  mr.c          MRs: the device's MR budget (a row per MR), ibv_reg_mr and
 *                its variants, ibv_dereg_mr
 *  ops.c         the ops a context gets: each work request checked against
 *                the rules, RECVs counted into the shared table, made-up
 *                completions returned before the real ones
 *  delivery.c    what becomes of a SEND (apple: held until the peer's RECV,
 *                with the flusher thread; uc-strict: dropped and counted),
 *                the length rule, MESHSIM_APPLE_LOSE, made-up completions
 *
 * Locking: the process's lists (av_ctxs, av_qps, av_wcs) and every struct
 * lqp's fields change under av_mu; rows of the shared table are taken and
 * freed under its own lock (av_state_lock, state.h).
 */
#ifndef MR_SIM_APPLEVERBS_IMPL_H
#define MR_SIM_APPLEVERBS_IMPL_H

#include "common/compat.h"
#include "sim/appleverbs/rules.h"
#include "sim/appleverbs/state.h"

#include <infiniband/verbs.h>
#include <pthread.h>

/* verbs.h makes these macros around inline helpers; the layer defines the real entry points */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define AV_EXPORT __attribute__((visibility("default")))

/* libibverbs' own entry points (appleverbs.c fills them in av_up) */
struct av_real_verbs {
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
};

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

/* ------------------------------------------------ appleverbs.c: the process */

extern struct av_real_verbs av_real;
extern pthread_mutex_t av_mu;
extern uint64_t av_lose_nth;                /* MESHSIM_APPLE_LOSE, 0: none */
extern struct av_rules av_rules_in_force;
extern struct av_shared *av_shm;
extern struct lctx *av_ctxs;
extern struct lqp *av_qps;
extern struct lwc *av_wcs, **av_wcs_tail;

/* Load the rules and map the table, once: false (errno EINVAL) when they did not load. */
bool av_up(void);
/* Count a refusal, say it when asked, set errno; returns e. */
int av_refuse(enum av_stat_id id, int e, const char *fmt, ...) MR_PRINTF(3, 4);
/* Under av_mu: the record of a context / QP opened here, or NULL. */
struct lctx *av_find_ctx(const struct ibv_context *ctx);
struct lqp *av_find_qp(const struct ibv_qp *qp);

/* ------------------------------------------------------------ device.c */

bool av_gid_is_zero(const uint8_t *g);
/* The GID Apple's table has at index idx (all zero where it has none). */
void av_apple_gid(struct lctx *c, int idx, union ibv_gid *g);
/* The real link-local GID of the device that presented gid, or NULL. */
const uint8_t *av_real_gid_of(const uint8_t *gid);

/* ------------------------------------------------- ops.c: a context's ops */

int av_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int av_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int av_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int av_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_qp *av_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);

/* ------------------------------------------------------------ delivery.c */

uint32_t av_wr_len(const struct ibv_sge *sg, int n);
/* A SEND whose turn has come: 1 posted or failed for good, 0 must wait, or an errno. */
int av_try_send(struct lqp *q, struct ibv_send_wr *wr);
/* Apple: post what the peer has RECVs for now, in order. */
void av_flush_held(struct lqp *q);
/* Under av_mu: queue a SEND that must wait (and start the flusher); 0 or ENOMEM. */
int av_hold(struct lqp *q, const struct ibv_send_wr *wr);

#endif
