/*
 * fault_impl.h - the files of `meshsim fault` (private to sim/):
 *   cmd_fault.c      the subcommand: the fault lock and context, ports and
 *                    cables, unplug/plug, recable, stop/start, nosudo/sudo,
 *                    and the helpers below (calls go down to cmd_fault_net.c)
 *   cmd_fault_net.c  what shapes a cable's traffic: rate (tc tbf), latency
 *                    (netem), loss and partition (nftables), flap (a
 *                    background process per cable)
 *   cmd_fault_boot.c reboot (launchd.h runs the host's LaunchDaemons) and maxmtu
 *   faults.c         the arguments' checks (faults.h), state.c the faults file
 * Each fault returns 0, or a MESHRUN_E_* code with err set; MESHRUN_E_UNSUPPORTED
 * means the kernel or its tools lack it (exit 3), checked before any change.
 */
#ifndef MR_SIM_FAULT_IMPL_H
#define MR_SIM_FAULT_IMPL_H

#include "common/compat.h"
#include "common/buf.h"
#include "meshrun/err.h"
#include "sim/state.h"

struct fault_ctx {
	const char *name;
	struct mr_sim_state *st;
	char *state;
	int lockfd; /* the fault lock: a flapper must not inherit it */
};

/* cmd_fault.c */
int mr_simf_find_port(struct fault_ctx *f, const char *arg, size_t *host, size_t *cable, int *side,
		     struct meshrun_err *err);
char *mr_simf_cable_key(const struct fault_ctx *f, const char *kind, size_t ci);
bool mr_simf_find(const struct fault_ctx *f, const char *key, char **line);
const char *mr_simf_first_line(struct mr_buf *out);
/* stop (a power cut) or start (en0 up, sshd and the host's launchd) host. */
int mr_simf_host(struct fault_ctx *f, const char *host, bool start, struct meshrun_err *err);

/* cmd_fault_boot.c */
int mr_simf_reboot(struct fault_ctx *f, const char *host, struct meshrun_err *err);
int mr_simf_maxmtu(struct fault_ctx *f, const char *port, const char *n, struct meshrun_err *err);

/* cmd_fault_net.c */
int mr_simf_rate(struct fault_ctx *f, const char *port, const char *rate_s,
		      struct meshrun_err *err);
int mr_simf_loss(struct fault_ctx *f, const char *port, const char *pct_s,
		      struct meshrun_err *err);
int mr_simf_heal(struct fault_ctx *f, struct meshrun_err *err);
int mr_simf_partition(struct fault_ctx *f, const char *spec, struct meshrun_err *err);
int mr_simf_flap_stop(struct fault_ctx *f, size_t ci, struct meshrun_err *err);
int mr_simf_flap(struct fault_ctx *f, const char *port, const char *period,
		      struct meshrun_err *err);
int mr_simf_latency(struct fault_ctx *f, const char *port, const char *delay,
			 struct meshrun_err *err);

#endif
