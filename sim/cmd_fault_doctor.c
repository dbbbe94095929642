/*
 * sim/cmd_fault_doctor.c - the faults that trip one check of `meshconfig
 * doctor` each (doctor.h lists them), reached from `meshsim fault`
 * (cmd_fault.c). Each records its line in the faults file (state.h) while it
 * is on; its off form undoes it from what it kept under the host's folder.
 */
#include "common/compat.h"

#include <ctype.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/num.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "sim/cmd.h"
#include "sim/doctor.h"
#include "sim/fault_impl.h"
#include "sim/live.h"
#include "sim/mac.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/state.h"

static const char *const kinds[] = {
	"noipv4", "ipv4", "bridge", "unbridge", "mtu", "macos", "rdma-nodev", "rdma-dev",
	"firewall", "clock", "diskfull", "diskfree",
};

bool mr_sim_doctor_fault_kind(const char *kind)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(kind, kinds[i]))
			return true;
	return false;
}

/* ---- helpers ------------------------------------------------------------------- */

static int find_host(struct fault_ctx *f, const char *host, size_t *h, struct meshrun_err *err)
{
	ssize_t i = mr_sim_cluster_find_host(f->st->cluster, host);

	if (i < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "no host '%s' in cluster '%s'", host, f->name);
	*h = (size_t)i;
	return 0;
}

/* "h1:en2" -> host and an interface it has (not en0: meshsim's ssh runs there). */
static int host_if(struct fault_ctx *f, const char *arg, size_t *h, char *ifn, size_t n,
		   struct meshrun_err *err)
{
	const char *colon = strchr(arg, ':');
	char *host, *ns;
	int rc;

	if (!colon || !mr_is_ifname(colon + 1) || strlen(colon + 1) >= n)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': expected HOST:INTERFACE", arg);
	if (!strcmp(colon + 1, "en0") || !strcmp(colon + 1, "lo") || !strcmp(colon + 1, "bridge0"))
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s': not on %s (meshsim's own link)", arg,
				  colon + 1);
	host = xstrndup(arg, (size_t)(colon - arg));
	rc = find_host(f, host, h, err);
	free(host);
	if (rc < 0)
		return rc;
	snprintf(ifn, n, "%s", colon + 1);
	ns = mr_sim_ns_name(f->name, f->st->cluster->hosts[*h].name);
	rc = mr_sim_run(NULL, NULL, "interface", "ip", "-n", ns, "link", "show", "dev", ifn, NULL);
	free(ns);
	if (rc < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "'%s': %s has no interface %s", arg,
				  f->st->cluster->hosts[*h].name, ifn);
	return 0;
}

static char *host_path(struct fault_ctx *f, size_t h, const char *rel)
{
	return xasprintf("%s/%s/%s", f->state, f->st->cluster->hosts[h].name, rel);
}

/* Host h's namespace name (malloc'd). */
static char *ns_of(struct fault_ctx *f, size_t h)
{
	return mr_sim_ns_name(f->name, f->st->cluster->hosts[h].name);
}

static int set_fault(struct fault_ctx *f, const char *key, const char *line, struct meshrun_err *err)
{
	return mr_sim_faults_update(f->state, key, line, err);
}

static int mkdirs(const char *path, struct meshrun_err *err)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return mr_err_sys(err, "mkdir '%s'", path);
	return 0;
}

/* A fault on one interface: its host, namespace, the file under live/SUB/ that
 * keeps what the off form restores, and the faults file's key "KIND HOST:IF". */
struct port_fault {
	size_t h;
	char ifn[16];
	char *ns, *dir, *mark, *key;
};

static int port_fault_init(struct fault_ctx *f, const char *arg, const char *kind, const char *sub,
			   struct port_fault *p, struct meshrun_err *err)
{
	char *rel;
	int rc;

	memset(p, 0, sizeof(*p));
	rc = host_if(f, arg, &p->h, p->ifn, sizeof(p->ifn), err);
	if (rc < 0)
		return rc;
	rel = xasprintf("live/%s", sub);
	p->ns = ns_of(f, p->h);
	p->dir = host_path(f, p->h, rel);
	p->mark = xasprintf("%s/%s", p->dir, p->ifn);
	p->key = xasprintf("%s %s", kind, arg);
	free(rel);
	return 0;
}

