/*
 * up.c - `meshsim up`: a fixture folder or topology spec -> a running cluster.
 *
 * Order (each phase runs its per-host work as parallel processes):
 *   1. read and check the fixture (nothing is created before this succeeds);
 *   2. state dir, state.json (from here on a failure tears everything down),
 *      per-host files: fixture copies, shims (render.h, mac.h), sshd_config;
 *      ssh_config; the passwd copy with zsh as root's shell;
 *   3. ssh-keygen: one user key, one ed25519 host key per host;
 *   4. `ip -batch root.batch`: namespaces, management bridge and veths, one veth
 *      pair per cable created directly in the two hosts' namespaces;
 *   5. per host, inside its namespace: IPv6 off (no background chatter on the
 *      cables, so their counters show only real traffic), `ip -batch net.batch`:
 *      lo, en0 address, bridge0 over the Thunderbolt interfaces;
 *   6. known_hosts and authorized_keys, then one sshd per host, each in a mount
 *      and UTS namespace of its own: root logs in with zsh, `hostname` is the
 *      host's name, /Library is the host's own, its launchd has booted (login.h);
 *      then every host answers a connect over the management bridge;
 *   7. soft-RoCE where the kernel has rdma_rxe; then what ibv_devices answers
 *      (live.h: the fixture's devices only where they exist, or --pretend-rdma).
 */
#include "common/progress.h"
#include "common/compat.h"

#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "sim/cmd.h"
#include "sim/cmdopts.h"
#include "sim/doctor.h"
#include "sim/launchd.h"
#include "sim/live.h"
#include "sim/login.h"
#include "sim/mac.h"
#include "sim/model.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/render.h"
#include "sim/state.h"
#include "sim/subnet.h"
#include "fixture/fixture.h"

#define MAXPAR 8
#define JOB_TIMEOUT_MS 60000

struct up {
	const char *name;
	char *state;                  /* state dir */
	struct mr_sim_state st;       /* st.cluster points at cl */
	struct mr_sim_cluster *cl;
	char **ns;                    /* per host namespace */
	char (*addr)[16];             /* per host management address */
	char **hdir;                  /* per host state folder */
	bool made;                    /* something was created: tear down on failure */
	bool claimed;                 /* the subnet is claimed (subnet.h) until up ends */
	struct mr_progress *pg;       /* the step line: hosts done / total per phase */
};

/*
 * The kernel's ARP table is one for all network namespaces: gc_thresh3 (1024 by
 * default) counts the entries of every namespace, and past it a new neighbour
 * fails with ENOBUFS ("neighbor table overflow"): at 256 hosts the cable ends
 * and management links alone pass it and the ping check after setup fails at
 * random. For a cluster that needs more than half the default (some 64 hosts
 * and up), raise the limits to its need on top of the default, never lower them
 * (other clusters may be up) nor restore them; a failure is only a warning.
 */
static void raise_neigh_limits(size_t nhosts, size_t ncables)
{
	static const char *const knob[] = { "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
					     "/proc/sys/net/ipv4/neigh/default/gc_thresh2" };
	unsigned long need = 1024 + 4 * (unsigned long)(nhosts + ncables);

	if (need - 1024 <= 512)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(knob); i++, need /= 2) {
		unsigned long cur = 0;
		FILE *f = fopen(knob[i], "r");
		bool got = f && fscanf(f, "%lu", &cur) == 1;

		if (f)
			fclose(f);
		if (got && cur >= need)
			continue;
		f = fopen(knob[i], "w");
		got = f && fprintf(f, "%lu\n", need) > 0;
		if (f && fclose(f) != 0)
			got = false;
		if (!got) {
			mr_warn("cannot raise %s to %lu (ARP table for %zu hosts): %s", knob[i], need,
				nhosts, strerror(errno));
			return;
		}
		mr_info("raised %s from %lu to %lu (one ARP table for all namespaces)", knob[i], cur,
			need);
	}
}


static int mkdir_p(const char *path, unsigned mode, struct meshrun_err *err)
{
	char *p = xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			int rc = mr_err_sys(err, "mkdir '%s'", p);
			free(p);
			return rc;
		}
		*s = '/';
	}
	free(p);
	if (mkdir(path, (mode_t)mode) < 0 && errno != EEXIST)
		return mr_err_sys(err, "mkdir '%s'", path);
	return 0;
}

