/*
 * gen.h - generate a consistent fixture set (what fixtures/<cluster>/ holds) for a
 * topology spec, in memory; mr_topo_gen_write() puts it in a folder.
 *
 * Spec grammar:  KIND:N[,OPTION...]
 *   KIND      mesh (every pair cabled) | ring (h1-h2-...-hN-h1; ring:2 is one cable)
 *   N         2..256 hosts, named h1..hN
 *   cables=K  K parallel cables per cabled pair (1..4, default 1)
 *   missing=hA-hB   no cable between hA and hB (repeatable)
 *   nordma=hA       hA's ibv_devices prints only the header (repeatable)
 *   speed=G   link speed in Gb/s printed by every cabled receptacle (40|80|120,
 *             default 80; 40 = Thunderbolt 4, no RDMA possible)
 * e.g. "mesh:4", "ring:8,cables=2", "mesh:6,missing=h1-h3", "ring:4,nordma=h2".
 *
 * Each host gets one Thunderbolt bus per cable plus one idle bus (no
 * domain_uuid_key, as real machines show), receptacle k -> hardware port
 * "Thunderbolt k" -> interface "en<k+1>" (so en2.. are the cables; en0 is Wi-Fi,
 * en1 Ethernet), a "Thunderbolt Bridge" -> bridge0 entry, and ibv_devices listing
 * rdma_<if> for every Thunderbolt interface (or the header only with nordma).
 * UUIDs are unique and deterministic: host i, bus b ->
 * "000000II-BBBB-4000-8000-0000000000II" style (hex). Receptacles are assigned per
 * host in peer order (lower host index first, then parallel cables in order).
 * A real Mac has at most 6 receptacles; big meshes simply get more.
 *
 * cluster.json records the hosts (name, en0 "10.99.X.Y") and the expectations
 * that follow from the spec: verdict (mesh/ring/neither), backend, connectivity
 * matrix, and the cables ([hostA, ifA, hostB, ifB]).
 *
 * Ownership: the set owns every string; mr_topo_genset_free() releases it.
 */
#ifndef MR_TOPO_GEN_H
#define MR_TOPO_GEN_H

#include "common/compat.h"
#include "meshrun/err.h"

#define MR_TOPO_GEN_MAX_HOSTS 256

struct mr_topo_gen_host {
	char *name;     /* "h3" */
	char *en0;      /* "10.99.0.3" */
	char *sp_json;  /* system_profiler.json */
	char *hwports;  /* networksetup.txt */
	char *ibv;      /* ibv_devices.txt */
};

struct mr_topo_genset {
	char *spec;                     /* as given */
	struct mr_topo_gen_host *hosts;
	size_t nhosts;
	char *cluster_json;             /* cluster.json text */
};

/* Build the set for spec; errors name the spec and the bad part. */
int mr_topo_gen(const char *spec, struct mr_topo_genset **out, struct meshrun_err *err);
void mr_topo_genset_free(struct mr_topo_genset *g);
/*
 * Write the set into dir (created if missing, mode 0755; existing files of the
 * same names are replaced): dir/cluster.json and dir/<host>/{system_profiler.json,
 * networksetup.txt,ibv_devices.txt}.
 */
int mr_topo_gen_write(const struct mr_topo_genset *g, const char *dir, struct meshrun_err *err);

#endif
