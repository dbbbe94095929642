/*
 * hal/ssh_opts.c - the ssh and host-key options shared by meshrun and meshconfig
 * (ssh_opts.h): from the parsed flags to the hal's options, and the --ssh and
 * --persist values read from a flag or the environment.
 */
#include "common/compat.h"
#include "hal/ssh_opts.h"
#include "common/envmap.h"
#include "common/err.h"
#include "common/num.h"

#include <stdlib.h>

/* "auto", "libssh2", "openssh" -> *out; 0, or -1 for anything else. */
static int ssh_parse(const char *s, enum mr_hal_ssh *out)
{
	if (!s)
		return -1;
	if (!strcmp(s, "auto"))
		*out = MR_HAL_SSH_AUTO;
	else if (!strcmp(s, "libssh2"))
		*out = MR_HAL_SSH_LIBSSH2;
	else if (!strcmp(s, "openssh"))
		*out = MR_HAL_SSH_OPENSSH;
	else
		return -1;
	return 0;
}

int mr_hal_ssh_pick(const char *opt, enum mr_hal_ssh *out, struct meshrun_err *err)
{
	const char *env = getenv("MESHRUN_SSH");
	const char *name = opt ? opt : env && *env ? env : "auto";

	if (ssh_parse(name, out) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "%s '%s': unknown ssh (auto, libssh2, openssh)",
				  opt ? "--ssh" : "MESHRUN_SSH", name);
	return 0;
}

int mr_hal_persist_pick(const char *opt, int64_t *ms, bool *stop, struct meshrun_err *err)
{
	const char *v = opt ? opt : getenv(MR_ENV(MESHRUN_SSH_PERSIST));
	const char *name = opt ? "--persist" : "MESHRUN_SSH_PERSIST";
	size_t n;

	*ms = 0;
	*stop = false;
	if (!v || !*v || !strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"))
		return 0;
	if (!strcmp(v, "stop")) {
		*stop = true;
		return 0;
	}
	n = strlen(v);
	if (n > 1 && v[n - 1] == 'h' && n < 32) { /* hours: num.c knows ms, s and m */
		char num[32];
		int64_t h;

		memcpy(num, v, n - 1);
		num[n - 1] = '\0';
		if (mr_parse_duration_ms(num, INT64_C(1) << 30, &h) == 0 && h > 0 && !strpbrk(num, "ms")) {
			*ms = h * 3600; /* "1" read as 1 s */
			goto check;
		}
	} else if (mr_parse_duration_ms(v, INT64_C(1) << 40, ms) == 0 && *ms > 0) {
		goto check;
	}
	return mr_err_set(err, MESHRUN_E_USAGE, "%s '%s': expected a duration (10m, 90s, 1h) or 'stop'", name, v);
check:
	if (*ms > UINT32_MAX) /* the daemon's idle time travels as u32 ms (49 days) */
		*ms = UINT32_MAX;
	return 0;
}

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
