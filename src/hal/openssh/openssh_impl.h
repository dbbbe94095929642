/*
 * openssh_impl.h - what the OpenSSH backend's files share (internal to
 * src/hal/openssh; the design is in openssh.c's top comment):
 *
 *   openssh.c        the hal ops, the wait (poll set, timers: pump) and the
 *                    control socket directory
 *   openssh_child.c  our ssh processes (struct och) and what advances them
 *                    without waiting: per host a control master (struct ohost),
 *                    per command a multiplexed client (struct ojob), started,
 *                    timed, read, written and ended by mr_os_step() and
 *                    mr_os_service()
 *
 * Calls go down: openssh.c -> openssh_child.c, which knows no op and polls no
 * fd (only mr_os_hosts_close() waits, bounded, for the masters to leave).
 *
 * Ownership: the hal (struct os_hal) owns its hosts (oh->hosts: made by
 * mr_os_host_get(), freed by os_free() after mr_os_hosts_close()) and its jobs
 * (oh->jobs: made by mr_os_job_new(), freed by mr_os_reap_jobs() once finished
 * and no proc holds them). A host's master (h->m) and a job's client (j->c) own
 * their pid and fds: mr_os_och_kill() kills, reaps and closes them,
 * mr_os_och_close() only closes. A proc (struct os_proc, openssh.c) and its job
 * point to each other until the proc is released (j->proc becomes NULL).
 */
#ifndef MR_HAL_OPENSSH_IMPL_H
#define MR_HAL_OPENSSH_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "hal/hal_impl.h"
#include "hal/sh.h"

#include <sys/types.h>

#define OS_TICK_MS 20             /* exit checks without pidfds */
#define OS_CHUNK 65536
#define OS_DRAIN_MS 2000          /* pipes still open after the client exited */
#define OS_ERR_MAX 4096           /* master's stderr kept for the message */
#define OS_EXIT_WAIT_MS 3000      /* ssh -O exit and the masters leaving */

/* One ssh process of ours. */
struct och {
	pid_t pid;        /* > 0 until reaped */
	int pidfd, in_fd, out_fd, err_fd;
	bool reaped;
	int wstatus;
	int64_t reaped_ms;
};

enum host_state { H_NEW, H_STARTING, H_READY, H_FAILED };

struct ohost {
	struct os_hal *oh;
	struct ohost *next;
	char *name;
	char *ctl;                  /* control path */
	enum host_state st;
	struct och m;               /* the master; m.in_fd feeds the watchdog */
	struct mr_buf mout, merr;   /* stdout until the marker; stderr (capped) */
	struct mr_buf wdq;          /* watchdog lines not yet written */
	int64_t deadline;
	struct meshrun_err err;
	bool wanted;                /* mr_hal_connect waits for it */
};

enum ojob_kind { J_RUN, J_PROC, J_KILL };

struct ojob {
	struct mr_hal_job base;     /* command line, stdin, marker, pgid, end, output (hal_impl.h) */
	struct ohost *h;
	struct ojob *next;          /* in the hal's list */
	enum ojob_kind kind;
	bool started;               /* its client was started (or it failed before) */
	bool ended;                 /* the client is reaped and its pipes drained */
	bool finished;              /* nothing more to do: freed once no proc holds it */
	struct och c;
	struct os_proc *proc;       /* proc: its owner (NULL once released) */
	int64_t kill_at;
	bool timed_out;
};

struct os_proc {
	struct mr_proc base;
	struct ojob *job;
};

struct os_hal {
	struct mr_hal base;
	char *ssh;                  /* the client binary */
	char *dir;                  /* control socket directory */
	unsigned seq;
	struct ohost *hosts;
	struct ojob *jobs;
	struct mr_pollset ps;
	unsigned changes;           /* bumped when a wait may be over: see pump() */
};

#define to_os_hal(h) mr_container_of(h, struct os_hal, base)
#define to_os_proc(p) mr_container_of(p, struct os_proc, base)


/* ---- openssh_child.c: ssh processes ----------------------------------------- */

/* Close its fds (pidfd, stdin, stdout, stderr); the process is left alone. */
void mr_os_och_close(struct och *c);
/* Kill and reap at once (no grace: used after the remote side had its chance). */
void mr_os_och_kill(struct och *c);
/* Write what the fd takes from b; a peer that is gone closes the fd and empties b. */
void mr_os_write_some(int *fd, struct mr_buf *b);

/* ---- openssh_child.c: hosts ------------------------------------------------- */

/* The host called name, or NULL. */
struct ohost *mr_os_host_find(struct os_hal *oh, const char *name);
/* The host called name, made (H_NEW, no master yet) on first use. */
int mr_os_host_get(struct os_hal *oh, const char *name, struct ohost **out, struct meshrun_err *err);
/* Stop every master: EOF to its watchdog, `ssh -O exit` (wait bounded), reap,
 * unlink its control socket. The hosts stay in oh->hosts. */
void mr_os_hosts_close(struct os_hal *oh);

/* ---- openssh_child.c: jobs -------------------------------------------------- */

/* A job of kind running cmdline (copied) on h, queued at the tail of oh->jobs;
 * NULL when out of memory. */
struct ojob *mr_os_job_new(struct os_hal *oh, struct ohost *h, enum ojob_kind kind, const char *cmdline);
/* Record e as j's result (once) and report it. */
void mr_os_job_fail(struct ojob *j, const struct meshrun_err *e);
/* Queue `kill -SIG -PGID` on h (a J_KILL job); NULL when out of memory. */
struct ojob *mr_os_queue_kill(struct ohost *h, long pgid, int sig);
/* Nothing more will happen to j: a proc's job is finished when the proc goes. */
void mr_os_job_ended(struct ojob *j);
/* A proc's undelivered output on that stream (is_err: stderr) is over its cap. */
bool mr_os_job_throttled(const struct ojob *j, bool is_err);

/* ---- openssh_child.c: stepping ---------------------------------------------- */

/* Everything that needs no waiting: start masters and clients, timers, ends. */
void mr_os_step(struct os_hal *oh);
/* Read and write whatever is ready, without waiting (all fds are non-blocking). */
void mr_os_service(struct os_hal *oh);
/* Free the jobs nobody needs any more (finished, or a proc's that was released). */
void mr_os_reap_jobs(struct os_hal *oh);

#endif
