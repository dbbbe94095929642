/*
 * fuzz_ssh_config.c - an ssh_config file (src/hal/ssh_config.c): parse it and
 * look up a few destinations (expansions of %h, %r, %u, %d, ~); and the
 * input's first line as an ssh destination ("[user@]host", from --hosts or a
 * hostfile): what mr_ssh_dest_split() accepts must hold no character a shell
 * or ssh would read specially.
 */
#include "fuzz.h"
#include "hal/ssh_config.h"

#include <ctype.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* lookups expand ~ and %d: make them independent of who runs this */
	setenv("HOME", "/home/fuzz", 1);
	setenv("USER", "fuzz", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const dests[] = { "h1", "alice@h2", "m3.example", "10.0.0.1" };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_ssh_config *cfg = NULL;
	const uint8_t *nl = memchr(data, '\n', MR_MIN(size, (size_t)128));
	char *dest = fuzz_cstr(data, nl ? (size_t)(nl - data) : MR_MIN(size, (size_t)128));
	char *user = NULL, *host = NULL;
	struct meshrun_err de = MESHRUN_ERR_INIT;
	int rc = mr_ssh_dest_split(dest, &user, &host, &de);

	fuzz_check_err(rc, &de, "mr_ssh_dest_split");
	if (rc == 0) {
		FUZZ_ASSERT(host && host[0] && host[0] != '-');
		FUZZ_ASSERT(!user || (user[0] && user[0] != '-'));
		for (const char *p = host; *p; p++)
			FUZZ_ASSERT(!strchr(" \t\r'\"`$;&|<>()\\*?[]{}!#~@=,", *p) && (unsigned char)*p > ' ' && (unsigned char)*p < 0x7f);
		for (const char *p = user ? user : ""; *p; p++)
			FUZZ_ASSERT(isalnum((unsigned char)*p) || strchr("_.-", *p));
	}
	free(user);
	free(host);
	free(dest);

	rc = mr_ssh_config_parse(&cfg, (const char *)data, size, "fuzz_config", &err);

	fuzz_check_err(rc, &err, "mr_ssh_config_parse");
	if (rc < 0) {
		FUZZ_ASSERT(cfg == NULL);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(dests); i++) {
		struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		rc = mr_ssh_config_lookup(cfg, dests[i], &h, &e);
		fuzz_check_err(rc, &e, "mr_ssh_config_lookup");
		if (rc == 0) {
			FUZZ_ASSERT(h.hostname && h.alias);
			FUZZ_ASSERT(h.port >= 0 && h.port <= 65535);
		}
		mr_ssh_host_cfg_release(&h);
	}
	mr_ssh_config_free(cfg);
	return 0;
}
