/*
 * hfile.c - the hostfile for the chosen backend, as MLX writes it:
 * configure_ring(), configure_jaccl() and
 * configure_jaccl_ring() in python/mlx/_distributed_utils/config.py (0.32).
 */
#include "common/compat.h"

#include "common/err.h"
#include "topo/topo.h"

/* A cell holding the first `count` cables from i to j ("rdma_<if>"); one device
 * as a string, several as a list (MLX: rdma[0] if len(rdma) == 1 else rdma). */
static int set_cell(struct mr_rdma_cell *cell, const struct mr_topo_plan *p, size_t i, size_t j,
		    size_t count)
{
	for (size_t k = 0; k < count; k++)
		if (mr_strvec_pushf(&cell->devs, "rdma_%s", mr_topo_plan_if(p, i, j, k)) < 0)
			return -1;
	cell->kind = count == 1 ? MR_RDMA_ONE : count ? MR_RDMA_LIST : MR_RDMA_NULL;
	return 0;
}

static int copy_ips(struct mr_host *h, const struct mr_strvec *ips)
{
	for (size_t k = 0; ips && k < ips->nr; k++)
		if (mr_strvec_push(&h->ips, ips->v[k]) < 0)
			return -1;
	return 0;
}

/* The jaccl backends' row for cluster host `node`: its ips (host_ips[node] if
 * given) and an all-null rdma row of one cell per host, for the caller to fill. */
static int add_rdma_host(struct mr_hostfile *hf, const struct mr_topo_cluster *c, size_t node,
			 const struct mr_strvec *host_ips, struct mr_host **out,
			 struct meshrun_err *err)
{
	int hi = mr_hostfile_add_host(hf, c->hosts[node].name, err);
	struct mr_host *h;

	if (hi < 0)
		return hi;
	h = &hf->hosts[hi];
	h->has_rdma = true;
	if (copy_ips(h, host_ips ? &host_ips[node] : NULL) < 0)
		goto nomem;
	h->rdma = calloc(c->nhosts, sizeof(*h->rdma));
	if (!h->rdma)
		goto nomem;
	h->nrdma = c->nhosts;
	*out = h;
	return 0;
nomem:
	return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
}

/*
 * On a full mesh, meshrun's "mesh_ips" rows (MLX's tools ignore the key): cell
 * b of host a lists a's addresses on every planned cable to b, so the mesh
 * backend can use each cable. Hosts are in the hostfile's order (ring order
 * for ring and jaccl-ring). Nothing is added where a pair has no cable.
 */
static int add_mesh_ips(struct mr_hostfile *hf, const struct mr_topo_plan *p,
			const struct mr_topo_choice *ch, size_t n)
{
	bool ring_order = ch->backend == MR_TOPO_BACKEND_RING || ch->backend == MR_TOPO_BACKEND_JACCL_RING;

	for (size_t a = 0; a < n; a++)
		for (size_t b = 0; b < n; b++) {
			size_t na = ring_order ? ch->ring.order[a] : a, nb = ring_order ? ch->ring.order[b] : b;
			if (a != b && !mr_topo_plan_count(p, na, nb))
				return 0;
		}
	for (size_t a = 0; a < n; a++) {
		struct mr_host *h = &hf->hosts[a];
		size_t na = ring_order ? ch->ring.order[a] : a;
		h->mesh = calloc(n, sizeof(*h->mesh));
		if (!h->mesh)
			return -1;
		h->nmesh = n;
		h->has_mesh = true;
		for (size_t b = 0; b < n; b++) {
			size_t nb = ring_order ? ch->ring.order[b] : b;
			if (a == b)
				continue;
			h->mesh[b].kind = MR_RDMA_LIST;
			for (size_t k = 0; k < mr_topo_plan_count(p, na, nb); k++)
				if (mr_strvec_push(&h->mesh[b].devs, mr_topo_plan_ip(p, na, nb, k)) < 0)
					return -1;
		}
	}
	return 0;
}

