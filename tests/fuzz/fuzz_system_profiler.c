/*
 * fuzz_system_profiler.c - `system_profiler SPThunderboltDataType -json` as
 * meshconfig reads it from each host: one host parsed against a fixed
 * networksetup (Thunderbolt 1..8 -> en1..en8) and ibv_devices, then a cluster
 * of that host and a copy of it under another name (so cables between the two
 * can be found), finished, checked for a mesh and drawn as DOT.
 */
#include "fuzz.h"
#include "common/shquote.h"
#include "topo/topo.h"

static const char hwports[] =
	"Hardware Port: Ethernet\nDevice: en0\nEthernet Address: 00:00:00:00:00:01\n\n"
	"Hardware Port: Thunderbolt 1\nDevice: en1\n\nHardware Port: Thunderbolt 2\nDevice: en2\n\n"
	"Hardware Port: Thunderbolt 3\nDevice: en3\n\nHardware Port: Thunderbolt 4\nDevice: en4\n\n"
	"Hardware Port: Thunderbolt 5\nDevice: en5\n\nHardware Port: Thunderbolt 6\nDevice: en6\n\n"
	"Hardware Port: Thunderbolt 7\nDevice: en7\n\nHardware Port: Thunderbolt 8\nDevice: en8\n\n"
	"Hardware Port: Thunderbolt Bridge\nDevice: bridge0\n";
static const char ibv[] =
	"    device          \t   node GUID\n    ------          \t----------------\n"
	"    rdma_en1        \t0000000000000001\n    rdma_en2        \t0000000000000002\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_host h;
	int rc;

	memset(&h, 0, sizeof(h));
	rc = mr_topo_parse_host("h1", (const char *)data, size, hwports, ibv, &h, &err);
	fuzz_check_err(rc, &err, "mr_topo_parse_host");
	if (rc == 0) {
		for (size_t i = 0; i < h.nports; i++) {
			FUZZ_ASSERT(h.ports[i].ifname && h.ports[i].receptacle);
			FUZZ_ASSERT(mr_is_ifname(h.ports[i].ifname));
		}
	}
	mr_topo_host_release(&h);
	if (rc < 0)
		return 0;

	struct mr_topo_cluster *c = mr_topo_cluster_new();
	struct mr_buf dot = MR_BUF_INIT;
	FUZZ_ASSERT(c);
	struct meshrun_err e = MESHRUN_ERR_INIT;
	rc = mr_topo_cluster_add_host(c, "h1", (const char *)data, size, hwports, ibv, &e);
	if (rc == 0)
		rc = mr_topo_cluster_add_host(c, "h2", (const char *)data, size, hwports, NULL, &e);
	if (rc == 0)
		rc = mr_topo_cluster_finish(c, &e);
	fuzz_check_err(rc, &e, "cluster");
	if (rc == 0) {
		size_t a, b;
		(void)mr_topo_is_mesh(c, &a, &b);
		rc = mr_topo_dot(c, &dot, &e);
		fuzz_check_err(rc, &e, "mr_topo_dot");
	}
	mr_buf_release(&dot);
	mr_topo_cluster_free(c);
	return 0;
}
