/*
 * cmdopts.h - meshsim's subcommands described once: usage line, one-line
 * summary, option table and --help text of each. The subcommands parse with
 * these tables (bound to their own struct mr_sim_args) and print --help from
 * them; main.c lists them, and its --help-man/--help-markdown/--help-bash
 * (common/optdoc.h) render the same tables as structured entries, so the
 * reference, the man page and the completion cannot drift from the parsers.
 * Nothing here allocates; every string is static.
 */
#ifndef MR_SIM_CMDOPTS_H
#define MR_SIM_CMDOPTS_H

#include "common/compat.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "sim/plan.h"

/* What the subcommands' options set (each uses its own fields). */
struct mr_sim_args {
	const char *name;   /* --name NAME (up, exec, fault) */
	const char *output; /* --output DIR (gen) */
	bool pretend_rdma;  /* --pretend-rdma (up) */
};
#define MR_SIM_ARGS_INIT { MR_SIM_DEFAULT_NAME, NULL, false }

enum mr_sim_sub { MR_SIM_UP, MR_SIM_DOWN, MR_SIM_STATUS, MR_SIM_EXEC, MR_SIM_FAULT, MR_SIM_GEN,
		  MR_SIM_NSUB };

/* Room for the longest table, MR_OPT_END included. */
#define MR_SIM_MAX_OPTS 4

/* Fill opts[MR_SIM_MAX_OPTS] with sub's table (ending in MR_OPT_END) over a. */
void mr_sim_sub_opts(enum mr_sim_sub sub, struct mr_sim_args *a, struct mr_opt *opts);

/*
 * sub as documentation: .name ("up"), .usage ("meshsim up FIXTURE_DIR|TOPOLOGY
 * [--name NAME]"), .summary, .opts (the table over a static scratch struct),
 * .trailer (the text after the options in --help).
 */
const struct mr_optdoc_cmd *mr_sim_sub_doc(enum mr_sim_sub sub);

#endif