static int write_text(const char *path, const char *text, size_t len, unsigned mode,
		      struct meshrun_err *err)
{
	return mr_write_file(path, text ? text : "", text ? len : 0, mode, err);
}

static int write_host_files(struct up *u, size_t i, struct meshrun_err *err)
{
	const struct mr_sim_host *h = &u->cl->hosts[i];
	const char *d = u->hdir[i];
	struct mr_buf b = MR_BUF_INIT;
	char *p = NULL;
	int rc;

	p = xasprintf("%s/bin", d);
	rc = mkdir_p(p, 0755, err);
	free(p);
	p = xasprintf("%s/fixture", d);
	if (rc == 0)
		rc = mkdir_p(p, 0755, err);
	free(p);
	p = xasprintf("%s/live/unplugged", d);
	if (rc == 0)
		rc = mkdir_p(p, 0755, err);
	free(p);
	/* the host's TMPDIR (sshd_config SetEnv): sticky and open to all, as /tmp */
	p = xasprintf("%s/tmp", d);
	if (rc == 0 && (rc = mkdir_p(p, 01777, err)) == 0 && chmod(p, 01777) < 0)
		rc = mr_err_sys(err, "chmod '%s'", p);
	free(p);
	if (rc < 0)
		return rc;

	p = xasprintf("%s/fixture/system_profiler.json", d);
	rc = write_text(p, h->sp_json, h->sp_len, 0644, err);
	free(p);
	p = xasprintf("%s/fixture/networksetup.txt", d);
	if (rc == 0)
		rc = write_text(p, h->hwports, h->hwports ? strlen(h->hwports) : 0, 0644, err);
	free(p);
	p = xasprintf("%s/fixture/ibv_devices.txt", d);
	if (rc == 0)
		rc = h->ibv ? write_text(p, h->ibv, strlen(h->ibv), 0644, err)
			    : write_text(p, mr_sim_ibv_none, strlen(mr_sim_ibv_none), 0644, err);
	free(p);
	/* no RDMA until soft-RoCE made the devices (write_ibv) */
	p = xasprintf("%s/live/ibv_devices.txt", d);
	if (rc == 0)
		rc = write_text(p, mr_sim_ibv_none, strlen(mr_sim_ibv_none), 0644, err);
	free(p);
	for (size_t s = 0; rc == 0 && mr_sim_shim_names[s]; s++) {
		mr_buf_reset(&b);
		if (mr_sim_render_shim(mr_sim_shim_names[s], h->name, d, &b) < 0) {
			rc = mr_err_set(err, MESHRUN_E_INVAL, "shim '%s' of host '%s'",
					mr_sim_shim_names[s], h->name);
			break;
		}
		p = xasprintf("%s/bin/%s", d, mr_sim_shim_names[s]);
		rc = write_text(p, b.p, b.len, 0755, err);
		free(p);
	}
	if (rc == 0) {
		struct mr_sim_mac mac;
		rc = mr_sim_mac_of_host(u->cl, i, &mac, err);
		for (size_t s = 0; rc == 0 && mr_sim_mac_shim_names[s]; s++) {
			mr_buf_reset(&b);
			if (mr_sim_render_mac_shim(mr_sim_mac_shim_names[s], h->name, d, &mac, &b) < 0) {
				rc = mr_err_set(err, MESHRUN_E_INVAL, "shim '%s' of host '%s'",
						mr_sim_mac_shim_names[s], h->name);
				break;
			}
			p = xasprintf("%s/bin/%s", d, mr_sim_mac_shim_names[s]);
			rc = write_text(p, b.p, b.len, 0755, err);
			free(p);
		}
	}
	for (size_t s = 0; rc == 0 && mr_sim_doctor_shim_names[s]; s++) {
		mr_buf_reset(&b);
		if (mr_sim_render_doctor_shim(mr_sim_doctor_shim_names[s], h->name, d, &b) < 0) {
			rc = mr_err_set(err, MESHRUN_E_INVAL, "shim '%s' of host '%s'",
					mr_sim_doctor_shim_names[s], h->name);
			break;
		}
		p = xasprintf("%s/bin/%s", d, mr_sim_doctor_shim_names[s]);
		rc = write_text(p, b.p, b.len, 0755, err);
		free(p);
	}
	if (rc == 0)
		rc = mr_launchd_host_files(h->name, d, err); /* /Library, launchctl */
	if (rc == 0 && h->nosudo) {
		p = xasprintf("%s/nosudo", d);
		rc = write_text(p, "", 0, 0644, err);
		free(p);
	}
	mr_buf_reset(&b);
	if (rc == 0) {
		/* libmeshrun's jaccl names the flag when it finds no device */
		mr_sim_render_sshd_config(u->state, d, u->addr[i],
					  u->st.pretend_rdma ? "MESHSIM_PRETEND_RDMA=1" : NULL, &b);
		p = xasprintf("%s/sshd_config", d);
		rc = write_text(p, b.p, b.len, 0644, err);
		free(p);
	}
	/* the namespace's own batch: loopback, en0, bridge0 over the cables */
	mr_buf_reset(&b);
	if (rc == 0) {
		mr_buf_printf(&b, "link set lo up\naddr add %s/%u dev en0\nlink set en0 up\n"
			      "link add bridge0 type bridge stp_state 1\n", u->addr[i],
			      mr_sim_prefix_len(u->cl->nhosts));
		for (size_t c = 0; c < u->cl->ncables; c++) {
			const struct mr_sim_cable *k = &u->cl->cables[c];
			const char *ifn = k->a == i ? k->a_if : k->b == i ? k->b_if : NULL;
			if (ifn)
				mr_buf_printf(&b, "link set %s master bridge0\nlink set %s up\n", ifn, ifn);
		}
		mr_buf_puts(&b, "link set bridge0 up\n");
		p = xasprintf("%s/net.batch", d);
		rc = write_text(p, b.p, b.len, 0644, err);
		free(p);
	}
	mr_buf_release(&b);
	return rc;
}