static void port_fault_release(struct port_fault *p)
{
	free(p->ns);
	free(p->dir);
	free(p->mark);
	free(p->key);
}

/* ---- noipv4 / ipv4 --------------------------------------------------------------- */

static int fault_ipv4(struct fault_ctx *f, const char *arg, bool give, struct meshrun_err *err)
{
	struct mr_buf out = MR_BUF_INIT, kept = MR_BUF_INIT;
	struct mr_strvec lines = MR_STRVEC_INIT;
	struct port_fault p;
	int rc = port_fault_init(f, arg, "noipv4", "noipv4", &p, err);

	if (rc < 0)
		return rc;
	if (!give) {
		if (mr_simf_find(f, p.key, NULL))
			goto out; /* already off: keep what was saved */
		rc = mr_sim_run(&out, err, "addresses", "ip", "-n", p.ns, "-4", "-o", "addr", "show", "dev", p.ifn, NULL);
		/* "3: en2    inet 192.168.0.1/30 brd 192.168.0.3 scope global en2" -> "192.168.0.1/30" */
		if (rc == 0)
			mr_strvec_split(&lines, mr_buf_cstr(&out), '\n', true);
		for (size_t i = 0; rc == 0 && i < lines.nr; i++) {
			const char *a = strstr(lines.v[i], " inet ");
			if (a)
				mr_buf_printf(&kept, "%.*s\n", (int)strcspn(a + 6, " "), a + 6);
		}
		if (rc == 0)
			rc = mkdirs(p.dir, err);
		if (rc == 0)
			rc = mr_write_file(p.mark, kept.p ? kept.p : "", kept.len, 0644, err);
		if (rc == 0)
			rc = mr_sim_run(NULL, err, "flush", "ip", "-n", p.ns, "-4", "addr", "flush", "dev", p.ifn, NULL);
		if (rc == 0)
			rc = set_fault(f, p.key, p.key, err);
		goto out;
	}
	if (mr_read_file(p.mark, 1 << 16, &kept, NULL) == 0) {
		mr_strvec_split(&lines, mr_buf_cstr(&kept), '\n', true);
		for (size_t i = 0; rc == 0 && i < lines.nr; i++)
			rc = mr_sim_run(NULL, err, "address back", "ip", "-n", p.ns, "addr", "replace", lines.v[i],
					"brd", "+", "dev", p.ifn, NULL);
		if (rc == 0 && unlink(p.mark) < 0)
			rc = mr_err_sys(err, "remove '%s'", p.mark);
	}
	if (rc == 0)
		rc = set_fault(f, p.key, NULL, err);
out:
	port_fault_release(&p);
	mr_strvec_release(&lines);
	mr_buf_release(&out);
	mr_buf_release(&kept);
	return rc;
}

/* ---- bridge / unbridge ------------------------------------------------------------ */

static bool bridge_up(struct fault_ctx *f, size_t h)
{
	struct mr_buf out = MR_BUF_INIT;
	char *ns = ns_of(f, h);
	bool up = mr_sim_run(&out, NULL, "bridge0", "ip", "-n", ns, "-o", "link", "show", "dev", "bridge0", NULL) == 0 &&
		  strstr(mr_buf_cstr(&out), ",UP") != NULL;

	free(ns);
	mr_buf_release(&out);
	return up;
}

static int fault_bridge(struct fault_ctx *f, const char *arg, bool in, struct meshrun_err *err)
{
	struct mr_buf was = MR_BUF_INIT;
	struct port_fault p;
	int rc = port_fault_init(f, arg, "bridge", "bridged", &p, err);

	if (rc < 0)
		return rc;
	if (in) {
		/* bridge0's state before, for unbridge */
		const char *st = bridge_up(f, p.h) ? "up\n" : "down\n";
		if (!mr_simf_find(f, p.key, NULL))
			rc = mkdirs(p.dir, err) < 0 ? -1 : mr_write_file(p.mark, st, strlen(st), 0644, err);
		if (rc == 0)
			rc = mr_sim_run(NULL, err, "into bridge0", "ip", "-n", p.ns, "link", "set", "dev", p.ifn,
					"master", "bridge0", NULL);
		if (rc == 0)
			rc = mr_sim_run(NULL, err, "bridge0 up", "ip", "-n", p.ns, "link", "set", "dev", "bridge0",
					"up", NULL);
		if (rc == 0)
			rc = set_fault(f, p.key, p.key, err);
		goto out;
	}
	rc = mr_sim_run(NULL, err, "out of bridge0", "ip", "-n", p.ns, "link", "set", "dev", p.ifn, "nomaster", NULL);
	if (rc == 0 && mr_read_file(p.mark, 64, &was, NULL) == 0 && !strncmp(mr_buf_cstr(&was), "down", 4))
		rc = mr_sim_run(NULL, err, "bridge0 down", "ip", "-n", p.ns, "link", "set", "dev", "bridge0",
				"down", NULL);
	if (rc == 0 && unlink(p.mark) < 0 && errno != ENOENT)
		rc = mr_err_sys(err, "remove '%s'", p.mark);
	if (rc == 0)
		rc = set_fault(f, p.key, NULL, err);
out:
	port_fault_release(&p);
	mr_buf_release(&was);
	return rc;
}

