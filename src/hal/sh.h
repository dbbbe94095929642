/*
 * sh.h - the /bin/sh protocol every remote backend speaks (ssh, openssh, and
 * through its daemon persist; the local backend runs the same watchdog): what
 * a command line looks like, how a process group's id comes back, and the
 * scripts that kill, clean up and stand by on a host, and the job
 * directory's setup script that works with the watchdog. Internal to src/hal
 * (and the test that runs these lines under three shells), but for the setup,
 * which launch/run.c sends through mr_hal_run().
 */
#ifndef MR_HAL_SH_H
#define MR_HAL_SH_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "hal/hal.h"

/*
 * The command lines the remote backends send (tests/unit/test_remote_sh.c
 * runs them under bash, dash and zsh as login shells). Each is one simple
 * command for the login shell, `exec /bin/sh -c 'SCRIPT' ARGS...`
 * (mr_shquote_sh_c()), appended to b; 0, or -1 (ENOMEM; EINVAL for a bad kill).
 *
 *  spawn     echo MESHRUN-PGID=$$; [export MLX_K='V'...; ][cd 'CWD' && ]exec
 *            [env 'K=V'...] 'ARGV0' ... (meshrun's own variables by export, any
 *            other name through env; a MR_SH_PATH -c SCRIPT ARG0... without
 *            such others runs SCRIPT in this sh, ARG0... its arguments, after
 *            `cd 'CWD' || exit`);
 *            sshd starts each command after setsid() and exec keeps the pid, so
 *            the marker line (stripped from stdout by the backend) carries the
 *            process group of the whole command tree;
 *  watchdog  mr_hal_watchdog_script, reading "+PGID", "-PGID", "D/abs/dir" (or
 *            "A/abs/dir": no mark written, the local hal writes it) and
 *            "TNAME" (${TMPDIR:-/tmp}/NAME; also as arguments) lines on stdin,
 *            or "MNAME" (the same, and the watchdog makes the directory now,
 *            mode 700, unless it is there, and writes its mark: the ssh
 *            backends send names so),
 *            and "R/abs/dir" or "RNAME" (remove that one now, forget it); at EOF
 *            (we exited or died) it TERMs the registered groups, KILLs them a
 *            second later, then removes the directories. Into each "D"
 *            directory it writes MR_HAL_WATCHDOG_MARK, one line "HOST PID"
 *            (`uname -n`, its own pid): a directory whose mark names this host
 *            and a pid that is no longer a meshrun-watchdog outlived its
 *            watchdog (killed with every process of the host) and may be swept;
 *  kill      mr_hal_kill_script: `kill -SIGNAME -PGID`, always exit 0.
 *  spare     mr_hal_spare_script (opts.ssh_spares): a shell started ahead of
 *            need, which prints MR_HAL_SPARE_READY and reads lines up to one
 *            that is TOKEN (its argument), then evals them: one of the other
 *            command lines, whose `exec` keeps its pid (the session's process
 *            group), and whose stdin is what follows the TOKEN line. EOF
 *            before TOKEN: exit 0, nothing run. mr_hal_spare_line() writes
 *            such a line for a command line: an `exec /bin/sh -c SCRIPT ...`
 *            one (every script of ours) becomes MR_HAL_SPARE_SH_C SCRIPT ...,
 *            which runs SCRIPT in the spare's own /bin/sh (no second exec of
 *            sh), as that exec would: its exit status the spare's.
 */
