/*
 * rules.h - the table of Apple's RDMA rules that meshsim's verbs layer
 * (appleverbs.h) enforces on soft-RoCE: one row per rule, loaded from a JSON
 * file, so that what a probe measured on real Macs (meshrun-rdma-probe
 * --output, docs/guide-macs.md) replaces what the public evidence says
 * (sim/appleverbs/apple-rules.json, each row with its source).
 *
 * File format ("meshrun-rdma-rules/1"):
 *   { "format": "meshrun-rdma-rules/1",
 *     "rules": { "<rule>": { "value": V, "errno": "EBUSY",
 *                            "source": "...", "confidence": "high" }, ... },
 *     ... any other top-level keys (the probe's "observed" section) }
 * "value" is required in every row given; "errno" only where the rule names
 * one (a symbolic name, common/errname.h: Darwin and Linux number them
 * differently); "source" and "confidence" are for the reader. A rule the
 * file does not give keeps its default (the built-in table below, which
 * apple-rules.json repeats: the unit test keeps the two equal). An unknown rule, a wrong type or an unknown
 * errno name is an error naming the file and the row.
 *
 * No verbs types here (the table is unit tested where libibverbs is absent):
 * QP types and opcodes are this module's own bits, qp.c and ops.c map them.
 */
#ifndef MR_SIM_APPLEVERBS_RULES_H
#define MR_SIM_APPLEVERBS_RULES_H

#include "common/compat.h"
#include "meshrun/err.h"

#define AV_RULES_FORMAT "meshrun-rdma-rules/1"

/* QP types (bits of av_rules.qp_types). */
enum av_qpt { AV_QPT_RC, AV_QPT_UC, AV_QPT_UD, AV_QPT_OTHER, AV_QPT_COUNT };
/* Send opcodes (bits of av_rules.opcodes). */
enum av_op {
	AV_OP_SEND, AV_OP_SEND_IMM, AV_OP_WRITE, AV_OP_WRITE_IMM, AV_OP_READ, AV_OP_ATOMIC,
	AV_OP_OTHER, AV_OP_COUNT
};
/* What becomes of a SEND for which the peer has no RECV posted. */
enum av_delivery { AV_HELD, AV_DROPPED };
/* How a SEND's length must compare with the RECV it lands in. */
enum av_send_len { AV_LEN_EQUAL, AV_LEN_AT_MOST };

struct av_rules {
	unsigned qp_types;           /* bits (1u << AV_QPT_*) of the QP types that create */
	int qp_type_errno;
	int max_qp;                  /* per device, all processes together; 0: no limit */
	int max_qp_errno;
	int max_mr;                  /* per device, all processes together; 0: no limit */
	int max_mr_errno;
	int max_sge;
	int max_sge_errno;
	unsigned opcodes;            /* bits (1u << AV_OP_*) that post_send accepts */
	int opcode_errno;
	bool srq;
	int srq_errno;
	bool comp_channel;
	int comp_channel_errno;
	int gid_ipv4_index;          /* index of the IPv4-mapped GID (present only while the
				      * interface has an IPv4 address); index 0 is link-local */
	bool rtr_link_local;         /* RTR with the link-local GID (index 0) works */
	int rtr_link_local_errno;
	bool rtr_unset_gid;          /* RTR with an all-zero GID works (never seen) */
	int rtr_unset_gid_errno;
	int max_path_mtu;            /* bytes: 256 .. 4096 */
	int max_path_mtu_errno;
	bool post_recv_before_rts;
	int post_recv_before_rts_errno;
	int send_without_recv;       /* enum av_delivery */
	int send_length;             /* enum av_send_len */
	uint32_t max_msg_bytes;
	int max_msg_errno;
	uint32_t depth_frame_bytes;  /* a WR of L bytes needs QP depth >= L / this; 0: off */
	int depth_frame_errno;
};

/* The built-in table (the public evidence; apple-rules.json repeats it). */
void av_rules_default(struct av_rules *r);
/*
 * Parse a rules file's text over the defaults. name prefixes errors
 * ("rules.json: rules.max_qp_per_device.value: expected an integer ...").
 * MESHRUN_E_PARSE on any fault, r then unchanged.
 */
int av_rules_parse(const char *text, size_t len, const char *name, struct av_rules *r,
		   struct meshrun_err *err);
int av_rules_load(const char *path, struct av_rules *r, struct meshrun_err *err);

/* Names of the bits: "RC", "UC", "UD", "OTHER"; "SEND", "SEND_WITH_IMM", "RDMA_WRITE", ... */
const char *av_qpt_name(int t);
const char *av_op_name(int op);

#endif
