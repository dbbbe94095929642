/*
 * cmd.h - meshsim's subcommands. Each takes the argv after "meshsim" (argv[0] is
 * the subcommand's name), prints its own errors once, and returns the process
 * exit code: 0 ok, 1 failure, 2 usage error, 3 not supported by this kernel
 * (a fault the kernel or tools cannot do); exec returns the command's own status.
 *
 * meshsim's files (calls go down the list; each header states its contract):
 *   main.c         the program: subcommand table, exit code
 *   cmdopts.c      every subcommand's option table (--help, the docs)
 *   up.c           `up`: fixture -> state files, keys, namespaces, cables, sshd, soft-RoCE
 *   cmds.c         `down`, `status`, `exec`, `gen`, and the argument parsing they share
 *   cmd_fault*.c   `fault` (fault_impl.h maps them; faults.c checks the arguments)
 *   login.c        each sshd in its own mount and UTS namespace (zsh login, hostname,
 *                  its own /Library)
 *   launchd.c plist.c  the hosts' launchd and launchctl (meshsim-launchd), plists
 *   render.c mac.c live.c  the text of the shims and configs; macOS answers; the
 *                  system_profiler / ibv_devices that follow the live cables
 *   net.c proc.c   iproute2 batches and namespaces; running jobs (common/spawn)
 *   model.c plan.c state.c  cluster model, names and addresses, state.json and faults
 */
#ifndef MR_SIM_CMD_H
#define MR_SIM_CMD_H

#include "common/compat.h"
#include "common/strvec.h"
#include "sim/cmdopts.h"

#define MR_SIM_EXIT_FAIL 1
#define MR_SIM_EXIT_USAGE 2
#define MR_SIM_EXIT_UNSUPPORTED 3

int mr_sim_cmd_up(int argc, char **argv);
int mr_sim_cmd_down(int argc, char **argv);
int mr_sim_cmd_status(int argc, char **argv);
int mr_sim_cmd_exec(int argc, char **argv);
int mr_sim_cmd_fault(int argc, char **argv);
int mr_sim_cmd_gen(int argc, char **argv);

/* Shared by the subcommands (cmds.c). Parse sub's options (sim/cmdopts.h) into
 * a, the positional words into rest (min_pos..max_pos of them); on --help or
 * --version print it and return 0 with *done set; else 0 or the usage exit
 * code, the error printed. */
int mr_sim_parse_args(enum mr_sim_sub sub, struct mr_sim_args *a, int argc, char **argv,
		      struct mr_strvec *rest, size_t min_pos, size_t max_pos, unsigned flags,
		      bool *done);
/* The pid in <state>/<host>/sshd.pid, or 0 while none is written (yet). */
pid_t mr_sim_read_sshd_pid(const char *state, const char *host);
/* 0 as root; else the error printed ("needs root") and the failure exit code. */
int mr_sim_need_root(const char *cmd);

#endif
