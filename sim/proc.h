/*
 * proc.h - running the helper programs meshsim drives (ip, ssh-keygen, sshd, tc),
 * several at once, with their output captured for error messages.
 *
 * A job is an argv (owned by the job: mr_sim_job_release() frees it) and a
 * label naming what it does for errors ("host 'h3': start sshd"). The runner
 * forks at most maxpar jobs at a time, resolves argv[0] through PATH (plus the
 * sbin folders) in the parent, merges each child's stdout and stderr into the
 * job's out buffer (capped at 64 KiB), and kills a job that runs past the
 * deadline. stdin of every job is /dev/null.
 *
 * mr_sim_run_jobs() returns 0 when every job exited 0; otherwise it lets the
 * started jobs finish, starts no new ones (unless MR_SIM_KEEP_GOING), and records the first failure as
 * "<label>: '<argv0>' exited with status N: <first line of output>".
 */
#ifndef MR_SIM_PROC_H
#define MR_SIM_PROC_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"

struct mr_sim_job {
	struct mr_strvec argv;
	char *label;
	/* filled by the runner */
	pid_t pid;
	int fd;                 /* read end of the output pipe while running */
	int status;             /* wait status once done */
	bool done, started;
	struct mr_buf out;
};

#define MR_SIM_JOB_INIT { MR_STRVEC_INIT, NULL, -1, -1, 0, false, false, MR_BUF_INIT }

/* A job from a label and argv strings (NULL-terminated varargs); xalloc. */
void mr_sim_job_set(struct mr_sim_job *j, const char *label, ...);
void mr_sim_job_release(struct mr_sim_job *j);

enum { MR_SIM_KEEP_GOING = 1 << 0 }; /* start every job even after a failure */

int mr_sim_run_jobs(struct mr_sim_job *jobs, size_t n, unsigned maxpar, int timeout_ms,
		    unsigned flags, struct meshrun_err *err);
/*
 * The same, calling on_done (may be NULL) once for every job as it ends: reaped
 * (j->status set), killed at the deadline (reported when reaped), or failed to
 * start (j->started false). Jobs never started after a failure are not reported.
 * on_done must not start jobs itself.
 */
int mr_sim_run_jobs_cb(struct mr_sim_job *jobs, size_t n, unsigned maxpar, int timeout_ms,
		       unsigned flags, void (*on_done)(struct mr_sim_job *j, void *ctx), void *ctx,
		       struct meshrun_err *err);

/* One command (label, argv...). Output (when out is non-NULL) is appended to out. */
int mr_sim_run(struct mr_buf *out, struct meshrun_err *err, const char *label, ...);

/* Path of prog found in PATH or the sbin folders (malloc'd), or NULL. */
char *mr_sim_which(const char *prog);

/* Exit code of a job's wait status (128+sig for a signal). */
int mr_sim_exit_code(int status);

#endif
