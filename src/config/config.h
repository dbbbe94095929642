/*
 * config.h - meshconfig: find how a set of Macs is cabled, plan the point-to-point
 * links, optionally configure them, and write the MLX hostfile. Flag-compatible
 * with mlx.distributed_config.
 *
 * Protocol:
 *   struct mr_config_opts o = MR_CONFIG_OPTS_INIT;
 *   rc = mr_config_parse_args(&o, argc, argv, stdout, stderr);  (-1: go on, else exit code)
 *   rc = mr_config_main_with(&o, stdout, stderr);   makes the hal (replay for --simulate,
 *                                                   local for 127.0.0.1 only, else ssh)
 *        or, from tests, mr_config_run(&o, hal, out, err) with a hal of your own;
 *   mr_config_opts_release(&o);
 *
 * Every host command goes through the hal. The steps, each reported by --verbose
 * with its time:
 *   1. ssh check: mr_hal_connect + `true` and `sudo -n true` on every host, in parallel;
 *   2. discovery: `ipconfig getifaddr en0|en1` (ethernet), plus `system_profiler
 *      SPThunderboltDataType -json`, `networksetup -listallhardwareports` and
 *      `ibv_devices` (thunderbolt), all hosts in ONE parallel batch;
 *   3. thunderbolt: topology verdict (mesh / ring / neither), --dot, backend choice,
 *      /30 IP plan;
 *   4. setup: with --auto-setup and passwordless sudo everywhere, the commands run
 *      on every host in parallel (one `sh -c` per host); else they are printed;
 *   5. verify (after an applied setup): every planned peer answers one ping through
 *      its interface; with --mtu N, every end's MTU is set, read back and checked
 *      with a don't-fragment ping of N bytes (boot.h);
 *   6. --at-boot: the LaunchDaemon that applies it again at boot (boot.h);
 *   7. hostfile: --output-hostfile FILE, or stdout.
 * --undo runs the ssh check, then removes what meshconfig set up (boot.h).
 * Nothing that came out of a host goes into a command unless it passed a strict
 * check (interface names, IPv4 addresses); a discovery error stops the run before
 * any configuration command is sent.
 *
 * Output streams: `out` gets only what a script consumes (hostfile JSON when no
 * --output-hostfile is given, DOT with --dot); `err` gets progress, warnings,
 * errors, the verdict and the setup commands to run by hand.
 */
#ifndef MR_CONFIG_H
#define MR_CONFIG_H

#include "common/compat.h"
#include "common/strvec.h"
#include "hal/hal.h"
#include "hal/ssh_opts.h"

/* Exit codes of meshconfig (documented in --help). */
enum mr_config_exit {
	MR_CONFIG_EXIT_OK = 0,
	MR_CONFIG_EXIT_TOPOLOGY = 1,    /* no usable mesh/ring, backend not possible, no RDMA,
					   local failure (write the hostfile, start the hal) */
	MR_CONFIG_EXIT_USAGE = 2,       /* bad flags or hosts */
	MR_CONFIG_EXIT_UNREACHABLE = 3, /* a host could not be reached (without --ignore-unreachable) */
	MR_CONFIG_EXIT_DISCOVERY = 4,   /* a discovery command failed or its output is malformed */
	MR_CONFIG_EXIT_SETUP = 5,       /* a setup command failed, or a peer did not answer after setup
					   (also: an end refused --mtu, --at-boot or --undo failed) */
};

struct mr_config_opts {
	const char *hosts;           /* --hosts: comma list (default 127.0.0.1) */
	const char *hostfile;        /* --hostfile: MLX hostfile to take the hosts from */
	const char *over;            /* --over: "thunderbolt" (default) or "ethernet" */
	const char *backend;         /* --backend: ring|jaccl|jaccl-ring, NULL: choose */
	bool auto_setup;             /* --auto-setup / --no-auto-setup (default off) */
	const char *output_hostfile; /* --output-hostfile: NULL: stdout */
	bool dot;                    /* --dot: print the topology as DOT and stop */
	bool ignore_unreachable;     /* --ignore-unreachable */
	struct mr_strvec envs;       /* --env K=V (repeatable), checked */
	bool verbose;                /* --verbose */
	const char *simulate;        /* --simulate DIR: hosts answered from fixture DIR */
	int64_t timeout_ms;          /* --timeout: per-command deadline, 0: hal default */
	const char *png;             /* --png FILE: the DOT rendered by GraphViz, then stop */
	struct mr_ssh_opts ssh;      /* --ssh-config, --ssh, --persist, --known-hosts, ... */
	bool at_boot;                /* --at-boot: a LaunchDaemon applies the setup at boot (boot.h) */
	bool undo;                   /* --undo: remove what meshconfig set up (boot.h) */
	int mtu;                     /* --mtu N: on every cable's two ends, 0: unchanged (boot.h) */
};

#define MR_CONFIG_OPTS_INIT { NULL, NULL, "thunderbolt", NULL, false, NULL, false, false, \
			      MR_STRVEC_INIT, false, NULL, 0, NULL, MR_SSH_OPTS_INIT, false, false, 0 }

/*
 * Parse the command line into o (strings point into argv). Prints --help or
 * --version to out and usage errors to err. Returns -1 to go on, or the exit
 * code to leave with (0 after --help, 2 after a usage error).
 */
int mr_config_parse_args(struct mr_config_opts *o, int argc, char **argv, FILE *out, FILE *err);
void mr_config_opts_release(struct mr_config_opts *o);

/* Print --help (the option table, exit codes, differences from MLX). */
void mr_config_usage(FILE *f);
/* The same table and text as documentation (common/optdoc.h). */
struct mr_optdoc;
const struct mr_optdoc *mr_config_doc(void);

/* Run every step on hal (owned by the caller). Returns an enum mr_config_exit. */
int mr_config_run(const struct mr_config_opts *o, struct mr_hal *hal, FILE *out, FILE *err);

/* Make the hal the options ask for, run, free the hal. Returns an enum mr_config_exit. */
int mr_config_main_with(const struct mr_config_opts *o, FILE *out, FILE *err);

#endif
