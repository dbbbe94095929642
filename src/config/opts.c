/*
 * config/opts.c - meshconfig's command line (not launch/opts.c, meshrun's): one
 * option table drives parsing and --help. The flags, their defaults and choices
 * are those of mlx.distributed_config.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/opt.h"
#include "common/optdoc.h"
#include "common/shquote.h"
#include "config/config.h"
#include "config/config_impl.h"
#include "config/doctor.h"

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "unknown"
#endif

static const char usage_line[] = "meshconfig [options]";

static const char trailer[] =
	"Every host command goes over ssh (libssh2, one connection per host); with\n"
	"--simulate DIR they are answered from the fixture folder DIR instead\n"
	"(DIR/<host>/system_profiler.json, networksetup.txt, ibv_devices.txt), so the\n"
	"verdict, backend, IP plan, hostfile and DOT can be seen without Macs or root.\n"
	"\n"
	"Output: the hostfile JSON (when no --output-hostfile is given) and the DOT\n"
	"graph go to stdout; progress, warnings, the verdict and the setup commands to\n"
	"run by hand go to stderr. (mlx.distributed_config prints all of it on stdout\n"
	"and waits for Enter after each host's commands; meshconfig never prompts.)\n"
	"\n"
	"meshconfig doctor checks every host, cable and RDMA device and the job's own\n"
	"path before a run: see 'meshconfig doctor --help'.\n"
	"\n"
	"Exit status:\n"
	"  0  success (hostfile written, or DOT printed)\n"
	"  1  no usable topology: neither mesh nor ring, the requested backend is not\n"
	"     possible, RDMA missing; or a local failure (writing the hostfile)\n"
	"  2  usage error (unknown flag, bad value, bad host list or hostfile)\n"
	"  3  a host is unreachable over ssh (use --ignore-unreachable to drop it)\n"
	"  4  a discovery command failed on a host or its output is malformed;\n"
	"     nothing has been changed on any host\n"
	"  5  a setup command failed on a host, or a planned peer address did not\n"
	"     answer a ping through its interface after the setup; an end refused\n"
	"     the --mtu, or a cable did not pass a packet of that size; --at-boot\n"
	"     could not be installed, or --undo failed, on a host\n"
	"\n"
	"--at-boot: the addresses and routes --auto-setup applies last until the\n"
	"next reboot (as mlx.distributed_config's); with --at-boot each host also\n"
	"gets /Library/LaunchDaemons/io.meshrun.meshconfig.plist, which runs\n"
	"/Library/Application Support/meshrun/meshconfig-at-boot.sh at boot and\n"
	"every 5 minutes: it takes the planned ports out of bridge0 and sets what\n"
	"differs from the plan, logging each change to\n"
	"/Library/Logs/meshrun/meshconfig-at-boot.log. --undo removes all of it\n"
	"(with or without --at-boot): the LaunchDaemon, its script and log, the\n"
	"192.168.x.y/30 addresses and their host routes on the Thunderbolt ports,\n"
	"an MTU other than 1500 there, and puts every Thunderbolt port back in\n"
	"bridge0 and bridge0 up, as macOS has them.\n";

/* Checked here so that a bad --env is a usage error before any host is touched
 * (config_impl.h; doctor's --env too). */
int cfg_check_envs(const struct mr_strvec *envs, struct meshrun_err *err)
{
	for (size_t i = 0; i < envs->nr; i++) {
		const char *kv = envs->v[i];
		const char *eq = strchr(kv, '=');
		char name[256];

		if (!eq)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "invalid value '%s' for '--env': expected NAME=VALUE", kv);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
		if ((size_t)(eq - kv) >= sizeof(name) || !mr_is_env_name(name))
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "invalid value '%s' for '--env': '%.*s' is not a valid variable name",
					  kv, (int)MR_MIN((size_t)(eq - kv), (size_t)64), kv);
	}
	return 0;
}