/* ---- mtu ---------------------------------------------------------------------- */

static int fault_mtu(struct fault_ctx *f, const char *arg, const char *val, struct meshrun_err *err)
{
	struct mr_buf out = MR_BUF_INIT, was = MR_BUF_INIT;
	struct port_fault p;
	char *line = NULL, num[16];
	bool off = !strcmp(val, "off");
	uint64_t mtu = 0;
	int rc;

	if (!off && mr_parse_u64(val, 576, 65535, &mtu) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "mtu: '%s': expected 576..65535 or off", val);
	if ((rc = port_fault_init(f, arg, "mtu", "mtu", &p, err)) < 0)
		return rc;
	if (off) {
		if (mr_read_file(p.mark, 64, &was, NULL) == 0) {
			snprintf(num, sizeof(num), "%.*s", (int)strcspn(mr_buf_cstr(&was), "\n"), mr_buf_cstr(&was));
			rc = mr_sim_run(NULL, err, "mtu back", "ip", "-n", p.ns, "link", "set", "dev", p.ifn, "mtu", num, NULL);
			if (rc == 0 && unlink(p.mark) < 0)
				rc = mr_err_sys(err, "remove '%s'", p.mark);
		}
		if (rc == 0)
			rc = set_fault(f, p.key, NULL, err);
		goto out;
	}
	/* keep the first MTU for off */
	if (mr_read_file(p.mark, 64, &was, NULL) < 0) {
		const char *m;
		rc = mr_sim_run(&out, err, "mtu", "ip", "-n", p.ns, "-o", "link", "show", "dev", p.ifn, NULL);
		m = rc == 0 ? strstr(mr_buf_cstr(&out), " mtu ") : NULL;
		if (rc == 0 && !m)
			rc = mr_err_set(err, MESHRUN_E_PARSE, "%s: no mtu in 'ip link' output", arg);
		if (rc == 0) {
			snprintf(num, sizeof(num), "%.*s\n", (int)MR_MIN(strcspn(m + 5, " "), (size_t)8), m + 5);
			rc = mkdirs(p.dir, err) < 0 ? -1 : mr_write_file(p.mark, num, strlen(num), 0644, err);
		}
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)mtu);
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "set mtu", "ip", "-n", p.ns, "link", "set", "dev", p.ifn, "mtu", num, NULL);
	line = xasprintf("%s %s", p.key, num);
	if (rc == 0)
		rc = set_fault(f, p.key, line, err);
out:
	port_fault_release(&p);
	free(line);
	mr_buf_release(&out);
	mr_buf_release(&was);
	return rc;
}

/* ---- macos -------------------------------------------------------------------- */

/* Replace the VER='..', BUILD='..', REL='..' lines of every Mac shim of host h. */
static int set_macos(struct fault_ctx *f, size_t h, const char *ver, const char *build,
		     struct meshrun_err *err)
{
	char rel[32];
	int rc = 0;

