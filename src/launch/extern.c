/*
 * launch/extern.c - run a job under srun or Open MPI's mpirun (see extern.h).
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "launch/extern.h"
#include "launch/launch.h"
#include "launch/supervise.h"
#include "hal/hal.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/port.h"
#include "common/spawn.h"
#include "common/shquote.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const launcher_names[] = {
	[MR_LAUNCHER_MESHRUN] = "meshrun",
	[MR_LAUNCHER_SRUN] = "srun",
	[MR_LAUNCHER_MPIRUN] = "mpirun",
};

const char *mr_launcher_name(enum mr_launcher l)
{
	return (size_t)l < ARRAY_SIZE(launcher_names) ? launcher_names[l] : "?";
}

static int nomem(struct meshrun_err *err)
{
	return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
}

int mr_launch_pick_launcher(const char *opt, const char *env_launcher, const char *slurm_job_id,
			    enum mr_backend backend, enum mr_launcher *out, struct meshrun_err *err)
{
	const char *name = opt;
	const char *why = "--launcher";
	int l = -1;

	if ((!name || !strcmp(name, "auto")) && env_launcher && *env_launcher) {
		name = env_launcher;
		why = "MESHRUN_LAUNCHER";
	}
	if (!name || !strcmp(name, "auto")) {
		l = backend == MR_BACKEND_MPI				? MR_LAUNCHER_MPIRUN
		    : slurm_job_id && *slurm_job_id ? MR_LAUNCHER_SRUN
						    : MR_LAUNCHER_MESHRUN;
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(launcher_names); i++)
			if (!strcmp(name, launcher_names[i]))
				l = (int)i;
		if (l < 0)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "%s '%s': unknown launcher (auto, meshrun, srun, mpirun)", why, name);
	}
	if (backend == MR_BACKEND_MPI && l == MR_LAUNCHER_MESHRUN)
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "%s meshrun: the mpi backend needs mpirun (or srun) to start its ranks", why);
	if (l != MR_LAUNCHER_MESHRUN &&
	    (backend == MR_BACKEND_JACCL || backend == MR_BACKEND_JACCL_RING || backend == MR_BACKEND_NCCL))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "%s %s: the %s backend needs MLX_RANK per rank, which %s cannot set (ring and mpi take SLURM_PROCID/OMPI_COMM_WORLD_RANK)%s",
				  why, launcher_names[l], mr_backend_name(backend), launcher_names[l],
				  opt ? "" : "; SLURM_JOB_ID is set: --launcher meshrun starts ranks over ssh instead");
	*out = (enum mr_launcher)l;
	return 0;
}

int mr_launch_extern_env(const struct mr_launch_env *e, const char *dir, const char *token,
			 struct mr_strvec *out)
{
	if (mr_launch_env_shared(e, dir, out) < 0)
		return -1;
	if (token && mr_strvec_setenv(out, MR_ENV(MESHRUN_JOB_TOKEN), token) < 0)
		return -1;
	return 0;
}

int mr_launch_slurm_hosts(const struct mr_hostfile *hf, const char *self, struct mr_buf *nodelist,
			  struct mr_buf *hostfile)
{
	for (size_t i = 0; i < hf->nhosts; i++) {
		const char *h = hf->hosts[i].ssh;
		bool seen = false;

		if (mr_hal_host_is_local(h))
			h = self;
		if (mr_buf_printf(hostfile, "%s\n", h) < 0)
			return -1;
		for (size_t k = 0; k < i && !seen; k++) {
			const char *o = hf->hosts[k].ssh;

			seen = !strcmp(mr_hal_host_is_local(o) ? self : o, h);
		}
		if (!seen && mr_buf_printf(nodelist, "%s%s", nodelist->len ? "," : "", h) < 0)
			return -1;
	}
	return 0;
}

int mr_launch_srun_argv(const char *srun, size_t nranks, const char *nodelist, const char *cwd,
			char *const *cmd, struct mr_strvec *out, struct meshrun_err *err)
{
	if (mr_strvec_push(out, srun) < 0 || mr_strvec_pushf(out, "--ntasks=%zu", nranks) < 0 ||
	    mr_strvec_pushf(out, "--nodelist=%s", nodelist) < 0 ||
	    mr_strvec_push(out, "--distribution=arbitrary") < 0 ||
	    mr_strvec_push(out, "--kill-on-bad-exit=1") < 0 || mr_strvec_push(out, "--export=ALL") < 0 ||
	    (cwd && mr_strvec_pushf(out, "--chdir=%s", cwd) < 0) || mr_strvec_push(out, "--") < 0 ||
	    mr_strvec_pushv(out, cmd) < 0)
		return nomem(err);
	return 0;
}

bool mr_launch_mpi_wants_yield(const struct mr_hostfile *hf, long ncores,
			       const struct mr_strvec *mpi_args, const char *env_value)
{
	long most = 0;

	if (env_value)
		return false;
	for (size_t i = 0; mpi_args && i < mpi_args->nr; i++)
		if (strstr(mpi_args->v[i], "mpi_yield_when_idle"))
			return false;
	for (size_t i = 0; i < hf->nhosts; i++) {
		long n = 0;

		for (size_t k = 0; k < hf->nhosts; k++)
			n += !strcmp(hf->hosts[k].ssh, hf->hosts[i].ssh);
		most = MR_MAX(most, n);
	}
	return ncores > 0 && most > ncores;
}

const char *mr_launch_mpi_root_refusal(bool root, const char *version_out,
				       const struct mr_strvec *mpi_args, const char *allow_env,
				       const char *confirm_env)
{
	if (!root || !version_out || !strstr(version_out, "(Open MPI)"))
		return NULL;
	for (size_t i = 0; mpi_args && i < mpi_args->nr; i++)
		if (strstr(mpi_args->v[i], "--allow-run-as-root"))
			return NULL;
	if (allow_env && !strcmp(allow_env, "1") && confirm_env && !strcmp(confirm_env, "1"))
		return NULL;
	return "Open MPI's mpirun refuses to run as root: add --mpi-arg --allow-run-as-root, or set "
	       "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (as containers in CI do)";
}

int mr_launch_mpi_ssh_arg(const char *ssh_config, const char *known_hosts, bool accept_new,
			  const struct mr_strvec *mpi_args, const char *env_value, struct mr_strvec *out,
			  struct meshrun_err *err)
{
	const char *paths[] = { ssh_config && *ssh_config ? ssh_config : NULL,
				known_hosts && *known_hosts ? known_hosts : NULL };
	struct mr_buf word = MR_BUF_INIT, arg = MR_BUF_INIT;
	int rc = 1;

	if ((!paths[0] && !paths[1] && !accept_new) || env_value)
		return 0;
	for (size_t i = 0; mpi_args && i < mpi_args->nr; i++)
		if (strstr(mpi_args->v[i], "plm_rsh_args"))
			return 0;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		if (paths[i] && strpbrk(paths[i], " \t\n\r\v\f"))
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "%s '%s': mpirun hands it to ssh in plm_rsh_args, which Open MPI splits at whitespace; use a path without whitespace",
					  i ? "known_hosts file" : "ssh config", paths[i]);
	if ((paths[0] && mr_buf_printf(&word, "-F %s", paths[0]) < 0) ||
	    (paths[1] && mr_buf_printf(&word, "%s-o UserKnownHostsFile=%s", word.len ? " " : "", paths[1]) < 0) ||
	    (accept_new && mr_buf_printf(&word, "%s-o StrictHostKeyChecking=accept-new", word.len ? " " : "") < 0) ||
	    mr_buf_puts(&arg, "--mca plm_rsh_args ") < 0 || mr_shquote(&arg, mr_buf_cstr(&word)) < 0 ||
	    mr_strvec_push(out, mr_buf_cstr(&arg)) < 0)
		rc = nomem(err);
	mr_buf_release(&word);
	mr_buf_release(&arg);
	return rc;
}

/* --- mpirun's hostfile and command line --- */

