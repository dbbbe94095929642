/*
 * fuzz_mlx_hostfile.c - the file MLX_HOSTFILE names, as libmeshrun's ring
 * backend reads it (mr_ring_hosts_parse), and, from the same input (when
 * short), the values of the variables libmeshrun reads: an "ip:port" such as
 * MLX_JACCL_COORDINATOR (mr_ring_parse_addr), MESHRUN_RING_SNDBUF, and
 * every variable the jaccl and nccl backends read, set to it.
 */
#include "fuzz.h"
#include "coll/env.h"
#include "coll/jaccl_types.h"
#include "coll/nccl_boot.h"

static const char *const vars[] = {
	"MLX_RANK", "JACCL_RANK", "MESHRUN_TIMEOUT", "MESHRUN_JOB_TOKEN", "MESHRUN_IB_GID_INDEX",
	"MLX_IBV_DEVICES", "MLX_JACCL_COORDINATOR", "NCCL_HOST_IP", "NCCL_PORT", "MLX_WORLD_SIZE",
	"MLX_NCCL_TIMEOUT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
};

/*
 * Every variable set to v (those named in mask), the others unset. Through
 * putenv() of our own buffers: glibc's setenv() keeps every value it was ever
 * given (getenv() pointers must stay valid), which grew this harness to a
 * gigabyte in 10 minutes.
 */
static void set_vars(const char *v, unsigned mask)
{
	static char bufs[ARRAY_SIZE(vars)][320];

	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		unsetenv(vars[i]);
		if (mask & (1u << i)) {
			snprintf(bufs[i], sizeof(bufs[i]), "%s=%s", vars[i], v);
			putenv(bufs[i]);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_ring_hosts h;
	int rc;

	memset(&h, 0, sizeof(h));
	rc = mr_ring_hosts_parse((const char *)data, size, "fuzz.json", &h, &err);
	fuzz_check_err(rc, &err, "mr_ring_hosts_parse");
	if (rc == 0) {
		FUZZ_ASSERT(h.nranks >= 1 && h.naddrs >= 1 && h.addrs);
		for (int r = 0; r < h.nranks; r++)
			for (int i = 0; i < h.naddrs; i++)
				FUZZ_ASSERT(MR_RING_ADDR(&h, r, i)->salen > 0);
	}
	mr_ring_hosts_free(&h);

	if (size < 256) {
		struct mr_ring_addr a;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		char *s = fuzz_cstr(data, size);
		rc = mr_ring_parse_addr(s, &a, &e);
		fuzz_check_err(rc, &e, "mr_ring_parse_addr");
		if (rc == 0)
			FUZZ_ASSERT(memchr(a.text, '\0', sizeof(a.text)) != NULL);
		int bytes = -1;
		struct meshrun_err e2 = MESHRUN_ERR_INIT;
		rc = mr_env_sndbuf("MESHRUN_RING_SNDBUF", s, &bytes, &e2);
		fuzz_check_err(rc, &e2, "mr_env_sndbuf");
		if (rc == 0)
			FUZZ_ASSERT(bytes == 0 || (bytes >= 4096 && bytes <= (256 << 20)));
		/* the variables: all set to the input, then each left out in turn */
		for (int skip = -1; skip < (int)ARRAY_SIZE(vars); skip++) {
			unsigned mask = ~0u & ~(skip >= 0 ? 1u << skip : 0u);
			struct mr_jaccl_env je;
			struct mr_nccl_boot nb;
			struct meshrun_err e3 = MESHRUN_ERR_INIT, e4 = MESHRUN_ERR_INIT;
			set_vars(s, mask);
			rc = mr_jaccl_env_read(&je, &e3);
			fuzz_check_err(rc, &e3, "mr_jaccl_env_read");
			if (rc == 0)
				FUZZ_ASSERT(je.rank >= 0 && je.timeout_ms > 0 && je.token_len <= MR_TOKEN_MAX);
			rc = mr_nccl_boot_from_env(&nb, &e4);
			fuzz_check_err(rc, &e4, "mr_nccl_boot_from_env");
			if (rc == 0)
				FUZZ_ASSERT(nb.rank >= 0 && nb.rank < nb.size && nb.port >= 1 && nb.port <= 65535);
		}
		set_vars("", 0);
		free(s);
	}
	return 0;
}
