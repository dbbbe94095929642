/*
 * spawn.c - the one fork/exec and PATH search (see spawn.h).
 */
#include "common/compat.h"
#include "common/spawn.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/port.h"
#include "common/strvec.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

char *mr_which(const char *name, const char *path)
{
	int saved = ENOENT;
	const char *p;

	if (strchr(name, '/'))
		return strdup(name);
	if (!*name) {
		errno = ENOENT;
		return NULL;
	}
	p = path ? path : getenv("PATH");
	if (!p)
		p = DEFAULT_PATH;
	for (;;) {
		const char *colon = mr_strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);
		char *cand = NULL;
		struct stat st;

		if (asprintf(&cand, "%.*s%s%s", (int)dlen, p, dlen ? "/" : "", name) < 0) {
			errno = ENOMEM;
			return NULL;
		}
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(cand, X_OK) == 0)
				return cand;
			saved = EACCES; /* as execvp: keep looking, report EACCES if nothing runs */
		}
		free(cand);
		if (!*colon)
			break;
		p = colon + 1;
	}
	errno = saved;
	return NULL;
}

enum child_step { STEP_DUP = 1, STEP_SESSION, STEP_CHDIR, STEP_EXEC };

struct child_report {
	int step;
	int errnum;
};

/* Everything the child needs, prepared before fork(). */
struct child_setup {
	const char *path;
	char *const *argv;
	char *const *envp;
	const char *cwd;
	unsigned flags;
	int fds[3];
	int report_fd;
	struct sigaction dfl;
	sigset_t empty;
};

/* --- the child side: async-signal-safe calls only --- */

