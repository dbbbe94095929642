/*
 * fuzz_opt.c - the option parser (src/common/opt.c) with the two real tables:
 * meshrun's (mr_launch_parse) and meshconfig's (mr_config_parse_args).
 * Input: one byte choosing the tool (even: meshrun, odd: meshconfig), then
 * the arguments separated by NUL bytes (argv[0] is the tool's name).
 */
#include "fuzz.h"
#include "config/config.h"
#include "launch/launch.h"

#define MAX_ARGS 64

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *args[MAX_ARGS + 2];
	int argc = 0;
	char *buf;

	if (size < 1)
		return 0;
	bool config = data[0] & 1;
	buf = fuzz_cstr(data + 1, size - 1);
	args[argc++] = config ? "meshconfig" : "meshrun";
	for (size_t off = 0; off <= size - 1 && argc <= MAX_ARGS; ) {
		args[argc++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	if (size == 1)
		argc = 1; /* no argument at all */
	args[argc] = NULL;

	if (config) {
		struct mr_config_opts o = MR_CONFIG_OPTS_INIT;
		int rc = mr_config_parse_args(&o, argc, args, devnull, devnull);
		FUZZ_ASSERT(rc == -1 || rc == MR_CONFIG_EXIT_OK || rc == MR_CONFIG_EXIT_USAGE);
		if (rc == -1)
			FUZZ_ASSERT(o.timeout_ms >= 0);
		mr_config_opts_release(&o);
	} else {
		struct mr_launch_opts o;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		mr_launch_opts_init(&o);
		int rc = mr_launch_parse(argc, args, &o, &err);
		fuzz_check_err(rc, &err, "mr_launch_parse");
		if (rc == 0)
			FUZZ_ASSERT(o.command.nr > 0 || o.print_python);
		mr_launch_opts_release(&o);
	}
	free(buf);
	return 0;
}
