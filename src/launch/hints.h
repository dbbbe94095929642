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

/*
 * run.c: where a failure points to `meshconfig doctor` (config/doctor.h), one of
 * whose checks would have named the cause before the run; "%s %s": the doctor's
 * host option and its value ("--hostfile", "hosts.json" or "--hosts", "m1,m2")
 */
/* a host meshrun cannot reach: doctor's reach check, for every host at once */
#define MR_HINT_DOCTOR_REACH                                                             \
	"'meshconfig doctor %s %s' checks every host at once (ssh, cables, RDMA, the "    \
	"job's ports)"
/* the job's files could not be written there (setup exit 4): a full disk? */
#define MR_HINT_DOCTOR_DISK                                                              \
	"a full disk? 'meshconfig doctor %s %s' checks the free space where every host "  \
	"writes job files"
/* a rank of a job over the network failed */
#define MR_HINT_DOCTOR_RANKS                                                             \
	"ranks that cannot connect (a firewall, macOS's Local Network privacy, a port in " \
	"use, a cable without its address) or RDMA devices without their GID fail this "  \
	"way: 'meshconfig doctor %s %s' checks each before a run"

#define MR_LAUNCH_HINTS(X)                                                               \
	X(MR_HINT_RING_ADDRESS)                                                          \
	X(MR_HINT_EXIT_127)                                                              \
	X(MR_HINT_RDMA_FROM_LIST)                                                        \
	X(MR_HINT_RDMA_FROM_FILE)                                                        \
	X(MR_HINT_NOT_EXECUTABLE)                                                        \
	X(MR_HINT_DOCTOR_REACH)                                                          \
	X(MR_HINT_DOCTOR_DISK)                                                           \
	X(MR_HINT_DOCTOR_RANKS)

#endif
