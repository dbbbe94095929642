/*
 * subnet.h - the management subnet a new cluster takes: 10.230.K.0/24, or a /23
 * (K even, K and K+1) for more than 250 hosts, starting at K = a hash of the
 * cluster's name (plan.h: mr_sim_subnet_hint) and moving on while K is taken.
 *
 * K is taken when this machine has an address in it (another cluster's bridge),
 * routes some of it on its own (a /24 or narrower route: a user's, or one a
 * killed test left, which would make some of the cluster's hosts unreachable),
 * a cluster of this state folder holds it, or another `meshsim up` claimed it
 * machine-wide (a file K under /run/meshsim-subnets with the claimer's pid,
 * stale once that process is gone). The claim covers the seconds between the
 * pick and the bridge's address; `up` drops it at its end.
 */
#ifndef MR_SIM_SUBNET_H
#define MR_SIM_SUBNET_H

#include "common/compat.h"
#include "meshrun/err.h"

/* Pick and claim K for cluster name (nhosts hosts) into *out; MESHRUN_E_NOTFOUND
 * when every K is taken. The caller drops the claim (both K for a /23). */
int mr_sim_subnet_pick(const char *name, size_t nhosts, unsigned *out, struct meshrun_err *err);
void mr_sim_subnet_unclaim(unsigned k);

#endif