	mr_sim_mac_darwin_release(ver, rel, sizeof(rel));
	for (size_t s = 0; rc == 0 && mr_sim_mac_shim_names[s]; s++) {
		char *rp = xasprintf("bin/%s", mr_sim_mac_shim_names[s]), *p = host_path(f, h, rp);
		struct mr_buf in = MR_BUF_INIT, out = MR_BUF_INIT;
		struct mr_strvec lines = MR_STRVEC_INIT;

		rc = mr_read_file(p, 1 << 20, &in, err);
		if (rc == 0)
			mr_strvec_split(&lines, mr_buf_cstr(&in), '\n', false);
		for (size_t i = 0; rc == 0 && i < lines.nr; i++) {
			const char *l = lines.v[i];
			if (!strncmp(l, "VER='", 5))
				mr_buf_printf(&out, "VER='%s'", ver);
			else if (!strncmp(l, "BUILD='", 7))
				mr_buf_printf(&out, "BUILD='%s'", build);
			else if (!strncmp(l, "REL='", 5))
				mr_buf_printf(&out, "REL='%s'", rel);
			else
				mr_buf_puts(&out, l);
			if (i + 1 < lines.nr)
				mr_buf_putc(&out, '\n');
		}
		if (rc == 0)
			rc = mr_write_file(p, out.p, out.len, 0755, err);
		mr_strvec_release(&lines);
		mr_buf_release(&in);
		mr_buf_release(&out);
		free(p);
		free(rp);
	}
	return rc;
}

static bool word_ok(const char *s, const char *extra)
{
	if (!*s || strlen(s) > 15)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
			return false;
	return true;
}

static int fault_macos(struct fault_ctx *f, const struct mr_strvec *a, struct meshrun_err *err)
{
	struct mr_buf was = MR_BUF_INIT, cur = MR_BUF_INIT;
	char *mark = NULL, *key = NULL, *line = NULL, *sw = NULL;
	bool off = a->nr == 3 && !strcmp(a->v[2], "off");
	size_t h = 0;
	int rc;

	if (!off && (a->nr != 4 || !word_ok(a->v[2], ".") || !isdigit((unsigned char)a->v[2][0]) ||
		     !word_ok(a->v[3], "")))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "macos HOST VERSION BUILD (like 26.1 25B78) or macos HOST off");
	if ((rc = find_host(f, a->v[1], &h, err)) < 0)
		return rc;
	mark = host_path(f, h, "live/macos");
	key = xasprintf("macos %s", a->v[1]);
	if (off) {
		if (mr_read_file(mark, 256, &was, NULL) == 0) {
			struct mr_strvec w = MR_STRVEC_INIT;
			mr_strvec_split(&w, mr_buf_cstr(&was), ' ', true);
			if (w.nr >= 2)
				w.v[1][strcspn(w.v[1], "\n")] = '\0';
			rc = w.nr >= 2 ? set_macos(f, h, w.v[0], w.v[1], err)
				       : mr_err_set(err, MESHRUN_E_PARSE, "'%s': malformed", mark);
			mr_strvec_release(&w);
			if (rc == 0 && unlink(mark) < 0)
				rc = mr_err_sys(err, "remove '%s'", mark);
		}
		if (rc == 0)
			rc = set_fault(f, key, NULL, err);
		goto out;
	}
	/* the version the host had, from its own sw_vers shim, kept for off */
	if (mr_read_file(mark, 256, &was, NULL) < 0) {
		const char *v, *b;
		sw = host_path(f, h, "bin/sw_vers");
		rc = mr_read_file(sw, 1 << 16, &cur, err);
		v = rc == 0 ? strstr(mr_buf_cstr(&cur), "\nVER='") : NULL;
		b = rc == 0 ? strstr(mr_buf_cstr(&cur), "\nBUILD='") : NULL;
		if (rc == 0 && (!v || !b))
			rc = mr_err_set(err, MESHRUN_E_PARSE, "'%s': no VER/BUILD lines", sw);
		if (rc == 0) {
			char *t = xasprintf("%.*s %.*s\n", (int)strcspn(v + 6, "'"), v + 6,
					    (int)strcspn(b + 8, "'"), b + 8);
			rc = mr_write_file(mark, t, strlen(t), 0644, err);
			free(t);
		}
	}
	if (rc == 0)
		rc = set_macos(f, h, a->v[2], a->v[3], err);
	line = xasprintf("%s %s %s", key, a->v[2], a->v[3]);
	if (rc == 0)
		rc = set_fault(f, key, line, err);
out:
	mr_buf_release(&was);
	mr_buf_release(&cur);
	free(sw);
	free(line);
	free(key);
	free(mark);
	return rc;
}

/* ---- rdma-nodev / rdma-dev -------------------------------------------------------------- */

