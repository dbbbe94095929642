/*
 * launch/plan.c - meshrun's job plan from the options (launch.h; not topo/plan.c,
 * the IP plan): the host list (-n applied), the backend, the checked environment,
 * the command as it will run (resolved as mlx.launch does), the job token and the
 * ranks' environment.
 */
#include "common/compat.h"
#include "launch/launch.h"
#include "hal/hal.h"
#include "common/err.h"
#include "common/log.h"
#include "common/port.h"
#include "common/spawn.h"

#include <limits.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *mr_launch_python(const struct mr_launch_opts *o, char *buf, size_t n)
{
	char *found;

	if (o->python)
		return o->python;
	found = mr_which("python3", NULL);
	if (!found || (size_t)snprintf(buf, n, "%s", found) >= n) {
		free(found);
		return "python3";
	}
	free(found);
	return buf;
}

static int nomem(struct meshrun_err *err)
{
	return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
}

/* --hosts a,b with -n N: each host N times in a row, as mlx.launch's from_list. */
static int hosts_from_list(const struct mr_launch_opts *o, struct mr_hostfile **out,
			   struct meshrun_err *err)
{
	struct mr_hostfile *list = NULL, *hf = NULL;
	int rc;

	/* its messages start with "--hosts" */
	if ((rc = mr_hostfile_from_list(o->hosts ? o->hosts : "127.0.0.1", &list, err)) < 0) {
		err->code = MESHRUN_E_USAGE;
		return MESHRUN_E_USAGE;
	}
	if (!(hf = mr_hostfile_new())) {
		rc = nomem(err);
		goto out;
	}
	for (size_t i = 0; i < list->nhosts; i++) {
		for (int k = 0; k < o->repeat; k++) {
			int idx = mr_hostfile_add_host(hf, list->hosts[i].ssh, err);

			if (idx < 0) {
				rc = idx;
				goto out;
			}
			if (mr_strvec_pushv(&hf->hosts[idx].ips, list->hosts[i].ips.v) < 0) {
				rc = nomem(err);
				goto out;
			}
		}
	}
	*out = hf;
	hf = NULL;
	rc = 0;
out:
	mr_hostfile_free(hf);
	mr_hostfile_free(list);
	return rc;
}

/* Resolve the command's first word as mlx.launch does (see usage_trailer). */
static int resolve_command(const struct mr_launch_opts *o, struct mr_strvec *argv,
			   struct meshrun_err *err)
{
	const char *cmd0 = o->command.v[0];
	char pybuf[PATH_MAX];
	struct stat st;

	if (!stat(cmd0, &st) && S_ISREG(st.st_mode)) {
		size_t n = strlen(cmd0);
		char *abs = realpath(cmd0, NULL);
		bool py = (n > 3 && !strcmp(cmd0 + n - 3, ".py")) || access(cmd0, X_OK);
		int rc = 0;

		if (!abs)
			return mr_err_sys(err, "realpath '%s'", cmd0);
		if ((py && mr_strvec_push(argv, mr_launch_python(o, pybuf, sizeof(pybuf))) < 0) ||
		    mr_strvec_push(argv, abs) < 0)
			rc = nomem(err);
		free(abs);
		if (rc)
			return rc;
	} else {
		/* not here: the check on every host (or exec) says whether it exists there */
		char *found = mr_which(cmd0, NULL);
		int rc = mr_strvec_push(argv, found ? found : cmd0);

		free(found);
		if (rc < 0)
			return nomem(err);
	}
	if (mr_strvec_pushv(argv, o->command.v + 1) < 0)
		return nomem(err);
	return 0;
}

