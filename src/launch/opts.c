#include "common/compat.h"
#include "launch/launch.h"
#include "hal/hal.h"
#include "common/err.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "common/shquote.h"

#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The table is built per call: its value pointers are the fields of *o. */
#define LAUNCH_OPTS(o)                                                                          \
	{                                                                                       \
		MR_OPT_GROUP("Hosts"),                                                          \
		MR_OPT_STRING_D(0, "hosts", &(o)->hosts, "LIST", "127.0.0.1",                   \
				"comma-separated hosts (an IP address is also the ring address)"), \
		MR_OPT_STRING(0, "hostfile", &(o)->hostfile, "FILE",                            \
			      "MLX hostfile (JSON, list or object form)"),                      \
		MR_OPT_INT_D('n', "repeat-hosts", &(o)->repeat, "N", 1, 65536, "1",             \
			     "repeat each host of --hosts N times (ranks per host)"),           \
		MR_OPT_STRING(0, "ssh-config", &(o)->ssh_config, "FILE",                        \
			      "ssh_config for remote hosts (default ~/.ssh/config)"),           \
		MR_OPT_CHOICE(0, "launcher", &(o)->launcher, "auto|meshrun|srun|mpirun",        \
			      "who starts the ranks (default auto: srun when SLURM_JOB_ID is set, mpirun for --backend mpi, else meshrun)"), \
		MR_OPT_STRING(0, "shared-dir", &(o)->shared_dir, "DIR",                         \
			      "srun/mpirun with remote hosts: job files go here, a path every host sees (default $MESHRUN_SHARED_DIR, else the working directory)"), \
		MR_OPT_GROUP("Backend and environment"),                                        \
		MR_OPT_CHOICE(0, "backend", &(o)->backend, "ring|jaccl|jaccl-ring|nccl|mpi",    \
			      "distributed backend (default: the hostfile's, else nccl with a GPU, else ring)"), \
		MR_OPT_LIST(0, "env", &(o)->envs, "K=V",                                        \
			    "set a variable on every rank (repeatable; after the hostfile's envs)"), \
		MR_OPT_INT_D('p', "starting-port", &(o)->starting_port, "PORT", 1, 65535,       \
			     "32323", "ring: first port, +1 per IP and connection; jaccl: coordinator port"), \
		MR_OPT_INT_D(0, "connections-per-ip", &(o)->connections_per_ip, "N", 1, 1024,   \
			     "1", "ring: connections per IP address"),                          \
		MR_OPT_INT_D(0, "nccl-port", &(o)->nccl_port, "PORT", 1, 65535, "12345",        \
			     "nccl: port of rank 0"),                                           \
		MR_OPT_LIST(0, "mpi-arg", &(o)->mpi_args, "ARGS",                               \
			    "mpi: arguments passed to mpirun (split as a shell would; repeatable)"), \
		MR_OPT_GROUP("Command"),                                                        \
		MR_OPT_STRING(0, "cwd", &(o)->cwd, "DIR",                                       \
			      "working directory of every rank (default: ours, where it exists)"), \
		MR_OPT_STRING(0, "python", &(o)->python, "PATH",                                \
			      "Python that runs a .py command (default: python3 on PATH)"),     \
		MR_OPT_BOOL(0, "print-python", &(o)->print_python,                              \
			    "print that Python and exit"),                                      \
		MR_OPT_SET_FALSE(0, "no-verify-script", &(o)->verify_script,                    \
				 "do not check that the command and --cwd exist on every host"), \
		MR_OPT_GROUP("Supervision"),                                                    \
		MR_OPT_BOOL(0, "tag-output", &(o)->tag_output,                                  \
			    "prefix every output line with '[rank N host] '"),                  \
		MR_OPT_CHOICE(0, "stdin", &(o)->stdin_mode, "all|0|none",                       \
			      "send our stdin to every rank, to rank 0, or to none (default: all)"), \
		MR_OPT_DURATION(0, "timeout", &(o)->timeout_ms, "SECS",                         \
				"stop every rank after SECS and exit 124"),                     \
		MR_OPT_BOOL(0, "verbose", &(o)->verbose,                                        \
			    "say what meshrun does; MLX_RING_VERBOSE / NCCL_DEBUG on the ranks"), \
		MR_OPT_END(),                                                                   \
	}

static const char usage_line[] = "meshrun [options] [--] COMMAND [ARGS...]";

