/*
 * launchd_main.c - meshsim-launchd, the program behind a simulated host's
 * `launchctl` shim and its boot (launchd.h):
 *   meshsim-launchd launchctl HOST_DIR VERB ARGS...
 *   meshsim-launchd boot HOST_DIR
 * Run inside a host (its namespaces and its /Library), by the shim or by the
 * host's start (login.h); not a command for people.
 */
#include "common/compat.h"
#include "sim/launchd.h"

#include <signal.h>

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && !strcmp(argv[1], "launchctl"))
		return mr_launchd_launchctl(argv[2], argc - 3, argv + 3);
	if (argc == 3 && !strcmp(argv[1], "boot"))
		return mr_launchd_boot(argv[2]);
	fprintf(stderr, "usage: meshsim-launchd launchctl HOST_DIR VERB ARGS... | boot HOST_DIR\n");
	return 64;
}
