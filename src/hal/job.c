/*
 * job.c - the job both ssh backends keep per remote command (hal_impl.h): its
 * fields' life cycle, its end, and the proc ops' parts that do not depend on
 * how the bytes travel. libssh2/ssh_chan.c and openssh/openssh_child.c embed
 * it; before, each held and released the same fields with the same lines.
 */
#include "common/compat.h"
#include "hal/hal_impl.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <signal.h>

int mr_hal_job_init(struct mr_hal_job *j, const char *cmdline)
{
	*j = (struct mr_hal_job){ 0 };
	j->cmdline = strdup(cmdline);
	if (!j->cmdline)
		return MESHRUN_E_NOMEM;
	j->start_ms = mr_now_ms();
	return 0;
}

void *mr_hal_job_alloc(size_t size, size_t offset, const char *cmdline)
{
	char *outer = calloc(1, size);

	if (!outer)
		return NULL;
	if (mr_hal_job_init((struct mr_hal_job *)(void *)(outer + offset), cmdline) < 0) {
		free(outer);
		return NULL;
	}
	return outer;
}

void mr_hal_job_release(struct mr_hal_job *j)
{
	free(j->cmdline);
	j->cmdline = NULL;
	mr_buf_release(&j->in);
	mr_buf_release(&j->mark.pre);
	mr_buf_release(&j->pout);
	mr_buf_release(&j->perr);
}

bool mr_hal_job_end_set(struct mr_hal_job_end *e, int hal_rc, int status, int sig,
			const struct meshrun_err *err)
{
	if (e->done)
		return false;
	e->done = true;
	e->hal_rc = hal_rc;
	e->status = status;
	e->sig = sig;
	if (err)
		e->err = *err;
	return true;
}

void mr_hal_job_end_report(const struct mr_hal_job_end *e, struct mr_hal *hal, struct mr_hal_cmd **cmd,
			   int64_t start_ms)
{
	struct mr_hal_cmd *c = *cmd;

	if (!c)
		return;
	c->hal_rc = e->hal_rc;
	c->status = e->status;
	c->signal = e->sig;
	if (e->hal_rc < 0)
		c->err = e->err;
	c->elapsed_ms = mr_now_ms() - start_ms;
	*cmd = NULL;
	mr_hal_cmd_done(hal, c);
}

void mr_hal_job_backlog(struct mr_hal_job *j, struct mr_proc_backlog *b)
{
	*b = (struct mr_proc_backlog){ &j->pout, &j->perr, j->end.done, j->end.hal_rc, j->end.status, j->end.sig,
				       &j->end.err };
}

bool mr_hal_job_has_news(const struct mr_hal_job *j)
{
	return j->pout.len || j->perr.len || j->end.done;
}

bool mr_hal_job_over_cap(const struct mr_hal_job *j, bool is_err)
{
	return (is_err ? j->perr.len : j->pout.len) > MR_HAL_JOB_PENDING_MAX;
}

int mr_hal_job_queue_input(struct mr_hal_job *j, const struct mr_proc *p, const void *data, size_t len,
			   struct meshrun_err *err)
{
	if (mr_buf_append(&j->in, data, len) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "write to '%s' on '%s': out of memory", p->cmdline, p->host);
	return 0;
}

int mr_hal_job_signal(struct mr_hal_job *j, const struct mr_proc *p, int sig, bool gone, bool marker_due,
		      struct meshrun_err *err)
{
	if (!mr_sh_sig_name(sig))
		return mr_err_set(err, MESHRUN_E_INVAL, "signal %d for '%s' on '%s': cannot name it to a remote host",
				  sig, p->cmdline, p->host);
	if (gone)
		return 0;
	if (j->pgid)
		return 1;
	if (marker_due && !j->mark.want)
		return mr_err_set(err, MESHRUN_E_UNSUPPORTED,
				  "signal '%s' on '%s': its process group is unknown (the login shell printed no marker)",
				  p->cmdline, p->host);
	/* the supervisor's CONT follows its TERM at once: a CONT must not
	 * replace the TERM (the rank would run until the KILL, seconds later) */
	if (sig != SIGCONT || !j->pending_sig)
		j->pending_sig = sig;
	return 0;
}
