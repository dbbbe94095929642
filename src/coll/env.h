/*
 * coll/env.h - the environment libmeshrun reads (MLX's names first; the writer
 * is launch/env.h, both name the variables through common/envmap.h).
 *
 * Rank: MLX_RANK; where it is absent SLURM_PROCID (size SLURM_NTASKS), else
 * OMPI_COMM_WORLD_RANK (size OMPI_COMM_WORLD_SIZE). The ring's size comes from
 * MLX_HOSTFILE; a size variable that disagrees with it is an error.
 *
 * Ring hostfile (MLX_HOSTFILE), as mlx.launch writes it: a JSON list with one
 * entry per rank, each a list of "ip:port" strings (several = several
 * connections), e.g. [["10.0.0.1:5000","10.0.0.1:5001"],["10.0.0.2:5000",...]].
 * The flat form ["10.0.0.1:5000", "10.0.0.2:5000"] (one address per rank) is
 * accepted too. IPv6 addresses are written "[::1]:5000". Every rank must have
 * the same number of addresses (connections are paired left/right).
 *
 * Ownership: mr_ring_hosts_free() releases everything parse/load allocated.
 */
#ifndef MR_COLL_ENV_H
#define MR_COLL_ENV_H

#include "common/compat.h"
#include "meshrun/err.h"

#include <sys/socket.h>

struct mr_ring_addr {
	char text[80];			/* as written: "10.0.0.1:5000" */
	struct sockaddr_storage sa;	/* resolved numeric address */
	socklen_t salen;
};

struct mr_ring_hosts {
	int nranks;
	int naddrs;			/* addresses per rank */
	struct mr_ring_addr *addrs;	/* nranks * naddrs, rank-major */
};

#define MR_RING_ADDR(h, r, i) (&(h)->addrs[(size_t)(r) * (size_t)(h)->naddrs + (size_t)(i)])

/* Parse "ip:port" / "[v6]:port" (numeric only). Errors name the string. */
int mr_ring_parse_addr(const char *s, struct mr_ring_addr *out, struct meshrun_err *err);
/* Parse the hostfile text; name prefixes errors ("hosts.json: [1][0]: ..."). */
int mr_ring_hosts_parse(const char *text, size_t len, const char *name,
			struct mr_ring_hosts *out, struct meshrun_err *err);
int mr_ring_hosts_load(const char *path, struct mr_ring_hosts *out, struct meshrun_err *err);
void mr_ring_hosts_free(struct mr_ring_hosts *h);

/*
 * The JSON files the environment names (MLX_HOSTFILE, MLX_IBV_DEVICES):
 * parse the text, or read the file at path (at most max bytes) and parse it
 * named by path, then hand the document to fill, which builds *out from it
 * (and owns nothing of it). A syntax error reads "NAME: malformed JSON near
 * byte N"; fill's errors should start with name too.
 */
struct cJSON;
typedef int mr_env_json_fill(const struct cJSON *root, const char *name, void *out,
			     struct meshrun_err *err);
int mr_env_json_parse(const char *text, size_t len, const char *name, mr_env_json_fill *fill,
		      void *out, struct meshrun_err *err);
int mr_env_json_load(const char *path, size_t max, mr_env_json_fill *fill, void *out,
		     struct meshrun_err *err);

/*
 * Rank (and size, -1 when unknown) from the environment. Returns 1 when a rank
 * variable was found, 0 when none is set, or a negative code when one is
 * malformed (message names the variable). *which gets the variable's name.
 */
int mr_env_rank(int *rank, int *size, const char **which, struct meshrun_err *err);

/*
 * MESHRUN_JOB_TOKEN (optional) into token, at most cap bytes, not
 * NUL-terminated; *len gets its length, 0 when unset. A longer one is an
 * error: "WHO: MESHRUN_JOB_TOKEN is longer than CAP bytes".
 */
int mr_env_job_token(const char *who, char *token, size_t cap, size_t *len,
		     struct meshrun_err *err);

/*
 * The send buffer of the ring's data connections (MESHRUN_RING_SNDBUF):
 * value NULL or "" = MR_RING_SNDBUF_DEFAULT; a size in bytes (K/M suffixes,
 * 4K..256M) for SO_SNDBUF, which the kernel doubles and caps at
 * net.core.wmem_max; "system" = 0, the kernel's autotuning. `what` names
 * the setting in errors. Shared with bench-tcp-raw, so its bound is measured
 * with the same sockets.
 */
#define MR_RING_SNDBUF_DEFAULT "512K"
int mr_env_sndbuf(const char *what, const char *value, int *bytes, struct meshrun_err *err);

/* MESHRUN_TIMEOUT in seconds ("30", "1.5", "500ms"); default 30 s. */
#define MR_DEFAULT_TIMEOUT_MS 30000
int mr_env_timeout_ms(int64_t *ms, struct meshrun_err *err);

#endif
