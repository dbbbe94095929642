/*
 * appleverbs.h - meshsim's Apple RDMA layer: soft-RoCE that behaves as Apple's
 * Thunderbolt RDMA driver (macOS 26.2+) does by the public evidence
 * (shared/apple-rdma.md), so that a verbs program that works under it has a
 * fair chance on real Macs, and one that relies on what Apple's driver lacks
 * (RC queue pairs, RNR flow control, completion channels, GID 0) fails here.
 *
 * What it is: libmeshsim-appleverbs.so, loaded with LD_PRELOAD into every
 * rank. libibverbs' ibv_post_send, ibv_post_recv, ibv_poll_cq and
 * ibv_req_notify_cq are inline calls through the context's ops table, so the
 * layer wraps the real entry points (ibv_open_device, ibv_create_qp,
 * ibv_reg_mr, ibv_query_gid, ... found with dlsym(RTLD_NEXT)) and replaces
 * those four ops of every context it opens with its own.
 *
 * Rules (one table, rules.h; by default sim/appleverbs/apple-rules.json, each
 * row with its source; a probe's file can replace it):
 *  - QP types other than the allowed (UC) fail to create (EOPNOTSUPP); so do
 *    ibv_create_qp_ex and SRQs;
 *  - per device, all processes together: the 11th QP fails (EBUSY), the
 *    101st MR fails (NULL, ENOMEM); ibv_query_device reports those limits;
 *  - one scatter/gather entry; SEND only (no WRITE, READ, atomics,
 *    immediates); no completion channel (ibv_create_comp_channel and
 *    ibv_req_notify_cq fail); RECVs only from RTS on;
 *  - a work request longer than 512 KiB, or than the QP's depth counts in
 *    4 KiB frames, fails; a SEND whose length differs from the RECV it lands
 *    in completes with IBV_WC_LOC_LEN_ERR and puts the QP in error (every
 *    later send: IBV_WC_WR_FLUSH_ERR);
 *  - GID table as Apple's: index 0 the link-local GID, index 1 the
 *    IPv4-mapped GID only while the device's interface has an IPv4 address
 *    (all zero otherwise); RTR with index 0 fails (ETIMEDOUT), with an unset
 *    GID EINVAL, with a path MTU above 1024 EINVAL. (The wire still uses
 *    soft-RoCE's link-local GIDs: rxe in one network namespace cannot route
 *    between its own IPv4 addresses, so RTR is given the real GIDs behind
 *    the IPv4-mapped ones the ranks exchanged.)
 * Delivery of a SEND for which the peer has no RECV posted:
 *  - apple (default, the rules' "held"): the layer holds it until the peer
 *    posts one (it posts the held SENDs, in order, from the sender's next
 *    ibv_post_send or ibv_poll_cq, or within a millisecond from a thread of
 *    its own, as hardware would); a dead or stopped peer raises nothing,
 *    the SEND just never completes;
 *  - uc-strict ("dropped"): soft-RoCE's own UC: the SEND leaves at once and
 *    is lost. The layer counts it (drops), so a protocol that sends without
 *    credit is seen even where the loss is not.
 * The receives a peer posted are in the shared table (state.h).
 *
 * Environment:
 *   MESHSIM_APPLE_VERBS   apple | uc-strict: the delivery mode (default: the
 *                         rules file's send_without_recv)
 *   MESHSIM_APPLE_RULES   the rules file (default: the build tree's copy of
 *                         sim/appleverbs/apple-rules.json, share/meshsim/)
 *   MESHSIM_APPLE_STATE   the shared table (default /dev/shm/meshsim-appleverbs)
 *   MESHSIM_APPLE_LOG     1: one line on stderr for every refusal
 *   MESHSIM_APPLE_LOSE    N: the Nth SEND that leaves on each QP is lost on
 *                         the cable (a fault for tests: its sender sees it
 *                         complete, the peer's RECV stays posted for the
 *                         next one; counted as lost)
 * A rules file that does not load, or a table that cannot be mapped, is
 * reported once on stderr and then no device opens (ibv_get_device_list
 * returns NULL, errno EINVAL): nothing runs silently without the rules.
 * meshsim-appleverbs-stat prints the table's counters (state.h, AV_STAT_MAP).
 *
 * Not simulated: asynchronous events pass through (nothing is known of
 * Apple's), and so do completions soft-RoCE fails itself.
 */
#ifndef MR_SIM_APPLEVERBS_H
#define MR_SIM_APPLEVERBS_H

#define AV_ENV_MODE "MESHSIM_APPLE_VERBS"
#define AV_ENV_RULES "MESHSIM_APPLE_RULES"
#define AV_ENV_STATE "MESHSIM_APPLE_STATE"
#define AV_ENV_LOG "MESHSIM_APPLE_LOG"
#define AV_ENV_LOSE "MESHSIM_APPLE_LOSE"

#endif
