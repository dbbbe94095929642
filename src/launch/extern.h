/*
 * extern.h - meshrun under an existing process starter: SLURM's srun or Open MPI's
 * mpirun start the ranks; meshrun only supplies the environment and supervises
 * that one local process (its output, stdin, signals, --timeout, exit code).
 *
 * Which launcher (--launcher, mr_launch_pick_launcher):
 *   meshrun  our own: fork/exec for local hosts, libssh2 for the others (run.c).
 *   srun     --launcher srun; and the default ("auto") when the environment
 *            variable SLURM_JOB_ID is set and not empty (inside salloc/sbatch).
 *            Opt out with --launcher meshrun (or MESHRUN_LAUNCHER=meshrun).
 *   mpirun   --launcher mpirun; --backend mpi always runs under mpirun (or srun
 *            when asked for explicitly).
 *
 * Environment: one command line starts every rank, so there is no per-rank
 * variable: every rank gets the job's common variables (env.h), VAR=<dir>/<file>
 * for the backend's files and MESHRUN_JOB_TOKEN, and no MLX_RANK: ranks take
 * their number from SLURM_PROCID (srun) or OMPI_COMM_WORLD_RANK (mpirun), which
 * libmeshrun reads when MLX_RANK is absent. Backends that need MLX_RANK itself
 * (jaccl, jaccl-ring, nccl) are refused with a usage error.
 *   srun:   srun --ntasks=N --nodelist=H1,H2 --distribution=arbitrary
 *                --kill-on-bad-exit=1 --export=ALL [--chdir=CWD] -- CMD...
 *           with SLURM_HOSTFILE=<file: one host per rank, in rank order> and the
 *           variables in srun's own environment (--export=ALL passes them on;
 *           "--export=ALL,K=V" cannot carry a value that holds a comma). Local
 *           names (127.0.0.1, localhost, ::1) become this machine's hostname.
 *   mpirun: mr_launch_mpi_argv below (the mpi backend's command line), with
 *           "-x K=V" for every variable and a "host slots=N" hostfile.
 *
 * Files (the ring's MLX_HOSTFILE): srun and mpirun copy no files, so meshrun
 * writes them once, here, before the start, into a directory that must be at the
 * same path on every host:
 *   - every host local: a new directory under $TMPDIR (or /tmp);
 *   - else under --shared-dir DIR, $MESHRUN_SHARED_DIR, or our working
 *     directory (in that order). That directory must be on a network filesystem
 *     (statfs: NFS, Lustre, GPFS, BeeGFS, CephFS, CIFS/SMB, AFS, 9p, FUSE, ...):
 *     our working directory on a local filesystem is an error; a directory the
 *     user named (--shared-dir, $MESHRUN_SHARED_DIR) on a local filesystem only
 *     warns (the user says it is shared: the same image on every node, or
 *     meshsim's namespaces, which share this machine's filesystem).
 *   The directory is removed when the job ends.
 *
 * --ssh-config (or $MESHRUN_SSH_CONFIG), --known-hosts and --accept-new-hostkeys
 * with remote hosts under mpirun become "--mca plm_rsh_args '-F FILE -o
 * UserKnownHostsFile=KH -o StrictHostKeyChecking=accept-new'"
 * (mr_launch_mpi_ssh_arg), so that mpirun's ssh reaches the hosts the same way
 * meshrun's own launcher would.
 *
 * --backend mpi: when a host gets more ranks than this machine has CPUs (we
 * assume the hosts alike), "--mca mpi_yield_when_idle 1" is added unless the
 * user set mpi_yield_when_idle (--mpi-arg, or OMPI_MCA_mpi_yield_when_idle):
 * oversubscribed Open MPI ranks otherwise busy-poll and starve each other.
 *
 * Ownership: every function appends to the caller's vectors/buffers; nothing is
 * kept.
 */
#ifndef MR_LAUNCH_EXTERN_H
#define MR_LAUNCH_EXTERN_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "hostfile/hostfile.h"
#include "launch/env.h"
#include "meshrun/err.h"

struct mr_launch_opts;
struct mr_launch_plan;

enum mr_launcher {
	MR_LAUNCHER_MESHRUN = 0,
	MR_LAUNCHER_SRUN,
	MR_LAUNCHER_MPIRUN,
};

const char *mr_launcher_name(enum mr_launcher l);

/*
 * Decide the launcher. opt: --launcher (NULL or "auto": MESHRUN_LAUNCHER's value
 * given as env_launcher, else srun when slurm_job_id is not empty, else meshrun;
 * the mpi backend: mpirun). Errors (MESHRUN_E_USAGE): an unknown name, --backend
 * mpi with --launcher meshrun, a backend that needs MLX_RANK under srun/mpirun.
 */
int mr_launch_pick_launcher(const char *opt, const char *env_launcher, const char *slurm_job_id,
			    enum mr_backend backend, enum mr_launcher *out, struct meshrun_err *err);

