/*
 * png.c - meshconfig --png FILE: the DOT graph rendered by GraphViz.
 *
 * `dot -Tpng -o FILE` runs as a child process with an argv (no shell, so FILE
 * may hold any character) and the DOT text on its stdin; its stderr is ours.
 * An exec failure comes back through a CLOEXEC pipe as the child's errno, so
 * "dot is not installed" is told apart from "dot failed".
 */
#include "common/compat.h"
#include "config/config_impl.h"
#include "common/err.h"
#include "common/fdio.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

int cfg_render_png(const struct mr_buf *dot, const char *path, struct meshrun_err *err)
{
	char *argv[] = { (char *)"dot", (char *)"-Tpng", (char *)"-o", (char *)path, NULL };
	int in[2] = { -1, -1 }, rep[2] = { -1, -1 };
	int child_errno = 0, status, rc = 0;
	ssize_t n;
	pid_t pid;

	if (mr_pipe_cloexec(in) < 0)
		return mr_err_sys(err, "pipe");
	if (mr_pipe_cloexec(rep) < 0) {
		rc = mr_err_sys(err, "pipe");
		goto out_close_in;
	}
	pid = fork();
	if (pid < 0) {
		rc = mr_err_sys(err, "fork");
		goto out_close_rep;
	}
	if (pid == 0) {
		int e;

		if (dup2(in[0], STDIN_FILENO) >= 0)
			execvp(argv[0], argv);
		e = errno;
		(void)!write(rep[1], &e, sizeof(e));
		_exit(127);
	}
	mr_close(&in[0]);
	mr_close(&rep[1]);
	n = mr_read_full(rep[0], &child_errno, sizeof(child_errno));
	if (n == (ssize_t)sizeof(child_errno)) {
		rc = child_errno == ENOENT
			     ? mr_err_set(err, MESHRUN_E_NOTFOUND,
					  "--png: GraphViz 'dot' is not installed (Debian: apt-get install graphviz; macOS: brew install graphviz); --dot prints the graph instead")
			     : mr_err_set(err, MESHRUN_E_EXEC, "--png: exec 'dot': %s",
					  strerror(child_errno));
	} else if (mr_write_full(in[1], dot->p, dot->len) < 0) {
		rc = mr_err_sys(err, "--png: write the graph to 'dot'");
	}
	mr_close(&in[1]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			if (!rc)
				rc = mr_err_sys(err, "waitpid 'dot'");
			goto out_close_rep;
		}
	}
	if (!rc && WIFEXITED(status) && WEXITSTATUS(status) != 0)
		rc = mr_err_set(err, MESHRUN_E_EXEC, "--png: 'dot -Tpng -o %s' exited with status %d",
				path, WEXITSTATUS(status));
	else if (!rc && WIFSIGNALED(status))
		rc = mr_err_set(err, MESHRUN_E_EXEC, "--png: 'dot' was killed by signal %d",
				WTERMSIG(status));
out_close_rep:
	mr_close(&rep[0]);
	mr_close(&rep[1]);
out_close_in:
	mr_close(&in[0]);
	mr_close(&in[1]);
	return rc;
}
