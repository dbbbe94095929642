/*
 * replay.h - the scripted answers behind the replay hal backend (unit tests of
 * the configurator and launcher, `meshconfig --simulate DIR`). No process is
 * started and no network is touched.
 *
 * Protocol:
 *   mr_replay_new(&rp)
 *   -> mr_replay_load(rp, DIR, &err)        optional: a fixture folder
 *   -> mr_replay_add(rp, ...) ...           optional: scripted answers
 *   -> mr_hal_new_replay(&hal, rp, &opts, &err)   the hal now owns rp
 *   -> mr_hal_run / mr_hal_spawn / mr_hal_poll as with any backend
 *   -> mr_replay_log_*(rp, ...)             what the hal was asked to run
 *   -> mr_hal_free(hal)                     frees rp too
 * The caller may keep its rp pointer (or get it back with mr_hal_replay()) and
 * keep adding answers or reading the log while the hal lives.
 *
 * Fixture folder layout:
 *   DIR/cluster.json          optional; names the hosts, in one of these forms:
 *                               {"hosts": ["h1", "h2"], ...}
 *                               {"hosts": [{"name": "h1", ...}, ...], ...}
 *                               ["h1", "h2"]
 *                             other keys (expected outcome, ...) are ignored here.
 *                             Without it, every subfolder of DIR is a host.
 *   DIR/<host>/system_profiler.json  answers `system_profiler SPThunderboltDataType -json`
 *   DIR/<host>/networksetup.txt      answers `networksetup -listallhardwareports`
 *   DIR/<host>/ibv_devices.txt       answers `ibv_devices`
 * A fixture answer is the file's bytes on stdout, empty stderr, exit status 0. A
 * missing file just means no fixture answer for that command on that host.
 *
 * Host set: until a fixture is loaded or a host is added, every host name is
 * accepted; afterwards a command for any other host fails with
 * MESHRUN_E_CONNECT "host 'x' is not in the replay fixture".
 *
 * Matching: a command is matched by its argv quoted with mr_shquote_argv() and
 * joined with spaces ("sh -c 'echo hi'"; plain words stay bare, so "ibv_devices"
 * or "networksetup -listallhardwareports"). A pattern matches that string
 * exactly, or, when it ends in '*', every string starting with the rest
 * ("sudo *"; "*" alone matches everything). Search order for host h:
 *   1. answers added for host h, newest first;
 *   2. the fixture files of h;
 *   3. answers added for "*", newest first.
 * So defaults registered for "*" (meshconfig --simulate) never hide a fixture,
 * and a test can override either for one host. No match: hal_rc
 * MESHRUN_E_NOTFOUND, "replay: no answer for 'cmd' on host 'h1'".
 *
 * Log: every command that reached a known host (matched or not, failing or not,
 * run or spawned) is logged in order as {host, joined command}. Commands for an
 * unknown host and scripted connect failures are not logged: they never reached
 * the host.
 *
 * Ownership: mr_replay_add() copies its strings. Strings returned by the log
 * functions belong to rp and stay valid until mr_replay_log_clear() or the free.
 */
#ifndef MR_HAL_REPLAY_H
#define MR_HAL_REPLAY_H

#include "common/compat.h"
#include "hal/hal.h"
#include "meshrun/err.h"

struct mr_replay;

/* An empty script (open host set). Returns 0 or MESHRUN_E_NOMEM. */
int mr_replay_new(struct mr_replay **out);
/* Free a script that was not handed to mr_hal_new_replay(). NULL is a no-op. */
void mr_replay_free(struct mr_replay *rp);

/* Load the fixture folder dir (layout above); errors name the file or folder. */
int mr_replay_load(struct mr_replay *rp, const char *dir, struct meshrun_err *err);
/* Add a known host (closes the host set). 0, MESHRUN_E_INVAL (bad name), or NOMEM. */
int mr_replay_add_host(struct mr_replay *rp, const char *host);
/* Number of known hosts, and the i-th one (in fixture / insertion order). */
size_t mr_replay_host_count(const struct mr_replay *rp);
const char *mr_replay_host(const struct mr_replay *rp, size_t i);

/*
 * Script an answer for commands matching pattern on host ("*": every host):
 *   status     exit status 0..255; a negative value -S means "killed by signal S"
 *   out, errout  written to stdout/stderr (NULL: nothing)
 *   delay_ms   the command takes that long (run: waited for in parallel with the
 *              other commands; a delay past the command's deadline is a
 *              MESHRUN_E_TIMEOUT after the deadline; spawn: output and exit
 *              arrive after the delay)
 *   fail_code  0, or the hal failure to report instead of a result:
 *              MESHRUN_E_CONNECT (connection to the host fails; also makes
 *              mr_hal_connect() fail for that host when pattern is "*"),
 *              MESHRUN_E_TIMEOUT (reported after delay_ms, not after the real
 *              deadline, so tests stay fast), MESHRUN_E_NOEXIT (channel closed
 *              without exit status), or any other MESHRUN_E_* code
 * Returns 0, MESHRUN_E_INVAL (NULL pattern/host, fail_code > 0), or MESHRUN_E_NOMEM.
 */
int mr_replay_add(struct mr_replay *rp, const char *host, const char *pattern, int status,
		  const char *out, const char *errout, int delay_ms, int fail_code);

/* Commands logged for host (NULL: for all hosts). */
size_t mr_replay_log_count(const struct mr_replay *rp, const char *host);
/* The i-th command logged for host (NULL: all hosts, in arrival order), or NULL
 * when i is out of range. *host_out (may be NULL) gets the entry's host. */
const char *mr_replay_log_cmd(const struct mr_replay *rp, const char *host, size_t i,
			      const char **host_out);
void mr_replay_log_clear(struct mr_replay *rp);

/* The script behind a replay hal (NULL for other backends). */
struct mr_replay *mr_hal_replay(struct mr_hal *hal);

#endif
