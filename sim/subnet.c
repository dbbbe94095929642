/*
 * subnet.c - which management subnet 10.230.K.0/24 (/23) a new cluster takes
 * (subnet.h): apart from up.c because the rules are about this machine (its
 * addresses, routes and other suites' claims), not about the cluster.
 */
#include "common/compat.h"
#include "sim/subnet.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "sim/model.h"
#include "sim/plan.h"
#include "sim/state.h"

/* Whether this machine routes some of 10.230.K.0/24 (a /24 or narrower) on its
 * own: another bridge, a user's route, or an unreachable route a test left
 * behind. A cluster there would find some of its hosts unreachable. */
static bool subnet_routed_locally(uint32_t net)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256];
	bool used = false;

	if (!f)
		return false;
	while (!used && fgets(line, sizeof(line), f)) {
		unsigned dst, mask;

		if (sscanf(line, "%*s %x %*x %*x %*d %*d %*d %x", &dst, &mask) != 2)
			continue; /* the header */
		dst = ntohl(dst);
		mask = ntohl(mask);
		used = mask >= 0xffffff00u && (dst & 0xffffff00u) == net;
	}
	fclose(f);
	return used;
}

static bool subnet_used_locally(unsigned k)
{
	uint32_t net = ((uint32_t)MR_SIM_NET_A << 24) | ((uint32_t)MR_SIM_NET_B << 16) | (k << 8);
	struct ifaddrs *ifa = NULL;
	bool used = false;

	if (getifaddrs(&ifa) < 0)
		return false;
	for (struct ifaddrs *p = ifa; p && !used; p = p->ifa_next) {
		if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET)
			continue;
		uint32_t a = ntohl(((struct sockaddr_in *)(void *)p->ifa_addr)->sin_addr.s_addr);
		used = (a & 0xffffff00u) == net;
	}
	freeifaddrs(ifa);
	return used || subnet_routed_locally(net);
}

static bool subnet_used_by_cluster(unsigned k, const char *self)
{
	DIR *d = opendir(mr_sim_state_base());
	struct dirent *e;
	bool used = false;

	if (!d)
		return false;
	while (!used && (e = readdir(d))) {
		struct mr_sim_state *st = NULL;
		if (e->d_name[0] == '.' || !strcmp(e->d_name, self) ||
		    mr_sim_check_name(e->d_name, NULL) < 0)
			continue;
		/* a cluster of more than 250 hosts holds K and K+1 (a /23) */
		if (mr_sim_state_load(e->d_name, &st, NULL) == 0)
			used = st->subnet == k ||
			       (st->cluster && st->cluster->nhosts > MR_SIM_SUBNET_HOSTS &&
				st->subnet + 1 == k);
		mr_sim_state_free(st);
	}
	closedir(d);
	return used;
}

/*
 * From picking a subnet to putting its address on the management bridge take
 * seconds in which another `meshsim up` with another state folder (another
 * test suite) would find it free too: claim it machine-wide first. A claim is
 * a file named K in SUBNET_CLAIMS holding the claimer's pid; one whose process
 * is gone is stale and taken over. Claims are dropped at the end of `up`, when
 * the bridge address guards the subnet (subnet_used_locally).
 */
#define SUBNET_CLAIMS "/run/meshsim-subnets"

static long claim_owner(const char *path)
{
	char buf[32] = "";
	long pid = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = mr_read_full(fd, buf, sizeof(buf) - 1);

		buf[n > 0 ? n : 0] = '\0';
		close(fd);
		pid = strtol(buf, NULL, 10);
	}
	return pid;
}

/* The claim file appears whole (written under a private name, then linked):
 * a reader never sees it without its pid. */
static bool subnet_claim(unsigned k)
{
	char path[64], tmp[96], line[32];
	int fd, n;
	bool written;

	snprintf(path, sizeof(path), SUBNET_CLAIMS "/%u", k);
	snprintf(tmp, sizeof(tmp), SUBNET_CLAIMS "/.%u.%ld", k, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return true; /* no claims folder (not root): nothing to race with here */
	n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	written = mr_write_full(fd, line, (size_t)n) == 0;
	close(fd);
	for (int tries = 0; written && tries < 2; tries++) {
		long pid;

		if (link(tmp, path) == 0) {
			unlink(tmp);
			return true;
		}
		if (errno != EEXIST)
			break;
		pid = claim_owner(path);
		if (pid == (long)getpid()) {
			unlink(tmp);
			return true;
		}
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
			break; /* another `meshsim up` is bringing it up */
		unlink(path); /* stale: its process is gone */
	}
	unlink(tmp);
	return false;
}

void mr_sim_subnet_unclaim(unsigned k)
{
	char path[64];

	snprintf(path, sizeof(path), SUBNET_CLAIMS "/%u", k);
	if (claim_owner(path) == (long)getpid())
		unlink(path);
}

static bool subnet_free(unsigned k, const char *self)
{
	return !subnet_used_locally(k) && !subnet_used_by_cluster(k, self);
}

/* A /24, or for more than 250 hosts a /23: K even, K and K+1 both free. */
int mr_sim_subnet_pick(const char *name, size_t nhosts, unsigned *out, struct meshrun_err *err)
{
	bool wide = mr_sim_prefix_len(nhosts) == 23;
	unsigned k = mr_sim_subnet_hint(name);

	(void)mkdir(SUBNET_CLAIMS, 0755);
	for (int i = 0; i < 250; i++, k = mr_sim_subnet_next(k)) {
		if (wide && (k % 2 || k + 1 > 250 || !subnet_free(k + 1, name)))
			continue;
		if (!subnet_free(k, name) || !subnet_claim(k))
			continue;
		if (wide && !subnet_claim(k + 1)) {
			mr_sim_subnet_unclaim(k);
			continue;
		}
		*out = k;
		return 0;
	}
	return mr_err_set(err, MESHRUN_E_NOTFOUND, "no free subnet 10.230.K.0/%u left",
			  mr_sim_prefix_len(nhosts));
}