static const char usage_trailer[] =
	"The command runs as given on every rank; a first word naming a file that is\n"
	"not executable or ends in .py runs with the Python above, as mlx.launch does.\n"
	"Hosts 127.0.0.1, localhost, ::1 and this machine's hostname (and -n without\n"
	"--hosts) run locally by fork/exec, others over ssh, in the same job.\n"
	"Inside a SLURM allocation (SLURM_JOB_ID set) srun starts the ranks: meshrun\n"
	"supplies the environment and ranks read SLURM_PROCID (mpirun: OMPI_COMM_WORLD_RANK);\n"
	"--launcher meshrun (or MESHRUN_LAUNCHER=meshrun) opts out.\n"
	"\n"
	"Exit status:\n"
	"  0      every rank exited 0\n"
	"  N      the exit status of the first rank that failed (128+S: killed by signal S);\n"
	"         every other rank is stopped (SIGTERM, then SIGKILL)\n"
	"  124    --timeout expired\n"
	"  128+S  meshrun got signal S (SIGINT, SIGTERM, SIGHUP); every rank was stopped\n"
	"  255    the launcher failed (host unreachable, checks before launch, lost rank)\n"
	"  2      usage error (options, hostfile, --env)\n";

void mr_launch_opts_init(struct mr_launch_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->repeat = 1;
	o->starting_port = 32323;
	o->connections_per_ip = 1;
	o->nccl_port = 12345;
	o->verify_script = true;
	o->stdin_mode = "all";
}

void mr_launch_opts_release(struct mr_launch_opts *o)
{
	mr_strvec_release(&o->envs);
	mr_strvec_release(&o->mpi_args);
	mr_strvec_release(&o->command);
}

int mr_launch_parse(int argc, char **argv, struct mr_launch_opts *o, struct meshrun_err *err)
{
	struct mr_opt opts[] = LAUNCH_OPTS(o);
	int rc;

	rc = mr_opt_parse(opts, argc, argv, MR_OPT_STOP_AT_NONOPT, NULL, &o->command, err);
	if (rc != MR_OPT_OK)
		return rc;
	if (!o->command.nr && !o->print_python)
		return mr_err_set(err, MESHRUN_E_USAGE, "no command given (meshrun [options] -- COMMAND)");
	return MR_OPT_OK;
}

void mr_launch_usage(FILE *f)
{
	struct mr_launch_opts o;
	struct mr_opt opts[] = LAUNCH_OPTS(&o);

	mr_opt_usage(f, usage_line, opts, usage_trailer);
}

/* For the docs (man page, reference, completion): the table over a scratch struct. */
const struct mr_optdoc_cmd *mr_launch_doc_cmd(void)
{
	static struct mr_launch_opts scratch;
	static const struct mr_opt opts[] = LAUNCH_OPTS(&scratch);
	static const struct mr_optdoc_cmd cmd = { NULL, usage_line, NULL, opts, usage_trailer, NULL };

	return &cmd;
}

/* The first executable NAME on PATH, into buf; false when there is none. */
static bool which(const char *name, char *buf, size_t n)
{
	const char *path = getenv("PATH");

	if (!path || !*name || strchr(name, '/'))
		return false;
	while (*path) {
		const char *e = strchr(path, ':');
		size_t len = e ? (size_t)(e - path) : strlen(path);
		struct stat st;

		snprintf(buf, n, "%.*s/%s", (int)len, len ? path : ".", name);
		if (!stat(buf, &st) && S_ISREG(st.st_mode) && !access(buf, X_OK))
			return true;
		if (!e)
			break;
		path = e + 1;
	}
	return false;
}

const char *mr_launch_python(const struct mr_launch_opts *o, char *buf, size_t n)
{
	if (o->python)
		return o->python;
	if (which("python3", buf, n))
		return buf;
	return "python3";
}

bool mr_launch_host_is_local(const char *host)
{
	return mr_hal_host_is_local(host); /* the hosts the auto hal runs by fork/exec */
}

static bool have_gpu(void)
{
	return !access("/proc/driver/nvidia/version", R_OK) || !access("/dev/nvidia0", F_OK);
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

	if ((rc = mr_hostfile_from_list(o->hosts ? o->hosts : "127.0.0.1", &list, err)) < 0) {
		mr_err_prefix(err, "--hosts");
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
	char buf[PATH_MAX], pybuf[PATH_MAX];
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
	} else if (which(cmd0, buf, sizeof(buf))) {
		if (mr_strvec_push(argv, buf) < 0)
			return nomem(err);
	} else if (mr_strvec_push(argv, cmd0) < 0) {
		/* not here: the check on every host (or exec) says whether it exists there */
		return nomem(err);
	}
	if (mr_strvec_pushv(argv, o->command.v + 1) < 0)
		return nomem(err);
	return 0;
}

static void make_token(char out[33])
{
	unsigned char r[16];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(r)) { /* no getrandom: time and pid are still unique per job */
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
		plan->all_local &= mr_launch_host_is_local(plan->hf->hosts[i].ssh);

	if (!backend && plan->hf->backend && *plan->hf->backend)
		backend = plan->hf->backend;
	if (!backend)
		backend = have_gpu() ? "nccl" : "ring";
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
