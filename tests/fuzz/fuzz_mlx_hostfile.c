/*
 * fuzz_mlx_hostfile.c - the file MLX_HOSTFILE names, as libmeshrun's ring
 * backend reads it (mr_ring_hosts_parse), and an "ip:port" string such as
 * MLX_JACCL_COORDINATOR (mr_ring_parse_addr) from the same input.
 */
#include "fuzz.h"
#include "coll/env.h"

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
		free(s);
	}
	return 0;
}
