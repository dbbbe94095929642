/*
 * hal_impl.h - what a hal backend implements, and the parts every backend shares.
 * Internal to src/hal: nothing outside this folder includes it.
 *
 * How a backend is written (the six: local.c, replay.c and mux.c here, and one
 * folder per remote transport: openssh/, persist/ (client, daemon, frames) and
 * libssh2/ (ssh.c, ssh_chan.c, ssh_conn.c, mapped by libssh2/ssh_impl.h)):
 *
 *   struct ssh_hal {                 struct ssh_proc {
 *           struct mr_hal base;              struct mr_proc base;
 *           ... backend state ...            ... backend state ...
 *   };                               };
 *   #define to_ssh_hal(h)  mr_container_of(h, struct ssh_hal, base)
 *   #define to_ssh_proc(p) mr_container_of(p, struct ssh_proc, base)
 *
 *   static const struct mr_hal_ops ssh_ops = { .name = "ssh", .kind = MR_HAL_SSH,
 *                                              .run = ssh_run, ... };
 *
 *   int mr_hal_new_ssh(struct mr_hal **out, const struct mr_hal_opts *opts, ...)
 *   {
 *           struct ssh_hal *s = calloc(1, sizeof(*s));
 *           if (!s || mr_hal_init(&s->base, &ssh_ops, opts) < 0) ... ENOMEM
 *           ...
 *           *out = &s->base;
 *   }
 *
 * The public functions in hal.c validate arguments and then call the ops; the
 * ops can rely on the following:
 *
 *   run          cmds arrive prepared by mr_hal_cmd_prepare(): outputs zeroed,
 *                out/errout empty with their cap (max) set to opts.max_output.
 *                An entry whose hal_rc is already < 0 failed validation in hal.c
 *                (empty argv, ...): skip it. For every other entry the backend
 *                sets hal_rc/status/signal/err/elapsed_ms and appends output with
 *                mr_hal_append_capped() (output past the cap is read and dropped,
 *                never an error). A per-command failure goes into that command;
 *                the return value is 0, or < 0 only when the hal itself broke
 *                (then err says why). Deadline: mr_hal_cmd_timeout_ms().
 *                As soon as a command's result is final, call
 *                mr_hal_cmd_done(hal, cmd) (it runs the caller's on_done of
 *                mr_hal_run_cb; a no-op for plain mr_hal_run). hal.c reports
 *                every command the backend did not report when run returns, so
 *                a backend that never calls it is correct, only coarser.
 *   connect      optional (NULL: every host counts as reachable). errs[i] are
 *                cleared by hal.c before the call; return the number of failures.
 *   spawn        allocate the backend proc, call mr_proc_init(&p->base, hal, sp)
 *                (links it into hal->procs, copies host/events/user, builds
 *                p->base.cmdline), start it, *out = &p->base. On failure undo
 *                with mr_proc_release_common() + free and return < 0 with err.
 *   proc_write   queue a copy of the bytes (hal.c has already rejected len 0 and
 *                writes after close_stdin or after exit).
 *   proc_close_stdin   close stdin once the queue is written (hal.c sets
 *                p->stdin_closed after a successful call).
 *   proc_signal  signal the whole process group (hal.c rejects exited procs).
 *   poll         wait up to timeout_ms (-1: until something happens; but return
 *                at once when there is nothing that could happen: no running
 *                proc and no watched fd) on every running proc AND on the
 *                watched fds (mr_hal_watch_add_pollfds()/mr_hal_watch_dispatch()),
 *                then deliver events only through mr_proc_deliver_stdout/
 *                _stderr/_exit(). Return 0 or < 0 (EINTR is 0, not an error).
 *                hal.c counts the running procs for the caller. Callbacks may
 *                call mr_hal_spawn (a new proc: keep iterating over a snapshot),
 *                mr_proc_write/close_stdin/signal, and mr_proc_release (hal.c
 *                defers that until poll returns, so pointers stay valid).
 *   poll_prepare optional; the mux backend (mux.c) uses it to wait on two backends
 *                in one poll(). Without blocking and without delivering any event:
 *                do the work that needs no waiting, append the fds the backend's
 *                poll would wait on to ps (not the watched fds: the caller adds its
 *                own) and lower *timeout_ms (-1: no limit yet) to when the backend
 *                must run next (0: it has events to deliver now). The caller then
 *                poll()s and calls mr_hal_poll(hal, 0) on the backend, which
 *                delivers what became ready. Return 0 or MESHRUN_E_NOMEM. A backend
 *                without it is polled every MR_HAL_MUX_TICK_MS.
 *   remove_at_exit  optional (NULL: ignored); hal.c has validated dir and host.
 *   remove_now   optional (NULL: nothing); dir as given to remove_at_exit; no wait.
 *   removes_at_free optional (NULL: false); see mr_hal_removes_at_free().
 *   makes_dirs   optional (NULL: false); see mr_hal_makes_dirs().
 *   proc_release kill (if still running: TERM, MR_HAL_KILL_GRACE_MS, KILL, all to
 *                the group) and reap the process, no callbacks, then
 *                mr_proc_release_common() and free the backend struct.
 *   free         kill and reap every proc still in hal->procs the same way (all
 *                together, one grace period, no callbacks), release them, free
 *                backend state, call mr_hal_release_common(), free the struct.
 *
 * Ownership: the common parts (opts strings, procs list, watch list) belong to
 * the struct mr_hal; backends never free them directly.
 */
