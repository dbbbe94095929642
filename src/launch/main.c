/*
 * launch/main.c - meshrun's main: launch a program on every rank, local or over
 * ssh, and supervise it (see launch.h for the flow and the exit codes).
 */
#include "common/compat.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "launch/launch.h"

#include <limits.h>
#include <signal.h>

int main(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_launch_opts o;
	struct mr_launch_plan plan;
	int rc;

	const struct mr_optdoc doc = { "meshrun", MESHRUN_VERSION,
				       "launch a program on every rank, local or over ssh, and supervise it",
				       mr_launch_doc_cmd(), 1, true };

	if ((rc = mr_optdoc_main(argc, argv, &doc)) >= 0) /* hidden: --help-man etc., for the build */
		return rc;
	if (argc == 2 && !strcmp(argv[1], "--help-env")) /* hidden: docs/contracts.md's tables */
		return mr_launch_env_doc(stdout) < 0;
	signal(SIGPIPE, SIG_IGN); /* a closed stdout is EPIPE, handled where we write */
	mr_log_init_from_env();
	mr_launch_opts_init(&o);
	o.self = argv[0];
	rc = mr_launch_parse(argc, argv, &o, &err);
	if (rc == MR_OPT_HELP || rc == MR_OPT_VERSION) {
		if (rc == MR_OPT_HELP)
			mr_launch_usage(stdout);
		else
			printf("meshrun %s\n", MESHRUN_VERSION);
		mr_launch_opts_release(&o);
		return 0;
	}
	if (rc == MR_OPT_OK && !o.verify_script)
		fprintf(stderr, "meshrun: --no-verify-script is deprecated (mlx.launch 0.32 removed it); "
				"the checks of the command and --cwd on every host are skipped\n");
	if (rc == MR_OPT_OK && o.print_python) {
		rc = mr_launch_print_python(&o, stdout, stderr);
		mr_launch_opts_release(&o);
		return rc;
	}
	if (rc == MR_OPT_OK && mr_ssh_opts_wants_stop(&o.ssh)) {
		struct mr_hal_opts ho = { 0 };
		bool stop;

		rc = mr_ssh_opts_apply(&o.ssh, &ho, &stop, &err);
		if (rc == 0)
			rc = mr_hal_persist_stop(&ho, &err);
		if (rc < 0)
			fprintf(stderr, "meshrun: --persist stop: %s\n", err.msg);
		else
			fprintf(stderr, "meshrun: %s\n", rc ? "persist daemon stopped" : "no persist daemon was running");
		mr_launch_opts_release(&o);
		return rc < 0 ? MR_LAUNCH_EXIT_FAIL : 0;
	}
	if (o.verbose && mr_log_level < MR_LOG_INFO)
		mr_log_level = MR_LOG_INFO;
	if (rc == MR_OPT_OK)
		rc = mr_launch_plan(&o, &plan, &err);
	if (rc < 0) {
		fprintf(stderr, "meshrun: %s\n", err.msg);
		if (rc == MESHRUN_E_USAGE)
			fprintf(stderr, "meshrun: try 'meshrun --help'\n");
		mr_launch_opts_release(&o);
		return rc == MESHRUN_E_USAGE ? MR_LAUNCH_EXIT_USAGE : MR_LAUNCH_EXIT_FAIL;
	}
	rc = mr_launch_run(&o, &plan);
	mr_launch_plan_release(&plan);
	mr_launch_opts_release(&o);
	return rc;
}
