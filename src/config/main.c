/*
 * config/main.c - meshconfig's main: process setup, options, run, exit code (see
 * config.h).
 */
#include "common/compat.h"
#include "common/log.h"
#include "common/optdoc.h"
#include "config/config.h"

#include <signal.h>

int main(int argc, char **argv)
{
	struct mr_config_opts o = MR_CONFIG_OPTS_INIT;
	int rc;

	if ((rc = mr_optdoc_main(argc, argv, mr_config_doc())) >= 0) /* hidden, for the build */
		return rc;
	/* A closed stdout (meshconfig --dot | head) is a write error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	mr_log_init_from_env();
	rc = mr_config_parse_args(&o, argc, argv, stdout, stderr);
	if (rc < 0)
		rc = mr_config_main_with(&o, stdout, stderr);
	mr_config_opts_release(&o);
	return rc;
}
