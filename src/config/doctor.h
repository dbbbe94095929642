/*
 * doctor.h - `meshconfig doctor`: why a cluster will not run, said before it runs.
 *
 * Every host of a hostfile (or --hosts list) is checked over the hal, as
 * meshconfig's own steps reach it, all hosts in parallel, and one table is
 * printed: a row per host, a column per check, each failure with the command
 * that fixes it (--json: the same for scripts). The checks:
 *   reach         ssh (auth, host key, time to connect), the login user and shell
 *   software      macOS version and build equal everywhere (at least 26.2 for
 *                 RDMA, 26.3 for large messages), meshrun's version, with
 *                 --python the Python and MLX versions
 *   cables        every Thunderbolt cable: up at both ends, its speed, the same
 *                 /30 at both ends and in the hostfile, the route to the peer
 *                 through the cable, a ping through it, the MTU equal at both
 *                 ends, no port inside bridge0
 *   rdma          (a jaccl hostfile or --backend) rdma_ctl against ibv_devices,
 *                 the hostfile's devices on the right cables, port active, the
 *                 GID the job will use, queue pairs left for the job
 *   path          a TCP connect between the ranks on the job's own ports, from
 *                 processes started as meshrun starts ranks
 *   housekeeping  clock skew, free space where the job writes, job directories
 *                 left by a dead run
 *
 * Protocol (config/main.c):
 *   argv[1] == "doctor"       -> mr_doctor_main(argc - 1, argv + 1, self, stdout, stderr)
 *   argv[1] == "doctor-probe" -> mr_doctor_probe_main(argc - 1, argv + 1)
 * Tests drive mr_doctor_run() with a hal of their own.
 *
 * Exit status: MR_DOCTOR_EXIT_OK (every check passed or only warned),
 * MR_DOCTOR_EXIT_FAIL (a check failed, or the doctor itself could not run),
 * MR_DOCTOR_EXIT_USAGE.
 *
 * Ownership: the options point into argv (and own envs); the hal given to
 * mr_doctor_run() stays the caller's.
 */
#ifndef MR_CONFIG_DOCTOR_H
#define MR_CONFIG_DOCTOR_H

#include "common/compat.h"
#include "common/strvec.h"
#include "hal/hal.h"
#include "hal/ssh_opts.h"

enum { MR_DOCTOR_EXIT_OK = 0, MR_DOCTOR_EXIT_FAIL = 1, MR_DOCTOR_EXIT_USAGE = 2 };

struct mr_doctor_opts {
	const char *hosts;          /* --hosts LIST */
	const char *hostfile;       /* --hostfile FILE (its ips, rdma, mesh_ips are checked) */
	const char *backend;        /* --backend, NULL: the hostfile's */
	const char *python;         /* --python P: check Python and MLX there */
	bool json;                  /* --json */
	int starting_port;          /* --starting-port (meshrun's default 32323) */
	int connections_per_ip;     /* --connections-per-ip (1) */
	struct mr_strvec envs;      /* --env K=V: as meshrun's (MESHRUN_IB_GID_INDEX) */
	int64_t connect_timeout_ms; /* --connect-timeout: the path check's connects (3 s) */
	struct mr_ssh_opts ssh;     /* --ssh-config, --ssh, --persist, --known-hosts, ... */
	int64_t timeout_ms;         /* --timeout: per host command (0: the hal's 30 s) */
	bool verbose;               /* --verbose: each phase and its time on stderr */
	const char *self;           /* argv[0] of meshconfig: the probe program here */
};

#define MR_DOCTOR_OPTS_INIT { NULL, NULL, NULL, NULL, false, 32323, 1, MR_STRVEC_INIT, \
			      3000, MR_SSH_OPTS_INIT, 0, false, NULL }

/* Parse `doctor ARGS` (argv[0] is "doctor"). -1: go on; else the exit code
 * (0 after --help, 2 after a usage error, printed on err). */
int mr_doctor_parse_args(struct mr_doctor_opts *o, int argc, char **argv, FILE *out, FILE *err);
void mr_doctor_opts_release(struct mr_doctor_opts *o);

/* Parse, make the hal the options ask for, run, free. Returns the exit code. */
int mr_doctor_main(int argc, char **argv, const char *self, FILE *out, FILE *err);

/* Run every check over hal (the caller's) and print the table (or JSON) on out,
 * progress and errors on err. Returns the exit code. */
int mr_doctor_run(const struct mr_doctor_opts *o, struct mr_hal *hal, FILE *out, FILE *err);

/*
 * What the path check runs on each host (`meshconfig doctor-probe ...`, argv[0]
 * "doctor-probe"); its protocol is in doctor_probe.c. Returns the exit code.
 */
int mr_doctor_probe_main(int argc, char **argv);

/* The subcommand as documentation (meshconfig's optdoc, config/opts.c). */
struct mr_optdoc_cmd;
const struct mr_optdoc_cmd *mr_doctor_doc_cmd(void);

#endif