int mr_launch_mpi_hostfile(const struct mr_hostfile *hf, struct mr_buf *out)
{
	for (size_t i = 0; i < hf->nhosts; i++) {
		size_t n = 0;
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(hf->hosts[j].ssh, hf->hosts[i].ssh);
		if (seen)
			continue;
		for (size_t j = i; j < hf->nhosts; j++)
			n += !strcmp(hf->hosts[j].ssh, hf->hosts[i].ssh);
		if (mr_buf_printf(out, "%s slots=%zu\n", hf->hosts[i].ssh, n) < 0)
			return -1;
	}
	return 0;
}

int mr_launch_shlex_split(const char *s, struct mr_strvec *out, struct meshrun_err *err)
{
	struct mr_buf w = MR_BUF_INIT;
	bool in_word = false;
	char quote = 0;
	int rc = 0;

	for (const char *p = s;; p++) {
		char c = *p;

		if (quote == '\'') {
			if (!c)
				goto unclosed;
			if (c == '\'')
				quote = 0;
			else if (mr_buf_putc(&w, c) < 0)
				goto nomem;
			continue;
		}
		if (quote == '"') {
			if (!c)
				goto unclosed;
			if (c == '"') {
				quote = 0;
			} else if (c == '\\' && p[1] && strchr("\\\"$`\n", p[1])) {
				if (mr_buf_putc(&w, *++p) < 0)
					goto nomem;
			} else if (mr_buf_putc(&w, c) < 0) {
				goto nomem;
			}
			continue;
		}
		if (!c || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			if (in_word) {
				if (mr_strvec_push(out, mr_buf_cstr(&w)) < 0)
					goto nomem;
				mr_buf_reset(&w);
				in_word = false;
			}
			if (!c)
				break;
			continue;
		}
		in_word = true;
		if (c == '\'' || c == '"') {
			quote = c;
		} else if (c == '\\') {
			if (!p[1]) {
				rc = mr_err_set(err, MESHRUN_E_USAGE, "'%s': no character after the last backslash", s);
				goto out;
			}
			if (mr_buf_putc(&w, *++p) < 0)
				goto nomem;
		} else if (mr_buf_putc(&w, c) < 0) {
			goto nomem;
		}
	}
	goto out;
unclosed:
	rc = mr_err_set(err, MESHRUN_E_USAGE, "'%s': no closing quotation", s);
	goto out;
nomem:
	rc = nomem(err);
out:
	mr_buf_release(&w);
	return rc;
}

