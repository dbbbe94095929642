/*
 * launch.h - meshrun, the launcher: options, the job plan, and the run.
 *
 *   main() -> mr_launch_parse(argc, argv, &o, &err)   the option table (opts.c)
 *          -> mr_launch_plan(&o, &plan, &err)          hosts, backend, env, command (plan.c)
 *          -> mr_launch_run(&o, &plan)                 checks, files, spawn, supervise (run.c)
 *          -> exit code (below)
 *
 * The module's files (this header maps them; calls go down the list only):
 *   main.c       the program: parse, plan, run, exit code
 *   run.c        one job from plan to exit code over the hal (mr_launch_run)
 *   plan.c       the job plan: hosts, their topology, backend, environment, command, token
 *   hosts.c      the address of a host given by name (mr_launch_host_addrs)
 *   extern.c     srun / mpirun as the launcher (extern.h)
 *   supervise.c  the poll loop over the ranks: output, stdin, signals (supervise.h)
 *   env.c        the ranks' environment per backend, the MLX contract (env.h)
 *   opts.c       the option table: parsing, --help, the docs
 *   hints.h      what meshrun tells the user to do next (checked against the table)
 *
 * Exit codes (the contract in --help and docs/):
 *   0    every rank exited 0
 *   N    the status of the first rank that failed; 128+S when it was killed by signal S
 *   124  --timeout expired (every rank stopped)
 *   128+S meshrun itself got SIGINT/SIGTERM/SIGHUP (every rank stopped)
 *   255  the launcher failed: a host unreachable, a check before launch failed,
 *        a rank's connection lost without an exit status
 *   2    usage: bad flags, bad hostfile, bad --env
 *
 * Ownership: struct mr_launch_opts points into argv and owns its vectors
 * (mr_launch_opts_release). struct mr_launch_plan owns everything in it
 * (mr_launch_plan_release).
 */
#ifndef MR_LAUNCH_H
#define MR_LAUNCH_H

#include "common/compat.h"
#include "common/strvec.h"
#include "hal/hal.h"
#include "hal/ssh_opts.h"
#include "hostfile/hostfile.h"
#include "launch/env.h"
#include "launch/extern.h"
#include "meshrun/err.h"

#include <limits.h>

enum { MR_LAUNCH_EXIT_USAGE = 2, MR_LAUNCH_EXIT_TIMEOUT = 124, MR_LAUNCH_EXIT_FAIL = 255 };

enum mr_stdin_mode { MR_STDIN_ALL = 0, MR_STDIN_RANK0, MR_STDIN_NONE };

struct mr_launch_opts {
	const char *hosts;          /* --hosts (default 127.0.0.1) */
	const char *hostfile;       /* --hostfile */
	int repeat;                 /* -n/--repeat-hosts (1) */
	const char *backend;        /* --backend, NULL: the hostfile's, else nccl/ring */
	struct mr_strvec envs;      /* --env K=V */
	const char *cwd;            /* --cwd */
	const char *python;         /* --python */
	bool print_python;          /* --print-python */
	int starting_port;          /* --starting-port/-p (32323) */
	int connections_per_ip;     /* --connections-per-ip (1) */
	int nccl_port;              /* --nccl-port (12345) */
	struct mr_strvec mpi_args;  /* --mpi-arg */
	const char *mpi_impl;       /* --mpi-impl openmpi|meshrun (NULL: openmpi) */
	const char *self;           /* argv[0]: finds libmeshrun-mpi next to us (plan.c) */
	bool verbose;               /* --verbose */
	bool verify_script;         /* unset by --no-verify-script */
	bool tag_output;            /* --tag-output */
	const char *stdin_mode;     /* --stdin all|0|none */
	int64_t timeout_ms;         /* --timeout (0: none) */
	struct mr_ssh_opts ssh;     /* --ssh-config, --ssh, --persist, --known-hosts, ... */
	const char *launcher;       /* --launcher auto|meshrun|srun|mpirun (NULL: auto) */
	const char *shared_dir;     /* --shared-dir: job files under srun/mpirun (extern.h) */
	struct mr_strvec command;   /* what follows the options or "--" */
};