/*
 * setup      mr_hal_setup_script: the check before launch, run on every remote
 *            host as (mr_hal_setup_argv)
 *              /bin/sh -c SCRIPT meshrun-setup EXE CWD DEFCWD DIRNAME WD [NAME CONTENT]...
 *            (POSIX sh; tests run it under bash, dash and zsh). Checks EXE (when
 *            not empty) and CWD (when not empty), exit 3 with a line per problem
 *            on stderr; when there are files, writes them into the job
 *            directory ${TMPDIR:-/tmp}/DIRNAME: with WD "1" the host's watchdog
 *            makes and marks it (an "M" name, mr_hal_makes_dirs), which the
 *            script waits for, about a second at most; it makes it itself
 *            (mkdir -m 700) when it is not there then, and takes it when it is
 *            ours and no link (mktemp -d when DIRNAME is empty); exit 4 if it
 *            cannot, naming the file, and nothing of it is left. It prints two
 *            lines: the directory (or "-") and whether DEFCWD (our own cwd)
 *            exists there (1 or 0). Before that it sweeps stale job directories
 *            of ours in that TMPDIR: a watchdog mark naming this host and a pid
 *            that is no meshrun-watchdog any more (launch.h:
 *            mr_launch_dir_is_stale, the same rule for the all-local path).
 */
#define MR_HAL_PGID_MARKER "MESHRUN-PGID="
#define MR_HAL_SPARE_READY "MESHRUN-SPARE-READY"
#define MR_HAL_SPARE_SH_C "meshrun_sh_c"
extern const char mr_hal_watchdog_script[];
extern const char mr_hal_kill_script[];
extern const char mr_hal_spare_script[];
extern const char mr_hal_setup_script[];
/* The setup command's first words (to DIRNAME and WD, placeholders that each
 * host's argv replaces at these indices); the files' NAME CONTENT pairs follow.
 * Appended to argv; 0, or -1 (ENOMEM). */
#define MR_HAL_SETUP_ARG_DIRNAME 7
#define MR_HAL_SETUP_ARG_WD 8
int mr_hal_setup_argv(struct mr_strvec *argv, const char *exe, const char *cwd, const char *defcwd);
int mr_hal_spawn_cmdline(struct mr_buf *b, char *const *argv, char *const *env, const char *cwd);
/* tmp_name: NULL, or the first name to remove (an argument "MNAME", see above) */
int mr_hal_watchdog_cmdline(struct mr_buf *b, const char *tmp_name);
int mr_hal_kill_cmdline(struct mr_buf *b, const char *signame, long pgid);
int mr_hal_spare_cmdline(struct mr_buf *b, const char *token);
/* Append what a spare is sent for CMDLINE (one of the command lines above). */
int mr_hal_spare_line(struct mr_buf *b, const char *cmdline);

/* A remote spawn's env: every entry NAME=VALUE with a valid NAME, else
 * MESHRUN_E_INVAL naming the host and the entry (a remote shell would take it). */
int mr_hal_check_env(const char *host, char *const *env, struct meshrun_err *err);

/*
 * A remote command's stdout until the PGID marker line that
 * mr_hal_spawn_cmdline()'s shell prints first has been found and stripped.
 * Give up looking after MR_HAL_PGID_SCAN_MAX bytes (a strange login shell): it
 * is all output then.
 */
#define MR_HAL_PGID_SCAN_MAX 65536
struct mr_hal_marker {
	bool want;         /* still looking for the line */
	struct mr_buf pre; /* stdout held back meanwhile */
};
typedef void (*mr_hal_sink_fn)(void *ctx, const char *data, size_t len);
/* Feed stdout: output (all of it, or what surrounds the marker line) goes to
 * out(ctx, ...) in order; returns the pgid the line names (> 1), else 0. */
long mr_hal_marker_feed(struct mr_hal_marker *m, const char *data, size_t len, mr_hal_sink_fn out,
			void *ctx);
/* stdout ended: what was held back is output after all (no marker came). */
void mr_hal_marker_flush(struct mr_hal_marker *m, mr_hal_sink_fn out, void *ctx);

/* "TERM" for SIGTERM: the name sshd's signal requests and kill(1) take; NULL
 * for one we cannot name. */
const char *mr_sh_sig_name(int sig);
/* The signal a name stands for ("TERM", also "SIGTERM"), or 0. */
int mr_sh_sig_from_name(const char *name);

#endif
