/*
 * fuzz_ibv_devices.c - `ibv_devices` output as meshconfig reads it from each
 * host: every name kept starts with "rdma_".
 */
#include "fuzz.h"
#include "common/shquote.h"
#include "common/strvec.h"
#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec devs = MR_STRVEC_INIT;
	char *text = fuzz_cstr(data, size);
	int rc = mr_topo_parse_ibv_devices("h1", text, &devs, &err);

	fuzz_check_err(rc, &err, "mr_topo_parse_ibv_devices");
	if (rc == 0)
		for (size_t i = 0; i < devs.nr; i++)
			FUZZ_ASSERT(strncmp(devs.v[i], "rdma_", 5) == 0 && mr_is_ifname(devs.v[i] + 5));
	mr_strvec_release(&devs);
	free(text);
	return 0;
}
