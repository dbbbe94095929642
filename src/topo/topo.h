/*
 * topo.h - Thunderbolt topology of a cluster of Macs: pure functions over the
 * text that three macOS commands print, no I/O (fixture folders are read and
 * written by src/fixture).
 *
 * Pipeline (what meshconfig runs after collecting each host's output):
 *
 *	struct mr_topo_cluster *c = mr_topo_cluster_new();
 *	for each host:  mr_topo_cluster_add_host(c, name, sp_json, sp_len, hwports, ibv, &err);
 *	mr_topo_cluster_finish(c, &err);        cables, connectivity matrix, notes
 *	mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &choice, &err);   mesh? ring? rdma? backend
 *	mr_topo_plan_build(c, routes, &plan, &err);               /30 per cable, per-host argv
 *	mr_topo_hostfile(c, plan, &choice, host_ips, envs, &hf, &err);
 *	mr_topo_dot(c, &buf, &err);                               --dot
 *
 * MLX compatibility: the same cables, address plan, ring and hostfiles as
 * mlx.distributed_config for a consistent cluster; how each step follows MLX's
 * config.py, and the deliberate differences, are in topo_int.h.
 *
 * Errors name the host and the field, e.g.
 *   "h2: system_profiler: SPThunderboltDataType[1].receptacle_1_tag.receptacle_id_key: expected a string, got number"
 *   "h3: networksetup: no 'Thunderbolt 2' port for receptacle 2"
 *   "h1: networksetup: 'Thunderbolt 1': invalid interface name 'en0; rm -rf /'"
 *
 * Ownership: a cluster owns its hosts, ports, cables and notes, and frees them in
 * mr_topo_cluster_free(). Plans and choices own what
 * they hold and are released by their own free/release call. Strings passed in
 * are copied. Pointers returned inside a struct are borrowed from it.
 * Nothing here prints or exits.
 */
#ifndef MR_TOPO_H
#define MR_TOPO_H

#include <cjson/cJSON.h>

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "hostfile/hostfile.h"
#include "meshrun/err.h"

/* ------------------------------------------------------------------------- */
/* Parsing one host's command output                                          */

/* One Thunderbolt bus of a host that has a domain UUID (idle buses without one
 * are skipped, as MLX does). */
struct mr_topo_port {
	char *receptacle;     /* receptacle_1_tag.receptacle_id_key, e.g. "2" */
	char *ifname;         /* networksetup "Thunderbolt 2" -> "en6" (mr_is_ifname checked) */
	char *uuid;           /* this bus's domain_uuid_key */
	char *peer_uuid;      /* domain_uuid_key of the Mac on the other end, or NULL */
	char *peer_label;     /* that item's _name ("Mac Studio"), or NULL */
	bool peer_via_hub;    /* the peer was found one level deeper (behind a hub/dock) */
	char *speed;          /* receptacle_1_tag.current_speed_key as printed, or NULL */
	unsigned speed_gbps;  /* "80 Gb/s" -> 80, "Up to 120 Gb/s" -> 120, unknown -> 0 */
};

struct mr_topo_host {
	char *name;                 /* the ssh name the caller gave */
	char *model;                /* device_name_key of its buses ("Mac Studio"), or NULL */
	struct mr_topo_port *ports; /* sorted by ifname with strcmp (MLX's order) */
	size_t nports;
	bool ibv_known;             /* ibv_devices output was given */
	struct mr_strvec rdma_devs; /* rdma_* device names from ibv_devices, in order */
};

/*
 * networksetup -listallhardwareports, parsed: "Hardware Port: X" / "Device: Y"
 * pairs in order. Every device name must pass mr_is_ifname() (a hostile one is
 * an error naming the host and the port). Lines other than those are ignored.
 */
struct mr_topo_hwport {
	char *port;   /* "Thunderbolt 2", "Thunderbolt Bridge", "Wi-Fi" */
	char *device; /* "en6", "bridge0", "en0" */
};
struct mr_topo_hwports {
	struct mr_topo_hwport *v;
	size_t nr;
};
int mr_topo_parse_hwports(const char *host, const char *text, struct mr_topo_hwports *out,
			  struct meshrun_err *err);
void mr_topo_hwports_release(struct mr_topo_hwports *hp);
/* The device of hardware port `port`, or NULL. */
const char *mr_topo_hwports_find(const struct mr_topo_hwports *hp, const char *port);

/*
 * ibv_devices output: the rdma_* names of the first column (MLX keeps only
 * names starting with "rdma_"). The header-only output and "No IB devices
 * found" both give an empty list (no RDMA). Each name must be "rdma_" + a valid
 * interface name, else an error naming the host.
 */
int mr_topo_parse_ibv_devices(const char *host, const char *text, struct mr_strvec *out,
			      struct meshrun_err *err);

