/*
 * plan.h - meshsim's names and addresses: pure functions, no I/O.
 *
 * A cluster called NAME (1..9 characters [a-z0-9_], starting with a letter; no
 * '-', so that "NAME-" is a prefix no other cluster's names share) owns:
 *   network namespaces   NAME-<host>            one per host
 *   root-side links      NAME-br                the management bridge
 *                        NAME-m<i>              host i's management veth (peer: en0)
 *   state directory      $MESHSIM_STATE_DIR/NAME, else /run/meshsim/NAME
 * Everything a cluster made is found again by the prefix "NAME-", which is how
 * `meshsim down` cleans a half-made cluster after a crash.
 *
 * Addresses: the management subnet is 10.230.K.0/24 with K in 1..250 taken from
 * a hash of NAME (mr_sim_subnet_hint); `up` moves to the next K when that /24 is
 * already used on this machine. Host i (0-based) is 10.230.K.(i+1), the bridge
 * in the root namespace 10.230.K.254. A cluster of more than MR_SIM_SUBNET_HOSTS
 * (250) hosts takes two /24s as one /23, 10.230.K.0/23 with K even: host i is then
 * 10.230.(K + i / 250).(i % 250 + 1), so at most MR_SIM_MAX_HOSTS (500).
 */
#ifndef MR_SIM_PLAN_H
#define MR_SIM_PLAN_H

#include "common/compat.h"
#include "meshrun/err.h"

#define MR_SIM_NAME_MAX 9
#define MR_SIM_SUBNET_HOSTS 250
#define MR_SIM_MAX_HOSTS (2 * MR_SIM_SUBNET_HOSTS)
#define MR_SIM_DEFAULT_NAME "meshsim"
#define MR_SIM_STATE_BASE "/run/meshsim"
#define MR_SIM_NET_A 10
#define MR_SIM_NET_B 230
#define MR_SIM_BRIDGE_OCTET 254

/* Whether name is a valid cluster name (see above); fills err when not. */
int mr_sim_check_name(const char *name, struct meshrun_err *err);

/* K in 1..250 from the cluster name (FNV-1a), the first subnet tried. */
unsigned mr_sim_subnet_hint(const char *name);
/* The next K to try after k (wraps 250 -> 1). */
unsigned mr_sim_subnet_next(unsigned k);

/* The management prefix length for a cluster of nhosts: 24, or 23 above 250. */
unsigned mr_sim_prefix_len(size_t nhosts);
/* "10.230.(K + index / 250).(index % 250 + 1)" into out (at least 16 bytes). */
void mr_sim_host_addr(unsigned k, size_t index, char *out, size_t outlen);
/* "10.230.K.254". */
void mr_sim_bridge_addr(unsigned k, char *out, size_t outlen);

/* Names; each returns a malloc'd string (xalloc: never NULL). */
char *mr_sim_ns_name(const char *name, const char *host);  /* "NAME-host" */
char *mr_sim_bridge_name(const char *name);                /* "NAME-br" */
char *mr_sim_mgmt_link(const char *name, size_t index);    /* "NAME-m<index>" */
char *mr_sim_prefix(const char *name);                     /* "NAME-" */

/* The state base: $MESHSIM_STATE_DIR if set and non-empty, else /run/meshsim. */
const char *mr_sim_state_base(void);
/* base/NAME (malloc'd). */
char *mr_sim_state_dir(const char *name);

/*
 * A topology spec ("mesh:4", "ring:8,cables=2") rather than a folder: it has
 * the form WORD:N... with WORD made of letters. Used to tell `up ARG` apart.
 */
bool mr_sim_is_topology_spec(const char *arg);

/* Interface names meshsim reserves inside a host (en0 management, bridge0, lo). */
bool mr_sim_ifname_reserved(const char *ifname);

#endif
