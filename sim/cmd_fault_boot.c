/*
 * sim/cmd_fault_boot.c - `meshsim fault reboot HOST` and `meshsim fault maxmtu
 * HOST:IF N|off` (fault_impl.h).
 *
 * reboot, as a Mac restarts:
 *   1. the host's processes end (SIGTERM, SIGKILL a second later): its sshd,
 *      the jobs of its launchd (launchd.h), anything a session left running;
 *   2. its network goes back to the fixture's boot state, which `meshsim up`
 *      made: every Thunderbolt port without an address, at MTU 1500, in
 *      bridge0 (the cable-less ones too, render.h), up; bridge0 without an address, up; no route but the
 *      kernel's (routes of `route add|change` are proto boot, flushed). macOS
 *      gives the ports back to the Thunderbolt Bridge at boot, whatever was
 *      done to it before (what the issue that asked for --at-boot reports);
 *      a pulled cable stays pulled (its port comes back up when plugged);
 *   3. its TMPDIR is emptied (macOS empties /tmp at boot); /Library stays;
 *   4. sshd starts, and with it the host's launchd, which loads every plist of
 *      its /Library/LaunchDaemons (RunAtLoad jobs start); what it logged during
 *      this boot is printed.
 * The cable faults (rate, loss, latency, maxmtu) are the cable's or the port's
 * and stay; a flapper living in the host ends with it, as with `stop`.
 *
 * maxmtu: the port refuses an MTU above N (its live/maxmtu/IF, read by the
 * ifconfig shim, render.h), as a Mac whose port or driver does not take jumbo
 * frames; the MTU it has now stays.
 */
#include "common/compat.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/xalloc.h"
#include "sim/fault_impl.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/state.h"

#define BOOT_MTU "1500"

/* The batch that puts host h's network back in its boot state. */
static void boot_batch(const struct fault_ctx *f, size_t h, struct mr_buf *b)
{
	const struct mr_sim_cluster *c = f->st->cluster;

	mr_buf_puts(b, "addr flush dev bridge0\nroute flush proto boot\n");
	for (size_t k = 0; k < c->ncables; k++) {
		const struct mr_sim_cable *cb = &c->cables[k];

		for (int s = 0; s < 2; s++) {
			const char *ifn = s ? cb->b_if : cb->a_if;
			char *mark;
			struct stat st;

			if ((s ? cb->b : cb->a) != h)
				continue;
			mr_buf_printf(b, "addr flush dev %s\nlink set dev %s mtu " BOOT_MTU "\n"
				      "link set dev %s master bridge0\n", ifn, ifn, ifn);
			/* a pulled cable: the port gets "up" back when plugged (live.h) */
			mark = xasprintf("%s/%s/live/unplugged/%s", f->state, c->hosts[h].name, ifn);
			if (stat(mark, &st) == 0)
				mr_write_file(mark, "up\n", 3, 0644, NULL);
			else
				mr_buf_printf(b, "link set dev %s up\n", ifn);
			free(mark);
		}
	}
	mr_buf_puts(b, "link set dev bridge0 up\n");
}

/* Empty dir (not dir itself). */
static int empty_dir(const char *dir, struct meshrun_err *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : mr_err_sys(err, "read '%s'", dir);
	while (rc == 0 && (e = readdir(d))) {
		char *p;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		p = xasprintf("%s/%s", dir, e->d_name);
		if (mr_sim_rm_rf(p) < 0)
			rc = mr_err_sys(err, "remove '%s'", p);
		free(p);
	}
	closedir(d);
	return rc;
}

int mr_simf_reboot(struct fault_ctx *f, const char *host, struct meshrun_err *err)
{
	ssize_t hi = mr_sim_cluster_find_host(f->st->cluster, host);
	struct mr_buf batch = MR_BUF_INIT, log = MR_BUF_INIT;
	char *ns, *path = NULL, *tmp = NULL, *logp = NULL;
	size_t seen = 0;
	int rc;

	if (hi < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "no host '%s' in cluster '%s'", host,
				  f->name);
	ns = mr_sim_ns_name(f->name, host);
	mr_sim_kill_netns(ns, 1000);
	boot_batch(f, (size_t)hi, &batch);
	path = xasprintf("%s/%s/reboot.batch", f->state, host);
	rc = mr_write_file(path, batch.p, batch.len, 0644, err);
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "boot state of the network", "ip", "-n", ns, "-batch", path,
				NULL);
	tmp = xasprintf("%s/%s/tmp", f->state, host);
	if (rc == 0)
		rc = empty_dir(tmp, err);
	free(tmp);
	/* the cable-less ports are back in bridge0 too (render.h) */
	tmp = xasprintf("%s/%s/live/bridge-out", f->state, host);
	if (rc == 0)
		rc = empty_dir(tmp, err);
	/* the lines its launchd logs from here on are this boot's */
	logp = xasprintf("%s/%s/launchd.log", f->state, host);
	if (rc == 0 && mr_read_file(logp, 16 << 20, &log, NULL) == 0)
		seen = log.len;
	/* up again: the management link, sshd and its launchd (start) */
	if (rc == 0)
		rc = mr_simf_host(f, host, true, err);
	mr_buf_reset(&log);
	if (rc == 0) {
		printf("meshsim: %s rebooted\n", host);
		if (mr_read_file(logp, 16 << 20, &log, NULL) == 0 && log.len > seen)
			printf("%s", log.p + seen);
	}
	mr_buf_release(&log);
	mr_buf_release(&batch);
	free(logp);
	free(tmp);
	free(path);
	free(ns);
	return rc;
}

int mr_simf_maxmtu(struct fault_ctx *f, const char *port, const char *n_s, struct meshrun_err *err)
{
	const struct mr_sim_cluster *c = f->st->cluster;
	uint64_t n = 0;
	size_t h, ci;
	int side, rc;
	bool off = !strcmp(n_s, "off");
	char *dir, *mark, *key, *line;
	const char *ifn;

	if (!off && mr_parse_u64(n_s, 68, 65535, &n) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected an MTU from 68 to 65535, or off",
				  n_s);
	rc = mr_simf_find_port(f, port, &h, &ci, &side, err);
	if (rc < 0)
		return rc;
	ifn = side ? c->cables[ci].b_if : c->cables[ci].a_if;
	dir = xasprintf("%s/%s/live/maxmtu", f->state, c->hosts[h].name);
	mark = xasprintf("%s/%s", dir, ifn);
	key = xasprintf("maxmtu %s:%s", c->hosts[h].name, ifn);
	line = xasprintf("%s %llu", key, (unsigned long long)n);
	if (off) {
		if (unlink(mark) < 0 && errno != ENOENT)
			rc = mr_err_sys(err, "remove '%s'", mark);
	} else {
		char text[32];
		int len = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)n);

		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			rc = mr_err_sys(err, "mkdir '%s'", dir);
		if (rc == 0)
			rc = mr_write_file(mark, text, (size_t)len, 0644, err);
	}
	if (rc == 0)
		rc = mr_sim_faults_update(f->state, key, off ? NULL : line, err);
	free(line);
	free(key);
	free(mark);
	free(dir);
	return rc;
}
