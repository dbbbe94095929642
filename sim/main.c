/*
 * sim/main.c - meshsim's main: simulated Thunderbolt clusters of Macs in Linux
 * network namespaces.
 */
#include "common/compat.h"

#include <signal.h>

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "unknown"
#endif

#include "common/log.h"
#include "common/optdoc.h"
#include "sim/cmd.h"
#include "sim/cmdopts.h"

/* Indexed by enum mr_sim_sub; the texts and tables are in sim/cmdopts.c. */
static int (*const cmd_fn[MR_SIM_NSUB])(int argc, char **argv) = {
	[MR_SIM_UP] = mr_sim_cmd_up,         [MR_SIM_DOWN] = mr_sim_cmd_down,
	[MR_SIM_STATUS] = mr_sim_cmd_status, [MR_SIM_EXEC] = mr_sim_cmd_exec,
	[MR_SIM_FAULT] = mr_sim_cmd_fault,   [MR_SIM_GEN] = mr_sim_cmd_gen,
};

static const char trailer[] =
	"State lives in $MESHSIM_STATE_DIR/NAME (default /run/meshsim/NAME).\n"
	"\n"
	"Exit status:\n"
	"  0  success\n"
	"  1  failure (also: not root where root is needed)\n"
	"  2  usage error\n"
	"  3  not supported by this kernel (fault latency without sch_netem)\n"
	"  exec passes the command's own status through\n";

/* "  up      FIXTURE_DIR|TOPOLOGY [--name NAME]  bring a cluster up (root)" */
static void usage(FILE *f)
{
	fprintf(f, "usage: meshsim COMMAND [ARGS]   (meshsim COMMAND --help for more)\n\n");
	for (int i = 0; i < MR_SIM_NSUB; i++) {
		const struct mr_optdoc_cmd *c = mr_sim_sub_doc((enum mr_sim_sub)i);
		const char *args = c->usage + strlen("meshsim ") + strlen(c->name);

		args += strspn(args, " ");
		fprintf(f, "  %-7s %-38s %s\n", c->name, args, c->summary);
	}
	fprintf(f, "\n%s", trailer);
}

/*
 * Hidden --help-man/--help-markdown/--help-bash (common/optdoc.h): meshsim's
 * own --help and --version, then every subcommand's table (sim/cmdopts.h).
 */
static int doc_main(int argc, char **argv)
{
	static const struct mr_opt top_opts[] = { MR_OPT_END() };
	struct mr_optdoc_cmd dc[1 + MR_SIM_NSUB];
	struct mr_optdoc d = { "meshsim", MESHRUN_VERSION,
			       "simulated Thunderbolt clusters of Macs in Linux network namespaces",
			       dc, ARRAY_SIZE(dc), false };

	memset(dc, 0, sizeof(dc));
	dc[0].usage = "meshsim COMMAND [ARGS]";
	dc[0].opts = top_opts;
	dc[0].trailer = trailer;
	for (int i = 0; i < MR_SIM_NSUB; i++)
		dc[i + 1] = *mr_sim_sub_doc((enum mr_sim_sub)i);
	return mr_optdoc_main(argc, argv, &d);
}

int main(int argc, char **argv)
{
	int rc = doc_main(argc, argv);

	if (rc >= 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	mr_log_init_from_env();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("meshsim %s\n", MESHRUN_VERSION);
		return 0;
	}
	for (int i = 0; i < MR_SIM_NSUB; i++)
		if (!strcmp(argv[1], mr_sim_sub_doc((enum mr_sim_sub)i)->name))
			return cmd_fn[i](argc - 1, argv + 1);
	mr_error("meshsim: unknown command '%s'", argv[1]);
	usage(stderr);
	return 2;
}