/* --at-boot, --mtu and --undo: what they go with (boot.h). */
static int check_boot_flags(const struct mr_config_opts *o, struct meshrun_err *err)
{
	bool eth = !strcmp(o->over, "ethernet");

	if (o->undo && (o->auto_setup || o->at_boot || o->mtu || o->dot || o->png ||
			o->output_hostfile || o->backend || eth))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "'--undo' takes hosts only: not with %s", o->auto_setup ? "--auto-setup"
				  : o->at_boot ? "--at-boot" : o->mtu ? "--mtu" : o->dot ? "--dot"
				  : o->png ? "--png" : o->output_hostfile ? "--output-hostfile"
				  : o->backend ? "--backend" : "--over ethernet");
	if (o->at_boot && !o->auto_setup)
		return mr_err_set(err, MESHRUN_E_USAGE, "'--at-boot' needs '--auto-setup'");
	if ((o->at_boot || o->mtu) && eth)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s' is for --over thunderbolt",
				  o->at_boot ? "--at-boot" : "--mtu");
	return 0;
}

/*
 * The table. It needs the address of the struct being filled, so it is built per
 * call; --help is printed from a table over a scratch struct.
 */
#define CONFIG_OPTIONS(o)                                                                     \
	{                                                                                     \
		MR_OPT_GROUP("Hosts"),                                                        \
		MR_OPT_STRING_D(0, "hosts", &(o)->hosts, "LIST", "127.0.0.1",                 \
				"comma-separated hosts: ssh names or IP addresses"),          \
		MR_OPT_STRING(0, "hostfile", &(o)->hostfile, "FILE",                          \
			      "MLX hostfile to take the hosts from"),                         \
		MR_OPT_BOOL(0, "ignore-unreachable", &(o)->ignore_unreachable,                \
			    "leave out the hosts ssh cannot reach instead of failing"),       \
		MR_OPT_GROUP("What to configure"),                                            \
		{ MR_OPTK_CHOICE, 0, "over", &(o)->over, "WHICH",                             \
		  "what type of connectivity to configure", 0, 0, "thunderbolt|ethernet", NULL, \
		  0, "thunderbolt" },                                                         \
		MR_OPT_CHOICE(0, "backend", &(o)->backend, "ring|jaccl|jaccl-ring",           \
			      "which distributed backend to configure (default: jaccl on an " \
			      "RDMA mesh, else jaccl-ring, else ring)"),                      \
		MR_OPT_BOOL(0, "auto-setup", &(o)->auto_setup,                                \
			    "run the setup commands on the hosts with sudo (needs "           \
			    "passwordless sudo on every host)"),                              \
		MR_OPT_SET_FALSE(0, "no-auto-setup", &(o)->auto_setup,                        \
				 "only print the setup commands (the default)"),              \
		MR_OPT_BOOL(0, "at-boot", &(o)->at_boot,                                      \
			    "with --auto-setup: also install a LaunchDaemon on every host "   \
			    "that applies this setup again at boot and every 5 minutes "      \
			    "(running meshconfig again replaces it; meshconfig only)"),       \
		MR_OPT_INT(0, "mtu", &(o)->mtu, "N", 576, 65535,                              \
			   "set the MTU of every cable's two ends to N (e.g. 9000) and check "   \
			   "each cable with a don't-fragment ping of N bytes (meshconfig only)"), \
		MR_OPT_BOOL(0, "undo", &(o)->undo,                                            \
			    "remove what meshconfig set up on the hosts: the LaunchDaemon, "  \
			    "the addresses, routes and MTUs of the Thunderbolt ports, which " \
			    "go back to bridge0; its script's deadline is 4 x --timeout "     \
			    "(meshconfig only)"),                                             \
		MR_OPT_LIST(0, "env", &(o)->envs, "K=V",                                      \
			    "a variable for the jobs, NAME=VALUE (repeatable)"),              \
		MR_OPT_GROUP("Output"),                                                       \
		MR_OPT_STRING(0, "output-hostfile", &(o)->output_hostfile, "FILE",            \
			      "write the hostfile to FILE (default: stdout)"),                \
		MR_OPT_BOOL(0, "dot", &(o)->dot,                                              \
			    "print the topology in DOT format and exit"),                     \
		MR_OPT_STRING(0, "png", &(o)->png, "FILE",                                    \
			      "write the topology picture to FILE with GraphViz's dot and "   \
			      "exit (meshconfig only)"),                                      \
		MR_OPT_BOOL(0, "verbose", &(o)->verbose,                                      \
			    "print debug messages (each step and its time, on stderr)"),      \
		MR_OPT_GROUP("meshconfig only"),                                              \
		MR_OPT_STRING(0, "simulate", &(o)->simulate, "DIR",                           \
			      "answer every host command from the fixture folder DIR "        \
			      "(hosts default to the fixture's)"),                            \
		MR_OPT_DURATION(0, "timeout", &(o)->timeout_ms, "SECS",                       \
				"deadline of each host command (default, and with 0: 30s)"),  \
		MR_SSH_OPTS(&(o)->ssh),                                                       \
		MR_OPT_END(),                                                                 \
	}

