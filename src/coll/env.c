/*
 * coll/env.c - libmeshrun's side of the environment contract (the reader; not
 * launch/env.c, meshrun's writer): the ring hostfile, rank and size, job token,
 * timeout and send buffer, as coll/env.h describes them.
 */
#include "common/compat.h"
#include "common/envmap.h"
#include "coll/env.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"

#include <cjson/cJSON.h>
#include <netdb.h>

int mr_ring_parse_addr(const char *s, struct mr_ring_addr *out, struct meshrun_err *err)
{
	char host[64];
	const char *port, *hb, *he;
	uint64_t pnum;
	size_t len = strlen(s);

	if (len == 0 || len >= sizeof(out->text))
		return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': expected \"ip:port\"", s);
	if (s[0] == '[') {
		he = strchr(s, ']');
		if (!he || he[1] != ':')
			return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': expected \"[ipv6]:port\"", s);
		hb = s + 1;
		port = he + 2;
	} else {
		he = strrchr(s, ':');
		if (!he)
			return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': expected \"ip:port\"", s);
		hb = s;
		port = he + 1;
	}
	if (he == hb || (size_t)(he - hb) >= sizeof(host))
		return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': empty or long host part", s);
	memcpy(host, hb, (size_t)(he - hb));
	host[he - hb] = '\0';
	if (mr_parse_u64(port, 1, 65535, &pnum) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': port '%s' is not in 1..65535", s, port);

	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0 || !res)
		return mr_err_set(err, MESHRUN_E_PARSE, "bad address '%s': '%s' is not a numeric IP address", s, host);
	memset(out, 0, sizeof(*out));
	memcpy(&out->sa, res->ai_addr, res->ai_addrlen);
	out->salen = res->ai_addrlen;
	freeaddrinfo(res);
	memcpy(out->text, s, len + 1);
	return 0;
}

void mr_ring_hosts_free(struct mr_ring_hosts *h)
{
	MR_FREE(h->addrs);
	h->nranks = h->naddrs = 0;
}

static int entry_count(const cJSON *e)
{
	return cJSON_IsArray(e) ? cJSON_GetArraySize(e) : 1;
}

static int hosts_fill(const cJSON *root, const char *name, void *dst, struct meshrun_err *err)
{
	struct mr_ring_hosts h = { 0, 0, NULL };
	int rc = 0;

	if (!cJSON_IsArray(root) || cJSON_GetArraySize(root) == 0) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: expected a non-empty list of ranks", name);
		goto out;
	}
	h.nranks = cJSON_GetArraySize(root);
	h.naddrs = entry_count(cJSON_GetArrayItem(root, 0));
	if (h.naddrs <= 0) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [0]: rank 0 has no addresses", name);
		goto out;
	}
	h.addrs = calloc((size_t)h.nranks * (size_t)h.naddrs, sizeof(*h.addrs));
	if (!h.addrs) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory", name);
		goto out;
	}
	for (int r = 0; r < h.nranks; r++) {
		const cJSON *e = cJSON_GetArrayItem(root, r);
		if (!cJSON_IsArray(e) && !cJSON_IsString(e)) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d]: expected a list of \"ip:port\" strings", name, r);
			goto out;
		}
		if (entry_count(e) != h.naddrs) {
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d]: rank %d has %d addresses but rank 0 has %d (every rank needs the same number)", name, r, r, entry_count(e), h.naddrs);
			goto out;
		}
		for (int i = 0; i < h.naddrs; i++) {
			const cJSON *a = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, i) : e;
			if (!cJSON_IsString(a)) {
				rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: [%d][%d]: expected an \"ip:port\" string", name, r, i);
				goto out;
			}
			rc = mr_ring_parse_addr(a->valuestring, MR_RING_ADDR(&h, r, i), err);
			if (rc < 0) {
				mr_err_prefix(err, "%s: [%d][%d]", name, r, i);
				goto out;
			}
		}
	}
	*(struct mr_ring_hosts *)dst = h;
	h.addrs = NULL;
out:
	mr_ring_hosts_free(&h);
	return rc;
}

int mr_ring_hosts_parse(const char *text, size_t len, const char *name,
			struct mr_ring_hosts *out, struct meshrun_err *err)
{
	return mr_env_json_parse(text, len, name, hosts_fill, out, err);
}