static int write_cluster_files(struct up *u, struct meshrun_err *err)
{
	struct mr_buf b = MR_BUF_INIT;
	char *p;
	int rc;

	if (mr_sim_state_emit(&u->st, &b) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "state.json");
	p = xasprintf("%s/state.json", u->state);
	rc = write_text(p, b.p, b.len, 0644, err);
	free(p);
	if (rc == 0)
		rc = mr_sim_login_write_passwd(u->state, err); /* root's shell: zsh, as on a Mac */
	for (size_t i = 0; rc == 0 && i < u->cl->nhosts; i++)
		rc = write_host_files(u, i, err);
	if (rc == 0)
		rc = mr_sim_live_refresh(u->state, &u->st, err);
	mr_buf_reset(&b);
	mr_buf_printf(&b, "# meshsim cluster '%s' (generated by meshsim up)\n"
		      "# use: ssh -F %s/ssh_config HOST, or MESHRUN_SSH_CONFIG=%s/ssh_config\n\n",
		      u->name, u->state, u->state);
	for (size_t i = 0; i < u->cl->nhosts; i++)
		mr_sim_render_ssh_host(u->state, u->cl->hosts[i].name, u->addr[i], &b);
	p = xasprintf("%s/ssh_config", u->state);
	if (rc == 0)
		rc = write_text(p, b.p, b.len, 0644, err);
	free(p);
	/* root namespace batch: namespaces, management bridge and links, cables */
	mr_buf_reset(&b);
	for (size_t i = 0; i < u->cl->nhosts; i++)
		mr_buf_printf(&b, "netns add %s\n", u->ns[i]);
	{
		char br_addr[16];
		char *br = mr_sim_bridge_name(u->name);
		mr_sim_bridge_addr(u->st.subnet, br_addr, sizeof(br_addr));
		mr_buf_printf(&b, "link add %s type bridge\naddr add %s/%u dev %s\nlink set %s up\n",
			      br, br_addr, mr_sim_prefix_len(u->cl->nhosts), br, br);
		for (size_t i = 0; i < u->cl->nhosts; i++) {
			char *m = mr_sim_mgmt_link(u->name, i);
			mr_buf_printf(&b, "link add %s type veth peer name en0 netns %s\n"
				      "link set %s master %s\nlink set %s up\n", m, u->ns[i], m, br, m);
			free(m);
		}
		free(br);
	}
	for (size_t c = 0; c < u->cl->ncables; c++) {
		const struct mr_sim_cable *k = &u->cl->cables[c];
		mr_buf_printf(&b, "link add %s netns %s type veth peer name %s netns %s\n", k->a_if,
			      u->ns[k->a], k->b_if, u->ns[k->b]);
	}
	p = xasprintf("%s/root.batch", u->state);
	if (rc == 0)
		rc = write_text(p, b.p, b.len, 0644, err);
	free(p);
	mr_buf_release(&b);
	return rc;
}

