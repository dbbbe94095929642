/*
 * launch/env.c - meshrun's side of the environment contract (the writer; not
 * coll/env.c, libmeshrun's reader): each backend's variables and files for the
 * ranks (launch/env.h) and the tables of docs/contracts.md from
 * common/envmap.h. mpirun's hostfile and command line are extern.c's.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "launch/env.h"
#include "common/err.h"
#include "common/json.h"
#include "common/shquote.h"

static const char *const backend_names[] = {
	[MR_BACKEND_RING] = "ring",
	[MR_BACKEND_JACCL] = "jaccl",
	[MR_BACKEND_JACCL_RING] = "jaccl-ring",
	[MR_BACKEND_MESH] = "mesh",
	[MR_BACKEND_NCCL] = "nccl",
	[MR_BACKEND_MPI] = "mpi",
};

int mr_backend_parse(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(backend_names); i++)
		if (name && !strcmp(name, backend_names[i]))
			return (int)i;
	return -1;
}

const char *mr_backend_name(enum mr_backend b)
{
	if ((size_t)b < ARRAY_SIZE(backend_names))
		return backend_names[b];
	return "?";
}

static int nomem(struct meshrun_err *err)
{
	return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
}

int mr_launch_env_add(struct mr_strvec *env, const char *kv, const char *where,
		      struct meshrun_err *err)
{
	const char *eq = strchr(kv, '=');
	size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
	char *name = strndup(kv, n);
	int rc = 0;

	if (!name)
		return nomem(err);
	/* MLX warns and drops such names; a typo in a variable should not pass silently. */
	if (!mr_is_env_name(name))
		rc = mr_err_set(err, MESHRUN_E_USAGE,
				"%s '%s': invalid variable name '%s' (letters, digits, '_'; not starting with a digit)",
				where, kv, name);
	else if (mr_strvec_setenv(env, name, eq ? eq + 1 : "") < 0)
		rc = nomem(err);
	free(name);
	return rc;
}

/* A per-job variable of meshrun's (envmap.h: meshrun sets it), never passed on. */
static bool set_per_job(const char *name, size_t n)
{
	static const struct {
		const char *name, *set_by;
	} vars[] = {
#define ENV_SET_BY(name, set_by, read_by, value, meaning) { #name, set_by },
		MESHRUN_ENV_MAP(ENV_SET_BY)
#undef ENV_SET_BY
	};

	for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
		if (*vars[i].set_by && strlen(vars[i].name) == n && !strncmp(vars[i].name, name, n))
			return true;
	return false;
}

bool mr_launch_env_inherited(const char *kv)
{
	const char *eq = strchr(kv, '=');
	char name[128];

	if (!eq || strncmp(kv, "MESHRUN_", 8) || (size_t)(eq - kv) >= sizeof(name))
		return false;
	memcpy(name, kv, (size_t)(eq - kv));
	name[eq - kv] = '\0';
	/* a name no shell could export is none of ours: skipped, not an error */
	return mr_is_env_name(name) && !set_per_job(kv, (size_t)(eq - kv));
}

int mr_launch_env_inherit(char *const *environ_, struct mr_strvec *env, struct meshrun_err *err)
{
	for (size_t i = 0; environ_ && environ_[i]; i++) {
		int rc;

		if (!mr_launch_env_inherited(environ_[i]))
			continue;
		if ((rc = mr_launch_env_add(env, environ_[i], "meshrun's environment", err)) < 0)
			return rc;
	}
	return 0;
}

static const char *host_ip0(const struct mr_host *h)
{
	return h->ips.nr ? h->ips.v[0] : NULL;
}

int mr_launch_ring_json(const struct mr_hostfile *hf, int starting_port, int conns,
			struct mr_buf *out, struct meshrun_err *err)
{
	long port = starting_port;

