/*
 * doctor.h - what meshsim adds so that every check of `meshconfig doctor` can
 * be seen passing and tripped on a simulated cluster: three shims that answer
 * as a Mac does (put with the others first on the PATH, render.h), and one
 * fault per check (cmd_fault_doctor.c, reached from `meshsim fault`).
 *
 * Shims (files they read are under the host's state folder, state.h):
 *   rdma_ctl status         "enabled" where the host's fixture lists RDMA
 *                           devices (fixture/ibv_devices.txt), else "disabled",
 *                           as Apple's rdma_ctl answers; enable/disable refused
 *                           (on a Mac they run from Recovery only)
 *   ibv_devinfo [-v] [-d DEV]  where the devices exist (soft-RoCE) the real
 *                           ibv_devinfo; else the devices of live/ibv_devices.txt
 *                           in the layout of a Mac's (fixtures-upstream
 *                           two-macbook-pro-one-cable/peer/ibv_devinfo.txt): port
 *                           PORT_ACTIVE while its interface has a carrier and an
 *                           IPv4 address, else PORT_DOWN (the fixture's ports
 *                           are down before the interfaces have one); with -v
 *                           the GID table Apple's driver has (apple-rdma.md):
 *                           index 0 link-local always, index 1 ::ffff:IPv4 only
 *                           while the interface has an IPv4 address
 *   date                    the system's date, shifted by the seconds in
 *                           clock_offset when that file exists (fault clock)
 *
 * Faults (usage in `meshsim fault --help`; each is listed by `meshsim status`
 * while on, and undone by its off form):
 *   noipv4 HOST:IF | ipv4 HOST:IF      IF loses its IPv4 addresses (kept in
 *                                      live/noipv4/IF) / gets them back
 *   bridge HOST:IF | unbridge HOST:IF  IF inside bridge0, bridge0 up (the
 *                                      Thunderbolt Bridge back after a restart)
 *                                      / out again, bridge0 as it was
 *   mtu HOST:IF N|off                  that end's MTU (the other end keeps its)
 *   macos HOST VERSION BUILD|off       what sw_vers, uname and sysctl say
 *   rdma-nodev HOST | rdma-dev HOST    RDMA enabled but ibv_devices lists no
 *                                      device (a Thunderbolt 4 Mac, or no
 *                                      restart since rdma_ctl enable) / back
 *   firewall HOST PORT|off             incoming TCP to PORT dropped (nftables
 *                                      in the host's namespace)
 *   clock HOST SECS                    date runs SECS ahead (negative: behind;
 *                                      0 clears)
 *   diskfull HOST | diskfree HOST      the host's TMPDIR (where job directories
 *                                      go) is a full 64 KiB tmpfs, mounted in its
 *                                      sshd's mount namespace / unmounted
 */
#ifndef MR_SIM_DOCTOR_H
#define MR_SIM_DOCTOR_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"

/* The shim names, NULL-terminated. */
extern const char *const mr_sim_doctor_shim_names[];

/* The script of shim `which` of host `host` (-1 with errno EINVAL: unknown shim
 * or unsafe path). */
int mr_sim_render_doctor_shim(const char *which, const char *host, const char *host_dir,
			      struct mr_buf *out);

/* Whether `meshsim fault KIND` is one of the faults above. */
bool mr_sim_doctor_fault_kind(const char *kind);
/* Apply one: args is `meshsim fault`'s words (args->v[0] the kind). 0, or a
 * MESHRUN_E_* code with err set (MESHRUN_E_USAGE, MESHRUN_E_UNSUPPORTED: the
 * kernel or its tools lack it, checked before any change). */
struct fault_ctx;
int mr_simf_doctor(struct fault_ctx *f, const struct mr_strvec *args, struct meshrun_err *err);

/* The --help lines of those faults (cmdopts.c puts them in `fault --help`). */
#define MR_SIM_DOCTOR_FAULTS_HELP                                                            \
	"Faults that trip one check of 'meshconfig doctor' each:\n"                          \
	"  noipv4 HOST:IF | ipv4 HOST:IF    IF loses its IPv4 addresses / gets them back\n"  \
	"  bridge HOST:IF | unbridge HOST:IF  IF inside bridge0 (up), as after a restart\n"  \
	"                                   / out again\n"                                   \
	"  mtu HOST:IF N|off                that end's MTU (off: as it was)\n"              \
	"  macos HOST VERSION BUILD|off     what sw_vers, uname and sysctl say\n"           \
	"  rdma-nodev HOST | rdma-dev HOST  rdma_ctl enabled, ibv_devices lists no device\n" \
	"                                   (Thunderbolt 4, or no restart) / back\n"        \
	"  firewall HOST PORT|off           incoming TCP to PORT dropped\n"                 \
	"  clock HOST SECS                  date runs SECS ahead (negative: behind; 0 clears)\n" \
	"  diskfull HOST | diskfree HOST    the host's TMPDIR is a full 64 KiB tmpfs / back\n"

#endif