/*
 * system_profiler SPThunderboltDataType -json + networksetup text (+ ibv_devices
 * text, or NULL when unknown) -> one host. The JSON is parsed with path-aware
 * errors ("h2: system_profiler: SPThunderboltDataType[1]...").
 * Per bus (element of SPThunderboltDataType): no domain_uuid_key -> skipped;
 * otherwise receptacle_1_tag.receptacle_id_key must be a string (a digit string),
 * "Thunderbolt <id>" must exist in networksetup; the peer is the first _items
 * entry with a domain_uuid_key, else the first domain_uuid_key found in the
 * _items of an _items entry (a hub or dock between the two Macs). Entries
 * without one (docks, monitors, disks) are ignored. Two buses of one host with
 * the same UUID are an error.
 */
int mr_topo_parse_host(const char *name, const char *sp_json, size_t sp_len, const char *hwports,
		       const char *ibv_devices, struct mr_topo_host *out, struct meshrun_err *err);
void mr_topo_host_release(struct mr_topo_host *h);

/* ------------------------------------------------------------------------- */
/* The cluster: cables and connectivity                                       */

/* A cable between two hosts' ports. For a confirmed cable both ports name each
 * other's UUID; end [0] is the side MLX meets first (lower host index, then the
 * port order), which is also the side that gets the .1 address of the /30. */
struct mr_topo_cable {
	size_t host[2];       /* indexes into cluster->hosts */
	size_t port[2];       /* indexes into hosts[host[k]].ports */
	unsigned speed_gbps;  /* the lower known speed of both ends (0 unknown) */
};

struct mr_topo_cluster {
	struct mr_topo_host *hosts;
	size_t nhosts;
	/* Set by mr_topo_cluster_finish(): */
	struct mr_topo_cable *cables;    /* confirmed cables, in MLX's discovery order */
	size_t ncables;
	struct mr_topo_cable *onesided;  /* reported by host[0] only; host[1]/port[1] is the
					  * port whose UUID it named (not used for anything) */
	size_t nonesided;
	unsigned *conn;                  /* nhosts*nhosts: conn[i*nhosts+j] = confirmed cables
					  * between i and j (symmetric, 0 on the diagonal) */
	struct mr_strvec notes;          /* one line each: unknown peers, one-sided cables,
					  * peers behind hubs ("h2: en5: peer behind a hub ...") */
	bool finished;
};

struct mr_topo_cluster *mr_topo_cluster_new(void); /* NULL only when out of memory */
void mr_topo_cluster_free(struct mr_topo_cluster *c);
/* Parse and append one host (see mr_topo_parse_host); duplicate names are an error. */
int mr_topo_cluster_add_host(struct mr_topo_cluster *c, const char *name, const char *sp_json,
			     size_t sp_len, const char *hwports, const char *ibv_devices,
			     struct meshrun_err *err);
/* Append an already parsed host; takes over its contents (h is left empty) on success. */
int mr_topo_cluster_take_host(struct mr_topo_cluster *c, struct mr_topo_host *h,
			      struct meshrun_err *err);
/* Match peers to ports: cables, one-sided cables, matrix, notes. A UUID that two
 * hosts claim is an error naming both. Call once, after the last host. */
int mr_topo_cluster_finish(struct mr_topo_cluster *c, struct meshrun_err *err);
/* Index of host `name`, or -1. */
ssize_t mr_topo_host_index(const struct mr_topo_cluster *c, const char *name);
static inline unsigned mr_topo_conn(const struct mr_topo_cluster *c, size_t i, size_t j)
{
	return c->conn[i * c->nhosts + j];
}

/* ------------------------------------------------------------------------- */
/* Mesh, ring, RDMA, backend                                                  */

/* Every pair cabled? When not, *a and *b (if non-NULL) get the first missing pair. */
bool mr_topo_is_mesh(const struct mr_topo_cluster *c, size_t *a, size_t *b);

struct mr_topo_ring {
	size_t *order;    /* nhosts host indexes in ring order, order[0] == 0 */
	size_t n;         /* 0: no ring */
	unsigned cables;  /* min over the ring's edges of the cable count */
};
void mr_topo_ring_release(struct mr_topo_ring *r);

