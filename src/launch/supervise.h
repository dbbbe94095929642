/*
 * supervise.h - the rank supervisor: one poll loop (mr_hal_poll) over every rank.
 *
 * Protocol: mr_sup_init() -> mr_sup_start() per rank -> mr_sup_wait() -> mr_sup_release().
 *
 *   output   stdout and stderr of each rank are buffered per rank and stream and
 *            written to ours in whole lines (one write per batch of lines of one
 *            rank), so two ranks never share a line; --tag-output puts
 *            "[rank N host] " in front of each. A line longer than
 *            MR_SUP_MAX_LINE is cut there (a newline is inserted). What is left
 *            without a newline is written when the job ends.
 *   stdin    fd 0 is watched; what is read goes to every rank (all), rank 0 (0),
 *            or nobody (none; ranks see EOF at once); our EOF closes their stdin.
 *   failure  the first rank that exits non-zero, by a signal, or without an exit
 *            status makes every other rank get SIGTERM, then SIGKILL after
 *            MR_SUP_GRACE_MS; SIGINT/SIGTERM/SIGHUP to meshrun (through a
 *            self-pipe watched in the same loop) and --timeout do the same; a
 *            second signal sends SIGKILL at once.
 *   summary  each rank's end as what it was: failed on its own (an exit status,
 *            a signal that was not ours, a lost connection), or stopped by
 *            meshrun (ended by the TERM, or the KILL after the grace, that it
 *            sent; also as a shell's 128+signal status) with the reason (which rank failed first,
 *            --timeout, a signal to meshrun); a rank that exited 0 says nothing.
 *            When two or more ranks failed on their own, all the same way, and
 *            meshrun stopped any other, one line says so instead, with the
 *            first lines of the first failed one's stderr (MR_SUP_ERR_HEAD
 *            bytes of each rank's are kept for it).
 *
 * The exit code follows launch.h. The supervisor installs signal handlers for
 * SIGINT, SIGTERM and SIGHUP in mr_sup_init() and restores them in
 * mr_sup_release(); the self-pipe's write end is the one process global here
 * (a signal handler has no other way to reach the loop).
 */
#ifndef MR_LAUNCH_SUPERVISE_H
#define MR_LAUNCH_SUPERVISE_H

#include "common/compat.h"
#include "common/buf.h"
#include "hal/hal.h"
#include "launch/launch.h"

#define MR_SUP_GRACE_MS 3000
#define MR_SUP_MAX_LINE ((size_t)1 << 20)
#define MR_SUP_ERR_HEAD 512 /* bytes of each rank's stderr kept for the summary */

struct mr_sup_rank {
	size_t rank;
	char *host;
	struct mr_proc *proc;
	struct mr_buf part[2]; /* unterminated tail of stdout [0] and stderr [1] */
	struct mr_buf err_head; /* the first MR_SUP_ERR_HEAD bytes of its stderr */
	bool started, done, stdin_open;
	bool stopped;          /* meshrun signalled it while it ran (TERM, KILL) */
	bool sent_kill;        /* ... with a KILL too (the grace was over) */
	int hal_rc, status, signal;
	char errmsg[MESHRUN_ERR_MSG_MAX];
};

struct mr_sup {
	struct mr_hal *hal;
	struct mr_sup_rank *ranks;
	size_t nranks, nrunning;
	bool tag;
	enum mr_stdin_mode stdin_mode;
	bool stdin_watched;
	int stdin_fd;       /* what is watched: STDIN_FILENO, or a terminal relay's end */
	struct mr_input_relay *stdin_relay; /* where poll() cannot watch stdin (macOS ttys) */
	int64_t deadline;   /* --timeout, or -1 */
	int64_t kill_at;    /* SIGKILL time once stopping, or -1 */
	int64_t give_up_at; /* stop waiting for exits after KILL, or -1 */
	bool stopping, killed;
	int exit_code;      /* -1 until something decides it */
	char stop_why[128]; /* why every rank is being stopped ("after rank 2 (h3) failed") */
	size_t first_failed; /* the rank that failed first (when stop_why says so) */
	int sig_fd;         /* read end of the self-pipe */
	bool out_broken[2]; /* EPIPE on our stdout / stderr: drop what follows */
	struct mr_buf line; /* staging for the lines of one chunk */
	bool verbose;       /* --verbose: log each rank's state changes with a timestamp */
	int64_t t0;         /* ms, when the supervisor started (timestamps are relative) */
};

/* Set up (signal handlers, self-pipe watched by hal). Returns 0 or < 0 with err. */
int mr_sup_init(struct mr_sup *s, struct mr_hal *hal, size_t nranks, bool tag,
		enum mr_stdin_mode mode, int64_t timeout_ms, struct meshrun_err *err);
/* Start rank `rank` (sp.events and sp.user are filled in here). */
int mr_sup_start(struct mr_sup *s, size_t rank, struct mr_spawn *sp, struct meshrun_err *err);
/* After a start failed: stop what runs, and make the exit code 255. */
void mr_sup_abort(struct mr_sup *s);
/* Run the loop until every started rank has exited; returns the exit code. */
int mr_sup_wait(struct mr_sup *s);
void mr_sup_release(struct mr_sup *s);

#endif
