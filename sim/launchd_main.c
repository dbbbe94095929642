/*
 * launchd_main.c - meshsim-launchd, the program behind a simulated host's
 * `launchctl` shim and its boot (launchd.h):
 *   meshsim-launchd launchctl HOST_DIR VERB ARGS...
 *   meshsim-launchd host HOST_DIR SSHD ARGS...   the host's start: its root and
 *       /Library (login.h), its LaunchDaemons loaded (HOST_DIR/launchd.log), then
 *       exec SSHD ARGS, as a Mac's launchd starts sshd
 * Run inside a host (its namespaces), by the shim or by the host's start
 * (login.h); not a command for people.
 */
#include "common/compat.h"
#include "sim/launchd.h"
#include "sim/login.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "common/err.h"
#include "common/xalloc.h"

static int host_start(const char *host_dir, char **sshd_argv)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *log = xasprintf("%s/launchd.log", host_dir);
	int fd, out;

	if (mr_sim_login_enter_root(host_dir, &e) < 0) {
		fprintf(stderr, "meshsim-launchd: host '%s': %s\n", host_dir, e.msg);
		return 1;
	}
	/* the boot's lines go to the host's log, then stdout is sshd's again */
	fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	out = dup(1);
	if (fd >= 0 && out >= 0 && dup2(fd, 1) >= 0) {
		mr_launchd_boot(host_dir);
		fflush(stdout);
		dup2(out, 1);
	} else {
		fprintf(stderr, "meshsim-launchd: '%s': %s: no LaunchDaemon loaded\n", log, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	if (out >= 0)
		close(out);
	free(log);
	execv(sshd_argv[0], sshd_argv);
	fprintf(stderr, "meshsim-launchd: exec '%s': %s\n", sshd_argv[0], strerror(errno));
	return 127;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && !strcmp(argv[1], "launchctl"))
		return mr_launchd_launchctl(argv[2], argc - 3, argv + 3);
	if (argc >= 4 && !strcmp(argv[1], "host"))
		return host_start(argv[2], argv + 3);
	fprintf(stderr, "usage: meshsim-launchd launchctl HOST_DIR VERB ARGS... | host HOST_DIR SSHD ARGS...\n");
	return 64;
}
