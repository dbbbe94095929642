/*
 * launch/env.h - the per-backend environment of a job, exactly as mlx.launch sets
 * it (the reader is coll/env.h; both name the variables through common/envmap.h).
 * Pure: no I/O, no processes; unit-tested in tests/unit/test_launch_env.c.
 *
 * Every rank gets the user's variables (meshrun's own MESHRUN_* settings, then
 * the hostfile's "envs", then --env, a later name replacing an earlier one),
 * then the backend's:
 *
 *   all but mpi  MLX_RANK=<rank>, MESHRUN_JOB_TOKEN=<token> (libmeshrun's hello)
 *   ring         MLX_HOSTFILE=<file>: json.dumps of one list per rank of "ip:port",
 *                ports from --starting-port, +1 per IP and per connection
 *                (--connections-per-ip), in rank order; "" for a single rank.
 *                MLX_RING_VERBOSE=1 with --verbose.
 *   mesh         as ring (so a program that only knows the ring still runs), plus
 *                MESHRUN_MESH_HOSTFILE=<file>: the hosts' "mesh_ips" rows as a
 *                matrix of "ip:port" lists (coll/mesh/tcpmesh.h), on a full mesh
 *                (mr_launch_topo); rank i listens on --starting-port + i.
 *   jaccl        MLX_JACCL_COORDINATOR=<rank 0's first ip>:<starting port>,
 *   jaccl-ring   MLX_JACCL_RING=1 (jaccl-ring),
 *                MLX_IBV_DEVICES=<file>: json.dumps of the hostfile's rdma matrix,
 *                when complete (mr_launch_topo: mesh for jaccl, ring for jaccl-ring).
 *   nccl         NCCL_DEBUG=INFO (--verbose), NCCL_HOST_IP=<rank 0's first ip>,
 *                NCCL_PORT=<--nccl-port>, MLX_WORLD_SIZE=<ranks>,
 *                CUDA_VISIBLE_DEVICES=<rank % repeat>.
 *   mpi          no per-rank variables and no job token: mpirun numbers the ranks;
 *                the variables go to mpirun as "-x K=V" (extern.h: mr_launch_mpi_argv).
 *   mpi with     (--mpi-impl meshrun: libmeshrun-mpi, no mpirun) as ring, with
 *   mpi_libname  MESHRUN_HOSTFILE=<file> instead of MLX_HOSTFILE, which stays
 *                unset so that MLX's init("any") skips its own ring and opens
 *                MLX_MPI_LIBNAME=<mpi_libname> (unless the user's env sets it),
 *                plus MLX_RANK and the job token. The shim's libmeshrun takes the
 *                first backend whose variables it finds (mesh, ring, jaccl), so:
 *                a full mesh ("mesh_ips") adds MESHRUN_MESH_HOSTFILE as mesh
 *                does; a complete rdma matrix (mesh, else ring) sets
 *                JACCL_COORDINATOR, JACCL_IBV_DEVICES=<file> (and JACCL_RING=1
 *                for a ring) INSTEAD of MESHRUN_HOSTFILE; never MLX's own names.
 *
 * A file is written once per host (the launcher decides where); its content is
 * MLX's `echo CONTENT > file`, i.e. the JSON text plus "\n".
 *
 * Ownership: struct mr_launch_env owns everything in it; release with
 * mr_launch_env_release(). Inputs are only read.
 */
#ifndef MR_LAUNCH_ENV_H
#define MR_LAUNCH_ENV_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "hostfile/hostfile.h"
#include "meshrun/err.h"

enum mr_backend {
	MR_BACKEND_RING = 0,
	MR_BACKEND_JACCL,
	MR_BACKEND_JACCL_RING,
	MR_BACKEND_NCCL,
	MR_BACKEND_MPI,
	MR_BACKEND_MESH,
};

/* "ring" -> MR_BACKEND_RING ...; -1 for an unknown name. */
int mr_backend_parse(const char *name);
const char *mr_backend_name(enum mr_backend b);

/*
 * The hostfile's topology: the questions the backend's choice (plan.c) and the
 * environment (env.c) ask of it, answered once per job by mr_launch_topo_of()
 * (the plan keeps the answers, launch.h); every user reads these fields.
 */
struct mr_launch_topo {
	bool any_rdma;   /* some host has a row of rdma cells (the jaccl backends need one) */
	bool full_mesh;  /* 2+ hosts, each with "mesh_ips" of a full mesh (mr_hostfile_check_mesh) */
	bool rdma_mesh;  /* the rdma matrix is complete as a mesh (mr_hostfile_check_rdma, mesh) */
	bool rdma_ring;  /* ... as a ring (mr_hostfile_check_rdma, ring) */
	struct meshrun_err mesh_err;      /* why not full_mesh (names host and field) */
	struct meshrun_err rdma_mesh_err; /* why not rdma_mesh */
	struct meshrun_err rdma_ring_err; /* why not rdma_ring */
};

