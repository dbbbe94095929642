/*
 * choose.c - mesh? ring? RDMA? -> backend, as prepare_tb_hostfile() in MLX's
 * python/mlx/_distributed_utils/config.py, with messages that say what is
 * missing.
 */
#include "common/compat.h"

#include "common/buf.h"
#include "common/err.h"
#include "topo/topo.h"

static const char *const backend_names[] = {
	[MR_TOPO_BACKEND_AUTO] = "auto",
	[MR_TOPO_BACKEND_RING] = "ring",
	[MR_TOPO_BACKEND_JACCL] = "jaccl",
	[MR_TOPO_BACKEND_JACCL_RING] = "jaccl-ring",
};

const char *mr_topo_backend_name(enum mr_topo_backend b)
{
	if ((size_t)b < ARRAY_SIZE(backend_names))
		return backend_names[b];
	return "?";
}

int mr_topo_backend_parse(const char *s, enum mr_topo_backend *out)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(backend_names); i++)
		if (!strcmp(s, backend_names[i])) {
			*out = (enum mr_topo_backend)i;
			return 0;
		}
	return -1;
}

void mr_topo_choice_release(struct mr_topo_choice *ch)
{
	mr_topo_ring_release(&ch->ring);
	mr_strvec_release(&ch->no_rdma);
	mr_strvec_release(&ch->tb4);
	mr_strvec_release(&ch->notes);
	memset(ch, 0, sizeof(*ch));
}

static int join(struct mr_buf *b, const struct mr_strvec *v)
{
	for (size_t i = 0; i < v->nr; i++)
		if (mr_buf_printf(b, "%s%s", i ? ", " : "", v->v[i]) < 0)
			return -1;
	return 0;
}

/* Why RDMA is not possible, or "" (appended to b). */
static int rdma_reason(struct mr_buf *b, const struct mr_topo_choice *ch)
{
	if (ch->tb4.nr) {
		if (mr_buf_puts(b, "Thunderbolt 4 links (40 Gb/s) cannot do RDMA on ") < 0 ||
		    join(b, &ch->tb4) < 0 ||
		    mr_buf_puts(b, " (RDMA over Thunderbolt needs Thunderbolt 5 cables and ports; use ring)") < 0)
			return -1;
	}
	if (ch->no_rdma.nr) {
		if ((ch->tb4.nr && mr_buf_puts(b, "; ") < 0) ||
		    mr_buf_puts(b, "RDMA is not enabled on ") < 0 || join(b, &ch->no_rdma) < 0 ||
		    mr_buf_puts(b, " (ibv_devices lists no rdma_* device; enable RDMA in macOS recovery with `rdma_ctl enable`)") < 0)
			return -1;
	}
	return 0;
}

/* The hosts that keep RDMA off: a cable at 40 Gb/s or less (tb4), no RDMA device. */
static int rdma_blockers(const struct mr_topo_cluster *c, struct mr_topo_choice *ch)
{
	for (size_t i = 0; i < c->nhosts; i++) {
		const struct mr_topo_host *h = &c->hosts[i];
		bool slow = false;

		for (size_t k = 0; k < c->ncables; k++) {
			const struct mr_topo_cable *cb = &c->cables[k];

			if ((cb->host[0] == i || cb->host[1] == i) && cb->speed_gbps &&
			    cb->speed_gbps <= 40)
				slow = true;
		}
		if (slow && mr_strvec_push(&ch->tb4, h->name) < 0)
			return -1;
		if (!h->rdma_devs.nr && mr_strvec_push(&ch->no_rdma, h->name) < 0)
			return -1;
	}
	return 0;
}

/* "not a full mesh: m1 is not cabled to m3; m2 to m4" (every uncabled pair,
 * the first 8 named), so the user knows which cables to add. */
static int not_mesh_note(const struct mr_topo_cluster *c, size_t ma, size_t mb,
			 struct mr_strvec *notes)
{
	struct mr_buf b = MR_BUF_INIT;
	size_t more = 0, named = 1;
	int rc;

	mr_buf_printf(&b, "not a full mesh: %s is not cabled to %s", c->hosts[ma].name, c->hosts[mb].name);
	for (size_t i = 0; i < c->nhosts; i++)
		for (size_t j = i + 1; j < c->nhosts; j++) {
			if (mr_topo_conn(c, i, j) || (i == MR_MIN(ma, mb) && j == MR_MAX(ma, mb)))
				continue;
			if (named < 8) {
				mr_buf_printf(&b, "; %s to %s", c->hosts[i].name, c->hosts[j].name);
				named++;
			} else {
				more++;
			}
		}
	if (more)
		mr_buf_printf(&b, " (and %zu more pair%s)", more, more == 1 ? "" : "s");
	rc = b.p ? mr_strvec_push(notes, mr_buf_cstr(&b)) : -1;
	mr_buf_release(&b);
	return rc;
}

