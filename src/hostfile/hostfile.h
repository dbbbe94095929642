/*
 * hostfile.h - the MLX hostfile model, byte-compatible with mlx.launch and
 * mlx.distributed_config in both directions.
 *
 * Two shapes are read:
 *   list form    [{"ssh": "m1", "ips": ["10.0.0.1"], "rdma": [null, "rdma_en2"]}, ...]
 *   object form  {"backend": "jaccl", "envs": ["K=V"], "hosts": [ <list form> ]}
 * An rdma cell is null, a device name, or a list of device names (several cables).
 * meshrun's own key "mesh_ips" (MLX's tools ignore unknown keys; meshconfig
 * writes it on a full mesh) is a row like rdma: cell j is null on the
 * diagonal, else the list of this host's addresses on its cables to host j,
 * which the mesh backend (coll/mesh/tcpmesh.h) connects over. It is emitted after
 * "rdma", only where it was read or set.
 * Written JSON has the same shape, indent 4 and MLX's key order, so a file written
 * by either tool is read by the other: the object form (what current MLX writes)
 * always has "backend", "envs", "hosts" and every host "ssh", "ips", "rdma"; the
 * list form (older MLX) has "rdma" only where it was read. hostfile.c's header
 * comment records MLX's format as found in its sources.
 *
 * Errors name the file and the JSON path, e.g.
 *   "hosts.json: hosts[2].ips[0]: expected a string, got number"
 *   "hosts.json:3:14: malformed JSON"   (cJSON's parse position as line:column)
 *
 * Ownership: a struct mr_hostfile and everything in it is owned by the struct;
 * mr_hostfile_free() releases it all. Strings handed in are copied.
 */
#ifndef MR_HOSTFILE_H
#define MR_HOSTFILE_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"

enum mr_rdma_kind {
	MR_RDMA_NULL = 0, /* JSON null: no RDMA link to that peer (the diagonal) */
	MR_RDMA_ONE,      /* "rdma_en2" */
	MR_RDMA_LIST,     /* ["rdma_en2", "rdma_en3"]: several cables to that peer */
};

struct mr_rdma_cell {
	enum mr_rdma_kind kind;
	struct mr_strvec devs; /* 0 names (NULL), 1 (ONE), or 0..n (LIST) */
};

struct mr_host {
	char *ssh;                 /* ssh host name or IP address (never NULL) */
	struct mr_strvec ips;      /* "ips": addresses used by the ring backend */
	bool has_rdma;             /* the "rdma" key was present */
	struct mr_rdma_cell *rdma; /* nrdma cells: this host's row of the rdma matrix */
	size_t nrdma;
	bool has_mesh;             /* the "mesh_ips" key was present */
	struct mr_rdma_cell *mesh; /* nmesh cells: MR_RDMA_NULL or MR_RDMA_LIST of addresses */
	size_t nmesh;
};

struct mr_hostfile {
	bool object_form;          /* read from / to be written as the object form */
	char *backend;             /* "backend" of the object form, or NULL */
	struct mr_strvec envs;     /* "envs": "K=V" strings */
	struct mr_host *hosts;
	size_t nhosts;
};

/* An empty hostfile (list form). NULL only when out of memory. */
struct mr_hostfile *mr_hostfile_new(void);
void mr_hostfile_free(struct mr_hostfile *hf);

/* Parse JSON text; name (the file name) prefixes every error message. */
int mr_hostfile_parse(const char *text, size_t len, const char *name, struct mr_hostfile **out,
		      struct meshrun_err *err);
/* Read and parse a file. */
int mr_hostfile_load(const char *path, struct mr_hostfile **out, struct meshrun_err *err);

/*
 * Hosts from a --hosts list "a,b,10.0.0.3": an entry that parses as an IPv4 or
 * IPv6 address becomes {ssh: it, ips: [it]}; any other entry is an ssh name with
 * no ips. Empty entries and names that are neither an IP nor a valid host name
 * ([user@]name of [A-Za-z0-9_.-]) are errors naming the entry (MESHRUN_E_USAGE).
 * The result is in the object form with "rdma": [] per host, as MLX's
 * Hostfile.from_list(...).to_json() gives.
 */
int mr_hostfile_from_list(const char *list, struct mr_hostfile **out, struct meshrun_err *err);

/* Append a host (copied; not validated; has_rdma false, no ips); returns its
 * index, or a negative code. Pointers into hf->hosts are invalidated. */
int mr_hostfile_add_host(struct mr_hostfile *hf, const char *ssh, struct meshrun_err *err);

/*
 * Serialise (appended to out) exactly as MLX's json.dump(obj, f, indent=4) does:
 * NO trailing newline, since that is what MLX's --output-hostfile contains.
 * Fails with MESHRUN_E_INVAL when a string is not valid UTF-8.
 */
int mr_hostfile_emit(const struct mr_hostfile *hf, struct mr_buf *out, struct meshrun_err *err);
/* Emit to path, written atomically (byte-identical to MLX's file); "-": stdout,
 * with a trailing newline as MLX's print(json.dumps(...)). */
int mr_hostfile_save(const struct mr_hostfile *hf, const char *path, struct meshrun_err *err);

/*
 * Check the rdma matrix for the jaccl backends: every host has an rdma row of
 * nhosts cells, the diagonal is null; with mesh, every off-diagonal cell is set;
 * with ring (mesh false), the left and right neighbours' cells are set with equal
 * device counts (for 2 hosts both neighbours are the one other column). A cell
 * that is an empty list counts as missing. Errors (MESHRUN_E_INVAL) start with
 * "malformed hostfile: " and name the host (index and ssh name) and the column:
 *   "malformed hostfile: host 1 ('m2') rdma[3]: no RDMA device for peer 3 ('m4')"
 */
int mr_hostfile_check_rdma(const struct mr_hostfile *hf, bool mesh, struct meshrun_err *err);

/*
 * Whether the mesh backend can run: every host has a "mesh_ips" row of nhosts
 * cells, null on the diagonal, a non-empty list elsewhere, and cells [i][j]
 * and [j][i] list as many addresses (the same cables). 0, or MESHRUN_E_INVAL
 * with "malformed hostfile: host 1 ('m2') mesh_ips[3]: ..." naming the first fault.
 */
int mr_hostfile_check_mesh(const struct mr_hostfile *hf, struct meshrun_err *err);

#endif