int mr_ring_hosts_load(const char *path, struct mr_ring_hosts *out, struct meshrun_err *err)
{
	return mr_env_json_load(path, 16u << 20, hosts_fill, out, err);
}

int mr_env_json_parse(const char *text, size_t len, const char *name, mr_env_json_fill *fill,
		      void *out, struct meshrun_err *err)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);

	if (!root) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: malformed JSON near byte %zu", name, off);
	}
	int rc = fill(root, name, out, err);
	cJSON_Delete(root);
	return rc;
}

int mr_env_json_load(const char *path, size_t max, mr_env_json_fill *fill, void *out,
		     struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	int rc = mr_read_file(path, max, &b, err);

	if (rc == 0)
		rc = mr_env_json_parse(mr_buf_cstr(&b), b.len, path, fill, out, err);
	mr_buf_release(&b);
	return rc;
}

static int env_int(const char *name, int lo, int hi, int *out, struct meshrun_err *err)
{
	const char *v = getenv(name);

	if (!v)
		return 0;
	if (mr_parse_int(v, lo, hi, out) < 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "environment variable %s='%s': expected an integer in %d..%d", name, v, lo, hi);
	return 1;
}

int mr_env_rank(int *rank, int *size, const char **which, struct meshrun_err *err)
{
	/* Open MPI before SLURM: under mpirun inside an allocation every rank also
	 * inherits its node daemon's SLURM_PROCID, which is not the rank. */
	static const char *const pairs[][2] = {
		{ MR_ENV(MLX_RANK), NULL },
		{ MR_ENV(OMPI_COMM_WORLD_RANK), MR_ENV(OMPI_COMM_WORLD_SIZE) },
		{ MR_ENV(SLURM_PROCID), MR_ENV(SLURM_NTASKS) },
	};

	*size = -1;
	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
		int rc = env_int(pairs[i][0], 0, 1 << 20, rank, err);
		if (rc == 0)
			continue;
		if (rc < 0)
			return rc;
		*which = pairs[i][0];
		if (pairs[i][1]) {
			rc = env_int(pairs[i][1], 1, 1 << 20, size, err);
			if (rc < 0)
				return rc;
			if (rc > 0 && *rank >= *size)
				return mr_err_set(err, MESHRUN_E_PARSE, "%s=%d is not below %s=%d", pairs[i][0], *rank, pairs[i][1], *size);
		}
		return 1;
	}
	return 0;
}

int mr_env_job_token(const char *who, char *token, size_t cap, size_t *len,
		     struct meshrun_err *err)
{
	const char *v = getenv(MR_ENV(MESHRUN_JOB_TOKEN));

	*len = 0;
	if (!v)
		return 0;
	if (strlen(v) > cap)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s: MESHRUN_JOB_TOKEN is longer than %zu bytes", who, cap);
	*len = strlen(v);
	memcpy(token, v, *len);
	return 0;
}

int mr_env_sndbuf(const char *what, const char *value, int *bytes, struct meshrun_err *err)
{
	uint64_t v;

	if (!value || !*value)
		value = MR_RING_SNDBUF_DEFAULT;
	if (strcmp(value, "system") == 0) {
		*bytes = 0;
		return 0;
	}
	if (mr_parse_size(value, 256u << 20, &v) < 0 || v < 4096)
		return mr_err_set(err, MESHRUN_E_PARSE, "%s='%s': expected a send buffer size from 4K to 256M (e.g. 512K), or 'system' for the kernel's autotuning", what, value);
	*bytes = (int)v;
	return 0;
}

int mr_env_timeout_ms(int64_t *ms, struct meshrun_err *err)
{
	const char *v = getenv(MR_ENV(MESHRUN_TIMEOUT));

	*ms = MR_DEFAULT_TIMEOUT_MS;
	if (!v || !*v)
		return 0;
	if (mr_parse_duration_ms(v, 7LL * 24 * 3600 * 1000, ms) < 0 || *ms <= 0)
		return mr_err_set(err, MESHRUN_E_PARSE, "environment variable MESHRUN_TIMEOUT='%s': expected seconds, e.g. 30 or 1.5 or 500ms", v);
	return 0;
}