	if (conns < 1)
		return mr_err_set(err, MESHRUN_E_USAGE, "--connections-per-ip %d: must be at least 1",
				  conns);
	for (size_t i = 0; i < hf->nhosts; i++)
		if (!hf->hosts[i].ips.nr)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "ring backend needs IP addresses: host '%s' (hosts[%zu]) has no 'ips'",
					  hf->hosts[i].ssh, i);
	if (hf->nhosts < 2)
		return 0; /* MLX: a single rank gets an empty hostfile */
	if (mr_buf_putc(out, '[') < 0)
		return nomem(err);
	for (size_t i = 0; i < hf->nhosts; i++) {
		const struct mr_host *h = &hf->hosts[i];
		bool first = true;

		if (mr_buf_puts(out, i ? ", [" : "[") < 0)
			return nomem(err);
		for (size_t j = 0; j < h->ips.nr; j++) {
			for (int c = 0; c < conns; c++, port++) {
				char ep[128];

				if (port > 65535)
					return mr_err_set(err, MESHRUN_E_USAGE,
							  "ring ports run past 65535 at host '%s' (hosts[%zu]); lower --starting-port",
							  h->ssh, i);
				snprintf(ep, sizeof(ep), "%s:%ld", h->ips.v[j], port);
				if ((!first && mr_buf_puts(out, ", ") < 0))
					return nomem(err);
				first = false;
				if (mr_json_quote(out, ep) < 0)
					return mr_err_set(err, MESHRUN_E_USAGE,
							  "host '%s' (hosts[%zu]): ips[%zu]: not valid UTF-8",
							  h->ssh, i, j);
			}
		}
		if (mr_buf_putc(out, ']') < 0)
			return nomem(err);
	}
	if (mr_buf_putc(out, ']') < 0)
		return nomem(err);
	return 0;
}

void mr_launch_topo_of(const struct mr_hostfile *hf, struct mr_launch_topo *t)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < hf->nhosts; i++)
		t->any_rdma |= hf->hosts[i].nrdma > 0;
	t->full_mesh = mr_hostfile_check_mesh(hf, &t->mesh_err) == 0 && hf->nhosts > 1;
	t->rdma_mesh = mr_hostfile_check_rdma(hf, true, &t->rdma_mesh_err) == 0;
	t->rdma_ring = mr_hostfile_check_rdma(hf, false, &t->rdma_ring_err) == 0;
}

/* A topology check's failure (its messages begin "malformed hostfile: " and
 * name host and column) as the usage error it is for the job. */
static int topo_fail(struct meshrun_err *err, const struct meshrun_err *why)
{
	mr_err_set(err, why->code, "%s", why->msg);
	if (err)
		err->code = MESHRUN_E_USAGE;
	return MESHRUN_E_USAGE;
}

/* mr_launch_mesh_json's matrix, for a hostfile known to be a full mesh. */
static int mesh_rows_json(const struct mr_hostfile *hf, int starting_port, struct mr_buf *out,
			  struct meshrun_err *err)
{
	if (starting_port + (long)hf->nhosts - 1 > 65535)
		return mr_err_set(err, MESHRUN_E_USAGE, "mesh ports run past 65535 (%zu ranks from --starting-port %d)", hf->nhosts, starting_port);
	if (mr_buf_putc(out, '[') < 0)
		return nomem(err);
	for (size_t i = 0; i < hf->nhosts; i++) {
		const struct mr_host *h = &hf->hosts[i];
		if (mr_buf_puts(out, i ? ", [" : "[") < 0)
			return nomem(err);
		for (size_t j = 0; j < hf->nhosts; j++) {
			const struct mr_rdma_cell *c = &h->mesh[j];
			if (j && mr_buf_puts(out, ", ") < 0)
				return nomem(err);
			if (j == i) {
				if (mr_buf_puts(out, "null") < 0)
					return nomem(err);
				continue;
			}
			if (mr_buf_putc(out, '[') < 0)
				return nomem(err);
			for (size_t k = 0; k < c->devs.nr; k++) {
				char ep[160];
				/* IPv6: "[addr]:port" (coll/env.c's form) */
				snprintf(ep, sizeof(ep), strchr(c->devs.v[k], ':') ? "[%s]:%ld" : "%s:%ld", c->devs.v[k], (long)starting_port + (long)i);
				if ((k && mr_buf_puts(out, ", ") < 0))
					return nomem(err);
				if (mr_json_quote(out, ep) < 0)
					return mr_err_set(err, MESHRUN_E_USAGE, "host '%s' (hosts[%zu]): mesh_ips[%zu][%zu]: not valid UTF-8", h->ssh, i, j, k);
			}
			if (mr_buf_putc(out, ']') < 0)
				return nomem(err);
		}
		if (mr_buf_putc(out, ']') < 0)
			return nomem(err);
	}
	if (mr_buf_putc(out, ']') < 0)
		return nomem(err);
	return 0;
}

