/*
 * meshsim - simulated Thunderbolt clusters of Macs in Linux network namespaces.
 */
#include "common/compat.h"

#include <signal.h>

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "unknown"
#endif

#include "common/log.h"
#include "common/optdoc.h"
#include "sim/cmd.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{ "up", mr_sim_cmd_up, "FIXTURE_DIR|TOPOLOGY [--name NAME]  bring a cluster up (root)" },
	{ "down", mr_sim_cmd_down, "[NAME]                        remove everything it made" },
	{ "status", mr_sim_cmd_status, "[NAME]                      hosts, cables, addresses, faults" },
	{ "exec", mr_sim_cmd_exec, "[--name NAME] HOST -- CMD...   run a command in a host" },
	{ "fault", mr_sim_cmd_fault, "[--name NAME] FAULT ARGS     unplug/plug, stop/start, nosudo/sudo, latency" },
	{ "gen", mr_sim_cmd_gen, "TOPOLOGY -o DIR                write a generated fixture set" },
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

static void usage(FILE *f)
{
	fprintf(f, "usage: meshsim COMMAND [ARGS]   (meshsim COMMAND --help for more)\n\n");
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++)
		fprintf(f, "  %-7s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n%s", trailer);
}

/*
 * Hidden --help-man/--help-markdown/--help-bash (common/optdoc.h): the table
 * above, each subcommand's own --help, and the trailer. cmds[i].help is
 * "ARGS  summary": split at the first run of two spaces.
 */
static int doc_main(int argc, char **argv)
{
	struct mr_optdoc_cmd dc[1 + ARRAY_SIZE(cmds)];
	char syn[ARRAY_SIZE(cmds)][160];
	struct mr_optdoc d = { "meshsim", MESHRUN_VERSION,
			       "simulated Thunderbolt clusters of Macs in Linux network namespaces",
			       dc, ARRAY_SIZE(dc), false };

	memset(dc, 0, sizeof(dc));
	dc[0].usage = "meshsim COMMAND [ARGS]";
	dc[0].trailer = trailer;
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		const char *h = cmds[i].help, *gap = strstr(h, "  ");
		size_t n = gap ? (size_t)(gap - h) : strlen(h);

		snprintf(syn[i], sizeof(syn[i]), "meshsim %s %.*s", cmds[i].name, (int)n, h);
		dc[i + 1].name = cmds[i].name;
		dc[i + 1].usage = syn[i];
		dc[i + 1].summary = gap ? gap + strspn(gap, " ") : NULL;
		dc[i + 1].run_help = cmds[i].fn;
	}
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
	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	mr_error("meshsim: unknown command '%s'", argv[1]);
	usage(stderr);
	return 2;
}