int mr_launch_mpi_argv(const char *mpirun, bool raw_output, const char *hostfile_path, const char *cwd,
		       const struct mr_strvec *env, const struct mr_strvec *mpi_args,
		       char *const *cmd, struct mr_strvec *out, struct meshrun_err *err)
{
	int rc;

	if (mr_strvec_push(out, mpirun) < 0 ||
	    (raw_output && (mr_strvec_push(out, "--output") < 0 || mr_strvec_push(out, ":raw") < 0)) ||
	    mr_strvec_push(out, "--hostfile") < 0 ||
	    mr_strvec_push(out, hostfile_path) < 0)
		return nomem(err);
	if (cwd && (mr_strvec_push(out, "-cwd") < 0 || mr_strvec_push(out, cwd) < 0))
		return nomem(err);
	for (size_t i = 0; env && i < env->nr; i++)
		if (mr_strvec_push(out, "-x") < 0 || mr_strvec_push(out, env->v[i]) < 0)
			return nomem(err);
	for (size_t i = 0; mpi_args && i < mpi_args->nr; i++) {
		if ((rc = mr_launch_shlex_split(mpi_args->v[i], out, err)) < 0) {
			mr_err_prefix(err, "--mpi-arg");
			return rc;
		}
	}
	if (mr_strvec_push(out, "--") < 0 || mr_strvec_pushv(out, cmd) < 0)
		return nomem(err);
	return 0;
}

/* --- running --- */

struct xjob {
	const struct mr_launch_opts *o;
	struct mr_launch_plan *plan;
	char tmp[PATH_MAX];  /* our own files (mpirun/SLURM hostfile); "" when none */
	char dir[PATH_MAX];  /* the ranks' files; "" when none */
};

