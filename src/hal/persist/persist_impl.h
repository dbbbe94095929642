/*
 * persist_impl.h - what the persist client's files share (internal to src/hal;
 * the daemon, persist_daemon.c, does not include it):
 *
 *   persist.c       the hal ops (mr_hal_new_persist, mr_hal_persist_resolve): each
 *                   builds its frame in h->out; the jobs (struct pjob) it creates,
 *                   run deadlines, procs and their backlogs
 *   persist_conn.c  the connection to the daemon: the socket's path
 *                   (mr_hal_persist_path), reaching or starting the daemon, HELLO,
 *                   sending h->out, reading and handling the daemon's frames
 *                   (output and exits into jobs, replies into h->wait), the
 *                   broken state; mr_hal_persist_stop
 *
 * Calls go down: persist.c -> persist_conn.c (persist_conn.c never creates a job;
 * it only finishes them).
 *
 *   struct persist_hal                    struct pjob (one per command/process)
 *     fd: the daemon's socket               id: ours, in every frame about it
 *     in: bytes read, not yet a frame       cmd (run) or proc (spawn)
 *     jobs: what the daemon runs for us     pout/perr/exit until delivered
 *
 * Ownership: h owns its socket, path, buffers and every pjob on h->jobs (calloc'd
 * by persist.c, freed with mr_ps_job_free once unlinked). A run job (j->cmd set)
 * is freed as its result is delivered: mr_ps_job_exit on it, and so any
 * mr_ps_pull, mr_ps_request or mr_ps_set_broken, may free it; after those, find
 * it again by id. A proc's job goes with the proc (persist.c proc_forget). A
 * struct reply is the waiter's (on its stack); its errs and gaps arrays are the
 * caller's, and the gaps strings that RESOLVED fills in are malloc'd for the
 * caller to free.
 */
#ifndef MR_HAL_PERSIST_IMPL_H
#define MR_HAL_PERSIST_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/err.h"
#include "hal/hal_impl.h"

#include <stdint.h>

struct persist_proc;

struct pjob {
	struct pjob *next;
	uint32_t id;
	struct mr_hal_cmd *cmd;       /* run: where results go; NULL once final */
	struct persist_proc *proc;    /* spawn: the proc (NULL for run) */
	const char *host;
	int64_t start_ms, deadline_ms;
	struct mr_buf pout, perr;     /* proc: output not yet delivered */
	bool done;
	int hal_rc, status, sig;
	struct meshrun_err err;
};

struct persist_proc {
	struct mr_proc base;
	struct pjob *job;
};

/* The REPLY or CONNECTED we wait for. */
struct reply {
	uint32_t id;
	uint8_t type;
	bool got;
	struct meshrun_err err;
	struct meshrun_err *errs;     /* CONNECTED, RESOLVED: one per host */
	char **gaps;                  /* RESOLVED: one per host (malloc'd or NULL) */
	size_t nerrs;
};

struct persist_hal {
	struct mr_hal base;
	int fd;
	char *path;
	uint32_t next_id;
	struct mr_buf in, out;
	size_t in_off;                /* frames of in before this are handled; shared
				       * by a pull and one nested in a callback of its
				       * dispatch (a waited request), so neither loses
				       * its place when the other consumes in */
	struct pjob *jobs;
	struct reply *wait;           /* the reply being waited for, or NULL */
	bool broken;
	struct meshrun_err broken_err;
	struct mr_pollset ps;
};

#define to_persist_hal(h) mr_container_of(h, struct persist_hal, base)
#define to_persist_proc(p) mr_container_of(p, struct persist_proc, base)

/* ---- persist_conn.c ---------------------------------------------------------- */

/* Connect to the daemon at path (opts for a daemon started here): 0 with *fd;
 * when nobody listens, start one under path.lock if start, else 0 with *fd left
 * as it was (-1: nobody there); < 0 with err. */
int mr_ps_reach_daemon(const char *path, const struct mr_hal_opts *opts, bool start, int *fd,
		       struct meshrun_err *err);
/* HELLO (idle_ms: how long the daemon stays after its last client; 0 leaves it
 * as it is) and its HELLO_OK, within a bounded time: 0, or < 0 with err. */
int mr_ps_greet(struct persist_hal *h, int64_t idle_ms, struct meshrun_err *err);
/* Send b's frames within the REPLY bound and empty b (also on failure): 0, or -1
 * when not all of it went (the caller breaks h). */
int mr_ps_send_all(struct persist_hal *h, struct mr_buf *b);
/* Read what is there (wait up to timeout_ms: 0 none, -1 forever) and handle its
 * frames; 0, or -1 when poll failed. Breaks h when the daemon is gone. */
int mr_ps_pull(struct persist_hal *h, int timeout_ms);
/* Send h->out, then wait (bounded) for *w's REPLY, CONNECTED or RESOLVED: 0, the
 * daemon's error (copied into err), or h's broken error. */
int mr_ps_request(struct persist_hal *h, struct reply *w, struct meshrun_err *err);
/* The daemon is gone (why): every unfinished job fails, naming its host. */
void mr_ps_set_broken(struct persist_hal *h, const char *why);
/* Record j's end (once; e is copied when hal_rc < 0); a run job's result is
 * delivered and the job unlinked and freed. */
void mr_ps_job_exit(struct persist_hal *h, struct pjob *j, int hal_rc, int status, int sig,
		    const struct meshrun_err *e);
/* Take j off h->jobs (not freed). */
void mr_ps_job_unlink(struct persist_hal *h, struct pjob *j);
/* Free j and its buffers (unlink it first). */
void mr_ps_job_free(struct pjob *j);

#endif
