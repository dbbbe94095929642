/*
 * state.h - what meshsim's verbs layer shares between the processes of one
 * simulated cluster (appleverbs.h): a table in one file under /dev/shm.
 *
 * Apple's limits hold per device whatever the number of processes and
 * contexts, and "a SEND waits for the peer's RECV" needs the sender to see the
 * receives the peer posted: every rank of a simulated cluster runs on one
 * Linux host (the soft-RoCE guest), so one mapped file serves as the device's
 * memory. Rows:
 *   devices  name, the real link-local GID (index 0, what soft-RoCE routes by)
 *            and the IPv4-mapped GID it last presented (what peers dial);
 *   QPs      owner pid, device, QP number, and its receive ring: how many
 *            RECVs the owner posted (with their lengths) and how many SENDs
 *            its peer delivered into them;
 *   MRs      owner pid and device;
 *   counters of what the layer refused, held and dropped (av_stat).
 * A row whose owner process is gone (kill -9) is free again: counts are taken
 * over live rows, so a killed rank cannot leak a device's QP budget.
 *
 * Concurrency: one lock word (the holder's pid; taken over from a dead
 * holder) guards row allocation; the receive counters have one writer each
 * (posted: the owner, delivered: the one peer) and are read with acquire
 * loads. All zero bytes is the empty table, so the file needs no set-up.
 */
#ifndef MR_SIM_APPLEVERBS_STATE_H
#define MR_SIM_APPLEVERBS_STATE_H

#include "common/compat.h"

#define AV_STATE_DEFAULT "/dev/shm/meshsim-appleverbs"
#define AV_STATE_MAGIC 0x41565332u /* "AVS2": the lost counter */
#define AV_MAX_DEV 256
#define AV_MAX_QP 1024
#define AV_MAX_MR 4096
#define AV_RING 1024               /* posted receives remembered per QP */
#define AV_DEVNAME 64

/* The counters: X(name, what it counts) (meshsim-appleverbs-stat prints them). */
#define AV_STAT_MAP(X)                                                                   \
	X(refused_qp_type, "ibv_create_qp of a QP type the rules refuse (RC, UD, ...)")     \
	X(refused_qp_limit, "ibv_create_qp over the device's QP budget")                    \
	X(refused_mr_limit, "ibv_reg_mr over the device's MR budget")                       \
	X(refused_sge, "a QP or work request with more scatter/gather entries than allowed") \
	X(refused_srq, "ibv_create_srq")                                                    \
	X(refused_comp_channel, "ibv_create_comp_channel, or a CQ armed for events")        \
	X(refused_opcode, "ibv_post_send of an opcode other than the allowed ones")         \
	X(refused_gid, "RTR with the link-local or an unset GID")                           \
	X(refused_mtu, "RTR with a path MTU above the allowed one")                         \
	X(refused_recv_before_rts, "ibv_post_recv before the QP reached RTS")               \
	X(refused_msg_size, "a work request longer than the message or queue-depth bound")  \
	X(refused_ex_verb, "an extended verb the layer does not offer (create_qp_ex, ...)") \
	X(len_mismatch, "a SEND whose length differs from the RECV it would land in")       \
	X(sends, "SENDs posted")                                                            \
	X(held, "SENDs that had to wait for the peer's RECV (apple)")                       \
	X(drops, "SENDs posted while the peer had no RECV for them (uc-strict: lost)")      \
	X(lost, "SENDs lost on purpose (MESHSIM_APPLE_LOSE)")                               \
	X(to_dead_peer, "SENDs to a QP whose process is gone")

enum av_stat_id {
#define AV_STAT_ENUM(n, d) AV_STAT_##n,
	AV_STAT_MAP(AV_STAT_ENUM)
#undef AV_STAT_ENUM
	AV_STAT_COUNT
};

struct av_dev {
	char name[AV_DEVNAME];      /* "" = free */
	uint8_t gid0[16];           /* the real link-local GID */
	uint8_t gid_v4[16];         /* the IPv4-mapped GID last presented (0: none yet) */
};

struct av_qp {
	uint32_t pid;               /* 0 = free */
	uint32_t qpn;
	uint32_t dev;               /* index into devs */
	uint32_t pad;
	uint64_t posted;            /* RECVs posted (written by the owner) */
	uint64_t delivered;         /* SENDs delivered into them (written by the peer) */
	uint32_t len[AV_RING];      /* length of RECV number k at [k % AV_RING] */
};

struct av_mr {
	uint32_t pid;               /* 0 = free */
	uint32_t dev;
	uint64_t handle;            /* the process's ibv_mr pointer */
};

struct av_shared {
	uint32_t magic;
	uint32_t lock;              /* holder's pid, 0 = free */
	uint64_t stat[AV_STAT_COUNT];
	struct av_dev devs[AV_MAX_DEV];
	struct av_qp qps[AV_MAX_QP];
	struct av_mr mrs[AV_MAX_MR];
};

/* Map (creating it when needed) the table at path; NULL with errno on failure. */
struct av_shared *av_state_open(const char *path);
void av_state_lock(struct av_shared *s);
void av_state_unlock(struct av_shared *s);
void av_stat_add(struct av_shared *s, enum av_stat_id id);
const char *av_stat_name(int id);
const char *av_stat_what(int id);
/* Whether pid is still running (kill(pid, 0)). */
bool av_pid_alive(uint32_t pid);

/* Under the lock: the device row named name (added when new), -1 when full. */
int av_dev_find_add(struct av_shared *s, const char *name);
/* Under the lock: live QP / MR rows on device dev (dead owners' rows freed). */
int av_count_qps(struct av_shared *s, uint32_t dev);
int av_count_mrs(struct av_shared *s, uint32_t dev);

#endif