/* A phase's jobs and the hosts they work for, for the progress line. */
struct phase {
	struct up *u;
	struct mr_sim_job *jobs;
	const size_t *host; /* per job: its host index, or SIZE_MAX; NULL: job i is host i */
	size_t *left;       /* per host: its jobs not ended yet */
	size_t done;        /* hosts with nothing left */
};

/* A job ended: its host is done once all of its jobs are. */
static void phase_job_done(struct mr_sim_job *j, void *ctx)
{
	struct phase *ph = ctx;
	size_t i = (size_t)(j - ph->jobs), h = ph->host ? ph->host[i] : i;

	if (h == SIZE_MAX || !ph->left[h] || --ph->left[h])
		return;
	ph->done++;
	mr_progress_update(ph->u->pg, ph->done, ph->u->cl->hosts[h].name);
}

/* Run (and release) a phase's jobs; host as in struct phase. */
static int run_phase(struct up *u, struct mr_sim_job *jobs, size_t n, const size_t *host,
		     struct meshrun_err *err)
{
	size_t nh = u->cl->nhosts;
	struct phase ph = { u, jobs, host, xcalloc(nh ? nh : 1, sizeof(*ph.left)), 0 };
	int rc;

	for (size_t i = 0; i < n; i++) {
		size_t h = host ? host[i] : i;
		if (h < nh)
			ph.left[h]++;
	}
	for (size_t h = 0; h < nh; h++)
		ph.done += ph.left[h] == 0; /* nothing to do here in this phase */
	if (u->pg && ph.done)
		mr_progress_update(u->pg, ph.done, NULL);
	rc = mr_sim_run_jobs_cb(jobs, n, MAXPAR, JOB_TIMEOUT_MS, 0, u->pg ? phase_job_done : NULL,
				&ph, err);
	for (size_t i = 0; i < n; i++)
		mr_sim_job_release(&jobs[i]);
	free(ph.left);
	return rc;
}

static int make_keys(struct up *u, struct meshrun_err *err)
{
	size_t n = u->cl->nhosts + 1;
	struct mr_sim_job *jobs = xcalloc(n, sizeof(*jobs));
	size_t *host = xcalloc(n, sizeof(*host));
	char *p = xasprintf("%s/id_ed25519", u->state);
	int rc;

	mr_sim_job_set(&jobs[0], "user key", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
		       "meshsim", "-f", p, NULL);
	free(p);
	host[0] = SIZE_MAX; /* the user key belongs to no host */
	for (size_t i = 0; i < u->cl->nhosts; i++) {
		char *label = xasprintf("host '%s': host key", u->cl->hosts[i].name);
		host[i + 1] = i;
		p = xasprintf("%s/ssh_host_ed25519_key", u->hdir[i]);
		mr_sim_job_set(&jobs[i + 1], label, "ssh-keygen", "-q", "-t", "ed25519", "-N", "",
			       "-C", u->cl->hosts[i].name, "-f", p, NULL);
		free(p);
		free(label);
	}
	rc = run_phase(u, jobs, n, host, err);
	free(host);
	free(jobs);
	return rc;
}

static int make_network(struct up *u, struct meshrun_err *err)
{
	size_t n = u->cl->nhosts;
	struct mr_sim_job *jobs;
	char *p = xasprintf("%s/root.batch", u->state);
	int rc;

	rc = mr_sim_run(NULL, err, "namespaces and links (root.batch)", "ip", "-batch", p, NULL);
	free(p);
	if (rc < 0)
		return rc;
	jobs = xcalloc(n, sizeof(*jobs));
	for (size_t i = 0; i < n; i++) {
		char *label = xasprintf("host '%s': network (%s/net.batch)", u->cl->hosts[i].name,
					u->hdir[i]);
		char *script = xasprintf("echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && "
					 "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && "
					 "exec ip -batch '%s/net.batch'", u->hdir[i]);
		mr_sim_job_set(&jobs[i], label, "ip", "netns", "exec", u->ns[i], "/bin/sh", "-c",
			       script, NULL);
		free(script);
		free(label);
	}
	rc = run_phase(u, jobs, n, NULL, err);
	free(jobs);
	return rc;
}

