/*
 * rules.c - the Apple RDMA rules table: defaults and the JSON loader (rules.h).
 */
#include "common/compat.h"
#include "sim/appleverbs/rules.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/errname.h"
#include "common/fdio.h"
#include "common/json.h"

static const char *const qpt_names[AV_QPT_COUNT] = { "RC", "UC", "UD", "OTHER" };
static const char *const op_names[AV_OP_COUNT] = {
	"SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "RDMA_READ", "ATOMIC", "OTHER"
};

const char *av_qpt_name(int t)
{
	return t >= 0 && t < AV_QPT_COUNT ? qpt_names[t] : "?";
}

const char *av_op_name(int op)
{
	return op >= 0 && op < AV_OP_COUNT ? op_names[op] : "?";
}

void av_rules_default(struct av_rules *r)
{
	memset(r, 0, sizeof(*r));
	r->qp_types = 1u << AV_QPT_UC;
	r->qp_type_errno = EOPNOTSUPP;
	r->max_qp = 10;
	r->max_qp_errno = EBUSY;
	r->max_mr = 100;
	r->max_mr_errno = ENOMEM;
	r->max_sge = 1;
	r->max_sge_errno = EINVAL;
	r->opcodes = 1u << AV_OP_SEND;
	r->opcode_errno = EINVAL;
	r->srq = false;
	r->srq_errno = EOPNOTSUPP;
	r->comp_channel = false;
	r->comp_channel_errno = EOPNOTSUPP;
	r->gid_ipv4_index = 1;
	r->rtr_link_local = false;
	r->rtr_link_local_errno = ETIMEDOUT;
	r->rtr_unset_gid = false;
	r->rtr_unset_gid_errno = EINVAL;
	r->max_path_mtu = 1024;
	r->max_path_mtu_errno = EINVAL;
	r->post_recv_before_rts = false;
	r->post_recv_before_rts_errno = EINVAL;
	r->send_without_recv = AV_HELD;
	r->send_length = AV_LEN_EQUAL;
	r->max_msg_bytes = 512u * 1024u;
	r->max_msg_errno = EINVAL;
	r->depth_frame_bytes = 4096;
	r->depth_frame_errno = EINVAL;
}

/* ---------------------------------------------------------------- loader */

enum kind { K_INT, K_BOOL, K_QPTS, K_OPS, K_DELIVERY, K_SENDLEN };

#define NO_ERRNO ((size_t)-1)
#define AV_OFF(f) offsetof(struct av_rules, f)

static const struct row {
	const char *key;
	enum kind kind;
	size_t off;       /* of the value */
	size_t eoff;      /* of the errno, NO_ERRNO when the rule has none */
	long long min, max;
} rows[] = {
	{ "qp_types", K_QPTS, AV_OFF(qp_types), AV_OFF(qp_type_errno), 0, 0 },
	{ "max_qp_per_device", K_INT, AV_OFF(max_qp), AV_OFF(max_qp_errno), 0, 1 << 20 },
	{ "max_mr_per_device", K_INT, AV_OFF(max_mr), AV_OFF(max_mr_errno), 0, 1 << 20 },
	{ "max_sge", K_INT, AV_OFF(max_sge), AV_OFF(max_sge_errno), 1, 64 },
	{ "opcodes", K_OPS, AV_OFF(opcodes), AV_OFF(opcode_errno), 0, 0 },
	{ "srq", K_BOOL, AV_OFF(srq), AV_OFF(srq_errno), 0, 0 },
	{ "comp_channel", K_BOOL, AV_OFF(comp_channel), AV_OFF(comp_channel_errno), 0, 0 },
	{ "gid_ipv4_index", K_INT, AV_OFF(gid_ipv4_index), NO_ERRNO, 1, 255 },
	{ "rtr_link_local_gid", K_BOOL, AV_OFF(rtr_link_local), AV_OFF(rtr_link_local_errno), 0, 0 },
	{ "rtr_unset_gid", K_BOOL, AV_OFF(rtr_unset_gid), AV_OFF(rtr_unset_gid_errno), 0, 0 },
	{ "max_path_mtu", K_INT, AV_OFF(max_path_mtu), AV_OFF(max_path_mtu_errno), 256, 4096 },
	{ "post_recv_before_rts", K_BOOL, AV_OFF(post_recv_before_rts), AV_OFF(post_recv_before_rts_errno), 0, 0 },
	{ "send_without_recv", K_DELIVERY, AV_OFF(send_without_recv), NO_ERRNO, 0, 0 },
	{ "send_length", K_SENDLEN, AV_OFF(send_length), NO_ERRNO, 0, 0 },
	{ "max_msg_bytes", K_INT, AV_OFF(max_msg_bytes), AV_OFF(max_msg_errno), 1, 1ll << 31 },
	{ "depth_frame_bytes", K_INT, AV_OFF(depth_frame_bytes), AV_OFF(depth_frame_errno), 0, 1 << 24 },
};

/* A list of names, each one of names[0..n-1]: the bits. */
static int parse_names(const cJSON *v, const char *const *names, int n, const char *fname,
		       struct mr_json_path *p, unsigned *out, struct meshrun_err *err)
{
	unsigned bits = 0;
	int i = 0, rc = mr_json_want_array(v, fname, p, err);
	const cJSON *it;

	if (rc < 0)
		return rc;
	cJSON_ArrayForEach(it, v) {
		const char *s;
		int k;
		mr_json_path_index(p, (size_t)i++);
		rc = mr_json_want_string(it, fname, p, &s, err);
		for (k = 0; rc == 0 && k < n && strcmp(s, names[k]) != 0; k++)
			;
		if (rc == 0 && k == n)
			rc = mr_json_err(err, fname, p, "unknown name '%s'", s);
		mr_json_path_pop(p);
		if (rc < 0)
			return rc;
		bits |= 1u << k;
	}
	*out = bits;
	return 0;
}

