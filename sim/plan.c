/*
 * sim/plan.c - meshsim's names and addresses of a cluster (sim/plan.h; not
 * topo/plan.c, the IP plan of the cables, nor launch/plan.c, meshrun's job plan).
 */
#include "common/compat.h"
#include "sim/plan.h"

#include <ctype.h>

#include "common/err.h"
#include "common/xalloc.h"

int mr_sim_check_name(const char *name, struct meshrun_err *err)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > MR_SIM_NAME_MAX)
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "cluster name '%s': must be 1 to %d characters", name ? name : "",
				  MR_SIM_NAME_MAX);
	if (!islower((unsigned char)name[0]))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "cluster name '%s': must start with a lower-case letter", name);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!islower(c) && !isdigit(c) && c != '_')
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "cluster name '%s': only a-z, 0-9 and '_' are allowed", name);
	}
	return 0;
}

unsigned mr_sim_subnet_hint(const char *name)
{
	uint32_t h = 2166136261u;

	for (const char *p = name; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 16777619u;
	}
	return h % 250 + 1;
}

unsigned mr_sim_subnet_next(unsigned k)
{
	return k >= 250 ? 1 : k + 1;
}

void mr_sim_host_addr(unsigned k, size_t index, char *out, size_t outlen)
{
	snprintf(out, outlen, "%d.%d.%zu.%zu", MR_SIM_NET_A, MR_SIM_NET_B,
		 k + index / MR_SIM_SUBNET_HOSTS, index % MR_SIM_SUBNET_HOSTS + 1);
}

unsigned mr_sim_prefix_len(size_t nhosts)
{
	return nhosts > MR_SIM_SUBNET_HOSTS ? 23 : 24;
}

void mr_sim_bridge_addr(unsigned k, char *out, size_t outlen)
{
	snprintf(out, outlen, "%d.%d.%u.%d", MR_SIM_NET_A, MR_SIM_NET_B, k, MR_SIM_BRIDGE_OCTET);
}

char *mr_sim_ns_name(const char *name, const char *host)
{
	return xasprintf("%s-%s", name, host);
}

char *mr_sim_bridge_name(const char *name)
{
	return xasprintf("%s-br", name);
}

char *mr_sim_mgmt_link(const char *name, size_t index)
{
	return xasprintf("%s-m%zu", name, index);
}

char *mr_sim_prefix(const char *name)
{
	return xasprintf("%s-", name);
}

const char *mr_sim_state_base(void)
{
	const char *b = getenv("MESHSIM_STATE_DIR");

	return b && *b ? b : MR_SIM_STATE_BASE;
}

char *mr_sim_state_dir(const char *name)
{
	return xasprintf("%s/%s", mr_sim_state_base(), name);
}

bool mr_sim_is_topology_spec(const char *arg)
{
	const char *p = arg;

	while (isalpha((unsigned char)*p))
		p++;
	return p != arg && *p == ':' && isdigit((unsigned char)p[1]);
}

bool mr_sim_ifname_reserved(const char *ifname)
{
	return !strcmp(ifname, "en0") || !strcmp(ifname, "bridge0") || !strcmp(ifname, "lo");
}
