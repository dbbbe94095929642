/*
 * launch/hints.h - what meshrun tells the user to do next, as string literals
 * used in its messages (so printf formats stay checked), and one list of them
 * (MR_LAUNCH_HINTS) through which tests/unit/test_hints.c checks that every
 * flag a hint names is one of meshrun's (and, inside a quoted 'meshconfig ...'
 * command, one of meshconfig's). A "%s" in a hint is filled by its caller.
 * The hal's hints (hal.h, mr_hal_hints) are checked the same way.
 */
#ifndef MR_LAUNCH_HINTS_H
#define MR_LAUNCH_HINTS_H

/* hosts.c: a host without an address the ring can use */
#define MR_HINT_RING_ADDRESS                                                             \
	"give addresses (--hosts 10.0.0.1,10.0.0.2,...), a HostName in ssh_config "      \
	"(--ssh-config), or a hostfile from 'meshconfig --hosts H1,H2,... "              \
	"--output-hostfile hosts.json' (--hostfile hosts.json)"

/* supervise.c: every rank exited 127 */
#define MR_HINT_EXIT_127                                                                 \
	"exit status 127 is the shell's 'not found': the command, or a shared library "  \
	"it needs (its stderr above names which); a program linked with libmeshrun "     \
	"needs its run-time path (pkg-config's or CMake's link line sets it: "           \
	"docs/guide-laptop.md, 'Write and run your own program'), or --env "             \
	"LD_LIBRARY_PATH=DIR"

/* plan.c: --backend jaccl/jaccl-ring without an rdma matrix (%s: the backend) */
#define MR_HINT_RDMA_FROM_LIST                                                           \
	"make one with 'meshconfig --backend %s --hosts H1,H2,... --output-hostfile "    \
	"hosts.json', then 'meshrun --hostfile hosts.json'"
/* (%s: the backend, the hostfile) */
#define MR_HINT_RDMA_FROM_FILE                                                           \
	"make the hostfile with 'meshconfig --backend %s --hostfile %s "                 \
	"--output-hostfile NEW.json'"

/* plan.c: a command that is no executable and no .py */
#define MR_HINT_NOT_EXECUTABLE                                                           \
	"make it executable (chmod +x), or name its interpreter (--python PATH for a "   \
	"Python script; sh FILE for a shell script)"

#define MR_LAUNCH_HINTS(X)                                                               \
	X(MR_HINT_RING_ADDRESS)                                                          \
	X(MR_HINT_EXIT_127)                                                              \
	X(MR_HINT_RDMA_FROM_LIST)                                                        \
	X(MR_HINT_RDMA_FROM_FILE)                                                        \
	X(MR_HINT_NOT_EXECUTABLE)

#endif