static int make_dir(const char *base, const char *prefix, char *out, size_t n,
		    struct meshrun_err *err)
{
	if (snprintf(out, n, "%s/%smeshrun.XXXXXX", base, prefix) >= (int)n) {
		out[0] = '\0';
		return mr_err_set(err, MESHRUN_E_INVAL, "directory name too long under '%s'", base);
	}
	if (!mkdtemp(out)) {
		int rc = mr_err_sys(err, "create job directory '%s'", out);

		out[0] = '\0';
		return rc;
	}
	return 0;
}

static int write_in(const char *dir, const char *name, const char *data, size_t len,
		    char *path, size_t n, struct meshrun_err *err)
{
	if (snprintf(path, n, "%s/%s", dir, name) >= (int)n)
		return mr_err_set(err, MESHRUN_E_INVAL, "path too long: '%s/%s'", dir, name);
	return mr_write_file(path, data, len, 0644, err);
}

/* The ranks' files: where (see extern.h), check the filesystem, write them. */
static int write_rank_files(struct xjob *x, struct meshrun_err *err)
{
	const struct mr_launch_env *env = &x->plan->env;
	const char *tmp = getenv("TMPDIR"), *shared = x->o->shared_dir;
	char cwd[PATH_MAX], path[PATH_MAX], fs[64];
	bool network;
	int rc;

	if (!env->nfiles)
		return 0;
	if (x->plan->all_local) {
		shared = tmp && *tmp ? tmp : "/tmp";
		goto make;
	}
	if (!shared || !*shared)
		shared = getenv("MESHRUN_SHARED_DIR");
	if (shared && *shared) {
		if (mr_fs_type(shared, fs, sizeof(fs), &network) < 0)
			return mr_err_sys(err, "shared directory '%s'", shared);
		if (!network)
			mr_warn("'%s' is on a local filesystem (type %s): ranks on other hosts read their files there, so it must hold the same files on every host",
				shared, fs);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return mr_err_sys(err, "getcwd");
		if (mr_fs_type(cwd, fs, sizeof(fs), &network) < 0)
			return mr_err_sys(err, "statfs '%s'", cwd);
		if (!network)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "--launcher %s with remote hosts: the %s backend's files must be readable on every host, but the working directory '%s' is on a local filesystem (type %s); run from a shared filesystem or name one with --shared-dir DIR",
					  mr_launcher_name(x->plan->launcher),
					  mr_backend_name(x->plan->backend), cwd, fs);
		mr_info("job files go to '%s' (%s)", cwd, fs);
		shared = cwd;
	}
make:
	if ((rc = make_dir(shared, x->plan->all_local ? "" : ".", x->dir, sizeof(x->dir), err)) < 0)
		return rc;
	for (size_t i = 0; i < env->nfiles; i++)
		if ((rc = write_in(x->dir, env->files[i].name, env->files[i].content,
				   strlen(env->files[i].content), path, sizeof(path), err)) < 0)
			return rc;
	return 0;
}

/*
 * mlx.launch passes "--output :raw" (Open MPI 5); Open MPI 4 rejects that option.
 * Keep it unless `mpirun --version` names Open MPI 1..4.
 */
static bool mpirun_takes_output_raw(const char *version_out)
{
	const char *v = strstr(version_out, "(Open MPI) ");

	return !(v && v[11] >= '1' && v[11] <= '4' && v[12] == '.');
}

/* What `mpirun --version` prints (empty when it does not run), in *out. */
static void mpirun_version(struct mr_hal *hal, const char *mpirun, struct mr_buf *out)
{
	char *argv[] = { (char *)mpirun, "--version", NULL };
	struct mr_hal_cmd c = { 0 };

	c.host = "127.0.0.1";
	c.argv = argv;
	c.timeout_ms = 10000;
	if (mr_hal_run(hal, &c, 1, NULL) == 0)
		mr_buf_puts(out, mr_buf_cstr(&c.out));
	mr_hal_cmd_release(&c);
}