static int write_keys(struct up *u, struct meshrun_err *err)
{
	struct mr_buf kh = MR_BUF_INIT, pub = MR_BUF_INIT;
	char *p;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < u->cl->nhosts; i++) {
		mr_buf_reset(&pub);
		p = xasprintf("%s/ssh_host_ed25519_key.pub", u->hdir[i]);
		rc = mr_read_file(p, 64 << 10, &pub, err);
		if (rc == 0 && mr_sim_render_known_host(u->cl->hosts[i].name, u->addr[i],
							mr_buf_cstr(&pub), &kh) < 0)
			rc = mr_err_set(err, MESHRUN_E_PARSE, "'%s': not a public key", p);
		free(p);
	}
	p = xasprintf("%s/known_hosts", u->state);
	if (rc == 0)
		rc = write_text(p, kh.p, kh.len, 0644, err);
	free(p);
	mr_buf_reset(&pub);
	p = xasprintf("%s/id_ed25519.pub", u->state);
	if (rc == 0)
		rc = mr_read_file(p, 64 << 10, &pub, err);
	free(p);
	p = xasprintf("%s/authorized_keys", u->state);
	if (rc == 0)
		rc = write_text(p, pub.p, pub.len, 0644, err);
	free(p);
	mr_buf_release(&kh);
	mr_buf_release(&pub);
	return rc;
}

static int start_sshds(struct up *u, struct meshrun_err *err)
{
	size_t n = u->cl->nhosts;
	struct mr_sim_job *jobs = xcalloc(n, sizeof(*jobs));
	char *sshd = mr_sim_which("sshd");
	int64_t deadline;
	int rc;

	if (!sshd) {
		free(jobs);
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "sshd not found (install openssh-server)");
	}
	/* sshd refuses to start without its privilege separation folder */
	if (mkdir("/run/sshd", 0755) < 0 && errno != EEXIST) {
		free(jobs);
		free(sshd);
		return mr_err_sys(err, "mkdir '/run/sshd'");
	}
	for (size_t i = 0; i < n; i++) {
		char *label = xasprintf("host '%s': start sshd", u->cl->hosts[i].name);
		/* its own mount and UTS namespaces: zsh login shell, hostname (login.h) */
		mr_sim_login_sshd_job(&jobs[i], label, u->ns[i], u->cl->hosts[i].name, u->state,
				      u->hdir[i], sshd);
		free(label);
	}
	free(sshd);
	rc = run_phase(u, jobs, n, NULL, err);
	free(jobs);
	if (rc < 0)
		return rc;
	/* the daemon writes its pid file just after the parent returned */
	deadline = mr_now_ms() + 10000;
	for (size_t i = 0; i < n; i++) {
		char *p = xasprintf("%s/sshd.pid", u->hdir[i]);
		struct stat st;
		while ((stat(p, &st) < 0 || st.st_size == 0) && mr_ms_left(deadline) > 0)
			mr_sleep_ms(5);
		if (stat(p, &st) < 0 || st.st_size == 0)
			rc = mr_err_set(err, MESHRUN_E_TIMEOUT,
					"host '%s': sshd wrote no pid file '%s' (see %s/sshd.log)",
					u->cl->hosts[i].name, p, u->hdir[i]);
		free(p);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Every host answers over the management bridge before `up` says the cluster
 * is up: a first ssh (meshconfig's, a test's) must not be the one to find a
 * host that cannot be reached. */
static int check_reach(struct up *u, struct meshrun_err *err)
{
	const char **names = xcalloc(u->cl->nhosts, sizeof(*names));
	int rc;

	for (size_t i = 0; i < u->cl->nhosts; i++)
		names[i] = u->cl->hosts[i].name;
	rc = mr_sim_wait_reach(names, (const char (*)[16])u->addr, u->cl->nhosts,
				    MR_SIM_REACH_TIMEOUT_MS, err);
	free(names);
	return rc;
}

static bool rxe_available(void)
{
	struct stat st;
	char *modprobe;
	bool ok;

	if (stat("/sys/module/rdma_rxe", &st) == 0)
		return true;
	modprobe = mr_sim_which("modprobe");
	if (!modprobe)
		return false;
	ok = mr_sim_run(NULL, NULL, "modprobe rdma_rxe", modprobe, "-q", "rdma_rxe", NULL) == 0;
	free(modprobe);
	return ok;
}

static int make_rxe(struct up *u, struct meshrun_err *err)
{
	struct mr_sim_job *jobs = NULL;
	size_t *host = NULL, n = 0;
	int rc;

	if (!rxe_available()) {
		u->st.rxe_note = xstrdup("skipped: this kernel has no rdma_rxe module "
					 "(RDMA tests run in the rxe guest, see shared/rxe-guest)");
		return 0;
	}
	jobs = xcalloc(2 * u->cl->ncables + 1, sizeof(*jobs));
	host = xcalloc(2 * u->cl->ncables + 1, sizeof(*host));
	for (size_t c = 0; c < u->cl->ncables; c++) {
		const struct mr_sim_cable *k = &u->cl->cables[c];
		for (int side = 0; side < 2; side++) {
			size_t h = side ? k->b : k->a;
			const char *ifn = side ? k->b_if : k->a_if;
			char *dev = xasprintf("rdma_%s", ifn);
			bool listed = false;
			for (size_t r = 0; r < u->cl->hosts[h].rdma.nr; r++)
				listed |= !strcmp(u->cl->hosts[h].rdma.v[r], dev);
			if (listed) {
				char *label = xasprintf("host '%s': soft-RoCE %s", u->cl->hosts[h].name, dev);
				host[n] = h;
				mr_sim_job_set(&jobs[n++], label, "ip", "netns", "exec", u->ns[h], "rdma",
					       "link", "add", dev, "type", "rxe", "netdev", ifn, NULL);
				free(label);
			}
			free(dev);
		}
	}
	rc = run_phase(u, jobs, n, host, err);
	free(host);
	free(jobs);
	if (rc == 0)
		u->st.rxe = true;
	for (size_t i = 0; rc == 0 && i < u->cl->nhosts; i++)
		u->cl->hosts[i].rdma_live = u->cl->hosts[i].rdma.nr > 0;
	return rc;
}

/* What ibv_devices answers on each host: its fixture's devices where they exist. */
static int write_ibv(struct up *u, struct meshrun_err *err)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < u->cl->nhosts; i++) {
		const struct mr_sim_host *h = &u->cl->hosts[i];
		const char *text = (h->rdma_live || u->st.pretend_rdma) && h->ibv ? h->ibv : mr_sim_ibv_none;
		char *p = xasprintf("%s/live/ibv_devices.txt", u->hdir[i]);
		rc = write_text(p, text, strlen(text), 0644, err);
		free(p);
	}
	return rc;
}

