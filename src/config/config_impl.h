/*
 * config_impl.h - what the files of src/config share (not for other modules).
 *
 *   run.c     the steps in order, ssh check, ethernet path, the hal to use
 *   tb.c      the thunderbolt path: discovery batch -> topo -> verdict, plan, hostfile
 *   setup.c   setup commands from a plan: build (checked), print, apply, verify
 *   mtu.c boot.c undo.c   --mtu, --at-boot, --undo (boot.h)
 *   sim.c     --simulate: the replay hal and the fixture's host list
 *   png.c     --png: dot run on the DOT text
 *   ctx.c     the bottom: messages, step line, commands, addresses, hostfile output
 *   doctor*.c `meshconfig doctor` (doctor.h; its files share doctor_impl.h), which
 *             takes cfg_check_envs from opts.c and nothing else of these
 *
 * Calls go down the list's order only: run.c -> tb.c -> setup.c -> ctx.c (sim.c and
 * png.c are leaves; mtu.c, boot.c and undo.c are called by tb.c and run.c and
 * call setup.c and ctx.c); ctx.c calls no other file of the module.
 *
 * Ownership: struct cfg_run owns hosts[] and everything in it; cfg_run_release()
 * frees it. The hal, the options and the streams are the caller's.
 */
#ifndef MR_CONFIG_IMPL_H
#define MR_CONFIG_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/progress.h"
#include "common/strvec.h"
#include "config/config.h"
#include "hal/hal.h"
#include "hostfile/hostfile.h"

/* tb.c: a host without system_profiler (not a Mac; 127.0.0.1 is the default
 * host); tests/unit/test_hints.c checks its flags against meshconfig's table */
#define MR_CONFIG_HINT_NOT_A_MAC                                                          \
	"system_profiler and networksetup are macOS commands: meshconfig reads how Macs " \
	"are cabled, so give the Macs with --hosts (it runs from any machine), or see "   \
	"what it makes of a recorded cluster with --simulate DIR (docs/guide-laptop.md)"

struct cfg_host {
	char *name;     /* ssh name, as the user gave it */
	bool reachable; /* ssh check passed */
	bool has_sudo;  /* `sudo -n true` exited 0 */
	char *ip;       /* address of en0, else en1, else NULL */
	struct mr_strvec ips; /* the hostfile's "ips": the given ones (an IP in --hosts,
			       * ips of --hostfile), then ip when not already there (MLX's add_ips) */
};

struct cfg_run {
	const struct mr_config_opts *o;
	struct mr_hal *hal;
	FILE *out, *err;
	struct cfg_host *hosts; /* reachable hosts after the ssh check */
	size_t nhosts;
	int timeout_ms;         /* per command; 0: hal default */
	int64_t t_step;         /* start of the current step (verbose timing) */
	struct mr_progress pg;  /* the step line on a terminal (not with --verbose) */
};

/* opts.c: every --env is NAME=VALUE with a valid NAME (MESHRUN_E_USAGE naming it). */
int cfg_check_envs(const struct mr_strvec *envs, struct meshrun_err *err);

/* ---- ctx.c -------------------------------------------------------------------- */

/* Messages: common/log's "[WARN] ...", "[ERROR] ...", "[INFO] ..." lines on c->err
 * (info only with --verbose). */
void cfg_warn(struct cfg_run *c, const char *fmt, ...) MR_PRINTF(2, 3);
void cfg_error(struct cfg_run *c, const char *fmt, ...) MR_PRINTF(2, 3);
void cfg_info(struct cfg_run *c, const char *fmt, ...) MR_PRINTF(2, 3);
/* Always printed (the verdict, the commands to run by hand), on err. */
void cfg_say(struct cfg_run *c, const char *fmt, ...) MR_PRINTF(2, 3);
/* Start a step / report its end with its time (verbose only). */
void cfg_step(struct cfg_run *c, const char *what);
void cfg_step_done(struct cfg_run *c, const char *fmt, ...) MR_PRINTF(2, 3);

/* Fill a command for host with argv (which must outlive the run). */
void cfg_cmd(struct cfg_run *c, struct mr_hal_cmd *cmd, const char *host, char *const *argv);
/* mr_hal_run() on c->hal; on a terminal the step line counts hosts as the last
 * of each host's commands in the batch finishes ("3/8 hosts (h5)"). */
