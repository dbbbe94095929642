/*
 * render.h - the text of every file meshsim writes for a cluster: the per-host
 * shims (small POSIX sh scripts put first on the PATH of ssh sessions), the
 * per-host sshd_config, and the cluster's ssh_config and known_hosts lines.
 * Pure: text into a caller-owned struct mr_buf, no I/O.
 *
 * Shims (host_dir is <state>/<host>, which holds fixture/, live/ (sim/live.h)
 * and the nosudo marker):
 *   system_profiler SPThunderboltDataType -json   cat live/system_profiler.json
 *   networksetup -listallhardwareports             cat fixture/networksetup.txt
 *   ibv_devices                                    cat live/ibv_devices.txt
 *   ipconfig getifaddr IF                          IPv4 address of IF; exit 1 if none
 *   ifconfig IF                                    macOS's report: flags, ether, inet
 *                                                  with hex netmask, a bridge's
 *                                                  "member:" lines, "status: active"
 *                                                  or "inactive" (no carrier, or the
 *                                                  cable pulled; a Thunderbolt port
 *                                                  without a cable: inactive)
 *   ifconfig IF inet A netmask M                   flush + add A/len on IF, IF up (and
 *                                                  out of bridge0, as a Mac interface
 *                                                  with its own address works alone)
 *   ifconfig IF up|down                            (bridge0 down also releases its members)
 *                                                  while IF's cable is pulled, up only
 *                                                  records the state it gets back at plug
 *   ifconfig IF mtu N                              ip link set IF mtu N; refused (above
 *                                                  live/maxmtu/IF, or by the kernel) as
 *                                                  macOS refuses: a warning, exit 0
 *   ifconfig IF inet A delete|-alias               ip addr del A/len dev IF
 *   ifconfig bridge0 addm|deletem IF               IF into / out of bridge0 (macOS's
 *                                                  BRDGADD/BRDGDEL errors); `ifconfig
 *                                                  bridge0` lists its "member:" lines
 *   route [-n] change|add [-host] A -interface IF  ip route replace|add A dev IF
 *   route [-n] delete [-host] A                    ip route del A
 *   sudo [-n|-E|-H] [--] CMD...                    runs CMD with MESHSIM_ROOT=1 (the
 *                                                  shims' uid 0), or when host_dir/nosudo
 *                                                  exists fails as `sudo -n` does:
 *                                                  "sudo: a password is required", exit 1
 * Anything else (other forms, bad interface names, addresses, masks) is refused
 * with a message on stderr and exit 1 before any iproute2 call.
 *
 * Paths put into scripts and configs must satisfy mr_is_shell_safe() (the caller
 * checks; mr_sim_render_shim() returns -1 with errno EINVAL otherwise).
 */
#ifndef MR_SIM_RENDER_H
#define MR_SIM_RENDER_H

#include "common/compat.h"
#include "common/buf.h"

/* The shim names, NULL-terminated. */
extern const char *const mr_sim_shim_names[];

/* The script for shim `which` of host `host` (-1 with errno EINVAL: unknown shim or unsafe path). */
int mr_sim_render_shim(const char *which, const char *host, const char *host_dir, struct mr_buf *out);

/* The PATH of ssh sessions on the host: host_dir/bin first. */
int mr_sim_render_path(const char *host_dir, struct mr_buf *out);

/* sshd_config for one host listening on addr:22; sessions get PATH (above) and
 * TMPDIR=host_dir/tmp (the host's own); env (NULL: none), one
 * shell-safe NAME=VALUE word, is added to the sessions' environment (SetEnv). */
int mr_sim_render_sshd_config(const char *state_dir, const char *host_dir, const char *addr,
			      const char *env, struct mr_buf *out);

/* One ssh_config block: Host alias -> HostName addr, User root, the cluster's key files. */
int mr_sim_render_ssh_host(const char *state_dir, const char *alias, const char *addr,
			   struct mr_buf *out);

/* One known_hosts line "alias,addr KEYTYPE KEY" from the host's .pub file text. */
int mr_sim_render_known_host(const char *alias, const char *addr, const char *pubkey_text,
			     struct mr_buf *out);

#endif