void mr_config_usage(FILE *f)
{
	struct mr_config_opts scratch = MR_CONFIG_OPTS_INIT;
	const struct mr_opt opts[] = CONFIG_OPTIONS(&scratch);

	fprintf(f, "Configure remote machines for use with MLX distributed (meshconfig %s)\n\n",
		MESHRUN_VERSION);
	mr_opt_usage(f, usage_line, opts, trailer);
}

/* For the docs (man page, reference, completion): the table over a scratch struct. */
const struct mr_optdoc *mr_config_doc(void)
{
	static struct mr_config_opts scratch = MR_CONFIG_OPTS_INIT;
	static const struct mr_opt opts[] = CONFIG_OPTIONS(&scratch);
	static struct mr_optdoc_cmd cmds[2];
	static const struct mr_optdoc doc = {
		"meshconfig", MESHRUN_VERSION,
		"find how Macs are cabled over Thunderbolt, configure the links, write the MLX hostfile",
		cmds, ARRAY_SIZE(cmds), false,
	};

	if (!cmds[0].usage) {
		cmds[0] = (struct mr_optdoc_cmd){ NULL, usage_line, NULL, opts, trailer, NULL };
		cmds[1] = *mr_doctor_doc_cmd(); /* meshconfig doctor */
	}
	return &doc;
}

int mr_config_parse_args(struct mr_config_opts *o, int argc, char **argv, FILE *out, FILE *err)
{
	const struct mr_opt opts[] = CONFIG_OPTIONS(o);
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc;

	rc = mr_opt_parse(opts, argc, argv, 0, NULL, NULL, &e);
	if (rc == MR_OPT_HELP) {
		mr_config_usage(out);
		return MR_CONFIG_EXIT_OK;
	}
	if (rc == MR_OPT_VERSION) {
		fprintf(out, "meshconfig %s\n", MESHRUN_VERSION);
		return MR_CONFIG_EXIT_OK;
	}
	if (rc == 0)
		rc = cfg_check_envs(&o->envs, &e);
	if (rc == 0 && o->timeout_ms < 0)
		rc = mr_err_set(&e, MESHRUN_E_USAGE, "invalid value for '--timeout': negative");
	if (rc == 0 && o->timeout_ms > INT32_MAX)
		rc = mr_err_set(&e, MESHRUN_E_USAGE, "invalid value for '--timeout': too large");
	if (rc == 0)
		rc = check_boot_flags(o, &e);
	if (rc < 0) {
		fprintf(err, "meshconfig: %s\nmeshconfig: try 'meshconfig --help'\n", e.msg);
		return MR_CONFIG_EXIT_USAGE;
	}
	return -1;
}

void mr_config_opts_release(struct mr_config_opts *o)
{
	mr_strvec_release(&o->envs);
}
