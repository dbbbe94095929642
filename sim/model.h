/*
 * model.h - the cluster meshsim builds: hosts, their Thunderbolt interfaces and
 * the cables between them, read from a fixture folder (through src/topo).
 *
 * A cable joins host a's interface a_if to host b's interface b_if: the names are
 * the ones each host's networksetup fixture gives for the receptacle the cable is
 * plugged into (so h1's en3 may be cabled to h2's en5). Each cable appears once
 * (a < b, or a == b never).
 *
 * mr_sim_cluster_check() validates what the bring-up relies on, with errors that
 * name the file and the field: unique host names valid as host names and as
 * namespace suffixes, interface names that are valid and not reserved (en0,
 * bridge0), no interface used by two cables.
 *
 * Ownership: the cluster owns every string and array in it; mr_sim_cluster_free()
 * releases all of it (NULL is a no-op).
 */
#ifndef MR_SIM_MODEL_H
#define MR_SIM_MODEL_H

#include "common/compat.h"
#include "common/strvec.h"
#include "meshrun/err.h"

struct mr_fixture;

struct mr_sim_host {
	char *name;             /* fixture name: "h1" (ssh alias, namespace suffix) */
	bool nosudo;            /* no passwordless sudo (cluster.json "sudo": false) */
	struct mr_strvec rdma;  /* rdma_* device names its ibv_devices lists */
	bool rdma_live;         /* those devices exist (soft-RoCE made them) */
	/* The recorded outputs (borrowed from the fixture; NULL when loaded from state) */
	const char *sp_json;    /* system_profiler SPThunderboltDataType -json */
	size_t sp_len;
	const char *hwports;    /* networksetup -listallhardwareports */
	const char *ibv;        /* ibv_devices, or NULL (then the header-only form) */
};

struct mr_sim_cable {
	size_t a, b;            /* host indexes, a < b */
	char a_if[16], b_if[16];
};

struct mr_sim_cluster {
	char *dir;                  /* the fixture folder, or NULL */
	struct mr_fixture *fx; /* owned; NULL when loaded from a state file */
	struct mr_sim_host *hosts;
	size_t nhosts;
	struct mr_sim_cable *cables;
	size_t ncables;
};

/*
 * Read a fixture folder (cluster.json + one folder per host, through
 * mr_fixture_load) and check it. Beyond topo's checks, a Thunderbolt peer
 * whose domain UUID is on no host of the cluster is an error naming the file and
 * the field (meshconfig ignores such peers; a simulator cannot cable them). A
 * cable that only one side reports is left out, with a line in *notes.
 */
int mr_sim_cluster_load(const char *dir, struct mr_sim_cluster **out, struct mr_strvec *notes,
			struct meshrun_err *err);
/* An empty cluster (for building one from a state file); xalloc. */
struct mr_sim_cluster *mr_sim_cluster_new(void);
/* Append a host / a cable (copied; xalloc). */
struct mr_sim_host *mr_sim_cluster_add_host(struct mr_sim_cluster *c, const char *name);
void mr_sim_cluster_add_cable(struct mr_sim_cluster *c, size_t a, const char *a_if, size_t b,
			      const char *b_if);
int mr_sim_cluster_check(const struct mr_sim_cluster *c, struct meshrun_err *err);
void mr_sim_cluster_free(struct mr_sim_cluster *c);

/* Index of host name, or -1. */
ssize_t mr_sim_cluster_find_host(const struct mr_sim_cluster *c, const char *name);
/* The cable at host:ifname; *side set to 0 (a side) or 1 (b side). -1: none. */
ssize_t mr_sim_cluster_find_cable(const struct mr_sim_cluster *c, size_t host, const char *ifname,
				  int *side);

#endif
