/*
 * boot.h - what meshconfig's --mtu, --at-boot and --undo add (mtu.c, boot.c,
 * undo.c; not for other modules). They run after setup.c's apply and ping
 * check (tb.c: setup, then cfg_mtu, then cfg_at_boot), or instead of
 * discovery (run.c: --undo right after the ssh check). Calls go down to
 * setup.c and ctx.c only.
 *
 * --mtu N (mtu.c): every planned port gets `sudo -n ifconfig IF mtu N`, then
 *   the MTU is read back (`ifconfig IF`, first line): macOS's ifconfig only
 *   warns when a port refuses an MTU and exits 0 (network_cmds
 *   ifconfig.tproj/ifconfig.c, setifmtu), so the exit status proves nothing.
 *   An end that does not have N is an error naming the cable and both ends.
 *   Then every link is pinged from both ends with a packet of N bytes and
 *   don't-fragment, under sudo: macOS's ping sends through a socket limited to
 *   net.inet.raw.maxdgram (8192) bytes unless it runs as root, when it raises
 *   SO_SNDBUF (network_cmds ping.tproj/ping.c), so a 9000-byte check needs root.
 *   Without --auto-setup the commands are printed with the others.
 *
 * --at-boot (boot.c), after the setup and the checks passed on every host:
 *   each host gets, through `sudo -n /bin/sh -c INSTALL` (the script on stdin),
 *     CFG_BOOT_SCRIPT  root:wheel 0755, this host's links (interface, address,
 *                      peer) and MTU, each word checked (mr_is_ifname,
 *                      mr_is_ipv4, a number) before it is written; it waits
 *                      up to 60 s for the ports, takes them out of bridge0
 *                      (ifconfig bridge0 deletem, bridge0 down as the setup
 *                      does), then sets each address, host route and MTU that
 *                      differs from the plan (idempotent), logging each change
 *                      and failure, quiet when nothing changed;
 *     CFG_BOOT_PLIST   root:wheel 0644 (launchd refuses a daemon plist that is
 *                      not root-owned or is group/world writable), RunAtLoad
 *                      and StartInterval 300;
 *   then `launchctl bootout` of the old job (running meshconfig again replaces
 *   it) and `launchctl bootstrap system`, checked with `launchctl print`.
 * --undo (undo.c): on every host, one constant script under `sudo -n /bin/sh
 *   -c` (nothing from meshconfig in it): bootout and remove the LaunchDaemon,
 *   its script folder and its log folder; then for each Thunderbolt port of
 *   `networksetup -listallhardwareports`: its static host routes to
 *   192.168.x.y, its 192.168.x.y/30 addresses (the shape meshconfig gives),
 *   an MTU other than 1500, and back into bridge0; bridge0 up. That is macOS's
 *   own state of the ports, whichever meshconfig run (with or without
 *   --at-boot, finished or not) changed them. Each host reports what it did.
 *
 * Every function returns an enum mr_config_exit.
 */
#ifndef MR_CONFIG_BOOT_H
#define MR_CONFIG_BOOT_H

#include "common/compat.h"
#include "common/buf.h"
#include "config/config_impl.h"

#define CFG_BOOT_LABEL "io.meshrun.meshconfig"
#define CFG_BOOT_PLIST "/Library/LaunchDaemons/" CFG_BOOT_LABEL ".plist"
#define CFG_BOOT_DIR "/Library/Application Support/meshrun"
#define CFG_BOOT_SCRIPT CFG_BOOT_DIR "/meshconfig-at-boot.sh"
#define CFG_BOOT_LOGDIR "/Library/Logs/meshrun"
#define CFG_BOOT_LOG CFG_BOOT_LOGDIR "/meshconfig-at-boot.log"
#define CFG_BOOT_INTERVAL 300 /* seconds between two runs after boot */
#define CFG_MTU_DEFAULT 1500  /* macOS's MTU of a Thunderbolt port, what --undo puts back */
/* --undo's script runs some twenty commands on a host (a few per Thunderbolt
 * port): its deadline is this many times --timeout's (default 30 s, hal.h),
 * so that 64 simulated hosts sharing two cores finish it; on a Mac it takes a
 * second. */
#define CFG_UNDO_DEADLINE_FACTOR 4

struct mr_topo_plan;

/* mtu.c: set and check --mtu on every planned link end (apply), or print the
 * commands (not apply). */
int cfg_mtu(struct cfg_run *c, const struct mr_topo_plan *p, bool apply);

/* boot.c: the boot script of host i (checked word by word, errors name the
 * host), appended to out; mtu 0: MTU left alone. */
int cfg_boot_script(const struct mr_topo_plan *p, size_t i, const char *host, int mtu,
		    struct mr_buf *out, struct meshrun_err *err);
/* The LaunchDaemon's plist, the same on every host. */
extern const char cfg_boot_plist[];
/* boot.c, after the setup: with --at-boot, install the LaunchDaemon on every
 * host (apply false, a host without passwordless sudo: an error, nothing
 * installed); without it, after an applied setup, warn about each host that
 * still has the LaunchDaemon of an earlier --at-boot run (it would apply that
 * plan again at boot). */
int cfg_at_boot(struct cfg_run *c, const struct mr_topo_plan *p, bool apply);

/* undo.c: --undo on every reachable host. */
int cfg_undo(struct cfg_run *c);
/* The script --undo runs on each host (POSIX sh, no arguments). */
extern const char cfg_undo_script[];

#endif