int mr_launch_mesh_json(const struct mr_hostfile *hf, int starting_port, struct mr_buf *out,
			struct meshrun_err *err)
{
	struct meshrun_err why = MESHRUN_ERR_INIT;

	if (mr_hostfile_check_mesh(hf, &why) < 0)
		return topo_fail(err, &why);
	return mesh_rows_json(hf, starting_port, out, err);
}

static int rdma_cell_json(struct mr_buf *out, const struct mr_rdma_cell *c)
{
	switch (c->kind) {
	case MR_RDMA_NULL:
		return mr_buf_puts(out, "null");
	case MR_RDMA_ONE:
		return mr_json_quote(out, c->devs.nr ? c->devs.v[0] : "");
	case MR_RDMA_LIST:
		if (mr_buf_putc(out, '[') < 0)
			return -1;
		for (size_t k = 0; k < c->devs.nr; k++) {
			if ((k && mr_buf_puts(out, ", ") < 0) || mr_json_quote(out, c->devs.v[k]) < 0)
				return -1;
		}
		return mr_buf_putc(out, ']');
	}
	return -1;
}

int mr_launch_rdma_json(const struct mr_hostfile *hf, struct mr_buf *out,
			struct meshrun_err *err)
{
	if (mr_buf_putc(out, '[') < 0)
		return nomem(err);
	for (size_t i = 0; i < hf->nhosts; i++) {
		const struct mr_host *h = &hf->hosts[i];

		if (mr_buf_puts(out, i ? ", [" : "[") < 0)
			return nomem(err);
		for (size_t j = 0; j < h->nrdma; j++) {
			if ((j && mr_buf_puts(out, ", ") < 0) || rdma_cell_json(out, &h->rdma[j]) < 0)
				return mr_err_set(err, MESHRUN_E_USAGE,
						  "host '%s' (hosts[%zu]): rdma[%zu]: cannot encode",
						  h->ssh, i, j);
		}
		if (mr_buf_putc(out, ']') < 0)
			return nomem(err);
	}
	if (mr_buf_putc(out, ']') < 0)
		return nomem(err);
	return 0;
}

static int add_file(struct mr_launch_env *e, const char *var, const char *name,
		    struct mr_buf *content, struct meshrun_err *err)
{
	struct mr_launch_file *f = &e->files[e->nfiles];

	if (e->nfiles >= MR_LAUNCH_MAX_FILES)
		return mr_err_set(err, MESHRUN_E_INVAL, "too many job files");
	/* MLX writes the file with `echo CONTENT > file`: a newline follows. */
	if (mr_buf_putc(content, '\n') < 0)
		return nomem(err);
	f->var = strdup(var);
	f->name = strdup(name);
	f->content = strdup(mr_buf_cstr(content));
	e->nfiles++;
	if (!f->var || !f->name || !f->content)
		return nomem(err);
	return 0;
}

static int need_rank0_ip(const struct mr_hostfile *hf, const char *backend,
			 struct meshrun_err *err)
{
	if (hf->nhosts && host_ip0(&hf->hosts[0]))
		return 0;
	return mr_err_set(err, MESHRUN_E_USAGE,
			  "%s backend: rank 0 needs an IP reachable from all other ranks: host '%s' (hosts[0]) has no 'ips'",
			  backend, hf->nhosts ? hf->hosts[0].ssh : "?");
}