#ifndef MR_HAL_IMPL_H
#define MR_HAL_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "hal/hal.h"
#include "hal/sh.h"

#include <poll.h>

#define mr_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Grace between SIGTERM and SIGKILL when the hal kills a process group. */
#define MR_HAL_KILL_GRACE_MS 500
/* A host that has not run a kill we sent it (channel opened, command exited)
 * within this is unresponsive (stopped, powered off, cut off while its TCP
 * connection looks open): its connection counts as lost, so its ranks get an
 * error naming it instead of the launcher waiting on them. */
#define MR_HAL_ANSWER_MS 3000
/* Defaults of struct mr_hal_opts (filled in by mr_hal_init()). */
#define MR_HAL_DEF_CONNECT_TIMEOUT_MS 10000
#define MR_HAL_DEF_RUN_TIMEOUT_MS 30000
#define MR_HAL_DEF_MAX_OUTPUT ((size_t)16 << 20)
#define MR_HAL_DEF_MAX_PARALLEL 64
/* How often the mux polls an inner backend that has no poll_prepare (replay). */
#define MR_HAL_MUX_TICK_MS 10

struct mr_pollset;

/* An ops entry that is true for every host (makes_dirs, removes_at_free). */
bool mr_hal_yes(struct mr_hal *hal, const char *host);

/* Which backend an ops table is: code that must tell backends apart asks this,
 * never the name (which is for people: messages, --verbose). */
enum mr_hal_kind {
	MR_HAL_LOCAL,
	MR_HAL_SSH,
	MR_HAL_OPENSSH,
	MR_HAL_PERSIST,
	MR_HAL_REPLAY,
	MR_HAL_MUX,
};

struct mr_hal_ops {
	const char *name; /* "local", "ssh", "openssh", "persist", "replay", "auto" */
	enum mr_hal_kind kind;
	int (*run)(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n,
		   struct meshrun_err *err);
	int (*connect)(struct mr_hal *hal, const char *const *hosts, size_t n,
		       struct meshrun_err *errs);
	int (*spawn)(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		     struct meshrun_err *err);
	int (*proc_write)(struct mr_proc *p, const void *data, size_t len,
			  struct meshrun_err *err);
	int (*proc_close_stdin)(struct mr_proc *p, struct meshrun_err *err);
	int (*proc_signal)(struct mr_proc *p, int sig, struct meshrun_err *err);
	int (*poll)(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err);
	int (*poll_prepare)(struct mr_hal *hal, struct mr_pollset *ps, int *timeout_ms);
	void (*proc_release)(struct mr_proc *p);
	void (*free)(struct mr_hal *hal);
	int (*remove_at_exit)(struct mr_hal *hal, const char *host, const char *dir,
			      struct meshrun_err *err);
	int (*remove_now)(struct mr_hal *hal, const char *host, const char *dir);
	bool (*removes_at_free)(struct mr_hal *hal, const char *host);
	bool (*makes_dirs)(struct mr_hal *hal, const char *host);
};