int mr_topo_choose(const struct mr_topo_cluster *c, enum mr_topo_backend want,
		   struct mr_topo_choice *out, struct meshrun_err *err)
{
	struct mr_topo_choice ch = { 0 };
	struct meshrun_err ring_err = MESHRUN_ERR_INIT;
	struct mr_buf why = MR_BUF_INIT, rdma_why = MR_BUF_INIT;
	size_t ma = 0, mb = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!c->finished)
		return mr_err_set(err, MESHRUN_E_INVAL, "cluster not finished");
	if (c->nhosts == 0)
		return mr_err_set(err, MESHRUN_E_INVAL, "no hosts");
	ch.mesh = mr_topo_is_mesh(c, &ma, &mb);
	rc = mr_topo_find_ring(c, 0, &ch.ring, &ring_err);
	if (rc == MESHRUN_E_NOMEM)
		goto out_nomem;
	ch.has_ring = rc == 0;
	rc = 0;

	if (rdma_blockers(c, &ch) < 0)
		goto out_nomem;
	ch.rdma = !ch.tb4.nr && !ch.no_rdma.nr;
	if (rdma_reason(&rdma_why, &ch) < 0)
		goto out_nomem;
	if (!ch.mesh && not_mesh_note(c, ma, mb, &ch.notes) < 0)
		goto out_nomem;
	if (!ch.has_ring && mr_strvec_push(&ch.notes, ring_err.msg) < 0)
		goto out_nomem;
	if (!ch.rdma && mr_strvec_push(&ch.notes, mr_buf_cstr(&rdma_why)) < 0)
		goto out_nomem;

	switch (want) {
	case MR_TOPO_BACKEND_AUTO:
		if (!ch.has_ring && !ch.mesh) {
			ch.missing = MR_TOPO_MISSING_CABLES;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"neither a Thunderbolt mesh nor a ring: %s is not cabled to %s; %s; run with --dot to see the cabling",
					c->hosts[ma].name, c->hosts[mb].name, ring_err.msg);
			goto out;
		}
		if (ch.rdma && ch.mesh)
			ch.backend = MR_TOPO_BACKEND_JACCL;
		else if (ch.rdma && ch.has_ring)
			ch.backend = MR_TOPO_BACKEND_JACCL_RING;
		else if (ch.has_ring)
			ch.backend = MR_TOPO_BACKEND_RING;
		else {
			ch.missing = MR_TOPO_MISSING_CABLES;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"RDMA is not available and no ring was found: %s; %s; run with --dot to see the cabling",
					mr_buf_cstr(&rdma_why), ring_err.msg);
			goto out;
		}
		break;
	case MR_TOPO_BACKEND_RING:
		if (!ch.has_ring) {
			ch.missing = MR_TOPO_MISSING_CABLES;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"backend ring: %s; run with --dot to see the cabling", ring_err.msg);
			goto out;
		}
		ch.backend = want;
		break;
	case MR_TOPO_BACKEND_JACCL:
		if (!ch.mesh) {
			ch.missing = MR_TOPO_MISSING_CABLES;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"backend jaccl needs a full mesh: %s is not cabled to %s; run with --dot to see the cabling",
					c->hosts[ma].name, c->hosts[mb].name);
			goto out;
		}
		if (!ch.rdma) {
			ch.missing = MR_TOPO_MISSING_RDMA;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "backend jaccl needs RDMA: %s",
					mr_buf_cstr(&rdma_why));
			goto out;
		}
		ch.backend = want;
		break;
	case MR_TOPO_BACKEND_JACCL_RING:
		if (!ch.has_ring) {
			ch.missing = MR_TOPO_MISSING_CABLES;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
					"backend jaccl-ring: %s; run with --dot to see the cabling",
					ring_err.msg);
			goto out;
		}
		if (!ch.rdma) {
			ch.missing = MR_TOPO_MISSING_RDMA;
			rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "backend jaccl-ring needs RDMA: %s",
					mr_buf_cstr(&rdma_why));
			goto out;
		}
		ch.backend = want;
		break;
	default:
		rc = mr_err_set(err, MESHRUN_E_INVAL, "unknown backend %d", (int)want);
		goto out;
	}
	*out = ch;
	memset(&ch, 0, sizeof(ch));
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	if (rc < 0)
		out->missing = ch.missing;
	mr_buf_release(&why);
	mr_buf_release(&rdma_why);
	mr_topo_choice_release(&ch);
	return rc;
}
