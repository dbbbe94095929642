/*
 * config/main.c - meshconfig's main: process setup, options, run, exit code (see
 * config.h).
 */
#include "common/compat.h"
#include "common/log.h"
#include "common/optdoc.h"
#include "config/config.h"
#include "config/doctor.h"

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
	if (argc > 1 && !strcmp(argv[1], "doctor"))
		return mr_doctor_main(argc - 1, argv + 1, argv[0], stdout, stderr);
	if (argc > 1 && !strcmp(argv[1], "doctor-probe"))
		return mr_doctor_probe_main(argc - 1, argv + 1);
	rc = mr_config_parse_args(&o, argc, argv, stdout, stderr);
	if (rc < 0)
		rc = mr_config_main_with(&o, stdout, stderr);
	mr_config_opts_release(&o);
	return rc;
}