static int fault_rdma(struct fault_ctx *f, const char *host, bool devices, struct meshrun_err *err)
{
	const struct mr_sim_host *H;
	struct mr_buf fx = MR_BUF_INIT;
	char *live = NULL, *fix = NULL, *key = NULL;
	size_t h = 0;
	int rc;

	if ((rc = find_host(f, host, &h, err)) < 0)
		return rc;
	H = &f->st->cluster->hosts[h];
	live = host_path(f, h, "live/ibv_devices.txt");
	fix = host_path(f, h, "fixture/ibv_devices.txt");
	key = xasprintf("rdma-nodev %s", host);
	if (!devices) {
		rc = mr_write_file(live, mr_sim_ibv_none, strlen(mr_sim_ibv_none), 0644, err);
	} else {
		/* what `up` wrote (up.c write_ibv): the fixture's where the devices exist */
		bool listed = (H->rdma_live || f->st->pretend_rdma) && mr_read_file(fix, 1 << 20, &fx, NULL) == 0;
		rc = listed ? mr_write_file(live, fx.p ? fx.p : "", fx.len, 0644, err)
			    : mr_write_file(live, mr_sim_ibv_none, strlen(mr_sim_ibv_none), 0644, err);
	}
	if (rc == 0)
		rc = set_fault(f, key, devices ? NULL : key, err);
	mr_buf_release(&fx);
	free(key);
	free(fix);
	free(live);
	return rc;
}

/* ---- firewall ------------------------------------------------------------------ */

static int fault_firewall(struct fault_ctx *f, const char *host, const char *val, struct meshrun_err *err)
{
	struct mr_buf out = MR_BUF_INIT;
	char *key = NULL, *line = NULL, *rule = NULL, *nft = NULL, *ns = NULL;
	bool off = !strcmp(val, "off");
	uint64_t port = 0;
	size_t h = 0;
	int rc;

	if (!off && mr_parse_u64(val, 1, 65535, &port) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "firewall: '%s': expected a port 1..65535 or off", val);
	if ((rc = find_host(f, host, &h, err)) < 0)
		return rc;
	ns = ns_of(f, h);
	key = xasprintf("firewall %s", host);
	if (off) {
		if (mr_simf_find(f, key, NULL))
			rc = mr_sim_run(&out, err, "nft", "ip", "netns", "exec", ns, "nft", "delete table inet meshsim_firewall", NULL);
		if (rc == 0)
			rc = set_fault(f, key, NULL, err);
		goto out;
	}
	nft = mr_sim_which("nft");
	if (!nft) {
		rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED, "firewall refused: needs nft (nftables)");
		goto out;
	}
	/* one blocked port per host: the table is made anew */
	rule = xasprintf("table inet meshsim_firewall { chain input { type filter hook input priority 0; "
			 "tcp dport %llu counter drop; }; }", (unsigned long long)port);
	if (mr_simf_find(f, key, NULL))
		rc = mr_sim_run(NULL, err, "nft", "ip", "netns", "exec", ns, "nft", "delete table inet meshsim_firewall", NULL);
	if (rc == 0 && mr_sim_run(&out, NULL, "nft", "ip", "netns", "exec", ns, "nft", "-c", rule, NULL) < 0)
		rc = mr_err_set(err, MESHRUN_E_UNSUPPORTED, "firewall refused: this kernel's nf_tables cannot do it: %s",
				mr_simf_first_line(&out));
	if (rc == 0)
		rc = mr_sim_run(NULL, err, "nft", "ip", "netns", "exec", ns, "nft", rule, NULL);
	line = xasprintf("%s %llu (incoming TCP dropped)", key, (unsigned long long)port);
	if (rc == 0)
		rc = set_fault(f, key, line, err);
out:
	free(ns);
	mr_buf_release(&out);
	free(nft);
	free(rule);
	free(line);
	free(key);
	return rc;
}

/* ---- clock ---------------------------------------------------------------------- */