/* "h1, h2, h3" (at most 8 names, then "and N more"), or "every host (N)". */
static void host_list(struct mr_buf *b, const struct mr_strvec *v, size_t nhosts)
{
	if (v->nr == nhosts && nhosts > 1) {
		mr_buf_printf(b, "every host (%zu)", nhosts);
		return;
	}
	for (size_t i = 0; i < v->nr && i < 8; i++)
		mr_buf_printf(b, "%s%s", i ? ", " : "", v->v[i]);
	if (v->nr > 8)
		mr_buf_printf(b, " and %zu more", v->nr - 8);
}

/* One line: the hosts where ibv_devices lists nothing, and why. */
static void say_rdma(const struct up *u)
{
	struct mr_strvec norxe = MR_STRVEC_INIT, nofix = MR_STRVEC_INIT;
	struct mr_buf b = MR_BUF_INIT;

	if (u->st.pretend_rdma) {
		printf("meshsim: --pretend-rdma: ibv_devices lists the fixture's RDMA devices, but %s"
		       " (topology verdicts only: a jaccl job fails)\n",
		       u->st.rxe ? "only those of the cables exist" : "none exist");
		return;
	}
	for (size_t i = 0; i < u->cl->nhosts; i++) {
		const struct mr_sim_host *h = &u->cl->hosts[i];
		if (!h->rdma.nr)
			mr_strvec_push(&nofix, h->name);
		else if (!h->rdma_live)
			mr_strvec_push(&norxe, h->name);
	}
	if (norxe.nr) {
		mr_buf_puts(&b, "no RDMA on ");
		host_list(&b, &norxe, u->cl->nhosts);
		mr_buf_printf(&b, ": %s, so ibv_devices lists no device there (--pretend-rdma lists the fixture's anyway)",
			      u->st.rxe ? "no soft-RoCE device was made"
					: "this kernel has no rdma_rxe module for soft-RoCE (RDMA tests run in the rxe guest, see shared/rxe-guest)");
	}
	if (nofix.nr) {
		mr_buf_puts(&b, norxe.nr ? "; none on " : "no RDMA on ");
		host_list(&b, &nofix, u->cl->nhosts);
		mr_buf_puts(&b, ": its fixture's ibv_devices lists no device");
	}
	if (b.len)
		printf("meshsim: %s\n", mr_buf_cstr(&b));
	mr_buf_release(&b);
	mr_strvec_release(&norxe);
	mr_strvec_release(&nofix);
}