int cfg_hal_run(struct cfg_run *c, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *e);
/* mr_hal_cmd_release() on n commands. */
void cfg_cmds_release(struct mr_hal_cmd *cmds, size_t n);

/* Remote-derived values are checked with common/shquote.h's mr_is_ifname() and
 * mr_is_ipv4() before they go into a command. */
/* The output's first line without surrounding blanks, into dst (NUL-terminated). */
void cfg_first_line(const struct mr_buf *b, char *dst, size_t n);

/*
 * Addresses: `ipconfig getifaddr en0` and `... en1` per host. cfg_ip_cmds() fills
 * 2 commands per host (cmds[i*stride], cmds[i*stride+1]); cfg_ip_parse() takes en0, else en1,
 * into hosts[i].ip, warns naming a host with neither, and fails (exit code 4) on
 * output that is not an address. cfg_collect_ips() runs both as one batch.
 */
void cfg_ip_cmds(struct cfg_run *c, struct mr_hal_cmd *cmds, size_t stride);
int cfg_ip_parse(struct cfg_run *c, const struct mr_hal_cmd *cmds, size_t stride);
int cfg_collect_ips(struct cfg_run *c);

/* Hostfile from the hosts (in the given order) with the options' envs. */
struct mr_hostfile *cfg_hostfile_new(struct cfg_run *c, const char *backend);
/* Write hf to --output-hostfile, or stdout. Returns an exit code. */
int cfg_write_hostfile(struct cfg_run *c, const struct mr_hostfile *hf);

/* ---- setup.c ------------------------------------------------------------------ */
struct mr_topo_plan;
/*
 * The commands of host i as a person would type them ("sudo ifconfig ..."), one
 * string each, appended to lines. Every word is checked first (interface names,
 * IPv4 addresses, the fixed keywords): anything else is an error naming the host.
 */
int cfg_setup_lines(const struct mr_topo_plan *p, size_t i, const char *host,
		    struct mr_strvec *lines, struct meshrun_err *err);
/*
 * The script that applies host i's commands (each `sudo -n CMD >&2 || echo "fail
 * K $?"`, then `echo done`), checked word by word as above, appended to script.
 * POSIX sh: run as /bin/sh -c SCRIPT (tests run it under bash, dash and zsh).
 */
int cfg_setup_script(const struct mr_topo_plan *p, size_t i, const char *host,
		     struct mr_buf *script, struct meshrun_err *err);
/* The link check: `/bin/sh -c cfg_ping_script sh IF PEER_IP` (Linux or macOS ping). */
extern const char cfg_ping_script[];
/*
 * Ping every planned link from both ends, through cmds `/bin/sh -c script sh IF
 * PEER_IP [SIZE]`, failures tried once more; each end that still fails is an
 * error naming host, interface, peer. mtu 0: script is cfg_ping_script; else
 * SIZE is mtu - 28 (the payload of an mtu-sized packet) and the errors say so.
 * Returns an exit code.
 */
int cfg_ping_links(struct cfg_run *c, const struct mr_topo_plan *p, const char *script, int mtu);
/* tb.c: `netstat -rn -f inet` on a Mac, exit 1 elsewhere (/bin/sh -c). */
extern const char cfg_routes_script[];
/*
 * apply false: print every host's commands (on err). apply true: run them with
 * `sudo -n` on every host in parallel (one `/bin/sh -c` per host), then ping every
 * planned peer through its interface. Returns an exit code.
 */
int cfg_setup(struct cfg_run *c, const struct mr_topo_plan *p, bool apply);

/* ---- tb.c --------------------------------------------------------------------- */
int cfg_thunderbolt(struct cfg_run *c);

/* --png: run `dot -Tpng -o path` (no shell) with the DOT text on its stdin (png.c). */
int cfg_render_png(const struct mr_buf *dot, const char *path, struct meshrun_err *err);

/* sim.c: a replay hal answering from fixture folder dir (see sim.c). */
int cfg_sim_hal(const char *dir, const struct mr_hal_opts *ho, struct mr_hal **out,
		struct meshrun_err *err);

#endif
