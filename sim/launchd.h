/*
 * launchd.h - meshsim's stand-in for a Mac's launchd: the `launchctl` shim of
 * every simulated host, and what the host runs at boot. Linux only (meshsim).
 *
 * Each simulated host has a /Library of its own (login.h), so a job that
 * meshconfig installs in /Library/LaunchDaemons stays on that host. The
 * program meshsim-launchd (launchd_main.c) does the work; the host's
 * `launchctl` shim is `exec meshsim-launchd launchctl HOST_DIR "$@"`.
 *
 * What follows launchd, with the sources it follows (where a rule is unclear
 * the simulation is stricter, so that a job it accepts is one a Mac accepts):
 *   - A LaunchDaemon's plist must be owned by root and must not be writable by
 *     group or others: `man launchctl` ("All system-wide daemons (LaunchDaemons)
 *     must be owned by root. Configuration files must disallow group and world
 *     writes."), quoted in munkireport/munkireport-php #1468 and
 *     shadowsocks/ShadowsocksX-NG #448; launchctl says "Path had bad
 *     ownership/permissions" (dabrain13/DarkBoot-NVRAM #1, facebook/watchman
 *     #488). Stricter here: the group must be wheel (gid 0) too, and the file a
 *     regular file, not a symlink.
 *   - Label (string) is required, and Program (string) or ProgramArguments
 *     (array of strings): launchd.plist(5). Without Program, ProgramArguments[0]
 *     is the program, looked up in PATH (execvp), as the man page says.
 *   - RunAtLoad: run once when loaded (at bootstrap, and at boot); StartInterval
 *     N: run every N seconds, never two runs of one job at once (launchd.plist(5)).
 *   - StandardOutPath / StandardErrorPath: appended to (created 0644); a job
 *     whose file cannot be opened does not run, and its last exit status is 78
 *     (EX_CONFIG, what launchctl print shows for a job launchd could not
 *     spawn), as for a program that cannot be executed.
 *   - The job's environment: PATH=/usr/bin:/bin:/usr/sbin:/sbin (launchd's
 *     default for daemons) behind the host's shims (HOST_DIR/bin, as in its ssh
 *     sessions), XPC_SERVICE_NAME=LABEL, plus EnvironmentVariables; working
 *     directory / (or WorkingDirectory); stdin /dev/null; its own process group.
 *   - Keys other than Label, Program, ProgramArguments, RunAtLoad,
 *     StartInterval, StandardOutPath, StandardErrorPath, WorkingDirectory,
 *     EnvironmentVariables, Disabled, AbandonProcessGroup, ExitTimeOut,
 *     ThrottleInterval, ProcessType, Nice, LowPriorityIO, UserName "root" and
 *     GroupName "wheel" are refused as not simulated (rather than ignored);
 *     a wrong type for a known key is an error, as launchd refuses the plist.
 *   - At boot every *.plist of /Library/LaunchDaemons is loaded, in name order,
 *     unless its Disabled is true; one that breaks a rule is skipped with a line
 *     in HOST_DIR/launchd.log (the host's system log), as launchd logs it.
 *
 * launchctl's verbs (the system domain only; others are refused):
 *   bootstrap system PATH...     load (RunAtLoad: run now). Failure: "Bootstrap
 *                                failed: 5: Input/output error" and exit 5, as
 *                                macOS 13+ says it, then a line with the reason
 *                                (the rule, the field); an already loaded label
 *                                fails the same way
 *   bootout system/LABEL | system PATH   stop and unload (SIGTERM to the job's
 *                                process group, SIGKILL after ExitTimeOut, 20 s
 *                                by default); unknown: "Boot-out failed: 113:
 *                                Could not find specified service", exit 113
 *   print system/LABEL           the job's state, runs, last exit code; unknown:
 *                                "Could not find service ... in domain for
 *                                system", exit 113
 *   kickstart [-k] system/LABEL  run now (-k: kill a running one first)
 *   list                         "PID\tStatus\tLabel" of the loaded jobs
 * Legacy load/unload and every other verb: an error naming what is simulated.
 *
 * State: HOST_DIR/live/launchd/LABEL (the plist path and the supervisor's pid)
 * and LABEL.state (runs, running pid, last exit status), under a lock; a boot
 * starts from none. Each loaded job has one supervisor process in the host (its
 * network namespace): `meshsim fault stop|reboot` and `meshsim down` end it.
 */
#ifndef MR_SIM_LAUNCHD_H
#define MR_SIM_LAUNCHD_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"
#include "sim/plist.h"

/* A job as launchd would run it. */
struct mr_launchd_job {
	char *label;
	char *program;                 /* Program, else ProgramArguments[0] */
	struct mr_strvec argv;         /* ProgramArguments, else { Program } */
	struct mr_strvec env;          /* EnvironmentVariables as NAME=VALUE */
	char *stdout_path, *stderr_path, *workdir; /* NULL: /dev/null, /dev/null, / */
	bool run_at_load, disabled;
	long long start_interval;      /* seconds, 0: none */
	long long exit_timeout;        /* seconds before SIGKILL at bootout (20) */
};

/* The job a parsed plist describes, or MESHRUN_E_INVAL naming the key and
 * what launchd expects. */
int mr_launchd_job_from_plist(const struct mr_plist *p, struct mr_launchd_job *job,
			      struct meshrun_err *err);
void mr_launchd_job_release(struct mr_launchd_job *job);

/* Ownership and mode of the plist file at path (lstat): the rule above, or
 * MESHRUN_E_INVAL with the owner and mode found. */
int mr_launchd_check_file(const char *path, struct meshrun_err *err);

/* Read, check and parse path into job (the three above). */
int mr_launchd_load_file(const char *path, struct mr_launchd_job *job, struct meshrun_err *err);

/* What meshsim-launchd runs: `launchctl HOST_DIR ARGS...` (argv from the verb
 * on), and the boot of `meshsim-launchd host` (launchd_main.c: the host's root,
 * then this, then sshd). Each returns the process exit code. */
int mr_launchd_launchctl(const char *host_dir, int argc, char **argv);
int mr_launchd_boot(const char *host_dir);
/* The same over daemons_dir instead of /Library/LaunchDaemons (unit tests). */
int mr_launchd_boot_dir(const char *host_dir, const char *daemons_dir);

/* At `meshsim up`: host_dir/Library with a Mac's folders (LaunchDaemons,
 * LaunchAgents, Logs, Application Support, Preferences) and host_dir/bin/launchctl. */
int mr_launchd_host_files(const char *host, const char *host_dir, struct meshrun_err *err);

/* The host's `launchctl` shim: exec program launchctl host_dir "$@" (-1 with
 * errno EINVAL when a path is not mr_is_shell_safe()). */
int mr_launchd_render_shim(const char *host, const char *host_dir, const char *program,
			   struct mr_buf *out);

/* Path of the meshsim-launchd program next to the running meshsim (or in
 * ../libexec/meshrun), malloc'd; NULL when there is none. */
char *mr_launchd_program_path(void);

#endif