int mr_topo_hostfile(const struct mr_topo_cluster *c, const struct mr_topo_plan *p,
		     const struct mr_topo_choice *ch, const struct mr_strvec *host_ips,
		     const struct mr_strvec *envs, struct mr_hostfile **out,
		     struct meshrun_err *err)
{
	struct mr_hostfile *hf = mr_hostfile_new();
	const struct mr_topo_ring *r = &ch->ring;
	size_t n = c->nhosts;
	int rc = 0;

	*out = NULL;
	if (!hf)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	hf->object_form = true;
	hf->backend = strdup(mr_topo_backend_name(ch->backend));
	if (!hf->backend)
		goto out_nomem;
	for (size_t k = 0; envs && k < envs->nr; k++)
		if (mr_strvec_push(&hf->envs, envs->v[k]) < 0)
			goto out_nomem;
	if (p->nhosts != n) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "plan and cluster disagree");
		goto out;
	}
	if ((ch->backend == MR_TOPO_BACKEND_RING || ch->backend == MR_TOPO_BACKEND_JACCL_RING) &&
	    r->n != n) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "backend %s needs a ring through all hosts",
				mr_topo_backend_name(ch->backend));
		goto out;
	}

	switch (ch->backend) {
	case MR_TOPO_BACKEND_RING:
		for (size_t pos = 0; pos < n; pos++) {
			size_t node = r->order[pos], left = r->order[(pos + n - 1) % n];
			int hi = mr_hostfile_add_host(hf, c->hosts[node].name, err);

			if (hi < 0) {
				rc = hi;
				goto out;
			}
			hf->hosts[hi].has_rdma = true;
			for (size_t k = 0; k < r->cables; k++)
				if (mr_strvec_push(&hf->hosts[hi].ips, mr_topo_plan_ip(p, node, left, k)) < 0)
					goto out_nomem;
		}
		break;
	case MR_TOPO_BACKEND_JACCL:
		for (size_t i = 0; i < n; i++) {
			struct mr_host *h;

			rc = add_rdma_host(hf, c, i, host_ips, &h, err);
			if (rc < 0)
				goto out;
			for (size_t j = 0; j < n; j++) {
				if (j == i)
					continue;
				if (!mr_topo_plan_count(p, i, j)) {
					rc = mr_err_set(err, MESHRUN_E_INVAL,
							"backend jaccl: %s has no cable to %s",
							c->hosts[i].name, c->hosts[j].name);
					goto out;
				}
				if (set_cell(&h->rdma[j], p, i, j, 1) < 0)
					goto out_nomem;
			}
		}
		break;
	case MR_TOPO_BACKEND_JACCL_RING:
		for (size_t pos = 0; pos < n; pos++) {
			size_t node = r->order[pos];
			size_t left = r->order[(pos + n - 1) % n], right = r->order[(pos + 1) % n];
			struct mr_host *h;

			rc = add_rdma_host(hf, c, node, host_ips, &h, err);
			if (rc < 0)
				goto out;
			/* columns in ring order; the two neighbours get the ring's width,
			 * every other cell is null even where a cable exists, as MLX 0.32's
			 * configure_jaccl_ring (hostfiles must be interchangeable) */
			for (size_t col = 0; col < n; col++) {
				size_t other = r->order[col];
				size_t have = other == node ? 0 : mr_topo_plan_count(p, node, other);
				size_t width = (other == left || other == right) ? r->cables : 0;

				if (set_cell(&h->rdma[col], p, node, other, MR_MIN(width, have)) < 0)
					goto out_nomem;
			}
		}
		break;
	default:
		rc = mr_err_set(err, MESHRUN_E_INVAL, "no backend chosen");
		goto out;
	}
	if (ch->mesh && add_mesh_ips(hf, p, ch, n) < 0)
		goto out_nomem;
	*out = hf;
	hf = NULL;
	goto out;
out_nomem:
	rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
out:
	mr_hostfile_free(hf);
	return rc;
}
