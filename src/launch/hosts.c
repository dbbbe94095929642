/*
 * launch/hosts.c - the address a host without "ips" gets (launch.h,
 * mr_launch_host_addrs): the one ssh reaches it at, as `ssh HOST` resolves it.
 *
 * A --hosts list of ssh names (m1,m2: MLX's from_list gives a name no "ips")
 * or a hostfile host with "ips": [] would otherwise leave the ring, mesh, jaccl
 * coordinator or NCCL id server without an address. Resolution: an all-local
 * job uses 127.0.0.1; else the name's HostName from ssh_config (`ssh -G`,
 * hal/ssh_config.h, all hosts in parallel), taken as it is when it is an
 * address, else the first address getaddrinfo gives for it here (IPv4 first,
 * unless ssh_config's AddressFamily says otherwise). A name that resolves to
 * nothing here goes into the ranks' files as its name on the network (the
 * HostName, else the name given): a job that never starts a ring runs as
 * before, a rank that does connects if its host resolves the name, or fails
 * naming it. One note says so, with what to do (hints.h); so does one for a
 * loopback address in a job with remote hosts (they cannot reach it). The
 * note is printed once the hosts were reached (run.c): a name that ssh cannot
 * reach either is said there, as such.
 */
#include "common/compat.h"
#include "launch/launch.h"
#include "launch/hints.h"
#include "common/err.h"
#include "common/log.h"
#include "common/shquote.h"
#include "hal/ssh_config.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* The first address of name (family AF_UNSPEC: IPv4, else IPv6) into out. */
static bool lookup(const char *name, int family, char *out, size_t n)
{
	static const int order[] = { AF_INET, AF_INET6 };
	struct addrinfo hints, *res = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		if (family != AF_UNSPEC && family != order[i])
			continue;
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = order[i];
		hints.ai_socktype = SOCK_STREAM;
		if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res)
			continue;
		if (getnameinfo(res->ai_addr, res->ai_addrlen, out, (socklen_t)n, NULL, 0, NI_NUMERICHOST) == 0) {
			freeaddrinfo(res);
			return true;
		}
		freeaddrinfo(res);
		res = NULL;
	}
	return false;
}

static bool is_loopback(const char *ip)
{
	return !strncmp(ip, "127.", 4) || !strcmp(ip, "::1");
}

/* One host: its address into out (true), or false with why and, in out, the
 * name it has on the network (ssh_config's HostName, else the name given). */
static bool resolve_one(struct mr_ssh_config *cfg, const char *dest, char *out, size_t n,
			char *why, size_t whyn)
{
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	const char *name = NULL;
	int family = AF_UNSPEC;
	char *host = NULL;
	bool ok;

	if (cfg && mr_ssh_config_lookup(cfg, dest, &h, &e) == 0) {
		name = h.hostname;
		family = h.address_family;
	} else if (mr_ssh_dest_split(dest, NULL, &host, NULL) == 0) {
		name = host; /* no usable ssh_config here: the hal will say why; the name as given */
	}
	if (!name) {
		snprintf(why, whyn, "not an ssh destination");
		snprintf(out, n, "%s", dest);
		ok = false;
	} else if (mr_is_ip(name)) {
		ok = (size_t)snprintf(out, n, "%s", name) < n;
	} else {
		ok = lookup(name, family, out, n);
		if (!ok && h.alias && strcmp(name, h.alias))
			snprintf(why, whyn, "its ssh_config HostName '%s' does not resolve here", name);
		else if (!ok)
			snprintf(why, whyn, "the name does not resolve here");
		if (!ok)
			snprintf(out, n, "%s", name);
	}
	if (ok)
		mr_debug("host '%s': ring address %s (ssh reaches it as '%s')", dest, out, name);
	mr_ssh_host_cfg_release(&h);
	free(host);
	return ok;
}

int mr_launch_host_addrs(struct mr_hostfile *hf, bool all_local, const char *ssh_config,
			 struct mr_buf *note, struct meshrun_err *err)
{
	struct mr_ssh_config *cfg = NULL;
	const char **dests = NULL;
	size_t ndests = 0, nbad = 0;
	char first_bad[512] = "";
	bool remote = false;
	int rc = 0;

	for (size_t i = 0; i < hf->nhosts; i++)
		remote |= !mr_hal_host_is_local(hf->hosts[i].ssh);
	if (!(dests = calloc(hf->nhosts ? hf->nhosts : 1, sizeof(*dests))))
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	for (size_t i = 0; i < hf->nhosts; i++) {
		bool seen = false;

		if (hf->hosts[i].ips.nr)
			continue;
		for (size_t k = 0; k < ndests && !seen; k++)
			seen = !strcmp(dests[k], hf->hosts[i].ssh);
		if (!seen)
			dests[ndests++] = hf->hosts[i].ssh;
	}
	if (!ndests)
		goto out;
	if (!all_local) {
		struct meshrun_err e = MESHRUN_ERR_INIT;

		if (mr_ssh_config_load(&cfg, ssh_config, &e) < 0)
			mr_debug("ring addresses without ssh_config: %s", e.msg); /* the hal says it */
		mr_ssh_config_prefetch(cfg, dests, ndests);
	}
	for (size_t k = 0; k < ndests; k++) {
		char addr[256], why[400] = "";

		if (all_local) {
			snprintf(addr, sizeof(addr), "127.0.0.1");
		} else if (!resolve_one(cfg, dests[k], addr, sizeof(addr), why, sizeof(why))) {
			/* its name on the network: a rank that resolves it still connects */
			if (!nbad++)
				snprintf(first_bad, sizeof(first_bad), "'%s' (%s)", dests[k], why);
		} else if (remote && is_loopback(addr) && !note->len) {
			mr_buf_printf(note, "host '%s' is at %s, a loopback address, which the other hosts "
				      "cannot reach: a ring between them will not connect; %s",
				      dests[k], addr, MR_HINT_RING_ADDRESS);
		}
		for (size_t i = 0; i < hf->nhosts; i++)
			if (!hf->hosts[i].ips.nr && !strcmp(hf->hosts[i].ssh, dests[k]) &&
			    mr_strvec_push(&hf->hosts[i].ips, addr) < 0) {
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
				goto out;
			}
	}
	if (nbad) {
		mr_buf_reset(note);
		mr_buf_printf(note, "%zu host%s without an address for the ring, the first %s: its name "
			      "goes into the ranks' files instead, so a rank that starts a ring fails unless "
			      "it resolves it; %s", nbad, nbad == 1 ? "" : "s", first_bad, MR_HINT_RING_ADDRESS);
	}
out:
	mr_ssh_config_free(cfg);
	free(dests);
	return rc;
}