/*
 * The variables every rank gets under an external launcher: e's common ones,
 * VAR=<dir>/<name> per file (dir NULL only when e has no files), and
 * MESHRUN_JOB_TOKEN=token (when token is not NULL). -1 with errno on ENOMEM/EINVAL.
 */
int mr_launch_extern_env(const struct mr_launch_env *e, const char *dir, const char *token,
			 struct mr_strvec *out);

/*
 * SLURM's view of hf: nodelist gets the distinct hosts joined by ',' (first
 * appearance order), hostfile one line per rank; local names become self.
 */
int mr_launch_slurm_hosts(const struct mr_hostfile *hf, const char *self, struct mr_buf *nodelist,
			  struct mr_buf *hostfile);

/* The srun command line above (cwd may be NULL). */
int mr_launch_srun_argv(const char *srun, size_t nranks, const char *nodelist, const char *cwd,
			char *const *cmd, struct mr_strvec *out, struct meshrun_err *err);

/*
 * True when --backend mpi should add "--mca mpi_yield_when_idle 1": some host of
 * hf has more ranks than ncores, and neither mpi_args nor env_value (the value of
 * OMPI_MCA_mpi_yield_when_idle, or NULL) sets it.
 */
bool mr_launch_mpi_wants_yield(const struct mr_hostfile *hf, long ncores,
			       const struct mr_strvec *mpi_args, const char *env_value);

/*
 * Open MPI's mpirun refuses root with a 15-line message. Returns the one line
 * that says how to allow it, or NULL when it will run: not root, or the mpirun
 * is not Open MPI (version_out, what `mpirun --version` printed, lacks "(Open
 * MPI)"), or --allow-run-as-root is in mpi_args, or allow_env and confirm_env
 * (OMPI_ALLOW_RUN_AS_ROOT, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM) are both "1".
 */
const char *mr_launch_mpi_root_refusal(bool root, const char *version_out,
				       const struct mr_strvec *mpi_args, const char *allow_env,
				       const char *confirm_env);

/*
 * --ssh-config under mpirun: Open MPI starts its daemons (orted) with OpenSSH's
 * ssh (plm_rsh), which reads ~/.ssh/config, not the file meshrun was given. When
 * When there is something to pass (ssh_config: --ssh-config, else
 * $MESHRUN_SSH_CONFIG, NULL when every host is local; known_hosts:
 * --known-hosts; accept_new: --accept-new-hostkeys; NULL/"" and false: nothing)
 * and neither mpi_args (the --mpi-arg strings) nor env_value (the value of
 * OMPI_MCA_plm_rsh_args, or NULL) sets plm_rsh_args, one --mpi-arg string is
 * appended to out (the ssh options shell-quoted as one word; mr_launch_mpi_argv
 * splits it):
 *   --mca plm_rsh_args '-F FILE -o UserKnownHostsFile=KH -o StrictHostKeyChecking=accept-new'
 * with only the parts given. Returns 1 when it was appended, 0 when not needed.
 * Open MPI splits plm_rsh_args at whitespace, so a path containing whitespace
 * is MESHRUN_E_USAGE naming it; MESHRUN_E_NOMEM on allocation failure.
 */
int mr_launch_mpi_ssh_arg(const char *ssh_config, const char *known_hosts, bool accept_new,
			  const struct mr_strvec *mpi_args, const char *env_value, struct mr_strvec *out,
			  struct meshrun_err *err);

/*
 * mpirun's hostfile: one "<ssh> slots=<count>" line per distinct host, in order
 * of first appearance (Python's Counter order).
 */
int mr_launch_mpi_hostfile(const struct mr_hostfile *hf, struct mr_buf *out);

/*
 * Split s into words as Python's shlex.split does (POSIX mode: quotes, backslash
 * escapes, no expansion); appended to out. An unclosed quote or a trailing
 * backslash is MESHRUN_E_USAGE naming s.
 */
int mr_launch_shlex_split(const char *s, struct mr_strvec *out, struct meshrun_err *err);

/*
 * mlx.launch's mpirun command line:
 *   mpirun --output :raw --hostfile HF [-cwd CWD] (-x K=V)... <mpi args split> -- cmd...
 * raw_output false leaves out "--output :raw", which Open MPI before 5 rejects.
 */
int mr_launch_mpi_argv(const char *mpirun, bool raw_output, const char *hostfile_path, const char *cwd,
		       const struct mr_strvec *env, const struct mr_strvec *mpi_args,
		       char *const *cmd, struct mr_strvec *out, struct meshrun_err *err);

/* Run the job under srun/mpirun (plan->launcher); returns the exit code (launch.h). */
int mr_launch_run_extern(const struct mr_launch_opts *o, struct mr_launch_plan *plan);

#endif
