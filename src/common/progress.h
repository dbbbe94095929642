/*
 * progress.h - "what step, how far along" for the tools (meshsim up, meshconfig).
 *
 *	struct mr_progress p;
 *	mr_progress_init(&p, stderr, "meshsim up", 6, -1);   (-1: tty = isatty(fileno(f)))
 *	mr_progress_step(&p, "network", nhosts);   "[2/6] network: 0/8 hosts"
 *	mr_progress_update(&p, 3, "h1 h2 h3");      "[2/6] network: 3/8 hosts (h1 h2 h3)"
 *	mr_progress_step_done(&p);                 "[2/6] network: 8/8 hosts done (0.4 s)"
 *	mr_progress_finish(&p);
 *
 * On a terminal this is ONE line rewritten in place ("\r" + erase to end of
 * line); anything else printed to f should call mr_progress_clear() first (the
 * tools' warnings do through mr_progress_clear, or simply after a step ends).
 * When f is not a terminal (a log, CI), each finished step is one ordinary
 * "[INFO] tool: [k/n] what: N/N hosts done (T s)" line and starts and updates
 * are silent, so logs stay short.
 * Nothing is allocated; the struct is the caller's.
 */
#ifndef MR_PROGRESS_H
#define MR_PROGRESS_H

#include "common/compat.h"

struct mr_progress {
	FILE *f;
	const char *tool;   /* prefix of log lines: "meshsim up" */
	bool tty;           /* rewrite one line in place */
	bool line_open;     /* a partial line is on the terminal */
	size_t step, nsteps;
	size_t done, total; /* hosts done / total of the current step (total 0: no count) */
	char what[64];
	int64_t t_step;     /* ms, monotonic */
};

/* tty: 1, 0, or -1 to ask isatty(fileno(f)) (and NO_PROGRESS unset). */
void mr_progress_init(struct mr_progress *p, FILE *f, const char *tool, size_t nsteps, int tty);
/* Start the next step; total is the number of hosts it covers (0: not counted). */
void mr_progress_step(struct mr_progress *p, const char *what, size_t total);
/* done of total hosts; note (may be NULL) names the last ones, shown on a tty. */
void mr_progress_update(struct mr_progress *p, size_t done, const char *note);
/* The current step is complete (all of its hosts done). */
void mr_progress_step_done(struct mr_progress *p);
/* Erase the terminal line, so that another message can be printed. */
void mr_progress_clear(struct mr_progress *p);
/* End: leave the last state on its own line (tty) and reset. */
void mr_progress_finish(struct mr_progress *p);

#endif