/*
 * The persist backend (persist/): every command and process goes through a
 * per-user background process (persist_daemon.c) that keeps its authenticated
 * libssh2 connections for opts.persist_ms after its last client, as OpenSSH's
 * ControlPersist does, so the next run reaches a host without a handshake. One
 * daemon per ssh identity: its socket's name is a hash of what decides
 * authentication and host checks (uid, user, identity, ssh_config, known_hosts,
 * the agent socket, HOME); it lives, mode 0600, in a private 0700 directory:
 * $XDG_RUNTIME_DIR/meshrun, else ${TMPDIR:-/tmp}/meshrun-UID. Each side checks
 * the other's uid. A socket nobody listens on is replaced by a new daemon; a
 * daemon that does not answer within a bounded time is an error (the mux then
 * warns once and connects directly). When this client goes (mr_hal_free, or
 * killed), the daemon kills its processes and removes its directories, so the job
 * stops as with the ssh backend; results, errors and messages are the ssh
 * backend's (the daemon runs one), deadlines and output caps are kept here.
 */
int mr_hal_new_persist(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err);

/* dir exists (made 0700 if not), is a directory of ours (not a link), mode
 * 0700 (tightened when looser); what says what it is for, in messages. */
int mr_hal_private_dir(const char *dir, const char *what, struct meshrun_err *err);

/*
 * Remove dir (as given to mr_hal_remove_at_exit) on host now, through the
 * host's watchdog ("R" line), without waiting for it, and forget it for the
 * exit: 0 (also when the backend has no watchdog there), or MESHRUN_E_NOMEM.
 * The persist daemon uses it when a client leaves.
 */
int mr_hal_remove_now(struct mr_hal *hal, const char *host, const char *dir);

/* The daemon's socket for opts into path (its directory made 0700): a hash of
 * the identity and the ssh_config files' stamps (persist/persist_conn.c). */
int mr_hal_persist_path(const struct mr_hal_opts *o, char *path, size_t n, struct meshrun_err *err);
/*
 * The persist backend (persist/persist.c) asks its daemon to look hosts up in
 * the daemon's ssh_config (cached there: no `ssh -G` here). For each host
 * errs[i] (the lookup's error) and gaps[i] (malloc'd: the first thing libssh2
 * cannot do for it, NULL: none; the caller frees). 0, or < 0 when hal is not a
 * persist hal or the daemon did not answer (gaps all NULL).
 */
int mr_hal_persist_resolve(struct mr_hal *hal, const char *const *hosts, size_t n, char **gaps,
			   struct meshrun_err *errs);

/* A watched fd (mr_hal_watch_fd). */
struct mr_hal_watch {
	int fd;
	void (*cb)(int fd, void *ctx);
	void *ctx;
};

/* The part of every backend instance that hal.c manages. */
struct mr_hal {
	const struct mr_hal_ops *ops;
	/* Copy of the caller's options with the defaults filled in; the string
	 * fields are copies owned here (NULL stays NULL). */
	struct mr_hal_opts opts;
	/* Every proc not yet released, newest first (p->next/p->prev). */
	struct mr_proc *procs;
	struct mr_hal_watch *watch;
	size_t nwatch, watch_alloc;
	bool in_poll;     /* inside ops->poll: mr_proc_release is deferred */
	struct mr_hal_run_state *run; /* the mr_hal_run_cb in progress, or NULL */
};

/* The part of every spawned process that hal.c manages. */
struct mr_proc {
	struct mr_hal *hal;
	struct mr_proc *next, *prev;
	char *host;          /* copy of sp->host ("localhost" when NULL) */
	char *cmdline;       /* argv quoted and shortened, for messages; owned */
	struct mr_proc_events ev;
	void *user;
	bool stdin_closed;   /* mr_proc_close_stdin succeeded */
	bool exited;         /* on_exit delivered */
	bool release_pending;/* mr_proc_release called from inside a poll */
};

/* --- instance life cycle (backends) --- */

/* Fill the common part: copy opts (NULL: all defaults) and their strings.
 * Returns 0 or MESHRUN_E_NOMEM. */
int mr_hal_init(struct mr_hal *hal, const struct mr_hal_ops *ops, const struct mr_hal_opts *opts);
/* Free the common part (the procs must be released already). */
void mr_hal_release_common(struct mr_hal *hal);

/* --- run helpers --- */