static int mpirun_argv(struct xjob *x, struct mr_hal *hal, const char *mpirun,
		       const struct mr_strvec *env, struct mr_strvec *argv, struct meshrun_err *err)
{
	const struct mr_launch_opts *o = x->o;
	struct mr_strvec margs = MR_STRVEC_INIT;
	struct mr_buf hosts = MR_BUF_INIT, version = MR_BUF_INIT;
	const char *refusal;
	char path[PATH_MAX];
	int rc;

	mpirun_version(hal, mpirun, &version);
	refusal = mr_launch_mpi_root_refusal(geteuid() == 0, mr_buf_cstr(&version), &o->mpi_args,
					     getenv("OMPI_ALLOW_RUN_AS_ROOT"),
					     getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"));
	if (refusal) {
		rc = mr_err_set(err, MESHRUN_E_USAGE, "%s", refusal);
		goto out;
	}
	if (mr_launch_mpi_hostfile(x->plan->hf, &hosts) < 0) {
		rc = nomem(err);
		goto out;
	}
	if ((rc = write_in(x->tmp, "mpi-hosts", hosts.p, hosts.len, path, sizeof(path), err)) < 0)
		goto out;
	if (x->plan->backend == MR_BACKEND_MPI &&
	    mr_launch_mpi_wants_yield(x->plan->hf, mr_cpu_count(), &o->mpi_args,
				      getenv("OMPI_MCA_mpi_yield_when_idle"))) {
		mr_info("more ranks than CPUs on a host: adding --mca mpi_yield_when_idle 1");
		if (mr_strvec_push(&margs, "--mca mpi_yield_when_idle 1") < 0) {
			rc = nomem(err);
			goto out;
		}
	}
	if (!x->plan->all_local) {
		const char *cfg = o->ssh.config ? o->ssh.config : getenv("MESHRUN_SSH_CONFIG");

		rc = mr_launch_mpi_ssh_arg(cfg, o->ssh.known_hosts, o->ssh.accept_new_hostkeys, &o->mpi_args,
					   getenv("OMPI_MCA_plm_rsh_args"), &margs, err);
		if (rc < 0)
			goto out;
	}
	if (mr_strvec_pushv(&margs, o->mpi_args.v) < 0) {
		rc = nomem(err);
		goto out;
	}
	rc = mr_launch_mpi_argv(mpirun, mpirun_takes_output_raw(mr_buf_cstr(&version)), path, o->cwd, env,
				&margs, x->plan->argv.v, argv, err);
out:
	mr_strvec_release(&margs);
	mr_buf_release(&hosts);
	mr_buf_release(&version);
	return rc;
}

static int srun_argv(struct xjob *x, const char *srun, struct mr_strvec *env,
		     struct mr_strvec *argv, struct meshrun_err *err)
{
	struct mr_buf nodes = MR_BUF_INIT, lines = MR_BUF_INIT;
	char self[256], path[PATH_MAX];
	int rc;

	if (gethostname(self, sizeof(self)) < 0)
		return mr_err_sys(err, "gethostname");
	self[sizeof(self) - 1] = '\0';
	if (mr_launch_slurm_hosts(x->plan->hf, self, &nodes, &lines) < 0) {
		rc = nomem(err);
		goto out;
	}
	if ((rc = write_in(x->tmp, "slurm-hosts", lines.p, lines.len, path, sizeof(path), err)) < 0)
		goto out;
	/* srun reads SLURM_HOSTFILE itself (--distribution=arbitrary); the ranks get it too,
	 * which is harmless */
	if (mr_strvec_setenv(env, "SLURM_HOSTFILE", path) < 0) {
		rc = nomem(err);
		goto out;
	}
	rc = mr_launch_srun_argv(srun, x->plan->hf->nhosts, mr_buf_cstr(&nodes), x->o->cwd,
				 x->plan->argv.v, argv, err);
out:
	mr_buf_release(&nodes);
	mr_buf_release(&lines);
	return rc;
}

/* Remove dir and the files named (best effort; a failure is a warning). */
static void remove_dir(const char *dir, const char *const *names, size_t n)
{
	char path[PATH_MAX];

	if (!dir[0])
		return;
	for (size_t i = 0; i < n; i++)
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path))
			(void)unlink(path);
	if (rmdir(dir) < 0)
		mr_warn("could not remove '%s': %s", dir, strerror(errno));
}