/* Answer them for hf; t is overwritten (nothing to release). */
void mr_launch_topo_of(const struct mr_hostfile *hf, struct mr_launch_topo *t);

struct mr_launch_env_opts {
	enum mr_backend backend;
	const struct mr_launch_topo *topo; /* hf's (the plan's); NULL: mr_launch_env_build asks */
	int starting_port;      /* --starting-port (32323) */
	int connections_per_ip; /* --connections-per-ip (1) */
	int nccl_port;          /* --nccl-port (12345) */
	int repeat;             /* -n (1): CUDA_VISIBLE_DEVICES = rank % repeat */
	bool verbose;
	const char *job_token;  /* MESHRUN_JOB_TOKEN; NULL: not set */
	const struct mr_strvec *user_env; /* "K=V" from --env (after the hostfile's envs) */
	const char *mpi_libname; /* mpi: libmeshrun-mpi's path (--mpi-impl meshrun); NULL: Open MPI */
};

#define MR_LAUNCH_MAX_FILES 2

struct mr_launch_file {
	char *var;     /* "MLX_HOSTFILE" */
	char *name;    /* file name inside the job's directory on each host: "hostfile.json" */
	char *content; /* bytes to write (NUL-terminated text) */
};

struct mr_launch_env {
	size_t nranks;
	struct mr_strvec common;     /* "K=V" for every rank */
	struct mr_strvec *per_rank;  /* nranks vectors: MLX_RANK, CUDA_VISIBLE_DEVICES */
	struct mr_launch_file files[MR_LAUNCH_MAX_FILES];
	size_t nfiles;
};

/*
 * Check one "K=V" (or "K", meaning K=) and append/replace it in env. where names
 * the source in the error: "--env", "hosts.json: envs[2]".
 */
int mr_launch_env_add(struct mr_strvec *env, const char *kv, const char *where,
		      struct meshrun_err *err);

/*
 * meshrun's own settings for the ranks: kv ("NAME=VALUE", from meshrun's
 * environment) is passed on when NAME starts with MESHRUN_ and is none of the
 * variables meshrun sets per job (envmap.h: MESHRUN_JOB_TOKEN,
 * MESHRUN_HOSTFILE, MESHRUN_MESH_HOSTFILE), so MESHRUN_TIMEOUT=10 meshrun ...
 * reaches remote ranks as local ones (which inherit everything). The
 * hostfile's envs and --env come after, so they win (docs/contracts.md).
 */
bool mr_launch_env_inherited(const char *kv);
/* Append (mr_launch_env_add) every variable of environ_ that passes. */
int mr_launch_env_inherit(char *const *environ_, struct mr_strvec *env, struct meshrun_err *err);

/*
 * Build the environment for every rank of hf (one rank per host entry: -n has
 * already been applied to a --hosts list). Errors (MESHRUN_E_USAGE) name the
 * host and the field: "ring backend needs IP addresses: host 'm1' (hosts[0])
 * has no 'ips'", "malformed hostfile: host 1 ('m2'): rdma[1]: ...".
 */
int mr_launch_env_build(const struct mr_hostfile *hf, const struct mr_launch_env_opts *o,
			struct mr_launch_env *out, struct meshrun_err *err);
void mr_launch_env_release(struct mr_launch_env *e);
/*
 * docs/contracts.md's environment tables from common/envmap.h (meshrun's hidden
 * --help-env): the blocks "env-set" and "env-read", each between its BEGIN and
 * END comment lines. -1 when writing f failed.
 */
int mr_launch_env_doc(FILE *f);

/*
 * What every rank gets (also under an external launcher): common, then
 * VAR=<dir>/<name> for each file (dir is the job's directory on the rank's host;
 * NULL when nfiles == 0, else -1 with errno EINVAL). out is appended to.
 */
int mr_launch_env_shared(const struct mr_launch_env *e, const char *dir, struct mr_strvec *out);

/*
 * The complete variable list of one rank: mr_launch_env_shared(), then the
 * rank's own. out is appended to.
 */
int mr_launch_env_for_rank(const struct mr_launch_env *e, size_t rank, const char *dir,
			   struct mr_strvec *out);

/* The ring hostfile text (json.dumps form, no newline); exposed for tests. */
int mr_launch_ring_json(const struct mr_hostfile *hf, int starting_port, int conns,
			struct mr_buf *out, struct meshrun_err *err);
/* The mesh backend's address matrix (json.dumps form, no newline), after
 * mr_hostfile_check_mesh() (meshconfig doctor's path check calls it alone). */
int mr_launch_mesh_json(const struct mr_hostfile *hf, int starting_port, struct mr_buf *out,
			struct meshrun_err *err);
/* The rdma matrix text (json.dumps form, no newline). */
int mr_launch_rdma_json(const struct mr_hostfile *hf, struct mr_buf *out,
			struct meshrun_err *err);

#endif
