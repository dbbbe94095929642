/*
 * launch/opts.c - meshrun's option table (not config/opts.c, meshconfig's): parsing,
 * --help and the docs from one table. The job plan built from the options is plan.c.
 */
#include "common/compat.h"
#include "launch/launch.h"
#include "common/err.h"
#include "common/opt.h"
#include "common/optdoc.h"

/* The table is built per call: its value pointers are the fields of *o. */
#define LAUNCH_OPTS(o)                                                                          \
	{                                                                                       \
		MR_OPT_GROUP("Hosts"),                                                          \
		MR_OPT_STRING_D(0, "hosts", &(o)->hosts, "LIST", "127.0.0.1",                   \
				"comma-separated hosts: ssh names or IP addresses (the ring connects to the address, or to the one ssh reaches the name at)"), \
		MR_OPT_STRING(0, "hostfile", &(o)->hostfile, "FILE",                            \
			      "MLX hostfile (JSON, list or object form); wins over --hosts"),   \
		MR_OPT_INT_D('n', "repeat-hosts", &(o)->repeat, "N", 1, 65536, "1",             \
			     "repeat each host of --hosts N times (ranks per host)"),           \
		MR_OPT_CHOICE(0, "launcher", &(o)->launcher, "auto|meshrun|srun|mpirun",        \
			      "who starts the ranks (default: auto: srun when SLURM_JOB_ID is set, mpirun for --backend mpi, else meshrun)"), \
		MR_OPT_STRING(0, "shared-dir", &(o)->shared_dir, "DIR",                         \
			      "srun/mpirun with remote hosts: job files go here, a path every host sees (default: $MESHRUN_SHARED_DIR, else the working directory)"), \
		MR_SSH_OPTS(&(o)->ssh),                                                         \
		MR_OPT_GROUP("Backend and environment"),                                        \
		MR_OPT_CHOICE(0, "backend", &(o)->backend, "ring|mesh|jaccl|jaccl-ring|nccl|mpi", \
			      "distributed backend (default: the hostfile's, else nccl with a GPU, else ring; " \
			      "a ring hostfile whose hosts all have mesh_ips (a full mesh) runs mesh)"), \
		MR_OPT_LIST(0, "env", &(o)->envs, "K=V",                                        \
			    "set a variable on every rank, NAME=VALUE (repeatable; wins over the hostfile's envs and meshrun's own MESHRUN_* variables, which every rank gets)"), \
		MR_OPT_INT_D('p', "starting-port", &(o)->starting_port, "PORT", 1, 65535,       \
			     "32323", "ring: first port, +1 per IP and connection; jaccl: coordinator port"), \
		MR_OPT_INT_D(0, "connections-per-ip", &(o)->connections_per_ip, "N", 1, 1024,   \
			     "1", "ring: connections per IP address"),                          \
		MR_OPT_INT_D(0, "nccl-port", &(o)->nccl_port, "PORT", 1, 65535, "12345",        \
			     "nccl: port of rank 0"),                                           \
		MR_OPT_CHOICE(0, "mpi-impl", &(o)->mpi_impl, "openmpi|meshrun",                 \
			      "mpi: the MPI library the ranks load: openmpi (default: Open MPI's, ranks started by mpirun) or meshrun (libmeshrun-mpi: meshrun starts the ranks as for ring, no mpirun)"), \
		MR_OPT_LIST(0, "mpi-arg", &(o)->mpi_args, "ARGS",                               \
			    "mpi: arguments passed to mpirun (split as a shell would; repeatable)"), \
		MR_OPT_GROUP("Command"),                                                        \
		MR_OPT_STRING(0, "cwd", &(o)->cwd, "DIR",                                       \
			      "working directory of every rank (default: ours, where it exists)"), \
		MR_OPT_STRING(0, "python", &(o)->python, "PATH",                                \
			      "Python put in front of the command (default: none; a .py command runs with python3 on PATH)"), \
		MR_OPT_BOOL(0, "print-python", &(o)->print_python,                              \
			    "print that Python's sys.executable (how it was chosen on stderr) and exit"), \
		MR_OPT_SET_FALSE(0, "no-verify-script", &(o)->verify_script,                    \
				 "deprecated (gone from mlx.launch 0.32): do not check that the command and --cwd exist on every host"), \
		MR_OPT_GROUP("Supervision"),                                                    \
		MR_OPT_BOOL(0, "tag-output", &(o)->tag_output,                                  \
			    "prefix every output line with '[rank N host] '"),                  \
		MR_OPT_CHOICE(0, "stdin", &(o)->stdin_mode, "all|0|none",                       \
			      "send our stdin to every rank, to rank 0, or to none (default: all)"), \
		MR_OPT_DURATION(0, "timeout", &(o)->timeout_ms, "SECS",                         \
				"stop every rank after SECS and exit 124 (0: no limit, the default)"), \
		MR_OPT_BOOL(0, "verbose", &(o)->verbose,                                        \
			    "say what meshrun does; MLX_RING_VERBOSE / NCCL_DEBUG on the ranks"), \
		MR_OPT_END(),                                                                   \
	}

static const char usage_line[] = "meshrun [options] [--] COMMAND [ARGS...]";

static const char usage_trailer[] =
	"The command runs as given on every rank, after --python when given (as\n"
	"mlx.launch 0.32); without --python a first word naming a file that is not\n"
	"executable or ends in .py runs with python3 on PATH (as mlx.launch 0.31).\n"
	"COLUMNS and LINES are our terminal's unless the hostfile or --env set COLUMNS.\n"
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
	if (!o->command.nr && !o->print_python && !mr_ssh_opts_wants_stop(&o->ssh))
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