int mr_launch_run_extern(const struct mr_launch_opts *o, struct mr_launch_plan *plan)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct xjob x = { o, plan, "", "" };
	const char *prog = mr_launcher_name(plan->launcher);
	const char *tmp = getenv("TMPDIR");
	struct mr_strvec env = MR_STRVEC_INIT, argv = MR_STRVEC_INIT;
	struct mr_hal_opts ho = { 0 };
	struct mr_hal *hal = NULL;
	struct mr_spawn sp = { 0 };
	struct mr_sup sup;
	char *exe = NULL;
	bool sup_ok = false;
	int code = MR_LAUNCH_EXIT_FAIL;

	if (!(exe = mr_which(prog, NULL))) {
		mr_error("cannot start the ranks with %s: '%s' not found on PATH%s", prog, prog,
			 plan->launcher == MR_LAUNCHER_SRUN && !o->launcher
				 ? " (SLURM_JOB_ID is set, so meshrun hands the start to srun; --launcher meshrun starts ranks over ssh instead)"
				 : "");
		return MR_LAUNCH_EXIT_FAIL;
	}
	ho.batch = true;
	if (make_dir(tmp && *tmp ? tmp : "/tmp", "", x.tmp, sizeof(x.tmp), &err) < 0 ||
	    write_rank_files(&x, &err) < 0 || mr_hal_new_local(&hal, &ho, &err) < 0)
		goto fail;
	if (mr_launch_extern_env(&plan->env, x.dir, plan->backend == MR_BACKEND_MPI ? NULL : plan->token,
				 &env) < 0) {
		mr_err_errno(&err, errno, MESHRUN_E_SYS, "environment of the job");
		goto fail;
	}
	if ((plan->launcher == MR_LAUNCHER_SRUN ? srun_argv(&x, exe, &env, &argv, &err)
						: mpirun_argv(&x, hal, exe, &env, &argv, &err)) < 0)
		goto fail;
	if (o->verbose) {
		struct mr_buf b = MR_BUF_INIT;

		mr_shquote_argv(&b, argv.v);
		mr_info("running %zu rank%s (%s backend) under %s", plan->hf->nhosts,
			plan->hf->nhosts == 1 ? "" : "s", mr_backend_name(plan->backend), mr_buf_cstr(&b));
		mr_buf_release(&b);
	}
	if (mr_sup_init(&sup, hal, 1, o->tag_output, plan->stdin_mode, o->timeout_ms, &err) < 0)
		goto fail;
	sup_ok = true;
	sup.verbose = o->verbose;
	sp.host = "127.0.0.1";
	sp.argv = argv.v;
	/* srun: the variables travel in its own environment (--export=ALL) */
	sp.env = plan->launcher == MR_LAUNCHER_SRUN ? env.v : NULL;
	if (mr_sup_start(&sup, 0, &sp, &err) < 0) {
		mr_error("%s", err.msg);
		mr_sup_abort(&sup);
	}
	code = mr_sup_wait(&sup);
	goto out;
fail:
	mr_error("%s", err.msg);
	if (err.code == MESHRUN_E_USAGE)
		code = MR_LAUNCH_EXIT_USAGE;
out:
	if (sup_ok)
		mr_sup_release(&sup);
	mr_hal_free(hal);
	{
		static const char *const ours[] = { "mpi-hosts", "slurm-hosts" };
		const char *names[MR_LAUNCH_MAX_FILES];

		for (size_t i = 0; i < plan->env.nfiles; i++)
			names[i] = plan->env.files[i].name;
		remove_dir(x.dir, names, plan->env.nfiles);
		remove_dir(x.tmp, ours, ARRAY_SIZE(ours));
	}
	mr_strvec_release(&env);
	mr_strvec_release(&argv);
	free(exe);
	return code;
}