static int load_source(struct up *u, const char *src, struct mr_strvec *notes,
		       struct meshrun_err *err)
{
	struct stat st;

	if (stat(src, &st) == 0 && S_ISDIR(st.st_mode))
		return mr_sim_cluster_load(src, &u->cl, notes, err);
	if (mr_sim_is_topology_spec(src)) {
		struct mr_fixture_set *g = NULL;
		char *dir;
		int rc = mr_fixture_gen(src, &g, err);
		if (rc < 0)
			return rc;
		dir = xasprintf("%s/generated", u->state);
		u->made = true;
		rc = mkdir_p(u->state, 0755, err);
		if (rc == 0)
			rc = mr_fixture_gen_write(g, dir, err);
		mr_fixture_set_free(g);
		if (rc == 0)
			rc = mr_sim_cluster_load(dir, &u->cl, notes, err);
		free(dir);
		return rc;
	}
	return mr_err_set(err, MESHRUN_E_USAGE,
			  "'%s': neither a fixture folder nor a topology (mesh:N, ring:N, ...)", src);
}

/* One step of the bring-up under the progress line (common/progress.h). */
static int up_step(struct mr_progress *pg, const char *what, size_t nhosts,
		   int (*fn)(struct up *u, struct meshrun_err *err), struct up *u,
		   struct meshrun_err *err)
{
	int rc;

	mr_progress_step(pg, what, nhosts);
	rc = fn(u, err);
	if (rc == 0)
		mr_progress_step_done(pg);
	else
		mr_progress_clear(pg);
	return rc;
}

static int up_run(struct up *u, const char *src, struct meshrun_err *err)
{
	struct mr_strvec notes = MR_STRVEC_INIT;
	struct mr_progress pg;
	int64_t t0 = mr_now_ms();
	int rc;

	u->state = mr_sim_state_dir(u->name);
	if (!mr_is_shell_safe(u->state))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "state folder '%s' must be made of [A-Za-z0-9_@%%+=:,./-]", u->state);
	if (mr_sim_cluster_exists(u->name))
		return mr_err_set(err, MESHRUN_E_INVAL,
				  "cluster '%s' is up or left over (run 'meshsim down %s' first)",
				  u->name, u->name);
	rc = load_source(u, src, &notes, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < notes.nr; i++)
		mr_warn("%s", notes.v[i]);
	raise_neigh_limits(u->cl->nhosts, u->cl->ncables);
	u->st.name = xstrdup(u->name);
	u->st.fixture = xstrdup(src);
	u->st.cluster = u->cl;
	rc = mr_sim_subnet_pick(u->name, u->cl->nhosts, &u->st.subnet, err);
	if (rc < 0)
		goto out;
	u->claimed = true;
	u->ns = xcalloc(u->cl->nhosts, sizeof(*u->ns));
	u->hdir = xcalloc(u->cl->nhosts, sizeof(*u->hdir));
	u->addr = xcalloc(u->cl->nhosts, sizeof(*u->addr));
	for (size_t i = 0; i < u->cl->nhosts; i++) {
		u->ns[i] = mr_sim_ns_name(u->name, u->cl->hosts[i].name);
		u->hdir[i] = xasprintf("%s/%s", u->state, u->cl->hosts[i].name);
		mr_sim_host_addr(u->st.subnet, i, u->addr[i], sizeof(u->addr[i]));
	}
	u->made = true;
	rc = mkdir_p(u->state, 0755, err);
	mr_progress_init(&pg, stderr, "meshsim up", 7, -1);
	u->pg = &pg;
	if (rc == 0)
		rc = up_step(&pg, "state files", 0, write_cluster_files, u, err);
	if (rc == 0)
		rc = up_step(&pg, "ssh keys", u->cl->nhosts, make_keys, u, err);
	if (rc == 0)
		rc = up_step(&pg, "namespaces and cables", u->cl->nhosts, make_network, u, err);
	if (rc == 0)
		rc = up_step(&pg, "known_hosts", 0, write_keys, u, err);
	if (rc == 0)
		rc = up_step(&pg, "sshd", u->cl->nhosts, start_sshds, u, err);
	if (rc == 0)
		rc = up_step(&pg, "reach", 0, check_reach, u, err);
	if (rc == 0)
		rc = up_step(&pg, "soft-RoCE", u->cl->nhosts, make_rxe, u, err);
	if (rc == 0)
		rc = write_ibv(u, err);
	mr_progress_finish(&pg);
	u->pg = NULL;
	if (rc == 0) {
		/* record the soft-RoCE outcome */
		struct mr_buf b = MR_BUF_INIT;
		char *p = xasprintf("%s/state.json", u->state);
		mr_sim_state_emit(&u->st, &b);
		rc = write_text(p, b.p, b.len, 0644, err);
		free(p);
		mr_buf_release(&b);
	}
	if (rc == 0) {
		printf("meshsim: cluster '%s' is up: %zu hosts, %zu cables, management 10.230.%u.0/%u, %.2f s\n",
		       u->name, u->cl->nhosts, u->cl->ncables, u->st.subnet,
		       mr_sim_prefix_len(u->cl->nhosts),
		       (double)(mr_now_ms() - t0) / 1000.0);
		say_rdma(u);
		printf("  export MESHRUN_SSH_CONFIG=%s/ssh_config\n"
		       "  ssh -F %s/ssh_config %s true\n"
		       "  meshsim status %s; meshsim exec --name %s %s -- ip -br addr; meshsim down %s\n",
		       u->state, u->state, u->cl->hosts[0].name, u->name, u->name,
		       u->cl->hosts[0].name, u->name);
	}
