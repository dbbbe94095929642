/*
 * hal/ssh_opts.c - the ssh and host-key options shared by meshrun and meshconfig
 * (ssh_opts.h): from the parsed flags to the hal's options.
 */
#include "common/compat.h"
#include "hal/ssh_opts.h"
#include "common/err.h"

bool mr_ssh_opts_wants_stop(const struct mr_ssh_opts *so)
{
	return so->persist && !strcmp(so->persist, "stop");
}

int mr_ssh_opts_apply(const struct mr_ssh_opts *so, struct mr_hal_opts *ho, bool *stop,
		      struct meshrun_err *err)
{
	bool want_stop = false;
	int rc;

	ho->ssh_config = so->config;
	ho->known_hosts = so->known_hosts;
	ho->accept_new_hostkeys = so->accept_new_hostkeys;
	if ((rc = mr_hal_ssh_pick(so->client, &ho->ssh, err)) < 0)
		return rc;
	if ((rc = mr_hal_persist_pick(so->persist, &ho->persist_ms, &want_stop, err)) < 0)
		return rc;
	if (stop)
		*stop = want_stop;
	else if (want_stop) /* only from the environment: a --persist stop is the tool's */
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "MESHRUN_SSH_PERSIST=stop: only '--persist stop' ends the daemon");
	return 0;
}