static int fault_clock(struct fault_ctx *f, const char *host, const char *val, struct meshrun_err *err)
{
	char *p = NULL, *key = NULL, *line = NULL, num[32];
	int64_t secs;
	size_t h = 0;
	int rc;

	if (mr_parse_i64(val, -315360000, 315360000, &secs) < 0)
		return mr_err_set(err, MESHRUN_E_USAGE, "clock: '%s': expected seconds (30, -90; 0 clears)", val);
	if ((rc = find_host(f, host, &h, err)) < 0)
		return rc;
	p = host_path(f, h, "clock_offset");
	key = xasprintf("clock %s", host);
	snprintf(num, sizeof(num), "%lld\n", (long long)secs);
	if (secs)
		rc = mr_write_file(p, num, strlen(num), 0644, err);
	else if (unlink(p) < 0 && errno != ENOENT)
		rc = mr_err_sys(err, "remove '%s'", p);
	line = xasprintf("%s %+llds", key, (long long)secs);
	if (rc == 0)
		rc = set_fault(f, key, secs ? line : NULL, err);
	free(line);
	free(key);
	free(p);
	return rc;
}

/* ---- diskfull / diskfree ---------------------------------------------------------- */

/*
 * The host's TMPDIR (state.h: <host>/tmp, sshd_config's SetEnv) gets a full
 * 64 KiB tmpfs over it, inside the mount namespace of the host's sshd
 * (login.h), so every ssh session there sees it and nothing else does; under
 * the sshd's root too (-r: it runs chrooted into the host's own tree, whose
 * binds of / would not show a mount made beside them).
 */
static int fault_disk(struct fault_ctx *f, const char *host, bool full, struct meshrun_err *err)
{
	char *tmp = NULL, *key = NULL, pid[24];
	pid_t sp;
	size_t h = 0;
	int rc;

	if ((rc = find_host(f, host, &h, err)) < 0)
		return rc;
	sp = mr_sim_read_sshd_pid(f->state, host);
	if (sp <= 0 || kill(sp, 0) < 0)
		return mr_err_set(err, MESHRUN_E_NOTFOUND, "host '%s': its sshd is not running", host);
	snprintf(pid, sizeof(pid), "%ld", (long)sp);
	tmp = host_path(f, h, "tmp");
	key = xasprintf("diskfull %s", host);
	if (full) {
		if (!mr_simf_find(f, key, NULL))
			rc = mr_sim_run(NULL, err, "full tmpfs", "nsenter", "-t", pid, "-m", "-r", "--", "/bin/sh", "-c",
					"mount -t tmpfs -o size=64k,mode=1777 meshsim-full \"$1\" && "
					"{ cat /dev/zero >\"$1/.meshsim-fill\" 2>/dev/null; true; }",
					"meshsim-diskfull", tmp, NULL);
		if (rc == 0)
			rc = set_fault(f, key, key, err);
	} else {
		if (mr_simf_find(f, key, NULL))
			rc = mr_sim_run(NULL, err, "unmount", "nsenter", "-t", pid, "-m", "-r", "--", "umount", tmp, NULL);
		if (rc == 0)
			rc = set_fault(f, key, NULL, err);
	}
	free(key);
	free(tmp);
	return rc;
}

/* ---- the dispatch ----------------------------------------------------------------- */

int mr_simf_doctor(struct fault_ctx *f, const struct mr_strvec *a, struct meshrun_err *err)
{
	const char *k = a->v[0];
	size_t want = !strcmp(k, "mtu") || !strcmp(k, "firewall") || !strcmp(k, "clock") ? 3
		    : !strcmp(k, "macos") ? (a->nr == 3 ? 3 : 4) : 2;

	if (a->nr != want)
		return mr_err_set(err, MESHRUN_E_USAGE, "'%s' takes %zu argument%s (meshsim fault --help)", k,
				  want - 1, want == 2 ? "" : "s");
	if (!strcmp(k, "noipv4") || !strcmp(k, "ipv4"))
		return fault_ipv4(f, a->v[1], k[0] == 'i', err);
	if (!strcmp(k, "bridge") || !strcmp(k, "unbridge"))
		return fault_bridge(f, a->v[1], k[0] == 'b', err);
	if (!strcmp(k, "mtu"))
		return fault_mtu(f, a->v[1], a->v[2], err);
	if (!strcmp(k, "macos"))
		return fault_macos(f, a, err);
	if (!strcmp(k, "rdma-nodev") || !strcmp(k, "rdma-dev"))
		return fault_rdma(f, a->v[1], !strcmp(k, "rdma-dev"), err);
	if (!strcmp(k, "firewall"))
		return fault_firewall(f, a->v[1], a->v[2], err);
	if (!strcmp(k, "clock"))
		return fault_clock(f, a->v[1], a->v[2], err);
	return fault_disk(f, a->v[1], !strcmp(k, "diskfull"), err);
}
