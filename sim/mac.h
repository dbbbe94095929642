/*
 * mac.h - what a simulated host says about itself as a Mac, and the shims that
 * say it (put with the other shims, render.h, first on the PATH of ssh sessions).
 *
 * Values, per host, from cluster.json's host object where it has them, else
 * from the host's Thunderbolt buses (system_profiler's device_name_key, "Mac
 * Studio"), else the defaults below:
 *   "model"   hw.model                 by device name: Mac Studio Mac15,14 (M3 Ultra),
 *                                      Mac mini Mac16,11 (M4 Pro), MacBook Pro Mac16,6
 *                                      (M4 Max); anything else Mac15,14
 *   "ncpu"    hw.ncpu (logical/physical) by model: Mac15,14 32, Mac16,11 14, Mac16,6 16;
 *                                      anything else 12
 *   "macos"   sw_vers ProductVersion   26.2
 *   "build"   sw_vers BuildVersion     25C56 (with "macos" given: no default, required)
 * uname -r is the Darwin release of that macOS (26.x -> 25.x.0, 15.x -> 24.x.0, ...).
 *
 * Shims (macOS syntax and output; Linux-only forms are refused as macOS's own
 * tools refuse them: message on stderr, exit 1, or 64 for ping as BSD's ping):
 *   uname [-amnprsv]        Darwin, the host name, 25.2.0, a Darwin kernel version
 *                           line, arm64, arm; no option: -s. `uname --kernel-name`:
 *                           "uname: illegal option -- -" and the usage, exit 1
 *   sw_vers [-productName|-productVersion|-buildVersion] (also with --)
 *                           no option: the three "Name:\t\tvalue" lines of macOS
 *   sysctl [-n] NAME...     hw.model, hw.ncpu, hw.logicalcpu, hw.physicalcpu,
 *                           hw.activecpu, hw.machine, kern.ostype, kern.osrelease,
 *                           kern.osproductversion, kern.osversion, kern.hostname;
 *                           another name: "sysctl: unknown oid 'NAME'", exit 1
 *   ping [-Dnq] [-c N] [-I IF] [-i S] [-s SIZE] [-t SECS] [-W MS] HOST   macOS's
 *                           options (-t is a timeout there, a TTL on Linux; -W is in
 *                           ms; -D is don't-fragment) run as iputils' ping (-I binds
 *                           to IF as iputils does); outside sudo a packet over
 *                           8192 bytes fails as on a Mac (net.inet.raw.maxdgram)
 *   netstat -rn [-f inet]   the IPv4 routes of the host in macOS's table
 *                           (Destination Gateway Flags Netif Expire)
 */
#ifndef MR_SIM_MAC_H
#define MR_SIM_MAC_H

#include "common/compat.h"
#include "common/buf.h"
#include "meshrun/err.h"
#include "sim/model.h"

struct mr_sim_mac {
	char model[32];    /* "Mac15,14" */
	char version[16];  /* "26.2" */
	char build[16];    /* "25C56" */
	unsigned ncpu;     /* 32 */
};

/* Host i of a cluster loaded from a fixture (c->fx set; else the defaults).
 * A bad value in cluster.json is an error naming the field. */
int mr_sim_mac_of_host(const struct mr_sim_cluster *c, size_t i, struct mr_sim_mac *out,
		       struct meshrun_err *err);

/* "25.2.0" for macOS 26.2 (the kernel release `uname -r` prints). */
void mr_sim_mac_darwin_release(const char *version, char *buf, size_t n);

/* The shim names, NULL-terminated. */
extern const char *const mr_sim_mac_shim_names[];

/* The script of shim `which` of host `host` (-1 with errno EINVAL: unknown shim or unsafe value). */
int mr_sim_render_mac_shim(const char *which, const char *host, const char *host_dir,
			   const struct mr_sim_mac *mac, struct mr_buf *out);

#endif