static void make_token(char out[33])
{
	unsigned char r[16];

	if (mr_random_bytes(r, sizeof(r)) < 0) { /* time and pid are still unique per job */
		uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
		memcpy(r, &x, sizeof(x));
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

int mr_launch_plan(const struct mr_launch_opts *o, struct mr_launch_plan *plan,
		   struct meshrun_err *err)
{
	struct mr_launch_env_opts eo = { 0 };
	const char *backend = o->backend;
	int rc, b;

	memset(plan, 0, sizeof(*plan));
	if (o->hostfile && o->hosts)
		return mr_err_set(err, MESHRUN_E_USAGE, "--hosts and --hostfile exclude each other");
	if (o->hostfile) {
		if ((rc = mr_hostfile_load(o->hostfile, &plan->hf, err)) < 0) {
			if (err)
				err->code = MESHRUN_E_USAGE;
			return MESHRUN_E_USAGE;
		}
		if (o->repeat != 1)
			mr_warn("-n %d: hostfile entries are not repeated (as in mlx.launch); it only sets CUDA_VISIBLE_DEVICES for nccl",
				o->repeat);
		if (!plan->hf->nhosts) {
			rc = mr_err_set(err, MESHRUN_E_USAGE, "%s: no hosts", o->hostfile);
			goto out_release;
		}
	} else if ((rc = hosts_from_list(o, &plan->hf, err)) < 0) {
		goto out_release;
	}

	plan->all_local = true;
	for (size_t i = 0; i < plan->hf->nhosts; i++)
		plan->all_local &= mr_hal_host_is_local(plan->hf->hosts[i].ssh);

	if (!backend && plan->hf->backend && *plan->hf->backend)
		backend = plan->hf->backend;
	if (!backend)
		backend = mr_have_nvidia_gpu() ? "nccl" : "ring";
	if ((b = mr_backend_parse(backend)) < 0) {
		rc = mr_err_set(err, MESHRUN_E_USAGE,
				"%s: backend: unknown backend '%s' (ring, jaccl, jaccl-ring, nccl, mpi)",
				o->hostfile ? o->hostfile : "--backend", backend);
		goto out_release;
	}
	plan->backend = (enum mr_backend)b;
	if ((rc = mr_launch_pick_launcher(o->launcher, getenv("MESHRUN_LAUNCHER"), getenv("SLURM_JOB_ID"),
					  plan->backend, &plan->launcher, err)) < 0)
		goto out_release;
	plan->stdin_mode = !strcmp(o->stdin_mode, "0")	  ? MR_STDIN_RANK0
			   : !strcmp(o->stdin_mode, "none") ? MR_STDIN_NONE
							    : MR_STDIN_ALL;

	for (size_t i = 0; i < plan->hf->envs.nr; i++) {
		char where[PATH_MAX + 32];

		snprintf(where, sizeof(where), "%s: envs[%zu]", o->hostfile, i);
		if ((rc = mr_launch_env_add(&plan->envs, plan->hf->envs.v[i], where, err)) < 0)
			goto out_release;
	}
	for (size_t i = 0; i < o->envs.nr; i++)
		if ((rc = mr_launch_env_add(&plan->envs, o->envs.v[i], "--env", err)) < 0)
			goto out_release;

	if ((rc = resolve_command(o, &plan->argv, err)) < 0)
		goto out_release;
	make_token(plan->token);

	eo.backend = plan->backend;
	eo.starting_port = o->starting_port;
	eo.connections_per_ip = o->connections_per_ip;
	eo.nccl_port = o->nccl_port;
	eo.repeat = o->repeat;
	eo.verbose = o->verbose;
	eo.job_token = plan->token;
	eo.user_env = &plan->envs;
	if ((rc = mr_launch_env_build(plan->hf, &eo, &plan->env, err)) < 0)
		goto out_release;
	return 0;

out_release:
	mr_launch_plan_release(plan);
	return rc;
}

void mr_launch_plan_release(struct mr_launch_plan *plan)
{
	mr_hostfile_free(plan->hf);
	plan->hf = NULL;
	mr_strvec_release(&plan->envs);
	mr_strvec_release(&plan->argv);
	mr_launch_env_release(&plan->env);
}