struct mr_launch_plan {
	struct mr_hostfile *hf;      /* one host entry per rank (-n applied) */
	enum mr_backend backend;
	struct mr_launch_topo topo;  /* the hostfile's topology, asked once (env.h) */
	enum mr_stdin_mode stdin_mode;
	struct mr_strvec envs;       /* hostfile envs then --env, checked */
	struct mr_strvec argv;       /* the command as it will run */
	char token[33];              /* MESHRUN_JOB_TOKEN */
	struct mr_launch_env env;
	bool all_local;              /* every host is 127.0.0.1/localhost/::1 */
	enum mr_launcher launcher;   /* who starts the ranks (extern.h) */
	char mpi_libname[PATH_MAX];  /* --mpi-impl meshrun: libmeshrun-mpi's path; "" otherwise */
	struct mr_hal_opts ho;       /* the ssh part of the hal's options (mr_ssh_opts_apply) */
	struct mr_buf addr_note;     /* a host without a ring address (mr_launch_host_addrs) */
};

void mr_launch_opts_init(struct mr_launch_opts *o);
void mr_launch_opts_release(struct mr_launch_opts *o);
/* MR_OPT_OK, MR_OPT_HELP, MR_OPT_VERSION or MESHRUN_E_USAGE. */
int mr_launch_parse(int argc, char **argv, struct mr_launch_opts *o, struct meshrun_err *err);
void mr_launch_usage(FILE *f);
/* The option table and --help text as documentation (common/optdoc.h). */
struct mr_optdoc_cmd;
const struct mr_optdoc_cmd *mr_launch_doc_cmd(void);
/* The Python a ".py" command runs with: --python, else python3 on PATH (plan.c). */
const char *mr_launch_python(const struct mr_launch_opts *o, char *buf, size_t n);
/* --print-python: that Python's sys.executable (what MLX prints) on out, and how
 * it was chosen (--python, python3 on PATH, the shim it resolves) on how; 0, or 1
 * when there is none. */
int mr_launch_print_python(const struct mr_launch_opts *o, FILE *out, FILE *how);

/* plan.c: resolve hosts, backend, environment and command (hosts that
 * mr_hal_host_is_local() names run by fork/exec). Errors are MESHRUN_E_USAGE. */
int mr_launch_plan(const struct mr_launch_opts *o, struct mr_launch_plan *plan,
		   struct meshrun_err *err);
void mr_launch_plan_release(struct mr_launch_plan *plan);

/*
 * Give every host of hf without "ips" (an ssh name from --hosts, a hostfile's
 * "ips": []) the address ssh reaches it at (hosts.c: 127.0.0.1 when all_local,
 * else ssh_config's HostName through `ssh -G`, else the name's address here);
 * a name that resolves to nothing keeps its name, and note (replaced) says so
 * with what to do, for the caller to print once the hosts were reached. Never
 * fails a job for it: 0, or MESHRUN_E_NOMEM. ssh_config: --ssh-config (may be NULL).
 */
int mr_launch_host_addrs(struct mr_hostfile *hf, bool all_local, const char *ssh_config,
			 struct mr_buf *note, struct meshrun_err *err);

/*
 * Whether dir (a meshrun.* job directory) outlived its watchdog: ours, with a
 * watchdog mark (hal.h: MR_HAL_WATCHDOG_MARK) naming this host (uname -n) and
 * a pid that no longer exists. Without a mark, for another host or a live pid:
 * false (never a live job's directory). The all-local path sweeps with it;
 * hal/sh.h's mr_hal_setup_script applies the same rule on remote hosts.
 */
bool mr_launch_dir_is_stale(const char *dir);

/* Run the job to its end; returns the exit code above. Prints its own errors. */
int mr_launch_run(const struct mr_launch_opts *o, struct mr_launch_plan *plan);

#endif