/* Does env (the user's "K=V" list) set name? */
static bool user_sets(const struct mr_strvec *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; env && i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return true;
	return false;
}

/*
 * --mpi-impl meshrun: libmeshrun-mpi's MPI_Init runs libmeshrun's
 * MESHRUN_BACKEND_ANY, which takes the first backend whose variables are
 * present (mesh, ring, mpi, jaccl), so the variables set say which one runs:
 *   jaccl   the hostfile's rdma matrix is complete (a mesh; else a ring, with
 *           JACCL_RING=1) and rank 0 has an IP: JACCL_COORDINATOR and
 *           JACCL_IBV_DEVICES, no ring file (it would win);
 *   mesh    every host has "mesh_ips" of a full mesh: MESHRUN_MESH_HOSTFILE,
 *           and the ring's file as for --backend mesh;
 *   ring    otherwise: MESHRUN_HOSTFILE only.
 * Never MLX's own names (MLX_HOSTFILE, MLX_IBV_DEVICES, ...): MLX's init("any")
 * tries its ring before mpi, and libmeshrun reads the JACCL_* and MESHRUN_*
 * names first.
 */
static int build_shim(const struct mr_hostfile *hf, const struct mr_launch_topo *t,
		      const struct mr_launch_env_opts *o, struct mr_launch_env *e, struct mr_buf *b,
		      struct meshrun_err *err)
{
	char val[160];
	int rc;

	if (hf->nhosts > 1 && host_ip0(&hf->hosts[0])) {
		bool mesh = t->rdma_mesh;
		if (mesh || t->rdma_ring) {
			snprintf(val, sizeof(val), "%s:%d", host_ip0(&hf->hosts[0]), o->starting_port);
			if (mr_strvec_setenv(&e->common, MR_ENV(JACCL_COORDINATOR), val) < 0 ||
			    (!mesh && mr_strvec_setenv(&e->common, MR_ENV(JACCL_RING), "1") < 0))
				return nomem(err);
			if ((rc = mr_launch_rdma_json(hf, b, err)) < 0)
				return rc;
			return add_file(e, MR_ENV(JACCL_IBV_DEVICES), "ibv_devices.json", b, err);
		}
	}
	if (t->full_mesh) {
		if ((rc = mesh_rows_json(hf, o->starting_port, b, err)) < 0 ||
		    (rc = add_file(e, MR_ENV(MESHRUN_MESH_HOSTFILE), "mesh.json", b, err)) < 0)
			return rc;
		mr_buf_reset(b);
	}
	if ((rc = mr_launch_ring_json(hf, o->starting_port, o->connections_per_ip, b, err)) < 0)
		return rc;
	if (o->verbose && mr_strvec_setenv(&e->common, MR_ENV(MLX_RING_VERBOSE), "1") < 0)
		return nomem(err);
	return add_file(e, MR_ENV(MESHRUN_HOSTFILE), "hostfile.json", b, err);
}

