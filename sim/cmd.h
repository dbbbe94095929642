/*
 * cmd.h - meshsim's subcommands. Each takes the argv after "meshsim" (argv[0] is
 * the subcommand's name), prints its own errors once, and returns the process
 * exit code: 0 ok, 1 failure, 2 usage error, 3 not supported by this kernel
 * (a fault the kernel or tools cannot do); exec returns the command's own status.
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