/*
 * Find a ring through every host (a Hamiltonian cycle of the cabling; for 2
 * hosts one cable is a ring, as in MLX). DFS from host 0 with neighbours in
 * index order (MLX's order, so the same ring as MLX), pruned: hosts with fewer
 * than 2 cabled neighbours fail at once, the graph must be connected, a branch
 * is cut as soon as an unvisited host is left with fewer than 2 usable
 * neighbours or the unvisited hosts are no longer connected to both path ends.
 * The pruning never cuts a branch that holds a ring, so the first ring found is
 * MLX's. A work bound (max_steps, 0 = default 2,000,000 extensions) stops a
 * pathological search; the search then retries once with a fewest-options-first
 * order (a valid ring, maybe not MLX's) before giving up.
 * Returns 0 and the ring, or MESHRUN_E_NOTFOUND with a diagnosis in err:
 *   "no ring: these hosts have fewer than 2 cabled neighbours: h3, h7"
 *   "no ring: the cabling falls apart into 2 groups: h1, h2 | h3, h4"
 *   "no ring found through all 6 hosts (h1 and h4 are cut points...)"
 */
int mr_topo_find_ring(const struct mr_topo_cluster *c, unsigned long max_steps,
		      struct mr_topo_ring *out, struct meshrun_err *err);

enum mr_topo_backend {
	MR_TOPO_BACKEND_AUTO = 0, /* input only: choose as MLX does */
	MR_TOPO_BACKEND_RING,
	MR_TOPO_BACKEND_JACCL,
	MR_TOPO_BACKEND_JACCL_RING,
};
/* "ring", "jaccl", "jaccl-ring", "auto". */
const char *mr_topo_backend_name(enum mr_topo_backend b);
/* Parse those names; -1 for anything else. */
int mr_topo_backend_parse(const char *s, enum mr_topo_backend *out);

/* What the backend wanted lacks, when mr_topo_choose fails. */
enum mr_topo_missing {
	MR_TOPO_MISSING_NONE = 0, /* not the topology: bad input, out of memory */
	MR_TOPO_MISSING_CABLES,   /* no mesh / no ring (its message says to run with --dot) */
	MR_TOPO_MISSING_RDMA,     /* the cabling is there, RDMA is not */
};

struct mr_topo_choice {
	enum mr_topo_backend backend;  /* never AUTO after success */
	bool mesh;
	bool has_ring;
	struct mr_topo_ring ring;      /* when has_ring (needed for ring / jaccl-ring) */
	bool rdma;                     /* every host can do RDMA over its cables */
	struct mr_strvec no_rdma;      /* names of hosts without rdma_* devices */
	struct mr_strvec tb4;          /* names of hosts with a cable at <= 40 Gb/s */
	struct mr_strvec notes;        /* explanations, in this order, each only when its fact
					* is false: why not a mesh (mesh), why no ring
					* (has_ring), why no RDMA (rdma) */
	enum mr_topo_missing missing;  /* why mr_topo_choose failed: set on failure too,
					* the only field then */
};
void mr_topo_choice_release(struct mr_topo_choice *ch);

/*
 * Decide the backend. want == AUTO: mesh+RDMA -> jaccl; ring+RDMA ->
 * jaccl-ring; ring -> ring; else MESHRUN_E_NOTFOUND with a message that says what
 * is missing and suggests --dot. want == RING / JACCL / JACCL_RING: check what
 * that backend needs (ring; mesh+RDMA; ring+RDMA) and fail with the reason.
 * A host "can do RDMA" when ibv_devices lists rdma_* devices and none of its
 * cables runs at 40 Gb/s or less (Thunderbolt 4 cannot do RDMA: such hosts are
 * named with "use ring" instead of being told to enable RDMA).
 * The ring search uses mr_topo_find_ring(c, 0, ...).
 */
int mr_topo_choose(const struct mr_topo_cluster *c, enum mr_topo_backend want,
		   struct mr_topo_choice *out, struct meshrun_err *err);

/* ------------------------------------------------------------------------- */
/* IP plan                                                                    */

/* An IPv4 route that already exists on a host (from `netstat -rn -f inet`). */
struct mr_topo_route {
	uint32_t net;     /* host byte order, masked */
	unsigned len;     /* prefix length 0..32 */
	char ifname[16];  /* Netif column ("" unknown) */
};
struct mr_topo_routes {
	struct mr_topo_route *v;
	size_t nr;
};
/*
 * Parse macOS `netstat -rn -f inet` (also accepts the full `netstat -rn`: stops
 * at "Internet6:"). Destinations "default", "127", "169.254", "192.168.1",
 * "10.8/16", "192.168.1.1/32", "192.168.0.2" (host) are understood; lines that
 * are not routes are skipped. Interface names are checked with mr_is_ifname.
 */
int mr_topo_parse_routes(const char *host, const char *text, struct mr_topo_routes *out,
			 struct meshrun_err *err);
void mr_topo_routes_release(struct mr_topo_routes *r);

/* One /30 of the plan: one per confirmed cable, in MLX's order. */
struct mr_topo_link {
	size_t cable;        /* index into cluster->cables */
	size_t host[2];      /* = cables[cable].host */
	const char *ifname[2]; /* borrowed from the cluster */
	char ip[2][16];      /* "192.168.X.Y+1" for host[0], "192.168.X.Y+2" for host[1] */
	char subnet[20];     /* "192.168.X.Y/30" */
};

