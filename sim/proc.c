#include "common/compat.h"
#include "sim/proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/spawn.h"
#include "common/timeutil.h"
#include "common/xalloc.h"

#define OUT_CAP (64 * 1024)

static void job_vset(struct mr_sim_job *j, const char *label, va_list ap)
{
	const char *a;

	j->label = xstrdup(label);
	while ((a = va_arg(ap, const char *)))
		if (mr_strvec_push(&j->argv, a) < 0) {
			fprintf(stderr, "[ERROR] out of memory\n");
			exit(1);
		}
}

void mr_sim_job_set(struct mr_sim_job *j, const char *label, ...)
{
	va_list ap;

	va_start(ap, label);
	job_vset(j, label, ap);
	va_end(ap);
}

void mr_sim_job_release(struct mr_sim_job *j)
{
	mr_strvec_release(&j->argv);
	MR_FREE(j->label);
	mr_buf_release(&j->out);
	mr_close(&j->fd);
}

char *mr_sim_which(const char *prog)
{
	/* meshsim runs root's tools (ip, sshd, modprobe): the sbin folders too,
	 * whatever PATH the user has */
	const char *path = getenv("PATH");
	char *search = xasprintf("%s%s/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "",
				 path && *path ? ":" : "");
	char *found = mr_which(prog, search);

	free(search);
	return found;
}

int mr_sim_exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 255;
}

/* Start one job: stdin /dev/null, stdout and stderr into one pipe, no other fd. */
static int job_start(struct mr_sim_job *j, struct meshrun_err *err)
{
	struct mr_spawn_opts so = { 0 };
	char *path = mr_sim_which(j->argv.v[0]);
	int p[2] = { -1, -1 }, rc;

	if (!path)
		return mr_err_set(err, MESHRUN_E_EXEC, "%s: '%s' not found in PATH", j->label,
				  j->argv.v[0]);
	if (mr_pipe_cloexec(p) < 0) {
		free(path);
		return mr_err_sys(err, "%s: pipe", j->label);
	}
	so.file = path;
	so.argv = j->argv.v;
	so.what = j->label;
	so.fds[0] = -1;
	so.fds[1] = so.fds[2] = p[1];
	/* no descriptor of our caller (a test's pipe, a terminal) may live on in
	 * a daemon such as sshd: only 0, 1 and 2 go to the job */
	so.flags = MR_SPAWN_CLOSE_FDS;
	rc = mr_spawn_child(&so, &j->pid, err);
	free(path);
	mr_close(&p[1]);
	if (rc < 0) {
		mr_close(&p[0]);
		return rc;
	}
	mr_set_nonblock(p[0], true);
	j->fd = p[0];
	j->started = true;
	return 0;
}

