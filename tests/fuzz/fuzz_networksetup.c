/*
 * fuzz_networksetup.c - text meshconfig reads from each host besides the JSON:
 * `networksetup -listallhardwareports` (and, from the same input, `netstat
 * -rn`, the routes the IP plan avoids). Every device name that parses must be
 * a valid interface name (the parser's promise: they end up in commands).
 */
#include "fuzz.h"
#include "common/compat.h"
#include "common/shquote.h"
#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_hwports hp = { NULL, 0 };
	struct mr_topo_routes routes = { NULL, 0 };
	char *text = fuzz_cstr(data, size);
	int rc = mr_topo_parse_hwports("h1", text, &hp, &err);

	fuzz_check_err(rc, &err, "mr_topo_parse_hwports");
	if (rc == 0) {
		for (size_t i = 0; i < hp.nr; i++) {
			FUZZ_ASSERT(hp.v[i].port && hp.v[i].device);
			/* device names end up in ifconfig/route command lines */
			FUZZ_ASSERT(mr_is_ifname(hp.v[i].device));
			FUZZ_ASSERT(mr_topo_hwports_find(&hp, hp.v[i].port) != NULL);
		}
		(void)mr_topo_hwports_find(&hp, "Thunderbolt 1");
	}
	mr_topo_hwports_release(&hp);

	struct meshrun_err e = MESHRUN_ERR_INIT;
	rc = mr_topo_parse_routes("h1", text, &routes, &e);
	fuzz_check_err(rc, &e, "mr_topo_parse_routes");
	mr_topo_routes_release(&routes);
	free(text);
	return 0;
}