static int build_backend(const struct mr_hostfile *hf, const struct mr_launch_topo *t,
			 const struct mr_launch_env_opts *o, struct mr_launch_env *e,
			 struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	char val[160];
	int rc = 0;

	switch (o->backend) {
	case MR_BACKEND_MESH:
		if (hf->nhosts > 1) {
			if (!t->full_mesh) {
				rc = topo_fail(err, &t->mesh_err);
				break;
			}
			if ((rc = mesh_rows_json(hf, o->starting_port, &b, err)) < 0)
				break;
			if ((rc = add_file(e, MR_ENV(MESHRUN_MESH_HOSTFILE), "mesh.json", &b, err)) < 0)
				break;
			mr_buf_reset(&b);
		}
		/* the ring's hostfile too, for programs that only know the ring */
		/* fall through */
	case MR_BACKEND_RING:
		if ((rc = mr_launch_ring_json(hf, o->starting_port, o->connections_per_ip, &b, err)) < 0)
			break;
		if (o->verbose && mr_strvec_setenv(&e->common, MR_ENV(MLX_RING_VERBOSE), "1") < 0) {
			rc = nomem(err);
			break;
		}
		rc = add_file(e, MR_ENV(MLX_HOSTFILE), "hostfile.json", &b, err);
		break;
	case MR_BACKEND_JACCL:
	case MR_BACKEND_JACCL_RING: {
		bool ring = o->backend == MR_BACKEND_JACCL_RING;

		if ((rc = need_rank0_ip(hf, mr_backend_name(o->backend), err)) < 0)
			break;
		if (!(ring ? t->rdma_ring : t->rdma_mesh)) {
			rc = topo_fail(err, ring ? &t->rdma_ring_err : &t->rdma_mesh_err);
			break;
		}
		snprintf(val, sizeof(val), "%s:%d", host_ip0(&hf->hosts[0]), o->starting_port);
		if (mr_strvec_setenv(&e->common, MR_ENV(MLX_JACCL_COORDINATOR), val) < 0 ||
		    (ring && mr_strvec_setenv(&e->common, MR_ENV(MLX_JACCL_RING), "1") < 0)) {
			rc = nomem(err);
			break;
		}
		if ((rc = mr_launch_rdma_json(hf, &b, err)) < 0)
			break;
		rc = add_file(e, MR_ENV(MLX_IBV_DEVICES), "ibv_devices.json", &b, err);
		break;
	}
	case MR_BACKEND_NCCL:
		if ((rc = need_rank0_ip(hf, "nccl", err)) < 0)
			break;
		snprintf(val, sizeof(val), "%d", o->nccl_port);
		if ((o->verbose && mr_strvec_setenv(&e->common, MR_ENV(NCCL_DEBUG), "INFO") < 0) ||
		    mr_strvec_setenv(&e->common, MR_ENV(NCCL_HOST_IP), host_ip0(&hf->hosts[0])) < 0 ||
		    mr_strvec_setenv(&e->common, MR_ENV(NCCL_PORT), val) < 0 ||
		    mr_strvec_pushf(&e->common, "%s=%zu", MR_ENV(MLX_WORLD_SIZE), hf->nhosts) < 0) {
			rc = nomem(err);
			break;
		}
		for (size_t r = 0; r < hf->nhosts; r++)
			if (mr_strvec_pushf(&e->per_rank[r], "%s=%zu", MR_ENV(CUDA_VISIBLE_DEVICES),
					    r % (size_t)(o->repeat > 0 ? o->repeat : 1)) < 0) {
				rc = nomem(err);
				break;
			}
		break;
	case MR_BACKEND_MPI:
		if (!o->mpi_libname) /* Open MPI: mpirun sets everything */
			break;
		if (!user_sets(o->user_env, MR_ENV(MLX_MPI_LIBNAME)) &&
		    mr_strvec_setenv(&e->common, MR_ENV(MLX_MPI_LIBNAME), o->mpi_libname) < 0) {
			rc = nomem(err);
			break;
		}
		rc = build_shim(hf, t, o, e, &b, err);
		break;
	default:
		rc = mr_err_set(err, MESHRUN_E_USAGE, "unknown backend %d", (int)o->backend);
	}
	mr_buf_release(&b);
	return rc;
}