out:
	if (u->claimed) {
		mr_sim_subnet_unclaim(u->st.subnet);
		if (mr_sim_prefix_len(u->cl->nhosts) == 23)
			mr_sim_subnet_unclaim(u->st.subnet + 1);
	}
	mr_strvec_release(&notes);
	return rc;
}

static void up_release(struct up *u)
{
	for (size_t i = 0; u->cl && i < u->cl->nhosts; i++) {
		if (u->ns)
			free(u->ns[i]);
		if (u->hdir)
			free(u->hdir[i]);
	}
	free(u->ns);
	free(u->hdir);
	free(u->addr);
	free(u->st.name);
	free(u->st.fixture);
	free(u->st.rxe_note);
	mr_sim_cluster_free(u->cl);
	free(u->state);
}

int mr_sim_cmd_up(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	const struct mr_optdoc_cmd *doc = mr_sim_sub_doc(MR_SIM_UP);
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name;
	struct up u;
	int rc, code = 0;
	struct mr_opt opts[MR_SIM_MAX_OPTS];

	memset(&u, 0, sizeof(u));
	mr_sim_sub_opts(MR_SIM_UP, &a, opts);
	rc = mr_opt_parse(opts, argc, argv, 0, NULL, &rest, &err);
	name = a.name;
	if (rc == MR_OPT_VERSION) {
		printf("meshsim %s\n", MESHRUN_VERSION);
		goto out;
	}
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, doc->usage, opts, doc->trailer);
		goto out;
	}
	if (rc == 0 && rest.nr != 1)
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "expected one FIXTURE_DIR or TOPOLOGY");
	if (rc == 0)
		rc = mr_sim_check_name(name, &err);
	if (rc < 0) {
		mr_error("meshsim up: %s", err.msg);
		mr_error("meshsim up: try 'meshsim up --help'");
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	if (geteuid() != 0) {
		mr_error("meshsim up: needs root (network namespaces, veth links, sshd)");
		code = MR_SIM_EXIT_FAIL;
		goto out;
	}
	u.name = name;
	u.st.pretend_rdma = a.pretend_rdma;
	rc = up_run(&u, rest.v[0], &err);
	if (rc < 0) {
		mr_error("meshsim up: %s", err.msg);
		if (u.made) {
			struct meshrun_err terr = MESHRUN_ERR_INIT;
			if (mr_sim_teardown(name, NULL, &terr) < 0)
				mr_error("meshsim up: cleaning up: %s (try 'meshsim down %s')",
					 terr.msg, name);
		}
		code = rc == MESHRUN_E_USAGE ? MR_SIM_EXIT_USAGE : MR_SIM_EXIT_FAIL;
	}
out:
	up_release(&u);
	mr_strvec_release(&rest);
	return code;
}
