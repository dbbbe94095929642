/*
 * cmd.h - meshsim's subcommands. Each takes the argv after "meshsim" (argv[0] is
 * the subcommand's name), prints its own errors once, and returns the process
 * exit code: 0 ok, 1 failure, 2 usage error, 3 not supported by this kernel
 * (a fault the kernel or tools cannot do); exec returns the command's own status.
 */
#ifndef MR_SIM_CMD_H
#define MR_SIM_CMD_H

#define MR_SIM_EXIT_FAIL 1
#define MR_SIM_EXIT_USAGE 2
#define MR_SIM_EXIT_UNSUPPORTED 3

int mr_sim_cmd_up(int argc, char **argv);
int mr_sim_cmd_down(int argc, char **argv);
int mr_sim_cmd_status(int argc, char **argv);
int mr_sim_cmd_exec(int argc, char **argv);
int mr_sim_cmd_fault(int argc, char **argv);
int mr_sim_cmd_gen(int argc, char **argv);

#endif