/* Zero the outputs of cmd and cap its buffers at hal->opts.max_output. */
void mr_hal_cmd_prepare(const struct mr_hal *hal, struct mr_hal_cmd *cmd);
/* The command's deadline in ms: its timeout_ms, else opts.run_timeout_ms. */
int mr_hal_cmd_timeout_ms(const struct mr_hal *hal, const struct mr_hal_cmd *cmd);
/* cmd (an entry of the batch given to ops->run) has its final result: report it
 * to the on_done of mr_hal_run_cb, once; later calls for it do nothing. */
void mr_hal_cmd_done(struct mr_hal *hal, struct mr_hal_cmd *cmd);
/* Append what fits under b->max (0: no cap); the rest is dropped. 0, or -1 on ENOMEM. */
int mr_hal_append_capped(struct mr_buf *b, const void *data, size_t len);
/* argv shell-quoted and joined, shortened to fit n with "..." (for messages). */
const char *mr_hal_argv_summary(char *const *argv, char *buf, size_t n);
/* The host as messages show it ("localhost" for NULL). */
const char *mr_hal_host_name(const char *host);
/* mr_err_set() that records why too (sys_errno: the errno or enum mr_hal_why
 * that mr_hal_err_hint() decides on; nothing appended to the message). Where
 * an error is passed on with more context, give the old one's sys_errno. */
int mr_hal_err_set_why(struct meshrun_err *err, int code, int why, const char *fmt, ...) MR_PRINTF(4, 5);

/*
 * The libssh2 backend over a config someone else loaded (the auto hal, whose
 * backend choice read the same `ssh -G` answers): cfg is borrowed and must
 * outlive the hal; NULL: it loads its own (what mr_hal_new_ssh does).
 */
struct mr_ssh_config;
int mr_hal_new_ssh_cfg(struct mr_hal **out, const struct mr_hal_opts *opts, struct mr_ssh_config *cfg,
		       struct meshrun_err *err);

/* --- proc helpers --- */

/* Fill the common part and link p into hal->procs. 0 or MESHRUN_E_NOMEM. */
int mr_proc_init(struct mr_proc *p, struct mr_hal *hal, const struct mr_spawn *sp);
/* Unlink p and free its common fields (not p itself). */
void mr_proc_release_common(struct mr_proc *p);
/* Deliver events; they do nothing after exit or once a release is pending. */
void mr_proc_deliver_stdout(struct mr_proc *p, const char *data, size_t len);
void mr_proc_deliver_stderr(struct mr_proc *p, const char *data, size_t len);
/* Sets p->exited and calls on_exit exactly once (err may be NULL if hal_rc == 0). */
void mr_proc_deliver_exit(struct mr_proc *p, int hal_rc, int status, int sig,
			  const struct meshrun_err *err);

/*
 * What a remote backend holds for one proc between its reads and their
 * delivery: output it buffered, and the exit once it came (hal_rc < 0: err
 * says why). The buffers belong to the backend's job.
 */
struct mr_proc_backlog {
	struct mr_buf *out, *err_out;
	bool done;
	int hal_rc, status, sig;
	const struct meshrun_err *err;
};
/*
 * For every proc of hal (a snapshot: a callback may end or release one):
 * deliver its buffered stdout, then stderr, then its exit once both are
 * empty. get fills b for p. Nothing is delivered when out of memory (next
 * time, then).
 */
void mr_hal_deliver_backlogs(struct mr_hal *hal, void (*get)(struct mr_proc *p, struct mr_proc_backlog *b));

/* --- the job both ssh backends keep per remote command (job.c) ---
 *
 * libssh2/ssh_chan.c's struct job and openssh/openssh_child.c's struct ojob
 * embed struct mr_hal_job as `base`: a command line run through sh.h's /bin/sh
 * protocol, its stdin queue, its stdout until the pgid marker, its output held
 * for a proc and its end. How the bytes travel (a channel, an ssh client) is
 * the backend's. Lifecycle: mr_hal_job_init() -> ... -> mr_hal_job_release()
 * (the backend frees its own struct after).
 */

/* A proc's stream held for delivery stops being read above this. */
#define MR_HAL_JOB_PENDING_MAX (4u << 20)

/* A job's end, recorded once. */
struct mr_hal_job_end {
	bool done;                /* the result is known */
	int hal_rc, status, sig;  /* hal_rc < 0: err says why */
	struct meshrun_err err;
};