static void __attribute__((noreturn)) child_fail(const struct child_setup *cs, int step)
{
	struct child_report r = { step, errno };
	const char *p = (const char *)&r;
	size_t left = sizeof(r);

	while (left) {
		ssize_t w = write(cs->report_fd, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		left -= (size_t)w;
	}
	_exit(127);
}

static void __attribute__((noreturn)) child_exec(struct child_setup *cs)
{
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			(void)sigaction(s, &cs->dfl, NULL); /* EINVAL for libc-internal ones */
	if (cs->flags & MR_SPAWN_SETSID) {
		if (setsid() < 0)
			child_fail(cs, STEP_SESSION);
	} else if (cs->flags & MR_SPAWN_SETPGID) {
		(void)setpgid(0, 0);
	}
	/* Move sources (and the report pipe) out of 0..2 first, so that the dup2
	 * calls below cannot clobber one. */
	if (cs->report_fd < 3 && (cs->report_fd = fcntl(cs->report_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		_exit(127);
	for (int i = 0; i < 3; i++)
		if (cs->fds[i] < 3 && (cs->fds[i] = fcntl(cs->fds[i], F_DUPFD_CLOEXEC, 3)) < 0)
			child_fail(cs, STEP_DUP);
	for (int i = 0; i < 3; i++)
		if (dup2(cs->fds[i], i) < 0)
			child_fail(cs, STEP_DUP);
	if (cs->flags & MR_SPAWN_CLOSE_FDS) {
		/* nothing of our caller's (a test's pipe, a terminal) may live on in a
		 * daemon: keep only 0..2 and the report pipe, moved to 3 */
		if (cs->report_fd != 3) {
			if (dup2(cs->report_fd, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
				child_fail(cs, STEP_DUP);
			cs->report_fd = 3;
		}
		mr_close_from(4);
	}
	if (cs->cwd && chdir(cs->cwd) < 0)
		child_fail(cs, STEP_CHDIR);
	(void)sigprocmask(SIG_SETMASK, &cs->empty, NULL);
	execve(cs->path, cs->argv, cs->envp);
	child_fail(cs, STEP_EXEC);
}

/* --- the parent side --- */

static const char *env_path(char *const *envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		if (!strncmp(envp[i], "PATH=", 5))
			return envp[i] + 5;
	return NULL;
}

int mr_spawn_child(const struct mr_spawn_opts *o, pid_t *pidp, struct meshrun_err *err)
{
	const char *prog = o->file ? o->file : o->argv[0];
	const char *what = o->what ? o->what : prog;
	struct child_setup cs;
	struct child_report r;
	int rep[2] = { -1, -1 }, devnull = -1, rc = 0;
	char *path = NULL;
	sigset_t all, old;
	ssize_t got;
	pid_t pid;

	memset(&cs, 0, sizeof(cs));
	cs.argv = o->argv;
	cs.envp = o->envp ? o->envp : mr_environ();
	cs.cwd = o->cwd;
	cs.flags = o->flags;
	path = mr_which(prog, o->path_var ? o->path_var : o->envp ? env_path(o->envp) : NULL);
	if (!path)
		return mr_err_errno(err, errno, MESHRUN_E_EXEC, "exec '%s' failed", prog);
	cs.path = path;
	for (int i = 0; i < 3; i++) {
		cs.fds[i] = o->fds[i];
		if (cs.fds[i] >= 0)
			continue;
		if (devnull < 0 && (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
			rc = mr_err_sys(err, "open /dev/null for %s", what);
			goto out;
		}
		cs.fds[i] = devnull;
	}
	if (mr_pipe_cloexec(rep) < 0) {
		rc = mr_err_sys(err, "pipe for %s", what);
		goto out;
	}
	cs.report_fd = rep[1];
	cs.dfl.sa_handler = SIG_DFL;
	sigemptyset(&cs.dfl.sa_mask);
	sigemptyset(&cs.empty);

	/* no handler of ours may run in the child before its dispositions are reset */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = fork();
	if (pid == 0)
		child_exec(&cs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		rc = mr_err_sys(err, "fork for %s", what);
		goto out;
	}
	if (o->flags & MR_SPAWN_SETPGID && !(o->flags & MR_SPAWN_SETSID))
		(void)setpgid(pid, pid); /* the child does it too; whoever is first wins */
	mr_close(&rep[1]);

	/* EOF: exec succeeded (the pipe was close-on-exec); a report: it failed */
	got = mr_read_full(rep[0], &r, sizeof(r));
	if (got == (ssize_t)sizeof(r)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (r.step == STEP_CHDIR)
			rc = mr_err_errno(err, r.errnum, MESHRUN_E_EXEC, "chdir to '%s' for %s failed", o->cwd, what);
		else if (r.step == STEP_EXEC)
			rc = mr_err_errno(err, r.errnum, MESHRUN_E_EXEC, "exec '%s' failed", prog);
		else if (r.step == STEP_SESSION)
			rc = mr_err_errno(err, r.errnum, MESHRUN_E_EXEC, "new session for %s failed", what);
		else
			rc = mr_err_errno(err, r.errnum, MESHRUN_E_EXEC, "set up stdio of %s failed", what);
		goto out;
	}
	*pidp = pid;
out:
	mr_close(&rep[0]);
	mr_close(&rep[1]);
	mr_close(&devnull);
	free(path);
	return rc;
}

int mr_spawn_piped(const struct mr_spawn_opts *opts, bool want_stdin, pid_t *pid, int fds[3],
		   struct meshrun_err *err)
{
	struct mr_spawn_opts so = *opts;
	const char *what = opts->what ? opts->what : opts->argv[0];
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	int rc = 0;

	fds[0] = fds[1] = fds[2] = -1;
	if (want_stdin) {
		if (mr_socketpair(AF_UNIX, SOCK_STREAM, MR_SOCK_CLOEXEC, in) < 0) {
			rc = mr_err_sys(err, "socketpair for stdin of %s", what);
			goto out;
		}
	} else {
		if (mr_pipe_cloexec(in) < 0) {
			rc = mr_err_sys(err, "pipe for stdin of %s", what);
			goto out;
		}
		mr_close(&in[1]); /* EOF at once */
	}
	if (mr_pipe_cloexec(out) < 0 || mr_pipe_cloexec(errp) < 0) {
		rc = mr_err_sys(err, "pipe for %s", what);
		goto out;
	}
	so.fds[0] = in[0];
	so.fds[1] = out[1];
	so.fds[2] = errp[1];
	rc = mr_spawn_child(&so, pid, err);
	if (rc < 0)
		goto out;
	fds[0] = in[1];
	fds[1] = out[0];
	fds[2] = errp[0];
	in[1] = out[0] = errp[0] = -1;
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			(void)mr_set_nonblock(fds[i], true);
out:
	mr_close(&in[0]);
	mr_close(&in[1]);
	mr_close(&out[0]);
	mr_close(&out[1]);
	mr_close(&errp[0]);
	mr_close(&errp[1]);
	return rc;
}