static int parse_choice(const cJSON *v, const char *a, const char *b, const char *fname,
			struct mr_json_path *p, int *out, struct meshrun_err *err)
{
	const char *s;
	int rc = mr_json_want_string(v, fname, p, &s, err);

	if (rc < 0)
		return rc;
	if (strcmp(s, a) == 0)
		*out = 0;
	else if (strcmp(s, b) == 0)
		*out = 1;
	else
		return mr_json_err(err, fname, p, "expected \"%s\" or \"%s\", got \"%s\"", a, b, s);
	return 0;
}

static int parse_row(const struct row *w, const cJSON *obj, const char *fname,
		     struct mr_json_path *p, struct av_rules *r, struct meshrun_err *err)
{
	char *base = (char *)r;
	const cJSON *v = mr_json_member(obj, "value"), *e = mr_json_member(obj, "errno");
	long long n;
	int rc = mr_json_want_object(obj, fname, p, err);

	if (rc < 0)
		return rc;
	if (!v)
		return mr_json_missing(err, fname, p, "value");
	mr_json_path_key(p, "value");
	switch (w->kind) {
	case K_INT:
		rc = mr_json_want_int(v, fname, p, w->min, w->max, &n, err);
		if (rc == 0 && w->off == AV_OFF(max_msg_bytes))
			r->max_msg_bytes = (uint32_t)n;
		else if (rc == 0 && w->off == AV_OFF(depth_frame_bytes))
			r->depth_frame_bytes = (uint32_t)n;
		else if (rc == 0)
			*(int *)(base + w->off) = (int)n;
		break;
	case K_BOOL:
		if (!cJSON_IsBool(v))
			rc = mr_json_err(err, fname, p, "expected true or false, got %s", mr_json_type_name(v));
		else
			*(bool *)(base + w->off) = cJSON_IsTrue(v);
		break;
	case K_QPTS:
		rc = parse_names(v, qpt_names, AV_QPT_COUNT, fname, p, (unsigned *)(base + w->off), err);
		break;
	case K_OPS:
		rc = parse_names(v, op_names, AV_OP_COUNT, fname, p, (unsigned *)(base + w->off), err);
		break;
	case K_DELIVERY:
		rc = parse_choice(v, "held", "dropped", fname, p, (int *)(base + w->off), err);
		break;
	case K_SENDLEN:
		rc = parse_choice(v, "equal", "at_most", fname, p, (int *)(base + w->off), err);
		break;
	}
	mr_json_path_pop(p);
	if (rc < 0 || !e)
		return rc;
	mr_json_path_key(p, "errno");
	if (w->eoff == NO_ERRNO) {
		rc = mr_json_err(err, fname, p, "this rule has no errno");
	} else {
		const char *s;
		rc = mr_json_want_string(e, fname, p, &s, err);
		int en = rc == 0 ? mr_errno_from_name(s) : 0;
		if (rc == 0 && en < 0)
			rc = mr_json_err(err, fname, p, "unknown errno name '%s' (e.g. \"EBUSY\")", s);
		else if (rc == 0)
			*(int *)(base + w->eoff) = en;
	}
	mr_json_path_pop(p);
	return rc;
}

int av_rules_parse(const char *text, size_t len, const char *name, struct av_rules *r,
		   struct meshrun_err *err)
{
	struct mr_json_path p = MR_JSON_PATH_INIT;
	struct av_rules t = *r;
	cJSON *root = NULL;
	const cJSON *fmt, *rules, *it;
	const char *s;
	int rc = mr_json_parse(text, len, name, &root, err);

	if (rc < 0)
		return rc;
	rc = mr_json_want_object(root, name, &p, err);
	if (rc < 0)
		goto out;
	fmt = mr_json_member(root, "format");
	mr_json_path_key(&p, "format");
	rc = fmt ? mr_json_want_string(fmt, name, &p, &s, err) : mr_json_missing(err, name, &p, "format");
	if (rc == 0 && strcmp(s, AV_RULES_FORMAT) != 0)
		rc = mr_json_err(err, name, &p, "expected \"%s\", got \"%s\"", AV_RULES_FORMAT, s);
	mr_json_path_pop(&p);
	if (rc < 0)
		goto out;
	rules = mr_json_member(root, "rules");
	if (!rules) {
		rc = mr_json_missing(err, name, &p, "rules");
		goto out;
	}
	mr_json_path_key(&p, "rules");
	rc = mr_json_want_object(rules, name, &p, err);
	cJSON_ArrayForEach(it, rules) {
		size_t i;
		if (rc < 0)
			break;
		for (i = 0; i < ARRAY_SIZE(rows) && strcmp(rows[i].key, it->string) != 0; i++)
			;
		mr_json_path_key(&p, it->string);
		if (i == ARRAY_SIZE(rows))
			rc = mr_json_err(err, name, &p, "unknown rule (see sim/appleverbs/rules.h)");
		else
			rc = parse_row(&rows[i], it, name, &p, &t, err);
		mr_json_path_pop(&p);
	}
	if (rc == 0)
		*r = t;
out:
	cJSON_Delete(root);
	return rc;
}

int av_rules_load(const char *path, struct av_rules *r, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	int rc = mr_read_file(path, 1u << 20, &b, err);

	if (rc == 0)
		rc = av_rules_parse(mr_buf_cstr(&b), b.len, path, r, err);
	mr_buf_release(&b);
	return rc;
}