/* One command as argv, WITHOUT sudo (the caller adds "sudo" or "sudo -n"). */
struct mr_topo_cmd {
	struct mr_strvec argv;
};
struct mr_topo_host_cmds {
	struct mr_topo_cmd *v;
	size_t nr;
};

struct mr_topo_plan {
	struct mr_topo_link *links;
	size_t nlinks;
	struct mr_topo_host_cmds *cmds; /* nhosts entries: what to run on each host */
	size_t nhosts;
	size_t nskipped;                /* /30 ranges skipped because already routed */
	void *priv;                     /* lookup index for mr_topo_plan_ip() (private) */
};

/*
 * MLX's IPConfigurator: for host i in order, for its ports in (sorted) order,
 * for each confirmed cable not yet numbered: 192.168.X.(Y+1) on this side,
 * 192.168.X.(Y+2) on the peer, then Y += 4 (X += 1, Y = 0 past 255); more than
 * 256*64 cables is an error. Additionally a /30 that overlaps a route in
 * routes[h] of any host h (routes may be NULL, or an array of nhosts, each
 * possibly empty) is skipped (the counter moves on, so the result stays
 * deterministic); routes whose interface is bridge0 or one of that host's
 * Thunderbolt interfaces, and the default route (length 0), are not conflicts
 * (a second run over an already configured cluster gives the same plan).
 * Commands per host, as IPConfigurator.setup(): ["ifconfig","bridge0","down"],
 * then for each peer j in index order, for each cable to j in plan order:
 * ["ifconfig",IF,"inet",IP,"netmask","255.255.255.252"] and
 * ["route","change",PEER_IP,"-interface",IF].
 */
int mr_topo_plan_build(const struct mr_topo_cluster *c, const struct mr_topo_routes *routes,
		       struct mr_topo_plan *out, struct meshrun_err *err);
void mr_topo_plan_release(struct mr_topo_plan *p);
/* The address of host i on the k-th planned cable (in plan order) between i and
 * j, or NULL. (MLX's ips[i, j][k][1].) */
const char *mr_topo_plan_ip(const struct mr_topo_plan *p, size_t i, size_t j, size_t k);
/* The interface of host i on that cable, or NULL. (MLX's ips[i, j][k][0].) */
const char *mr_topo_plan_if(const struct mr_topo_plan *p, size_t i, size_t j, size_t k);
/* Number of planned cables between i and j. */
size_t mr_topo_plan_count(const struct mr_topo_plan *p, size_t i, size_t j);

/* ------------------------------------------------------------------------- */
/* Hostfile                                                                   */

/*
 * The hostfile MLX writes for ch->backend (object form: backend, envs, hosts;
 * every host has an "rdma" key):
 *  ring:       hosts in ring order; ips = this host's addresses on the ring.cables
 *              cables to its LEFT neighbour (configure_ring); rdma [].
 *  jaccl:      hosts in cluster order; ips = host_ips[i]; rdma row: null on the
 *              diagonal, "rdma_<first cable's interface to j>" (configure_jaccl).
 *  jaccl-ring: hosts in ring order; ips = host_ips[node]; rdma matrix in ring
 *              order as MLX 0.32's configure_jaccl_ring(): the two ring
 *              neighbours ring.cables devices, every other cell null (a cable
 *              between non-neighbours too); one device as a string, several as
 *              a list.
 * On a full mesh (ch->mesh) every host also gets meshrun's "mesh_ips" row (see
 * hostfile.h): its addresses on its cables to each other host, in the
 * hostfile's host order; MLX's tools ignore the key.
 * host_ips: NULL or an array of nhosts vectors (each may be empty) - the en0/en1
 * addresses meshconfig found (MLX's add_ips). envs: NULL or "K=V" strings.
 */
int mr_topo_hostfile(const struct mr_topo_cluster *c, const struct mr_topo_plan *p,
		     const struct mr_topo_choice *ch, const struct mr_strvec *host_ips,
		     const struct mr_strvec *envs, struct mr_hostfile **out,
		     struct meshrun_err *err);

/* ------------------------------------------------------------------------- */
/* DOT                                                                        */

/*
 * GraphViz text (appended to out), valid for `dot -Tpng`: one box per host
 * (label: ssh name), one edge per confirmed cable labelled "enA/enB" (host[0]'s
 * interface first) and coloured by speed (>= 80 Gb/s green, 40 orange, other or
 * unknown grey, with the speed in the label), one dashed red edge per one-sided
 * cable ("enA/?" - "reported by h1 only").
 */
int mr_topo_dot(const struct mr_topo_cluster *c, struct mr_buf *out, struct meshrun_err *err);

#endif