struct mr_hal_job {
	char *cmdline;                /* what the remote shell runs; owned */
	struct mr_buf in;             /* stdin not yet written */
	bool in_closed;               /* no more stdin comes */
	struct mr_hal_marker mark;    /* stdout until the marker was seen */
	long pgid;                    /* 0 until known */
	bool registered;              /* pgid told to the host's watchdog */
	int pending_sig;              /* proc: signal to send once pgid is known */
	struct mr_hal_job_end end;    /* the result, once known */
	int64_t start_ms, deadline_ms; /* deadline 0: none */
	struct mr_hal_cmd *cmd;       /* run: where results go (NULL once delivered) */
	struct mr_buf pout, perr;     /* proc: output not yet delivered */
};

/* Zero j, copy cmdline, start the clock. 0, or MESHRUN_E_NOMEM (nothing to release). */
int mr_hal_job_init(struct mr_hal_job *j, const char *cmdline);
/* A zeroed backend job struct (size bytes, its struct mr_hal_job at offset)
 * with that part initialized; NULL when out of memory. Through the macro:
 * struct job *j = mr_hal_job_new(struct job, base, cmdline). free() frees it. */
void *mr_hal_job_alloc(size_t size, size_t offset, const char *cmdline);
#define mr_hal_job_new(type, member, cmdline) \
	((type *)mr_hal_job_alloc(sizeof(type), offsetof(type, member), (cmdline)))
/* Free what j owns (not j itself). */
void mr_hal_job_release(struct mr_hal_job *j);

/* Record the end unless it is known already; false when it was (nothing changed). */
bool mr_hal_job_end_set(struct mr_hal_job_end *e, int hal_rc, int status, int sig,
			const struct meshrun_err *err);
/* A run job's end goes to its command: *cmd gets it with the time since start_ms,
 * is reported to hal (mr_hal_cmd_done) and becomes NULL. No-op when *cmd is NULL. */
void mr_hal_job_end_report(const struct mr_hal_job_end *e, struct mr_hal *hal, struct mr_hal_cmd **cmd,
			   int64_t start_ms);

/* A proc's job: what mr_hal_deliver_backlogs() takes from it (its buffers). */
void mr_hal_job_backlog(struct mr_hal_job *j, struct mr_proc_backlog *b);
/* A proc's job has something to deliver: output, or its end. */
bool mr_hal_job_has_news(const struct mr_hal_job *j);
/* A proc's held output on that stream (is_err: stderr) is over MR_HAL_JOB_PENDING_MAX. */
bool mr_hal_job_over_cap(const struct mr_hal_job *j, bool is_err);

/* proc_write for p's job: queue a copy of the bytes. 0 or MESHRUN_E_NOMEM. */
int mr_hal_job_queue_input(struct mr_hal_job *j, const struct mr_proc *p, const void *data, size_t len,
			   struct meshrun_err *err);
/*
 * proc_signal for p's job, up to the kill: < 0 with err (a signal no remote
 * host can be told by name; or no pgid though the marker was due, which the
 * backend says with marker_due, and is no longer looked for), 0 when nothing
 * more is to be done (gone: the job has ended or has no way to its host any
 * more; or the pgid is not known yet: sig is kept and sent once it is), 1 when
 * the backend must queue the kill of j->pgid now.
 */
int mr_hal_job_signal(struct mr_hal_job *j, const struct mr_proc *p, int sig, bool gone, bool marker_due,
		      struct meshrun_err *err);

/* --- watched fds inside a backend's poll --- */

/* A growable pollfd array for one poll() round. */
struct mr_pollset {
	struct pollfd *fds;
	size_t nr, alloc;
};
#define MR_POLLSET_INIT { NULL, 0, 0 }
/* Append {fd, events}; returns its index, or -1 on ENOMEM. */
int mr_pollset_add(struct mr_pollset *ps, int fd, short events);
void mr_pollset_reset(struct mr_pollset *ps);   /* nr = 0, keep memory */
void mr_pollset_release(struct mr_pollset *ps);

/* Append every watched fd (POLLIN); *first gets the index of the first one.
 * Returns 0 or -1 on ENOMEM. */
int mr_hal_watch_add_pollfds(struct mr_hal *hal, struct mr_pollset *ps, size_t *first);
/* After poll(): run the callbacks of watched fds (entries from first on) that
 * are readable or hung up and are still watched (a callback may unwatch). */
void mr_hal_watch_dispatch(struct mr_hal *hal, const struct mr_pollset *ps, size_t first);

#endif
