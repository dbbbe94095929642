/*
 * net.h - finding and removing what a cluster made, by name prefix: namespaces
 * under /run/netns, links in the root namespace, processes inside a namespace,
 * and the state directory. Used by `down`, by `up` to undo a failed bring-up,
 * and to refuse `up` over leftovers; and whether the hosts answer from here.
 */
#ifndef MR_SIM_NET_H
#define MR_SIM_NET_H

#include "common/compat.h"
#include "common/strvec.h"
#include "meshrun/err.h"

/* Namespace names under /run/netns starting with prefix (sorted). */
int mr_sim_list_netns(const char *prefix, struct mr_strvec *out);
/* Root-namespace link names (/sys/class/net) starting with prefix (sorted). */
int mr_sim_list_links(const char *prefix, struct mr_strvec *out);
/* Pids of processes whose network namespace is /run/netns/ns; -1 when ns is missing. */
int mr_sim_netns_pids(const char *ns, pid_t **pids, size_t *n);
/* Whether pid is alive and in namespace ns. */
bool mr_sim_pid_in_netns(pid_t pid, const char *ns);
/* SIGTERM every process in ns, SIGKILL what is left after wait_ms (0: a power
 * cut: every process SIGSTOPped first, then SIGKILLed, so that none sees
 * another die, not even one forked meanwhile); returns how many there were. */
size_t mr_sim_kill_netns(const char *ns, int wait_ms);
/* rm -rf (does not follow symlinks, nor cross a mount: -1 with EBUSY when
 * something is mounted below path, see login.h). */
int mr_sim_rm_rf(const char *path);
/* Whether anything named by the cluster's prefix, or its state dir, exists. */
bool mr_sim_cluster_exists(const char *name);
/*
 * Remove everything cluster `name` made: processes in its namespaces, the
 * namespaces, its root links, the state directory. Best effort: carries on past
 * failures and reports the first. *removed (if non-NULL) counts what it removed.
 */
int mr_sim_teardown(const char *name, size_t *removed, struct meshrun_err *err);
/*
 * Wait until every host (addrs[i], names[i] for messages) answers a TCP connect
 * from this namespace over the management bridge (a reset from a closed port
 * counts: the path works, and no process of the host is involved), retrying
 * until timeout_ms: sshd's pid file says it listens, this says the path to the
 * host works too. On failure the error names the first host not reached, the
 * last errno, and the kernel's route and neighbour entries for its address.
 */
#define MR_SIM_REACH_TIMEOUT_MS 20000 /* up, fault start and reboot alike */
int mr_sim_wait_reach(const char *const *names, const char (*addrs)[16], size_t n,
		      int timeout_ms, struct meshrun_err *err);

#endif
