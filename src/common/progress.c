/*
 * progress.c - see progress.h. Terminal: "\r\033[K" then the line, no newline
 * until the end. Not a terminal: one "[INFO] tool: [k/n] what ..." line per step
 * end, through the log module so MESHRUN_LOG=warn silences it.
 */
#include "common/compat.h"
#include "common/progress.h"
#include "common/log.h"
#include "common/timeutil.h"

#include <unistd.h>

void mr_progress_init(struct mr_progress *p, FILE *f, const char *tool, size_t nsteps, int tty)
{
	memset(p, 0, sizeof(*p));
	p->f = f;
	p->tool = tool;
	p->nsteps = nsteps;
	if (tty < 0)
		tty = isatty(fileno(f)) && !getenv("NO_PROGRESS");
	p->tty = tty != 0;
}

static void draw(struct mr_progress *p, const char *note, bool finished)
{
	fprintf(p->f, "\r\033[K[%zu/%zu] %s", p->step, p->nsteps, p->what);
	if (p->total)
		fprintf(p->f, ": %zu/%zu hosts", p->done, p->total);
	if (finished)
		fprintf(p->f, " done (%.1f s)", (double)(mr_now_ms() - p->t_step) / 1000.0);
	else if (note && *note)
		fprintf(p->f, " (%.40s)", note);
	fflush(p->f);
	p->line_open = true;
}

/* Not a terminal: one line per finished step, nothing while it runs. */
static void log_line(struct mr_progress *p)
{
	char count[64] = "";

	if (p->total)
		snprintf(count, sizeof(count), ": %zu/%zu hosts", p->total, p->total);
	mr_info("%s: [%zu/%zu] %s%s done (%.1f s)", p->tool, p->step, p->nsteps, p->what, count,
		(double)(mr_now_ms() - p->t_step) / 1000.0);
}

void mr_progress_step(struct mr_progress *p, const char *what, size_t total)
{
	p->step++;
	if (p->step > p->nsteps)
		p->nsteps = p->step;
	snprintf(p->what, sizeof(p->what), "%s", what);
	p->done = 0;
	p->total = total;
	p->t_step = mr_now_ms();
	if (p->tty)
		draw(p, NULL, false);
}

void mr_progress_update(struct mr_progress *p, size_t done, const char *note)
{
	p->done = done;
	if (p->tty)
		draw(p, note, false);
}

void mr_progress_step_done(struct mr_progress *p)
{
	p->done = p->total;
	if (p->tty)
		draw(p, NULL, true);
	else
		log_line(p);
}

void mr_progress_clear(struct mr_progress *p)
{
	if (p->tty && p->line_open) {
		fputs("\r\033[K", p->f);
		fflush(p->f);
		p->line_open = false;
	}
}

void mr_progress_finish(struct mr_progress *p)
{
	if (p->tty && p->line_open) {
		fputc('\n', p->f);
		fflush(p->f);
	}
	p->line_open = false;
}