static void job_read(struct mr_sim_job *j)
{
	char tmp[4096];
	ssize_t n;

	for (;;) {
		n = mr_read_some(j->fd, tmp, sizeof(tmp));
		if (n > 0) {
			size_t room = j->out.len < OUT_CAP ? OUT_CAP - j->out.len : 0;
			mr_buf_append(&j->out, tmp, MR_MIN((size_t)n, room));
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			mr_close(&j->fd);
		return;
	}
}

static void job_fail(struct mr_sim_job *j, struct meshrun_err *err)
{
	const char *o = mr_buf_cstr(&j->out);
	size_t l = strcspn(o, "\n");

	if (WIFEXITED(j->status) && WEXITSTATUS(j->status) == 127 && !j->out.len)
		mr_err_set(err, MESHRUN_E_EXEC, "%s: could not run '%s'", j->label, j->argv.v[0]);
	else if (WIFSIGNALED(j->status))
		mr_err_set(err, MESHRUN_E_SYS, "%s: '%s' killed by signal %d%s%.*s", j->label,
			   j->argv.v[0], WTERMSIG(j->status), l ? ": " : "", (int)l, o);
	else
		mr_err_set(err, MESHRUN_E_SYS, "%s: '%s' exited with status %d%s%.*s", j->label,
			   j->argv.v[0], WEXITSTATUS(j->status), l ? ": " : "", (int)l, o);
}

int mr_sim_run_jobs(struct mr_sim_job *jobs, size_t n, unsigned maxpar, int timeout_ms,
		    unsigned flags, struct meshrun_err *err)
{
	return mr_sim_run_jobs_cb(jobs, n, maxpar, timeout_ms, flags, NULL, NULL, err);
}

int mr_sim_run_jobs_cb(struct mr_sim_job *jobs, size_t n, unsigned maxpar, int timeout_ms,
		       unsigned flags, void (*on_done)(struct mr_sim_job *j, void *ctx), void *ctx,
		       struct meshrun_err *err)
{
	struct pollfd *pfd = xcalloc(maxpar ? maxpar : 1, sizeof(*pfd));
	size_t *idx = xcalloc(maxpar ? maxpar : 1, sizeof(*idx));
	int64_t deadline = mr_now_ms() + timeout_ms;
	size_t next = 0, running = 0, ndone = 0;
	bool failed = false, killed = false;
	bool keep = flags & MR_SIM_KEEP_GOING;
	int rc = 0;

	if (!maxpar)
		maxpar = 1;
	while (ndone < n) {
		while ((!failed || keep) && running < maxpar && next < n) {
			if (job_start(&jobs[next], err) < 0) {
				if (!failed)
					rc = err ? err->code : MESHRUN_E_SYS;
				failed = true;
				jobs[next].done = true;
				ndone++;
				if (on_done)
					on_done(&jobs[next], ctx);
				next++;
				if (!keep)
					break;
				continue;
			}
			running++;
			next++;
		}
		if (failed && running == 0 && (!keep || next == n)) {
			/* jobs never started count as done */
			ndone = n;
			break;
		}
		size_t np = 0;
		for (size_t i = 0; i < next; i++)
			if (jobs[i].started && !jobs[i].done && jobs[i].fd >= 0) {
				pfd[np].fd = jobs[i].fd;
				pfd[np].events = POLLIN;
				idx[np++] = i;
			}
		if (np) {
			int left = mr_ms_left(deadline);
			int pr = poll(pfd, np, left > 200 ? 200 : left);
			if (pr > 0)
				for (size_t k = 0; k < np; k++)
					if (pfd[k].revents)
						job_read(&jobs[idx[k]]);
		} else {
			mr_sleep_ms(2);
		}
		/* reap jobs whose output closed (a daemon's parent exits; its child has /dev/null) */
		for (size_t i = 0; i < next; i++) {
			struct mr_sim_job *j = &jobs[i];
			if (!j->started || j->done || j->fd >= 0)
				continue;
			pid_t w = waitpid(j->pid, &j->status, 0);
			if (w < 0 && errno == EINTR)
				continue;
			j->done = true;
			running--;
			ndone++;
			if (!WIFEXITED(j->status) || WEXITSTATUS(j->status) != 0) {
				if (!failed)
					job_fail(j, err);
				rc = MESHRUN_E_SYS;
				failed = true;
			}
			if (on_done)
				on_done(j, ctx);
		}
		if (!killed && mr_ms_left(deadline) == 0) {
			for (size_t i = 0; i < next; i++)
				if (jobs[i].started && !jobs[i].done) {
					kill(jobs[i].pid, SIGKILL);
					mr_close(&jobs[i].fd);
					if (!failed)
						mr_err_set(err, MESHRUN_E_TIMEOUT,
							   "%s: '%s' timed out after %d ms", jobs[i].label,
							   jobs[i].argv.v[0], timeout_ms);
					failed = true;
					rc = MESHRUN_E_TIMEOUT;
				}
			killed = true;
		}
	}
	free(pfd);
	free(idx);
	return rc;
}

int mr_sim_run(struct mr_buf *out, struct meshrun_err *err, const char *label, ...)
{
	struct mr_sim_job j = MR_SIM_JOB_INIT;
	va_list ap;
	int rc;

	va_start(ap, label);
	job_vset(&j, label, ap);
	va_end(ap);
	rc = mr_sim_run_jobs(&j, 1, 1, 30000, 0, err);
	if (out)
		mr_buf_append(out, j.out.p ? j.out.p : "", j.out.len);
	mr_sim_job_release(&j);
	return rc;
}