int mr_launch_env_build(const struct mr_hostfile *hf, const struct mr_launch_env_opts *o,
			struct mr_launch_env *out, struct meshrun_err *err)
{
	struct mr_launch_env e = { 0 };
	struct mr_launch_topo own;
	const struct mr_launch_topo *t = o->topo;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!hf->nhosts)
		return mr_err_set(err, MESHRUN_E_USAGE, "no hosts to run on");
	if (!t) {
		mr_launch_topo_of(hf, &own);
		t = &own;
	}
	e.nranks = hf->nhosts;
	e.per_rank = calloc(e.nranks, sizeof(*e.per_rank));
	if (!e.per_rank)
		return nomem(err);
	if (o->user_env)
		for (size_t i = 0; i < o->user_env->nr; i++)
			if ((rc = mr_launch_env_add(&e.common, o->user_env->v[i], "--env", err)) < 0)
				goto out_release;
	if ((rc = build_backend(hf, t, o, &e, err)) < 0)
		goto out_release;
	/* mpi: mpirun numbers the ranks and libmeshrun's mpi backend has no hello to
	 * check a token with (docs/contracts.md: MLX_RANK and the token, all but mpi);
	 * libmeshrun-mpi (mpi_libname) runs on libmeshrun's ring and needs both */
	if (o->backend != MR_BACKEND_MPI || o->mpi_libname) {
		for (size_t r = 0; r < e.nranks; r++) {
			if (mr_strvec_pushf(&e.per_rank[r], "%s=%zu", MR_ENV(MLX_RANK), r) < 0 ||
			    (o->job_token &&
			     mr_strvec_setenv(&e.per_rank[r], MR_ENV(MESHRUN_JOB_TOKEN), o->job_token) < 0))
				goto out_nomem;
		}
	}
	*out = e;
	return 0;

out_nomem:
	rc = nomem(err);
out_release:
	mr_launch_env_release(&e);
	return rc;
}

void mr_launch_env_release(struct mr_launch_env *e)
{
	mr_strvec_release(&e->common);
	if (e->per_rank)
		for (size_t r = 0; r < e->nranks; r++)
			mr_strvec_release(&e->per_rank[r]);
	MR_FREE(e->per_rank);
	for (size_t i = 0; i < e->nfiles; i++) {
		MR_FREE(e->files[i].var);
		MR_FREE(e->files[i].name);
		MR_FREE(e->files[i].content);
	}
	e->nfiles = 0;
	e->nranks = 0;
}

int mr_launch_env_shared(const struct mr_launch_env *e, const char *dir, struct mr_strvec *out)
{
	if (e->nfiles && !dir) {
		errno = EINVAL;
		return -1;
	}
	for (size_t i = 0; i < e->common.nr; i++)
		if (mr_strvec_push(out, e->common.v[i]) < 0)
			return -1;
	for (size_t i = 0; i < e->nfiles; i++)
		if (mr_strvec_pushf(out, "%s=%s/%s", e->files[i].var, dir, e->files[i].name) < 0)
			return -1;
	return 0;
}

int mr_launch_env_for_rank(const struct mr_launch_env *e, size_t rank, const char *dir,
			   struct mr_strvec *out)
{
	if (rank >= e->nranks) {
		errno = EINVAL;
		return -1;
	}
	if (mr_launch_env_shared(e, dir, out) < 0)
		return -1;
	for (size_t i = 0; i < e->per_rank[rank].nr; i++)
		if (mr_strvec_push(out, e->per_rank[rank].v[i]) < 0)
			return -1;
	return 0;
}

/* A table of envmap.h as markdown, between the markers docs/contracts.md keeps. */
static void env_doc_block(FILE *f, const char *block, const char *head, bool set)
{
	static const struct {
		const char *name, *set_by, *read_by, *value, *meaning;
	} vars[] = {
#define ENV_ROW(name, set_by, read_by, value, meaning) { #name, set_by, read_by, value, meaning },
		MESHRUN_ENV_MAP(ENV_ROW)
#undef ENV_ROW
	};

	fprintf(f, "<!-- BEGIN %s (generated from src/common/envmap.h; do not edit) -->\n", block);
	fprintf(f, "%s\n| --- | --- | --- |\n", head);
	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		if (set && *vars[i].set_by)
			fprintf(f, "| %s | `%s` | %s |\n", vars[i].set_by, vars[i].name, vars[i].value);
		else if (!set && *vars[i].read_by)
			fprintf(f, "| `%s` | %s | %s |\n", vars[i].name, vars[i].read_by, vars[i].meaning);
	}
	fprintf(f, "<!-- END %s -->\n", block);
}

int mr_launch_env_doc(FILE *f)
{
	env_doc_block(f, "env-set", "| backend | variable | value |", true);
	env_doc_block(f, "env-read", "| variable | used by | meaning |", false);
	return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
